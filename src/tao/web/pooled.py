"""Runs the workbench sends to a pool of workers (``tao serve --workers``, ``tao.durable``):
the run executes on whichever worker takes it, maybe on another machine, and its events come
back through PostgreSQL (``tao.runs.event_log``: each a row, with a NOTIFY) into the run's
buffer here, which the page follows over SSE as it follows a run of this server - so a page
that reconnects with ``Last-Event-ID`` loses nothing, and a worker that dies mid-run only
pauses the stream until another worker resumes the run.

What a worker cannot be given is refused here: the coding agent and tools other than the
calculators (a worker builds its tools itself), approvals (the approver is this page, not
the worker), an endpoint's key (the workers' environment gives theirs) and models other than
the built-in specs or a spec the operator mapped in ``models=`` (a string, e.g.
``"py:mymodule:factory"``): a page must never name code for a worker to import.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from ..factory import AGENTS as BUILT_IN_AGENTS  # the architectures a worker builds
from .live import LiveRun
from .setup import RunRequest
from .words import Refusal

#: what ``tao run --model`` takes that a page may ask a worker for
BUILT_IN = ("auto", "local", "local-1.5b", "local-0.5b", "openai")


def _model_spec(server: Any, req: RunRequest) -> str:
    choice = req.model
    if choice.api_key or choice.base_url:
        raise Refusal(400, "not_in_pool", what="an endpoint's key or URL from the page")
    mapped = server.models.get(choice.name)
    if isinstance(mapped, str):
        return mapped
    if choice.name in BUILT_IN:
        return f"openai:{choice.model}" if choice.name == "openai" and choice.model else choice.name
    raise Refusal(400, "not_in_pool", what=f"the model {choice.name!r}")


async def start(server: Any, session: Any, req: RunRequest, agent: str) -> LiveRun:
    """Queue the run for the pool and follow its events into a ``LiveRun``."""
    from ..durable.submit import submit

    if agent == "code":
        raise Refusal(400, "not_in_pool", what="the coding agent")
    if set(req.tools) - {"calculators"}:
        raise Refusal(400, "not_in_pool", what=", ".join(sorted(set(req.tools) - {"calculators"})))
    if req.approve:
        raise Refusal(400, "not_in_pool", what="approval")
    if req.session or req.output_schema or agent not in BUILT_IN_AGENTS:
        raise Refusal(400, "not_in_pool", what="a session, a typed output or tao.toml's agents")
    spec = _model_spec(server, req)
    server.admit(session)
    session = server.sessions.setdefault(session.id, session)
    run_id = uuid.uuid4().hex
    meta = {"web": {"session": session.key, "pool": True,
                    "request": req.model_dump(mode="json")}}
    await asyncio.to_thread(submit, server.journal_path, req.task, agent=agent, model=spec,
                            max_turns=req.max_turns, run_id=run_id, fsync=server.fsync, meta=meta)
    run = LiveRun(run_id, agent, spec, req.task)
    run.owner = session.key
    session.runs[run_id] = run
    run.task_handle = asyncio.create_task(relay(server.journal_path, run))
    return run


def found(server: Any, row: dict[str, Any]) -> LiveRun:
    """A run of the pool this server did not start (another server behind the same balancer
    did, or this one before a restart): its events so far from PostgreSQL, and - while its
    journal says it is running - the rest as they come."""
    from ..runs.event_log import EventLog

    log = EventLog(server.journal_path)
    try:
        events = log.read(row["run_id"])
    finally:
        log.close()
    run = LiveRun(row["run_id"], row["agent"] or "", row["model"] or "", row["task"] or "",
                  started=row["started"] or 0.0, status="running")
    for event in events:
        run.add(event.to_dict())
    if run.result is not None or row["status"] not in (None, "running"):
        run.finish((run.result or {}).get("status") or row["status"] or "error")
    else:
        after = run.items[-1].seq if run.items else 0
        run.task_handle = asyncio.create_task(relay(server.journal_path, run, after))
    return run


async def relay(url: str, run: LiveRun, after: int = 0) -> None:
    """The run's events from PostgreSQL into its buffer, until its ``RunFinished``; a page's
    cancel stops the run on its worker."""
    from ..durable.submit import cancel
    from ..runs.event_log import EventLog

    status = "error"
    try:
        async for event in EventLog(url).follow(run.run_id, after=after):
            if run.status == "queued":
                run.status = "running"
            run.add(event.to_dict())
        status = (run.result or {}).get("status", "error")
    except asyncio.CancelledError:
        status = "cancelled"
        await asyncio.to_thread(cancel, url, run.run_id)
    finally:
        run.finish(status)
