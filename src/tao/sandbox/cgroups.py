"""Caps on the sandbox *as a whole*: one cgroup per sandbox for its memory and its process count.

rlimits are per process: four children under a 1 GiB ``RLIMIT_AS`` reached 3.6 GiB together. A
cgroup counts everything the worker starts. Each sandbox gets its own (``memory`` + ``pids``) for
its whole life - restarts included, so the tmpfs files it wrote stay charged to it - and it is
removed on close. It is made inside tao's *own* cgroup, so whatever caps the host keeps applying.

- **cgroup v2**, where the parent (tao's own cgroup, or ``TAO_CGROUP``: a delegated, empty cgroup
  tao may create children in) offers ``memory`` and ``pids``: ``memory.max``,
  ``memory.swap.max = 0``, ``pids.max``; counters from ``memory.events``, ``pids.events``.
- **cgroup v1** (``memory`` and ``pids`` hierarchies): ``memory.limit_in_bytes`` and
  ``memory.memsw.limit_in_bytes``, ``pids.max``; counters from ``memory.oom_control``
  (``oom_kill``) and ``pids.events``.

Getting in without a race: the host opens the new cgroup's ``cgroup.procs`` and passes the fd; the
worker writes ``0`` (itself) to it before it reads any user code, so everything user code starts
is inside. The kernel checks the *opener's* rights, so this works after the worker's uid drop and
from inside bwrap's namespaces, and the worker closes the fd at once.

Where neither version is usable (not root and no delegated v2 subtree), ``setup()`` says why and
the sandbox keeps only its per-process rlimits - and says so in ``describe()``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass

from .base import format_size

PREFIX = "tao-"


class CgroupUnavailable(Exception):
    """No cgroup tao may use here; the message says why."""


@dataclass(frozen=True, slots=True)
class Counters:
    """What the kernel counted for one cgroup: processes killed by its out-of-memory killer, and
    forks or threads refused at ``pids.max``."""

    oom_kills: int = 0
    forks_refused: int = 0

    def __sub__(self, other: Counters) -> Counters:
        return Counters(self.oom_kills - other.oom_kills, self.forks_refused - other.forks_refused)


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


@functools.cache
def _mounts() -> tuple[tuple[str, str, str, frozenset[str]], ...]:
    """(fstype, mount root, mount point, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                found.append((rest[0], _unescape(fields[3]), _unescape(fields[4]),
                              frozenset(rest[2].split(","))))
    return tuple(found)


def _own_paths() -> dict[str, str]:
    """This process's cgroup per v1 controller, and ``""`` for v2."""
    paths = {}
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    return paths


def _host_dir(mount_root: str, mount_point: str, own: str) -> str | None:
    """Where ``own`` (a path in the hierarchy) is on this mount, if the mount shows it."""
    if mount_root != "/" and not (own == mount_root or own.startswith(mount_root + "/")):
        return None
    rel = own[len(mount_root):] if mount_root != "/" else own
    return mount_point + rel.rstrip("/") if rel.strip("/") else mount_point


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)


