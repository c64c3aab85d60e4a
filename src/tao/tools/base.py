"""Tools: ``Tool`` for hand-written classes, ``Toolbox`` to run them (``@tool`` for functions
is ``tools.function``'s, how values read to a model ``tools.text``'s; both importable from here).

Argument schemas come from type hints and the docstring and are validated with pydantic, but the
pydantic model is built lazily on first use so that defining tools at import time stays cheap.
Whatever goes wrong inside a call - unknown name, invalid arguments (nested past
``safe_json.MAX_DEPTH`` included), an exception, a timeout, a tool raising ``SystemExit`` or
``KeyboardInterrupt`` - comes back as an error observation the model can read and correct; it
never ends the run. Only the user does: a real Ctrl-C, or cancelling the run's task.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..messages import ToolCall
from ..messages import ToolSpec
from ..safe_json import MAX_DEPTH, too_deep
from . import interrupts
from .text import (MAX_OBSERVATION_CHARS, _explain, _shown, _type_name,  # noqa: F401 - _shown:
                   error_text, to_text)  # mcp.client imports it from here

__all__ = ["FunctionTool", "InvalidArguments", "MAX_OBSERVATION_CHARS", "Tool", "ToolResult",
           "Toolbox", "error_text", "to_text", "tool"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False
    duration_s: float = 0.0
    value: Any = None  # the raw Python value, for callers that want more than text
    #: ``False`` when the same call cannot succeed on a second try (bad arguments, an unknown
    #: tool, or an exception whose class says ``retryable = False``); executors that retry
    #: failed steps (Plan-and-Execute) go straight to re-planning instead
    retryable: bool = True


class InvalidArguments(ValueError):
    """The model's arguments do not fit the tool's schema (the message is written for the model)."""


class Tool:
    """A tool. Subclass it and define ``name``, ``description``, an ``Args`` pydantic model and
    ``run(**args)`` (sync or async) - or use ``@tool`` on a function.

    ``timeout`` (seconds) bounds async tools and sync tools run in a thread. The guardrails
    (``tao.guard``) read ``requires_approval`` (``True`` or a predicate on the arguments dict),
    ``high_risk`` (needs approval once untrusted content was read in the run),
    ``untrusted_output`` (its output is fenced as data and taints the run: ``True`` or a
    predicate on the arguments, e.g. only the files the agent did not write) and ``secret``
    (argument names whose values never reach the audit log). The run journal (``tao.runs``)
    reads ``side_effects`` (``False``: safe to run again after a crash) and ``idempotent``
    (it dedupes by ``tao.runs.idempotency_key()``, so a resumed run may call it again).
    ``continued_by`` names the tool that carries on this one's long text (``write_file`` ->
    ``append_file``): when a reply in the text protocol ends inside the block, its complete
    lines are still sent, and the model is told to go on with that tool, instead of the whole
    text being dropped and written again (and cut again) from the start.
    """

    name: str = ""
    description: str = ""
    Args: Any = None  # a pydantic BaseModel subclass describing the arguments
    timeout: float | None = None
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False
    high_risk: bool = False
    untrusted_output: bool | Callable[[dict[str, Any]], bool] = False
    secret: tuple[str, ...] = ()
    side_effects: bool = True
    idempotent: bool = False
    continued_by: str | None = None

    def run(self, **kwargs: Any) -> Any:  # pragma: no cover - subclasses override
        raise NotImplementedError(f"tool {self.name!r} does not implement run()")

    # -- schema ---------------------------------------------------------------------------
    def args_model(self) -> Any:
        if self.Args is None:
            raise TypeError(f"tool {self.name!r} has no Args model")
        return self.Args

    @property
    def spec(self) -> ToolSpec:
        spec = self.__dict__.get("_spec")
        if spec is None:
            schema = self.args_model().model_json_schema()
            schema.pop("title", None)
            for prop in schema.get("properties", {}).values():
                prop.pop("title", None)
            spec = ToolSpec(self.name, self.description, schema)
            self.__dict__["_spec"] = spec
        return spec

    def signature(self) -> str:
        """``name(a: int, b: int)``: how prompts that list functions show this tool."""
        props = self.spec.parameters.get("properties", {})
        parts = [f"{k}: {_type_name(v)}" for k, v in props.items()]
        return f"{self.name}({', '.join(parts)})"

    # -- calling --------------------------------------------------------------------------
    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments, or ``ValueError`` with a message written for a model."""
        from pydantic import ValidationError

        try:
            parsed = self.args_model().model_validate(arguments)
        except ValidationError as e:
            raise InvalidArguments(_explain(self, e)) from None
        return dict(parsed.__dict__)

    def is_async(self) -> bool:
        cached = self.__dict__.get("_is_async")
        if cached is None:
            cached = self.__dict__["_is_async"] = inspect.iscoroutinefunction(self.run)
        return cached


