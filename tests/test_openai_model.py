"""OpenAIModel against a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/openai_server.py)."""

from __future__ import annotations

import email.utils
import gc
import json
import subprocess
import sys
import time

import pytest

from tao import Message, ReActAgent, ToolCall, calculator, tool
from tao.errors import ModelConfigError, ModelError
from tao.models.base import ModelResponse, Retrying, ToolSpec
from tao.models import openai as openai_model
from tao.models.openai import MAX_ARGUMENT_DEPTH, OpenAIModel, parse_arguments, resolve_settings

try:
    from openai_server import Cut, Error, Hang, OpenAIServer, Raw, Reply
except ImportError:  # tests/ became a package
    from .openai_server import Cut, Error, Hang, OpenAIServer, Raw, Reply

ENV = ["TAO_BASE_URL", "TAO_API_KEY", "TAO_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY",
       "OPENAI_MODEL", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DEEPSEEK_MODEL"]


def pytest_generate_tests(metafunc):
    if "server" in metafunc.fixturenames:  # what goes over HTTP runs on both transports
        metafunc.parametrize("transport", ["aiohttp", "httpx2"], indirect=True)


@pytest.fixture(autouse=True)
def transport(request, monkeypatch):
    """How requests go out: straight through aiohttp (the default when it is installed) or
    through the SDK over httpx2 (when it is not); every promise holds on both."""
    name = getattr(request, "param", "aiohttp")
    if name == "aiohttp":
        pytest.importorskip("aiohttp", exc_type=ImportError)
    else:
        monkeypatch.setattr(openai_model, "use_aiohttp", lambda: False)
    return name


@pytest.fixture(scope="module")
def shared_server():
    with OpenAIServer() as s:
        yield s


@pytest.fixture
def server(shared_server):
    shared_server.reset()
    yield shared_server
    leftover = list(shared_server.responses)
    shared_server.reset()
    assert not leftover, f"scripted responses never requested: {leftover}"


@pytest.fixture
def make_model(server):
    """OpenAIModel on the test server whose sleeps are recorded, not waited."""

    def make(**kwargs):
        kwargs = {"base_url": server.url, "api_key": "x", "model": "m", **kwargs}
        model = OpenAIModel(**kwargs)
        model.slept = []

        async def sleep(delay):
            model.slept.append(delay)

        model._sleep = sleep
        return model

    return make


async def collect(model, messages=None, **kwargs):
    """(text deltas, Retrying chunks, final response, every chunk in order)."""
    chunks = [c async for c in model.stream(messages or [Message.user("hi")], **kwargs)]
    final = [c for c in chunks if isinstance(c, ModelResponse)]
    assert len(final) == 1 and chunks[-1] is final[0]
    return ([c for c in chunks if isinstance(c, str)], [c for c in chunks if isinstance(c, Retrying)],
            final[0], chunks)


CALC = '{"operation": "add", "a": 15, "b": 27}'


# -- streaming ------------------------------------------------------------------------------
async def test_text_streams_in_pieces(server, make_model):
    server.push(Reply("Hello, world! 你好，世界。", chunk_size=5))
    texts, retries, r, _ = await collect(make_model())
    assert len(texts) > 3 and "".join(texts) == "Hello, world! 你好，世界。"
    assert not retries
    assert r.message == Message.assistant("Hello, world! 你好，世界。")
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (11, 7)
    assert r.finish_reason == "stop"
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer x"
    body = req["body"]
    assert body["model"] == "m" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_two_tool_calls_in_one_turn_with_split_arguments(server, make_model):
    server.push(Reply("Let me compute.", tool_calls=[
        ("call_a", "calculator", CALC),
        ("call_b", "calculator", '{"operation": "multiply", "a": 3, "b": 4}')], args_chunk_size=3))
    texts, _, r, _ = await collect(make_model())
    assert "".join(texts) == "Let me compute."
    assert r.finish_reason == "tool_calls"
    assert r.message.content == "Let me compute."
    assert r.message.tool_calls == [
        ToolCall("call_a", "calculator", {"operation": "add", "a": 15, "b": 27}),
        ToolCall("call_b", "calculator", {"operation": "multiply", "a": 3, "b": 4})]


async def test_malformed_tool_arguments_become_parse_errors(server, make_model):
    server.push(Reply(tool_calls=[("c1", "calculator", '{"a": 1,'), ("c2", "calculator", "[1, 2]"),
                                  ("c3", "calculator", ""), ("c4", "calculator", CALC)]))
    _, _, r, _ = await collect(make_model())
    c1, c2, c3, c4 = r.message.tool_calls
    assert c1.arguments == {} and "character" in c1.parse_error and '{"a": 1,' in c1.parse_error
    assert c2.arguments == {} and "JSON object" in c2.parse_error
    assert c3.arguments == {} and c3.parse_error is None
    assert c4.arguments["b"] == 27 and c4.parse_error is None


async def test_usage_a_server_does_not_send_is_estimated_and_marked(server, make_model):
    """llama-cpp-python's server sends no usage in a stream: counted here, said to be a guess."""
    server.push(Reply("ok", usage=None))
    _, _, r, _ = await collect(make_model())
    assert r.message.content == "ok" and r.usage.estimated
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens == 1
    assert r.usage.to_dict()["estimated"] is True and r.usage.mark == "≈"
    server.push(Reply("ok"))  # the server's own count is taken as it is
    _, _, counted, _ = await collect(make_model())
    assert not counted.usage.estimated and "estimated" not in counted.usage.to_dict()


# -- retries --------------------------------------------------------------------------------
@pytest.mark.parametrize("headers, expected", [
    ({"Retry-After": "2"}, 2.0),
    ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5),
    ({"Retry-After": "3600"}, 60.0),  # capped
])
async def test_429_then_200_honours_retry_after(server, make_model, headers, expected):
    server.push(Error(429, "Rate limit reached", headers, type="requests"), Reply("done"))
    model = make_model()
    texts, retries, r, _ = await collect(model)
    assert r.message.content == "done" and texts == ["done"]
    assert [(x.attempt, x.delay_s) for x in retries] == [(1, expected)]
    assert "429" in retries[0].reason and "Rate limit reached" in retries[0].reason
    assert model.slept == [expected]
    assert len(server.requests) == 2


