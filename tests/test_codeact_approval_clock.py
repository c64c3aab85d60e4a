"""A person deciding an approval is not the code's time: a CodeAct block whose tool call waits
on its approval longer than the block's clock still runs to the end (issue 25, point 6). The
code's own time still counts: a block that computes past its clock is stopped."""

from __future__ import annotations

import asyncio

import pytest

from tao import CodeActAgent, ScriptedModel, tool
from tao.events import ApprovalRequested, ExecutionFinished

from sandbox_backends import backend_params, ensure_backend


@tool
def send(to: str) -> str:
    """Send a note to someone."""
    return f"sent to {to}"


@pytest.fixture(params=backend_params(("bwrap", "subprocess")))
def kind(request: pytest.FixtureRequest) -> str:
    ensure_backend(request.param)
    return request.param


def run(kind: str, code: str, approve) -> tuple:
    model = ScriptedModel([f"```python\n{code}\n```", "done"])
    agent = CodeActAgent(model, [send], sandbox=kind, helpers=False, timeout=1.0,
                         require_approval=["send"], approve=approve)
    events: list = []
    result = agent.run("send a note", sinks=[events.append])
    return result, [e for e in events if type(e) is ExecutionFinished], events


async def slow_person(request):
    await asyncio.sleep(2.5)  # longer than the block's 1 s clock
    return True


def test_a_block_waiting_on_an_approval_is_not_killed_by_its_clock(kind):
    result, finished, events = run(kind, "print(send('ana'))\nprint('after')", slow_person)
    assert any(type(e) is ApprovalRequested for e in events)
    assert finished[0].killed_reason is None and finished[0].error is None, finished[0]
    assert finished[0].stdout == "sent to ana\nafter\n"
    assert result.ok


def test_the_codes_own_time_still_counts(kind):
    result, finished, _ = run(kind, "print(send('ana'))\nwhile True:\n    pass",
                              lambda request: True)
    assert finished[0].stdout == "sent to ana\n"
    assert "timed out after 1 s" in finished[0].killed_reason