def _field(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


@dataclass(frozen=True, slots=True)
class Parent:
    """Where a sandbox's cgroups are made: one folder (v2) or one per controller (v1)."""

    version: int
    memory: str
    pids: str


@functools.cache
def setup() -> Parent:
    """The parent cgroup(s) a sandbox can use here, or ``CgroupUnavailable`` saying why not."""
    reasons = []
    for find in (_v2_parent, _v1_parent):
        try:
            return find()
        except (CgroupUnavailable, OSError) as e:
            reasons.append(str(e))
    raise CgroupUnavailable("; ".join(r for r in reasons if r) or "no cgroup file system")


def _v2_parent() -> Parent:
    mount = next(((root, point) for fs, root, point, _ in _mounts() if fs == "cgroup2"), None)
    chosen = os.environ.get("TAO_CGROUP")
    if chosen:
        parent = os.path.realpath(chosen)
    elif mount is None:
        raise CgroupUnavailable("")
    else:
        own = _own_paths().get("")
        parent = _host_dir(*mount, own) if own is not None else None
        if parent is None:
            raise CgroupUnavailable("cgroup v2: tao's own cgroup is not visible")
    have = set(_read(f"{parent}/cgroup.controllers").split())
    if not {"memory", "pids"} <= have:
        on_v1 = any(fs == "cgroup" and "memory" in opts for fs, _, _, opts in _mounts())
        raise CgroupUnavailable("" if on_v1 else "cgroup v2 has no memory/pids controllers here")
    if not os.access(parent, os.W_OK):
        raise CgroupUnavailable("cgroup v2 not delegated to this user (see TAO_CGROUP)")
    enabled = set(_read(f"{parent}/cgroup.subtree_control").split())
    if not {"memory", "pids"} <= enabled:
        try:  # refused (EBUSY) where the cgroup holds processes: tao's own usually does
            _write(f"{parent}/cgroup.subtree_control", "+memory +pids")
        except OSError as e:
            raise CgroupUnavailable(f"cgroup v2: memory/pids not enabled below {parent} "
                                    f"({e.strerror}; see TAO_CGROUP)") from None
    return Parent(2, parent, parent)


def _v1_parent() -> Parent:
    own = _own_paths()
    dirs = {}
    for controller in ("memory", "pids"):
        for fs, root, point, opts in _mounts():
            if fs == "cgroup" and controller in opts and controller in own:
                d = _host_dir(root, point, own[controller])
                if d and os.path.isdir(d):
                    dirs[controller] = d
                    break
        else:
            raise CgroupUnavailable(f"cgroup v1 has no {controller} hierarchy here")
        if not os.access(dirs[controller], os.W_OK):
            raise CgroupUnavailable("cgroup v1 not writable: needs root")
    return Parent(1, dirs["memory"], dirs["pids"])


class SandboxCgroup:
    """One sandbox's cgroup(s): made with its caps, joined by each worker, removed on close."""

    def __init__(self, parent: Parent, memory_bytes: int, max_processes: int):
        self.version, self.memory_bytes, self.max_processes = (parent.version, memory_bytes,
                                                               max_processes)
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.memory_dir = f"{parent.memory}/{self.name}"
        self.pids_dir = f"{parent.pids}/{self.name}"
        self.dirs = tuple(dict.fromkeys((self.memory_dir, self.pids_dir)))
        for d in dict.fromkeys((parent.memory, parent.pids)):
            _sweep(d)
        made: list[str] = []
        try:
            for d in self.dirs:
                os.mkdir(d, 0o755)
                made.append(d)
            if self.version == 2:
                _write(f"{self.memory_dir}/memory.max", str(memory_bytes))
                with contextlib.suppress(FileNotFoundError):  # no swap accounting: no swap
                    _write(f"{self.memory_dir}/memory.swap.max", "0")
            else:
                _write(f"{self.memory_dir}/memory.limit_in_bytes", str(memory_bytes))
                with contextlib.suppress(FileNotFoundError):  # swap counted in the same cap
                    _write(f"{self.memory_dir}/memory.memsw.limit_in_bytes", str(memory_bytes))
            _write(f"{self.pids_dir}/pids.max", str(max_processes))
        except OSError:
            for d in made:
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            raise
        self._seen = Counters()

    def describe(self) -> str:
        return (f"cgroup v{self.version}: memory {format_size(self.memory_bytes)}, "
                f"{self.max_processes} processes for the whole sandbox")

    def open_procs(self) -> list[int]:
        """Fresh fds on ``cgroup.procs`` for the next worker to join (it closes its copies)."""
        fds: list[int] = []
        try:
            for d in self.dirs:
                fds.append(os.open(f"{d}/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def members(self) -> list[int]:
        try:
            return [int(p) for p in _read(f"{self.pids_dir}/cgroup.procs").split()]
        except OSError:
            return []

    def counters(self) -> Counters:
        try:
            if self.version == 2:
                oom = _field(_read(f"{self.memory_dir}/memory.events"), "oom_kill")
            else:
                oom = _field(_read(f"{self.memory_dir}/memory.oom_control"), "oom_kill")
            refused = _field(_read(f"{self.pids_dir}/pids.events"), "max")
        except (OSError, ValueError):
            return self._seen
        return Counters(oom, refused)

    def new_events(self) -> Counters:
        """What was counted since the last call (one execution's worth)."""
        now = self.counters()
        delta, self._seen = now - self._seen, now
        return delta

    def peak_bytes(self) -> int:
        """The most memory the sandbox has held at once (its processes and its tmpfs files)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return int(_read(f"{self.memory_dir}/{name}"))

    def kill_all(self) -> None:
        """SIGKILL everything in the cgroup, until it is empty (a fork storm refills it)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(f"{self.pids_dir}/cgroup.kill", "1")
        deadline = time.monotonic() + 5
        while (pids := self.members()) and time.monotonic() < deadline:
            for pid in pids:
                _kill_if_member(pid, self.name)
            time.sleep(0.002)

    def remove(self) -> None:
        self.kill_all()
        deadline = time.monotonic() + 5
        for d in self.dirs:
            while True:
                try:
                    os.rmdir(d)
                    break
                except OSError as e:  # EBUSY until the last killed process has exited
                    if e.errno != errno.EBUSY or time.monotonic() > deadline:
                        break
                    time.sleep(0.005)


def _kill_if_member(pid: int, name: str) -> None:
    """SIGKILL ``pid`` only if it is still in our cgroup: the pidfd pins the process, so a pid
    reused by an unrelated process after the listing is never hit."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        paths = [line.rsplit(":", 1)[-1] for line in _read(f"/proc/{pid}/cgroup").splitlines()]
        if any(p.endswith("/" + name) or f"/{name}/" in p for p in paths):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sweep(parent: str) -> None:
    """Remove the empty cgroups of tao processes that died without closing their sandboxes."""
    try:
        entries = os.listdir(parent)
    except OSError:
        return
    for entry in entries:
        if not entry.startswith(PREFIX):
            continue
        pid = entry[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.rmdir(f"{parent}/{entry}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