async def test_retry_after_http_date(server, make_model):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    server.push(Error(429, headers={"Retry-After": when}), Reply("done"))
    model = make_model()
    _, retries, r, _ = await collect(model)
    assert r.message.content == "done"
    assert 28 <= retries[0].delay_s <= 30.5 and model.slept == [retries[0].delay_s]


async def test_retry_after_is_really_waited(server):
    server.push(Error(429, headers={"retry-after-ms": "300"}), Reply("done"))
    model = OpenAIModel("m", base_url=server.url, api_key="x")  # real asyncio.sleep
    _, retries, r, _ = await collect(model)
    assert r.message.content == "done" and retries[0].delay_s == pytest.approx(0.3)
    gap = server.requests[1]["time"] - server.requests[0]["time"]
    assert 0.3 <= gap < 1.5


async def test_500_then_200_backs_off_with_jitter(server, make_model):
    server.push(Error(500, "boom"), Error(502, "bad gateway"), Reply("ok"))
    model = make_model(backoff_base=0.5)
    _, retries, r, _ = await collect(model)
    assert r.message.content == "ok"
    assert [x.attempt for x in retries] == [1, 2]
    assert "500" in retries[0].reason and "boom" in retries[0].reason and "502" in retries[1].reason
    assert 0 <= retries[0].delay_s <= 0.5 and 0 <= retries[1].delay_s <= 1.0
    assert model.slept == [x.delay_s for x in retries]


@pytest.mark.parametrize("cut", [Cut("partial answer"), Cut("partial answer", clean=True),
                                 Cut("partial answer", error_event="overloaded")])
async def test_stream_cut_midway_is_retried(server, make_model, cut):
    server.push(cut, Reply("The full answer.", chunk_size=6))
    _, retries, r, chunks = await collect(make_model())
    (retry,) = retries
    i = chunks.index(retry)
    assert "".join(c for c in chunks[:i] if isinstance(c, str)) == "partial "  # voided by Retrying
    assert "".join(c for c in chunks[i:] if isinstance(c, str)) == "The full answer."
    assert r.message.content == "The full answer."  # only the final attempt's text
    assert len(server.requests) == 2


