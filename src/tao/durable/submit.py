"""Sending a run to the pool and reading its result, from any process (a web server, a script):
through a ``DBOSClient``, which needs no workflow code and launches nothing."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from .. import __version__

#: DBOS's application: workers take only workflows of their own version, pinned here (not DBOS's
#: default, a hash of the workflows' source) so a web server and the workers agree
APP = "tao"
VERSION = f"tao-{__version__}"
QUEUE = "tao-runs"

_CLIENTS: dict[str, Any] = {}


def _client(url: str) -> Any:
    client = _CLIENTS.get(url)
    if client is None:
        from dbos import DBOSClient

        client = _CLIENTS[url] = DBOSClient(system_database_url=url, application_name=APP,
                                            use_listen_notify=True)
    return client


def forget(url: str | None = None) -> None:
    """Close the client of ``url`` (None: every client): its listener stops. Before the
    database goes away (tests), or when a process is done submitting."""
    for key in [url] if url is not None else list(_CLIENTS):
        client = _CLIENTS.pop(key, None)
        if client is not None:
            client.destroy()


def submit(url: str, task: str, *, agent: str = "react", model: str = "auto",
           tools: Sequence[str] | None = None, max_turns: int | None = None,
           run_id: str | None = None, queue: str = QUEUE, fsync: bool = True,
           meta: dict[str, Any] | None = None) -> str:
    """Queue ``task`` for the pool at ``url`` (a PostgreSQL URL: the journal's); its run id.
    ``tools``: what ``tao run --tools`` takes (module paths; None: the calculators); ``model``:
    what ``tao run --model`` takes, or ``py:module:factory``. The same run id submitted twice
    is one run (DBOS keeps one workflow per id). ``meta``: kept in the journal's row of the run
    (the workbench keeps whose run it is there)."""
    from ..factory import AgentSpec
    from .workflow import NAME

    AgentSpec(agent=agent, max_turns=max_turns)  # a bad agent or max_turns: said here, not later
    rid = run_id or uuid.uuid4().hex
    payload = {"journal": url, "run_id": rid, "task": task, "agent": agent, "model": model,
               "tools": list(tools) if tools else None, "max_turns": max_turns, "fsync": fsync,
               "meta": meta}
    _client(url).enqueue({"queue_name": queue, "workflow_name": NAME, "workflow_id": rid,
                          "app_version": VERSION}, payload)
    return rid


def cancel(url: str, run_id: str) -> None:
    """Stop the run: a queued one never starts, a running one stops at its next step."""
    _client(url).cancel_workflow(run_id)


def result(url: str, run_id: str, timeout: float | None = None) -> Any:
    """The run's ``Result`` once a worker finished it (waiting up to ``timeout`` seconds)."""
    from ..result import Result

    handle = _client(url).retrieve_workflow(run_id)
    out = handle.get_result(polling_interval_sec=0.1) if timeout is None else \
        _within(handle, timeout)
    return Result.from_dict(out)


def _within(handle: Any, timeout: float) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = handle.get_status().status
        if status in ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            return handle.get_result(polling_interval_sec=0.1)
        time.sleep(0.1)
    raise TimeoutError(f"run {handle.workflow_id} did not finish in {timeout} s")
