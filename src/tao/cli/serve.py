"""``tao serve``: the web workbench on http://127.0.0.1:8765 (see ``tao.web``).

    tao serve                              # this machine only, no token needed
    tao serve --host 0.0.0.0 --token T     # others may reach it, with the token
    tao serve --host 0.0.0.0               # a token is made and printed in the address to open
    tao serve --audit served.jsonl         # the audit log (default as tao run's; --no-audit: none)

Bound to anything but 127.0.0.1 / localhost / ::1 it never runs without a token: whoever reaches
the port could otherwise run agents (and the coding agent's commands) on this machine.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from .common import AuditOpt, JournalOpt, NoAuditOpt, app, fail

LOCAL = ("127.0.0.1", "localhost", "::1")


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="The port.")] = 8765,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="TAO_WEB_TOKEN", show_default=False,
        help="Every API request must carry it (made and printed when --host is not local).")] = None,
    journal: JournalOpt = None,
    workspaces: Annotated[Path | None, typer.Option(
        "--workspaces", file_okay=False, show_default=False,
        help="Where coding runs get their folders (default: beside the journal).")] = None,
    audit: AuditOpt = None,
    no_audit: NoAuditOpt = False,
    max_runs: Annotated[int, typer.Option(
        "--max-runs", min=1, help="Runs going at once on the whole server, all users together "
        "(each holds the embedded model or spends an endpoint's key); more get 429.")] = 16,
    workers: Annotated[bool, typer.Option(
        "--workers", help="Send runs to the pool of `tao worker` processes on --journal "
        "postgresql://... instead of running them here; their events come back through it.")]
        = False,
) -> None:
    """The web workbench: pick an agent, a model and tools, and watch the run live."""
    try:
        import uvicorn

        from ..web import create_app
    except ImportError as e:
        raise fail(f"error: tao serve needs FastAPI, uvicorn and sse-starlette, the package's "
                   f"web extra (pip install 'tao-agents[web]'): {e}", 2) from None
    if host not in LOCAL and not token:
        token = secrets.token_urlsafe(24)
    try:
        web = create_app(token=token, journal=journal, workspace_root=workspaces,
                         audit=_audit(audit, no_audit), max_runs=max_runs, workers=workers)
    except Exception as e:  # noqa: BLE001 - a journal that cannot be opened: say it, exit 2
        raise fail(f"error: {e}", 2) from None
    shown = f"[{host}]" if ":" in host else host
    where = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown}:{port}/"
    typer.echo(f"tao workbench: {where}{f'?token={token}' if token else ''}", err=True)
    uvicorn.run(web, host=host, port=port, log_level="warning")


def _audit(audit: Path | None, no_audit: bool) -> Path | bool:
    """As ``tao run`` decides it (``tao.factory.config.audit_target``); a broken tao.toml still
    lets the page open with the default log (``tao run`` says what is wrong with it)."""
    from ..factory.config import ConfigError, audit_target, load_config

    try:
        config = load_config() if not no_audit and audit is None else None
    except (ConfigError, OSError):
        config = None
    return audit_target(audit, no_audit, config)
