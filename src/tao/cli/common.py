"""What the commands share: the Typer app, option types, reading the task, clean failures.

``resolve_model``, ``build_agent`` and ``run_task`` are looked up on the ``tao.cli`` package when
a command runs (``pkg()``), not imported by name here, so that patching ``tao.cli.resolve_model``
(what the tests do to run the CLI on a ``ScriptedModel``) reaches every command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..paths import data_dir
from ..errors import LocalModelError, ModelConfigError
from ..factory import AGENTS

if TYPE_CHECKING:
    from ..tools.base import Tool
from ..models.base import DEFAULT_TIMEOUT_S

app = typer.Typer(
    name="tao", help="ReAct agents that show their work: Thought, Action, Observation.",
    add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
)


def pkg() -> ModuleType:
    import tao.cli  # loaded by the time a command runs

    return tao.cli


#: ``--agent``'s choices: the factory's agent names (``tao.factory.AGENTS``)
AgentKind = Enum("AgentKind", {name.replace("-", "_"): name for name in AGENTS}, type=str)


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


#: what an interactive entry asks (seed 002: "你想让 Agent 做什么？" then "> ")
ASK = {"zh": "你想让 Agent 做什么？", "en": "What should the agent do?"}


def locale_language() -> str:
    """The user's language before they have typed anything: "zh" for a Chinese locale."""
    import os

    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def check_timeout(timeout: float) -> None:
    if not (timeout > 0 and math.isfinite(timeout)):
        raise typer.BadParameter(f"must be a number of seconds above 0, not {timeout}",
                                 param_hint="'--timeout'")


def open_trace(trace: Path | str) -> Any:
    """The ``--trace`` sink, or a usage error saying why the file cannot be written."""
    from ..sinks.jsonl import JsonlTrace

    try:
        return JsonlTrace(trace)
    except OSError as e:
        raise typer.BadParameter(f"cannot write {trace}: {e.strerror or e}",
                                 param_hint="'--trace'") from None


def fail(message: str, code: int) -> typer.Exit:
    """Say ``message`` in red on stderr; the ``typer.Exit`` to raise with ``code``."""
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text(message, style="bold red"), soft_wrap=True)
    return typer.Exit(code)


#: TaoErrors that surface only at the first model call (the local weights load lazily; a bad key
#: is refused by the endpoint) but are the user's configuration all the same: exit 2, not 1.
CONFIG_ERRORS = (LocalModelError, ModelConfigError)


def is_config_error(error: str | None) -> bool:
    # Result.error is "ExceptionType: message" (see ReActAgent.stream)
    return bool(error) and error.split(":", 1)[0] in {c.__name__ for c in CONFIG_ERRORS}


@dataclass(slots=True)
class Settings:
    """The options a command runs with: the command line's, else ``tao.toml``'s, else the
    defaults. ``tools`` is ``None`` when neither names any (the command's own default);
    ``agent`` is ``None`` for a command without ``--agent`` (``tao code``)."""

    model: str
    agent: str | None
    max_turns: int
    timeout: float
    tools: list[Tool] | None
    workspace: Path | None = None
    config: Any = None  # the tao.toml read (``tao.factory.config.Config``): its guardrails, for guard_options


def settings(ctx: typer.Context, *, tools: list[str] | None, workspace: Path | None = None,
             **given: Any) -> Settings:
    """Merge the command line with ``tao.toml`` (the command line wins: an option counts as
    given unless click says it holds its default) and load the tools. ``given`` holds the
    command's options by parameter name: ``model``, ``max_turns``, ``timeout`` and, where the
    command has one, ``agent``. A bad file, a bad value in it or tools that cannot be loaded are
    usage errors (exit 2), before any model is built."""
    from ..factory.config import ConfigError, load_config
    from ..tools.loader import ToolLoadError, load_all

    try:
        config = load_config()
    except ConfigError as e:
        raise fail(f"error: {e}", 2) from None

    def defaulted(name: str) -> bool:  # by name: typer bundles its own copy of click
        return getattr(ctx.get_parameter_source(name), "name", "DEFAULT") in ("DEFAULT", "DEFAULT_MAP")

    def pick(name: str) -> Any:
        from_file = getattr(config, name)
        return from_file if from_file is not None and defaulted(name) else given.get(name)

    agent = pick("agent") if "agent" in given else None
    timeout = pick("timeout")
    check_timeout(timeout)
    if workspace is not None and config.workspace is not None and defaulted("workspace"):
        workspace = config.base / config.workspace
    loaded = None
    specs, base, hint = (tools, Path.cwd(), "'--tools'") if tools else \
        (config.tools, config.base, f"'tools' in {config.path}")
    if specs:
        try:
            loaded = load_all(specs, base=base)
        except ToolLoadError as e:
            raise typer.BadParameter(str(e), param_hint=hint) from None
    return Settings(pick("model"), getattr(agent, "value", agent), pick("max_turns"), timeout,
                    loaded, workspace, config)


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
ModelOpt = Annotated[str, typer.Option(
    "--model", "-m", help="auto | local (= local-1.5b) | local-0.5b | openai | openai:NAME. auto uses the "
    "endpoint when TAO_API_KEY, OPENAI_API_KEY, DEEPSEEK_API_KEY or TAO_BASE_URL is set, "
    "else the embedded local model.",
)]
MaxTurnsOpt = Annotated[int, typer.Option("--max-turns", min=1, help="Turn budget.")]
ToolsOpt = Annotated[list[str] | None, typer.Option(
    "--tools", "-t", metavar="PATH_OR_MODULE[:NAME]", show_default=False,
    help="Your own tools instead of the built-in calculators: the @tool functions and Toolboxes "
    "at the top level of a .py file or an importable module, or only its attribute NAME (a "
    "tool, a Toolbox or a list of tools). Repeat it for more.")]
