"""``tao worker``: join the pool that executes submitted runs (``tao.durable``)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .common import app, fail


@app.command("worker")
def worker_command(
    journal: Annotated[str | None, typer.Option(
        "--journal", metavar="URL", envvar="TAO_JOURNAL", show_default=False,
        help="The pool's PostgreSQL database (postgresql://...): its queue, its runs' journal "
        "and events. Every worker and every server that submits runs names the same one.")] = None,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-c", min=1, help="Runs this worker executes at once.")] = 2,
    queue: Annotated[str, typer.Option("--queue", help="The queue to take runs from.")] = "tao-runs",
) -> None:
    """Execute submitted runs until stopped (Ctrl-C or SIGTERM). A worker that dies has its
    runs taken over by another one within seconds; they resume from the journal, no side
    effect repeated blindly."""
    from ..runs.pg import is_url, safe

    if not is_url(journal or ""):
        raise fail("error: tao worker needs the pool's PostgreSQL database: --journal "
                   "postgresql://... (or TAO_JOURNAL)", 2)
    assert journal is not None
    try:
        from ..durable.worker import serve
    except ImportError as e:
        raise fail(f"error: tao worker needs DBOS and psycopg, the package's durable extra "
                   f"(pip install 'tao-agents[durable]'): {e}", 2) from None

    def ready(executor_id: str) -> None:
        typer.echo(f"tao worker {executor_id} (pid {os.getpid()}): taking runs from {queue!r} "
                   f"at {safe(journal)}, {concurrency} at a time", err=True)

    try:
        serve(journal, concurrency=concurrency, queue=queue, ready=ready)
    except Exception as e:  # noqa: BLE001 - a database that cannot be reached: said, exit 2
        raise fail(f"error: {safe(str(e))}", 2) from None
