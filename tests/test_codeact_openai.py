"""CodeAct over a real HTTP OpenAI-compatible server on 127.0.0.1: plain text in and out, two
blocks of one reply run in order, the stop sequence and no grammar reach the wire."""

from __future__ import annotations

import pytest

try:
    from openai_server import OpenAIServer, Reply
except ImportError:  # tests/ became a package
    from .openai_server import OpenAIServer, Reply

from tao.agents.codeact import CodeActAgent


@pytest.fixture
def server():
    with OpenAIServer() as s:
        yield s


async def test_codeact_on_an_openai_compatible_endpoint(server, monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TAO_BASE_URL", "TAO_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    from tao.models.openai import OpenAIModel

    server.push(
        Reply("Set up the numbers.\n```python\nbooks = multiply(3, 12)\n```\nThen the rest:\n"
              "```py\nprint(50 - books - 2 * 5)\n```"),
        Reply("Xiao Ming has 4 yuan left."),
    )
    model = OpenAIModel(base_url=server.url, api_key="x", model="m")
    result = await CodeActAgent(model).arun("How much money is left?")
    assert result.ok and result.answer == "Xiao Ming has 4 yuan left."
    assert (result.turns, result.tool_calls) == (2, 2)
    first, second = (r["body"] for r in server.requests)
    assert "tools" not in first and "grammar" not in first
    assert "\nObservation:" in first["stop"]
    assert "add(a: float, b: float)" in first["messages"][0]["content"]
    reminder = "\n(If this gives the answer, call final_answer(result); otherwise write more code.)"
    assert second["messages"][-1] == {"role": "user", "content": "Observation:\n4" + reminder}
