"""What every command that runs an agent shares for issue 28 without Python: ``--agent`` naming
an architecture or a ``[agents.NAME]`` of tao.toml, ``--output-type`` and ``--session`` - each
flag declared once here, and the checks behind them, so ``tao run``, ``tao chat``, ``tao compare``
and ``tao mcp serve`` cannot drift apart on what a name, a schema or a session means.

    tao run  "6 * 7?" --agent triage --output-type schemas/report.json --session s1
    tao chat --agent triage --output-type '{"type": "integer"}' --session s1
    tao compare "6 * 7?" --agents react,triage
    tao mcp serve --agent triage

A named agent always comes with its handoffs: the chain is ``tao.factory.team.chain_spec``'s
tree, built by ``tao.factory.build_agent`` like every other agent. ``tao eval`` (which sits below
the CLI) reads the same tables with the same ``chain_spec``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from ..factory import AGENTS

#: ``--agent``: an architecture or tao.toml's named agent (tao run, tao chat)
AgentNameOpt = Annotated[str, typer.Option(
    "--agent", "-a", metavar="AGENT", help="react: native tool calls; react-text: the "
    "Thought/Action text protocol; react-json: a JSON decision each turn; codeact: the model "
    "writes Python that runs in a sandbox; plan: Plan-and-Execute (the plan's DAG drawn live); "
    "or the NAME of an [agents.NAME] table in tao.toml, built with its handoffs.")]
#: ``--output-type``: a typed result, as ``tao.factory.outputs`` reads it
OutputTypeOpt = Annotated[str | None, typer.Option(
    "--output-type", metavar="SCHEMA.json | JSON | py:module:Class", show_default=False,
    help="A typed result: the answer must validate against this JSON Schema (a file, or inline) "
    "or pydantic type, and the validated value is printed after it (tao run -q: only it, as "
    "JSON; --json: as \"output\"). Replaces tao.toml's output_type.")]
#: ``--session``: a ``tao.Session`` by name, shared by tao run and tao chat
SessionOpt = Annotated[str | None, typer.Option(
    "--session", metavar="NAME", help="The conversation is this tao.Session (in <data "
    "dir>/sessions.db): it starts from the session's earlier questions and answers, and each "
    "new one is appended - tao run --session and tao chat --session NAME go on from each other.")]


def is_named(agent: str | None, config: Any, hint: str = "'--agent'") -> bool:
    """Whether ``agent`` is one of tao.toml's ``[agents.NAME]`` (else an architecture); a
    name that is neither is a usage error listing both, before any model is built."""
    tables = getattr(config, "agents", None) or {}
    if agent in tables:
        return True
    if agent not in AGENTS:
        raise typer.BadParameter(f"{agent!r} is neither an agent ({', '.join(AGENTS)}) nor "
                                 f"an [agents.NAME] of tao.toml ({', '.join(tables) or 'none'})",
                                 param_hint=hint)
    return False


def output_type_of(given: str | None, config: Any) -> Any:
    """``--output-type``, else tao.toml's ``output_type`` (a schema file read from its folder),
    as ``output_type=`` takes it; a bad one is a usage error before any model is built."""
    from ..factory.outputs import output_type

    if given is None and getattr(config, "output_type", None) is None:
        return None
    try:
        return output_type(given, Path.cwd()) if given is not None else \
            output_type(config.output_type, config.base)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="'--output-type'" if given is not None
                                 else f"'output_type' in {config.path}") from None


def typed_name(output_type: Any) -> str | None:
    """What the console calls the run's typed result ("Output (Person): ..."), or None."""
    if output_type is None:
        return None
    from ..output import Output

    return getattr(Output.of(output_type), "name", None)


def session_of(name: str | None) -> Any:
    """``--session NAME``'s ``tao.Session`` (``<data dir>/sessions.db``), or None."""
    if not name:
        return None
    from ..memory.session import Session

    return Session(name)


def chain(config: Any, name: str, *, tools: Sequence[Any] | None, guard: Mapping[str, Any],
          max_turns: int | None, memory: Any = None) -> Any:
    """The ``AgentSpec`` tree of tao.toml's agent ``name`` and every agent it may hand to
    (``tao.factory.team.chain_spec``); a table whose tools cannot be loaded is a usage error."""
    from ..factory.team import chain_spec

    try:
        return chain_spec(config.agents, name, tools=tools, guard=guard, max_turns=max_turns,
                          base=config.base, memory=memory)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint=f"[agents.{name}] in {config.path}") from None


def resolver(timeout: float) -> Callable[[str], Any]:
    """The model of an agent whose table names one (``model = "openai:..."``), resolved as
    ``--model`` is (looked up on ``tao.cli`` when it runs, so a test's patch reaches it)."""
    from .common import pkg

    return lambda spec: pkg().resolve_model(spec, timeout=timeout)


__all__ = ["AgentNameOpt", "OutputTypeOpt", "SessionOpt", "chain", "is_named", "output_type_of",
           "resolver", "session_of", "typed_name"]
