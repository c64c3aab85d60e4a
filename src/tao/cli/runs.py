"""``tao runs``, ``tao resume RUN_ID`` and ``tao replay TRACE.jsonl``: durable runs.

    tao run "..." --journal runs.db      # every model reply and tool result journaled
    tao code "..." --journal runs.db     # the same for tao code, and each answer of tao chat
    tao runs --journal runs.db           # id, status, agent, task, when
    tao resume 3f2a --journal runs.db    # after kill -9: continue it, nothing done twice
    tao replay run.jsonl                 # a recorded run (--trace) shown again in the console

``tao resume`` runs the command that started the run (``tao run``, ``tao code``) again as the
journal recorded it (the options given, the task, the folder it ran in), under the same run id:
what the journal holds is served from it, the rest runs live. A ``tao chat`` run is one answer:
it is asked again with the conversation it had (the agent and model it ran with, the
questions and answers before it), and the command ends after it. Exit status: as ``tao run``'s;
2 when the journal or the run is not there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import JournalOpt, app, fail

#: the commands whose runs ``tao resume`` starts again: ``run`` and ``code`` with their hidden
#: ``--run-id``, ``chat`` with its hidden ``--resume-run`` (one answer, asked again)
RESUMABLE = ("run", "code", "chat")

#: what ``tao resume`` adds, never recorded as the command's own options
_NOT_RECORDED = ("journal", "task_file", "run_id", "resume_run")


def journal_for(ctx: typer.Context, journal: str | None) -> Any:
    """``--journal FILE`` (or ``TAO_JOURNAL``) of ``tao run``, ``tao code`` and ``tao chat``
    as a journal that records how the run was started (the command's options, the folder it ran
    in), so ``tao resume`` can start it again; None without either."""
    env = os.environ.get("TAO_JOURNAL", "")
    if journal is None and env in ("", "0"):
        return None
    from ..runs.journal import Journal, JournalError

    try:
        return Journal(journal if journal is not None else (None if env == "1" else env),
                       meta={"argv": recorded_argv(ctx), "cwd": os.getcwd()}).check()
    except (JournalError, ImportError) as e:
        raise fail(f"error: {e}", 2) from None


def recorded_argv(ctx: typer.Context) -> list[str]:
    """The options the command was given, as arguments again (the task is the journal's). An
    option left at its default is left out: tao.toml's value, if it sets one, holds again."""
    import enum

    import click

    def given(name: str) -> bool:  # by name: typer bundles its own copy of click
        return getattr(ctx.get_parameter_source(name), "name", "DEFAULT") not in (
            "DEFAULT", "DEFAULT_MAP")

    out = [ctx.command.name or "run"]
    for p in ctx.command.params:
        v = ctx.params.get(p.name or "")
        if p.param_type_name == "argument" or p.name in _NOT_RECORDED or v is None \
                or not given(p.name or ""):
            continue
        opt = p.opts[0]
        if getattr(p, "is_flag", False) and not getattr(p, "secondary_opts", None):
            out += [opt] if v else []
            continue
        if isinstance(p, click.Option) and p.is_flag:  # --x/--no-x
            out.append(opt if v else p.secondary_opts[0])
            continue
        for one in (v if isinstance(v, (list, tuple)) else [v]):
            out += [opt, str(one.value if isinstance(one, enum.Enum) else one)]
    return out


def _journal(path: str | None, must_exist: bool = True) -> Any:
    from ..runs.journal import Journal, JournalError, default_path
    from ..runs.pg import is_url

    env = os.environ.get("TAO_JOURNAL", "0")
    where = path or (env if env not in ("0", "1") else str(default_path()))
    if is_url(where):
        try:
            return Journal(where).check()
        except (JournalError, ImportError) as e:
            raise fail(f"error: {e}", 2) from None
    if must_exist and not Path(where).exists():
        raise fail(f"error: no run journal at {where} (runs are journaled with --journal FILE "
                   "or TAO_JOURNAL=1)", 2)
    return Journal(where)


@app.command("runs")
def runs_command(
    journal: JournalOpt = None,
    json_output: Annotated[bool, typer.Option("--json", help="The runs as a JSON array.")] = False,
    last: Annotated[int, typer.Option("--last", min=1, help="How many runs, newest first.")] = 20,
) -> None:
    """List the journaled runs: id, status, agent, task, when it started."""
    from ..runs.journal import JournalError

    try:
        rows = _journal(journal).runs(last)
    except JournalError as e:
        raise fail(f"error: {e}", 2) from None
    if json_output:
        typer.echo(json.dumps([{k: v for k, v in r.items() if k != "meta"} for r in rows],
                              ensure_ascii=False))
        return
    if not rows:
        typer.echo("no runs")
        return
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["started"]))
        task = " ".join((r["task"] or "").split())
        task = task if len(task) <= 50 else task[:49] + "…"
        typer.echo(f"{r['run_id'][:12]}  {r['status']:<9} {r['agent'] or '-':<10} {when}  {task}")