async def test_cut_reason_names_the_dropped_connection(server, make_model, transport):
    server.push(Cut(), Reply("ok"))
    _, retries, _, _ = await collect(make_model())
    said = {"httpx2": "incomplete chunked read", "aiohttp": "Response payload is not completed"}
    assert "mid-stream" in retries[0].reason and said[transport] in retries[0].reason


async def test_timeout_is_retried(server, make_model):
    server.push(Reply("late", delay_s=1.0), Reply("ok"))
    _, retries, r, _ = await collect(make_model(timeout=0.2))
    assert r.message.content == "ok" and "timed out" in retries[0].reason


async def test_connection_refused_is_retried_then_model_error(make_model):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    model = make_model(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(ModelError) as info:
        await collect(model)
    assert not isinstance(info.value, ModelConfigError)
    assert "3 attempts" in str(info.value) and "connection error" in str(info.value)
    assert len(model.slept) == 2


async def test_retries_exhausted_raise_model_error(server, make_model):
    server.push(*[Error(503, "overloaded")] * 3)
    model = make_model(max_retries=2)
    seen = []
    with pytest.raises(ModelError) as info:
        async for chunk in model.stream([Message.user("hi")]):
            seen.append(chunk)
    assert not isinstance(info.value, ModelConfigError)
    msg = str(info.value)
    assert "3 attempts" in msg and "503" in msg and "overloaded" in msg and server.url in msg
    assert [c.attempt for c in seen] == [1, 2] and len(server.requests) == 3


# -- errors that retrying cannot fix --------------------------------------------------------
async def test_401_is_a_config_error_at_once(server, make_model):
    server.push(Error(401, "Incorrect API key provided", type="invalid_request_error"), Reply("never"))
    model = make_model()
    with pytest.raises(ModelConfigError) as info:
        await collect(model)
    msg = str(info.value)
    assert "refused the API key (401)" in msg and server.url in msg and "TAO_API_KEY" in msg
    assert len(server.requests) == 1 and model.slept == []
    server.responses.clear()  # the success that a retry would have found


async def test_404_is_a_config_error(server, make_model):
    server.push(Error(404, "The model `nope` does not exist"))
    with pytest.raises(ModelConfigError) as info:
        await collect(make_model(model="nope"))
    assert "not found (404)" in str(info.value) and "'nope'" in str(info.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 422])
async def test_bad_request_is_a_config_error_with_the_servers_message(server, make_model, status):
    server.push(Error(status, "'messages' must contain the word 'json'"))
    with pytest.raises(ModelConfigError, match="must contain the word 'json'"):
        await collect(make_model())
    assert len(server.requests) == 1


async def test_insufficient_quota_is_not_retried(server, make_model):
    server.push(Error(429, "You exceeded your current quota", code="insufficient_quota"))
    with pytest.raises(ModelConfigError, match="quota"):
        await collect(make_model())
    assert len(server.requests) == 1


async def test_server_without_stream_options_is_asked_again_without_them(server, make_model):
    server.push(Error(400, "Unrecognized request argument supplied: stream_options"), Reply("ok"))
    _, retries, r, _ = await collect(make_model())
    assert r.message.content == "ok" and not retries and r.usage.estimated  # none sent
    assert "stream_options" in server.bodies[0] and "stream_options" not in server.bodies[1]


# -- request translation --------------------------------------------------------------------
async def test_request_translation(server, make_model):
    server.push(Reply('{"answer": 42}'))
    messages = [
        Message.system("be brief"),
        Message.user("15+27? 和 3*4?"),
        Message.assistant("I will add.", [ToolCall("call_1", "calculator", {"operation": "add", "a": 15, "b": 27}),
                                          ToolCall("call_2", "calculator", {}, parse_error="bad")]),
        Message.tool("42", "call_1", "calculator"),
        Message.tool("Error: bad", "call_2", "calculator"),
        Message.assistant("", [ToolCall("call_3", "noop", {"x": "ü"})]),
        Message.tool("", "call_3", "noop"),
    ]
    spec = ToolSpec("calculator", "Four operations", {"type": "object", "properties": {"a": {"type": "number"}}})
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": {
        "type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}}}
    model = make_model(temperature=0.2, extra_body={"top_k": 20})
    _, _, r, _ = await collect(model, messages, tools=[spec], response_format=fmt,
                               grammar="root ::= \"x\"", stop=["\nObservation:"], max_tokens=64)
    assert r.message.content == '{"answer": 42}'
    body = server.bodies[0]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "15+27? 和 3*4?"},
        {"role": "assistant", "content": "I will add.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "calculator", "arguments": json.dumps({"operation": "add", "a": 15, "b": 27})}},
            {"id": "call_2", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: bad"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "noop", "arguments": '{"x": "ü"}'}}]},
        {"role": "tool", "tool_call_id": "call_3", "content": ""},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "calculator", "description": "Four operations", "parameters": spec.parameters}}]
    assert body["response_format"] == fmt
    assert body["stop"] == ["\nObservation:"] and body["max_tokens"] == 64
    assert body["temperature"] == 0.2 and body["top_k"] == 20
    assert "grammar" not in json.dumps(body)


