"""The audit log: one JSON line per tool call, approval decision and run start/end, each line
chained to the one before it, so that a line edited, removed or reordered afterwards is found.

    log = AuditLog()                      # ~/.local/share/tao/audit.jsonl (see default_path)
    log.append({"kind": "tool.call", "run_id": rid, "tool": "run_command",
                "arguments": {"command": "ls"}, "status": "ok"}, secret={"password"})
    report = verify(log.path)             # report.ok, report.bad_line, report.message("zh")

Each line is ``{"seq": N, "ts": ..., "prev": ..., <record>, "hash": ...}``: ``seq`` is the line's
number (1, 2, ...), ``prev`` the SHA-256 of the previous line's bytes (``GENESIS`` for the
first), ``hash`` the SHA-256 of the line's own bytes up to ``,"hash"``. The own hash pins an edit
to the line edited (the last line too, which no ``prev`` covers); ``prev`` catches a line
rewritten with a fresh own hash; ``seq`` names a removed or reordered line. What no chain can
catch on its own is the *end* cut off or rewritten whole: ``verify`` reports the head hash, and
``verify(path, head=...)`` (``tao audit verify --head``) checks that a head noted earlier,
somewhere the log's writer cannot reach, is still in the chain. The line format (``GENESIS``,
``_seal``) and the file's low-level reads and writes are in ``audit_file``; ``verify`` and
``entries`` are in ``audit_verify``; their names stay importable from here.

Appends take an exclusive ``flock`` on the file and read the last line under it (unless the file
is as this log's last append left it: same inode, same size), so processes writing at once never
interleave and ``seq`` stays contiguous; each line goes out in one
``write`` before ``append`` returns, so a process killed at any moment (SIGKILL) loses no line it
appended: the OS has it. The fsync is what costs (milliseconds on a real disk), and an event loop
must not wait for it: an ``append`` outside an event loop fsyncs its line before it returns (as
ever); one on an event loop's thread (a run's records: run start and end, tool calls, approvals)
returns once the line is written, and the file's syncer thread (``_Syncer``, one per file in a
process) fsyncs it right after - one fsync covering every line written before it, so lines that
come while one runs share the next. ``fsync="batch"`` hands every fsync to the syncer, one per
2 ms of lines; ``fsync=False`` never fsyncs (a power cut may then lose the last lines, but never
leaves an unverifiable chain). ``await log.aappend(record)`` waits for its fsync without blocking
the loop.

Nothing is left unsynced at a clean end: ``close()``/``flush()`` wait for the syncer;
``asyncio.run`` does not return before the lines its loop wrote are fsync'd (a task of the log
waits for them, and blocks the loop's shutdown until they are); the interpreter's exit waits for
every syncer (``atexit``). An fsync that fails is never dropped silently: it is logged
(``tao.audit``) at once, and the next ``append``, ``flush`` or ``close`` of the log raises
``AuditError`` saying how many lines it concerned and why. A write that fails raises ``OSError``
from ``append`` itself. The syncer threads, with their ``atexit`` and fork hooks, are in
``audit_sync``.

A writer killed mid-line leaves an incomplete last line: ``verify`` reports it as a torn tail (every
earlier line still verifies), and the next append cuts it off and records an ``audit.torn_tail``
line with its length and SHA-256 in its place, so the chain goes on. Incomplete bytes followed by
more lines are tampering.

Redaction happens before anything is written (``tao.guard.redact``): values under keys that name
a secret (``api_key``, ``authorization``, ``token``, ``password``, ``secret``...) and under the
names passed as ``secret=``, the values of secret environment variables (``OPENAI_API_KEY``...)
wherever they occur, and strings shaped like keys (``sk-...``, ``ghp_...``, ``AKIA...``,
``Bearer ...``, a URL's ``user:password``) all become ``"***"``.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Self

from ..errors import TaoError

# The line format and the file's reads and writes are audit_file's, the fsync thread
# audit_sync's, the reading side audit_verify's; their names stay importable from here.
from .audit_file import (  # noqa: F401
    _HASH_TAIL,
    _SEQ_HEAD,
    GENESIS,
    _count_lines,
    _Fd,
    _fsync_dir,
    _open,
    _own_hash_ok,
    _seal,
    _tail,
    _write_all,
)
from .audit_sync import (  # noqa: F401
    _BATCH,
    _MODES,
    _NONE,
    _RECORD,
    _SYNCERS,
    _drain_all,
    _forget_syncers,
    _Hold,
    _running_loop,
    _Syncer,
    _syncer,
    _wake,
)
from .audit_verify import VerifyReport, _bad, entries, read_lines, verify  # noqa: F401
from .redact import REDACTED, env_secrets, is_secret_key, needs_redaction, redact

#: keys the log writes itself; a record carrying one is a caller's mistake, not overwritten quietly
RESERVED = frozenset({"seq", "prev", "hash"})


class AuditError(TaoError):
    """The audit log cannot be written where it was asked for (or by default)."""


def default_path() -> Path:
    """``audit.jsonl`` in the user's data directory (``tao.paths.data_dir``)."""
    from ..paths import data_dir

    return data_dir() / "audit.jsonl"


