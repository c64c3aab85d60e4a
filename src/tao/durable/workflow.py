"""The one workflow: a run of an agent, as a worker executes it.

The workflow builds the agent from the submitted payload and runs it under its run id with the
journal in the same PostgreSQL database. Each model call and each tool call of the run is a DBOS
step (``tao.runs.steps``, which the worker enables): when DBOS recovers the workflow on another
worker, it serves the steps already done in order, and the journal inside each step decides
what a call cut short may do (run again, reuse its idempotency key, or ask) - the at-least-once
of a DBOS step is never a side effect done twice.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the workflow's name in DBOS: what ``submit`` enqueues and every worker registers
NAME = "tao.run"


def load_model(spec: str) -> Any:
    """A model spec: what ``tao run --model`` takes, or ``py:module:factory`` - a function of
    no arguments returning a model (a scripted one in tests, a custom client)."""
    if spec.startswith("py:"):
        module, _, attr = spec[3:].partition(":")
        if not module or not attr:
            raise ValueError(f"model {spec!r}: write py:module:function")
        return getattr(importlib.import_module(module), attr)()
    from ..models.resolve import resolve_model

    return resolve_model(spec)


def execute(payload: dict[str, Any]) -> dict[str, Any]:
    """Run the payload's task with the agent it names; its Result as a dict (without the
    conversation: the journal has it). Called by the DBOS workflow, or directly."""
    from ..factory import AgentSpec, build_agent
    from ..runs.event_log import EventLog
    from ..runs.journal import Journal
    from ..tools.loader import load_all

    url, run_id = payload["journal"], payload["run_id"]
    tools = load_all(payload["tools"]) if payload.get("tools") else None
    journal = Journal(url, fsync=payload.get("fsync", True), meta=payload.get("meta"))
    spec = AgentSpec(agent=payload.get("agent", "react"), max_turns=payload.get("max_turns"),
                     tools=tools, guard={"journal": journal})
    agent = build_agent(spec, load_model(payload.get("model", "auto")))
    events = EventLog(url)
    try:
        result = agent.run(payload["task"], sinks=[events.sink(run_id)], run_id=run_id)
    finally:
        events.close()
        journal.close()
    out = result.to_dict()
    out.pop("messages", None)
    return out


def register() -> Any:
    """The workflow, registered with DBOS (once per process, before ``DBOS.launch``)."""
    from dbos import DBOS

    global _registered
    if _registered is None:
        _registered = DBOS.workflow(name=NAME)(_run)
    return _registered


def _run(payload: dict[str, Any]) -> dict[str, Any]:
    return execute(payload)


_registered: Any = None
