"""The run journal's writes: one queue of statements per ``Journal``, committed in order, many
to a transaction (group commit). See ``tao.runs.journal`` for what is written when, and what a
killed process may lose.

``put`` queues a statement and returns its ticket (the number of statements queued so far);
``wait(ticket)`` returns once that statement is committed, with every statement queued before it,
in one transaction (``fsync``: that commit is fsynced - ``synchronous=FULL``). The caller that
waits commits the queue itself, on its own thread, so a synchronous write costs one commit and no
thread hand-off. A statement nobody waits for is committed by the journal's writer thread
about ``LINGER_S`` after it was queued (the first one of a round calls the thread, which lets
that time pass: what comes meanwhile goes with it), or earlier by the next caller that waits,
reads or closes. The connection and the queue are this process's: a forked child
starts with an empty queue (what the parent queued is the parent's to commit) and a connection of
its own. The interpreter's exit commits what is still queued (``atexit``).

Checkpoints (copying the WAL into the database file, with SQLite's fsyncs around them) are made by
another thread (``_Checkpointer``) every ``CHECKPOINT_EVERY`` records, not by whichever commit
crosses SQLite's threshold: the run pays for its commits, not for the checkpoint's copy and syncs
(issue 25, point 5). A checkpoint is no part of a commit's durability; a WAL left unchecked by a
killed process is checkpointed by the next one to open the file.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import signal
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: records between two checkpoints (each record a few WAL pages; SQLite's own default is 1,000 pages)
CHECKPOINT_EVERY = 256
#: seconds a statement nobody waits for may stay queued before the writer thread commits it:
#: each round of the thread costs the run the GIL's hand-over (~0.1 ms on a VM), so not too few
LINGER_S = 0.01
#: seconds the writer thread waits for work before it ends (the next ``put`` starts it again)
IDLE_S = 30.0

_log = logging.getLogger("tao.runs")

Statement = tuple[str, tuple[Any, ...], bool]  # (sql, arguments, fsync'd when committed)


def _kill_at() -> int:
    try:
        return int(os.environ.get("TAO_TEST_KILL_AT", "0"))
    except ValueError:
        return 0


class Writer:
    """The connection of one ``Journal`` in this process, its queue and its writer thread.
    ``lock`` guards the connection (one commit or read at a time); ``cv`` the queue."""

    def __init__(self, path: Path | str, fsync: bool, connect: Callable[[], Any]):
        """``path``: the SQLite file, or a PostgreSQL URL (``tao.runs.pg``: no checkpoints to
        make, the server makes its own)."""
        self.path, self.fsync, self.connect = path, fsync, connect
        self.file = isinstance(path, Path)
        #: the file, wherever the cwd goes later; or the URL
        self.key = os.path.realpath(path) if isinstance(path, Path) else path
        self._fresh()
        with _LIVE_LOCK:
            _LIVE.add(self)

    def _fresh(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.cv = threading.Condition(threading.Lock())
        self.db: sqlite3.Connection | None = None
        self.queue: list[Statement] = []
        self.queued = self.committed = 0  # statements queued and committed (or failed) so far
        #: the writer thread was called and has not gone back to waiting: a put need not call
        #: it again (each call wakes a thread, and costs the caller the GIL's hand-over)
        self.armed = False
        self.thread = False  # the writer thread runs
        self.gen = 0  # the writer thread's generation: close() ends the one running
        self.error: BaseException | None = None  # a write nobody waited for failed: said next
        self.writes, self.kill = 0, _kill_at()
        self.checkpoints: _Checkpointer | None = None

    def forked(self) -> None:
        """In a forked child: the parent's queue, thread and connection are not this process's
        (the parent's connection is left open, never used: closing it here could disturb the
        parent's locks)."""
        if self.db is not None:
            _ABANDONED.append(self.db)
        self._fresh()

    def conn(self) -> sqlite3.Connection:
        """The connection (opened on first use); call under ``lock``."""
        if self.db is None:
            self.db = self.connect()
        return self.db

    # -- writes ----------------------------------------------------------------------------------
    def put(self, sql: str, args: tuple[Any, ...], sync: bool = False) -> int:
        """Queue a statement (in the order of the calls); its ticket for ``wait``. One nobody
        waits for (``sync`` False) is committed by the writer thread within ``LINGER_S``."""
        if self.error is not None:
            self.raise_error()
        with self.cv:
            self.queue.append((sql, args, sync))
            self.queued += 1
            ticket = self.queued
            if not sync and not self.armed:
                self.armed = True
                if self.thread:
                    self.cv.notify()
                else:
                    self.thread = True
                    threading.Thread(target=self._run, args=(self.gen,),
                                     name="tao-journal-writer", daemon=True).start()
        if ticket == self.kill:  # TAO_TEST_KILL_AT: committed now, the process killed right after
            self.wait(ticket)
        return ticket

    def wait(self, ticket: int) -> None:
        """Return once statement ``ticket`` and all before it are committed (committing them
        here, in one transaction, unless another thread just did)."""
        with self.lock:
            if self.committed < ticket:
                self._commit_queued()
        self.raise_error()

    def flush(self) -> None:
        self.wait(self.queued)

    def read(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """``fn(connection)`` once everything queued is committed - by this journal and by any
        other of this process on the same file (a run cut off by an exception, resumed through
        another ``Journal``): a read sees every write made before it."""
        for other in _live():
            if other is not self and other.key == self.key and other.committed < other.queued \
                    and other.pid == self.pid:
                other.commit()
        with self.lock:
            if self.committed < self.queued:
                self._commit_queued()
            out = fn(self.conn())
        self.raise_error()
        return out

    def commit(self) -> None:
        """Commit what is queued; an error is kept for this journal's own next call."""
        with self.lock:
            if self.committed < self.queued:
                self._commit_queued()

    def raise_error(self) -> None:
        error, self.error = self.error, None
        if error is not None:
            raise error

    def _commit_queued(self) -> None:
        """Commit the whole queue as one transaction; call under ``lock``."""
        with self.cv:
            batch, self.queue = self.queue, []
        if batch:
            self._commit(batch)

    def _commit(self, batch: list[Statement]) -> None:
        n = len(batch)
        if self.kill and self.writes < self.kill <= self.writes + n:
            batch = batch[:self.kill - self.writes]  # TAO_TEST_KILL_AT: dies right after it
        full = self.fsync and any(s[2] for s in batch)
        try:
            db = self.conn()
            if full:  # this commit fsyncs the WAL, and all before it with it
                db.execute("PRAGMA synchronous=FULL")
            try:
                statements = _joined(batch)
                if len(statements) == 1:
                    db.execute(*statements[0])  # autocommit: one statement is atomic
                else:
                    db.execute("BEGIN")
                    for sql, args in statements:
                        db.execute(sql, args)
                    db.execute("COMMIT")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if full:
                    db.execute("PRAGMA synchronous=NORMAL")
        except Exception as e:  # noqa: BLE001 - kept for the caller; the good ones still go in
            self.error = self._one_by_one(batch, full) if len(batch) > 1 and self.db else e
        self.writes += len(batch)
        self.committed += n
        if self.writes == self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.file and \
                self.writes // CHECKPOINT_EVERY != (self.writes - len(batch)) // CHECKPOINT_EVERY:
            if self.checkpoints is None or not self.checkpoints.serves():
                self.checkpoints = _Checkpointer(Path(self.path))
            self.checkpoints.wake()

    def _one_by_one(self, batch: list[Statement], full: bool) -> BaseException | None:
        """A transaction that failed, again statement by statement (in order): those that fail
        again are left out - as a failed write always was - and the first error is kept."""
        db = self.conn()
        first: BaseException | None = None
        try:
            if full:
                db.execute("PRAGMA synchronous=FULL")
            for sql, args, _ in batch:
                try:
                    db.execute(sql, args)
                except Exception as e:  # noqa: BLE001
                    first = first or e
        except Exception as e:  # noqa: BLE001
            first = first or e
        finally:
            if full:
                db.execute("PRAGMA synchronous=NORMAL")
        return first

    def _run(self, gen: int) -> None:
        """The writer thread: called by the first put nobody waits for, it lets ``LINGER_S``
        pass (what comes meanwhile, or a commit someone waits for, goes with it), commits what
        is queued then, and waits to be called again once nothing is."""
        while True:
            with self.cv:
                while not self.armed and gen == self.gen:
                    if not self.cv.wait(IDLE_S) and not self.armed and gen == self.gen:
                        self.thread = False
                        return
                if gen != self.gen:  # closed (a later put starts another thread)
                    return
            time.sleep(LINGER_S)
            with self.lock:
                if gen != self.gen:
                    return
                try:
                    self._commit_queued()
                except BaseException as e:  # noqa: BLE001 - the thread goes on; the next caller learns it
                    self.error = e
            with self.cv:  # what came since is the next round's; else the next put calls it
                self.armed = bool(self.queue)

    def close(self) -> None:
        """Commit what is queued, end the threads, close the connection."""
        with self.lock:
            try:
                if self.committed < self.queued:
                    self._commit_queued()
            finally:
                with self.cv:
                    self.gen += 1
                    self.thread = self.armed = False
                    self.cv.notify()
                if self.checkpoints is not None:
                    self.checkpoints.stop()
                    self.checkpoints = None
                if self.db is not None:
                    self.db.close()  # the last connection to close checkpoints the WAL
                    self.db = None
        self.raise_error()


#: rows one joined INSERT takes (6 arguments a record: under SQLite's oldest limit of 999)
JOIN_ROWS = 64
_VALUES = re.compile(r"INSERT INTO (\w+) VALUES (\(\?(?:,\?)*\))")
_JOINED: dict[tuple[str, int], str] = {}


def _joined(batch: list[Statement]) -> list[tuple[str, Any]]:
    """The batch as fewer statements, in the same order: a run of the same ``INSERT INTO t
    VALUES (?,...)`` becomes one INSERT of several rows (up to ``JOIN_ROWS``). A turn's records
    (the reply, the last result, the next start) are then one statement - committed on its
    own, atomic like any statement - not BEGIN, three INSERTs and COMMIT: each ``execute`` is a
    trip through the sqlite3 module and SQLite's VM that the commit before a tool waits for
    (issue 25, point 5). Which rows go in and in what order is unchanged, and a row that fails
    fails its statement, as it failed the transaction before (``_one_by_one`` then sorts it
    out, row by row)."""
    out: list[tuple[str, Any]] = []
    i, n = 0, len(batch)
    while i < n:
        sql, j = batch[i][0], i + 1
        while j < n and j - i < JOIN_ROWS and batch[j][0] == sql:
            j += 1
        joined = _join(sql, j - i) if j - i > 1 else ""
        if joined:
            args: list[Any] = []
            for statement in batch[i:j]:
                args += statement[1]
            out.append((joined, args))
        else:
            out.extend((s[0], s[1]) for s in batch[i:j])
        i = j
    return out


def _join(sql: str, rows: int) -> str:
    """``sql`` (an ``INSERT INTO t VALUES (?,...)``) for ``rows`` rows; "" for another kind."""
    joined = _JOINED.get((sql, rows))
    if joined is None:
        m = _VALUES.fullmatch(sql)
        joined = _JOINED[(sql, rows)] = "" if m is None else (
            f"INSERT INTO {m.group(1)} VALUES " + ",".join([m.group(2)] * rows))
    return joined


#: every ``Writer`` of this process: committed at exit, made fresh in a forked child
_LIVE: weakref.WeakSet[Writer] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def _live() -> list[Writer]:
    with _LIVE_LOCK:  # another thread's Journal() adding to it while it is copied
        return list(_LIVE)


_ABANDONED: list[sqlite3.Connection] = []  # a forked child's copies of its parent's connections


@atexit.register
def _flush_all() -> None:
    """At the interpreter's exit: what was queued is committed (a run that ended by an
    exception has records nobody waited for)."""
    for writer in _live():
        if writer.pid == os.getpid() and writer.committed < writer.queued:
            try:
                writer.flush()
            except Exception as e:  # noqa: BLE001 - said, not raised: the interpreter is going
                _log.error("the run journal %s could not commit its last records: %s",
                           writer.path, e)


def _forked() -> None:
    global _LIVE_LOCK
    _LIVE_LOCK = threading.Lock()  # maybe held by a thread of the parent's when it forked
    for writer in list(_LIVE):
        writer.forked()


os.register_at_fork(after_in_child=_forked)


class _Checkpointer:
    """A thread with its own connection that checkpoints the journal's WAL when woken
    (``PRAGMA wal_checkpoint(PASSIVE)``: it never waits for a writer or a reader, and a commit
    never waits for it). It ends when its journal closes, when idle a while, and is not carried
    into a forked process (``serves``)."""

    IDLE_S = 30.0

    def __init__(self, path: Path):
        self.path, self.pid = path, os.getpid()
        self.event, self.stopped, self.running = threading.Event(), False, True
        threading.Thread(target=self._run, name="tao-journal-checkpoint", daemon=True).start()

    def serves(self) -> bool:
        return self.running and self.pid == os.getpid()

    def wake(self) -> None:
        self.event.set()

    def stop(self) -> None:
        self.stopped = True
        self.event.set()

    def _run(self) -> None:
        db = None
        try:
            while self.event.wait(self.IDLE_S) and not self.stopped:
                self.event.clear()
                try:
                    if db is None:
                        db = sqlite3.connect(self.path, check_same_thread=False)
                        db.execute("PRAGMA busy_timeout=5000")
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # busy or gone: the next wake tries again
                    pass
        finally:
            self.running = False
            if db is not None:
                db.close()
