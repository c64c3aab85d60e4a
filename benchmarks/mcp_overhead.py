"""What a tool call costs through MCP: the same ``add(a, b)`` called directly
(``Toolbox.execute``), through ``tao.mcp.MCPServer`` over stdio and over streamable HTTP, and -
to tell tao's client apart from the protocol - through the official ``mcp.Client`` alone on the
same servers. The servers are ``tao mcp serve --tools THIS_FILE:add`` processes on this machine,
so what is measured is framework and transport, not the tool.

Variants run in interleaved rounds (each round: ``--calls`` sequential calls of every variant,
in turn) and the median of the rounds' per-call means is reported, so a background load that
comes and goes hits every variant alike. Also: how long opening each connection took (process
start + handshake + tool listing).

    python benchmarks/mcp_overhead.py [--rounds 7] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tao import tool
from tao.messages import ToolCall
from tao.tools.base import Toolbox


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def serve(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tao", "mcp", "serve", "--tools", f"{Path(__file__).resolve()}:add",
            *extra]


async def main(rounds: int, calls: int) -> None:
    from mcp import Client, StdioServerParameters

    from tao.mcp import MCPServer

    http = subprocess.Popen(serve("--http", "--port", "0"), stderr=subprocess.PIPE, text=True)
    url = http.stderr.readline().rsplit(" ", 1)[1].strip()
    opened = {}
    t = time.perf_counter()
    stdio_server = MCPServer(command=serve())
    list(stdio_server)
    opened["tao MCPServer, stdio"] = time.perf_counter() - t
    t = time.perf_counter()
    http_server = MCPServer(url=url)
    list(http_server)
    opened["tao MCPServer, HTTP"] = time.perf_counter() - t
    boxes = {"direct (Toolbox.execute)": Toolbox([add]),
             "tao MCPServer, stdio": Toolbox([stdio_server]),
             "tao MCPServer, HTTP": Toolbox([http_server])}
    cmd = serve()
    t = time.perf_counter()
    async with Client(StdioServerParameters(command=cmd[0], args=cmd[1:])) as sdk_stdio, \
            Client(url) as sdk_http:
        opened["mcp.Client alone, stdio + HTTP"] = time.perf_counter() - t
        variants = {name: (lambda i, box=box: box.execute(ToolCall(f"c{i}", "add", {"a": i, "b": 1})))
                    for name, box in boxes.items()}
        variants["mcp.Client alone, stdio"] = lambda i: sdk_stdio.call_tool("add", {"a": i, "b": 1})
        variants["mcp.Client alone, HTTP"] = lambda i: sdk_http.call_tool("add", {"a": i, "b": 1})
        for fn in variants.values():  # warm up: first-call imports, caches
            for i in range(20):
                await fn(i)
        means: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, fn in variants.items():
                start = time.perf_counter()
                for i in range(calls):
                    await fn(i)
                means[name].append((time.perf_counter() - start) / calls)
        check = await boxes["tao MCPServer, HTTP"].execute(ToolCall("x", "add", {"a": 40, "b": 2}))
        assert check.content == "42" and not check.is_error, check
    stdio_server.close()
    http_server.close()
    http.kill()
    direct = statistics.median(means["direct (Toolbox.execute)"])
    print(f"{rounds} rounds x {calls} calls of add(a, b); median of per-call means\n")
    print(f"{'variant':34} {'per call':>10} {'overhead':>10}")
    for name, values in means.items():
        m = statistics.median(values)
        over = "" if name.startswith("direct") else f"+{(m - direct) * 1e3:.3f} ms"
        print(f"{name:34} {m * 1e3:8.3f} ms {over:>10}")
    print()
    for name, seconds in opened.items():
        print(f"opening {name}: {seconds:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.calls))