async def test_optional_parameters_are_left_out(server, make_model):
    server.push(Reply("ok"))
    await collect(make_model())
    assert set(server.bodies[0]) == {"model", "messages", "stream", "stream_options"}


async def test_http_proxy_from_the_environment_is_used(server, make_model, monkeypatch):
    """HTTP_PROXY (a company's proxy) is honoured on both transports: the request goes to the
    proxy, naming the endpoint's URL; NO_PROXY exempts a host."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url.removesuffix("/v1"))
    server.push(Reply("via the proxy"))
    _, _, r, _ = await collect(make_model(base_url="http://endpoint.invalid/v1"))
    assert r.message.content == "via the proxy"
    assert server.requests[0]["path"] == "http://endpoint.invalid/v1/chat/completions"

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server.push(Reply("direct"))
    _, _, r, _ = await collect(make_model())
    assert r.message.content == "direct" and server.requests[1]["path"] == "/v1/chat/completions"


# -- configuration --------------------------------------------------------------------------
@pytest.fixture
def clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_tao_env_wins_over_openai_env(clean_env):
    clean_env.setenv("TAO_BASE_URL", "http://tao.example/v1/")
    clean_env.setenv("TAO_API_KEY", "tao-key")
    clean_env.setenv("TAO_MODEL", "tao-model")
    clean_env.setenv("OPENAI_BASE_URL", "http://openai.example/v1")
    clean_env.setenv("OPENAI_API_KEY", "openai-key")
    clean_env.setenv("OPENAI_MODEL", "openai-model")
    clean_env.setenv("DEEPSEEK_API_KEY", "ds-key")
    m = OpenAIModel()
    assert (m.name, m.base_url, m._api_key) == ("tao-model", "http://tao.example/v1", "tao-key")
    assert "tao-key" not in repr(m)


def test_openai_env_then_defaults(clean_env):
    clean_env.setenv("OPENAI_API_KEY", "openai-key")
    clean_env.setenv("DEEPSEEK_API_KEY", "ds-key")
    assert resolve_settings() == ("gpt-4o-mini", "https://api.openai.com/v1", "openai-key")
    clean_env.setenv("OPENAI_MODEL", "gpt-x")
    assert OpenAIModel().name == "gpt-x"
    assert OpenAIModel("explicit").name == "explicit"


def test_deepseek_fallback(clean_env):
    clean_env.setenv("DEEPSEEK_API_KEY", "ds-key")
    assert resolve_settings() == ("deepseek-chat", "https://api.deepseek.com", "ds-key")
    clean_env.setenv("DEEPSEEK_MODEL", "deepseek-reasoner")
    clean_env.setenv("DEEPSEEK_BASE_URL", "https://api.deepseek.com/v1")
    assert resolve_settings() == ("deepseek-reasoner", "https://api.deepseek.com/v1", "ds-key")
    clean_env.setenv("TAO_MODEL", "chosen")
    assert resolve_settings()[0] == "chosen"


def test_deepseek_key_is_not_sent_to_another_server(clean_env):
    clean_env.setenv("DEEPSEEK_API_KEY", "ds-key")
    assert resolve_settings(base_url="http://localhost:8000/v1") == (
        "gpt-4o-mini", "http://localhost:8000/v1", "not-needed")


def test_no_key_is_a_config_error(clean_env):
    with pytest.raises(ModelConfigError, match="TAO_API_KEY"):
        OpenAIModel()
    with pytest.raises(ModelConfigError):
        OpenAIModel.from_env(model="gpt-4o")


def test_local_server_needs_no_key(clean_env):
    assert OpenAIModel("qwen", base_url="http://localhost:11434/v1")._api_key == "not-needed"
    clean_env.setenv("TAO_BASE_URL", "http://localhost:8000/v1")
    assert OpenAIModel()._api_key == "not-needed"
    assert OpenAIModel(api_key="")._api_key == ""


async def test_empty_api_key_is_accepted(server, clean_env):
    server.push(Reply("ok"))
    model = OpenAIModel("m", base_url=server.url, api_key="")
    _, _, r, _ = await collect(model)
    assert r.message.content == "ok"
    assert server.requests[0]["headers"]["authorization"] == "Bearer not-needed"


def test_import_tao_does_not_import_openai():
    code = "import tao, tao.models, sys; assert 'openai' not in sys.modules, 'openai imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- end to end -----------------------------------------------------------------------------
def test_react_agent_end_to_end(server):
    server.push(Reply("I'll use the calculator.", tool_calls=[("call_1", "calculator", CALC)]),
                Reply("15 + 27 = 42", usage=(30, 6)))
    model = OpenAIModel(base_url=server.url, api_key="x", model="m")
    result = ReActAgent(model, tools=[calculator]).run("What is 15 + 27?")
    assert result.status == "done", result.error
    assert result.answer == "15 + 27 = 42"
    assert result.turns == 2 and result.tool_calls == 1
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (41, 13)
    first, second = server.bodies
    assert first["tools"][0]["function"]["name"] == "calculator"
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}

    # a second run starts a new event loop: the model makes a new client for it
    server.push(Reply("again"))
    assert ReActAgent(model, tools=[calculator]).run("hi").answer == "again"


def test_each_run_closes_its_connections(server, recwarn, caplog):
    """``agent.run`` runs in an event loop of its own; when it ends, the model's client for that
    loop is closed and let go: no sockets left open, no "Unclosed client session" on stderr."""
    gc.collect()  # what earlier tests left for the collector is theirs, not this test's
    recwarn.clear()
    server.push(Reply("one"), Reply("two"))
    model = OpenAIModel("m", base_url=server.url, api_key="x")
    agent = ReActAgent(model)
    assert agent.run("hi").answer == "one"
    assert agent.run("hi").answer == "two"
    assert model._clients == {}
    gc.collect()
    assert not [w for w in recwarn if "nclosed" in str(w.message)]
    assert "Unclosed" not in caplog.text


async def test_aclose_closes_the_client_of_this_loop(server, make_model):
    server.push(Reply("ok"), Reply("again"))
    model = make_model()
    await collect(model)
    client = await model.client()
    await model.aclose()
    assert client.is_closed() and model._clients == {}
    _, _, r, _ = await collect(model)  # a new client
    assert r.message.content == "again" and not (await model.client()).is_closed()


# -- timeouts: a dead endpoint fails in bounded time --------------------------------------------
@pytest.mark.parametrize("hang", [Hang(), Hang(after_chunks=2)], ids=["no-answer", "silent-mid-stream"])
async def test_a_hanging_endpoint_fails_within_timeout_times_attempts(server, hang):
    """With the default retries (4), a silent endpoint is tried twice, not five times: the call
    fails after about 2 x timeout, and the error names the URL and the timeout."""
    server.push(hang, hang)
    model = OpenAIModel("m", base_url=server.url, api_key="x", timeout=0.4)  # real sleeps
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await collect(model)
    elapsed = time.monotonic() - start
    assert 2 * 0.4 <= elapsed < 2 * 0.4 + 0.5 + 1.5  # two attempts + one backoff (<= 0.5 s) + slack
    assert len(server.requests) == 2
    msg = str(info.value)
    assert not isinstance(info.value, ModelConfigError)
    assert server.url in msg and "2 attempts" in msg and "no data for 0.4 s" in msg and "--timeout" in msg


async def test_timeout_retries_zero_gives_up_after_one_silent_attempt(server):
    server.push(Hang())
    model = OpenAIModel("m", base_url=server.url, api_key="x", timeout=0.3, timeout_retries=0)
    start = time.monotonic()
    with pytest.raises(ModelError, match="1 attempt;"):
        await collect(model)
    assert time.monotonic() - start < 0.3 + 1.0 and len(server.requests) == 1


async def test_timeout_is_silence_not_a_limit_on_a_long_answer(server, make_model):
    """A slow model that keeps streaming (1.2 s in all, 0.1 s between chunks) is not cut off by
    a 0.5 s timeout: the timeout is the silence allowed, before the first token and between two."""
    server.push(Reply("one two three four five six seven eight nine ten eleven twelve",
                      chunk_size=5, chunk_delay_s=0.1))
    texts, retries, r, _ = await collect(make_model(timeout=0.5))
    assert not retries and r.message.content.endswith("twelve") and len(texts) == 13


def test_timeout_settings():
    from openai import Timeout

    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="x")
    assert (model.timeout, model.timeout_retries) == (60.0, 1)  # a dead endpoint: about 2 minutes
    assert model._timeouts().read == 60.0 and model._timeouts().connect == 10.0
    short = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="x", timeout=3)
    assert short._timeouts().connect == 3.0
    custom = Timeout(30.0, connect=2.0)
    assert OpenAIModel("m", base_url="http://x/v1", api_key="x", timeout=custom)._timeouts() is custom
    for bad in (0, -1, float("nan"), "10", None):
        with pytest.raises(ValueError, match="timeout must be"):
            OpenAIModel("m", base_url="http://x/v1", api_key="x", timeout=bad)


# -- answers that are not an OpenAI event stream ------------------------------------------------
NGINX = b"<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body></body></html>\n"


@pytest.mark.parametrize("raw, received", [
    (Raw(NGINX, "text/html; charset=utf-8"), "text/html without any data: events: '<!DOCTYPE html>"),
    (Raw(bytes(range(256)) * 8, "application/octet-stream"), "not UTF-8 text (at byte 114 of a line): ...b'XYZ"),
    (Raw(b"data: \xff\xfe garbage\n\n"), "not UTF-8 text (at byte 6 of a line): b'data: \\xff"),
    (Raw(b'data: {"id": "chatcmpl-test", "choi\n\n'), 'not JSON (Unterminated string starting at): \'{"id": "chatcmpl-test", "choi\''),
    (Raw(b'data: "hello"\n\n'), "not a chat.completion.chunk: 'hello'"),
    (Raw(b'{"object": "chat.completion", "choices": []}', "application/json"), "application/json without any data: events"),
], ids=["html", "binary", "binary-event", "truncated-event", "json-string", "json-document"])
async def test_an_answer_that_is_not_an_event_stream_is_a_config_error_naming_the_url(
        server, make_model, raw, received):
    """Nothing valid came back: the URL points at something else. A clear error at once - the
    URL, what was received (shortened), what to check - and no retries."""
    server.push(raw, raw)
    model = make_model()
    with pytest.raises(ModelConfigError) as info:
        await collect(model)
    msg = str(info.value)
    assert f"{server.url}/chat/completions did not answer with an OpenAI event stream" in msg
    assert received in msg and "TAO_BASE_URL" in msg and len(msg) < 600
    assert len(server.requests) == 1 and model.slept == []
    server.responses.clear()  # the retry that must not happen


@pytest.mark.parametrize("event", [
    b'{"choices": [{"delta": {"content": 5}}]}', b'{"choices": "abc"}', b'{"choices": [[1]]}',
    b'{"choices": [{"delta": {"tool_calls": [{"index": "x", "function": {"name": "f"}}]}}]}',
    b'{"choices": [{"delta": {"tool_calls": 7}}]}',
], ids=["number-content", "string-choices", "list-choice", "string-index", "number-tool-calls"])
async def test_a_chunk_with_parts_of_the_wrong_type_is_named_not_a_crash(server, make_model, event):
    """JSON objects with ``choices`` whose parts have the wrong type: the same clear error as
    any other answer that is not a chat.completion.chunk, never a TypeError from deep inside."""
    server.push(Raw(b"data: " + event + b"\n\n"))
    with pytest.raises(ModelConfigError, match="not a chat.completion.chunk"):
        await collect(make_model())
    assert len(server.requests) == 1


async def test_null_choices_and_delta_are_empty_chunks(server, make_model):
    """Servers that send ``"choices": null`` with the usage, or ``"delta": null``, still stream."""
    events = [{"choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": None, "finish_reason": "stop"}]},
              {"choices": None, "usage": {"prompt_tokens": 3, "completion_tokens": 1}}]
    server.push(Raw(b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
                    + b"data: [DONE]\n\n"))
    texts, retries, r, _ = await collect(make_model())
    assert texts == ["4"] and not retries and r.finish_reason == "stop"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (3, 1)


async def test_a_stream_that_turns_to_garbage_midway_is_retried(server, make_model):
    broken = Raw(b'data: {"id": "chatcmpl-test", "choi\n\n', text="Hello the")
    server.push(broken, Reply("Hello there."))
    _, retries, r, _ = await collect(make_model())
    assert r.message.content == "Hello there."
    assert "invalid event stream after 4 chunks" in retries[0].reason and "not JSON" in retries[0].reason


async def test_garbage_on_every_attempt_is_a_model_error_naming_the_url(server, make_model):
    server.push(*[Raw(b"data: \xc3\x28\n\n", text="Hi")] * 3)
    with pytest.raises(ModelError) as info:
        await collect(make_model(max_retries=2))
    msg = str(info.value)
    assert not isinstance(info.value, ModelConfigError)
    assert server.url in msg and "3 attempts" in msg and "not UTF-8" in msg and "b'data: \\xc3(" in msg


# -- hostile tool arguments and text --------------------------------------------------------------
def nested(depth: int) -> str:
    return '{"a": ' + "[" * depth + "1" + "]" * depth + "}"


@pytest.mark.parametrize("raw", [
    "[" * 1000, "[" * 100_000, nested(1000), nested(MAX_ARGUMENT_DEPTH), '{"a": ' + "1" * 5000 + "}",
], ids=["open-1000", "open-100000", "nested-1000", "nested-at-limit", "5000-digits"])
def test_parse_arguments_never_raises(raw):
    arguments, error = parse_arguments(raw)
    assert arguments == {} and error
    assert len(error) < 300


def test_parse_arguments_keeps_nesting_up_to_the_limit():
    arguments, error = parse_arguments(nested(MAX_ARGUMENT_DEPTH - 1))  # the object + 99 lists
    assert error is None
    value, depth = arguments["a"], 1
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert (value, depth) == (1, MAX_ARGUMENT_DEPTH)


async def test_deep_tool_arguments_become_an_observation_and_the_run_goes_on(server):
    server.push(Reply(tool_calls=[("call_1", "calculator", nested(1000))]), Reply("I give up: 42"))
    model = OpenAIModel("m", base_url=server.url, api_key="x")
    result = await ReActAgent(model, tools=[calculator]).arun("15 + 27?")
    assert result.status == "done" and result.answer == "I give up: 42"
    observation = server.bodies[1]["messages"][-1]
    assert observation["role"] == "tool" and "nested deeper than 100 levels" in observation["content"]


@tool
def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: what to say
    """
    return f"you said: {text}"


