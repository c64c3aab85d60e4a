"""``tao run TASK``: one agent on one task, its Thought/Action/Observation chain shown live."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from .. import safe_json
from ..agents.base import Agent, Result
from ..errors import TaoError
from ..models.base import Model
from .common import (DEFAULT_TIMEOUT_S, JournalOpt, MaxTurnsOpt, McpOpt,
                     ModelOpt, TaskArg, TaskFileOpt, TimeoutOpt, ToolsOpt, app, close_mcp, fail,
                     guard_options, guardrail_flags, is_config_error, open_mcp, open_trace, pkg,
                     read_task, settings, with_mcp)
from .named import (AgentNameOpt, OutputTypeOpt, SessionOpt, chain, is_named, output_type_of,
                    resolver, session_of, typed_name)


def build_agent(agent: str, model: Model, max_turns: int = 10,
                tools: Sequence[Any] | None = None, guard: dict[str, Any] | None = None,
                memory: Any = None, votes: int = 1, checklist: bool = False) -> Agent:
    """The agent ``--agent`` names with ``tools`` (default: the built-in calculators). CodeAct
    adds the seed's arithmetic helpers and runs its code in a sandbox: bwrap here, or
    ``$TAO_SANDBOX``. ``guard``: the guardrails' keywords (``guard_options``); ``memory``: the
    agent's ``memory=`` (``tao.memory.inject.Memory``); ``votes`` > 1: inside ``tao.Vote``;
    ``checklist``: the model first writes what a user will check (``Agent.checklist``)."""
    from ..factory import AgentSpec, build_agent as build

    return build(AgentSpec(agent, max_turns, tools, guard or {}, memory, votes,
                           checklist=checklist), model)


def run_task(task: str, model: Model, *, agent: str = "react", max_turns: int = 10,
             json_output: bool = False, trace: str | os.PathLike[str] | None = None,
             quiet: bool = False, console: Any = None,
             tools: Sequence[Any] | None = None, guard: dict[str, Any] | None = None,
             memory: Any = None, votes: int = 1, run_id: str | None = None,
             spec: Any = None, resolve: Any = None, output_type: Any = None,
             session: Any = None, checklist: bool = False) -> Result:
    """Run ``task`` the way ``tao run`` does: render it on ``console`` (a rich Console; stdout by
    default) or, with ``json_output``, print only ``Result.to_dict()`` as JSON; write a JSONL
    trace to ``trace`` when given. ``tools``, ``guard``, ``memory``: as for ``build_agent``;
    ``run_id``: continue that journaled run (``tao resume``). ``spec``: a whole
    ``tao.factory.AgentSpec`` instead (a named agent of tao.toml and its handoffs), built with
    ``resolve`` for the agents that name a model of their own. ``output_type``: the run's typed
    result (``Result.output``; printed as JSON after the answer); ``session``: a ``tao.Session``
    the run starts from and is appended to; ``checklist``: as for ``build_agent``. Returns the
    Result."""
    from ..sinks.console import ConsoleSink

    if spec is not None:
        from ..factory import build_agent as build

        runner = build(spec, model, resolve)
    else:
        runner = pkg().build_agent(agent, model, max_turns, tools=tools,
                                   **({"guard": guard} if guard else {}),
                                   **({"memory": memory} if memory is not None else {}),
                                   **({"votes": votes} if votes > 1 else {}),
                                   **({"checklist": True} if checklist else {}))
    sinks: list[Any] = []
    if trace is not None:
        sinks.append(open_trace(trace))
    if not json_output:
        if getattr(agent, "value", agent) == "plan" and not quiet and votes == 1:
            from ..sinks.plan_view import PlanView  # the DAG and its live progress

            sinks.append(PlanView(console))
        else:
            limits = getattr(model, "limits", None)  # an endpoint's refusals, learnt before
            sinks.append(ConsoleSink(console, quiet=quiet, typed=typed_name(output_type),
                                     endpoint=limits() if callable(limits) else ""))
    given: dict[str, Any] = {"session": session} if session is not None else {}
    if output_type is not None:
        given["output_type"] = output_type
    try:
        result = runner.run(task, sinks, run_id=run_id, **given)
    finally:
        for sink in sinks:
            sink.close()
    if json_output:
        typer.echo(safe_json.dumps(result.to_dict()))
    return result


@app.command("run")
@guardrail_flags()
def run_command(
    ctx: typer.Context,
    task: TaskArg = None,
    task_file: TaskFileOpt = None,
    agent: AgentNameOpt = "react",
    model: ModelOpt = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    json_output: Annotated[bool, typer.Option(
        "--json", help="Print only the result as JSON (answer, status, turns, tool_calls, usage, "
        "duration_s).",
    )] = False,
    trace: Annotated[Path | None, typer.Option(
        "--trace", dir_okay=False, help="Write every event to this JSONL file.",
    )] = None,
    max_turns: MaxTurnsOpt = 10,
    tools: ToolsOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the final answer.")] = False,
    mcp: McpOpt = None,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", hidden=True, help="Continue this journaled run (what tao resume passes).")
    ] = None,
    guard_flags: dict[str, Any] | None = None,
    docs: Annotated[Path | None, typer.Option(
        "--docs", metavar="DIR", help="Index DIR (new and changed files; see tao index) and give "
        "the agent search_docs over it: answers cite file:line.")] = None,
    memory: Annotated[bool, typer.Option(
        "--memory", help="Recall and keep what you say about yourself, as tao chat does "
        "(<data dir>/memory.sqlite3).")] = False,
    otel: Annotated[bool, typer.Option(
        "--otel", help="OpenTelemetry spans of the run, sent where the OTEL_* variables say "
        "(e.g. OTEL_EXPORTER_OTLP_ENDPOINT); as TAO_TRACING=1.")] = False,
    journal: JournalOpt = None,
    output_type: OutputTypeOpt = None,
    session_id: SessionOpt = None,
    votes: Annotated[int, typer.Option(
        "--votes", min=1, help="Self-consistency: up to N runs (the first greedy, the rest "
        "sampled) and the answer most of them reach (tao.Vote; tools without side effects).",
    )] = 1,
    checklist: Annotated[bool, typer.Option(
        "--checklist", help="Before the first turn the model writes a checklist of what the "
        "answer must satisfy; it is shown, and the agent is asked to check each item.",
    )] = False,
) -> None:
    """Run an agent on TASK with the built-in calculators or your own --tools.

    TASK may also come from stdin (-) or --task-file. A tao.toml in the working directory may set
    tools, model, agent, max_turns and timeout; options given here win."""
    task = read_task(task, task_file)
    if otel:
        from .. import tracing

        tracing.instrument()
    s = settings(ctx, tools=tools, model=model, agent=agent, max_turns=max_turns, timeout=timeout)
    named = is_named(s.agent, s.config)
    if named and votes > 1:
        raise typer.BadParameter("a chain of agents cannot vote", param_hint="'--votes'")
    if checklist and (named or votes > 1):
        raise typer.BadParameter("a checklist is for one agent's run, not a chain or a vote",
                                 param_hint="'--checklist'")
    typed = output_type_of(output_type, s.config)
    guard = guard_options(config=s.config, **(guard_flags or {}))
    from .runs import journal_for  # --journal / TAO_JOURNAL: tao resume can continue it

    if (journaled := journal_for(ctx, journal)) is not None:
        guard = {**(guard or {}), "journal": journaled}
    try:
        chosen = pkg().resolve_model(s.model, timeout=s.timeout)
    except (TaoError, ValueError) as e:
        raise fail(f"error: {e}", 2) from None
    index = None
    if docs is not None:
        from .index import open_index

        index, _ = open_index(docs)
    remembered = _memory() if memory else None
    servers = open_mcp(mcp, s.config)
    extra = [*servers, index.tool()] if index is not None else servers
    more: dict[str, Any] = {"run_id": run_id} if run_id else {}
    if votes > 1:
        more["votes"] = votes
    if checklist:
        more["checklist"] = True
    if typed is not None:
        more["output_type"] = typed
    if session_id:
        more["session"] = session_of(session_id)
    try:
        if named:
            more["spec"] = chain(s.config, s.agent, tools=with_mcp(s.tools, extra), guard=guard,
                                 max_turns=s.max_turns, memory=remembered)
            more["resolve"] = resolver(s.timeout)
        result = pkg().run_task(task, chosen, agent=s.agent, max_turns=s.max_turns,
                                json_output=json_output, trace=trace, quiet=quiet,
                                tools=with_mcp(s.tools, extra), guard=guard, memory=remembered,
                                **more)
    except KeyboardInterrupt:
        raise fail("interrupted", 130) from None
    except (TaoError, ValueError, OSError) as e:  # no sandbox here; no price for --max-cost...
        raise fail(f"error: {e}", 2) from None
    finally:
        close_mcp(servers)
        if index is not None:
            index.close()
    if index is not None and result.ok and not json_output:
        _say_source(result)
    code = 0 if result.ok else 2 if is_config_error(result.error) else 1
    if code and quiet and not json_output:
        why = result.error or f"no final answer after {result.turns} turns ({result.status})"
        raise fail(why, code)
    raise typer.Exit(code)


def _say_source(result: Any) -> None:
    """``--docs``: an answer that cites no ``[file:line]`` gets the line it was most likely read
    from, among those ``search_docs`` showed - small models answer from the passages but seldom
    copy the label (the embedded 1.5B cited 1 of 26, BENCHMARKS.md)."""
    from ..lang import detect_language
    from ..memory.rag import cite

    if _CITED.search(result.answer or ""):
        return  # the model cited a source itself
    shown = [m.content for m in result.messages if m.role == "tool" and m.name == "search_docs"]
    source = cite(result.answer or "", shown)
    if source is not None:
        zh = detect_language(result.answer or "") == "zh"
        typer.echo(f"来源：{source}" if zh else f"Source: {source}")


_CITED = re.compile(r"\[([^\[\]\n]+:p?\d+)\]")


def _memory() -> Any:
    """``--memory``: the user's store in the data directory, scoped to the login name."""
    import getpass

    from ..memory.inject import Memory, open_store

    return Memory(open_store(), user=getpass.getuser())
