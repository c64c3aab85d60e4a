"""``@tool``: a plain function as a tool - its schema from the type hints, its descriptions from
the docstring, the pydantic model built on first use (defining tools at import stays cheap)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .base import Tool
from .context import context_parameter

#: the guardrails' marks a tool may carry (``tao.guard``); see ``Tool``
_MARKS = ("requires_approval", "high_risk", "untrusted_output", "secret", "side_effects",
          "idempotent",  # these two: the run journal's (tao.runs)
          "continued_by")  # the text protocol's: see ``Tool.continued_by``


class FunctionTool(Tool):
    """A tool made from a plain function by ``@tool``."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None,
                 description: str | None = None, timeout: float | None = None, **marks: Any):
        self.fn = fn
        for key, value in marks.items():  # requires_approval, high_risk, untrusted_output, secret
            if key not in _MARKS:
                raise TypeError(f"@tool got an unexpected keyword argument {key!r}")
            if key in ("requires_approval", "untrusted_output") and not (
                    isinstance(value, bool) or callable(value)):
                raise TypeError(f"{key} must be True/False or a predicate on the arguments")
            setattr(self, key, tuple(value) if key == "secret" else value)
        self.name = name or fn.__name__
        for param in inspect.signature(fn).parameters.values():  # a user error: say so at once
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"@tool {self.name}: *args/**kwargs cannot be described to a model")
        self._doc = inspect.getdoc(fn) or ""
        self._description = description
        self.timeout = timeout
        self._args_model: Any = None
        #: the first parameter's name when it takes the run's ``tao.RunContext`` (not in the schema)
        self.context_param = context_parameter(fn)
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
    skip = context_parameter(fn)  # the run's context: the tool's, never the model's
    hints = get_type_hints(fn) if skip is None else {k: v for k, v in _hints(fn).items() if k != skip}
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if pname == skip:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool {name}: *args/**kwargs cannot be described to a model")
        annotation = hints.get(pname, Any)
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
    return create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints, where ``RunContext`` (written as a string) need not resolve in the tool's
    module: it is left out of the schema anyway."""
    from typing import get_type_hints

    from .context import RunContext

    return get_type_hints(fn, localns={"RunContext": RunContext})


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
    A first parameter annotated ``tao.RunContext[Deps]`` receives the run's context (its
    ``deps``, id, usage, retry count) and is not part of the schema.
    """
    if fn is None:
        return lambda f: FunctionTool(f, name, description, timeout, **marks)
    return FunctionTool(fn, name, description, timeout, **marks)
