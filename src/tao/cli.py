"""The ``tao`` command: ``tao run TASK`` shows the agent's Thought/Action/Observation chain live.

    tao run "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
    tao run "What is 15 * 27?" --agent react-text --model openai:gpt-4o-mini --trace run.jsonl
    tao run "..." --json          # the Result as JSON on stdout, nothing else
    tao run - < task.txt          # a long task from stdin (or --task-file task.txt), UTF-8
    tao run "..." --timeout 120   # a slow endpoint: wait up to 120 s for each token

Exit status: 0 when the agent answered, 1 when it did not (turn limit or error, e.g. an endpoint
that timed out or broke off mid-answer), 2 for usage errors (bad options, no task or an empty one,
a task file that is missing or not UTF-8, an unknown model, a model that cannot be built or
loaded: missing key, bad checksum, a key the endpoint refuses, a URL that does not answer the
OpenAI protocol), 130 when interrupted.

``build_agent`` and ``run_task`` are importable so the command's behaviour can be reused (and
tested with a ``ScriptedModel`` by patching ``tao.cli.resolve_model``).
"""

from __future__ import annotations

import math
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from . import __version__, safe_json
from .agents.base import Agent, Result
from .errors import LocalModelError, ModelConfigError, TaoError
from .models.base import DEFAULT_TIMEOUT_S, Model
from .models.resolve import resolve_model
from .sinks.console import ConsoleSink
from .sinks.jsonl import JsonlTrace
from .tools.calculator import calculate, calculator

app = typer.Typer(
    name="tao", help="ReAct agents that show their work: Thought, Action, Observation.",
    add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
)


class AgentKind(str, Enum):
    react = "react"
    react_text = "react-text"
    codeact = "codeact"
    plan = "plan"


def build_agent(agent: str, model: Model, max_turns: int = 10) -> Agent:
    """The agent ``--agent`` names, with the built-in calculators as its tools (CodeAct adds the
    seed's arithmetic helpers and runs its code in a sandbox: bwrap here, or ``$TAO_SANDBOX``)."""
    from .compare import build

    return build(getattr(agent, "value", agent), model, [calculate, calculator], max_turns)


def run_task(task: str, model: Model, *, agent: str = "react", max_turns: int = 10,
             json_output: bool = False, trace: str | os.PathLike[str] | None = None,
             quiet: bool = False, console: Any = None) -> Result:
    """Run ``task`` the way ``tao run`` does: render it on ``console`` (a rich Console; stdout by
    default) or, with ``json_output``, print only ``Result.to_dict()`` as JSON; write a JSONL
    trace to ``trace`` when given. Returns the Result."""
    runner = build_agent(agent, model, max_turns)
    sinks: list[Any] = []
    if trace is not None:
        try:
            sinks.append(JsonlTrace(trace))
        except OSError as e:
            raise typer.BadParameter(f"cannot write {trace}: {e.strerror or e}",
                                     param_hint="'--trace'") from None
    if not json_output:
        if getattr(agent, "value", agent) == "plan" and not quiet:
            from .sinks.plan_view import PlanView  # the DAG and its live progress

            sinks.append(PlanView(console))
        else:
            sinks.append(ConsoleSink(console, quiet=quiet))
    try:
        result = runner.run(task, sinks)
    finally:
        for sink in sinks:
            sink.close()
    if json_output:
        typer.echo(safe_json.dumps(result.to_dict()))
    return result


def read_task(task: str | None, task_file: Path | None = None) -> str:
    """The task from TASK, from stdin when TASK is ``-``, or from ``--task-file`` (UTF-8; a BOM is
    dropped), with surrounding whitespace removed. What cannot be a task - none, both, an empty
    one, bytes that are not UTF-8 - is a usage error here, before any model is built or paid."""
    if task is not None and task_file is not None:
        raise typer.BadParameter("give the task as TASK or with --task-file, not both",
                                 param_hint="'TASK' / '--task-file'")
    if task is None and task_file is None:
        raise typer.BadParameter("missing: give the task, '-' to read it from stdin, or "
                                 "--task-file FILE", param_hint="'TASK'")
    if task_file is not None:
        where, hint = f"{task_file}", "'--task-file'"
        try:
            data = task_file.read_bytes()
        except OSError as e:
            raise typer.BadParameter(f"cannot read {task_file}: {e.strerror or e}",
                                     param_hint=hint) from None
    elif task == "-":
        where, hint = "stdin", "'TASK'"
        data = typer.get_binary_stream("stdin").read()
    else:
        where, hint, data = "", "'TASK'", None
    if data is not None:
        try:
            task = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise typer.BadParameter(
                f"{where} is not UTF-8 text (byte {e.start} is {data[e.start:e.start + 1]!r}); "
                f"save it as UTF-8", param_hint=hint) from None
    task = (task or "").strip()
    if not task:
        raise typer.BadParameter(f"the task is empty{f' ({where})' if where else ''}",
                                 param_hint=hint)
    return task


def _check_timeout(timeout: float) -> None:
    if not (timeout > 0 and math.isfinite(timeout)):
        raise typer.BadParameter(f"must be a number of seconds above 0, not {timeout}",
                                 param_hint="'--timeout'")


