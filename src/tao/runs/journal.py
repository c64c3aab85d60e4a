"""The run journal: what a run's model said and what its tools returned, so that a run killed at
any moment (kill -9, OOM, a reboot) can be continued.

One SQLite file in WAL mode (``runs.db`` in the user data directory, or ``journal=PATH``) holds
every run: a ``runs`` row per run (id, agent, model, task, status) and a ``records`` row per
model response, tool start and tool result, numbered by ``seq`` within the run. A tool's start is
written before it runs and its result after: a start without a result is a call that may or may
not have had its effect, which ``resume`` never repeats blindly.

Records are committed in the order they were made, many to a transaction (group commit,
``tao.runs.writer``), so what any crash leaves is every record up to some point and none after
it. When the run goes on differs by record:

* the start of a tool with side effects (``side_effects=True``, the default - ``idempotent``
  ones too, whose key is only kept if their start is) is committed before the tool runs,
  together with every record queued before it; with ``fsync=True`` (the default) that commit is
  fsynced, so it also survives power loss (the WAL is one file, synced as a whole);
* the run's status at its end (``finish``) is committed the same way;
* model replies, tool results, notes and the starts of tools without side effects are written
  behind: queued (their JSON made at once, so a later change to the data is not in them), and
  committed by the next of the above, by a read of the file (a read, through any ``Journal``
  of this process, sees every record written before it), by ``close``, at the interpreter's
  exit, or by the journal's writer thread within ``LINGER_S`` (10 ms).

So a process killed (or a machine losing power) may lose the records written behind since the
last commit - never a start that its tool's effect could have followed. What that costs on
resume: a lost model reply is asked of the model again; a lost tool result makes its call "cut
short" (run again when its tool has no side effects or is idempotent, else asked about, never
repeated blindly); a lost start of a tool without side effects only means it runs again. Before
group commit every record was its own commit, before the run went on: a killed process lost
none, at the price of three commits a turn (issue 25, point 5); now a turn that calls a tool
with side effects costs one. ``fsync=False`` leaves syncing to SQLite's checkpoints
(``synchronous=NORMAL``): a killed process loses only what is written behind, a power cut
maybe more.

Records are matched on resume by what was asked, not by position: a model response by a hash of
the messages it answered, a tool result by the tool's name and arguments (each with its
occurrence), so parallel plan steps that finish in another order still find theirs.

``TAO_TEST_KILL_AT=N`` (tests only) kills the process with SIGKILL right after its Nth record is
committed - at once, with those queued before it, so the run does not go on past it: how
``tests/test_resume_kill.py`` stops a run at every journal boundary.
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
from ..safe_json import dumps, plain
from .writer import CHECKPOINT_EVERY, Writer  # noqa: F401 - CHECKPOINT_EVERY: tests read it here

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, agent TEXT, model TEXT, task TEXT, status TEXT,
    started REAL, updated REAL, meta TEXT);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT, seq INTEGER, kind TEXT, key TEXT, data TEXT, ts REAL,
    PRIMARY KEY (run_id, seq));
"""


class JournalError(TaoError):
    """The journal cannot be opened where it was asked for, or has no such run."""


def default_path() -> Path:
    """``runs.db`` beside the audit log, in the user's data directory (``tao.paths.data_dir``)."""
    from ..paths import data_dir

    return data_dir() / "runs.db"


