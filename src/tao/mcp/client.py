"""``MCPServer``: an MCP server's tools as tao tools, in ``tools=`` like any other.

    git = MCPServer(command=["uvx", "mcp-server-git"], timeout=30)
    docs = MCPServer(url="http://127.0.0.1:8000/mcp")
    agent = ReActAgent(model, tools=[calculator, git, docs])

The server is a ``Toolbox``, so an agent's ``Toolbox`` takes its tools in; each is an ordinary
``Tool`` that goes through the tool door (``Toolbox.execute``): policies, approval, audit,
budgets and the untrusted-output fence hold for it as for a local tool, and a server can be
marked ``requires_approval`` / ``high_risk`` / ``untrusted_output`` / ``secret`` as a whole. The
schema the model sees and the arguments are checked against are the server's own input schemas.
Names are kept (a name that is not a Python identifier, ``get-time``, reads ``get_time`` so that
CodeAct's code can call it); a name already taken in the agent's toolbox gets the server's prefix
(``demo_calculator``), and a model that calls the plain name is told the prefixed one.

The server starts (or is connected to) when its tools are first listed - when an agent is built
with it - and a server that cannot start is an ``MCPConnectError`` then. What goes wrong later is
an error observation within ``timeout`` + 1 s, and the next call reconnects (``connection``).
``close()`` ends it and never raises; so does the end of the process.
"""

from __future__ import annotations

import os
import re
import shlex
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..tools.base import Tool, Toolbox
from .connection import Connection, submit
from .errors import MCPConnectError
from .tool import MCPTool, _identifier
NO_SDK = "tao's MCP support needs the official SDK: pip install mcp==2.3.0"


