"""``tao run`` against a real OpenAI-compatible server on 127.0.0.1 (tests/openai_server.py): the
endpoint's failures as a user meets them - a hanging server, a URL that is not an OpenAI endpoint,
a stream that breaks - and the task read from stdin, with the model built from TAO_* variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

import tao.cli as cli
from tao.models.resolve import resolve_model

try:
    from openai_server import Hang, OpenAIServer, Raw, Reply
except ImportError:  # tests/ became a package
    from .openai_server import Hang, OpenAIServer, Raw, Reply

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
ENV = ["TAO_BASE_URL", "TAO_API_KEY", "TAO_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY",
       "OPENAI_MODEL", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DEEPSEEK_MODEL"]
runner = CliRunner()


@pytest.fixture(scope="module")
def shared_server():
    with OpenAIServer() as s:
        yield s


@pytest.fixture
def server(shared_server, monkeypatch):
    """The test server as the endpoint ``tao run`` finds in the environment."""
    shared_server.reset()
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TAO_BASE_URL", shared_server.url)
    monkeypatch.setenv("TAO_MODEL", "m")
    yield shared_server
    leftover = list(shared_server.responses)
    shared_server.reset()
    assert not leftover, f"scripted responses never requested: {leftover}"


@pytest.fixture
def no_backoff(monkeypatch):
    """The real model from ``--model``, whose retry backoffs are not waited (they are random)."""
    def resolve(spec="auto", timeout=None):
        model = resolve_model(spec, timeout=timeout)

        async def sleep(delay):
            pass

        model._sleep = sleep
        return model

    monkeypatch.setattr(cli, "resolve_model", resolve)


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_a_hanging_endpoint_fails_within_the_timeout_and_says_so(server):
    server.push(Hang(), Hang())
    start = time.monotonic()
    res = runner.invoke(cli.app, ["run", "hello", "--timeout", "0.4", "--json"])
    elapsed = time.monotonic() - start
    assert res.exit_code == 1  # the run did not answer: not a usage error
    assert 2 * 0.4 <= elapsed < 2 * 0.4 + 0.5 + 2.0  # 2 attempts, one backoff, slack
    error = json.loads(res.stdout)["error"]
    assert error.startswith("ModelError: ") and server.url in error
    assert "2 attempts" in error and "no data for 0.4 s" in error and "--timeout" in error


def test_quiet_run_names_the_url_and_the_timeout_on_stderr(server):
    server.push(Hang(after_chunks=2), Hang(after_chunks=2))
    res = runner.invoke(cli.app, ["run", "hello", "--timeout", "0.3", "--quiet"])
    assert res.exit_code == 1 and res.stdout == ""
    assert server.url in flat(res.stderr) and "no data for 0.3 s" in flat(res.stderr)


@pytest.mark.parametrize("raw, received", [
    (Raw(b"<!DOCTYPE html>\n<html><body><h1>Open WebUI</h1></body></html>\n", "text/html"),
     "text/html without any data: events: '<!DOCTYPE html> <html><body><h1>Open WebUI</h1>"),
    (Raw(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10", "image/png"), "not UTF-8 text"),
    (Raw(b'data: {"id": "chatcmpl-1", "object": "chat.compl\n\n'), "a data: line that is not JSON"),
], ids=["html", "binary", "truncated-event"])
def test_an_endpoint_that_is_not_openai_exits_2_naming_the_url(server, raw, received):
    server.push(raw)
    res = runner.invoke(cli.app, ["run", "hello", "--quiet"])
    assert res.exit_code == 2, res.output
    message = flat(res.stderr)
    assert f"{server.url}/chat/completions did not answer with an OpenAI event stream" in message
    assert received in message and "TAO_BASE_URL" in message
    assert "Traceback" not in res.output and "UnicodeDecodeError" not in res.output
    assert len(server.requests) == 1


def test_a_stream_that_breaks_midway_on_every_attempt_exits_1(server, no_backoff):
    server.push(*[Raw(b"data: \xc3\x28\n\n", text="He has")] * 5)  # 1 attempt + 4 retries
    res = runner.invoke(cli.app, ["run", "hello", "--json"])
    assert res.exit_code == 1
    error = json.loads(res.stdout)["error"]
    assert error.startswith("ModelError: ") and server.url in error
    assert "5 attempts" in error and "not UTF-8 text" in error


def test_a_stream_that_breaks_once_is_retried_and_answers(server, no_backoff):
    server.push(Raw(b"data: \xc3\x28\n\n", text="He has"), Reply("He has 4 yuan left."))
    res = runner.invoke(cli.app, ["run", "hello", "--quiet"])
    assert res.exit_code == 0 and res.stdout == "He has 4 yuan left.\n"


def run_tao(server, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    env.update(TAO_BASE_URL=server.url, TAO_MODEL="m", PYTHONUTF8="1")
    return subprocess.run([sys.executable, "-m", "tao", "run", *args], input=stdin, env=env,
                          capture_output=True, timeout=60)


def test_chinese_task_from_stdin_end_to_end(server):
    server.push(Reply("他还剩 4 元。"))
    out = run_tao(server, "-", "--json", stdin=f"{XIAOMING}\n".encode())
    assert out.returncode == 0, out.stderr.decode()
    assert json.loads(out.stdout)["answer"] == "他还剩 4 元。"
    assert server.bodies[0]["messages"][-1] == {"role": "user", "content": XIAOMING}


def test_undecodable_argv_bytes_still_reach_the_endpoint(server):
    """Bytes that are not UTF-8 on the command line become lone surrogates in Python's argv; the
    request must still go out (with U+FFFD for them), not die in the HTTP client."""
    server.push(Reply("It costs 3 euros."))
    out = run_tao(server, b"Combien co\xfbte un caf\xe9 ?", "--quiet")
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode() == "It costs 3 euros.\n"
    assert server.bodies[0]["messages"][-1]["content"] == "Combien co\ufffdte un caf\ufffd ?"