@app.command("resume")
def resume_command(
    run_id: Annotated[str, typer.Argument(help="The run's id (a unique prefix will do).")],
    journal: JournalOpt = None,
) -> None:
    """Continue a journaled run after a crash (kill -9, OOM, a reboot): the journal's model
    replies and tool results are served, not made again; a call cut off in the middle is not
    repeated blindly (see tao.runs). Runs of tao run, tao code and tao chat (one answer)."""
    from ..runs.journal import JournalError

    store = _journal(journal)
    try:
        row = store.find(run_id)
    except JournalError as e:
        raise fail(f"error: {e}", 2) from None
    meta = row["meta"]
    argv = list(meta.get("argv") or [])
    if not argv or argv[0] not in RESUMABLE:
        raise fail(f"error: run {row['run_id']} was not started by `tao run`, `tao code` or "
                   "`tao chat` with --journal (resume it in Python: agent.resume(run_id), with "
                   "the agent built as it was)", 2)
    if row["status"] == "done":
        typer.echo(f"run {row['run_id'][:12]} is done already; its journal answers again",
                   err=True)
    args, task_file = _rebuilt(argv, row, store)
    from typer.main import get_command

    here, there = os.getcwd(), meta.get("cwd")
    try:
        if there and there != here and os.path.isdir(there):
            os.chdir(there)  # its tao.toml, its relative paths (--workspace, --tools)
        get_command(app).main(args=args, prog_name="tao", standalone_mode=True)
    finally:
        os.chdir(here)
        if task_file is not None:
            task_file.unlink(missing_ok=True)


def _rebuilt(argv: list[str], row: dict[str, Any], journal: Any) -> tuple[list[str], Path | None]:
    """The command's arguments as recorded, the task from the journal, this journal and the
    run's id (a ``tao chat`` answer: the run to answer again); and the task's temporary file."""
    import tempfile

    where = journal.url or str(journal.path.resolve())
    if argv[0] == "chat":
        return [*argv, "--resume-run", row["run_id"], "--journal", where], None
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(row["task"])
    return [*argv, "--task-file", f.name, "--journal", where, "--run-id", row["run_id"]], \
        Path(f.name)


@app.command("replay")
def replay_command(
    trace: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                          help="A JSONL trace (tao run --trace FILE).")],
    speed: Annotated[float, typer.Option(
        "--speed", min=0.0, help="Replay at this multiple of the recorded pace (0: at once).")] = 0.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the final answer.")] = False,
) -> None:
    """Show a recorded run again in the console, event by event, as it was shown live."""
    from ..sinks.console import ConsoleSink
    from ..sinks.jsonl import read_trace

    try:
        events = read_trace(trace)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise fail(f"error: {e}", 2) from None
    sink = ConsoleSink(None, quiet=quiet)
    last = None
    try:
        for event in events:
            if speed and event.ts is not None and last is not None and event.ts > last:
                time.sleep(min((event.ts - last) / speed, 5.0))
            last = event.ts if event.ts is not None else last
            sink(event)
    finally:
        sink.close()
    sys.stdout.flush()
