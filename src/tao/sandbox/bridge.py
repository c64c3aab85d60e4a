"""The tool bridge: host functions that sandboxed code calls as if they were local.

The sandbox has no network and sees none of the host's objects, so a tool call travels over the
worker's pipe as JSON: ``add(2, 3)`` in the sandbox becomes a ``call`` frame, the host runs the
tool and answers with its value (plain JSON data) or its error, which the sandbox raises as
``ToolError``. Tools come as a tao ``Toolbox`` (run through ``Toolbox.execute`` so validation,
timeouts and error text are exactly those of the ReAct loop), as tools/functions, or as a
``{name: callable}`` mapping of plain (sync or async) functions.
"""

from __future__ import annotations

import inspect
import itertools
import keyword
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._io import plain


class ToolCallError(Exception):
    """A tool failed; the message goes to the sandbox, where it is raised as ``ToolError``."""


class ToolBridge:
    """Host side of the tool bridge."""

    def __init__(self, tools: Any = None):
        self._toolbox: Any = None
        self._functions: dict[str, Callable[..., Any]] = {}
        self._docs: dict[str, str] = {}
        self._ids = itertools.count(1)
        if tools is None:
            return
        from ..tools.base import Tool, Toolbox

        if isinstance(tools, Mapping):
            for name, fn in tools.items():
                if name != "final_answer":
                    self._add_function(name, fn)
            return
        toolbox = tools if isinstance(tools, Toolbox) else Toolbox(
            t for t in _as_iterable(tools))
        self._toolbox = toolbox
        for t in toolbox:
            assert isinstance(t, Tool)
            if t.name == "final_answer":  # the sandbox's own final_answer() takes its place
                continue
            _check_name(t.name)
            self._docs[t.name] = f"{t.signature()}\n\n{t.description}".strip()

    def _add_function(self, name: str, fn: Callable[..., Any]) -> None:
        _check_name(name)
        if not callable(fn):
            raise TypeError(f"tool {name!r} is not callable")
        self._functions[name] = fn
        self._docs[name] = inspect.getdoc(fn) or ""

    @property
    def names(self) -> list[str]:
        return list(self._docs)

    def specs(self) -> list[tuple[str, str]]:
        """(name, docstring) pairs: what the worker needs to define the stubs."""
        return list(self._docs.items())

    async def call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Run a tool for the sandbox: its value as plain data, or ``ToolCallError``. After it,
        ``ran_s`` is how long the tool itself ran (None: all of the call's time), so the host
        can keep the time a call waited at the door - on a person's approval - off the code's
        clock."""
        self.ran_s: float | None = None
        if name in self._functions:
            try:
                value = self._functions[name](*args, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
            except Exception as e:  # noqa: BLE001 - the tool's failure is raised in the sandbox
                raise ToolCallError(f"{type(e).__name__}: {e}") from None
            return plain(value)
        if self._toolbox is None or name not in self._toolbox:
            raise ToolCallError(f"unknown tool {name!r}")
        arguments = _bind(self._toolbox[name], args, kwargs)
        from ..messages import ToolCall

        call = ToolCall(f"sandbox-{next(self._ids)}", name, arguments)
        result = await self._toolbox.execute(call)
        self.ran_s = result.duration_s  # the tool's own time; the rest was the door's (approval)
        if result.is_error:
            message = result.content
            raise ToolCallError(message.removeprefix("Error: "))
        return plain(result.value)


def _bind(tool: Any, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Positional arguments mapped to the tool's parameter names, in schema order."""
    params = list(tool.spec.parameters.get("properties", {}))
    if len(args) > len(params):
        raise ToolCallError(f"{tool.signature()} takes {len(params)} arguments, got {len(args)}")
    arguments = dict(zip(params, args, strict=False))
    for k, v in kwargs.items():
        if k in arguments:
            raise ToolCallError(f"{tool.signature()} got two values for {k!r}")
        arguments[k] = v
    return arguments


def _check_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"tool name {name!r} is not a Python identifier, so sandboxed code "
                         "cannot call it")
    if name == "ToolError":
        raise ValueError(f"tool name {name!r} is reserved in the sandbox")


def _as_iterable(tools: Any) -> Iterable[Any]:
    if callable(tools) and not isinstance(tools, (list, tuple)):
        return [tools]
    return tools