def _fail(message: str, code: int) -> typer.Exit:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text(message, style="bold red"), soft_wrap=True)
    return typer.Exit(code)


TaskArg = Annotated[str | None, typer.Argument(
    metavar="TASK", show_default=False,
    help="The task or question, in any language; - reads it from stdin.")]
TaskFileOpt = Annotated[Path | None, typer.Option(
    "--task-file", "-f", exists=True, dir_okay=False, readable=True,
    help="Read the task from this UTF-8 file instead (for a long task).", show_default=False)]
TimeoutOpt = Annotated[float, typer.Option(
    "--timeout", metavar="SECONDS",
    help="Seconds an endpoint may stay silent (before its first token, between two chunks); a "
    "silent attempt is tried once more, so a dead endpoint fails after about twice this. Not "
    "used by the embedded model.")]


@app.command("run")
def run_command(
    task: TaskArg = None,
    task_file: TaskFileOpt = None,
    agent: Annotated[AgentKind, typer.Option(
        "--agent", "-a", help="react: native tool calls; react-text: the Thought/Action text protocol; "
        "codeact: the model writes Python that runs in a sandbox; plan: Plan-and-Execute (the "
        "plan's DAG drawn with its live progress).",
    )] = AgentKind.react,
    model: Annotated[str, typer.Option(
        "--model", "-m", help="auto | local (= local-0.5b) | local-1.5b | openai | openai:NAME. auto uses the "
        "endpoint when TAO_API_KEY, OPENAI_API_KEY, DEEPSEEK_API_KEY or TAO_BASE_URL is set, "
        "else the embedded local model.",
    )] = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    json_output: Annotated[bool, typer.Option(
        "--json", help="Print only the result as JSON (answer, status, turns, tool_calls, usage, "
        "duration_s).",
    )] = False,
    trace: Annotated[Path | None, typer.Option(
        "--trace", dir_okay=False, help="Write every event to this JSONL file.",
    )] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Turn budget.")] = 10,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the final answer.")] = False,
) -> None:
    """Run an agent on TASK (or the task read from stdin or --task-file) with the built-in
    calculator tools."""
    task = read_task(task, task_file)
    _check_timeout(timeout)
    try:
        chosen = resolve_model(model, timeout=timeout)
    except (TaoError, ValueError) as e:
        raise _fail(f"error: {e}", 2) from None
    try:
        result = run_task(task, chosen, agent=agent.value, max_turns=max_turns,
                          json_output=json_output, trace=trace, quiet=quiet)
    except KeyboardInterrupt:
        raise _fail("interrupted", 130) from None
    except TaoError as e:  # e.g. SandboxUnavailable: no sandbox backend works here
        raise _fail(f"error: {e}", 2) from None
    code = 0 if result.ok else 2 if _is_config_error(result.error) else 1
    if code and quiet and not json_output:
        why = result.error or f"no final answer after {result.turns} turns ({result.status})"
        raise _fail(why, code)
    raise typer.Exit(code)


#: TaoErrors that surface only at the first model call (the local weights load lazily; a bad key
#: is refused by the endpoint) but are the user's configuration all the same: exit 2, not 1.
_CONFIG_ERRORS = (LocalModelError, ModelConfigError)


def _is_config_error(error: str | None) -> bool:
    # Result.error is "ExceptionType: message" (see ReActAgent.stream)
    return bool(error) and error.split(":", 1)[0] in {c.__name__ for c in _CONFIG_ERRORS}


@app.command("compare")
def compare_command(
    task: TaskArg = None,
    task_file: TaskFileOpt = None,
    model: Annotated[str, typer.Option(
        "--model", "-m", help="auto | local (= local-0.5b) | local-1.5b | openai | openai:NAME (as for run).",
    )] = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    agents: Annotated[str, typer.Option(
        "--agents", help="Comma-separated agents to compare: react, react-text, codeact, plan.",
    )] = "react,codeact,plan",
    json_output: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Run ReAct, CodeAct and Plan-and-Execute on TASK in turn; print them side by side."""
    from .compare import compare, render_table

    task = read_task(task, task_file)
    _check_timeout(timeout)
    try:
        chosen = resolve_model(model, timeout=timeout)
    except (TaoError, ValueError) as e:
        raise _fail(f"error: {e}", 2) from None
    try:
        rows = compare(task, chosen, [a.strip() for a in agents.split(",") if a.strip()])
    except ValueError as e:
        raise _fail(f"error: {e}", 2) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", 130) from None
    if json_output:
        typer.echo(safe_json.dumps([r.to_dict() for r in rows]))
    else:
        render_table(rows, title=task)
    raise typer.Exit(0 if all(r.status == "done" for r in rows if r.note is None) else 1)


from .evals.cli import eval_command  # noqa: E402 - tao eval lives in its own room

app.command("eval")(eval_command)


@app.command("version")
def version_command() -> None:
    """Print tao's version."""
    typer.echo(f"tao {__version__}")


def main() -> None:
    """Console-script entry point (``tao``). Text the terminal cannot encode (a lone surrogate a
    model wrote, a non-UTF-8 locale) is printed as a backslash escape instead of ending the run."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    app(prog_name="tao")