class Journal:
    """``Journal(path=None, fsync=True)``: the runs of one journal file (None: the default one).
    Thread-safe: parallel plan steps run their sync tools in threads."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fsync: bool = True,
                 meta: dict[str, Any] | None = None):
        from .pg import is_url, safe

        #: a PostgreSQL URL (``tao.runs.pg``) instead of a file; ``path`` is then None
        self.url: str | None = str(path) if is_url(path) else None
        self.path: Path | None = None if self.url else (
            Path(path).expanduser() if path is not None else default_path())
        #: where it is, for messages and listings (a URL without its password)
        self.where = safe(self.url) if self.url else str(self.path)
        self.fsync = fsync
        self.meta = meta  # kept with each new run: how to start it again (tao resume)
        self._w = Writer(self.url or self.path, fsync, self._open_pg if self.url else self._open)

    @property
    def target(self) -> str | Path:
        """What opens this journal again: ``Journal(journal.target)``."""
        return self.url or self.path  # type: ignore[return-value]

    @property
    def home(self) -> Path:
        """The folder for what is kept beside the journal (the workbench's traces and key): the
        file's folder, or the data directory for a journal in PostgreSQL."""
        if self.path is not None:
            return self.path.parent
        from ..paths import data_dir

        return data_dir()

    def _open_pg(self) -> Any:
        from .pg import JournalConnectError, PgConnection

        try:
            return PgConnection(self.url, self.fsync)  # type: ignore[arg-type]
        except JournalConnectError as e:
            raise JournalError(str(e)) from None

    def _open(self) -> sqlite3.Connection:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # FULL only where it matters (Writer)
            db.execute("PRAGMA busy_timeout=5000")
            db.execute("PRAGMA wal_autocheckpoint=0")  # _Checkpointer's, off the run's path
            db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as e:
            raise JournalError(f"cannot open the run journal at {self.path}: {e} (pass "
                               f"journal=PATH / --journal FILE, or set TAO_DATA_DIR)") from None
        return db

    def _conn(self) -> sqlite3.Connection:
        """The connection, once all that was queued is committed."""
        return self._w.read(lambda db: db)  # type: ignore[no-any-return]

    def check(self) -> Journal:
        """Open it now, so that a bad path is an error before the run, not at its first step."""
        self._conn()
        return self

    def flush(self) -> None:
        """Return once every record written so far is committed."""
        self._w.flush()

    # -- runs -----------------------------------------------------------------------------------
    def start(self, run_id: str, agent: str, model: str, task: str,
              meta: dict[str, Any] | None = None) -> RunJournal:
        """The journal of run ``run_id``: a new run, or the records of one that is resumed."""
        def read(db: sqlite3.Connection) -> tuple[Any, list[Any]]:
            return (db.execute("SELECT status FROM runs WHERE run_id=?", (run_id,)).fetchone(),
                    db.execute("SELECT seq, kind, key, data FROM records WHERE run_id=? "
                               "ORDER BY seq", (run_id,)).fetchall())

        row, rows = self._w.read(read)
        now = time.time()
        if row is None:  # queued: committed before the run's first record (in order)
            self._w.put("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                        (run_id, agent, model, task, "running", now, now,
                         dumps(meta or self.meta or {})))
        else:
            self._w.put("UPDATE runs SET status='running', updated=? WHERE run_id=?", (now, run_id))
        return RunJournal(self, run_id, rows)

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest runs, newest first: what ``tao runs`` lists."""
        rows = self._w.read(lambda db: db.execute(
            "SELECT run_id, status, agent, model, task, started, updated, meta FROM runs "
            "ORDER BY started DESC LIMIT ?", (limit,)).fetchall())
        keys = ("run_id", "status", "agent", "model", "task", "started", "updated", "meta")
        return [dict(zip(keys, r), meta=json.loads(r[7] or "{}")) for r in rows]

    def find(self, run_id: str) -> dict[str, Any]:
        """The run whose id is ``run_id`` or starts with it (a unique prefix)."""
        rows = self._w.read(lambda db: db.execute(
            "SELECT run_id, status, agent, model, task, started, updated, meta FROM runs "
            "WHERE run_id LIKE ? ESCAPE '\\'", (_like(run_id) + "%",)).fetchall())
        if not rows:
            raise JournalError(f"no run {run_id!r} in the journal {self.where}")
        rows = [r for r in rows if r[0] == run_id] or rows  # a whole id is that run's
        if len(rows) > 1:
            raise JournalError(f"{run_id!r} is the start of {len(rows)} runs' ids in {self.where}; "
                               "give more of it")
        keys = ("run_id", "status", "agent", "model", "task", "started", "updated", "meta")
        return dict(zip(keys, rows[0]), meta=json.loads(rows[0][7] or "{}"))

    def records(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._w.read(lambda db: db.execute(
            "SELECT seq, kind, key, data, ts FROM records WHERE run_id=? ORDER BY seq",
            (run_id,)).fetchall())
        return [{"seq": s, "kind": k, "key": key, "data": json.loads(d), "ts": ts}
                for s, k, key, d, ts in rows]

    def close(self) -> None:
        """Commit what is queued and close the connection (the journal can still be used: it
        opens again)."""
        self._w.close()


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def tool_key(name: str, arguments: dict[str, Any]) -> str:
    """What identifies a tool call on resume: a hash of ``[name, arguments]`` (sorted keys)."""
    return _start(name, arguments)[0]


def _start(name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    """``tool_key`` and the start record's JSON, the arguments serialized once for both."""
    args = plain(arguments, sort_keys=True, room=1)
    if args is None:  # dumps tames them: let it write both as it would
        body = dumps([name, arguments], sort_keys=True)
        text = dumps({"tool": name, "arguments": arguments})
    else:
        tool = dumps(name)
        body, text = f"[{tool}, {args}]", f'{{"tool": {tool}, "arguments": {args}}}'
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32], text


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

    def _record(self, kind: str, key: str, data: dict[str, Any] | str, sync: bool = False) -> int:
        """Queue the record (its JSON made now: a later change to ``data`` is not in it; a str
        is that JSON already); with ``sync``, return once it is committed (and fsynced, with
        ``fsync``)."""
        text, now = data if type(data) is str else dumps(data), time.time()
        with self._lock:  # seq and queue in the same order
            self.seq += 1
            seq = self.seq
            ticket = self.journal._w.put("INSERT INTO records VALUES (?,?,?,?,?,?)",
                                         (self.run_id, seq, kind, key, text, now), sync)
        if sync:
            self.journal._w.wait(ticket)
        return seq

    # -- the model door -------------------------------------------------------------------------
    def replayed_model(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            queue = self._models.get(key)
            return queue.popleft() if queue else None

    def record_model(self, key: str, data: dict[str, Any] | str) -> None:
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

    def started(self, name: str, arguments: dict[str, Any], wait: bool = True) -> Pending:
        """The call starts: written now, unless the crashed run's start of it is reused (then
        its idempotency key is the one the first attempt had). ``wait``: return once the start
        is committed (fsynced, with ``fsync``) - for a tool with side effects, which must not
        run before; a start of one without (``wait=False``) is written behind."""
        key, text = _start(name, arguments)
        with self._lock:
            queue = self._tools.get(key) if self._left else None
            if queue and queue[0][1] is None:
                self._left -= 1
                return Pending(queue.popleft()[0], key, self.run_id, True)
        seq = self._record("tool.start", key, text, sync=wait)
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
        """The run's status, committed (and fsynced, with ``fsync``) with every record before it."""
        w = self.journal._w
        w.wait(w.put("UPDATE runs SET status=?, updated=? WHERE run_id=?",
                     (status, time.time(), self.run_id), True))
