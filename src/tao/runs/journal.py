"""The run journal: what a run's model said and what its tools returned, written before the next
step starts, so that a run killed at any moment (kill -9, OOM, a reboot) can be continued.

One SQLite file in WAL mode (``runs.db`` in the user data directory, or ``journal=PATH``) holds
every run: a ``runs`` row per run (id, agent, model, task, status) and a ``records`` row per
model response, tool start and tool result, numbered by ``seq`` within the run. A tool's start is
written before it runs and its result after: a start without a result is a call that may or may
not have had its effect, which ``resume`` never repeats blindly. Every record is committed
before the run goes on, so a killed process loses none (the OS has them). ``fsync=True`` (the
default) also survives power loss where it matters: a tool's start is fsynced before the tool
runs, and with it every record before it (the WAL is one file, synced as a whole); a model reply
or a tool result after the last start can be lost, which costs a model call again or makes the
call "cut short" - never a repeated effect. ``fsync=False`` leaves syncing to SQLite's
checkpoints (``synchronous=NORMAL``).

Checkpoints (copying the WAL into the database file, with SQLite's fsyncs around them) are made
by a thread of the journal's own, every ``CHECKPOINT_EVERY`` records, not by whichever commit
crosses SQLite's threshold: the run pays for its commits, not for the checkpoint's copy and syncs
(issue 25, point 5). A checkpoint is no part of a commit's durability; a WAL left unchecked by a
killed process is checkpointed by the next one to open the file.

Records are matched on resume by what was asked, not by position: a model response by a hash of
the messages it answered, a tool result by the tool's name and arguments (each with its
occurrence), so parallel plan steps that finish in another order still find theirs.

``TAO_TEST_KILL_AT=N`` (tests only) kills the process with SIGKILL right after its Nth record is
committed: how ``tests/test_resume_kill.py`` stops a run at every journal boundary.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from ..errors import TaoError
from ..messages import model_key  # noqa: F401 - resume and users import it from here
from ..safe_json import dumps

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, agent TEXT, model TEXT, task TEXT, status TEXT,
    started REAL, updated REAL, meta TEXT);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT, seq INTEGER, kind TEXT, key TEXT, data TEXT, ts REAL,
    PRIMARY KEY (run_id, seq));
"""


#: records between two checkpoints (each record a few WAL pages; SQLite's own default is 1,000 pages)
CHECKPOINT_EVERY = 256


class JournalError(TaoError):
    """The journal cannot be opened where it was asked for, or has no such run."""


def default_path() -> Path:
    """``runs.db`` beside the audit log, in the user's data directory (``tao.paths.data_dir``)."""
    from ..paths import data_dir

    return data_dir() / "runs.db"


def _kill_at() -> int:
    try:
        return int(os.environ.get("TAO_TEST_KILL_AT", "0"))
    except ValueError:
        return 0


