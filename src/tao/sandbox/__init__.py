"""``tao.sandbox``: run model-written Python in a confined, persistent worker.

    async with get_sandbox(tools=toolbox) as sb:      # bwrap where it works, else docker/subprocess
        r = await sb.execute("x = add(2, 3)\\nprint(x)")
        r.stdout, r.error, r.timed_out, r.killed_reason

Backends: ``bwrap`` (default; namespaces, read-only /usr, seccomp, rlimits), ``docker`` (when a
daemon answers), ``subprocess`` (fallback; the host filesystem is visible). Choose one with
``get_sandbox(kind)`` or ``TAO_SANDBOX=bwrap|docker|subprocess``.

For an agent (CodeAct): create one sandbox per run with the run's ``Toolbox`` (or pass one in and
call ``set_tools``), send each code block to ``execute``, give the model
``result.to_observation()``; ``result.has_final_answer``/``final_answer`` carry a
``final_answer(x)`` call, ``result.tool_calls`` the host tools the code called, ``restarted``
that earlier variables are gone. Variables persist between ``execute`` calls.
"""

from __future__ import annotations

import os
from typing import Any

from .base import (
    ExecutionResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
    ToolCallRecord,
)
from .bridge import ToolBridge, ToolCallError
from .host import WorkerSandbox

KINDS = ("bwrap", "docker", "subprocess")

__all__ = ["KINDS", "ExecutionResult", "Limits", "Sandbox", "SandboxError", "SandboxUnavailable",
           "ToolBridge", "ToolCallError", "ToolCallRecord", "WorkerSandbox", "available_backends",
           "backend_problem", "get_sandbox"]


def backend_problem(kind: str) -> str | None:
    """``None`` if ``kind`` can run here, else why not (probed once per process)."""
    if kind == "bwrap":
        from .bwrap import probe

        return probe()
    if kind == "docker":
        from .docker import probe as docker_probe

        return docker_probe()
    if kind == "subprocess":
        from .seccomp import supported

        return None if supported() else "no seccomp filter for this CPU architecture"
    raise ValueError(f"unknown sandbox kind {kind!r}; choose one of {', '.join(KINDS)}")


def available_backends() -> list[str]:
    return [k for k in KINDS if backend_problem(k) is None]


def get_sandbox(kind: str | None = None, **kwargs: Any) -> WorkerSandbox:
    """A sandbox of ``kind`` (or ``$TAO_SANDBOX``); with neither, the strongest that works here.
    ``kwargs`` go to the backend: ``tools``, ``limits``, ``workspace``."""
    kind = kind or os.environ.get("TAO_SANDBOX") or "auto"
    if kind == "auto":
        for k in KINDS:
            if backend_problem(k) is None:
                kind = k
                break
        else:
            raise SandboxUnavailable("no sandbox backend works here: "
                                     + "; ".join(f"{k}: {backend_problem(k)}" for k in KINDS))
    else:
        problem = backend_problem(kind)
        if problem is not None:
            raise SandboxUnavailable(f"the {kind} sandbox cannot run here: {problem}")
    if kind == "bwrap":
        from .bwrap import BwrapSandbox

        return BwrapSandbox(**kwargs)
    if kind == "docker":
        from .docker import DockerSandbox

        return DockerSandbox(**kwargs)
    from .subprocess import SubprocessSandbox

    return SubprocessSandbox(**kwargs)
