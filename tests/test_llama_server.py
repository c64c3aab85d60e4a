"""tao against a real third-party OpenAI-compatible server: llama-cpp-python's own
``llama_cpp.server`` (its ``server`` extra) serving the embedded 0.5B GGUF on 127.0.0.1, greedy.
That server takes no ``json_schema`` response_format (HTTP 500), has no tool-call parser (calls
come back as text), refuses ``content: null`` beside tool calls (500) and sends no usage: each
agent must still finish the seed question (slow: ``-m local_model``)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tao import OpenAIModel
from tao.cli import build_agent

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    pytest.importorskip("llama_cpp.server.app", reason="pip install 'llama-cpp-python[server]'")
    from tao.models.gguf_store import ensure_gguf
    from web_helpers import free_port

    port = free_port()
    log = (tmp_path_factory.mktemp("llama_server") / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("llama_server.py")),
                             "--model", str(ensure_gguf("qwen2.5-coder-0.5b")), "--host",
                             "127.0.0.1", "--port", str(port), "--n_ctx", "4096"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "llama_cpp.server did not start"
        time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(30)
    log.close()


@pytest.mark.local_model
@pytest.mark.parametrize("agent", ["react", "react-text", "react-json", "codeact", "plan"])
def test_each_agent_finishes_the_seed_question_on_llama_cpp_server(llama_server, agent):
    model = OpenAIModel("qwen", base_url=llama_server, api_key="none", temperature=0.0)
    result = build_agent(agent, model).run(XIAOMING)
    assert result.error is None and result.status in ("done", "max_turns"), result.error
    assert result.usage.estimated and result.usage.prompt_tokens > 100  # none sent: counted
    if agent in ("react-text", "codeact"):  # what the 0.5B answers greedily there
        assert result.answer.strip().startswith("4"), result.answer
