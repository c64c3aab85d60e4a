"""Tools: ``@tool`` for functions, ``Tool`` for hand-written classes, ``Toolbox`` to run them.

Argument schemas come from type hints and the docstring and are validated with pydantic, but the
pydantic model is built lazily on first use so that defining tools at import time stays cheap.
Whatever goes wrong inside a call - unknown name, invalid arguments (nested past
``safe_json.MAX_DEPTH`` included), an exception, a timeout, a tool raising ``SystemExit`` or
``KeyboardInterrupt`` - comes back as an error observation the model can read and correct; it
never ends the run. Only the user does: a real Ctrl-C, or cancelling the run's task.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import ToolCall
from ..models.base import ToolSpec
from ..safe_json import MAX_DEPTH, dumps, too_deep
from . import interrupts

MAX_OBSERVATION_CHARS = 8000


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
    ``untrusted_output`` (its output is fenced as data and taints the run) and ``secret``
    (argument names whose values never reach the audit log).
    """

    name: str = ""
    description: str = ""
    Args: Any = None  # a pydantic BaseModel subclass describing the arguments
    timeout: float | None = None
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False
    high_risk: bool = False
    untrusted_output: bool = False
    secret: tuple[str, ...] = ()

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


def _type_name(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " | ".join(repr(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " | ".join(_type_name(p) for p in prop["anyOf"])
    return {"number": "float", "integer": "int", "string": "str", "boolean": "bool",
            "array": "list", "object": "dict", "null": "None"}.get(prop.get("type", ""), "Any")


def _explain(tool: Tool, error: Any) -> str:
    lines = []
    for err in error.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        got = err.get("input")
        lines.append(f"- {where}: {err['msg']}" + ("" if err["type"] == "missing" else f" (got {_shown(got)})"))
    return f"invalid arguments for {tool.signature()}:\n" + "\n".join(lines)


def _shown(value: Any, limit: int = 300) -> str:
    """``repr(value)``, cut to ``limit`` characters; a value ``repr`` cannot write (an integer
    of over 4,300 digits, nesting past the stack) as JSON with notes instead."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = dumps(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class FunctionTool(Tool):
    """A tool made from a plain function by ``@tool``."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None,
                 description: str | None = None, timeout: float | None = None, **marks: Any):
        self.fn = fn
        for key, value in marks.items():  # requires_approval, high_risk, untrusted_output, secret
            if key not in _MARKS:
                raise TypeError(f"@tool got an unexpected keyword argument {key!r}")
            if key == "requires_approval" and not (isinstance(value, bool) or callable(value)):
                raise TypeError("requires_approval must be True/False or a predicate on the arguments")
            setattr(self, key, tuple(value) if key == "secret" else value)
        self.name = name or fn.__name__
        for param in inspect.signature(fn).parameters.values():  # a user error: say so at once
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"@tool {self.name}: *args/**kwargs cannot be described to a model")
        self._doc = inspect.getdoc(fn) or ""
        self._description = description
        self.timeout = timeout
        self._args_model: Any = None
        self._is_async = inspect.iscoroutinefunction(fn)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @property
    def description(self) -> str:  # type: ignore[override]
        if self._description is None:
            from docstring_parser import parse

            doc = parse(self._doc)
            parts = [doc.short_description or "", doc.long_description or ""]
            self._description = "\n\n".join(p for p in parts if p).strip() or self.name
        return self._description

    def args_model(self) -> Any:
        if self._args_model is None:
            self._args_model = _model_from_signature(self.fn, self.name, self._doc)
        return self._args_model

    def run(self, **kwargs: Any) -> Any:
        return self.fn(**kwargs)

    def is_async(self) -> bool:
        return self._is_async

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calling the decorated function still calls the function."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


def _model_from_signature(fn: Callable[..., Any], name: str, doc: str) -> Any:
    from typing import get_type_hints

    from docstring_parser import parse
    from pydantic import ConfigDict, Field, create_model

    param_docs = {p.arg_name: p.description for p in parse(doc).params}
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool {name}: *args/**kwargs cannot be described to a model")
        annotation = hints.get(pname, Any)
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
    return create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)


_MARKS = ("requires_approval", "high_risk", "untrusted_output", "secret")


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, timeout: float | None = None, **marks: Any) -> Any:
    """Make a function a tool. The argument schema comes from the type hints, the description and
    per-parameter descriptions from the docstring (Google, reST or numpy style)::

        @tool
        def add(a: float, b: float) -> float:
            '''Add two numbers.

            Args:
                a: the first number
                b: the second number
            '''
            return a + b

    ``requires_approval=True`` (or ``=lambda args: "rm" in args["command"]``), ``high_risk``,
    ``untrusted_output`` and ``secret=("password",)`` are the guardrails' marks (see ``Tool``).
    """
    if fn is None:
        return lambda f: FunctionTool(f, name, description, timeout, **marks)
    return FunctionTool(fn, name, description, timeout, **marks)


def to_text(value: Any) -> str:
    """How a tool's return value reads to a model: 36.0 reads as 36, dicts as JSON, and float
    noise is rounded away at 15 significant digits (``240 * 0.8 - 20`` reads as 172, not
    172.00000000000003; 1/3 keeps its digits), because a model copies what it reads. Never
    raises: an integer too long for ``str`` (over 4,300 digits) reads in scientific notation,
    a structure ``json`` cannot write has the part it cannot write replaced by a note."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool) or value is None:
        text = str(value)
    elif isinstance(value, float):
        short = f"{value:.15g}"
        if math.isfinite(value) and len(short) < len(repr(value)) - 2:  # noise: 0000…3, 9999…86
            value = float(short)
        text = str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    elif isinstance(value, int):
        text = _int_text(value)
    elif isinstance(value, complex):
        text = str(value)
    else:
        text = dumps(value)
    if len(text) > MAX_OBSERVATION_CHARS:
        cut = len(text) - MAX_OBSERVATION_CHARS
        text = f"{text[:MAX_OBSERVATION_CHARS]}\n... [truncated {cut} characters]"
    return text


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits()
        from decimal import Decimal

        d = Decimal(value)
        return f"{d:.15e} (an integer of {d.adjusted() + 1} digits)"


class Toolbox:
    """The registry an agent calls tools through. ``bind(run)`` gives the same tools with a
    run's guard (``tao.guard.run.Run``) on the door: every call is admitted by it (policy,
    approval, budgets) before it runs and passed through it after (untrusted output, audit)."""

    _run: Any = None

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()):
        self._tools: dict[str, Tool] = {}
        for t in tools:
            for one in (t if isinstance(t, Toolbox) else (t,)):  # a Toolbox among them: its tools
                self.add(one)

    def add(self, t: Tool | Callable[..., Any]) -> Tool:
        if not isinstance(t, Tool):
            if not callable(t):
                raise TypeError(f"not a tool: {t!r}")
            t = FunctionTool(t)
        if not t.name:
            raise TypeError(f"{type(t).__name__} has no name")
        if t.name in self._tools and hasattr(t, "prefixed"):  # an MCP tool yields the name:
            t = t.prefixed()                                  # it takes its server's prefix
        elif t.name in self._tools and hasattr(self._tools[t.name], "prefixed"):
            moved = self._tools.pop(t.name).prefixed()
            self._tools[moved.name] = moved
        if t.name in self._tools:
            raise ValueError(f"two tools are named {t.name!r}")
        self._tools[t.name] = t
        return t

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def bind(self, run: Any) -> Toolbox:
        """These tools behind ``run``'s guard (itself when the run's guard has nothing to do)."""
        if run is None or not run.active:
            return self
        import copy

        bound = copy.copy(self)
        bound._run = run
        return bound

    async def execute(self, call: ToolCall, *, in_thread: bool = False, run: Any = None) -> ToolResult:
        """Run one call; every failure becomes an error ``ToolResult`` - also a tool raising
        ``SystemExit``, ``KeyboardInterrupt`` or another ``BaseException`` (see ``interrupts``).
        What stops the run is the user: a real Ctrl-C, or the run's task being cancelled. With
        a run's guard (``run=`` or ``bind``), a call it refuses never runs: its ``ToolResult``
        says why; a spent budget raises ``BudgetExceeded``."""
        run = run or self._run
        if run is None:
            return await self._execute(call, in_thread)
        t = self._tools.get(call.name)
        if t is not None and not call.parse_error:
            admitted = await run.admit(call, t)
            if isinstance(admitted, ToolResult):
                return admitted
            call = admitted
        token = run.enter()  # a sub-agent this tool starts runs under this run's guard
        try:
            result = await self._execute(call, in_thread)
        finally:
            run.leave(token)
        return run.after(call, t, result)

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
        mark = interrupts.enter()
        try:
            kwargs = t.validate(call.arguments)
            if t.is_async():
                import asyncio  # loaded by then; kept out of `import tao`

                coro = interrupts.contained(t.run(**kwargs))
                value = await (asyncio.wait_for(coro, t.timeout) if t.timeout else coro)
            elif in_thread or t.timeout:
                import asyncio

                fut = interrupts.contained(asyncio.to_thread(t.run, **kwargs))
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
            if isinstance(e, interrupts.Contained):
                e = e.error
                if interrupts.stops_the_run(e, mark):
                    raise e from None
            return ToolResult(error_text(e), True, time.perf_counter() - start,
                              retryable=getattr(e, "retryable", True) is not False)
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


def error_text(e: BaseException) -> str:
    """``Error: ValueError: ...`` - how an exception from a tool reads to the model."""
    try:
        detail = str(e)
    except Exception:  # noqa: BLE001 - an exception whose own __str__ fails
        detail = "(its message cannot be read)"
    text = f"Error: {type(e).__name__}: {detail}" if detail else f"Error: {type(e).__name__}"
    if not isinstance(e, Exception):
        text += " (raised by the tool; the run goes on)"
    return text