def test_lone_surrogates_do_not_break_the_next_request(server):
    """A model that writes "\\udcff" (a JSON escape for half a character) in its text and in a
    tool's arguments: the next request still goes out, with U+FFFD where the half was."""
    server.push(Reply("Let me echo \udcff.", tool_calls=[("call_1", "echo", '{"text": "a\\udcffb"}')]),
                Reply("done"))
    model = OpenAIModel("m", base_url=server.url, api_key="x")
    result = ReActAgent(model, tools=[echo]).run("echo \udcfe, please")  # a task from bad argv bytes
    assert result.status == "done", result.error
    assert result.answer == "done"
    first, second = server.bodies
    assert first["messages"][-1] == {"role": "user", "content": "echo \ufffd, please"}
    assistant, observation = second["messages"][-2:]
    assert assistant["content"] == "Let me echo \ufffd."
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"text": "a\ufffdb"}
    assert observation == {"role": "tool", "tool_call_id": "call_1", "content": "you said: a\ufffdb"}


# -- what an endpoint refuses (DeepSeek's documented limits) --------------------------------
async def test_deepseek_refuses_json_schema_and_its_json_mode_gets_the_word_json(server, make_model):
    """DeepSeek answers json_schema with 400 "This response_format type is unavailable now",
    and its JSON mode refuses a prompt without the word "json": the model steps down to JSON
    mode with the word added, says so as a Retrying, and remembers it for the next call."""
    server.push(Error(400, "This response_format type is unavailable now"), Reply('{"a": 1}'),
                Reply('{"a": 2}'))
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    model = make_model()
    _, retries, r, _ = await collect(model, [Message.system("Be brief."), Message.user("给我一个对象")],
                                     response_format=schema)
    assert r.message.content == '{"a": 1}' and len(retries) == 1
    assert "refused response_format=json_schema; asking with json_object" in retries[0].reason
    _, again, _, _ = await collect(model, [Message.user("再来一个")], response_format=schema)
    first, second, third = server.bodies
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object"} == third["response_format"]
    assert "json" in second["messages"][0]["content"].lower()  # the word DeepSeek wants
    assert third["messages"][0] == {"role": "system", "content": "Reply in JSON."} and not again


