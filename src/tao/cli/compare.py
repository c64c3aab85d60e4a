"""``tao compare TASK``: ReAct, CodeAct and Plan-and-Execute on one task, side by side - and
tao.toml's named agents among them (``--agents react,triage``: the triage chain, handoffs and
all, as ``tao run --agent triage`` runs it), so a chain is measured against a single loop."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .. import safe_json
from ..errors import TaoError
from .common import (DEFAULT_TIMEOUT_S, ModelOpt, TaskArg, TaskFileOpt, TimeoutOpt, app, fail,
                     pkg, read_task, settings)
from .named import chain, is_named, resolver


@app.command("compare")
def compare_command(
    ctx: typer.Context,
    task: TaskArg = None,
    task_file: TaskFileOpt = None,
    model: ModelOpt = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    agents: Annotated[str, typer.Option(
        "--agents", help="Comma-separated agents to compare: react, react-text, react-json, "
        "codeact, plan, or the NAME of an [agents.NAME] table in tao.toml (with its handoffs).",
    )] = "react,codeact,plan",
    json_output: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Run ReAct, CodeAct and Plan-and-Execute (or the --agents named) on TASK in turn; print
    them side by side. A tao.toml in the working directory may set the model, timeout, tools
    and max_turns, and name agents with their handoffs ([agents.NAME])."""
    from ..compare import compare, render_table

    task = read_task(task, task_file)
    s = settings(ctx, tools=None, model=model, timeout=timeout)
    if s.tools is None:  # every row gets the same tools: the seed's four-operation calculator
        from ..tools.calculator import calculator

        s.tools = [calculator]
    picked: list[Any] = []
    for name in dict.fromkeys(a.strip() for a in agents.split(",") if a.strip()):
        picked.append(chain(s.config, name, tools=s.tools, guard={}, max_turns=s.max_turns)
                      if is_named(name, s.config, "'--agents'") else name)
    try:
        chosen = pkg().resolve_model(s.model, timeout=s.timeout)
    except (TaoError, ValueError) as e:
        raise fail(f"error: {e}", 2) from None
    try:
        rows = compare(task, chosen, picked, tools=s.tools, max_turns=s.max_turns or 10,
                       resolve=resolver(s.timeout))
    except ValueError as e:
        raise fail(f"error: {e}", 2) from None
    except KeyboardInterrupt:
        raise fail("interrupted", 130) from None
    if json_output:
        typer.echo(safe_json.dumps([r.to_dict() for r in rows]))
    else:
        render_table(rows, title=task)
    raise typer.Exit(0 if all(r.status == "done" for r in rows if r.note is None) else 1)
