"""``tao eval SUITE``: agents scored on a benchmark, side by side.

    tao eval bfcl --agent react --limit 200
    tao eval humaneval --agent codeact --out runs/he       # again with the same --out: resumes
    tao eval tasks.jsonl --agent react,codeact,plan --workers 2
    tao eval calculator --workers 2 --executor ray
    tao eval bfcl --model openai --concurrency 50          # 50 tasks at once against the endpoint
    tao eval calculator --agent react,triage               # tao.toml's [agents.triage], handoffs and all

A progress bar (done/total, solved so far, time left) on stderr while it runs; then one row per
agent: score, parse-failure rate, mean turns, tool calls, tokens, seconds per task. ``--json``
prints only that table as JSON. Exit status 0 when every task ran (whatever the score), 2 for a
usage error or a setup the run cannot go on with (no model, no sandbox), 130 when interrupted
(what finished is kept in ``--out``).

``--concurrency N`` runs N tasks at once in each process on one event loop - for endpoint
models, whose time is the network's; ``--workers W`` with it keeps W x N in flight. The
embedded model answers one call at a time, so with it each process runs its tasks one after
another and a note on stderr says so (the same command line works with and without a key).

An ``--agent`` that is no architecture names an ``[agents.NAME]`` of the tao.toml in the working
directory, as in ``tao run --agent NAME``: each task runs that agent with its handoffs, the
suite's tools given to every agent of the chain whose table names none of its own.

Registered on ``tao.cli.app`` by one line there; everything heavy is imported when it runs.
"""

from __future__ import annotations

import json
import shlex
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import TaoError


class Executor(str, Enum):
    local = "local"
    ray = "ray"


def _fail(message: str, code: int) -> typer.Exit:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text(message, style="bold red"), soft_wrap=True)
    return typer.Exit(code)


def _note(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text(message, style="yellow"), soft_wrap=True)


def eval_command(
    suite: Annotated[str, typer.Argument(help="calculator | bfcl | bfcl:simple,irrelevance,... | "
                                         "humaneval | a .jsonl file of {\"question\", \"answer\"}.")],
    agent: Annotated[str, typer.Option(
        "--agent", "-a", help="Comma-separated agents, compared side by side: react, react-text, "
        "react-json, codeact, plan, or the NAME of an [agents.NAME] table in tao.toml (with its "
        "handoffs).")] = "react",
    model: Annotated[str, typer.Option(
        "--model", "-m", help="As for tao run: auto | local (= local-1.5b) | local-0.5b | openai | openai:NAME.",
    )] = "auto",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N tasks.")] = None,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip the first N tasks (with "
                                        "--limit: a slice; slices may share one --out).")] = 0,
    workers: Annotated[int, typer.Option(
        "--workers", min=1, help="Processes (or Ray actors), each loading the model once.")] = 1,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", min=1, help="Tasks at once in each process, on one event loop (endpoint "
        "models; the embedded model answers one at a time). With --workers W: W x N in flight.",
    )] = 1,
    executor: Annotated[Executor, typer.Option(
        "--executor", help="local: this machine's processes; ray: Ray actors (RAY_ADDRESS joins "
        "a cluster).")] = Executor.local,
    out: Annotated[Path | None, typer.Option(
        "--out", file_okay=False, help="Write results.jsonl, transcripts.jsonl (each task's "
        "messages), report.md and scores.svg here; the same --out again resumes, skipping "
        "finished tasks.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print only the summary as JSON.")] = False,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Turn budget per task "
                                           "(BFCL: always 1, one response).")] = 10,
    votes: Annotated[int, typer.Option(
        "--votes", min=1, help="Self-consistency: up to N runs per task (the first greedy, the "
        "rest sampled), the majority answer counts (tao.Vote; word-problem suites).")] = 1,
) -> None:
    """Score agents on a benchmark: BFCL, HumanEval, the calculator word problems or your JSONL."""
    from .runner import EvalAborted, Evaluation, one_at_a_time

    agents = [a.strip() for a in agent.split(",") if a.strip()]
    try:
        from ..models.resolve import resolve_model

        chosen = resolve_model(model)  # a bad spec or key fails here, not in every worker
        one = workers == 1 and executor is Executor.local
        ev = Evaluation(suite, agents, chosen if one else model, limit=limit, offset=offset,
                        workers=workers, executor=executor.value, out=out, max_turns=max_turns,
                        label=model, concurrency=concurrency, votes=votes, team=_team(agents))
    except (TaoError, ValueError, ImportError) as e:
        raise _fail(f"error: {e}", 2) from None
    if concurrency > 1 and one_at_a_time(chosen):
        _note(f"note: {chosen.name} runs in this process and answers one call at a time, so each "
              f"process runs its tasks one after another (--concurrency {concurrency} is for "
              f"endpoint models; --workers N runs N processes, each with its own copy)")
    try:
        _run(ev, quiet=json_output)
    except EvalAborted as e:
        raise _fail(f"error: {e}", 2) from None
    except (TaoError, ImportError) as e:
        raise _fail(f"error: {type(e).__name__}: {e}", 2) from None
    except KeyboardInterrupt:
        kept = f"; finished tasks are in {out}: the same command resumes" if out else ""
        raise _fail(f"interrupted{kept}", 130) from None
    from .report import render, summarize, write

    rows = summarize(ev.records(), ev.agents)
    if json_output:
        typer.echo(json.dumps({"suite": ev.suite.name, "model": model, "agents": rows},
                              ensure_ascii=False))
    else:
        votes_note = f", {votes} votes" if votes > 1 else ""
        render(rows, title=f"tao eval {ev.suite.name} ({model}, {len(ev.tasks)} tasks{votes_note})")
    if out is not None:
        command = "tao eval " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(
            sys.argv) > 2 and sys.argv[1] == "eval" else None
        paths = write(out, rows, ev.records(), ev.store.meta(), command)
        if not json_output:
            typer.echo("wrote " + ", ".join(str(p) for p in [ev.store.path, *paths]))
    raise typer.Exit(0)


def _team(agents: list[str]) -> Any:
    """tao.toml's named agents, read only when ``--agent`` names one that is no architecture
    (a project's broken tao.toml does not stop ``tao eval --agent react``); ``ConfigError``
    (a ``TaoError``) for a file that cannot be used."""
    from ..factory import ARCHITECTURE

    if all(a in ARCHITECTURE for a in agents):
        return None
    from ..factory.config import load_config
    from .runner import Team

    config = load_config()
    return Team(config.agents, config.base)


def _run(ev: Any, quiet: bool) -> None:
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    done = ev.total - len(ev.pending())
    solved = sum(bool(r["correct"]) for r in ev.records())
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("solved {task.fields[solved]}"), TimeElapsedColumn(),
               TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), disable=quiet) as progress:
        bar = progress.add_task(ev.suite.name, total=ev.total, completed=done, solved=solved)
        for record in ev.run():
            solved += bool(record["correct"])
            progress.update(bar, advance=1, solved=solved)