McpOpt = Annotated[list[str] | None, typer.Option(
    "--mcp", metavar='"COMMAND ARGS" | URL', show_default=False,
    help="An MCP server whose tools the agent gets: a command line tao starts (stdio) or an "
    "http(s) URL (streamable HTTP). Repeat it for more; replaces tao.toml's mcp list.")]


def open_mcp(given: list[str] | None, config: Any = None, timeout: float = 30.0) -> list[Any]:
    """The MCP servers ``--mcp`` names (else ``tao.toml``'s ``mcp``, its commands run in the
    file's folder), each connected now: one that cannot start is a usage error (exit 2) before
    any model is paid, and the ones already started are closed. A command gets the user's
    environment, as it would from their shell (the library's default is the SDK's short safe
    list), so ``tao mcp serve --model openai`` started this way finds its key."""
    from ..factory.servers import open_servers
    from ..mcp import MCPConnectError

    specs = list(given or ())
    base = None
    if not specs and config is not None and getattr(config, "mcp", None):
        specs, base = list(config.mcp), config.base
    if not specs:
        return []
    try:
        return open_servers(specs, base, timeout)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="'--mcp'") from None
    except MCPConnectError as e:
        raise fail(f"error: {e}", 2) from None


def with_mcp(tools: list[Any] | None, servers: list[Any]) -> list[Any] | None:
    """The agent's tools: the user's (or, when there are none, the built-in calculators) and
    the MCP servers' (a clashing name gets the server's prefix)."""
    if not servers:
        return tools
    if tools is None:
        from ..tools.calculator import calculate, calculator

        tools = [calculate, calculator]
    return [*tools, *servers]


def close_mcp(servers: list[Any]) -> None:
    from ..factory.servers import close_servers

    close_servers(servers)


# -- guardrails (tao.guard): the same flags on run, code and chat ---------------------------------
_NAMES = dict(metavar="TOOL[,TOOL]", show_default=False)
AllowOpt = Annotated[list[str] | None, typer.Option(
    "--allow", **_NAMES, help="Only these tools may run (repeat or comma-separate).")]
DenyOpt = Annotated[list[str] | None, typer.Option(
    "--deny", **_NAMES, help="These tools never run; the model is told so.")]
ApprovalOpt = Annotated[list[str] | None, typer.Option(
    "--require-approval", **_NAMES, help="Ask before each call of these tools: y / n / e(dit) "
    "on a terminal; rejected with a message when stdin is not one.")]
UntrustedOpt = Annotated[list[str] | None, typer.Option(
    "--untrusted", **_NAMES, help="These tools' output is untrusted: fenced as data, and after it "
    "the --high-risk tools need approval.")]
HighRiskOpt = Annotated[list[str] | None, typer.Option(
    "--high-risk", **_NAMES, help="Tools that need approval once untrusted output was read.")]
AuditOpt = Annotated[Path | None, typer.Option(
    "--audit", metavar="FILE", dir_okay=False, show_default=False,
    help="The audit log (hash-chained JSONL) of every tool call, approval and run; default: "
    "audit.jsonl in the user data directory ($TAO_DATA_DIR).")]
NoAuditOpt = Annotated[bool, typer.Option("--no-audit", help="Write no audit log.")]
JournalOpt = Annotated[str | None, typer.Option(
    "--journal", metavar="FILE|URL", show_default=False,
    help="The run journal: every model reply and tool result, so that tao resume can continue "
    "the run after a crash - a SQLite file, or postgresql://... (any machine resumes it); "
    "TAO_JOURNAL=1: runs.db in the user data directory.")]
MaxTokensOpt = Annotated[int | None, typer.Option(
    "--max-tokens", min=1, show_default=False, help="Token budget of the run (prompt + completion).")]
MaxCostOpt = Annotated[float | None, typer.Option(
    "--max-cost", min=0, show_default=False, metavar="DOLLARS",
    help="Cost budget, priced by the model's entry in the price table ($TAO_PRICES adds yours).")]
MaxSecondsOpt = Annotated[float | None, typer.Option(
    "--max-seconds", min=0, show_default=False, help="Wall-clock budget of the run.")]