_NOWHERE: tuple[tuple[int, int, int], int, str] = ((-1, -1, -1), 0, GENESIS)

_log = logging.getLogger("tao.audit")


class AuditLog:
    """An append-only, hash-chained JSONL file shared safely by threads and processes.

    ``secret``: argument names whose values are always redacted, on top of ``is_secret_key``;
    ``fsync``: ``True`` (or ``"record"``, the default) fsyncs each line - before ``append``
    returns when called outside an event loop, right after it by the file's syncer thread when
    called on one; ``"batch"``: by the syncer only, one fsync for the lines of up to 2 ms;
    ``False``: never (a power cut may then lose the last lines, but never leaves an unverifiable
    chain). The file is opened per append, so an ``AuditLog`` can be made once and shared, by
    threads and event loops alike, and forked processes each take the lock on their own.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fsync: bool | str = True,
                 secret: Iterable[str] = ()):
        self.path = Path(path) if path is not None else default_path()
        if fsync not in _MODES:
            raise ValueError(f"fsync= takes True, False, 'record' or 'batch', not {fsync!r}")
        self.fsync = fsync
        self._mode = _MODES[fsync]
        self.secret = frozenset(secret)
        self._env = env_secrets()
        self._lock = threading.Lock()
        self._key = os.path.realpath(self.path)  # the file, wherever the cwd goes later
        self._lost: list[BaseException] = []  # fsyncs that failed, not yet said to the caller
        #: where this log's last line ended (device, inode, size), its seq and SHA-256: the
        #: next append finds the file so (nobody wrote since) and need not read its tail
        self._end: tuple[tuple[int, int, int], int, str] = _NOWHERE

    def __repr__(self) -> str:
        return f"AuditLog({str(self.path)!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self) -> AuditLog:
        """Open the file (making its folder) once now, so a log that cannot be written is the
        user's error before the run starts - not a run that ends at its first tool call."""
        try:
            with _open(self._key):
                pass
        except OSError as e:
            raise AuditError(f"cannot write the audit log {self.path}: {e.strerror or e} "
                             f"(choose another file with audit= / --audit FILE / audit in "
                             f"tao.toml, or none with audit=False / --no-audit)") from None
        return self

    def append(self, record: dict[str, Any], *, secret: Iterable[str] = ()) -> dict[str, Any]:
        """Write ``record`` as the next line; the entry as written (redacted, with ``seq``,
        ``ts``, ``prev`` and ``hash``). ``ts`` (ISO 8601, UTC) is added unless the record has one.
        ``secret`` adds key names to redact for this record. The line is in the file (the OS
        has it: a killed process loses none) when this returns; its fsync is done here outside
        an event loop (``fsync=True``) and by the syncer thread on one. Raises ``ValueError`` for
        a record that is not a dict or uses a reserved key, ``OSError`` when the file cannot be
        written, ``AuditError`` when an earlier line's fsync failed (this line is then not
        written)."""
        if self._mode == _NONE:  # nothing to fsync: no event loop to look for
            return self._write(record, secret, False)[0]
        loop = _running_loop()
        now = self._mode == _RECORD and loop is None  # fsync'd here, before it returns
        entry, first = self._write(record, secret, now)
        if now:
            return entry
        syncer = _syncer(self._key)
        ticket = syncer.put(self, first)
        if loop is not None:
            syncer.hold(loop, ticket)
        return entry

    async def aappend(self, record: dict[str, Any], *, secret: Iterable[str] = ()) -> dict[str, Any]:
        """``append`` that waits, without blocking the event loop, until the line is fsync'd
        (as configured); raises ``AuditError`` when it could not be."""
        import asyncio

        entry, first = self._write(record, secret, False)
        if self._mode != _NONE:
            syncer = _syncer(self._key)
            await syncer.until(asyncio.get_running_loop(), syncer.put(self, first))
            self._raise_lost()
        return entry

    def flush(self) -> None:
        """Wait until every line written so far is fsync'd (blocks the calling thread); raise
        ``AuditError`` for those whose fsync failed."""
        if _SYNCERS.get(self._key) is not None:
            _SYNCERS[self._key].drain()
        self._raise_lost()

    async def aflush(self) -> None:
        """``flush`` without blocking the event loop."""
        import asyncio

        syncer = _SYNCERS.get(self._key)
        if syncer is not None:
            await syncer.until(asyncio.get_running_loop(), syncer.queued)
        self._raise_lost()

    def close(self) -> None:
        """``flush``: what was written is fsync'd (as configured) before it returns. The log can
        still be used after (its file is opened per append; the syncer's thread ends when idle)."""
        self.flush()

    def _write(self, record: dict[str, Any], secret: Iterable[str],
               fsync: bool) -> tuple[dict[str, Any], bool]:
        """Write the line now, under the file's lock (and fsync it, with ``fsync``):
        ``(entry, whether the file was new)``."""
        if not isinstance(record, dict):
            raise ValueError(f"an audit record is a dict, not {type(record).__name__}")
        if not RESERVED.isdisjoint(record):
            raise ValueError(f"audit records cannot set {sorted(RESERVED.intersection(record))}: "
                             "the log writes them")
        if self._lost:
            self._raise_lost()
        names = self.secret.union(secret) if secret else self.secret
        # copied only where something is redacted: most records have nothing to hide
        clean = redact(record, names, self._env) if needs_redaction(
            record, names, self._env) else record
        ts = clean.get("ts") or datetime.now(timezone.utc).isoformat(timespec="microseconds")
        if "ts" in clean:
            clean = {k: v for k, v in clean.items() if k != "ts"}
        with self._lock, _open(self._key) as fd:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                st = os.fstat(fd)
                now_at, (at, seq, prev), self._end = (st.st_dev, st.st_ino, st.st_size), \
                    self._end, _NOWHERE
                torn = None
                if at != now_at:  # someone else wrote since (or never read): read the tail
                    seq, prev, torn = _tail(fd)
                size, out = st.st_size, b""
                if torn is not None:  # a writer died mid-line: cut it off, say so in the chain
                    os.ftruncate(fd, size := torn[0])
                    seq += 1
                    note, _ = _seal({"seq": seq, "ts": ts, "prev": prev, "kind": "audit.torn_tail",
                                     "bytes": len(torn[1]),
                                     "sha256": hashlib.sha256(torn[1]).hexdigest()})
                    prev, out = hashlib.sha256(note).hexdigest(), note + b"\n"
                entry = {"seq": seq + 1, "ts": ts, "prev": prev, **clean}
                line, entry["hash"] = _seal(entry)
                data = out + line + b"\n"
                _write_all(fd, data)
                self._end = ((now_at[0], now_at[1], size + len(data)), seq + 1,
                             hashlib.sha256(line).hexdigest())
                if fsync:
                    os.fsync(fd)
                    if seq == 0:  # a new file: its name must survive a power cut too
                        _fsync_dir(self.path.parent)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        return entry, seq == 0

    def _failed(self, error: BaseException, count: int) -> None:
        """The syncer could not fsync ``count`` lines of this log."""
        _log.error("%d audit line(s) of %s could not be fsync'd: %s", count, self.path, error)
        with self._lock:
            self._lost.extend([error] * count)

    def _raise_lost(self) -> None:
        if self._lost:
            with self._lock:
                lost, self._lost = self._lost, []
            if lost:
                raise AuditError(f"{len(lost)} audit line(s) of {self.path} could not be "
                                 f"fsync'd: {lost[-1]}") from lost[-1]


__all__ = ["AuditLog", "GENESIS", "REDACTED", "VerifyReport", "default_path", "entries",
           "is_secret_key", "read_lines", "redact", "verify"]
