"""A small MCP server for tao's tests, run as a real process: ``python demo.py`` speaks stdio,
``python demo.py --http PORT`` streamable HTTP on 127.0.0.1. Besides ordinary tools it has one
tool for each way a server goes wrong (it dies, it hangs, it fails, it writes garbage), so the
client's handling of each is tested against a process, not a mock."""

from __future__ import annotations

import os
import sys
import time
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("demo")


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


class Weather(TypedDict):
    city: str
    temp_c: int
    sky: str


@server.tool()
def weather(city: str) -> Weather:
    """Today's weather in a city, as structured data."""
    return {"city": city, "temp_c": 21, "sky": "晴"}


@server.tool(name="get-time")
def get_time() -> str:
    """A tool whose name is not a Python identifier."""
    return "12:00"


@server.tool()
def calculator(expression: str) -> str:
    """A name that clashes with tao's own calculator."""
    return f"remote:{expression}"


@server.tool()
def pid() -> int:
    """This server's process id (a restarted server has another)."""
    return os.getpid()


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable in the server's process ("" when unset)."""
    return os.environ.get(name, "")


@server.tool()
def fail(message: str) -> str:
    """Fails with the message given."""
    raise ToolError(f"refused: {message}")


@server.tool()
def crash() -> str:
    """The process dies mid-call."""
    os._exit(3)


@server.tool()
def hang(seconds: float = 3600) -> str:
    """Blocks the whole server (a sync sleep on its event loop)."""
    time.sleep(seconds)
    return "woke up"


@server.tool()
def garbage() -> str:
    """Writes lines that are not JSON-RPC to stdout, then never answers."""
    os.write(1, b"this is not json\n{\"jsonrpc\": \"2.0\", \"id\": \"x\"\n\xff\xfe\n")
    time.sleep(3600)
    return "unreachable"


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()
