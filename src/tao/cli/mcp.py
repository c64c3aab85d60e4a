"""``tao mcp serve``: tao's tools and agents as an MCP server, for any MCP client.

    tao mcp serve                                  # the calculators over stdio
    tao mcp serve --tools examples/weather.py --agents --model openai
    tao mcp serve --agents --http --port 8000      # streamable HTTP at http://127.0.0.1:8000/mcp

A client (Claude Desktop, another tao: ``tao run --mcp "tao mcp serve --agents"``) lists the
tools and calls them; with ``--agents`` it also gets ``react``, ``codeact`` and ``plan``, each
a tool taking a ``task`` and returning the agent's answer. Over stdio the protocol owns stdout,
so everything else tao would say goes to stderr; over HTTP the server listens on 127.0.0.1 only
unless ``--host`` says otherwise, and says its URL on stderr (``--port 0``: a free port).
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import TaoError
from .common import (DEFAULT_TIMEOUT_S, MaxTurnsOpt, ModelOpt, TimeoutOpt, ToolsOpt, app, fail,
                     pkg)

mcp_app = typer.Typer(name="mcp", no_args_is_help=True,
                      help="MCP: serve tao's tools and agents to MCP clients.")
app.add_typer(mcp_app, name="mcp")


@mcp_app.command("serve")
def serve_command(
    tools: ToolsOpt = None,
    agents: Annotated[bool, typer.Option(
        "--agents", help="Also serve each agent (react, codeact, plan) as a tool taking a task; "
        "they run on --model with the served tools.")] = False,
    agent: Annotated[list[str] | None, typer.Option(
        "--agent", metavar="react|codeact|plan", show_default=False,
        help="Serve only these agents (repeat it); implies --agents.")] = None,
    model: ModelOpt = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    max_turns: MaxTurnsOpt = 10,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option("--host", help="The address --http listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="The port --http listens on (0: a free one).")] = 8000,
) -> None:
    """Serve tools (the built-in calculators, or your --tools) and, with --agents, the agents."""
    import anyio

    from ..mcp.server import AGENTS, agent_tools, build_server, serve_http, serve_stdio
    from ..tools.loader import ToolLoadError, load_all

    if tools:
        try:
            served = load_all(tools)
        except ToolLoadError as e:
            raise typer.BadParameter(str(e), param_hint="'--tools'") from None
    else:
        from ..tools.calculator import calculate, calculator

        served = [calculate, calculator]
    kinds = list(agent or (AGENTS if agents else ()))
    for kind in kinds:
        if kind not in AGENTS:
            raise typer.BadParameter(f"{kind!r} is not one of {', '.join(AGENTS)}",
                                     param_hint="'--agent'")
    extra = []
    if kinds:
        try:
            chosen = pkg().resolve_model(model, timeout=timeout)
        except (TaoError, ValueError) as e:
            raise fail(f"error: {e}", 2) from None
        extra = agent_tools(chosen, served, kinds, max_turns)
    try:
        server = build_server([*served, *extra])
    except ValueError as e:  # a --tools tool named like an agent
        raise typer.BadParameter(str(e), param_hint="'--tools'") from None
    except ImportError:
        from ..mcp.client import NO_SDK

        raise fail(f"error: {NO_SDK}", 2) from None
    try:
        if http:
            def announce(url: str) -> None:
                typer.echo(f"tao mcp serve: listening on {url}", err=True)

            try:
                anyio.run(serve_http, server, host, port, announce)
            except OSError as e:  # the port is taken, the address is not ours
                raise fail(f"error: cannot listen on {host}:{port}: {e.strerror or e}", 2) from None
        else:
            anyio.run(serve_stdio, server)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


__all__ = ["mcp_app", "serve_command"]
