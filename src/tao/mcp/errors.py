"""What can go wrong with an MCP server, as types a caller can catch and a model can read.

A server that cannot be started when the agent is built is the user's configuration: it raises
``MCPConnectError`` at once. Everything after that - the process dies, stops answering, reports
a failure or answers with something that is not MCP - happens during a run, so it reaches the
model as an error observation (``Error: MCPServerDied: ...``) and the loop goes on; the next call
starts the server again.
"""

from __future__ import annotations

from ..errors import TaoError


class MCPError(TaoError):
    """Base class of the MCP client's errors. ``retryable``: whether the same call may succeed
    on a second try (read by the plan executor's retries)."""

    retryable = True


class MCPConnectError(MCPError):
    """The server could not be started or reached, or did not finish the MCP handshake."""


class MCPServerDied(MCPError):
    """The connection closed during a call: the process exited or the HTTP server went away."""


class MCPTimeout(MCPError):
    """The server did not answer within its ``timeout``; it is restarted on the next call."""


class MCPToolError(MCPError):
    """The server ran the tool and reported a failure (``isError``); its text is the message."""


class MCPBadResponse(MCPError):
    """The server answered with something that is not a valid MCP result."""


__all__ = ["MCPBadResponse", "MCPConnectError", "MCPError", "MCPServerDied", "MCPTimeout",
           "MCPToolError"]
