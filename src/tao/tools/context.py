"""``tao.RunContext``: what a tool may know of the run that calls it, beyond its arguments.

A tool whose first parameter is annotated ``RunContext`` (or ``RunContext[Deps]``) gets one at
each call: the run's ``deps`` (whatever ``agent.run(task, deps=...)`` was given: a database
handle, the user's id, an HTTP client), the run's id, its usage so far, and how many times this
same call (tool and arguments) failed before in the run. The parameter is never in the tool's
schema, so the model neither sees nor fills it, and ``deps`` never reach the audit log, the
journal or a trace: only the call's arguments do.

The context stays on the host: CodeAct's code calls such a tool through the sandbox's bridge
and the tool runs here, with the context; a plan's steps run it in the planner's process (with
``executor="ray"`` a step runs on a Ray worker, where no context is: such tools run locally).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, get_origin

from ..messages import Usage

Deps = TypeVar("Deps")


@dataclass(frozen=True, slots=True)
class RunContext(Generic[Deps]):
    """The run as a tool sees it (see the module's words)."""

    deps: Deps
    run_id: str = ""
    usage: Usage = field(default_factory=Usage)
    retry: int = 0  # earlier failures of this same call in this run
    tool_name: str = ""
    call_id: str = ""


class RunView:
    """What a run hands its tool door for the contexts it makes: its deps, id and usage (the
    live object, so "so far" is now), and the failures of each call so far."""

    __slots__ = ("deps", "run_id", "usage", "failures")

    def __init__(self, deps: Any, run_id: str, usage: Usage):
        self.deps, self.run_id, self.usage = deps, run_id, usage
        self.failures: dict[str, int] = {}

    def context(self, tool: str, call_id: str, key: str) -> RunContext[Any]:
        return RunContext(self.deps, self.run_id, self.usage, self.failures.get(key, 0), tool,
                          call_id)

    def failed(self, key: str) -> None:
        self.failures[key] = self.failures.get(key, 0) + 1


_NAMED = re.compile(r"^(?:tao\.)?(?:tools\.)?(?:context\.)?RunContext\b")


def context_parameter(fn: Any) -> str | None:
    """The name of ``fn``'s first parameter when it is annotated ``RunContext[...]``, else None.
    Works on string annotations too (``from __future__ import annotations``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if not params:
        return None
    found = [p.name for p in params if _is_context(p.annotation)]
    if found and found[0] != params[0].name:
        raise TypeError(f"{getattr(fn, '__name__', fn)}: the RunContext parameter "
                        f"{found[0]!r} must come first")
    return found[0] if found else None


def _is_context(ann: Any) -> bool:
    if ann is RunContext or get_origin(ann) is RunContext:
        return True
    return isinstance(ann, str) and bool(_NAMED.match(ann.strip("'\"")))
