"""Any MCP server's tools in every agent (``MCPServer``). The other way - tao's tools and agents
served over MCP (``tao mcp serve``) - is ``tao.mcp_server``, a room above the agents.

    from tao.mcp import MCPServer
    agent = ReActAgent(model, tools=[calculator, MCPServer(command=["python", "server.py"])])

Loaded only when named: ``import tao`` does not import this package nor the ``mcp`` SDK (≈ 0.7 s).
"""

from __future__ import annotations

from .client import MCPServer
from .errors import (MCPBadResponse, MCPConnectError, MCPError, MCPServerDied, MCPTimeout,
                     MCPToolError)
from .tool import MCPTool

__all__ = ["MCPBadResponse", "MCPConnectError", "MCPError", "MCPServer", "MCPServerDied",
           "MCPTimeout", "MCPTool", "MCPToolError"]
