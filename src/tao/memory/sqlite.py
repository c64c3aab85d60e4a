"""The embedded backend of :class:`tao.memory.MemoryStore`: one SQLite file, no server.

Rows live in ``items`` (text, JSON metadata, the embedding as a float32 BLOB); the keyword
index is an FTS5 ``unicode61`` table (Porter stemming for English) over a segmented copy of
each text (:func:`tao.memory.text.segment`), so two-character Chinese words are found.

Vectors are compared exactly (brute force, cosine) with sqlite-vec's ``vec_distance_cosine``
inside the query, so metadata filters and the nearest-neighbour search are one SQL statement.
sqlite-vec is loaded through ``pysqlite3`` (SQLite 3.51), because the standard library's
``sqlite3`` on some Pythons (pyenv's among them) cannot load extensions. When either is
missing, the same rows are read into numpy and ranked there: the same results, slower.

The file is opened in WAL mode with a 30 s busy timeout, so several processes can read and
write one store at once; ids come from AUTOINCREMENT and are never reused after a delete.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .store import MemoryStoreError
from .text import fts5_query

SCHEMA = 1
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOKENIZE = "porter unicode61 remove_diacritics 2"


def _driver():
    """pysqlite3 (a recent SQLite that can load extensions) when installed, else the
    standard library's sqlite3."""
    try:
        import pysqlite3.dbapi2 as sqlite  # type: ignore[import-not-found]
    except ImportError:
        import sqlite3 as sqlite
    return sqlite


def _load_vec(db: Any) -> bool:
    """Whether sqlite-vec is installed and loads into ``db``."""
    try:
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError:
        return False
    try:
        db.enable_load_extension(True)
        sqlite_vec.load(db)
        db.enable_load_extension(False)
    except Exception:  # noqa: BLE001 - no load_extension in this build, or it would not load
        return False
    return True


def check_filter_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"metadata filter keys are identifiers (letters, digits, _): {key!r}")
    return key


def where(filters: dict[str, Any], column: str = "metadata") -> tuple[str, list[Any]]:
    """`` AND ...`` clauses matching each ``key=value`` in the JSON metadata exactly: a string
    matches only that string, a number that number (1 == 1.0), True/False/None only
    themselves (json_type keeps ``True`` from matching ``1``)."""
    sql, args = [], []
    for key, value in filters.items():
        path = "$." + check_filter_key(key)
        if value is None or isinstance(value, bool):
            sql.append(f"json_type({column}, ?) = ?")
            args += [path, "null" if value is None else ("true" if value else "false")]
        elif isinstance(value, str):
            sql.append(f"json_type({column}, ?) = 'text' AND json_extract({column}, ?) = ?")
            args += [path, path, value]
        elif isinstance(value, (int, float)):
            sql.append(f"json_type({column}, ?) IN ('integer', 'real') "
                       f"AND json_extract({column}, ?) = ?")
            args += [path, path, value]
        else:
            raise TypeError(f"filter {key}= takes a string, number, bool or None, "
                            f"not {type(value).__name__}")
    return "".join(" AND " + s for s in sql), args


