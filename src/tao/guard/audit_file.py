"""The audit file's bytes, below both its writer (``audit``) and its reader (``audit_verify``):
the line format the two must agree on, and the os-level calls that open the file, write a line
whole and read its last line back. Apart so that the syncer thread (``audit_sync``) and
``verify`` use them without importing ``AuditLog``, and so that the format lives in one place.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from ..safe_json import dumps

#: the ``prev`` of line 1: there is no line before it
GENESIS = "0" * 64

_SEQ_HEAD = re.compile(rb'\{"seq":(\d+),')
_HASH_TAIL = re.compile(rb',"hash":"([0-9a-f]{64})"\}$')


def _seal(entry: dict[str, Any]) -> tuple[bytes, str]:
    """The line for ``entry`` (no newline), its JSON with its own hash as the last key; and
    that hash."""
    body = dumps(entry, separators=(",", ":")).encode("utf-8")
    digest = hashlib.sha256(body).hexdigest()
    return body[:-1] + b',"hash":"' + digest.encode() + b'"}', digest


def _own_hash_ok(line: bytes) -> bool:
    m = _HASH_TAIL.search(line)
    return bool(m) and hashlib.sha256(line[:m.start()] + b"}").hexdigest() == m.group(1).decode()


def _open(path: str) -> _Fd:
    try:
        return _Fd(os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600))
    except FileNotFoundError:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return _Fd(os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600))


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Fd(int):
    """A file descriptor that closes at the end of a ``with``."""

    def __enter__(self) -> int:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self)


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)  # a line: one write, but a write may be cut short
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        view = view[os.write(fd, view):]


def _tail(fd: int) -> tuple[int, str, tuple[int, bytes] | None]:
    """``(seq of the last complete line, its SHA-256, torn)``; ``torn`` is ``(offset, bytes)`` of
    an incomplete last line, else ``None``. Reads backwards only as far as the last line reaches
    (one 8 KiB read for a usual line). A last line that does not parse is chained to all the
    same (its seq from the line count): the file was tampered with, ``verify`` says where, and
    appending does not hide it."""
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0:
        return 0, GENESIS, None
    size = 8192
    while True:
        start = max(0, end - size)
        chunk = os.pread(fd, end - start, start)
        last_nl = chunk.rfind(b"\n")
        before = chunk.rfind(b"\n", 0, max(last_nl, 0))
        if start == 0 or before >= 0:
            break
        size *= 4
    torn = None if last_nl == len(chunk) - 1 else (start + last_nl + 1, chunk[last_nl + 1:])
    if last_nl < 0:
        return 0, GENESIS, torn
    line = chunk[before + 1:last_nl]
    m = _SEQ_HEAD.match(line)
    return (int(m.group(1)) if m else _count_lines(fd, start + last_nl + 1),
            hashlib.sha256(line).hexdigest(), torn)


def _count_lines(fd: int, upto: int) -> int:
    count, pos = 0, 0
    while pos < upto:
        data = os.pread(fd, min(1 << 20, upto - pos), pos)
        count, pos = count + data.count(b"\n"), pos + len(data)
    return count
