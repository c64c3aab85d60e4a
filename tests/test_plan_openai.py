"""Plan-and-Execute on a real OpenAI-compatible HTTP server (127.0.0.1): the plan is asked for with
a JSON-schema ``response_format`` and streamed back as SSE chunks."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from tao import OpenAIModel, calculator  # noqa: E402
from tao.events import Error, ModelRetry, StepStarted  # noqa: E402
from tao.plan.agent import PlanExecuteAgent  # noqa: E402

try:
    from openai_server import Cut, OpenAIServer, Reply
    from openai_server import Error as HTTPError
except ImportError:  # tests/ became a package
    from .openai_server import Cut, OpenAIServer, Reply
    from .openai_server import Error as HTTPError

PLAN = json.dumps({"steps": [
    {"id": "step1", "description": "books", "tool": "calculator",
     "args": {"operation": "multiply", "a": 3, "b": 12}, "depends_on": []},
    {"id": "step2", "description": "pens", "tool": "calculator",
     "args": {"operation": "multiply", "a": 2, "b": 5}, "depends_on": []},
    {"id": "step3", "description": "spent", "tool": "calculator",
     "args": {"operation": "add", "a": "$step1", "b": "$step2"}, "depends_on": ["step1", "step2"]},
    {"id": "step4", "description": "left", "tool": "calculator",
     "args": {"operation": "subtract", "a": 50, "b": "$step3"}, "depends_on": ["step3"]},
], "answer": "He has $step4 yuan left."}, ensure_ascii=False)
TASK = "Xiao Ming has 50 yuan. He buys 3 books at 12 yuan each and 2 pens at 5 yuan each. How much is left?"


@pytest.fixture
def server():
    with OpenAIServer() as s:
        yield s


def model(server):
    m = OpenAIModel("m", base_url=server.url, api_key="x", backoff_base=0.0)
    return m


@pytest.mark.parametrize("stream_plan", [False, True])
def test_the_plan_comes_back_streamed_with_a_json_schema_response_format(server, stream_plan):
    server.push(Reply(PLAN, chunk_size=16))
    events = []
    result = PlanExecuteAgent(model(server), [calculator], stream_plan=stream_plan).run(
        TASK, sinks=[events.append])

    assert result.status == "done", result.error
    assert (result.answer, result.turns, result.tool_calls) == ("He has 4 yuan left.", 1, 4)
    [body] = server.bodies
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "plan"
    assert fmt["json_schema"]["schema"]["required"] == ["steps"]
    assert body["stream"] is True and "tools" not in body
    assert result.usage.prompt_tokens == 11  # the server's usage chunk


def test_an_endpoint_that_refuses_json_schema_is_asked_with_json_object_then_nothing(server):
    server.push(HTTPError(400, "response_format type json_schema is unavailable"),
                HTTPError(400, "response_format json_object is unavailable"),
                Reply(PLAN))
    events = []
    result = PlanExecuteAgent(model(server), [calculator]).run(TASK, sinks=[events.append])

    assert result.status == "done" and result.answer == "He has 4 yuan left."
    assert [b.get("response_format", {}).get("type") for b in server.bodies] == [
        "json_schema", "json_object", None]
    notes = [e.reason for e in events if type(e) is ModelRetry]  # said, then asked again
    assert len(notes) == 2 and "refused response_format=json_schema; asking with json_object" in notes[0]
    assert "asking with no response_format" in notes[1]


@pytest.mark.parametrize("status, message", [
    (500, "1 validation error: response_format.type: Input should be 'text' or 'json_object'"),
    (422, "response_format: json_schema is not supported"),
    (400, "This response_format type is unavailable now")])
def test_a_refused_format_is_read_from_the_message_not_the_status(server, status, message):
    """llama-cpp-python's own server answers a json_schema response_format with a 500, other
    servers with 422: neither is a transient failure to retry five times."""
    server.push(HTTPError(status, message), Reply(PLAN))
    result = PlanExecuteAgent(model(server), [calculator]).run(TASK)

    assert result.status == "done" and result.answer == "He has 4 yuan left."
    assert [b.get("response_format", {}).get("type") for b in server.bodies] == [
        "json_schema", "json_object"]


def test_a_server_error_that_is_not_about_the_format_is_still_retried(server):
    server.push(HTTPError(500, "upstream overloaded"), Reply(PLAN))
    result = PlanExecuteAgent(model(server), [calculator]).run(TASK)
    assert result.status == "done"
    assert [b.get("response_format", {}).get("type") for b in server.bodies] == [
        "json_schema", "json_schema"]


def test_a_bad_key_is_not_mistaken_for_a_refused_format(server):
    server.push(HTTPError(401, "bad key"))
    result = PlanExecuteAgent(model(server), [calculator]).run(TASK)
    assert result.status == "error" and "refused the API key (401)" in result.error
    assert len(server.requests) == 1


def test_a_stream_cut_after_some_steps_started_does_not_run_them_twice(server):
    cut_at = PLAN.index('{"id": "step3"')  # step1 and step2 are complete when the stream drops
    server.push(Cut(PLAN, chunk_size=cut_at // 4 + 1, after_chunks=4), Reply(PLAN, chunk_size=16))
    events = []
    result = PlanExecuteAgent(model(server), [calculator], stream_plan=True).run(
        TASK, sinks=[events.append])

    assert result.status == "done", result.error
    assert result.answer == "He has 4 yuan left." and result.tool_calls == 4
    assert [type(e) for e in events].count(ModelRetry) == 1
    assert [e.step_id for e in events if type(e) is StepStarted] == ["step1", "step2", "step3", "step4"]


def test_a_refusal_is_paid_once_per_endpoint_and_said_in_the_header(server, tmp_path):
    """llama-cpp-python's server refuses json_schema with a 500: the next run - a new model
    object, even a new process (the facts file) - asks with json_object at once."""
    import io

    from rich.console import Console

    from tao.events import RunStarted
    from tao.models import endpoint_facts
    from tao.sinks.console import ConsoleSink

    refusal = "response_format.type: Input should be 'text' or 'json_object'"
    server.push(HTTPError(500, refusal), Reply(PLAN), Reply(PLAN))
    assert PlanExecuteAgent(model(server), [calculator]).run(TASK).status == "done"
    endpoint_facts.forget()  # as a new process finds it: in the file
    assert PlanExecuteAgent(model(server), [calculator]).run(TASK).status == "done"
    kinds = [b.get("response_format", {}).get("type") for b in server.bodies]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert model(server).limits() == "no json_schema"

    out = io.StringIO()
    sink = ConsoleSink(Console(file=out, width=200), endpoint=model(server).limits())
    sink(RunStarted(TASK, "plan", "m"))  # tao run's header
    assert "(plan · m · no json_schema)" in out.getvalue()
