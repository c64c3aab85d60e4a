"""Tool calls a server left in the text (no tool-call parser behind an OpenAI-compatible API):
read as calls, so a ReAct run on native tools goes on as with a server that parses them."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from tao import OpenAIModel, ReActAgent, calculator  # noqa: E402
from tao.models.text_calls import parse  # noqa: E402

try:
    from openai_server import OpenAIServer, Reply
except ImportError:  # tests/ became a package
    from .openai_server import OpenAIServer, Reply

ADD = {"operation": "add", "a": 15, "b": 27}

FORMS = {
    "qwen-hermes": f"我来算一下。\n<tool_call>\n{json.dumps({'name': 'calculator', 'arguments': ADD})}\n</tool_call>",
    "llama": f"<|python_tag|>{json.dumps({'name': 'calculator', 'parameters': ADD})}<|eom_id|>",
    "mistral": f"[TOOL_CALLS]{json.dumps([{'name': 'calculator', 'arguments': json.dumps(ADD)}])}",
    # what the Qwen 0.5B wrote behind llama_cpp.server: the call alone, in a fenced block
    "fenced": f"```json\n{json.dumps({'name': 'calculator', 'arguments': ADD}, indent=2)}\n```",
}


@pytest.mark.parametrize("form", FORMS)
def test_a_call_left_as_text_is_run_and_the_answer_comes_back(form):
    with OpenAIServer() as server:
        server.push(Reply(FORMS[form], usage=None), Reply("15 + 27 = 42", usage=None))
        model = OpenAIModel("m", base_url=server.url, api_key="x", backoff_base=0.0)
        result = ReActAgent(model, [calculator], protocol="tools").run("15 加 27 等于几？")
    assert (result.status, result.answer, result.tool_calls) == ("done", "15 + 27 = 42", 1)
    assert result.messages[-2].role == "tool" and result.messages[-2].content == "42"
    assert result.usage.estimated  # the server sent no usage either


def test_only_the_request_s_tools_are_calls_and_prose_stays_prose():
    text = '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>'
    assert parse(text, ["calculator"]) == (text, [])
    prose = 'The JSON {"name": "calculator", "arguments": {}} is an example.'
    assert parse(prose, ["calculator"]) == (prose, [])
    data = '{"name": "calculator", "price": 12}'  # an answer about a thing called calculator
    assert parse(data, ["calculator"]) == (data, [])


@pytest.mark.parametrize("text, error", [
    ('<tool_call>{"name": "calculator", "arguments": [1, 2]}</tool_call>', "JSON object"),
    ('[TOOL_CALLS][{"name": "calculator", "arguments": "{not json"}]', "not JSON"),
])
def test_bad_arguments_become_a_parse_error_the_tool_layer_answers(text, error):
    _, (call,) = parse(text, ["calculator"])
    assert call.arguments == {} and error in call.parse_error


def test_several_llama_calls_and_braces_inside_strings():
    text = ('<|python_tag|>{"name": "calc", "parameters": {"e": "}{"}}; '
            '{"name": "calc", "parameters": {"e": "1+1"}}')
    _, calls = parse(text, ["calc"])
    assert [c.arguments for c in calls] == [{"e": "}{"}, {"e": "1+1"}]


def test_deep_or_broken_text_is_no_call_and_no_crash():
    deep = "<tool_call>" + "[" * 100_000 + "</tool_call>"
    assert parse(deep, ["calculator"]) == (deep, [])
    broken = "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"a\": \"\udcff\"}"
    assert parse(broken, ["calculator"]) == (broken, [])  # cut off: left as the model's text


def test_a_server_that_refuses_null_content_beside_tool_calls_gets_text_from_then_on():
    """llama-cpp-python's server answers ``content: null`` in a tool-calling reply with a 500
    ("Input should be a valid string" at that message's content), which OpenAI allows."""
    from openai_server import Error as HTTPError

    refusal = ("1 validation error: {'type': 'string_type', 'loc': ('body', 'messages', 1, "
               "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a "
               "valid string', 'input': None}")
    with OpenAIServer() as server:
        server.push(Reply(FORMS["qwen-hermes"].split("\n", 1)[1]), HTTPError(500, refusal),
                    Reply("42"), Reply(FORMS["llama"]), Reply("42"))
        model = OpenAIModel("m", base_url=server.url, api_key="x", backoff_base=0.0)
        first = ReActAgent(model, [calculator], protocol="tools").run("15 加 27 等于几？")
        second = ReActAgent(model, [calculator], protocol="tools").run("15 加 27 等于几？")
        sent = [[m.get("content", "?") for m in b["messages"] if m["role"] == "assistant"]
                for b in server.bodies]
    assert (first.status, first.answer, second.status, second.answer) == ("done", "42", "done", "42")
    assert sent == [[], [None], [""], [], [""]]  # asked once with null, then with text only


VLLM_NO_PARSER = ('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                  'to be set')


def test_an_endpoint_without_native_tools_is_asked_with_calls_as_text(tmp_path):
    """vLLM started without a tool-call parser refuses a request with tools (its documented
    400): the tools go into the prompt, the model's <tool_call> text is read as the call, and
    the run goes on; the next run asks that way at once."""
    from openai_server import Error as HTTPError

    with OpenAIServer() as server:
        server.push(HTTPError(400, VLLM_NO_PARSER), Reply(FORMS["qwen-hermes"]), Reply("42"),
                    Reply(FORMS["qwen-hermes"]), Reply("42"))
        model = OpenAIModel("m", base_url=server.url, api_key="x", backoff_base=0.0)
        events: list = []
        first = ReActAgent(model, [calculator], protocol="tools").run("15 加 27 等于几？",
                                                                     sinks=[events.append])
        second = ReActAgent(model, [calculator], protocol="tools").run("15 加 27 等于几？")
        bodies = server.bodies
    assert (first.status, first.answer, first.tool_calls) == ("done", "42", 1)
    assert (second.status, second.answer, second.tool_calls) == ("done", "42", 1)
    assert ["tools" in b for b in bodies] == [True, False, False, False, False]
    system = bodies[1]["messages"][0]["content"]
    assert "<tool_call>" in system and '"name": "calculator"' in system and "工具" in system
    # the call and its result went back as text, as the prompt told the model to read them
    turn2 = bodies[2]["messages"]
    assert "<tool_call>" in turn2[-2]["content"] and turn2[-2]["role"] == "assistant"
    assert turn2[-1] == {"role": "user", "content": "<tool_response>\n42\n</tool_response>"}
    said = [e.reason for e in events if type(e).__name__ == "ModelRetry"]
    assert len(said) == 1 and "takes no native tools" in said[0]
    assert model.limits() == "tools as text"
