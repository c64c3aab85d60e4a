"""``tao code TASK``: seed 002's coding agent - a project written file by file into a folder.

    tao code "使用 HTML + CSS + JS 生成一个贪吃蛇小游戏，代码分别放在 index.html、style.css、game.js 三个文件中"
    tao code "a todo app in one index.html" --workspace todo --model openai
    tao code                      # asks: 你想让 Agent 做什么？ / What should the agent do?

A ReAct agent with the text protocol and the workspace tools (``tao.workspace``: write,
read, list and edit files, run commands in a sandbox), plus any ``--tools`` of yours. The reply
streams as it is written; each turn's observation says what was written; the run ends with every
file in the workspace and its size. Ctrl-C stops the run (exit 130) and the files written so far
stay whole: every write is a temp file renamed into place. ``--journal FILE`` (or ``TAO_JOURNAL``)
journals the run: ``tao resume RUN_ID`` continues it after a crash, the files written and the
model's replies served from the journal, not made again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import TaoError
from ..lang import detect_language
from .common import (ASK, DEFAULT_TIMEOUT_S, JournalOpt, McpOpt, ModelOpt, TaskArg, TaskFileOpt,
                     TimeoutOpt, app, close_mcp, fail, guard_options, guardrail_flags,
                     is_config_error, locale_language, open_mcp, open_trace, pkg, read_task,
                     settings)

SANDBOXES = ("bwrap", "subprocess", "docker", "none")


def ask_task(language: str) -> str:
    """Seed 002's prompt: the question on one line, the answer after ``> `` (line editing
    where readline is there). An empty line asks again; end of input is a usage error."""
    from rich.console import Console

    try:
        import readline  # noqa: F401 - input() gets line editing
    except ImportError:  # pragma: no cover - Windows
        pass
    console = Console()
    while True:
        console.print(ASK[language], style="bold", highlight=False)
        try:
            task = input("> ").strip()
        except EOFError:
            raise typer.BadParameter("no task given (end of input)", param_hint="'TASK'") from None
        except KeyboardInterrupt:
            raise fail("\ninterrupted", 130) from None
        if task:
            return task


#: The embedded model's limits for coding: one reply holds a whole file (the 1.5B model's snake
#: game.js is ~1,500 tokens; LocalModel's default of 512 cuts it, and a cut block writes nothing)
#: and the run's history holds every file written so far.
LOCAL_MAX_TOKENS, LOCAL_N_CTX = 2048, 8192


def for_coding(model: Any) -> Any:
    """``model`` with room for a file a reply: a ``LocalModel`` not yet loaded gets at least
    ``LOCAL_MAX_TOKENS`` a reply and ``LOCAL_N_CTX`` of context; any other model is left as is."""
    from ..models.local import LocalModel  # no llama_cpp import: that happens on first load

    if isinstance(model, LocalModel):
        model.max_tokens = max(model.max_tokens, LOCAL_MAX_TOKENS)
        model.n_ctx = max(model.n_ctx, LOCAL_N_CTX)
    return model


#: what ``tao code`` asks about by default: commands that delete, fetch or take root
def build_coder(model: Any, workspace: Any, max_turns: int = 15, *, checklist: bool = False,
                attempts: int = 1, **guard: Any) -> Any:
    """The coding agent on ``workspace`` (``tao.factory``: ReAct, text protocol, a dangerous
    ``run_command`` asked about); ``guard``: the guardrail keywords; ``checklist``: the model
    writes what a user will check before its first turn; ``attempts``: runs again from the
    files as they were while ``Workspace.verify`` finds problems (``tao.Attempts``)."""
    from ..factory import CODER, AgentSpec, build_agent

    return build_agent(AgentSpec(CODER, max_turns, guard=guard, workspace=workspace,
                                 checklist=checklist, attempts=attempts), model)


@app.command("code")
@guardrail_flags()
def code_command(
    ctx: typer.Context,
    task: TaskArg = None,
    task_file: TaskFileOpt = None,
    workspace: Annotated[Path, typer.Option(
        "--workspace", "-w", file_okay=False, help="The folder the agent writes the project in "
        "(made if missing); nothing outside it is written.")] = Path("workspace"),
    model: ModelOpt = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Turn budget.")] = 15,
    tools: Annotated[list[str] | None, typer.Option(
        "--tools", "-t", metavar="PATH_OR_MODULE[:NAME]", show_default=False,
        help="More tools beside the workspace's, from a .py file or a module (as for tao run). "
        "Repeat it for more.")] = None,
    sandbox: Annotated[str | None, typer.Option(
        "--sandbox", metavar="|".join(SANDBOXES), show_default=False,
        help="Where run_command runs: bwrap (default, or $TAO_SANDBOX), subprocess, docker; "
        "none leaves run_command out (files only).")] = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", dir_okay=False, help="Write every event to this JSONL file.")] = None,
    mcp: McpOpt = None,
    checklist: Annotated[bool, typer.Option(
        "--checklist", help="Before the first turn the model writes a checklist of what a user "
        "will check (shown here), then works with it and is reminded of it before Finish.")
    ] = False,
    attempts: Annotated[int, typer.Option(
        "--attempts", min=1, help="When the finished project fails the checks made after the "
        "run (its tests, the task's commands, its pages clicked through), start again from the "
        "folder as it was, sampling: at most this many runs; the best one's files stay.")] = 1,
    guard_flags: dict[str, Any] | None = None,
    journal: JournalOpt = None,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", hidden=True, help="Continue this journaled run (what tao resume passes).")
    ] = None,
) -> None:
    """The coding agent: writes the project TASK asks for into --workspace, file by file.

    With no TASK it asks for one. Ctrl-C stops the run; the files written so far stay whole. A
    tao.toml in the working directory may set workspace, tools, model, max_turns and timeout.
    With --journal, tao resume can continue the run after a crash."""
    from .code_view import CodeView

    if sandbox is not None and sandbox not in SANDBOXES:
        raise typer.BadParameter(f"{sandbox!r} is not one of {', '.join(SANDBOXES)}",
                                 param_hint="'--sandbox'")
    s = settings(ctx, tools=tools, workspace=workspace, model=model, max_turns=max_turns,
                 timeout=timeout)
    guard = guard_options(config=s.config, **(guard_flags or {}))
    from .runs import journal_for  # --journal / TAO_JOURNAL: tao resume continues it

    if (journaled := journal_for(ctx, journal)) is not None:
        guard = {**guard, "journal": journaled}
    task = read_task(task, task_file) if task is not None or task_file is not None \
        else ask_task(locale_language())
    language = detect_language(task)
    try:
        chosen = for_coding(pkg().resolve_model(s.model, timeout=s.timeout))
    except (TaoError, ValueError) as e:
        raise fail(f"error: {e}", 2) from None
    servers = open_mcp(mcp, s.config)  # their tools join the workspace's (prefixed on a clash)
    try:
        ws = _workspace(s.workspace, language, sandbox,
                        [*(s.tools or ()), *(t for server in servers for t in server)])
    except BaseException:
        close_mcp(servers)
        raise
    view = CodeView(ws.root, language)
    sinks: list[Any] = [view]
    code = 0
    try:
        if trace is not None:
            sinks.append(open_trace(trace))
        try:
            result = build_coder(chosen, ws, s.max_turns, checklist=checklist,
                                 attempts=attempts, **guard).run(task, sinks, run_id=run_id)
        except KeyboardInterrupt:
            view.interrupted()
            code = 130
        except (TaoError, ValueError, OSError) as e:
            raise fail(f"error: {e}", 2) from None
        else:
            code = 0 if result.ok else 2 if is_config_error(result.error) else 1
    finally:
        for sink in sinks:
            sink.close()
        _close(ws)
        close_mcp(servers)
    raise typer.Exit(code)


def _workspace(root: Path, language: str, sandbox: str | None, extra: Any) -> Any:
    """The ``Workspace`` toolbox on ``root`` with the user's tools added; what cannot be made
    (no sandbox here, a folder that cannot be created, a tool named like a workspace tool) is a
    usage error."""
    from ..workspace import Workspace  # heavy (sandbox) and written alongside: lazily

    kind: str | bool | None = False if sandbox == "none" else sandbox
    try:
        ws = Workspace(root, language=language, sandbox=kind, check_pages=True)
    except OSError as e:
        raise fail(f"error: cannot use {root} as the workspace: {e.strerror or e}", 2) from None
    except (TaoError, ValueError) as e:
        raise fail(f"error: {e} (tao code --sandbox none: the file tools alone)", 2) from None
    for t in extra:
        try:
            ws.add(t)
        except ValueError as e:
            _close(ws)
            raise typer.BadParameter(f"{e}: the workspace has a tool of that name",
                                     param_hint="'--tools'") from None
    return ws


def _close(ws: Any) -> None:
    import asyncio

    try:
        asyncio.run(ws.close())
    except KeyboardInterrupt:  # a second Ctrl-C while the sandbox ends: leave it to exit
        pass


__all__ = ["ask_task", "build_coder", "code_command", "for_coding"]
