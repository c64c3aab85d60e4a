"""The bubblewrap backend: the default wherever ``bwrap`` works.

The sandbox sees a new, empty root with only: ``/usr`` and the interpreter's prefix (read-only),
the ``/bin``/``/lib*`` symlinks (or binds) that merged-/usr systems need, a private ``/proc`` of its
own pid namespace, a minimal ``/dev``, size-capped tmpfs ``/tmp`` and ``/dev/shm`` and one writable
``/workspace``; the root itself is remounted read-only. Never ``--ro-bind / /``: that would show
``/etc/shadow`` and the project checkout. No network namespace peers, no host pids, no host
environment (``--clearenv``), a seccomp filter against sockets, the worker's rlimits, and -
where the machine allows - the sandbox's own cgroup and a size-capped tmpfs workspace
(``confinement.py``).

Two modes, because of how the kernel counts processes:

- **not root**: ``--unshare-all`` with a user namespace (``--disable-userns`` inside), the code runs
  as uid 1000 there; RLIMIT_NPROC counts the sandbox's processes in that namespace.
- **root**: a user namespace would map the sandbox back to real uid 0, for which the kernel ignores
  RLIMIT_NPROC. So every namespace *but* the user one is unshared, bwrap keeps only
  CAP_SETUID/CAP_SETGID/CAP_SETPCAP, and the worker, before it reads any user code, switches to
  the sandbox's own unprivileged uid with every capability set emptied - what ``setpriv`` does,
  without its exec (~3 ms) - and verifies it in ``/proc/self/status`` (``no_new_privs`` is set by
  bwrap, the seccomp filter is already on, and denies new namespaces).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from .base import SandboxUnavailable
from .host import WorkerSandbox
from .seccomp import build_filter, supported

INSIDE_UID = 1000
_TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@functools.cache
def _prefixes() -> list[str]:
    """Folders the interpreter needs: its prefix (and the base prefix of a venv), unless /usr."""
    found = []
    for p in {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
              os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}:
        if p != "/usr" and not p.startswith("/usr/") and p != "/":
            found.append(p)
    # a prefix inside another needs no bind of its own
    return sorted(p for p in found if not any(p != q and p.startswith(q + "/") for q in found))


def filesystem_args(workspace: str, tmpfs_bytes: int) -> list[str]:
    """The new root, in mount order. The private tmpfs ``/tmp`` and ``/dev/shm`` come *before* the
    interpreter's prefix: bwrap mounts in argument order, and a prefix under ``/tmp`` (a venv on a
    CI runner) bound first would be hidden by the tmpfs mounted over it (execvp: not found)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in _TOP_LINKS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(tmpfs_bytes), "--perms", "1777", "--tmpfs", "/tmp",
             # its own /dev/shm, so multiprocessing's semaphores work
             "--size", str(tmpfs_bytes), "--perms", "1777", "--tmpfs", "/dev/shm"]
    made = {"/tmp", "/dev", "/dev/shm", "/proc"}  # mounted above: never re-made over
    for prefix in _prefixes():
        parts = prefix.strip("/").split("/")
        for i in range(1, len(parts)):  # parents at 0755, whatever the host's mode (/root is 700)
            parent = "/" + "/".join(parts[:i])
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", prefix, prefix]
    args += ["--bind", workspace, "/workspace", "--remount-ro", "/"]
    return args


def namespace_args(root: bool) -> list[str]:
    common = ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv",
              "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace",
              "--setenv", "TMPDIR", "/tmp", "--setenv", "LANG", "C.UTF-8"]
    if root:
        caps = ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]  # the worker's drop needs these
        return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--cap-drop", "ALL",
                *[arg for cap in caps for arg in ("--cap-add", cap)], *common]
    return ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(INSIDE_UID),
            "--gid", str(INSIDE_UID), "--cap-drop", "ALL", *common]


class BwrapSandbox(WorkerSandbox):
    """A worker inside bubblewrap (see the module docstring)."""

    kind = "bwrap"

    def __init__(self, **kwargs: Any):
        self._bwrap = shutil.which("bwrap")
        if self._bwrap is None:
            raise SandboxUnavailable("bubblewrap is not installed (apt-get install bubblewrap)")
        super().__init__(**kwargs)

    def _launch(self, worker_argv: list[str], pass_fds: tuple[int, ...], stdout: int,
                stderr: int) -> subprocess.Popen[bytes]:
        assert self._bwrap is not None
        args = [self._bwrap, *namespace_args(self.uid is not None),
                *filesystem_args(str(self.workspace), self.limits.tmpfs_bytes)]
        seccomp_r = None
        if supported():
            seccomp_r, seccomp_w = os.pipe2(os.O_CLOEXEC)
            os.write(seccomp_w, build_filter())
            os.close(seccomp_w)
            args += ["--seccomp", str(seccomp_r)]
            pass_fds += (seccomp_r,)
        args += ["--", *worker_argv]
        try:
            return subprocess.Popen(args, pass_fds=pass_fds, stdin=subprocess.DEVNULL,
                                    stdout=stdout, stderr=stderr, env={"PATH": "/usr/bin:/bin"},
                                    cwd="/", start_new_session=True)
        finally:
            if seccomp_r is not None:
                os.close(seccomp_r)

    def _tmpfs_bytes(self) -> int | None:
        return self.limits.tmpfs_bytes

    def _init_config(self) -> dict[str, Any]:
        cfg = super()._init_config()
        cfg["cwd"] = "/workspace"  # entered after the uid drop: the folder is the sandbox's, 0700
        if self.uid is not None:
            cfg["uid"] = cfg["gid"] = self.uid
        return cfg


@functools.cache
def probe() -> str | None:
    """``None`` when bwrap can start a sandbox like ours here, else why not (cached)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed"
    try:
        with tempfile.TemporaryDirectory(prefix="tao-bwrap-probe-") as empty:
            args = [bwrap, *namespace_args(os.geteuid() == 0), *filesystem_args(empty, 1 << 20),
                    "--", sys.executable, "-I", "-S", "-c", "pass"]
            r = subprocess.run(args, capture_output=True, timeout=20,
                               env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap did not run: {e}"
    if r.returncode != 0:
        return r.stderr.decode("utf-8", "replace").strip() or f"bwrap exited with {r.returncode}"
    return None
