"""Paths a model gives, resolved so that nothing outside the workspace root is read or written.

Why component by component: checking a path first (``realpath``) and opening it afterwards races
with the commands ``run_command`` runs, which may swap a folder for a symbolic link between the
check and the use. Here every folder is opened relative to the one before it (``dir_fd``) with
``O_NOFOLLOW``, starting at the root, so each step is checked and taken in one system call, and
the last name is opened, listed or replaced through that same folder descriptor. Links are never
followed, inside the root or out: the rule stays one line long and no target is ever touched.
Special files (FIFOs, devices, sockets) are refused from ``lstat`` before any ``open`` (opening a
device can have side effects); the ``open`` itself is non-blocking and ``fstat`` must then show a
regular file, so a FIFO swapped in between cannot hang the host.

A write never leaves half a file: the bytes go to an unnamed ``O_TMPFILE`` in the target's folder
(a named temporary where the file system has none), are fsynced, linked under a temporary name and
``rename``d over the target, and the folder is fsynced. A crash before the rename leaves the old
file whole and, with ``O_TMPFILE``, nothing else behind. A replaced file keeps its mode and owner.
Hard links need no rule of their own: a write replaces the name, never the inode behind it, and
the sandbox cannot link to a file of the host (another mount in bwrap; ``protected_hardlinks``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
MAX_PATH_BYTES, MAX_PART_BYTES = 4096, 255
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


class Refused(Exception):
    """A path or file the workspace tools will not use; ``key`` names the text in workspace.toml."""

    def __init__(self, key: str, **values: object):
        super().__init__(key)
        self.key, self.values = key, values


def shown(path: str) -> str:
    """A path as an observation may quote it: NUL and broken Unicode escaped, at most 200 chars."""
    text = path.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return text if len(text) <= 200 else text[:200] + "..."


def parts_of(path: str, *, allow_root: bool = False) -> list[str]:
    """The names in a relative path, or ``Refused`` (NUL, broken Unicode, absolute, ``..``, long)."""
    if "\x00" in path:
        raise Refused("nul", path=shown(path))
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused("bad_unicode", path=shown(path)) from None
    p = path.strip()
    if p.startswith(("/", "\\")) or p == "~" or p.startswith("~/") or _DRIVE.match(p):
        raise Refused("absolute", path=shown(p))
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if ".." in parts:
        raise Refused("dotdot", path=shown(p))
    if len(encoded) > MAX_PATH_BYTES or any(len(x.encode()) > MAX_PART_BYTES for x in parts):
        raise Refused("too_long", path=shown(p))
    if not parts and not allow_root:
        raise Refused("empty_path")
    return parts


def lstat_at(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def kind_of(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"), (stat.S_ISLNK, "link"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"),
                       (stat.S_ISBLK, "device")):
        if test(mode):
            return kind
    return "other"


def link_target(dfd: int, name: str) -> str:
    try:
        return shown(os.readlink(name, dir_fd=dfd))
    except OSError:
        return "?"


def _refusal(dfd: int, name: str, where: str, error: OSError, want: str) -> Refused:
    """Why ``name`` could not be opened as a ``want`` ("dir" or "file"), in the model's terms."""
    st = lstat_at(dfd, name)
    if st is None:
        return Refused("not_found", path=where)
    kind = kind_of(st.st_mode)
    if kind == "link":
        return Refused("symlink", path=where, target=link_target(dfd, name))
    if want == "dir" and kind != "dir":
        return Refused("not_dir", path=where)
    if want == "file" and kind == "dir":
        return Refused("is_dir", path=where)
    if want == "file" and kind != "file":
        return Refused("not_regular", path=where, kind=kind)
    return Refused("os_error", path=where, error=error.strerror or str(error))


