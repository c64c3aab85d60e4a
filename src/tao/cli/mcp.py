"""``tao mcp serve``: tao's tools and agents as an MCP server, for any MCP client.

    tao mcp serve                                  # the calculators over stdio
    tao mcp serve --tools examples/weather.py --agents --model openai
    tao mcp serve --agents --http --port 8000      # streamable HTTP at http://127.0.0.1:8000/mcp

A client (Claude Desktop, another tao: ``tao run --mcp "tao mcp serve --agents"``) lists the
tools and calls them; with ``--agents`` it also gets ``react``, ``codeact`` and ``plan``, each
a tool taking a ``task`` and returning the agent's answer, and every ``[agents.NAME]`` of
tao.toml under its name, with its handoffs (``--agent triage``: only that one). Over stdio the protocol owns stdout,
so everything else tao would say goes to stderr; over HTTP the server listens on 127.0.0.1 only
unless ``--host`` says otherwise, and says its URL on stderr (``--port 0``: a free port).

Off localhost a bearer token is required: one is made and printed unless ``--token`` gives it;
``--no-token`` is allowed for the built-in calculators only, never for ``--agents`` or your
``--tools`` (tao cannot tell whether they run code or write files). Host and Origin are checked
on every address (``tao.mcp_server.access``). The guardrail flags of ``tao run`` (``--deny``,
``--require-approval``, ``--audit``...) and tao.toml's guardrails hold for every served call.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

import typer

from ..errors import TaoError
from .common import (DEFAULT_TIMEOUT_S, MaxTurnsOpt, ModelOpt, TimeoutOpt, ToolsOpt, app, fail,
                     guard_options, guardrail_flags, locale_language, pkg, settings)
from .named import chain, resolver

mcp_app = typer.Typer(name="mcp", no_args_is_help=True,
                      help="MCP: serve tao's tools and agents to MCP clients.")
app.add_typer(mcp_app, name="mcp")


@mcp_app.command("serve")
@guardrail_flags(budgets=False)
def serve_command(
    ctx: typer.Context,
    tools: ToolsOpt = None,
    agents: Annotated[bool, typer.Option(
        "--agents", help="Also serve each agent (react, codeact, plan, and every [agents.NAME] "
        "of tao.toml with its handoffs) as a tool taking a task; they run on --model with the "
        "served tools.")] = False,
    agent: Annotated[list[str] | None, typer.Option(
        "--agent", metavar="react|codeact|plan|NAME", show_default=False,
        help="Serve only these agents (repeat it; NAME: tao.toml's [agents.NAME]); implies "
        "--agents.")] = None,
    model: ModelOpt = "auto",
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    max_turns: MaxTurnsOpt = 10,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option("--host", help="The address --http listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="The port --http listens on (0: a free one).")] = 8000,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="TAO_MCP_TOKEN", show_default=False,
        help="--http: every request must carry 'Authorization: Bearer TOKEN' (made and printed "
        "when --host is not local).")] = None,
    no_token: Annotated[bool, typer.Option(
        "--no-token", help="--http off localhost without a token: the built-in calculators only, "
        "never --agents or --tools.")] = False,
    allow_host: Annotated[list[str] | None, typer.Option(
        "--allow-host", metavar="NAME", show_default=False,
        help="--http: another Host name clients reach this server by (repeat it); loopback, the "
        "bound address and, on 0.0.0.0, this machine's name and addresses are allowed already.")
    ] = None,
    guard_flags: dict[str, Any] | None = None,
) -> None:
    """Serve tools (the built-in calculators, or your --tools) and, with --agents, the agents.

    The guardrails hold for each call as in tao run; a call that needs approval is asked of
    the calling client (MCP elicitation) and refused when the client cannot be asked."""
    import anyio

    from ..mcp_server.access import ClientApprover, is_local
    from ..mcp_server.server import AGENTS, agent_tools, build_server, serve_http, serve_stdio

    s = settings(ctx, tools=tools, model=model, max_turns=max_turns, timeout=timeout)
    tables = s.config.agents
    kinds = list(dict.fromkeys(agent or ((*AGENTS, *tables) if agents else ())))
    for kind in kinds:
        if kind not in AGENTS and kind not in tables:
            raise typer.BadParameter(f"{kind!r} is not one of {', '.join(AGENTS)} nor an "
                                     f"[agents.NAME] of tao.toml ({', '.join(tables) or 'none'})",
                                     param_hint="'--agent'")
    if http and not is_local(host):
        if no_token and token:
            raise typer.BadParameter("give --token or --no-token, not both")
        if no_token and (kinds or s.tools):
            raise fail(f"error: without a token, tao mcp serve on {host} serves the built-in "
                       f"calculators only: --agents and --tools may run code or write files on "
                       f"this machine for anyone who reaches the port. Drop --no-token (a token "
                       f"is made and printed) or give --token.", 2)
        if not no_token and not token:
            token = secrets.token_urlsafe(24)
    if s.tools is not None:
        served = s.tools
    else:
        from ..tools.calculator import calculate, calculator

        served = [calculate, calculator]
    options = guard_options(config=s.config, **(guard_flags or {}))
    lang = locale_language()
    try:
        from ..guard.run import Guard

        guard = Guard(**options, approve=ClientApprover(lang))
    except (TypeError, ValueError) as e:
        raise fail(f"error: {e}", 2) from None
    extra = []
    # each chain's own guardrails are its tables'; every call's are the server's (``guard``)
    named = [chain(s.config, k, tools=served, guard={}, max_turns=s.max_turns)
             for k in kinds if k in tables]
    if kinds:
        try:
            chosen = pkg().resolve_model(s.model, timeout=s.timeout)
        except (TaoError, ValueError) as e:
            raise fail(f"error: {e}", 2) from None
        extra = agent_tools(chosen, served, [k for k in kinds if k in AGENTS], s.max_turns,
                            specs=named, resolve=resolver(s.timeout))
    try:
        server = build_server([*served, *extra], guard=guard, lang=lang)
    except ValueError as e:  # a --tools tool named like an agent
        raise typer.BadParameter(str(e), param_hint="'--tools'") from None
    except ImportError:
        from ..mcp.client import NO_SDK

        raise fail(f"error: {NO_SDK}", 2) from None
    try:
        if http:
            def announce(url: str) -> None:
                typer.echo(f"tao mcp serve: listening on {url}", err=True)
                if token:
                    typer.echo(f"tao mcp serve: every request must carry the header "
                               f"'Authorization: Bearer {token}'", err=True)

            try:
                anyio.run(lambda: serve_http(server, host, port, announce, token=token,
                                             allow_hosts=allow_host or ()))
            except OSError as e:  # the port is taken, the address is not ours
                raise fail(f"error: cannot listen on {host}:{port}: {e.strerror or e}", 2) from None
        else:
            anyio.run(serve_stdio, server)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


__all__ = ["mcp_app", "serve_command"]
