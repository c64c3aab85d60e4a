"""What the kill-and-resume tests run (in forked processes killed at a journal boundary, and in
the test process): a 5-tool ReAct run and a plan with two parallel steps, whose tools count
their effects in files - the counters the tests read after the process was SIGKILLed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.plan.agent import PlanExecuteAgent
from tao.runs import Journal, idempotency_key

#: where the tools count their effects (set per trial; the tools are made once: a tool's
#: argument model costs milliseconds to build)
EFFECTS = [Path(".")]


@tool(idempotent=True)
def pay(name: str) -> str:
    """Pay ``name``: the effect (a counter) and the key it was made under, in one atomic write,
    so the same key never pays twice."""
    path, key = EFFECTS[0] / f"{name}.json", idempotency_key()
    state = json.loads(path.read_text()) if path.exists() else {"count": 0, "done": {}}
    if key in state["done"]:
        return state["done"][key]
    state["count"] += 1
    text = state["done"][key] = f"paid {name} (#{state['count']})"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)
    return text


@tool(side_effects=False)
def look(name: str) -> str:
    """Look ``name`` up (read-only)."""
    return f"{name} is {len(name)} letters"


@tool
def send(to: str) -> str:
    """Send a message to ``to``: a side effect with no idempotency key (counted, not deduped)."""
    path = EFFECTS[0] / f"sent-{to}.json"
    count = json.loads(path.read_text())["count"] + 1 if path.exists() else 1
    path.write_text(json.dumps({"count": count}))
    return f"sent to {to}"


def tools(effects: str | os.PathLike[str]):
    EFFECTS[0] = Path(effects)
    return [pay, look, send]


def react_model(send: bool = False) -> ScriptedModel:
    """Five tool calls, then an answer made of every result: it is right only if each result
    the resumed run read is the one the tools gave. ``send``: the third call is ``send``."""
    calls = [tool_call("look", name="ann"), *(tool_call("pay", name=n) for n in "abcd")]
    if send:
        calls[2] = tool_call("send", to="bob")

    def pick(messages):
        results = [m.content for m in messages if m.role == "tool"]
        return calls[len(results)] if len(results) < len(calls) else " | ".join(results)

    return ScriptedModel([pick] * 12)


PLAN = {"steps": [
    {"id": "step1", "description": "pay a", "tool": "pay", "args": {"name": "a"}, "depends_on": []},
    {"id": "step2", "description": "pay b", "tool": "pay", "args": {"name": "b"}, "depends_on": []},
    {"id": "step3", "description": "look both up", "tool": "look",
     "args": {"name": "$step1 & $step2"}, "depends_on": ["step1", "step2"]}],
    "answer": "$step1 / $step2 / $step3"}


def agent(kind: str, journal: str, effects: str, approve=None):
    if kind.startswith("react"):
        return ReActAgent(react_model(kind == "react-send"), tools(effects), journal=journal,
                          journal_fsync=False, approve=approve)
    return PlanExecuteAgent(ScriptedModel([json.dumps(PLAN)]), tools(effects), journal=journal,
                            journal_fsync=False)  # a killed process needs no fsync: the OS has it


def go(kind: str, journal: str, effects: str, approve=None) -> str | None:
    """Run, or resume the journal's run when it has one; the answer."""
    runs = Journal(journal).runs()
    a = agent(kind, journal, effects, approve)
    result = a.resume(runs[0]["run_id"]) if runs else a.run("pay them all")
    return result.answer


def killed_at(kind: str, journal: str, effects: str, n: int) -> None:
    """In a child process: go, and be SIGKILLed right after the journal's nth write."""
    os.environ["TAO_TEST_KILL_AT"] = str(n)
    go(kind, journal, effects)
    os._exit(0)  # not killed: the run needed fewer writes


def serve() -> None:
    """A fork server of our own (``python -c "import resume_scripts; resume_scripts.serve()"``):
    tao loaded once, each line ``kind journal effects n`` on stdin run in a child forked from
    this clean, single-threaded process, and the child's end (``killed`` or ``exited``) written
    back. Forking here costs milliseconds where a fresh interpreter costs a third of a second."""
    import signal
    import sys

    for line in sys.stdin:
        kind, journal, effects, n = line.split("\t")
        pid = os.fork()
        if pid == 0:
            try:
                killed_at(kind, journal, effects, int(n))
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print("killed" if killed else "exited", flush=True)
