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
somewhere the log's writer cannot reach, is still in the chain.

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
from ``append`` itself.

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

import atexit
import fcntl
import hashlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Self

from ..errors import TaoError
from ..safe_json import dumps, loads
from .redact import REDACTED, env_secrets, is_secret_key, needs_redaction, redact

#: the ``prev`` of line 1: there is no line before it
GENESIS = "0" * 64
#: keys the log writes itself; a record carrying one is a caller's mistake, not overwritten quietly
RESERVED = frozenset({"seq", "prev", "hash"})

_SEQ_HEAD = re.compile(rb'\{"seq":(\d+),')
_HASH_TAIL = re.compile(rb',"hash":"([0-9a-f]{64})"\}$')


class AuditError(TaoError):
    """The audit log cannot be written where it was asked for (or by default)."""


def default_path() -> Path:
    """``audit.jsonl`` in the user's data directory (``tao.paths.data_dir``)."""
    from ..paths import data_dir

    return data_dir() / "audit.jsonl"


def _seal(entry: dict[str, Any]) -> tuple[bytes, str]:
    """The line for ``entry`` (no newline), its JSON with its own hash as the last key; and
    that hash."""
    body = dumps(entry, separators=(",", ":")).encode("utf-8")
    digest = hashlib.sha256(body).hexdigest()
    return body[:-1] + b',"hash":"' + digest.encode() + b'"}', digest


def _own_hash_ok(line: bytes) -> bool:
    m = _HASH_TAIL.search(line)
    return bool(m) and hashlib.sha256(line[:m.start()] + b"}").hexdigest() == m.group(1).decode()


_NOWHERE: tuple[tuple[int, int, int], int, str] = ((-1, -1, -1), 0, GENESIS)

#: ``fsync=`` as the log reads it: never, by its syncer in batches, each line
_NONE, _BATCH, _RECORD = 0, 1, 2
_MODES = {False: _NONE, None: _NONE, "batch": _BATCH, True: _RECORD, "record": _RECORD}
#: seconds a syncer's thread waits for more lines before it ends (the next one starts it again)
_IDLE_S = 5.0
#: seconds a ``"batch"`` syncer lets lines gather before one fsync covers them
_BATCH_S = 0.002

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


def _running_loop() -> Any:
    asyncio = sys.modules.get("asyncio")  # no asyncio imported: no loop can be running
    return asyncio.events._get_running_loop() if asyncio is not None else None


class _Hold:
    """An event loop's claim on a syncer: its task waits until ``target`` lines are fsync'd,
    and blocks the loop's shutdown (``asyncio.run``'s end cancels it) until they are."""

    __slots__ = ("target", "task")

    def __init__(self, target: int):
        self.target, self.task = target, None


class _Syncer:
    """The one thread of this process that fsyncs a file's lines written on event loops (and
    by ``"batch"`` logs): an fsync covers every line written before it, so lines written while
    one runs share the next. ``queued``/``synced`` count the lines asked for and done (fsync'd
    or failed); a ticket is the count at a line's ``put``."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()
        self.more = threading.Condition(self.lock)  # the thread waits here for lines
        self.done = threading.Condition(self.lock)  # callers wait here for theirs
        self.queue: list[tuple[AuditLog, bool]] = []  # (its log, the file was new)
        self.queued = self.synced = 0
        self.running = False
        self.urgent = False  # someone waits, or a line wants its own fsync: no gathering
        self.waiters: list[tuple[Any, Any]] = []  # (loop, future) woken after each fsync
        self.holds: dict[Any, _Hold] = {}  # event loop -> its hold

    def put(self, log: AuditLog, first: bool) -> int:
        with self.lock:
            self.queue.append((log, first))
            self.queued += 1
            ticket = self.queued
            if log._mode == _RECORD:
                self.urgent = True
            if not self.running:
                self.running = True
                threading.Thread(target=self._run, name="tao-audit-sync", daemon=True).start()
            elif self.urgent or len(self.queue) == 1:
                self.more.notify()
        return ticket

    def wait(self, ticket: int) -> None:
        """Block until the line of ``ticket`` (and every one before it) is done."""
        with self.lock:
            if self.synced < ticket:
                self.urgent = True
                self.more.notify()
            while self.synced < ticket:
                self.done.wait()

    def drain(self) -> None:
        self.wait(self.queued)

    async def until(self, loop: Any, ticket: int, urgent: bool = True) -> None:
        """Wait on ``loop`` until ``ticket`` is done, without blocking it (``urgent``: and
        have the syncer fsync now rather than let more lines gather)."""
        while self.synced < ticket:
            future = loop.create_future()
            with self.lock:
                if self.synced >= ticket:
                    break
                self.waiters.append((loop, future))
                if urgent and not self.urgent:
                    self.urgent = True
                    self.more.notify()
            await future

    def hold(self, loop: Any, ticket: int) -> None:
        """Keep ``loop`` from ending (``asyncio.run``) before ``ticket`` is fsync'd."""
        held = self.holds.get(loop)
        if held is not None:
            held.target = ticket
            return
        held = self.holds[loop] = _Hold(ticket)
        held.task = loop.create_task(self._held(loop, held))

    async def _held(self, loop: Any, held: _Hold) -> None:
        import asyncio

        try:
            while self.synced < held.target:
                await self.until(loop, held.target, urgent=False)
        except asyncio.CancelledError:  # the loop is closing: its lines' fsync first
            self.wait(held.target)
            raise
        finally:
            if self.holds.get(loop) is held:
                del self.holds[loop]

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.queue:
                    self.more.wait(_IDLE_S)
                if not self.queue:
                    self.running = False
                    return
                if not self.urgent:
                    self.more.wait(_BATCH_S)  # let the lines of the next moments share it
                batch, self.queue, self.urgent = self.queue, [], False
            error: BaseException | None = None
            try:
                with _open(self.path) as fd:  # any descriptor of the file: fsync is per file
                    os.fsync(fd)
                if any(first for _, first in batch):
                    _fsync_dir(Path(self.path).parent)
            except BaseException as e:  # noqa: BLE001 - the thread must go on; the logs learn it
                error = e
            if error is not None:
                failed: dict[AuditLog, int] = {}
                for log, _ in batch:
                    failed[log] = failed.get(log, 0) + 1
                for log, count in failed.items():
                    log._failed(error, count)
            with self.lock:
                self.synced += len(batch)
                self.done.notify_all()
                waiters, self.waiters = self.waiters, []
            for loop, future in waiters:
                try:
                    loop.call_soon_threadsafe(_wake, future)
                except RuntimeError:  # that loop is closed: nobody waits there any more
                    pass


def _wake(future: Any) -> None:
    if not future.done():
        future.set_result(None)


_SYNCERS: dict[str, _Syncer] = {}
_SYNCERS_LOCK = threading.Lock()


def _syncer(path: str) -> _Syncer:
    syncer = _SYNCERS.get(path)
    if syncer is None:
        with _SYNCERS_LOCK:
            syncer = _SYNCERS.setdefault(path, _Syncer(path))
    return syncer


@atexit.register
def _drain_all() -> None:
    """At the interpreter's exit: every line asked to be fsync'd is (failures were logged)."""
    for syncer in list(_SYNCERS.values()):
        syncer.drain()


def _forget_syncers() -> None:
    """In a forked child: the parent's syncers (threads, queues, locks) are not this process's."""
    global _SYNCERS_LOCK
    _SYNCERS.clear()
    _SYNCERS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_syncers)


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


__all__ = ["AuditLog", "GENESIS", "REDACTED", "VerifyReport", "default_path", "entries",
           "is_secret_key", "read_lines", "redact", "verify"]