def walk(root: str, parts: list[str], *, create: bool = False, owner: int | None = None,
         made: Callable[[str], None] | None = None) -> int:
    """A descriptor of the folder ``root/parts`` (the caller closes it), made as needed when
    ``create``; ``made(path)`` is told before each folder is made (and may refuse it)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            where = "/".join(parts[: i + 1])
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create or lstat_at(fd, part) is not None:  # a dangling link is a link
                    raise _refusal(fd, part, where, OSError(errno.ENOENT, ""), "dir") from None
                if made is not None:
                    made(where)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    raise _refusal(fd, part, where, e, "dir") from None
                if owner is not None:
                    os.fchown(nxt, owner, owner)
            except OSError as e:
                raise _refusal(fd, part, where, e, "dir") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _check_file(st: os.stat_result | None, dfd: int, name: str, where: str) -> None:
    if st is None:
        raise Refused("not_found", path=where)
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(dfd, name, where, OSError(errno.EINVAL, ""), "file")


def read_bytes(root: str, parts: list[str], cap: int) -> bytes:
    """The content of a regular file of at most ``cap`` bytes."""
    dfd = walk(root, parts[:-1])
    name, where = parts[-1], "/".join(parts)
    try:
        st = lstat_at(dfd, name)
        _check_file(st, dfd, name, where)
        if st.st_size > cap:
            raise Refused("too_big_read", path=where, size=st.st_size, cap=cap)
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=dfd)
        except OSError as e:  # swapped for something else since the lstat
            raise _refusal(dfd, name, where, e, "file") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Refused("not_regular", path=where, kind=kind_of(os.fstat(fd).st_mode))
            chunks, size = [], 0
            while size <= cap and (chunk := os.read(fd, min(1 << 20, cap + 1 - size))):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)
    if size > cap:  # it grew since the lstat
        raise Refused("too_big_read", path=where, size=size, cap=cap)
    return b"".join(chunks)


def write_atomic(root: str, parts: list[str], data: bytes, *, owner: int | None = None,
                 made: Callable[[str], None] | None = None) -> bool:
    """Replace (or create) ``root/parts`` with ``data`` atomically; True when the file is new.
    New files and folders go to ``owner`` (the sandbox's uid) when one is given."""
    dfd = walk(root, parts[:-1], create=True, owner=owner, made=made)
    name, where = parts[-1], "/".join(parts)
    try:
        old = lstat_at(dfd, name)
        if old is not None:
            _check_file(old, dfd, name, where)
        elif made is not None:
            made(where)
        try:
            _replace(dfd, name, data, old, owner, unnamed=True)
        except OSError as e:
            raise Refused("os_error", path=where, error=e.strerror or str(e)) from None
        if old is not None and name.endswith(".py"):
            _drop_bytecode(dfd, name[:-3])
    finally:
        os.close(dfd)
    return old is None


def _drop_bytecode(dfd: int, stem: str) -> None:
    """Remove ``__pycache__/STEM.*.pyc`` beside a rewritten module. Python (and pytest's
    assertion rewriting) trust a .pyc whose recorded source mtime (whole seconds) and size
    match: a fix of the same length written within the second the old code ran would be
    silently ignored by the next ``pytest``. Best effort: a cache left behind is harmless
    when its key no longer matches."""
    try:
        cache = os.open("__pycache__", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                        dir_fd=dfd)
    except OSError:
        return
    try:
        for entry in os.listdir(cache):
            if entry.startswith(stem + ".") and entry.endswith(".pyc"):
                try:
                    os.unlink(entry, dir_fd=cache)
                except OSError:
                    pass
    finally:
        os.close(cache)


def _replace(dfd: int, name: str, data: bytes, old: os.stat_result | None, owner: int | None,
             unnamed: bool) -> None:
    tmp: str | None = None
    if unnamed:
        try:
            fd = os.open(".", os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            unnamed = False
    if not unnamed:
        tmp = f".tao-{os.urandom(8).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if old is not None:
            os.fchmod(fd, stat.S_IMODE(old.st_mode) & 0o777)
            if os.geteuid() == 0:
                os.fchown(fd, old.st_uid, old.st_gid)
        elif owner is not None:
            os.fchown(fd, owner, owner)
        os.fsync(fd)
        if tmp is None:  # give the unnamed file a name, to rename over the target
            tmp = f".tao-{os.urandom(8).hex()}.tmp"
            try:
                os.link(f"/proc/self/fd/{fd}", tmp, dst_dir_fd=dfd, follow_symlinks=True)
            except OSError:  # no /proc: write it again the named way
                tmp = None
                return _replace(dfd, name, data, old, owner, unnamed=False)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
    finally:
        os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
    os.fsync(dfd)


def entries(root: str, parts: list[str]) -> list[tuple[str, str, int, str | None]]:
    """``(name, kind, size, link target)`` of a folder's entries, sorted by name."""
    fd = walk(root, parts)
    try:
        with os.scandir(fd) as it:
            names = sorted(e.name for e in it)
        found = []
        for name in names:
            st = lstat_at(fd, name)
            if st is not None:
                kind = kind_of(st.st_mode)
                found.append((name, kind, st.st_size, link_target(fd, name) if kind == "link"
                              else None))
        return found
    finally:
        os.close(fd)


def give(root: str, paths: list[str], uid: int, from_uids: set[int]) -> None:
    """Hand ``paths`` (made by the host) and whatever ``from_uids`` (earlier sandboxes) own to
    ``uid``, without following a link (``fwalk`` holds folder descriptors, ``lchown`` by name)."""
    for path in paths:
        parts = path.split("/")
        with contextlib.suppress(Refused, OSError):
            dfd = walk(root, parts[:-1])
            try:
                os.chown(parts[-1], uid, uid, dir_fd=dfd, follow_symlinks=False)
            finally:
                os.close(dfd)
    if not from_uids:
        return
    for _, dirs, files, dfd in os.fwalk(root):
        for name in dirs + files:
            st = lstat_at(dfd, name)
            if st is not None and st.st_uid in from_uids:
                with contextlib.suppress(OSError):
                    os.chown(name, uid, uid, dir_fd=dfd, follow_symlinks=False)