class Journal:
    """``Journal(path=None, fsync=True)``: the runs of one journal file (None: the default one).
    Thread-safe: parallel plan steps run their sync tools in threads."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fsync: bool = True,
                 meta: dict[str, Any] | None = None):
        self.path = Path(path).expanduser() if path is not None else default_path()
        self.fsync = fsync
        self.meta = meta  # kept with each new run: how to start it again (tao resume)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._writes, self._kill = 0, _kill_at()
        self._checkpoints: _Checkpointer | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # FULL only where it matters: _write
                db.execute("PRAGMA busy_timeout=5000")
                db.execute("PRAGMA wal_autocheckpoint=0")  # _Checkpointer's, off the run's path
                db.executescript(SCHEMA)
            except (OSError, sqlite3.Error) as e:
                raise JournalError(f"cannot open the run journal at {self.path}: {e} (pass "
                                   f"journal=PATH / --journal FILE, or set TAO_DATA_DIR)") from None
            self._db = db
        return self._db

    def check(self) -> Journal:
        """Open it now, so that a bad path is an error before the run, not at its first step."""
        with self._lock:
            self._conn()
        return self

    def _write(self, sql: str, args: tuple[Any, ...], sync: bool = False) -> None:
        with self._lock:
            db = self._conn()
            if sync and self.fsync:  # this commit fsyncs the WAL, and all before it with it
                db.execute("PRAGMA synchronous=FULL")
                db.execute(sql, args)
                db.execute("PRAGMA synchronous=NORMAL")
            else:
                db.execute(sql, args)  # autocommit: one transaction per record
            self._writes += 1
            if self._writes == self._kill:
                import signal

                os.kill(os.getpid(), signal.SIGKILL)
            if self._writes % CHECKPOINT_EVERY == 0:
                if self._checkpoints is None or not self._checkpoints.serves():
                    self._checkpoints = _Checkpointer(self.path)
                self._checkpoints.wake()

    # -- runs -----------------------------------------------------------------------------------
    def start(self, run_id: str, agent: str, model: str, task: str,
              meta: dict[str, Any] | None = None) -> RunJournal:
        """The journal of run ``run_id``: a new run, or the records of one that is resumed."""
        with self._lock:
            db = self._conn()
            row = db.execute("SELECT status FROM runs WHERE run_id=?", (run_id,)).fetchone()
            rows = db.execute("SELECT seq, kind, key, data FROM records WHERE run_id=? "
                              "ORDER BY seq", (run_id,)).fetchall()
        now = time.time()
        if row is None:
            self._write("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                        (run_id, agent, model, task, "running", now, now,
                         dumps(meta or self.meta or {})))
        else:
            self._write("UPDATE runs SET status='running', updated=? WHERE run_id=?", (now, run_id))
        return RunJournal(self, run_id, rows)

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest runs, newest first: what ``tao runs`` lists."""
        with self._lock:
            rows = self._conn().execute(
                "SELECT run_id, status, agent, model, task, started, updated, meta FROM runs "
                "ORDER BY started DESC LIMIT ?", (limit,)).fetchall()
        keys = ("run_id", "status", "agent", "model", "task", "started", "updated", "meta")
        return [dict(zip(keys, r), meta=json.loads(r[7] or "{}")) for r in rows]

    def find(self, run_id: str) -> dict[str, Any]:
        """The run whose id is ``run_id`` or starts with it (a unique prefix)."""
        with self._lock:
            rows = self._conn().execute(
                "SELECT run_id, status, agent, model, task, started, updated, meta FROM runs "
                "WHERE run_id LIKE ? ESCAPE '\\'", (_like(run_id) + "%",)).fetchall()
        if not rows:
            raise JournalError(f"no run {run_id!r} in the journal {self.path}")
        if len(rows) > 1:
            raise JournalError(f"{run_id!r} is the start of {len(rows)} runs' ids in {self.path}; "
                               "give more of it")
        keys = ("run_id", "status", "agent", "model", "task", "started", "updated", "meta")
        return dict(zip(keys, rows[0]), meta=json.loads(rows[0][7] or "{}"))

    def records(self, run_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn().execute("SELECT seq, kind, key, data, ts FROM records WHERE "
                                        "run_id=? ORDER BY seq", (run_id,)).fetchall()
        return [{"seq": s, "kind": k, "key": key, "data": json.loads(d), "ts": ts}
                for s, k, key, d, ts in rows]

    def close(self) -> None:
        with self._lock:
            if self._checkpoints is not None:
                self._checkpoints.stop()
                self._checkpoints = None
            if self._db is not None:
                self._db.close()  # the last connection to close checkpoints the WAL
                self._db = None


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


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def tool_key(name: str, arguments: dict[str, Any]) -> str:
    try:
        body = dumps([name, arguments], sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        body = dumps([name, repr(arguments)])
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Pending:
    """A tool call the journal saw start: its record's ``seq`` makes its idempotency key."""

    __slots__ = ("seq", "key", "idempotency_key", "resumed")

    def __init__(self, seq: int, key: str, run_id: str, resumed: bool):
        self.seq, self.key, self.resumed = seq, key, resumed
        self.idempotency_key = f"{run_id}:{seq}"


class RunJournal:
    """One run's side of the journal: records written as the run goes, and - for a resumed run -
    the earlier records it is served from, each used once."""

    def __init__(self, journal: Journal, run_id: str, rows: list[tuple[Any, ...]]):
        self.journal, self.run_id = journal, run_id
        self.seq = max((r[0] for r in rows), default=0)
        self.resumed = bool(rows)
        self._models: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._tools: dict[str, deque[tuple[int, dict[str, Any] | None]]] = defaultdict(deque)
        started: dict[int, str] = {}
        results: dict[int, dict[str, Any]] = {}
        for seq, kind, key, data in rows:
            if kind == "model":
                self._models[key].append(json.loads(data))
            elif kind == "tool.start":
                started[seq] = key
            elif kind == "tool.result":
                results[json.loads(data)["start"]] = json.loads(data)
        for seq, key in started.items():  # in start order: the nth call of it gets the nth
            self._tools[key].append((seq, results.get(seq)))
        self._left = len(started)  # tool records still to serve: none, and no call is looked up
        self._lock = threading.Lock()

    def _record(self, kind: str, key: str, data: dict[str, Any], sync: bool = False) -> int:
        with self._lock:
            self.seq += 1
            seq = self.seq
        self.journal._write("INSERT INTO records VALUES (?,?,?,?,?,?)",
                            (self.run_id, seq, kind, key, dumps(data), time.time()), sync)
        return seq

    # -- the model door -------------------------------------------------------------------------
    def replayed_model(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            queue = self._models.get(key)
            return queue.popleft() if queue else None

    def record_model(self, key: str, data: dict[str, Any]) -> None:
        self._record("model", key, data)

    # -- the tool door --------------------------------------------------------------------------
    def peek(self, name: str, arguments: dict[str, Any]) -> str | None:
        """What the journal holds for the next such call: "done" (its result), "started" (a
        start without a result: the run died while it ran) or None."""
        if not self._left:  # a new run, or all served: no key to work out
            return None
        with self._lock:
            queue = self._tools.get(tool_key(name, arguments))
            if not queue:
                return None
            return "done" if queue[0][1] is not None else "started"

    def replayed_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The journaled result of this call, used up; None when it has none."""
        if not self._left:
            return None
        with self._lock:
            queue = self._tools.get(tool_key(name, arguments))
            if queue and queue[0][1] is not None:
                self._left -= 1
                return queue.popleft()[1]
            return None

    def started(self, name: str, arguments: dict[str, Any]) -> Pending:
        """The call starts: written now, unless the crashed run's start of it is reused (then
        its idempotency key is the one the first attempt had)."""
        key = tool_key(name, arguments)
        with self._lock:
            queue = self._tools.get(key) if self._left else None
            if queue and queue[0][1] is None:
                self._left -= 1
                return Pending(queue.popleft()[0], key, self.run_id, True)
        seq = self._record("tool.start", key, {"tool": name, "arguments": arguments}, sync=True)
        return Pending(seq, key, self.run_id, False)

    def finished(self, pending: Pending, result: Any, tainted: bool = False) -> None:
        self._record("tool.result", pending.key, {
            "start": pending.seq, "content": result.content, "is_error": result.is_error,
            "value": result.value,  # what a plan's $stepN reads (JSON; other values as text)
            "duration_s": result.duration_s, "retryable": result.retryable, "tainted": tainted})

    # -- anything else a loop keeps (CodeAct's blocks), and the end ----------------------------
    def note(self, kind: str, data: dict[str, Any]) -> None:
        self._record(kind, "", data)

    def finish(self, status: str) -> None:
        self.journal._write("UPDATE runs SET status=?, updated=? WHERE run_id=?",
                            (status, time.time(), self.run_id), sync=True)