class MCPServer(Toolbox):
    """``MCPServer(command=["python", "server.py"])`` (stdio: tao starts the process) or
    ``MCPServer(url="http://host/mcp")`` (streamable HTTP). ``command`` may be one string, split
    like a shell would. ``env``: variables added to the SDK's safe default environment (PATH,
    HOME...); ``cwd``: the process's folder. ``timeout``: seconds a call may take (a server that
    does not answer in time is restarted for the next call); ``connect_timeout``: seconds the
    start and handshake may take. ``name``: how messages and clash prefixes call the server
    (default: the name it gives itself). ``prefix``: put before every tool name (``prefix="git"``
    gives ``git_status``); by default only clashing names get one. The guardrail marks
    (``requires_approval=True`` or a predicate, ``high_risk``, ``untrusted_output``, ``secret``)
    hold for every tool of the server. ``untrusted_output`` is on by default: what a server returns
    is someone else's text (web pages, tickets, files), so it reaches the model fenced as data and
    taints the run; ``untrusted_output=False`` for a server of your own."""

    def __init__(self, command: str | Sequence[str] | None = None, *, url: str | None = None,
                 env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                 timeout: float = 30.0, connect_timeout: float = 30.0, name: str | None = None,
                 prefix: str | None = None, headers: Mapping[str, str] | None = None,
                 requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
                 high_risk: bool = False, untrusted_output: bool = True,
                 secret: Sequence[str] = ()):
        if (command is None) == (url is None):
            raise TypeError("MCPServer takes command=[...] (stdio) or url=... (HTTP), one of them")
        if isinstance(command, str):
            command = shlex.split(command)
        if command is not None and (not command or not all(isinstance(c, str) for c in command)):
            raise ValueError(f"command must be a non-empty list of strings, not {command!r}")
        if url is not None and not re.match(r"^https?://[^/?#]+", url):
            raise ValueError(f"url must be an http(s) URL, not {url!r}")
        for what, seconds in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not (isinstance(seconds, (int, float)) and 0 < seconds < float("inf")):
                raise ValueError(f"{what} must be a number of seconds above 0, not {seconds!r}")
        if not (isinstance(requires_approval, bool) or callable(requires_approval)):
            raise TypeError("requires_approval must be True/False or a predicate on the arguments")
        self.command, self.url = (list(command) if command else None), url
        self.env, self.cwd, self.headers = dict(env or {}), cwd, dict(headers or {})
        self.timeout, self._given_name, self.prefix = float(timeout), name, prefix
        self.marks = {"requires_approval": requires_approval, "high_risk": high_risk,
                      "untrusted_output": untrusted_output, "secret": tuple(secret)}
        label = name or url or " ".join(os.path.basename(c) for c in (self.command or ())[:3])
        self.connection = Connection(self._client, label if len(label) < 80 else label[:77] + "...",
                                     float(timeout), float(connect_timeout))
        self._listed: dict[str, Tool] | None = None
        self._config = {"command": self.command, "url": url, "env": self.env, "cwd": cwd,
                        "timeout": self.timeout, "connect_timeout": float(connect_timeout),
                        "name": name, "prefix": prefix, "headers": self.headers,
                        "requires_approval": requires_approval, "high_risk": high_risk,
                        "untrusted_output": untrusted_output, "secret": tuple(secret)}
        _live.setdefault(_key(self._config), self)

    # -- pickled: what another process (a Ray worker) gets is the server, not the session ------
    def __reduce__(self) -> tuple[Any, ...]:
        """A session (its process, its thread, its pipes) cannot travel; how to open one can. In
        the process that made the server, unpickling gives that very server back; elsewhere (a
        Ray worker running a plan's MCP steps) one server per process and configuration is
        made on first use and connects on its first call, then serves every later task there."""
        return (_reopened, (self._config,))

    # -- Toolbox: the tools are listed on first use ------------------------------------------
    @property
    def _tools(self) -> dict[str, Tool]:  # type: ignore[override]
        if self._listed is None:
            self._listed = self._build(self.connect())
        return self._listed

    def connect(self) -> list[Any]:
        """Start the server (or reach it) and list its tools; ``MCPConnectError`` if it cannot."""
        future = submit(self.connection.connect())
        try:
            return future.result(self.connection.connect_timeout + 2)
        except MCPConnectError:
            raise
        except BaseException as e:  # noqa: BLE001 - a timeout here, Ctrl-C: the user's to see
            future.cancel()
            if isinstance(e, KeyboardInterrupt):
                raise
            raise MCPConnectError(f"cannot connect to MCP server {self.connection.label}: "
                                  f"{type(e).__name__}: {e}") from None

    async def aconnect(self) -> list[Tool]:
        """``connect`` without blocking the running event loop (async code building agents:
        await this first, and the agent's construction then finds the tools listed)."""
        import asyncio

        try:
            listing = await asyncio.wrap_future(submit(self.connection.connect()))
        except MCPConnectError:
            raise
        except Exception as e:  # noqa: BLE001 - as connect() says it
            raise MCPConnectError(f"cannot connect to MCP server {self.connection.label}: "
                                  f"{type(e).__name__}: {e}") from None
        if self._listed is None:
            self._listed = self._build(listing)
        return list(self._listed.values())

    def _client(self) -> tuple[Any, Any]:
        """A fresh ``mcp.Client`` for one session, and the file the server's stderr goes to."""
        import tempfile

        try:
            from mcp import Client, StdioServerParameters
        except ImportError:
            raise MCPConnectError(NO_SDK) from None

        read_timeout = self.connection.connect_timeout  # bounds the handshake's requests
        if self.url is not None:
            target: Any = self.url
            if self.headers:
                import httpx
                from mcp.client.streamable_http import streamable_http_client

                target = streamable_http_client(self.url, http_client=httpx.AsyncClient(
                    headers=self.headers, timeout=httpx.Timeout(read_timeout)))
            return Client(target, read_timeout_seconds=read_timeout), None
        errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        params = StdioServerParameters(command=self.command[0], args=self.command[1:],
                                       env=self.env or None, cwd=self.cwd)
        from mcp.client.stdio import stdio_client

        return Client(stdio_client(params, errlog=errlog), read_timeout_seconds=read_timeout), errlog

    def _build(self, listing: list[Any]) -> dict[str, Tool]:
        tools: dict[str, Tool] = {}
        for info in listing:
            tool = MCPTool(self, info)
            if self.prefix:
                tool.name = f"{_identifier(self.prefix)}_{tool.name}"
            while tool.name in tools:  # two remote names that read alike (get-time, get_time)
                tool.name += "_"
            tools[tool.name] = tool
        return tools

    @property
    def name(self) -> str:
        """The server's name: the one given, else the one it gives itself once connected."""
        return self._given_name or self.connection.server_name or self.connection.label

    @property
    def server_prefix(self) -> str:
        return _identifier(self.prefix or self._given_name or self.connection.server_name or "mcp")

    # -- calls --------------------------------------------------------------------------------
    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call the server's tool ``name`` (its own name): its ``CallToolResult``, or one of
        ``errors`` within ``timeout`` + 1 s whatever the server and the MCP thread do."""
        import asyncio

        future = submit(self.connection.call(name, arguments))
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout + 1)
        except asyncio.TimeoutError:  # the MCP thread itself did not answer: never hang
            from .errors import MCPTimeout

            raise MCPTimeout(f"MCP server {self.connection.label} did not answer {name!r} "
                             f"within {self.timeout:g} s") from None
        return result

    def close(self) -> None:
        """End the session and the server process; never raises, safe to call twice."""
        try:
            submit(self.connection.close()).result(10)
        except BaseException:  # noqa: BLE001 - closing never raises
            pass

    async def aclose(self) -> None:
        import asyncio

        try:
            await asyncio.wait_for(asyncio.wrap_future(submit(self.connection.close())), 10)
        except BaseException:  # noqa: BLE001 - closing never raises
            pass

    def __enter__(self) -> MCPServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MCPServer {self.connection.label}>"


#: this process's servers by configuration: the ones made here (weakly) and, kept alive for the
#: process's life, the ones made by unpickling (a Ray worker's own connections)
_live: weakref.WeakValueDictionary[str, MCPServer] = weakref.WeakValueDictionary()
_reopened_here: dict[str, MCPServer] = {}


def _key(config: Mapping[str, Any]) -> str:
    return repr([config[k] for k in ("command", "url", "cwd", "timeout", "connect_timeout",
                                     "name", "prefix")]
                + [sorted(config["env"].items()), sorted(config["headers"].items())])


def _reopened(config: dict[str, Any]) -> MCPServer:
    key = _key(config)
    server = _live.get(key)
    if server is None:
        options = dict(config)
        server = _reopened_here[key] = MCPServer(options.pop("command"), **options)
    return server


__all__ = ["MCPServer"]
