"""The sandbox vocabulary: what an execution returns, the limits a worker runs under, the protocol.

Every backend keeps one *persistent* worker process (a small Python REPL) so that variables live
across executions like an IPython session and a warm execution pays no process start. What the
sandboxed code does wrong (an exception, a timeout, a memory bomb) is an ``ExecutionResult`` - an
observation for the model; what the library's user does wrong (no bwrap, a sandbox that cannot
start) is a ``SandboxError`` at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import TaoError


class SandboxError(TaoError):
    """The sandbox cannot be set up or started (no bwrap, no Docker daemon, a broken worker)."""


class SandboxUnavailable(SandboxError):
    """The requested backend does not work on this machine."""


def format_size(n: int) -> str:
    """Bytes as a person reads them: ``1 GiB``, ``512 MiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one sandbox. ``timeout_s`` is the default wall clock of one ``execute``;
    ``cpu_s`` is a backstop over the worker's whole life (the worker is restarted when it is hit).

    ``memory_bytes`` and ``max_processes`` (threads count too) cap the sandbox *as a whole* where
    a cgroup can be had (root, or a delegated cgroup v2 subtree; ``describe()`` says which), and
    each process in it with ``RLIMIT_AS``/``RLIMIT_NPROC`` everywhere (``RLIMIT_AS`` an eighth
    below ``memory_bytes`` under a cgroup: ``address_space``). Files in the sandbox's
    tmpfs folders are memory too and count against the whole-sandbox cap. ``workspace_bytes``
    caps the workspace tao makes (a tmpfs, as root); ``tmpfs_bytes`` each private ``/tmp`` and
    ``/dev/shm`` (bwrap). Output beyond ``max_output_bytes`` per stream is dropped and marked; a
    worker writing more than ``kill_output_bytes`` is killed, so printing gigabytes costs the host
    nothing.
    """

    timeout_s: float = 30.0
    cpu_s: int = 600
    memory_bytes: int = 1 << 30
    max_processes: int = 64
    max_open_files: int = 256
    max_file_bytes: int = 64 << 20
    tmpfs_bytes: int = 256 << 20
    workspace_bytes: int = 512 << 20
    max_output_bytes: int = 64 << 10
    kill_output_bytes: int = 32 << 20

    def address_space(self, whole_cap: bool) -> int:
        """One process's ``RLIMIT_AS``. Under a whole-sandbox cap it is set an eighth (at most
        128 MiB) below it: the cgroup also counts the sandbox's page cache, tmpfs files and kernel
        memory, so a lone process growing to the very cap made the kernel reclaim the sandbox's
        own file pages (Python's, re-read at once) and stalled it for seconds before the
        ``MemoryError`` came; with the margin the ``MemoryError`` comes first, at once."""
        if not whole_cap:
            return self.memory_bytes
        return self.memory_bytes - min(self.memory_bytes // 8, 128 << 20)

    def rlimits(self, other_tasks: int = 0, nproc_slack: int = 0,
                whole_cap: bool = False) -> dict[str, tuple[int, int]]:
        """The rlimits the worker applies to itself before running any user code. RLIMIT_NPROC
        counts every task of the uid, so ``other_tasks`` (those the uid already runs outside the
        sandbox) are added to ``max_processes``; ``nproc_slack`` lifts it above a cgroup's
        ``pids.max``, so that the cgroup - which counts what it refuses - is the one that bites.
        ``whole_cap``: a cgroup caps the sandbox as a whole (see ``address_space``)."""
        nproc = self.max_processes + other_tasks + nproc_slack
        space = self.address_space(whole_cap)
        return {
            "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 5),
            "RLIMIT_AS": (space, space),
            "RLIMIT_NOFILE": (self.max_open_files, self.max_open_files),
            "RLIMIT_FSIZE": (self.max_file_bytes, self.max_file_bytes),
            "RLIMIT_CORE": (0, 0),
            "RLIMIT_NPROC": (nproc, nproc),
        }


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One call the sandboxed code made to a host tool."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    error: str | None
    duration_s: float


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """What one ``execute`` observed.

    ``error`` is the traceback trimmed to the user's own lines (``<cell-N>``). ``killed_reason``
    says why the worker was killed or died (timeout, output flood, CPU or memory limit, crash);
    after that the sandbox's variables are gone and the next execution starts a fresh worker and
    has ``restarted=True``. ``final_answer`` holds the value given to ``final_answer(x)`` when
    ``has_final_answer``. ``limits_hit`` names the limits the code ran into, from the kernel's
    own counters where a cgroup holds the sandbox: ``memory`` and ``processes`` (the whole
    sandbox), ``workspace`` and ``tmpfs`` (full), ``address_space``, ``process_rlimit``,
    ``file_size``, ``open_files`` and ``cpu`` (per process), ``timeout``, ``output``; ``notes``
    say it in words for the model, with the sizes."""

    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    timed_out: bool = False
    killed_reason: str | None = None
    duration_s: float = 0.0
    truncated: bool = False
    final_answer: Any = None
    has_final_answer: bool = False
    restarted: bool = False
    tool_calls: tuple[ToolCallRecord, ...] = field(default=())
    limits_hit: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.killed_reason is None

    def to_observation(self) -> str:
        """The result as the text a model reads: output, error, and what happened to the session."""
        parts = []
        if self.restarted:
            parts.append("[The sandbox was restarted before this code ran: variables, imports and "
                         "functions from earlier code blocks are gone.]")
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        if self.error:
            parts.append(self.error.rstrip("\n"))
        if self.killed_reason:
            parts.append(f"[{self.killed_reason}]")
        parts.extend(f"[{note}]" for note in self.notes)
        if self.has_final_answer:
            parts.append(f"[final answer: {self.final_answer!r}]")
        return "\n".join(parts) if parts else "[no output]"


@runtime_checkable
class Sandbox(Protocol):
    """Runs model-written Python in a persistent, confined worker.

    ``tools`` (a ``Toolbox``, an iterable of tools/functions, or a ``{name: callable}`` mapping)
    become functions inside the sandbox; calling one runs it on the host and returns its value.
    ``final_answer(x)`` is always defined there."""

    kind: str

    async def start(self) -> None: ...

    async def execute(self, code: str, timeout: float | None = None) -> ExecutionResult: ...

    def set_tools(self, tools: Any) -> None: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Sandbox: ...

    async def __aexit__(self, *exc: object) -> None: ...
