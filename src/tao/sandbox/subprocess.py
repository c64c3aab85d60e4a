"""The subprocess backend: for where bubblewrap cannot run, chosen explicitly (never a silent
fallback: ``TAO_SANDBOX=subprocess`` or ``get_sandbox("subprocess")``). Weaker, and honest about it.

What it does: ``python -I -S`` (no user site, no environment variables honoured), a scrubbed
environment (the host's API keys never reach it), the workspace as working directory, the same
rlimits, and whole-sandbox caps (cgroup, tmpfs workspace) where the machine allows, a fresh
unprivileged uid when tao runs as root (reaped with ``kill(-1)`` as that uid on close or timeout,
which also finds ``setsid`` escapees), the same seccomp filter (no sockets),
``PR_SET_PDEATHSIG`` so it dies with the host.

What it cannot do: **the host filesystem is visible** - anything world-readable (the project
checkout, ``/etc/passwd``, other processes' command lines in ``/proc``) can be read, and
world-writable places (``/tmp``, ``/dev/shm``) can be written. Files only root may read
(``/etc/shadow``, ``/root``, other processes' ``environ``) stay closed only when tao runs as root
(the uid drop). Not as root, the code runs as the invoking user and can signal the host process.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from typing import Any

from .base import SandboxUnavailable
from .host import WorkerSandbox, _Worker
from .privileges import tasks_of_uid, usable_by_others
from .seccomp import build_filter, supported

_FALLBACK_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")


class SubprocessSandbox(WorkerSandbox):
    """A worker in a plain child process (see the module docstring for what that does not hide)."""

    kind = "subprocess"
    exposure = "host filesystem visible"

    def __init__(self, **kwargs: Any):
        if not supported():
            raise SandboxUnavailable("the subprocess sandbox needs seccomp to block sockets; no "
                                     "filter is known for this CPU architecture")
        super().__init__(**kwargs)
        try:
            self._python = self._choose_python()
        except SandboxUnavailable:
            self._finalizer()
            raise

    def python(self) -> str:
        return self._python

    def _precompiled(self) -> bool:
        """A system python3 of the same minor version reads our marshalled code too."""
        return self._python == sys.executable or _magic(self._python) == _magic(sys.executable)

    def _choose_python(self) -> str:
        """The host interpreter, unless the sandbox's uid cannot reach it (e.g. pyenv under a
        mode-700 ``/root``): then the first system ``python3`` it can."""
        if self.uid is None or usable_by_others(sys.executable):
            return sys.executable
        for candidate in _FALLBACK_PYTHONS:
            if usable_by_others(candidate):
                return candidate
        raise SandboxUnavailable(f"the sandbox uid cannot run {sys.executable} (a parent folder is "
                                 "closed to other users) and no system python3 was found")

    def _launch(self, worker_argv: list[str], pass_fds: tuple[int, ...], stdout: int,
                stderr: int) -> subprocess.Popen[bytes]:
        ws = str(self.workspace)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": ws, "TMPDIR": ws, "LANG": "C.UTF-8"}
        drop: dict[str, Any] = {}
        if self.uid is not None:
            drop = {"user": self.uid, "group": self.uid, "extra_groups": []}
        return subprocess.Popen(
            worker_argv, pass_fds=pass_fds,
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=ws, env=env,
            start_new_session=True, **drop)

    def _init_config(self) -> dict[str, Any]:
        cfg = super()._init_config()
        if self.uid is None:  # the user's own uid: its other tasks count against RLIMIT_NPROC
            cfg["rlimits"] = self._rlimits(other_tasks=tasks_of_uid(os.getuid()))
        cfg["seccomp"] = build_filter()
        cfg["pdeathsig"] = True
        cfg["host_pid"] = os.getpid()
        return cfg

    def _new_worker(self, proc: subprocess.Popen[bytes], fds: tuple[int, int, int, int]) -> _Worker:
        return _Worker(proc, *fds, kill_uid=self.uid, python=self._python)


@functools.cache
def _magic(python: str) -> str | None:
    """The bytecode magic number of an interpreter (asked once per process)."""
    if python == sys.executable:
        import importlib.util

        return importlib.util.MAGIC_NUMBER.hex()
    try:
        r = subprocess.run([python, "-I", "-S", "-c",
                            "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"],
                           capture_output=True, text=True, timeout=10, env={})
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None
