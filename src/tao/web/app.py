"""``create_app()``: the workbench's HTTP side - the page, its options, runs and their events.

Routes (the contract the page is written against; see the module docs of ``sessions`` and
``live`` for why runs and events are kept as they are)::

    GET  /                          the page (sets the tao_session cookie; /?token=T sets tao_token)
    GET  /static/...                its assets, shipped in the package
    GET  /api/options               agents, models, tools, the page's language
    POST /api/runs                  start a run -> 201 {"run_id"}
    GET  /api/runs                  this session's runs, live, finished and journaled
                                    (?session_name=NAME: those of one tao.Session)
    GET  /api/runs/{id}/events      SSE: id = seq, event = type, data = the event's JSON; Last-Event-ID
    GET  /api/runs/{id}/replay      {"events": [...]}
    POST /api/runs/{id}/resume      continue a run that ended in an error, from its journal
    POST /api/runs/{id}/cancel      202
    POST /api/runs/{id}/approvals   answer a gated call
    GET  /api/runs/{id}/files[/{path}]   a coding run's workspace
    POST /api/compare               react, codeact and plan on one task
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from sse_starlette import EventSourceResponse, ServerSentEvent

from .. import safe_json
from ..errors import TaoError
from .gate import MAX_BODY, Gate, session_key
from .sessions import MAX_RUNS, Server, Session
from .setup import RunRequest, options
from .words import Refusal, language, say

STATIC = Path(__file__).parent / "static"
#: how soon a browser reconnects after a dropped stream (its own default is about 3 s)
RETRY_MS = 500
PLACEHOLDER = ("<!doctype html><meta charset=utf-8><title>tao</title>"
               "<p>tao workbench: the page is not built yet (src/tao/web/static/index.html).</p>")


def unkeyed(secrets: tuple[str, ...], value: Any) -> Any:
    """``value`` (a string, or JSON's lists and dicts of them) with each of the run's secrets
    (its API key) as ``***``: what the person types goes on to the model, the journal and the
    audit log, so a key pasted in is masked where it comes in."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {unkeyed(secrets, k): unkeyed(secrets, v) for k, v in value.items()}
    if isinstance(value, list):
        return [unkeyed(secrets, v) for v in value]
    return value


class ResumeRequest(BaseModel):
    """``POST /api/runs/{id}/resume``'s optional body: an endpoint's key, never journaled."""

    api_key: str | None = None


class ApprovalAnswer(BaseModel):
    call_id: str
    verdict: str
    reason: str = ""
    arguments: dict[str, Any] | None = None


def create_app(*, token: str | None = None, journal: str | os.PathLike[str] | None = None,
               models: dict[str, Callable[..., Any]] | None = None,
               workspace_root: str | os.PathLike[str] | None = None,
               journal_fsync: bool = False,
               audit: str | os.PathLike[str] | bool | None = True,
               audit_fsync: bool = False, max_runs: int = MAX_RUNS,
               max_body: int = MAX_BODY, workers: bool = False) -> FastAPI:
    """The workbench app. ``token``: every ``/api`` request must carry it (Bearer header or the
    ``tao_token`` cookie that ``/?token=T`` sets); without one only local Host names are
    served (no DNS rebinding). ``journal``: the run journal (default: the user's ``runs.db``).
    ``models``: more named model factories for the picker (a factory may take the agent name,
    to give each compare run its own script). ``workspace_root``: where coding runs get their
    folders (default: ``workspaces/`` beside the journal). ``journal_fsync``: fsync each tool
    start as ``tao run --journal`` does; off by default because every run of the server shares
    one event loop, and a journal write that waits for the disk stalls every user's stream (50
    runs at once, ``benchmarks/web_load.py``: p95 81 ms with it, 17 ms without); the journal
    still survives a killed server, and SQLite syncs at its checkpoints. ``audit``: the audit
    log (``tao.guard``) every run's tool calls, approvals, start and end go to, as ``tao run``
    writes it - ``True`` (the default) its default file, a path, or ``None``/``False`` for none;
    the runs' API keys are never in it. ``audit_fsync``: fsync each line, as ``tao run`` does;
    off by default for the journal's reason (the guard writes on the event loop: 50 runs at
    once, p95 130 ms with it, 18 ms without); a power cut may then lose the last lines, never
    the chain's check (``tao audit verify``). ``max_runs``: runs going at once on the whole
    server (429 past it; each session has its own cap too); ``max_body``: the largest request
    body read, in bytes (413 past it). Session ids are signed with a key kept beside the journal
    (``web-session.key``), so they survive a restart and no one else can make one up.
    ``workers``: runs go to the pool of ``tao worker`` processes on ``journal``, a PostgreSQL
    URL (``tao.web.pooled``), and their events come back through it."""
    from ..runs.journal import default_path
    from ..runs.pg import is_url

    jpath: Any = journal if is_url(journal) else (
        Path(journal) if journal is not None else default_path())
    log = None
    if audit is not None and audit is not False:
        from ..guard.audit import AuditLog

        log = AuditLog(None if audit is True else audit, fsync=audit_fsync).check()  # said now
    server = Server(journal=jpath, models=models or {}, fsync=journal_fsync, audit=log,
                    max_runs=max_runs, workers=workers,
                    workspace_root=Path(workspace_root) if workspace_root is not None
                    else _home(jpath) / "workspaces")

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        yield
        await server.shutdown()  # a run cut off by the server's end is journaled as cancelled

    app = FastAPI(title="tao workbench", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    app.state.tao = server
    app.add_middleware(Gate, token=token, key=session_key(server.reader.home),
                       max_body=max_body)
    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def lang(request: Request) -> str:
        return language(request.headers.get("accept-language", ""))

    @app.exception_handler(Refusal)
    async def refused(request: Request, exc: Refusal) -> JSONResponse:
        return JSONResponse({"detail": say(lang(request), exc.key, **exc.values), "code": exc.key},
                            status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default echoes the input back: the body holds the API key
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
        where = "; ".join(f"{'.'.join(map(str, d['loc'][1:])) or 'body'}: {d['msg']}" for d in detail)
        return JSONResponse({"error": say(lang(request), "invalid", where=where), "detail": detail,
                             "code": "invalid"}, status_code=422)

    def session(request: Request) -> Session:
        return server.session(request.scope["state"]["tao_session"])

    def owned(request: Request, run_id: str) -> Any:
        run = server.find(session(request), run_id)
        if run is None:
            raise Refusal(404, "no_run", run_id=repr(run_id))
        return run

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        index = STATIC / "index.html"
        if index.is_file():
            return HTMLResponse(index.read_text(encoding="utf-8"))
        return HTMLResponse(PLACEHOLDER)

    @app.get("/api/options")
    async def get_options(request: Request) -> dict[str, Any]:
        return options(lang(request), server.models)

    async def started(request: Request, req: RunRequest, agents: list[str]) -> list[Any]:
        def unkeyed_(text: str) -> str:
            return unkeyed((req.model.api_key,) if req.model.api_key else (), text)

        # a key pasted into the task too: the run, its listing and the journal get "***"
        req = req.model_copy(update={"task": unkeyed_(req.task)})
        try:
            if len(agents) == 1:
                return [await server.start(session(request), req, agents[0])]
            return await server.compare(session(request), req)
        except Refusal as e:  # what the user typed is said back: never the key (pasted anywhere)
            e.values = {k: unkeyed_(str(v)) for k, v in e.values.items()}
            raise
        except (TaoError, ValueError, TypeError, ImportError, OSError) as e:  # the model, a tool
            raise Refusal(400, "cannot_build", error=unkeyed_(str(e))) from None

    @app.post("/api/runs", status_code=201)
    async def post_run(request: Request, req: RunRequest) -> dict[str, Any]:
        run, = await started(request, req, [req.agent])
        return {"run_id": run.run_id}

    @app.post("/api/compare", status_code=201)
    async def post_compare(request: Request, req: RunRequest) -> dict[str, Any]:
        runs = await started(request, req, ["react", "codeact", "plan"])
        return {"run_ids": {r.agent: r.run_id for r in runs}}

    @app.get("/api/runs")
    async def list_runs(request: Request, session_name: str | None = None) -> dict[str, Any]:
        # ?session_name=NAME: the earlier runs of that tao.Session (the form lists them)
        return {"runs": server.listing(session(request), conversation=session_name)}

    @app.get("/api/runs/{run_id}/events")
    async def events(request: Request, run_id: str, last_event_id: int | None = None) -> Any:
        run = owned(request, run_id)
        header = request.headers.get("last-event-id", "").strip()
        after = int(header) if header.isdigit() else (last_event_id or 0)

        stop = anyio.Event()  # set by sse-starlette when the server shuts down

        async def messages() -> Any:
            async def on_stop() -> None:
                await stop.wait()
                run.wake()

            watcher = asyncio.ensure_future(on_stop())
            yield ServerSentEvent(retry=RETRY_MS)  # no data: sets the browser's reconnect delay
            try:
                async for item in run.follow(after, stop):
                    yield ServerSentEvent(data=item.data, id=str(item.seq), event=item.type)
            finally:
                watcher.cancel()
            if not stop.is_set():  # a stopping server ends the stream without "end": the run
                yield ServerSentEvent(data=safe_json.dumps({"status": run.status}), event="end")
            # is not over for the page, which reconnects (to the journal, after a restart)

        return EventSourceResponse(messages(), ping=15, headers={"Cache-Control": "no-store"},
                                   shutdown_event=stop, shutdown_grace_period=2)

    @app.get("/api/runs/{run_id}/replay")
    async def replay(request: Request, run_id: str) -> dict[str, Any]:
        return {"events": owned(request, run_id).events()}

    @app.post("/api/runs/{run_id}/resume", status_code=201)
    async def resume(request: Request, run_id: str, body: ResumeRequest | None = None) -> Any:
        key = body.api_key if body is not None else None
        try:
            run = await server.resume(session(request), run_id, key)
        except Refusal as e:
            e.values = {k: unkeyed((key,) if key else (), str(v)) for k, v in e.values.items()}
            raise
        except (TaoError, ValueError, TypeError, ImportError, OSError) as e:
            raise Refusal(400, "cannot_build", error=unkeyed((key,) if key else (), str(e))) from None
        return {"run_id": run.run_id}

    @app.post("/api/runs/{run_id}/cancel", status_code=202)
    async def cancel(request: Request, run_id: str) -> dict[str, Any]:
        run = owned(request, run_id)
        server.cancel(run)
        return {"run_id": run_id, "status": run.status}

    @app.post("/api/runs/{run_id}/approvals")
    async def approvals(request: Request, run_id: str, answer: ApprovalAnswer) -> dict[str, Any]:
        run = owned(request, run_id)
        if run.approver is None:  # a past run read back from the journal
            raise Refusal(404, "no_approval", call_id=repr(answer.call_id))
        # a key pasted into the reason or the edited arguments: "***", as in the task
        decision = run.approver.answer(answer.call_id, answer.verdict,
                                       unkeyed(run.secrets, answer.reason),
                                       unkeyed(run.secrets, answer.arguments))
        return {"call_id": answer.call_id, "verdict": decision.verdict}

    @app.get("/api/runs/{run_id}/files")
    async def files(request: Request, run_id: str) -> dict[str, Any]:
        from .files import listing

        run = owned(request, run_id)
        return {"files": listing(run.workspace) if run.workspace is not None else []}

    @app.get("/api/runs/{run_id}/files/{path:path}")
    async def file(request: Request, run_id: str, path: str) -> Response:
        from .files import read

        run = owned(request, run_id)
        if run.workspace is None:
            raise Refusal(404, "no_workspace", run_id=repr(run_id))
        return PlainTextResponse(read(run.workspace, path))

    return app


def _home(journal: Any) -> Path:
    """The folder beside the journal file; the data directory for a journal in PostgreSQL."""
    if isinstance(journal, Path):
        return journal.expanduser().parent
    from ..paths import data_dir

    return data_dir()