class ToolDoor(Protocol):
    """What a run puts at the tool door (``tao.guard.run.Run``): ``Toolbox.execute`` hands it
    each call with the tool and a way to run it, and returns what it returns."""

    active: bool

    async def call_tool(self, call: ToolCall, tool: Tool | None,
                        execute: Callable[[ToolCall, bool], Awaitable[ToolResult]]) -> ToolResult:
        ...


class Toolbox:
    """The registry an agent calls tools through. ``bind(run)`` gives the same tools with a
    run's guard (``tao.guard.run.Run``) on the door: every call is admitted by it (policy,
    approval, budgets) before it runs and passed through it after (untrusted output, audit)."""

    _run: ToolDoor | None = None
    _view: Any = None  # the run's ``RunView``: what ``tao.RunContext`` is made of

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()):
        self._tools: dict[str, Tool] = {}
        for t in tools:
            for one in (t if isinstance(t, Toolbox) else (t,)):  # a Toolbox among them: its tools
                self.add(one)

    def add(self, given: Tool | Callable[..., Any]) -> Tool:
        if isinstance(given, Tool):
            t = given
        elif callable(given):
            t = FunctionTool(given)
        else:
            raise TypeError(f"not a tool: {given!r}")
        if not t.name:
            raise TypeError(f"{type(t).__name__} has no name")
        if t.name in self._tools and hasattr(t, "prefixed"):  # an MCP tool yields the name:
            t = t.prefixed()                                  # it takes its server's prefix
        elif t.name in self._tools and hasattr(self._tools[t.name], "prefixed"):
            moved: Tool = getattr(self._tools.pop(t.name), "prefixed")()
            self._tools[moved.name] = moved
        if t.name in self._tools:
            raise ValueError(f"two tools are named {t.name!r}")
        self._tools[t.name] = t
        return t

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def bind(self, run: ToolDoor | None) -> Toolbox:
        """These tools behind ``run``'s guard (itself when the run's guard has nothing to do)."""
        if run is None or not run.active:
            return self
        import copy

        bound = copy.copy(self)
        bound._run = run
        return bound

    def with_run(self, view: Any) -> Toolbox:
        """These tools in a run: a tool that takes ``tao.RunContext`` gets one from ``view``
        (``tao.tools.context.RunView``)."""
        import copy

        bound = copy.copy(self)
        bound._view = view
        return bound

    async def execute(self, call: ToolCall, *, in_thread: bool = False,
                      run: ToolDoor | None = None) -> ToolResult:
        """Run one call; every failure becomes an error ``ToolResult`` - also a tool raising
        ``SystemExit``, ``KeyboardInterrupt`` or another ``BaseException`` (see ``interrupts``).
        What stops the run is the user: a real Ctrl-C, or the run's task being cancelled. With
        a run's guard (``run=`` or ``bind``), a call it refuses never runs: its ``ToolResult``
        says why; a spent budget raises ``BudgetExceeded``."""
        run = run or self._run
        if run is None:
            return await self._execute(call, in_thread)
        return await run.call_tool(call, self._tools.get(call.name),
                                   lambda c, thread: self._execute(c, thread or in_thread))

    async def _execute(self, call: ToolCall, in_thread: bool) -> ToolResult:
        start = time.perf_counter()
        t = self._tools.get(call.name)
        if t is None:
            available = ", ".join(self._tools) or "(none)"
            moved = [n for n, x in self._tools.items() if getattr(x, "remote_name", 0) == call.name]
            available += f" ({call.name!r} is called {moved[0]!r} here)" if moved else ""
            return ToolResult(f"Error: unknown tool {call.name!r}. Available tools: {available}",
                              True, time.perf_counter() - start, retryable=False)
        if call.parse_error:
            return ToolResult(f"Error: the arguments for {t.signature()} were not valid JSON "
                              f"({call.parse_error}). Send a JSON object.", True,
                              time.perf_counter() - start, retryable=False)
        if too_deep(call.arguments):
            return ToolResult(f"Error: the arguments for {t.signature()} are nested more than "
                              f"{MAX_DEPTH} levels deep.", True, time.perf_counter() - start,
                              retryable=False)
        if getattr(t, "context_param", None) is not None:
            return await self._with_context(t, call, in_thread, start)
        return await self._run_tool(t, call, in_thread, start, {})

    async def _with_context(self, t: Tool, call: ToolCall, in_thread: bool,
                            start: float) -> ToolResult:
        """A call of a tool that takes the run's ``RunContext``: made here, its failures counted
        (``retry``)."""
        from ..safe_json import dumps
        from .context import RunContext

        view = self._view
        key = t.name + "\x00" + dumps(call.arguments, sort_keys=True)
        ctx = (view.context(t.name, call.id, key) if view is not None
               else RunContext(None, tool_name=t.name, call_id=call.id))
        result = await self._run_tool(t, call, in_thread, start,
                                      {getattr(t, "context_param"): ctx})
        if result.is_error and view is not None:
            view.failed(key)
        return result

    async def _run_tool(self, t: Tool, call: ToolCall, in_thread: bool, start: float,
                        extra: dict[str, Any]) -> ToolResult:
        mark = interrupts.enter()
        try:
            kwargs = {**extra, **t.validate(call.arguments)}
            if t.is_async():
                import asyncio  # loaded by then; kept out of `import tao`

                coro = interrupts.contained(t.run(**kwargs))
                value = await (asyncio.wait_for(coro, t.timeout) if t.timeout else coro)
            elif in_thread or t.timeout:
                import asyncio

                fut = interrupts.contained(_in_thread(t.run, kwargs))
                value = await (asyncio.wait_for(fut, t.timeout) if t.timeout else fut)
            else:
                value = t.run(**kwargs)
        except InvalidArguments as e:
            return ToolResult(f"Error: {e}", True, time.perf_counter() - start, retryable=False)
        except TimeoutError as e:
            msg = (f"tool {t.name!r} timed out after {t.timeout} s" if t.timeout
                   else f"{type(e).__name__}: {e}")  # the tool's own timeout, not ours
            return ToolResult(f"Error: {msg}", True, time.perf_counter() - start)
        except Exception as e:  # noqa: BLE001 - a tool's failure is the model's observation
            error: BaseException = e.error if isinstance(e, interrupts.Contained) else e
            if error is not e and interrupts.stops_the_run(error, mark):
                raise error from None
            return ToolResult(error_text(error), True, time.perf_counter() - start,
                              retryable=getattr(error, "retryable", True) is not False)
        except BaseException as e:  # SystemExit, KeyboardInterrupt, CancelledError, GeneratorExit...
            if interrupts.stops_the_run(e, mark):
                raise
            return ToolResult(error_text(e), True, time.perf_counter() - start)
        finally:
            interrupts.leave(mark)
        return ToolResult(to_text(value), False, time.perf_counter() - start, value)

    async def execute_all(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run the calls of one turn concurrently; results come back in call order. A single call
        runs inline (no task, no thread) - the common case stays cheap."""
        if len(calls) == 1:
            return [await self.execute(calls[0])]
        import asyncio

        return list(await asyncio.gather(*(self.execute(c, in_thread=True) for c in calls)))


_POOL: Any = None
_POOL_LOCK = threading.Lock()


def _in_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` in a thread of tao's own pool (with this context: a sub-agent finds its
    run): not the loop's default executor, which ``asyncio.run`` waits for at its end, so a run
    whose clock or timeout gave up on a tool returns then, not when the tool's thread does."""
    import asyncio
    import contextvars
    import functools

    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        with _POOL_LOCK:
            _POOL = _POOL or ThreadPoolExecutor(32, "tao-tool")
    call = functools.partial(contextvars.copy_context().run, fn, **kwargs)
    return asyncio.get_running_loop().run_in_executor(_POOL, call)


# after Tool and Toolbox: FunctionTool subclasses Tool; both stay importable from here
from .function import FunctionTool, tool  # noqa: E402
