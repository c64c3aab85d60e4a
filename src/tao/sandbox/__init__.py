"""``tao.sandbox``: run model-written Python in a confined, persistent worker.

    async with get_sandbox(tools=toolbox) as sb:      # bubblewrap, or SandboxUnavailable
        r = await sb.execute("x = add(2, 3)\\nprint(x)")
        r.stdout, r.error, r.timed_out, r.killed_reason, r.limits_hit
    sb.describe()   # 'bwrap · cgroup v1: memory 1 GiB, 64 processes for the whole sandbox · ...'

Backends: ``bwrap`` (the default; namespaces, read-only /usr, seccomp, rlimits), ``docker`` (where
a daemon answers), ``subprocess`` (weaker: **the host filesystem is visible**). There is no quiet
fallback: without a choice tao uses bwrap, and where bwrap cannot run ``get_sandbox`` raises
``SandboxUnavailable`` at once, saying why and how to choose another backend on purpose -
``get_sandbox("subprocess")`` or ``TAO_SANDBOX=bwrap|docker|subprocess``.

On every backend the sandbox *as a whole* is capped where the machine allows - memory and process
count by a cgroup of its own (v2, or v1 memory + pids; root or a delegated v2 subtree), the
workspace tao makes by a size-capped tmpfs (root) - and otherwise only per process (rlimits);
``describe()`` names what is in force and what is not, and why.

For an agent (CodeAct): create one sandbox per run with the run's ``Toolbox`` (or pass one in and
call ``set_tools``), send each code block to ``execute``, give the model
``result.to_observation()``; ``result.has_final_answer``/``final_answer`` carry a
``final_answer(x)`` call, ``result.tool_calls`` the host tools the code called, ``restarted``
that earlier variables are gone, ``limits_hit`` which limit stopped the code. Variables persist
between ``execute`` calls.
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
           "backend_problem", "get_sandbox", "unavailable_message"]


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
    """A sandbox of ``kind``, else of ``$TAO_SANDBOX``, else bwrap - never a weaker one than asked
    for: a backend that cannot run here raises ``SandboxUnavailable`` saying why and what else
    there is. ``kwargs`` go to the backend: ``tools``, ``limits``, ``workspace``."""
    chosen = kind or os.environ.get("TAO_SANDBOX") or "bwrap"
    if chosen not in KINDS:
        where = "" if kind else " (from TAO_SANDBOX)"
        raise ValueError(f"unknown sandbox kind {chosen!r}{where}; "
                         f"choose one of {', '.join(KINDS)}")
    problem = backend_problem(chosen)
    if problem is not None:
        raise SandboxUnavailable(unavailable_message(chosen, problem))
    if chosen == "bwrap":
        from .bwrap import BwrapSandbox

        return BwrapSandbox(**kwargs)
    if chosen == "docker":
        from .docker import DockerSandbox

        return DockerSandbox(**kwargs)
    from .subprocess import SubprocessSandbox

    return SubprocessSandbox(**kwargs)


def unavailable_message(kind: str, problem: str) -> str:
    """Why ``kind`` cannot run, and how to pick another backend on purpose."""
    others = []
    if kind != "docker" and backend_problem("docker") is None:
        others.append("TAO_SANDBOX=docker (a Docker daemon answers here)")
    if kind != "subprocess" and backend_problem("subprocess") is None:
        others.append('TAO_SANDBOX=subprocess, or sandbox="subprocess" / '
                      'get_sandbox("subprocess") (weaker: the code sees the host filesystem)')
    text = f"the {kind} sandbox cannot run here: {problem}."
    if kind == "bwrap" and "not installed" in problem:
        text += " Install bubblewrap (apt-get install bubblewrap)."
    if others:
        text += (" tao does not fall back to a weaker sandbox by itself; to use another one, "
                 "choose it: " + "; or ".join(others) + ".")
    return text