MaxToolCallsOpt = Annotated[int | None, typer.Option(
    "--max-tool-calls", min=1, show_default=False, help="Tool-call budget of the run.")]
MaxRepeatsOpt = Annotated[int | None, typer.Option(
    "--max-repeats", min=1, show_default=False,
    help="The same call (tool and arguments) may be made this many times; one more ends the run.")]


#: the guardrails' flags, by keyword: (type with its option, default)
POLICY_FLAGS: dict[str, tuple[Any, Any]] = {
    "allow": (AllowOpt, None), "deny": (DenyOpt, None), "require_approval": (ApprovalOpt, None),
    "untrusted": (UntrustedOpt, None), "high_risk": (HighRiskOpt, None),
    "audit": (AuditOpt, None), "no_audit": (NoAuditOpt, False)}
BUDGET_FLAGS: dict[str, tuple[Any, Any]] = {
    "max_tokens": (MaxTokensOpt, None), "max_cost": (MaxCostOpt, None),
    "max_seconds": (MaxSecondsOpt, None), "max_tool_calls": (MaxToolCallsOpt, None),
    "max_repeats": (MaxRepeatsOpt, None)}


def guardrail_flags(budgets: bool = True) -> Any:
    """The guardrails' flags, declared once for every command that runs tools: the decorated
    command gets them as options (``--allow`` ... ``--no-audit``, and the budgets unless
    ``budgets=False``) and receives their values as one ``guard_flags`` dict, which
    ``guard_options(config=..., **guard_flags)`` reads."""
    import functools
    import inspect

    flags = {**POLICY_FLAGS, **(BUDGET_FLAGS if budgets else {})}
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                               annotation=kind) for name, (kind, default) in flags.items()]

    def decorate(command: Any) -> Any:
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "guard_flags"]

        @functools.wraps(command)
        def with_flags(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name, default) for name, (_, default) in flags.items()}
            return command(*args, guard_flags=given, **kwargs)

        with_flags.__signature__ = sig.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        return with_flags

    return decorate


def guard_options(*, allow: list[str] | None = None, deny: list[str] | None = None,
                  require_approval: list[str] | None = None, untrusted: list[str] | None = None,
                  high_risk: list[str] | None = None, audit: Path | None = None,
                  no_audit: bool = False, config: Any = None, **budgets: Any) -> dict[str, Any]:
    """The agent keywords (``tao.guard``) the guardrail flags and ``config`` (``tao.toml``,
    ``Settings.config``) say. A flag wins over the file for ``allow``, ``audit`` and each budget;
    the lists that restrict (deny, require_approval, untrusted, high_risk) add up, so a flag
    never lifts a restriction the project set. The audit log is on unless ``--no-audit`` or
    ``audit = false``; a bad budget is a usage error here, before any model is paid."""
    from ..guard.budget import Budget

    def names(values: list[str] | None) -> list[str]:
        return [n.strip() for v in values or () for n in v.split(",") if n.strip()]

    options: dict[str, Any] = {k: v for k, v in budgets.items() if v is not None}
    for key in ("max_tokens", "max_cost", "max_seconds", "max_tool_calls", "max_repeats"):
        if key not in options and getattr(config, key, None) is not None:
            options[key] = getattr(config, key)
    try:
        Budget(**options)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if allow:
        options["allow"] = names(allow)
    elif getattr(config, "allow", None) is not None:
        options["allow"] = list(config.allow)
    for key, value in (("deny", deny), ("untrusted", untrusted), ("high_risk", high_risk)):
        merged = list(dict.fromkeys([*getattr(config, key, ()), *names(value)]))
        if merged:
            options[key] = merged
    rules: dict[str, Any] = {}
    for name, rule in getattr(config, "require_approval", {}).items():
        if rule is not False:
            from ..guard.policy import matches

            rules[name] = True if rule is True else matches(rule)
    rules.update(dict.fromkeys(names(require_approval), True))
    if rules:  # names only: a list, as the flag gives it; with a file's regex: name -> rule
        options["require_approval"] = list(rules) if all(r is True for r in rules.values()) \
            else rules
    from ..factory.config import audit_target

    if (target := audit_target(audit, no_audit, config)) is not False:
        options["audit"] = target
    if "audit" in options:  # one that cannot be written: said now, before any model is loaded
        from ..guard.audit import AuditError, AuditLog

        try:
            AuditLog(None if options["audit"] is True else options["audit"]).check()
        except AuditError as e:
            raise fail(f"error: {e}", 2) from None
    return options


__all__ = ["BUDGET_FLAGS", "POLICY_FLAGS", "guardrail_flags", "ASK", "DEFAULT_TIMEOUT_S", "AgentKind", "CONFIG_ERRORS", "MaxTurnsOpt",
           "McpOpt", "close_mcp", "open_mcp", "with_mcp",
           "ModelOpt", "Settings", "TaskArg", "TaskFileOpt", "TimeoutOpt", "ToolsOpt", "app",
           "check_timeout", "data_dir", "fail", "guard_options", "is_config_error", "locale_language", "pkg", "read_task", "settings"]
