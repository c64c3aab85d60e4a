"""The sandbox's workspace: a host folder the code writes to and host-side tools read from.

A plain folder has no size: code filled 1.2 GiB of the host's disk in 0.3 s. So the workspace tao
makes itself is, as root, a **size-capped tmpfs mounted on the host** (``nosuid,nodev``, an inode
cap too): the host still reads every file the code wrote, the files survive a worker restart
after a timeout (the mount lives as long as the sandbox), a full workspace is ``ENOSPC`` inside,
and the host's disk is never touched. Its pages are memory charged to the sandbox's cgroup, so
they count against the whole-sandbox memory cap. It is unmounted on close with everything in it:
read what you need before ``close()``.

What is not capped, and says so in ``describe()``: a folder the user passes in (tao will not hide
its contents under a mount, nor delete it), and any workspace when tao is not root (mounting needs
``CAP_SYS_ADMIN`` in the host's mount namespace). ``RLIMIT_FSIZE`` still caps each file there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from .base import format_size
from .privileges import prepare_workspace

PREFIX = "tao-sandbox-"
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


class Workspace:
    """The folder, whether tao owns it (deleted on close), and the cap in force (``None``: none,
    ``note`` says why)."""

    def __init__(self, given: str | os.PathLike[str] | None, capacity: int, uid: int | None):
        self.own = given is None
        self.capacity: int | None = None
        self.note: str | None = None
        if given is None:
            _sweep()
            self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
            if os.geteuid() != 0:
                self.note = "not size-capped: needs root"
            else:
                try:
                    _mount_tmpfs(self.path, capacity, uid)
                    self.capacity = capacity
                except OSError as e:
                    self.note = f"not size-capped: tmpfs mount failed, {e.strerror}"
        else:
            self.path = Path(given).resolve()
            self.path.mkdir(parents=True, exist_ok=True)
            self.note = "not size-capped: a folder you passed in"
        prepare_workspace(self.path, uid)

    def describe(self) -> str:
        if self.capacity is not None:
            return f"workspace tmpfs {format_size(self.capacity)}"
        return f"workspace {self.note}"

    def is_full(self) -> bool:
        """Whether less than one MiB is left (a write that failed with ENOSPC filled it)."""
        try:
            st = os.statvfs(self.path)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < 1 << 20 or (st.f_files > 0 and st.f_favail == 0)

    def release(self) -> None:
        if not self.own:
            return
        if self.capacity is not None:
            _umount(self.path)
        shutil.rmtree(self.path, ignore_errors=True)  # fd-based: symlinks inside are not followed


def _libc():  # noqa: ANN202 - ctypes only where a mount is made (root), never at import
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(path: Path, capacity: int, uid: int | None) -> None:
    ctypes, libc = _libc()
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    options = f"size={capacity},nr_inodes={max(1024, capacity // 4096)},mode=0700{owner}"
    if libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                  options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))


def _umount(path: Path) -> None:
    _, libc = _libc()
    libc.umount2(os.fsencode(path), _MNT_DETACH)


def _sweep() -> None:
    """Unmount and remove the tmpfs workspaces of tao processes that died without closing them
    (each would otherwise hold up to its cap in memory until reboot)."""
    if os.geteuid() != 0:
        return
    base = os.path.realpath(tempfile.gettempdir()) + "/" + PREFIX
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            points = [line.split()[4] for line in f if f" {base}" in line]
    except OSError:
        return
    for point in points:
        pid = point[len(base):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(OSError):
            _umount(Path(point))
            shutil.rmtree(point, ignore_errors=True)
