"""Users and their runs. A session (the ``tao_session`` cookie) owns the runs it started; another
session is told they do not exist. Nothing is shared between runs: each gets its own agent,
model, tools and folder (``setup.build``), so one user's history can never reach another's
prompt (the smolagents Gradio UI shared one agent memory between all users, #703).

Every run is journaled (``tao.runs``): the journal's row has the agent, model name and task, and
its meta the session's hash (never the cookie itself), the run's trace file - the buffered,
redacted events, for replay after a restart - its workspace and the name of the
``tao.Session`` it continues (``conversation``). Those conversations are kept in
``sessions.db`` beside the journal under an id that holds the browser session's hash: the name
"ann" typed in one browser is never another browser's "ann".
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .approvals import WebApprover
from .live import LiveRun, replayed
from .setup import Built, RunRequest, build, close
from .words import Refusal

#: finished runs kept in memory, all sessions together, and past runs read back from the journal:
#: older ones are read again from the journal and their trace when asked for
KEEP, PAST = 200, 200
#: runs one session may have going at once (a compare is three)
MAX_LIVE = 8
#: runs the whole server may have going at once, all sessions together (``tao serve
#: --max-runs``): a client sending no cookie gets a new session each time, so the per-session
#: cap alone bounds nothing; each run holds the embedded model or spends an endpoint's key
MAX_RUNS = 16


def hashed(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


@dataclass
class Session:
    id: str
    runs: dict[str, LiveRun] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return hashed(self.id)


class Server:
    """What ``create_app`` serves: sessions, the journal, the model factories."""

    def __init__(self, *, journal: Any, models: dict[str, Any], workspace_root: Path,
                 fsync: bool = False, audit: Any = None, max_runs: int = MAX_RUNS,
                 workers: bool = False):
        from ..runs.journal import Journal

        if max_runs < 1:
            raise ValueError(f"max_runs must be at least 1, not {max_runs}")
        self.fsync, self.max_runs = fsync, max_runs
        #: runs go to the pool of ``tao worker`` processes on the journal's PostgreSQL
        self.workers = workers
        if workers and not isinstance(journal, str):
            raise ValueError("runs go to the workers through the journal's PostgreSQL: give "
                             "journal=postgresql://... with workers=True")
        self.audit = audit  # an AuditLog, or None
        #: the server's own handle on the journal, for listing and finding runs (each run writes
        #: through its own, which carries the run's meta)
        self.reader = Journal(journal).check()  # a bad path is said at start-up
        self.journal_path = self.reader.target  # a file, or a PostgreSQL URL
        self.traces = self.reader.home / "web-traces"
        self.models = dict(models)
        self.workspace_root = Path(workspace_root)
        self.sessions: dict[str, Session] = {}
        self._past: dict[str, LiveRun] = {}

    def session(self, session_id: str) -> Session:
        """The user's session; kept once it starts a run (a request without one costs nothing:
        a client sending no cookie gets a new id each time)."""
        return self.sessions.get(session_id) or Session(session_id)

    # -- starting runs ---------------------------------------------------------------------------
    async def start(self, session: Session, req: RunRequest, agent: str) -> LiveRun:
        """Build the run now (what cannot be built is an error for this request) and start it
        - or, with ``workers``, queue it for the pool (``web.pooled``)."""
        if self.workers:
            from . import pooled

            return await pooled.start(self, session, req, agent)
        run, built = await self._prepare(session, req, agent)
        run.task_handle = asyncio.create_task(self._drive(run, built, req.task))
        return run

    def conversation(self, session: Session, name: str) -> Any:
        """This browser session's ``tao.Session`` called ``name``."""
        from ..memory.session import Session as Conversation

        return Conversation(f"web/{session.key}/{name}", path=self.reader.home / "sessions.db")

    async def compare(self, session: Session, req: RunRequest) -> list[LiveRun]:
        """ReAct, CodeAct and Plan-and-Execute on one task, one after another (as ``tao
        compare`` does, so their seconds compare); each with its own run and events."""
        prepared = []
        try:
            for agent in ("react", "codeact", "plan"):
                prepared.append(await self._prepare(session, req, agent))
        except BaseException:  # none of the three starts: the ones built are forgotten again
            for run, built in prepared:
                await close(built)
                run.finish("error")
                self.sessions.get(session.id, session).runs.pop(run.run_id, None)
                (self.traces / f"{run.run_id}.jsonl").unlink(missing_ok=True)
            raise

        async def chain() -> None:
            for run, built in prepared:
                await self._drive(run, built, req.task)

        task = asyncio.create_task(chain())
        for run, _ in prepared:
            run.task_handle = task
        return [run for run, _ in prepared]

    async def resume(self, session: Session, run_id: str, api_key: str | None = None) -> LiveRun:
        """Run ``run_id`` again from its journal, as ``tao resume`` does: the same id, task,
        agent, model and tools; what the journal holds (model replies, tool results) is served
        from it, the rest runs live; its folder is kept. For a run that ended in an error (the
        embedded model's process died, an endpoint failed), was cancelled, or was cut off by the
        server's end. An endpoint's key is never journaled: the page sends it again."""
        run = self.find(session, run_id)
        if run is None:
            raise Refusal(404, "no_run", run_id=repr(run_id))
        if run.live or run.status == "done":
            raise Refusal(409, "not_resumable", run_id=repr(run_id), state=run.status)
        row = self._row(run_id) or {}
        asked = ((row.get("meta") or {}).get("web") or {}).get("request")
        if not asked:  # a run journaled before requests were kept
            raise Refusal(409, "not_resumable", run_id=repr(run_id), state=run.status)
        req = RunRequest.model_validate(asked)
        if api_key:
            req = req.model_copy(update={"model": req.model.model_copy(update={"api_key": api_key})})
        live, built = await self._prepare(session, req, run.agent, run_id=run_id)
        self._past.pop(run_id, None)
        live.task_handle = asyncio.create_task(self._drive(live, built, req.task))
        return live

    def admit(self, session: Session) -> None:
        """Room for one more live run, for this session and on the server; else 429."""
        if sum(r.live for r in session.runs.values()) >= MAX_LIVE:
            raise Refusal(429, "too_many", n=MAX_LIVE)
        if sum(r.live for sess in self.sessions.values() for r in sess.runs.values()) \
                >= self.max_runs:
            raise Refusal(429, "server_busy", n=self.max_runs)

    async def _prepare(self, session: Session, req: RunRequest, agent: str,
                       run_id: str | None = None) -> tuple[LiveRun, Built]:
        from ..runs.journal import Journal

        self.admit(session)
        session = self.sessions.setdefault(session.id, session)
        run_id = run_id or uuid.uuid4().hex
        trace = self.traces / f"{run_id}.jsonl"
        ws = self.workspace_root / run_id
        # what ``resume`` builds the run from again: the request, never the endpoint's key
        asked = req.model_copy(update={"model": req.model.model_copy(update={"api_key": None})})
        meta = {"web": {"session": session.key, "trace": str(trace),
                        "request": asked.model_dump(mode="json")}}
        if agent == "code" or "workspace" in req.tools:
            meta["web"]["workspace"] = str(ws)
        if req.session:
            meta["web"]["conversation"] = req.session
        journal = Journal(self.journal_path, meta=meta, fsync=self.fsync)
        approver = WebApprover()
        built = await build(req, agent, run_id=run_id, extra=self.models,
                            workspace_root=self.workspace_root, journal=journal, approver=approver,
                            audit=self.audit)
        built.closers.append(journal.close)
        if req.session:
            built.conversation = self.conversation(session, req.session)
            built.closers.append(built.conversation.close)
        try:  # journaled now, while the request waits: every run accepted is in History
            journal.start(run_id, agent, built.model_name, req.task)
        except Exception:
            await close(built)
            raise
        run = LiveRun(run_id, agent, built.model_name, req.task, secrets=built.secrets,
                      workspace=built.workspace)
        run.approver, run.journal, run.owner = approver, journal, session.key
        run.conversation = req.session
        run.open_trace(trace)
        session.runs[run_id] = run
        self._trim()
        return run, built

    def _trim(self) -> None:
        """The oldest finished runs leave memory (not the journal) past ``KEEP``, and the
        sessions left with none: a server that runs for weeks does not grow with them."""
        done = sorted((r.started, sid, r.run_id) for sid, sess in self.sessions.items()
                      for r in sess.runs.values() if not r.live)
        for _, sid, run_id in done[:max(len(done) - KEEP, 0)]:
            del self.sessions[sid].runs[run_id]
            if not self.sessions[sid].runs:
                del self.sessions[sid]

    async def _drive(self, run: LiveRun, built: Built, task: str) -> None:
        """Run the agent, buffering each event; a cancelled run ends with ``run_finished``
        whose status is "cancelled", a crashed one with status "error"."""
        from ..agents.base import Result

        if run.status == "cancelled":
            await close(built)
            return
        run.status = "running"
        status = None
        try:
            if built.warm is not None:
                await asyncio.to_thread(built.warm)
            given: dict[str, Any] = {}
            if built.output is not None:
                given["output_type"] = built.output
            if built.conversation is not None:
                given["session"] = built.conversation
            async for event in built.agent.stream(task, run_id=run.run_id, **given):
                run.add(event.to_dict())
            status = (run.result or {}).get("status", "error")
        except asyncio.CancelledError:
            status = "cancelled"
            task = asyncio.current_task()
            if task is not None:  # handled here: a compare's next run starts uncancelled
                task.uncancel()
        except Exception as e:  # noqa: BLE001 - the loop's own bug: the run ends, the server not
            status = "error"
            self._end(run, Result(None, "error", 0, 0, error=f"{type(e).__name__}: {e}"))
            self._journal_status(run, "error")
        finally:
            if status is None:
                status = "cancelled"
            if status == "cancelled":
                self._end(run, Result(None, "cancelled", 0, 0))  # type: ignore[arg-type]
                self._journal_status(run, "cancelled")
            run.approver.close()
            await close(built)
            run.finish(status)

    def _end(self, run: LiveRun, result: Any) -> None:
        if run.result is not None:
            return
        last = run.items[-1].seq if run.items else 0
        run.add({"type": "run_finished", "run_id": run.run_id, "seq": last + 1, "ts": time.time(),
                 "result": result.to_dict(with_messages=True)})

    def _journal_status(self, run: LiveRun, status: str) -> None:
        from ..runs.journal import RunJournal

        try:
            RunJournal(run.journal, run.run_id, []).finish(status)
        except Exception:  # noqa: BLE001 - a journal that cannot be written loses the status only
            pass

    def cancel(self, run: LiveRun) -> None:
        """Stop ``run``: a queued one (a compare run whose turn has not come) never starts; a
        running one is cancelled where it awaits (the model's next token, a tool's result)."""
        from ..agents.base import Result

        if not run.live:
            return
        if run.status == "queued":
            run.status = "cancelled"  # _drive sees it and does not start
            self._end(run, Result(None, "cancelled", 0, 0))  # type: ignore[arg-type]
            self._journal_status(run, "cancelled")
            run.finish("cancelled")
        elif run.task_handle is not None:
            run.task_handle.cancel()

    async def shutdown(self, grace: float = 5.0) -> None:
        """The server stops: every live run is cancelled (journaled as such, its trace closed)."""
        tasks = set()
        for session in self.sessions.values():
            for run in list(session.runs.values()):
                if run.live:
                    self.cancel(run)
                    if run.task_handle is not None:
                        tasks.add(run.task_handle)
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        self.reader.close()

    # -- finding runs ----------------------------------------------------------------------------
    def find(self, session: Session, run_id: str) -> LiveRun | None:
        """This session's run ``run_id`` (live, finished or past), else None."""
        if run_id in session.runs:
            return session.runs[run_id]
        if run_id in self._past:
            run = self._past[run_id]
            return run if run.owner == session.key else None
        row = self._row(run_id)
        if row is None or (row["meta"].get("web") or {}).get("session") != session.key:
            return None
        web = row["meta"]["web"]
        if web.get("pool"):  # a run of the pool: its events are in PostgreSQL, maybe still coming
            from . import pooled

            run = pooled.found(self, row)
            run.owner = session.key
            session.runs[run_id] = run
            return run
        try:
            with open(web["trace"], encoding="utf-8") as f:
                run = replayed(row["run_id"], row["agent"] or "", row["model"] or "", row["task"] or "",
                               _past_status(row["status"]), row["started"] or 0.0, f)
        except OSError:
            run = replayed(row["run_id"], row["agent"] or "", row["model"] or "", row["task"] or "",
                           _past_status(row["status"]), row["started"] or 0.0, [])
        run.owner = session.key
        run.workspace = Path(web["workspace"]) if web.get("workspace") else None
        run.conversation = web.get("conversation")
        self._past[run_id] = run
        while len(self._past) > PAST:
            del self._past[next(iter(self._past))]
        return run

    def _row(self, run_id: str) -> dict[str, Any] | None:
        from ..runs.journal import JournalError

        try:
            row = self.reader.find(run_id)
        except JournalError:
            return None
        return row if row["run_id"] == run_id else None

    def listing(self, session: Session, limit: int = 100,
                conversation: str | None = None) -> list[dict[str, Any]]:
        """This session's runs, newest first; ``conversation``: only those that continued the
        ``tao.Session`` of that name (the page's list of a session's earlier runs)."""
        out = {r.run_id: {"run_id": r.run_id, "agent": r.agent, "model": r.model, "task": r.task,
                          "status": r.status, "started": r.started, "live": r.live,
                          **({"session": r.conversation} if r.conversation else {})}
               for r in session.runs.values()}
        for row in self.reader.runs(limit * 10):
            web = row["meta"].get("web") or {}
            if row["run_id"] in out or web.get("session") != session.key:
                continue
            out[row["run_id"]] = {"run_id": row["run_id"], "agent": row["agent"],
                                  "model": row["model"], "task": row["task"],
                                  "status": _past_status(row["status"]),
                                  "started": row["started"], "live": False,
                                  **({"session": web["conversation"]}
                                     if web.get("conversation") else {})}
        runs = [r for r in out.values()
                if conversation is None or r.get("session") == conversation]
        return sorted(runs, key=lambda r: r["started"] or 0, reverse=True)[:limit]


def _past_status(status: str | None) -> str:
    """A journaled run that is not live in this server and never finished was cut off (the
    server was killed, the machine went down): "interrupted", not "running"."""
    return "interrupted" if status in (None, "running") else status
