"""MCP servers as tool sources, opened the same way for every door that takes ``--mcp`` specs
(``tao run/code/chat``, the web form, tao.toml's ``mcp``)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any


def open_servers(specs: list[str], base: Path | None = None, timeout: float = 30.0) -> list[Any]:
    """An ``MCPServer`` for each spec (an ``http(s)://`` URL, else a command run in ``base``),
    each connected now, so one that cannot start fails before any model is paid; the ones already
    started are then closed. A command gets the user's environment, as it would from their shell
    (the library's default is the SDK's short safe list), so a server that needs a key finds it.
    ``ValueError`` names a spec that is not one; ``MCPConnectError`` a server that did not start."""
    from ..mcp import MCPServer

    servers: list[Any] = []
    try:
        for spec in specs:
            spec = spec.strip()
            try:
                server = (MCPServer(url=spec, timeout=timeout) if re.match(r"^https?://", spec)
                          else MCPServer(command=shlex.split(spec), cwd=base, timeout=timeout,
                                         env=dict(os.environ)))
            except ValueError as e:
                raise ValueError(f"{spec!r}: {e}") from None
            servers.append(server)
            server.connect()
    except BaseException:
        close_servers(servers)
        raise
    return servers


def close_servers(servers: list[Any]) -> None:
    for server in servers:
        server.close()  # never raises
