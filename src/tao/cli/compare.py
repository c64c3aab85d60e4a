"""``tao compare TASK``: ReAct, CodeAct and Plan-and-Execute on one task, side by side."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import safe_json
from ..errors import TaoError
from .common import (DEFAULT_TIMEOUT_S, TaskArg, TaskFileOpt, TimeoutOpt, app, check_timeout,
                     fail, pkg, read_task)


@app.command("compare")
def compare_command(
    task: TaskArg = None,
    task_file: TaskFileOpt = None,
    model: Annotated[str, typer.Option(
        "--model", "-m", help="auto | local (= local-1.5b) | local-0.5b | openai | openai:NAME (as for run).",
    )] = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    agents: Annotated[str, typer.Option(
        "--agents", help="Comma-separated agents to compare: react, react-text, codeact, plan.",
    )] = "react,codeact,plan",
    json_output: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Run ReAct, CodeAct and Plan-and-Execute on TASK in turn; print them side by side."""
    from ..compare import compare, render_table

    task = read_task(task, task_file)
    check_timeout(timeout)
    try:
        chosen = pkg().resolve_model(model, timeout=timeout)
    except (TaoError, ValueError) as e:
        raise fail(f"error: {e}", 2) from None
    try:
        rows = compare(task, chosen, [a.strip() for a in agents.split(",") if a.strip()])
    except ValueError as e:
        raise fail(f"error: {e}", 2) from None
    except KeyboardInterrupt:
        raise fail("interrupted", 130) from None
    if json_output:
        typer.echo(safe_json.dumps([r.to_dict() for r in rows]))
    else:
        render_table(rows, title=task)
    raise typer.Exit(0 if all(r.status == "done" for r in rows if r.note is None) else 1)
