"""One MCP session per server, owned by one task on tao's MCP thread.

The official client (``mcp.Client``) runs on anyio: its task groups and cancel scopes must be
left by the task that entered them, or teardown raises (openai-agents-python #840); and a session
opened on one event loop cannot be used from another. Agents run on whatever loop called them
(``asyncio.run`` per ``agent.run``, a plan's tasks, Jupyter's loop), so each server's session
lives in one task, its *owner*, on one event loop in a daemon thread that outlives the runs. A
call is a request on the owner's queue and comes back as a future, bounded by the server's
timeout however the server misbehaves (openai-agents-python #434, python-sdk #396). A session
that died or timed out is dropped; the next call opens a new one. Nothing raised inside the SDK
(``ExceptionGroup`` included) leaves this module except as one of ``errors``' types.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from .errors import MCPBadResponse, MCPConnectError, MCPError, MCPServerDied, MCPTimeout, MCPToolError

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()
_open: weakref.WeakSet[Connection] = weakref.WeakSet()
#: what the SDK says for a closed connection and an expired request (mcp_types codes)
CONNECTION_CLOSED, REQUEST_TIMEOUT = -32000, -32001


def mcp_loop() -> asyncio.AbstractEventLoop:
    """The event loop every MCP session lives on (started with the first server)."""
    global _loop
    with _lock:
        if _loop is None:
            import logging

            # the SDK logs a bad line from a server with its traceback; with no handler of the
            # user's that would reach the terminal mid-run (Python's last-resort handler). The
            # typed error says it; a user who configures logging still gets the records.
            logging.getLogger("mcp").addHandler(logging.NullHandler())
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="tao-mcp", daemon=True).start()
            atexit.register(_close_all)
    return _loop


def submit(coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    return asyncio.run_coroutine_threadsafe(coro, mcp_loop())


class Connection:
    """A server's sessions, one after another. ``make_client()`` gives a fresh, unentered
    ``mcp.Client`` and the file the server's stderr goes to (or ``None``); ``label`` names the
    server in messages. Every ``async`` method here runs on ``mcp_loop()``."""

    def __init__(self, make_client: Callable[[], tuple[Any, Any]], label: str, timeout: float,
                 connect_timeout: float):
        self.make_client, self.label = make_client, label
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self._owner: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._client: Any = None
        self._why = ""  # why the last session ended, for the next error message
        self.sessions = 0  # how many were opened (a test reads it to see a reconnect)
        self.server_name: str | None = None  # what the server calls itself
        _open.add(self)

    # -- the owner ------------------------------------------------------------------------
    async def connect(self) -> list[Any]:
        """The server's tools (``mcp_types.Tool``), opening a session unless one is open."""
        if self._open():
            return self._ready.result()  # the common case: open, nothing to wait for
        if self._owner is None or self._owner.done() or self._dead():
            self._stop()
            self._queue, self._ready = asyncio.Queue(), asyncio.get_running_loop().create_future()
            self._owner = asyncio.ensure_future(self._own(self._queue, self._ready))
            self.sessions += 1
        try:
            return await asyncio.wait_for(asyncio.shield(self._ready), self.connect_timeout + 1)
        except asyncio.TimeoutError:
            if self._owner is not None:
                self._owner.cancel()  # stuck before its handshake ended: its queue is unread
            raise MCPConnectError(f"MCP server {self.label} did not finish connecting within "
                                  f"{self.connect_timeout:g} s{self._tail()}") from None

    async def _own(self, queue: asyncio.Queue[Any], ready: asyncio.Future[Any]) -> None:
        import anyio

        errlog = client = None
        try:
            client, errlog = self.make_client()
            self._errlog = errlog
            async with client:
                listing = await _list_tools(client)
                self._client = client
                self.server_name = getattr(client.server_info, "name", None)
                ready.set_result(listing)
                async with anyio.create_task_group() as tg:
                    while (item := await queue.get()) is not None:
                        tg.start_soon(self._serve, client, *item)
                    tg.cancel_scope.cancel()
        except BaseException as e:  # noqa: BLE001 - the owner ends; its callers get typed errors
            self._why = _describe(e)
            if not ready.done():
                ready.set_exception(MCPConnectError(
                    f"cannot connect to MCP server {self.label}: {self._why}{self._tail(errlog)}"))
        finally:  # a newer session may be open already: leave what is its own alone
            if self._client is client:
                self._client = None
            if self._errlog is errlog:
                self._stderr, self._errlog = _read_tail(errlog), None
            while not queue.empty():  # calls that arrived as it closed
                item = queue.get_nowait()
                if item is not None and not item[2].done():  # (name, arguments, future, timeout)
                    item[2].set_exception(MCPServerDied(self._died(item[0])))
            if errlog is not None:
                errlog.close()

    async def _serve(self, client: Any, name: str, arguments: dict[str, Any],
                     future: asyncio.Future[Any], timeout: float) -> None:
        try:
            result = await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except BaseException as e:  # noqa: BLE001 - sorted into the typed errors
            if not future.done():
                future.set_exception(self._sort(e, name))
            code = _code(e)
            if code in (CONNECTION_CLOSED, REQUEST_TIMEOUT) or (
                    code is None and not isinstance(e, (RuntimeError, ValueError))):
                self._stop()  # dead or hung: the next call opens a new session
            if isinstance(e, asyncio.CancelledError):
                raise
            return
        if not future.done():
            future.set_result(result)

    def _sort(self, e: BaseException, name: str) -> MCPError:
        code = _code(e)
        if code == REQUEST_TIMEOUT:
            return MCPTimeout(f"MCP server {self.label} did not answer {name!r} within "
                              f"{self.timeout:g} s; it is restarted for the next call")
        if code == CONNECTION_CLOSED or isinstance(e, asyncio.CancelledError):
            return MCPServerDied(self._died(name))
        if code is not None:
            return MCPToolError(f"{name}: {getattr(e, 'message', None) or e}")
        return MCPBadResponse(f"MCP server {self.label} answered {name!r} with something that "
                              f"is not a valid result: {_describe(e)}")

    def _died(self, name: str) -> str:
        return (f"MCP server {self.label} closed the connection during {name!r}"
                f"{self._tail()}; the next call opens a new session")

    def _open(self) -> bool:
        ready = self._ready
        return bool(ready is not None and ready.done() and not ready.cancelled()
                    and ready.exception() is None and self._queue is not None
                    and self._owner is not None and not self._owner.done() and not self._dead())

    def _dead(self) -> bool:
        """Whether the open session's connection is closed already (the server died between
        calls): a call not yet sent can then go to a new session instead of failing."""
        dispatcher = getattr(getattr(self._client, "_session", None), "_dispatcher", None)
        return bool(getattr(dispatcher, "_closed", False))

    def _stop(self) -> None:
        if self._queue is not None:
            self._queue.put_nowait(None)
        self._queue = None

    # -- calls ------------------------------------------------------------------------------
    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """The ``CallToolResult`` of one call, or one of the ``errors`` within ``timeout``:
        opening a new session, when one must be, counts in it."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            await self.connect() if self._open() else await asyncio.wait_for(self.connect(),
                                                                            self.timeout)
        except asyncio.TimeoutError:
            raise MCPTimeout(f"MCP server {self.label} did not start within {self.timeout:g} s"
                             f"{self._tail()}") from None
        queue = self._queue
        assert queue is not None
        left = max(self.timeout - (loop.time() - start), 0.05)
        future: asyncio.Future[Any] = loop.create_future()
        queue.put_nowait((name, arguments, future, left))
        try:  # the SDK's own read timeout answers first; this bounds a stuck owner too
            return await asyncio.wait_for(asyncio.shield(future), left + 0.5)
        except asyncio.TimeoutError:
            self._stop()
            raise MCPTimeout(f"MCP server {self.label} did not answer {name!r} within "
                             f"{self.timeout:g} s; it is restarted for the next call") from None

    async def close(self) -> None:
        """End the session (the SDK closes stdin, then terminates the process); never raises."""
        owner = self._owner
        self._stop()
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), 8)
            except BaseException:  # noqa: BLE001 - closing never raises
                owner.cancel()

    # -- the server's stderr (stdio servers) -------------------------------------------------
    _stderr, _errlog = "", None

    def _tail(self, errlog: Any = None) -> str:
        text = _read_tail(errlog or self._errlog) or self._stderr
        return f" (its stderr ends: {text})" if text else ""


def _code(e: BaseException) -> int | None:
    """The JSON-RPC error code of the SDK's ``MCPError`` in ``e`` (an ``ExceptionGroup`` is
    searched), else ``None``."""
    from mcp.shared.exceptions import MCPError as SDKError

    if isinstance(e, SDKError):
        return e.code
    for inner in getattr(e, "exceptions", ()):
        code = _code(inner)
        if code is not None:
            return code
    return None


def _describe(e: BaseException) -> str:
    """One line for an exception, the first leaf of an ``ExceptionGroup``."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _read_tail(errlog: Any, limit: int = 300) -> str:
    if errlog is None or errlog.closed:
        return ""
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()[-4000:]
    except (OSError, ValueError):
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[-limit:]


async def _list_tools(client: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(100):  # a paginator that never ends cannot hang the connect
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _close_all() -> None:
    """At exit: end every session still open, so no server process is left behind."""
    live = [c for c in list(_open) if c._owner is not None and not c._owner.done()]
    if not live or _loop is None or _loop.is_closed():
        return

    async def all_of() -> None:
        await asyncio.gather(*(c.close() for c in live), return_exceptions=True)

    try:
        submit(all_of()).result(10)
    except BaseException:  # noqa: BLE001 - exiting anyway
        pass


__all__ = ["Connection", "MCPBadResponse", "MCPConnectError", "MCPServerDied", "MCPTimeout",
           "MCPToolError", "mcp_loop", "submit"]
