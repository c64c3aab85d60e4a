"""The audit log's reading side: ``verify`` (``tao audit verify``) and ``entries`` (``tao audit
show``) read a file as it stood at one instant and never write it, so they need neither
``AuditLog`` nor its syncer thread - only the line format in ``audit_file``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..safe_json import loads
from .audit_file import GENESIS, _own_hash_ok


@dataclass(slots=True)
class VerifyReport:
    """What ``verify`` found. ``ok``: no line was edited, removed or reordered (a torn tail
    alone keeps it ``ok``; ``tao audit verify --strict`` counts it as a failure). ``bad_line``:
    the first bad line (1-based), ``reason`` a code (``not_json``, ``edited``, ``seq``, ``prev``,
    or ``head``: the head asked for is not there), ``detail`` the facts behind it; ``lines``:
    complete lines that verified; ``head``: the SHA-256 of the last verified line (``GENESIS``
    for an empty log), which the next line's ``prev`` will be."""

    path: Path
    ok: bool = True
    lines: int = 0
    head: str = GENESIS
    bad_line: int | None = None
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    torn_tail: bool = False
    torn_bytes: int = 0

    def message(self, lang: str = "en") -> str:
        """One sentence for the user, in ``lang`` ("zh" or "en")."""
        from ..prompts import render, table

        text = table("audit")[lang if lang == "zh" else "en"]
        values = {"path": str(self.path), "lines": str(self.lines), "head": self.head,
                  "line": str(self.bad_line), "bytes": str(self.torn_bytes),
                  **{k: str(v) for k, v in self.detail.items()}}
        if not self.ok:
            return render(text["bad"], **values) + " " + render(text[self.reason or "edited"], **values)
        said = render(text["ok"], **values)
        return said + (" " + render(text["torn_tail"], **values) if self.torn_tail else "")


def read_lines(path: str | os.PathLike[str]) -> Iterator[tuple[bytes, bool]]:
    """``(line, complete)`` for each line of the file, without its newline; only the last one
    can be incomplete. Reads the file as it stood at one instant - its size taken under a shared
    lock, so a line a live writer is halfway through is not seen - and streams it, so a large
    log neither has to fit in memory nor holds writers up while it is read."""
    with open(path, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        try:
            left = os.fstat(f.fileno()).st_size
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
        while left > 0:
            raw = f.readline(left)  # never past the snapshot: a line ends there or at a newline
            if not raw:
                break
            left -= len(raw)
            yield (raw[:-1], True) if raw.endswith(b"\n") else (raw, False)


def verify(path: str | os.PathLike[str], head: str | None = None) -> VerifyReport:
    """Check every line's own hash, ``seq`` and ``prev``; stop at the first bad line. ``head``:
    a head noted from an earlier ``verify`` (or a line's ``hash``); the log must still hold that
    line, which is what catches its end cut off. Raises ``OSError`` (``FileNotFoundError``...)
    when the file cannot be read."""
    report = VerifyReport(Path(path))
    expected_prev, n, found = GENESIS, 0, head is None or head == GENESIS
    for line, complete in read_lines(path):
        n += 1
        if not complete:
            report.torn_tail, report.torn_bytes = True, len(line)
            break
        try:
            entry = loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            entry = None
        if not isinstance(entry, dict):
            return _bad(report, n, "not_json")
        if not _own_hash_ok(line):
            return _bad(report, n, "edited")
        if entry.get("seq") != n:
            return _bad(report, n, "seq", seq=entry.get("seq"), expected=n)
        if entry.get("prev") != expected_prev:
            return _bad(report, n, "prev", before=n - 1)
        expected_prev = hashlib.sha256(line).hexdigest()
        report.lines, report.head = n, expected_prev
        found = found or head in (expected_prev, entry.get("hash"))
    if not found:
        return _bad(report, report.lines + 1, "head", head=head)
    return report


def _bad(report: VerifyReport, line: int, reason: str, **detail: Any) -> VerifyReport:
    report.ok, report.bad_line, report.reason, report.detail = False, line, reason, detail
    return report


def entries(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The complete lines that parse as JSON objects, in file order (for ``tao audit show``;
    says nothing about whether they verify - that is ``verify``'s job)."""
    for line, complete in read_lines(path):
        if not complete:
            break
        try:
            entry = loads(line.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry
