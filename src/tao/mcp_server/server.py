"""tao as an MCP server: its tools, and each agent as a tool taking a task.

    server = build_server([calculate, calculator], agents=agent_tools(model))
    anyio.run(serve_stdio, server)            # what `tao mcp serve` does
    anyio.run(serve_http, server, "127.0.0.1", 8000)   # `tao mcp serve --http --port 8000`

Each call goes through the tool door (``Toolbox.execute``), so what a model would read as an
error observation - unknown tool, invalid arguments, an exception, a timeout - is what the MCP
client reads, as a result with ``isError``. A successful result carries its text and, as
structured content, ``{"result": value}`` (declared by an output schema), so a client that
wants data - tao's own ``MCPServer``, CodeAct's code behind it - gets the value, not its text.
The agents run on the model ``tao mcp serve --model`` names: ``react`` (native tool calls),
``codeact`` (Python in a sandbox) and ``plan`` (Plan-and-Execute), each a fresh agent per call
with the served tools, so one client's task never sees another's history. A named agent of
tao.toml (``tao mcp serve --agent triage``, or every one with ``--agents``) is served the same
way under its name: a fresh chain per call, handoffs and all, built by ``tao.factory``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from ..tools.base import Tool, Toolbox

#: what every result's structured content looks like: the value under "result"
RESULT_SCHEMA = {"type": "object", "properties": {"result": {}}, "required": ["result"]}
AGENTS = {
    "react": "Runs a ReAct agent (reason, call tools, observe) on the task and returns its answer.",
    "codeact": "Runs a CodeAct agent (writes and runs Python in a sandbox, calling the tools as "
               "functions) on the task and returns its answer.",
    "plan": "Runs a Plan-and-Execute agent (plans the steps as a graph, runs them in parallel, "
            "re-plans on failure) on the task and returns its answer.",
}


def agent_tools(model: Any, tools: Iterable[Any] = (), kinds: Iterable[str] = tuple(AGENTS),
                max_turns: int = 10, build: Callable[..., Any] | None = None, *,
                specs: Iterable[Any] = (), resolve: Callable[[str], Any] | None = None
                ) -> list[Tool]:
    """One tool per agent kind, each running a fresh agent on ``model`` with ``tools``; then
    one per named ``tao.factory.AgentSpec`` in ``specs`` (tao.toml's ``[agents.NAME]``, its
    handoffs in the spec), called by its name; ``resolve``: the model of an agent of such a
    chain that names one of its own."""
    from ..compare import build as build_default  # tao.factory's agent, by name
    from ..factory import build_agent
    from ..plan.agent_tool import AgentTool

    tools, make = list(tools), build or build_default
    out = []
    for kind in kinds:
        if kind not in AGENTS:
            raise ValueError(f"unknown agent {kind!r}; choose from {', '.join(AGENTS)}")
        out.append(AgentTool(lambda kind=kind: make(kind, model, tools, max_turns), kind,
                             AGENTS[kind]))
    for spec in specs:
        if not spec.name:
            raise ValueError("an agent served by name needs one (AgentSpec(name=...))")
        out.append(AgentTool(lambda spec=spec: build_agent(spec, model, resolve), spec.name,
                             _described(spec)))
    return out


def _described(spec: Any) -> str:
    """What a client reads about a named agent: its table's description, then what it is and
    whom it may hand the task to (a client picks among served agents by this text)."""
    from ..factory import ARCHITECTURE

    targets = [h if isinstance(h, str) else h.name for h in spec.handoffs]
    said = f"{spec.description.rstrip('.')}. " if spec.description else ""
    handed = f"; it may hand the task to {', '.join(targets)}" if targets else ""
    return (f"{said}Runs the agent {spec.name} ({ARCHITECTURE.get(spec.agent, spec.agent)}"
            f"{handed}) on the task and returns its answer.")


def build_server(tools: Iterable[Any], *, name: str = "tao", instructions: str | None = None,
                 guard: Any = None, lang: str = "en") -> Any:
    """A low-level ``mcp.server.Server`` serving ``tools`` (tao tools, functions, Toolboxes).

    ``guard`` (a ``tao.guard.run.Guard``: deny, allow, approval rules, audit log, budgets) holds
    for every call, as it would in an agent's run: each call is a run of its own in the audit
    log, and a served agent runs as that run's child, so the same rules hold for the calls it
    makes. Approval is asked of the calling client (``access.ClientApprover``)."""
    import mcp_types as types
    from mcp.server import Server

    from .. import __version__
    from ..messages import ToolCall
    from ..sandbox._io import plain
    from .access import CALLER

    toolbox = tools if isinstance(tools, Toolbox) else Toolbox(tools)
    ids = itertools.count(1)
    listing = [types.Tool(name=t.name, description=t.description, input_schema=t.spec.parameters,
                          output_schema=RESULT_SCHEMA) for t in toolbox]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: Any) -> Any:
        call = ToolCall(f"mcp-{next(ids)}", params.name, dict(params.arguments or {}))
        run = None if guard is None else guard.start(f"MCP call of {params.name}", "mcp", "",
                                                     lang, toolbox)
        caller = CALLER.set(getattr(ctx, "session", None))
        try:  # in a thread: a sync tool never blocks the server
            result = await toolbox.execute(call, in_thread=True, run=run)
        except Exception as e:  # noqa: BLE001 - a spent budget: this call's error, not the server's
            from ..tools.base import ToolResult

            result = ToolResult(f"Error: {e}", True, 0.0)
        finally:
            CALLER.reset(caller)
        if run is not None:
            from ..agents.base import Result

            run.finish(Result(None if result.is_error else result.content,
                              "error" if result.is_error else "done", 0, 1,
                              error=result.content if result.is_error else None))
        text = [types.TextContent(type="text", text=result.content)]
        if result.is_error:
            return types.CallToolResult(content=text, is_error=True)
        try:
            value = plain(result.value)
        except (ValueError, TypeError, RecursionError):  # no JSON for it: its text is the value
            value = result.content
        return types.CallToolResult(content=text, structured_content={"result": value})

    return Server(name, version=__version__, instructions=instructions,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Any) -> None:
    """Serve over this process's stdin/stdout (the SDK points fd 1 at stderr meanwhile, so a
    stray ``print`` in a tool cannot break the protocol)."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Any, host: str = "127.0.0.1", port: int = 8000,
                     announce: Callable[[str], Any] | None = None, *, token: str | None = None,
                     allow_hosts: Iterable[str] = ()) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp``. The socket is bound before serving,
    so ``port=0`` picks a free port and ``announce`` gets the URL it is actually on. ``token``:
    every request must carry ``Authorization: Bearer TOKEN``. Host and Origin are checked on
    every bind (``access.transport_security``): the bound address, loopback, ``allow_hosts``."""
    import socket

    import uvicorn

    from . import access

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # inherited by every accepted connection: without it a response written in pieces waits for
    # the client's delayed ACK, 40 ms a call (measured: 48 ms -> 3.7 ms, benchmarks/mcp_overhead.py)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{bound}/mcp"
    app = server.streamable_http_app(
        host=host, transport_security=access.transport_security(host, allow_hosts),
        **({"auth": access.auth_settings(url), "token_verifier": access.StaticToken(token)}
           if token else {}))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    if announce is not None:
        announce(url)
    await uvicorn.Server(config).serve(sockets=[sock])


__all__ = ["AGENTS", "RESULT_SCHEMA", "agent_tools", "build_server", "serve_http", "serve_stdio"]
