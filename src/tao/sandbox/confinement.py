"""What holds a sandbox as a whole, beside its worker - its workspace and its cgroup - and which
limit one execution ran into, said so that a model (and a person) can act on it.

The sandbox-wide limits are read from the kernel's own counters (the cgroup's ``oom_kill`` and
``pids.events max``), never guessed from a SIGKILL; a full workspace from its free space. The
per-process limits show up as the errors they raise in the code (``MemoryError`` for
``RLIMIT_AS``, ``EFBIG``, ``EMFILE``, ``EAGAIN`` at fork), so those are read off the error text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .base import Limits, format_size
from .cgroups import CgroupUnavailable, Counters, SandboxCgroup
from .cgroups import setup as cgroup_setup
from .workspace import Workspace

NPROC_SLACK = 8  # RLIMIT_NPROC above pids.max: the cgroup, which counts refusals, bites first


class Confinement:
    """A sandbox's workspace and (``use_cgroup``) its own cgroup, or the reason it has none."""

    def __init__(self, workspace: str | os.PathLike[str] | None, limits: Limits, uid: int | None,
                 use_cgroup: bool):
        self.limits = limits
        self.workspace = Workspace(workspace, limits.workspace_bytes, uid)
        self.cgroup: SandboxCgroup | None = None
        self.cgroup_note: str | None = None
        if use_cgroup:
            try:
                self.cgroup = SandboxCgroup(cgroup_setup(), limits.memory_bytes,
                                            limits.max_processes)
            except (CgroupUnavailable, OSError) as e:
                self.cgroup_note = str(e)
        self._full = False

    def describe(self) -> list[str]:
        lim = self.limits
        if self.cgroup is not None:
            caps = self.cgroup.describe()
        else:
            caps = (f"no whole-sandbox cap ({self.cgroup_note}): per process only, "
                    f"{format_size(lim.memory_bytes)} address space, {lim.max_processes} "
                    "processes")
        return [caps, self.workspace.describe()]

    def judge(self, outcome: str, error: str | None, stderr: str, tmpfs_bytes: int | None
              ) -> Verdict:
        """What this execution ran into (the cgroup's counters are read once per execution)."""
        events = self.cgroup.new_events() if self.cgroup is not None else None
        enospc = _has(_ENOSPC, error, stderr)
        full = False
        if enospc or self.workspace.capacity is not None:
            now = self.workspace.is_full()
            full, self._full = now and (enospc or not self._full), now
        return judge(outcome, error, stderr, events, self.limits, workspace_full=full,
                     workspace_cap=self.workspace.capacity, tmpfs_bytes=tmpfs_bytes)

    def release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        self.workspace.release()


_ENOSPC = ("[Errno 28]", "No space left on device")
_EFBIG = ("[Errno 27]", "File too large")
_EMFILE = ("[Errno 24]", "Too many open files")
_EAGAIN_FORK = ("can't start new thread", "BlockingIOError: [Errno 11]")


@dataclass
class Verdict:
    """The limits one execution hit: their names, the sentences the model reads, and - when the
    worker itself was killed by one - the explanation that replaces the bare signal."""

    keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    death: str | None = None  # replaces the worker's exit explanation

    def add(self, key: str, note: str | None = None) -> None:
        if key not in self.keys:
            self.keys.append(key)
            if note:
                self.notes.append(note)


def judge(outcome: str, error: str | None, stderr: str, events: Counters | None,
          limits: Limits, *, workspace_full: bool, workspace_cap: int | None,
          tmpfs_bytes: int | None) -> Verdict:
    """``events``: the cgroup's counts during this execution (``None`` without a cgroup);
    ``workspace_full``: the workspace is full now and was not before (or the code hit ENOSPC)."""
    v = Verdict()
    text = (error or "") + "\n" + stderr
    last = (error or "").rstrip().rsplit("\n", 1)[-1]
    if outcome == "timeout":
        v.add("timeout")
    elif outcome == "overflow":
        v.add("output")
    elif "SIGXCPU" in outcome:
        v.add("cpu")
    memory = format_size(limits.memory_bytes)
    if events is not None and events.oom_kills > 0:
        whole = (f"the sandbox's memory limit of {memory} (all its processes and tmpfs files "
                 "together)")
        if outcome.startswith("died:") and "SIGKILL" in outcome:
            v.add("memory")
            v.death = f"The sandbox worker was killed by the out-of-memory killer: {whole} was " \
                      "reached"
        else:
            n = events.oom_kills
            v.add("memory", f"{whole[0].upper()}{whole[1:]} was reached: the kernel killed {n} of "
                            f"its process{'es' if n > 1 else ''}.")
    if events is not None and events.forks_refused > 0:
        v.add("processes", f"The sandbox's process limit ({limits.max_processes} processes and "
                           f"threads together) was reached: {events.forks_refused} new "
                           "process(es) or thread(s) were refused.")
    elif events is None and any(s in text for s in _EAGAIN_FORK):
        v.add("process_rlimit", f"The process limit was reached: the sandbox may run at most "
                                f"{limits.max_processes} processes and threads (RLIMIT_NPROC).")
    enospc = any(s in text for s in _ENOSPC)
    if workspace_full:
        if workspace_cap is not None:
            v.add("workspace", f"The workspace is full: its limit of {format_size(workspace_cap)} "
                               "was reached (No space left on device). Delete files there to "
                               "free space.")
        else:
            v.add("workspace", "The disk that holds the workspace is full (No space left on "
                               "device).")
    elif enospc and tmpfs_bytes is not None:
        v.add("tmpfs", f"/tmp or /dev/shm is full: each holds at most {format_size(tmpfs_bytes)} "
                       "(No space left on device); the workspace has room.")
    if last.startswith("MemoryError") and "memory" not in v.keys:
        space = format_size(limits.address_space(events is not None))
        v.add("address_space", f"One process may use at most {space} of address space "
                               "(MemoryError); the data does not fit in one process.")
    if any(s in text for s in _EFBIG):
        v.add("file_size", f"One file may be at most {format_size(limits.max_file_bytes)} "
                           "(File too large).")
    if any(s in text for s in _EMFILE):
        v.add("open_files", f"One process may have at most {limits.max_open_files} files open "
                            "(Too many open files).")
    return v


def _has(signs: tuple[str, ...], error: str | None, stderr: str) -> bool:
    text = (error or "") + "\n" + stderr
    return any(s in text for s in signs)
