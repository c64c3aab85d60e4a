"""A secret in a call's arguments reaches the tool and nobody else: the run's events - the
Action, the approval request, a decision's edit - show it as ``***``, so the console, a --trace
file, the web page and the spans never hold it (issue 25, point 6). The tool, the approver and
the journal get the real value."""

from __future__ import annotations

import json

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.events import Action, ApprovalDecided, ApprovalRequested
from tao.guard import Decision
from tao.sinks import JsonlTrace

PIN = "8841-2277"
KEY = "sk-" + "a1B2c3D4" * 4


@tool(secret=("pin",))
def unlock(door: str, pin: str) -> str:
    """Unlock a door with its PIN."""
    got.append(pin)
    return f"{door} is open"


@tool
def call_api(url: str, api_key: str, note: str) -> str:
    """Call an API."""
    got.append(api_key)
    return "ok"


got: list[str] = []


def test_secret_arguments_are_hidden_in_every_event_and_the_trace(tmp_path):
    got.clear()
    asked = []
    model = ScriptedModel([tool_call("unlock", door="front", pin=PIN),
                           tool_call("call_api", url="https://x.example", api_key="k-1234567890",
                                     note=f"with {KEY}"), "done"])
    agent = ReActAgent(model, [unlock, call_api], require_approval=["unlock"],
                       approve=lambda request: asked.append(request.arguments) or True)
    trace = tmp_path / "run.jsonl"
    events: list = []
    with JsonlTrace(trace) as sink:
        result = agent.run("open the door", sinks=[events.append, sink])
    assert result.ok and got == [PIN, "k-1234567890"]  # the tools got the real values
    assert asked == [{"door": "front", "pin": PIN}]  # and so did the approver
    actions = [e.call.arguments for e in events if type(e) is Action]
    assert actions == [{"door": "front", "pin": "***"},
                       {"url": "https://x.example", "api_key": "***", "note": "with ***"}]
    [requested] = [e for e in events if type(e) is ApprovalRequested]
    assert requested.arguments == {"door": "front", "pin": "***"}
    text = trace.read_text(encoding="utf-8")
    events_text = "\n".join(line for line in text.splitlines()
                            if json.loads(line)["type"] != "run_finished")
    assert PIN not in events_text and KEY not in events_text and "k-1234567890" not in events_text


def test_an_edit_that_holds_a_secret_is_hidden_too():
    got.clear()
    model = ScriptedModel([tool_call("unlock", door="front", pin="0000"), "done"])
    agent = ReActAgent(model, [unlock], require_approval=["unlock"],
                       approve=lambda request: Decision.edit({"door": "front", "pin": PIN}))
    events: list = []
    assert agent.run("open the door", sinks=[events.append]).ok and got == [PIN]
    [decided] = [e for e in events if type(e) is ApprovalDecided]
    assert decided.verdict == "edited" and decided.arguments == {"door": "front", "pin": "***"}
