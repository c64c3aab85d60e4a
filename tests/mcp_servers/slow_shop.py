"""An MCP server whose one tool takes 1.5 s to answer (``python slow_shop.py`` speaks stdio): two
plan steps that call it at once finish together only if they really ran at the same time."""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer

server = MCPServer("slow-shop")
PRICES = {"book": 12, "pen": 5}


@server.tool()
async def slow_price(item: str) -> float:
    """The price of one item in the shop; it takes 1.5 s to look up."""
    await asyncio.sleep(1.5)
    return PRICES[item]


if __name__ == "__main__":
    server.run()