class SqliteBackend:
    kind = "sqlite"

    def __init__(self, path: str | Path, *, vec: bool = True):
        self.path = Path(path).expanduser()
        self._sqlite = _driver()
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():  # memories are personal: the file is the user's alone
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            self._db = self._sqlite.connect(str(self.path), timeout=30.0, isolation_level=None,
                                            check_same_thread=False)
        except (OSError, self._sqlite.Error) as e:
            raise MemoryStoreError(f"cannot open a memory store at {self.path}: {e} (pass "
                                   "another path, or set TAO_DATA_DIR)") from None
        try:
            self.vector_backend = "sqlite-vec" if vec and _load_vec(self._db) else "numpy"
            self._setup()
        except self._sqlite.DatabaseError as e:
            self._db.close()
            raise MemoryStoreError(f"{self.path} cannot be opened as a memory store: {e}") \
                from None
        except BaseException:
            self._db.close()
            raise

    def _setup(self) -> None:
        self._db.execute("PRAGMA busy_timeout = 30000")
        if self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self.transaction():
            tables = {r[0] for r in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "meta" not in tables:
                raise MemoryStoreError(
                    f"{self.path} is an SQLite database of something else (tables: "
                    f"{', '.join(sorted(tables)[:5])}); a memory store needs a file of its own")
            for stmt in (
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "text TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', created REAL NOT NULL,"
                " digest TEXT NOT NULL UNIQUE, embedding BLOB)",
                f"CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(body, "
                f"tokenize='{_TOKENIZE}')",
                f"INSERT OR IGNORE INTO meta VALUES ('schema', '{SCHEMA}')",
            ):
                self._db.execute(stmt)
        schema = int(self.meta("schema") or 0)
        if schema != SCHEMA:
            raise MemoryStoreError(f"{self.path} holds memory schema {schema}; this tao reads "
                                   f"schema {SCHEMA}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE``: the write lock up front, so two writers queue on the busy
        timeout instead of one failing at its first write."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def meta(self, key: str) -> str | None:
        rows = self._all("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> str:
        """Sets ``key`` unless another process set it first; returns the value that holds."""
        with self.transaction():
            self._db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, value))
        return self.meta(key) or value

    def find(self, digest: str) -> tuple | None:
        rows = self._all("SELECT id, text, metadata, created FROM items WHERE digest = ?",
                         (digest,))
        return rows[0] if rows else None

    def insert(self, text: str, segmented: str, metadata: str, created: float, digest: str,
               vector: Any | None) -> tuple:
        """The new row, or the row already holding ``digest`` (same text and metadata)."""
        blob = None if vector is None else vector.astype("float32").tobytes()
        with self.transaction():
            row = self._db.execute(
                "INSERT INTO items (text, metadata, created, digest, embedding) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING RETURNING id",
                (text, metadata, created, digest, blob)).fetchone()
            if row is not None:
                self._db.execute("INSERT INTO items_fts (rowid, body) VALUES (?, ?)",
                                 (row[0], segmented))
                return (row[0], text, metadata, created)
        return self.find(digest)

    def delete(self, item_id: int) -> bool:
        with self.transaction():
            gone = self._db.execute("DELETE FROM items WHERE id = ?", (item_id,)).rowcount
            self._db.execute("DELETE FROM items_fts WHERE rowid = ?", (item_id,))
        return gone > 0

    def unembedded(self, n: int) -> list[tuple[int, str]]:
        return self._all("SELECT id, text FROM items WHERE embedding IS NULL ORDER BY id "
                         "LIMIT ?", (n,))

    def set_vectors(self, pairs) -> None:
        with self.transaction():
            self._db.executemany("UPDATE items SET embedding = ? WHERE id = ?",
                                 [(v.astype("float32").tobytes(), i) for i, v in pairs])

    def delete_all(self, filters: dict[str, Any]) -> int:
        sql, args = where(filters)
        with self.transaction():
            ids = [r[0] for r in self._db.execute(f"SELECT id FROM items WHERE 1 {sql}", args)]
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                marks = ",".join("?" * len(chunk))
                self._db.execute(f"DELETE FROM items WHERE id IN ({marks})", chunk)
                self._db.execute(f"DELETE FROM items_fts WHERE rowid IN ({marks})", chunk)
        return len(ids)

    def rows(self, filters: dict[str, Any], ids: Sequence[int] | None = None) -> list[tuple]:
        sql, args = where(filters)
        if ids is not None:
            if not ids:
                return []
            sql += f" AND id IN ({','.join('?' * len(ids))})"
            args += list(ids)
        return self._all(f"SELECT id, text, metadata, created FROM items WHERE 1 {sql} "
                         "ORDER BY id", args)

    def count(self, filters: dict[str, Any]) -> int:
        sql, args = where(filters)
        return self._all(f"SELECT count(*) FROM items WHERE 1 {sql}", args)[0][0]

    def keyword(self, terms: Sequence[str], n: int, filters: dict[str, Any]) -> list[int]:
        """Ids of the best ``n`` BM25 matches of any of ``terms``."""
        sql, args = where(filters, "items.metadata")
        match = fts5_query(terms)
        return [r[0] for r in self._all(
            "SELECT items.id FROM items_fts JOIN items ON items.id = items_fts.rowid "
            f"WHERE items_fts MATCH ? {sql} ORDER BY bm25(items_fts) LIMIT ?",
            [match, *args, n])]

    def vectors(self, ids: Sequence[int]) -> dict[int, Any]:
        import numpy as np

        if not ids:
            return {}
        rows = self._all(f"SELECT id, embedding FROM items WHERE embedding IS NOT NULL "
                         f"AND id IN ({','.join('?' * len(ids))})", list(ids))
        return {i: np.frombuffer(b, dtype=np.float32) for i, b in rows}

    def nearest(self, query: Any, n: int, filters: dict[str, Any]) -> list[tuple[int, float]]:
        """The ``n`` rows nearest ``query`` by cosine, exactly: [(id, cosine)], best first."""
        sql, args = where(filters)
        if self.vector_backend == "sqlite-vec":
            rows = self._all(
                "SELECT id, vec_distance_cosine(embedding, ?) AS d FROM items "
                f"WHERE embedding IS NOT NULL AND length(embedding) = ? {sql} "
                "ORDER BY d LIMIT ?", [query.astype("float32").tobytes(), query.size * 4,
                                       *args, n])
            return [(i, 1.0 - d) for i, d in rows]
        import numpy as np

        rows = self._all("SELECT id, embedding FROM items WHERE embedding IS NOT NULL AND "
                         f"length(embedding) = ? {sql}", [query.size * 4, *args])
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        cos = matrix.reshape(len(rows), -1) @ query.astype(np.float32)
        best = np.argsort(-cos, kind="stable")[:n]
        return [(rows[i][0], float(cos[i])) for i in best]

    def close(self) -> None:
        with self._lock:
            self._db.close()