async def test_a_server_that_answers_whole_instead_of_streaming_is_read_and_said(server, make_model):
    """Some servers ignore ``stream: true`` and send one ``chat.completion``: its message, tool
    calls, finish reason and usage are read as a stream's, and the header says it."""
    whole = {"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
             "message": {"role": "assistant", "content": "先加起来。", "tool_calls": [
                 {"id": "c1", "type": "function",
                  "function": {"name": "calculator", "arguments": CALC}}]}}],
             "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}}
    server.push(Raw(json.dumps(whole).encode(), "application/json"))
    model = make_model()
    text, retries, r, _ = await collect(model)
    assert "".join(text) == "先加起来。" and not retries
    assert [(c.name, c.arguments) for c in r.message.tool_calls] == [
        ("calculator", {"operation": "add", "a": 15, "b": 27})]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.estimated) == (30, 9, False)
    assert r.finish_reason == "tool_calls" and model.limits() == "answers whole, not streamed"


# -- typed results over the wire (issue 28) -------------------------------------------------
def test_a_typed_result_asks_the_endpoint_for_its_schema_and_steps_down_when_refused(
        server, make_model):
    """``output_type=`` sends the type's JSON schema as ``response_format`` beside the tools;
    an endpoint that refuses it gets the schema as the parameters of a ``final_result`` tool
    (a Retrying says so), whose call is read back as the answer and validated."""
    from pydantic import BaseModel

    from tao.events import ModelRetry

    class City(BaseModel):
        name: str
        population: int

    server.push(Error(400, "This response_format type is unavailable now"),
                Reply("", [("c1", "final_result", '{"name": "Lyon", "population": 522000}')]))
    events: list = []
    result = ReActAgent(make_model(), tools=[calculator], output_type=City).run(
        "The biggest city of the Rhône?", sinks=[events.append])
    assert result.output == City(name="Lyon", population=522000)
    assert result.answer == '{"name": "Lyon", "population": 522000}'
    first, second = server.bodies
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"]["required"] == ["name", "population"]
    assert "response_format" not in second
    assert [t["function"]["name"] for t in second["tools"]] == ["calculator", "final_result"]
    assert second["tools"][1]["function"]["parameters"]["required"] == ["name", "population"]
    assert [e for e in events if type(e) is ModelRetry]


def test_a_typed_result_that_is_not_an_object_is_wrapped_in_the_tool(server, make_model):
    """Tool arguments are objects: ``list[int]`` goes as ``{"value": [...]}``; a plain JSON
    reply instead of the call still counts (prompted output, the last rung)."""
    from tao.models import endpoint_facts

    endpoint_facts.refused(server.url, "m", "json_schema")  # learnt earlier
    server.push(Reply("", [("c1", "final_result", '{"value": [1, 2, 3]}')]), Reply("[4, 5]"))
    agent = ReActAgent(make_model(), tools=[calculator], output_type=list[int])
    assert agent.run("Three numbers?").output == [1, 2, 3]
    params = server.bodies[0]["tools"][1]["function"]["parameters"]
    assert params["required"] == ["value"] and params["properties"]["value"]["type"] == "array"
    assert agent.run("Two more?").output == [4, 5]
