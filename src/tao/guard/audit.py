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

One thread writes the file (``_Writer``, one per file in a process): ``append`` redacts the record
and queues it, and the writer takes what is queued, in order, and appends it under an exclusive
``flock``, reading the file's last line under it, so that processes writing at once never
interleave and ``seq`` stays contiguous. Called outside an event loop, ``append`` waits until its
line is written (and fsync'd) and returns it as written; called on an event loop's thread (a run's
records: run start and end, tool calls, approvals), it returns at once and the loop goes on while
the writer writes - an fsync never stalls the loop - and ``await log.aappend(record)`` waits
without blocking it. ``fsync=True`` (``"record"``) fsyncs each line, ``"batch"`` once for what the
writer took at a time, ``False`` never (a power cut may then lose the last lines, but never leaves
an unverifiable chain).

Nothing queued is lost at a clean end: ``close()``/``flush()`` wait for it; ``asyncio.run`` does
not return before the records its loop queued are written (a task of the log waits for them, and
blocks the loop's shutdown until they are); the interpreter's exit waits for every writer
(``atexit``); and ``verify``/``entries``/``read_lines`` wait for this process's writer of the file
before reading it. A process killed with SIGKILL (or ``os._exit``) loses what was queued and not yet
written - at most the records of the last few milliseconds. A record that could not be written is
never dropped silently: it is logged (``tao.audit``) when it fails, and the next ``append``,
``flush`` or ``close`` of its log raises ``AuditError`` saying how many were lost and why.

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
from .redact import REDACTED, env_secrets, is_secret_key, redact

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


#: ``fsync=`` as the writer reads it: never, once per batch the writer takes, after each line
_NONE, _BATCH, _RECORD = 0, 1, 2
_MODES = {False: _NONE, None: _NONE, "batch": _BATCH, True: _RECORD, "record": _RECORD}
#: seconds a writer's thread waits for more records before it ends (the next append starts one)
_IDLE_S = 5.0
#: seconds the writer lets records nobody waits for gather into one batch (one lock, one write),
#: and at most how many: a loop appending record after record is not woken for each
_LINGER_S, _LINGER_MAX = 0.002, 256

_log = logging.getLogger("tao.audit")


class AuditLog:
    """An append-only, hash-chained JSONL file shared safely by threads and processes.

    ``secret``: argument names whose values are always redacted, on top of ``is_secret_key``;
    ``fsync``: ``True`` (or ``"record"``, the default) fsyncs each line, ``"batch"`` once per
    batch of lines the writer takes, ``False`` never (a power cut may then lose the last lines,
    but never leaves an unverifiable chain). Lines are written by one thread per file (see the
    module's docstring): an ``AuditLog`` can be made once and shared, by threads and event loops
    alike, and forked processes each write on their own, under the file's lock.
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
        self._lost: list[BaseException] = []  # writes that failed, not yet said to the caller

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
        """Queue ``record`` as the next line; the entry as written (redacted, with ``seq``,
        ``ts``, ``prev`` and ``hash``). ``ts`` (ISO 8601, UTC) is added unless the record has one.
        ``secret`` adds key names to redact for this record.

        Outside an event loop it waits until the line is written (fsync'd, as configured) and
        raises ``OSError`` when it could not be. On an event loop's thread it returns at once:
        the entry's ``seq``, ``prev`` and ``hash`` are filled in once the writer has written it,
        and a failure is logged and raised (``AuditError``) by the log's next ``append``,
        ``flush`` or ``close``. Raises ``ValueError`` for a record that is not a dict or uses a
        reserved key, and ``AuditError`` for earlier records that could not be written (this one
        is then not taken)."""
        entry = self._entry(record, secret)
        loop = _running_loop()
        item = _Item(entry, self._mode, self, loop is None)
        writer = _writer(self._key)
        ticket = writer.put(item)
        if loop is None:
            writer.wait(ticket)
            if item.error is not None:
                raise item.error
            return entry
        writer.hold(loop, ticket)
        return entry

    async def aappend(self, record: dict[str, Any], *, secret: Iterable[str] = ()) -> dict[str, Any]:
        """``append`` that waits, without blocking the event loop, until the line is written
        (and fsync'd, as configured); raises ``OSError`` when it could not be."""
        import asyncio

        entry = self._entry(record, secret)
        item = _Item(entry, self._mode, self, True)
        writer = _writer(self._key)
        await writer.until(asyncio.get_running_loop(), writer.put(item))
        if item.error is not None:
            raise item.error
        return entry

    def flush(self) -> None:
        """Wait until every record queued so far is written (blocks the calling thread); raise
        ``AuditError`` for records of this log that could not be."""
        _writer(self._key).drain()
        self._raise_lost()

    async def aflush(self) -> None:
        """``flush`` without blocking the event loop."""
        import asyncio

        writer = _writer(self._key)
        await writer.until(asyncio.get_running_loop(), writer.queued)
        self._raise_lost()

    def close(self) -> None:
        """``flush``: what was queued is written before it returns. The log can still be used
        after (its file is opened per batch; the writer's thread ends when idle)."""
        self.flush()

    def _entry(self, record: dict[str, Any], secret: Iterable[str]) -> dict[str, Any]:
        if not isinstance(record, dict):
            raise ValueError(f"an audit record is a dict, not {type(record).__name__}")
        clash = RESERVED.intersection(record)
        if clash:
            raise ValueError(f"audit records cannot set {sorted(clash)}: the log writes them")
        self._raise_lost()
        clean = redact(record, self.secret.union(secret), self._env)
        ts = clean.pop("ts", None) or datetime.now(timezone.utc).isoformat(timespec="microseconds")
        return {"seq": 0, "ts": ts, "prev": GENESIS, **clean}  # seq and prev: set when written

    def _failed(self, error: BaseException, count: int) -> None:
        """The writer could not write ``count`` queued records of this log (no caller waited)."""
        _log.error("%d audit record(s) could not be written to %s: %s", count, self.path, error)
        with self._lock:
            self._lost.extend([error] * count)

    def _raise_lost(self) -> None:
        if self._lost:
            with self._lock:
                lost, self._lost = self._lost, []
            if lost:
                raise AuditError(f"{len(lost)} audit record(s) could not be written to "
                                 f"{self.path}: {lost[-1]}") from lost[-1]


def _running_loop() -> Any:
    asyncio = sys.modules.get("asyncio")  # no asyncio imported: no loop can be running
    return asyncio.events._get_running_loop() if asyncio is not None else None


class _Item:
    """One queued record: its entry (completed when written), how it is synced, its log, and
    whether a caller waits for it (then the caller gets the error, else the log keeps it)."""

    __slots__ = ("entry", "error", "log", "mode", "waited")

    def __init__(self, entry: dict[str, Any], mode: int, log: AuditLog, waited: bool):
        self.entry, self.mode, self.log, self.waited = entry, mode, log, waited
        self.error: BaseException | None = None


class _Hold:
    """An event loop's claim on a writer: its task waits until ``target`` records are written,
    and blocks the loop's shutdown (``asyncio.run``'s end cancels it) until they are."""

    __slots__ = ("target", "task")

    def __init__(self, target: int):
        self.target, self.task = target, None


class _Writer:
    """The one thread of this process that writes a file: it takes what is queued, in order, and
    appends it under the file's lock. ``queued``/``written`` count records put and done
    (written or failed); a ticket is the count at a record's ``put``."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()
        self.more = threading.Condition(self.lock)  # the thread waits here for records
        self.done = threading.Condition(self.lock)  # callers wait here for theirs
        self.queue: list[_Item] = []
        self.queued = self.written = 0
        self.running = False
        self.urgent = False  # someone waits: write what is queued now, no lingering
        self.waiters: list[tuple[Any, Any]] = []  # (loop, future) woken after each batch
        self.holds: dict[Any, _Hold] = {}  # event loop -> its hold

    def put(self, item: _Item) -> int:
        with self.lock:
            self.queue.append(item)
            self.queued += 1
            ticket = self.queued
            if item.waited:
                self.urgent = True
            if not self.running:
                self.running = True
                threading.Thread(target=self._run, name="tao-audit-writer", daemon=True).start()
            elif item.waited or len(self.queue) == 1 or len(self.queue) >= _LINGER_MAX:
                self.more.notify()  # else the writer is lingering already: it wakes by itself
        return ticket

    def wait(self, ticket: int) -> None:
        """Block until the record of ``ticket`` (and every one before it) is done."""
        with self.lock:
            if self.written < ticket:
                self.urgent = True
                self.more.notify()
            while self.written < ticket:
                self.done.wait()

    def drain(self) -> None:
        self.wait(self.queued)

    async def until(self, loop: Any, ticket: int, urgent: bool = True) -> None:
        """Wait on ``loop`` until ``ticket`` is done, without blocking it (``urgent``: and
        have the writer write now rather than let more records gather)."""
        while self.written < ticket:
            future = loop.create_future()
            with self.lock:
                if self.written >= ticket:
                    break
                self.waiters.append((loop, future))
                if urgent and not self.urgent:
                    self.urgent = True
                    self.more.notify()
            await future

    def hold(self, loop: Any, ticket: int) -> None:
        """Keep ``loop`` from ending (``asyncio.run``) before ``ticket`` is written."""
        held = self.holds.get(loop)
        if held is not None:
            held.target = ticket
            return
        held = self.holds[loop] = _Hold(ticket)
        held.task = loop.create_task(self._held(loop, held))

    async def _held(self, loop: Any, held: _Hold) -> None:
        import asyncio

        try:
            while self.written < held.target:
                await self.until(loop, held.target, urgent=False)
        except asyncio.CancelledError:  # the loop is closing: its records first
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
                if not self.urgent and len(self.queue) < _LINGER_MAX:
                    self.more.wait(_LINGER_S)  # let what the loop appends next join this batch
                batch, self.queue, self.urgent = self.queue, [], False
            try:
                self._write(batch)
            except BaseException as e:  # noqa: BLE001 - the thread must go on; the callers learn it
                for item in batch:
                    if item.error is None and item.entry.get("hash") is None:
                        item.error = e
            failed: dict[AuditLog, tuple[BaseException, int]] = {}
            for item in batch:
                if item.error is not None and not item.waited:
                    error, count = failed.get(item.log, (item.error, 0))
                    failed[item.log] = (error, count + 1)
            for log, (error, count) in failed.items():
                log._failed(error, count)
            with self.lock:
                self.written += len(batch)
                self.done.notify_all()
                waiters, self.waiters = self.waiters, []
            for loop, future in waiters:
                try:
                    loop.call_soon_threadsafe(_wake, future)
                except RuntimeError:  # that loop is closed: nobody waits there any more
                    pass

    def _write(self, batch: list[_Item]) -> None:
        """Append ``batch`` under the file's lock, chained to the file's last line; each item
        written gets its entry's ``seq``, ``prev`` and ``hash``, each not written its error."""
        with _open(self.path) as fd:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                seq, prev, torn = _tail(fd)
                first = seq == 0
                out: list[bytes] = []
                if torn is not None:  # a writer died mid-line: cut it off, say so in the chain
                    os.ftruncate(fd, torn[0])
                    seq += 1
                    note, _ = _seal({"seq": seq, "ts": batch[0].entry["ts"], "prev": prev,
                                     "kind": "audit.torn_tail", "bytes": len(torn[1]),
                                     "sha256": hashlib.sha256(torn[1]).hexdigest()})
                    prev = hashlib.sha256(note).hexdigest()
                    out.append(note + b"\n")
                sealed = []
                for item in batch:
                    seq += 1
                    entry = item.entry
                    entry.pop("hash", None)
                    entry["seq"], entry["prev"] = seq, prev
                    line, digest = _seal(entry)
                    prev = hashlib.sha256(line).hexdigest()
                    sealed.append((item, line + b"\n", digest))
                mode = max(item.mode for item in batch)
                if mode == _RECORD:  # each line on its own, fsync'd before the next
                    _write_all(fd, b"".join(out))
                    for item, line, digest in sealed:
                        _write_all(fd, line)
                        os.fsync(fd)
                        item.entry["hash"] = digest
                else:
                    data = b"".join(out + [line for _, line, _ in sealed])
                    done, error = _write_all(fd, data, partial=True)
                    if error is None and mode == _BATCH:
                        os.fsync(fd)
                    end = len(data) - sum(len(line) for _, line, _ in sealed)
                    for item, line, digest in sealed:  # the lines that made it whole
                        end += len(line)
                        if end <= done:
                            item.entry["hash"] = digest
                    if error is not None:
                        raise error
                if first and mode != _NONE:  # a new file: its name must survive a power cut too
                    _fsync_dir(Path(self.path).parent)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)


def _wake(future: Any) -> None:
    if not future.done():
        future.set_result(None)


_WRITERS: dict[str, _Writer] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(path: str) -> _Writer:
    writer = _WRITERS.get(path)
    if writer is None:
        with _WRITERS_LOCK:
            writer = _WRITERS.setdefault(path, _Writer(path))
    return writer


def _pending(path: str | os.PathLike[str]) -> None:
    """Wait for this process's writer of ``path``, if it has one, to write what is queued."""
    if _WRITERS:
        writer = _WRITERS.get(os.path.realpath(path))
        if writer is not None:
            writer.drain()


@atexit.register
def _drain_all() -> None:
    """At the interpreter's exit: every queued record written (failures were logged)."""
    for writer in list(_WRITERS.values()):
        writer.drain()


def _forget_writers() -> None:
    """In a forked child: the parent's writers (threads, queues, locks) are not this process's."""
    global _WRITERS_LOCK
    _WRITERS.clear()
    _WRITERS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_writers)


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


def _write_all(fd: int, data: bytes, partial: bool = False) -> Any:
    """Write all of ``data``. ``partial``: ``(bytes written, the error that stopped it or
    None)`` instead of raising, so the caller knows which lines made it whole."""
    view, done = memoryview(data), 0
    while done < len(data):
        try:
            done += os.write(fd, view[done:])
        except OSError as e:
            if partial:
                return done, e
            raise
    return (done, None) if partial else done


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
    log neither has to fit in memory nor holds writers up while it is read. What this process
    queued for the file before the call is written first."""
    _pending(path)
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
