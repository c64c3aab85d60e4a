"""The PostgreSQL backend of :class:`tao.memory.MemoryStore`: one table shared by every process
and machine that opens ``MemoryStore("postgresql://...")``, vectors in pgvector.

The table holds what the SQLite file holds, and is searched the same way: a ``tsvector`` of
the same segmented copy (``english`` configuration: stemming like FTS5's Porter, CJK pairs
as words) with a GIN index, metadata as JSONB with a GIN index (a filter ``kind="lesson"`` is
``metadata @> '{"kind": "lesson"}'``), and an HNSW index for cosine distance when the
embedder's dimension is known. An HNSW scan filters after it looks, so a filtered search that
comes back with fewer rows than asked is run again as an exact scan (the metadata index keeps
that cheap): a filter never hides a memory.

Creating the table, its indexes and the ``vector`` extension happens under a transaction-level
advisory lock, so many processes opening a new store at once do not trip over each other. The
database user needs the right to ``CREATE EXTENSION vector`` the first time (or an
administrator creates it once).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import Any

from .store import MemoryStoreError

SCHEMA = 1
_TABLE = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


def _filters_sql(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    return ("".join(" AND metadata @> %s::jsonb" for _ in filters),
            [json.dumps({k: v}, ensure_ascii=False) for k, v in filters.items()])


class PostgresBackend:
    kind = "postgresql"
    vector_backend = "pgvector"

    def __init__(self, url: str, *, table: str = "tao_memory", dim: int | None = None):
        try:
            import psycopg
            from pgvector.psycopg import register_vector
        except ImportError as e:
            raise ImportError("MemoryStore on PostgreSQL needs psycopg and pgvector: "
                              "pip install 'tao-agents[postgres]'") from e
        if not _TABLE.match(table):
            raise ValueError(f"table must be a lowercase SQL identifier, not {table!r}")
        self._psycopg = psycopg
        self.table = table
        self.location = _safe_url(url) + f"#{table}"
        self._url = url
        self._lock = threading.RLock()
        self._register = register_vector
        self._db = psycopg.connect(url, autocommit=True)
        try:
            with self._db.transaction():
                self._db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
                self._db.execute("CREATE EXTENSION IF NOT EXISTS vector")
                column = f"vector({int(dim)})" if dim else "vector"
                t = table
                for stmt in (
                    f"CREATE TABLE IF NOT EXISTS {t}_meta (key TEXT PRIMARY KEY, "
                    "value TEXT NOT NULL)",
                    f"CREATE TABLE IF NOT EXISTS {t} (id BIGSERIAL PRIMARY KEY, "
                    "text TEXT NOT NULL, metadata JSONB NOT NULL DEFAULT '{}', "
                    "created DOUBLE PRECISION NOT NULL, digest TEXT NOT NULL UNIQUE, "
                    f"terms TSVECTOR NOT NULL, embedding {column})",
                    f"CREATE INDEX IF NOT EXISTS {t}_terms ON {t} USING gin (terms)",
                    f"CREATE INDEX IF NOT EXISTS {t}_metadata ON {t} "
                    "USING gin (metadata jsonb_path_ops)",
                    f"INSERT INTO {t}_meta VALUES ('schema', '{SCHEMA}') "
                    "ON CONFLICT DO NOTHING",
                ):
                    self._db.execute(stmt)
                self._hnsw = self._typed_dim() is not None
                if self._hnsw:
                    self._db.execute(f"CREATE INDEX IF NOT EXISTS {t}_embedding ON {t} "
                                     "USING hnsw (embedding vector_cosine_ops)")
            register_vector(self._db)
        except Exception:
            self._db.close()
            raise
        schema = int(self.meta("schema") or 0)
        if schema != SCHEMA:
            self._db.close()
            raise MemoryStoreError(f"{self.location} holds memory schema {schema}; this tao reads "
                               f"schema {SCHEMA}")

    def _typed_dim(self) -> int | None:
        """The dimension the ``embedding`` column was created with, if any."""
        row = self._db.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass "
            "AND attname = 'embedding'", (self.table,)).fetchone()
        return row[0] if row and row[0] > 0 else None

    def _retrying(self, work):
        """``work(connection)``, once more on a fresh connection if the server dropped this
        one (a restart, a failover, an idle timeout). Every statement here may run twice: an
        insert is keyed by its digest, a delete by its id."""
        with self._lock:
            try:
                return work(self._db)
            except self._psycopg.OperationalError:
                if not (self._db.closed or self._db.broken):
                    raise
                self._db = self._psycopg.connect(self._url, autocommit=True)
                self._register(self._db)
                return work(self._db)

    def _all(self, sql: str, args: Sequence[Any] = (), *, binary: bool = False) -> list[tuple]:
        return self._retrying(lambda db: db.execute(sql, args, binary=binary).fetchall())

    def meta(self, key: str) -> str | None:
        rows = self._all(f"SELECT value FROM {self.table}_meta WHERE key = %s", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> str:
        self._all(f"INSERT INTO {self.table}_meta VALUES (%s, %s) ON CONFLICT DO NOTHING "
                  "RETURNING key", (key, value))
        return self.meta(key) or value

    def find(self, digest: str) -> tuple | None:
        rows = self._all(f"SELECT id, text, metadata, created FROM {self.table} "
                         "WHERE digest = %s", (digest,))
        return rows[0] if rows else None

    def insert(self, text: str, segmented: str, metadata: str, created: float, digest: str,
               vector: Any | None) -> tuple:
        rows = self._all(
            f"INSERT INTO {self.table} (text, metadata, created, digest, terms, embedding) "
            "VALUES (%s, %s::jsonb, %s, %s, to_tsvector('english', %s), %s) "
            "ON CONFLICT (digest) DO NOTHING RETURNING id, text, metadata, created",
            (text, metadata, created, digest, segmented, vector))
        return rows[0] if rows else self.find(digest)

    def delete(self, item_id: int) -> bool:
        return bool(self._all(f"DELETE FROM {self.table} WHERE id = %s RETURNING id",
                              (item_id,)))

    def unembedded(self, n: int) -> list[tuple[int, str]]:
        return self._all(f"SELECT id, text FROM {self.table} WHERE embedding IS NULL "
                         "ORDER BY id LIMIT %s", (n,))

    def set_vectors(self, pairs) -> None:
        rows = list(pairs)

        def work(db):
            with db.cursor() as cur:
                cur.executemany(f"UPDATE {self.table} SET embedding = %s WHERE id = %s",
                                [(v, i) for i, v in rows])
        self._retrying(work)

    def delete_all(self, filters: dict[str, Any]) -> int:
        sql, args = _filters_sql(filters)
        return len(self._all(f"DELETE FROM {self.table} WHERE true {sql} RETURNING id", args))

    def rows(self, filters: dict[str, Any], ids: Sequence[int] | None = None) -> list[tuple]:
        sql, args = _filters_sql(filters)
        if ids is not None:
            if not ids:
                return []
            sql += " AND id = ANY(%s)"
            args.append(list(ids))
        return self._all(f"SELECT id, text, metadata, created FROM {self.table} "
                         f"WHERE true {sql} ORDER BY id", args)

    def count(self, filters: dict[str, Any]) -> int:
        sql, args = _filters_sql(filters)
        return self._all(f"SELECT count(*) FROM {self.table} WHERE true {sql}", args)[0][0]

    def keyword(self, terms: Sequence[str], n: int, filters: dict[str, Any]) -> list[int]:
        sql, args = _filters_sql(filters)
        return [r[0] for r in self._all(
            f"SELECT id FROM {self.table}, websearch_to_tsquery('english', %s) q "
            f"WHERE terms @@ q {sql} ORDER BY ts_rank(terms, q) DESC, id LIMIT %s",
            [" or ".join(terms), *args, n])]

    def vectors(self, ids: Sequence[int]) -> dict[int, Any]:
        if not ids:
            return {}
        rows = self._all(f"SELECT id, embedding FROM {self.table} WHERE embedding IS NOT NULL "
                         "AND id = ANY(%s)", (list(ids),), binary=True)  # floats, not text
        return {i: v.to_numpy().astype("float32") for i, v in rows}

    def nearest(self, query: Any, n: int, filters: dict[str, Any]) -> list[tuple[int, float]]:
        sql, args = _filters_sql(filters)
        if not self._hnsw:  # an untyped column may hold vectors of another size
            sql = " AND vector_dims(embedding) = %s" + sql
            args.insert(0, int(query.size))
        select = (f"SELECT id, 1 - (embedding <=> %s) AS cos FROM {self.table} "
                  f"WHERE embedding IS NOT NULL {sql} ORDER BY embedding <=> %s LIMIT %s")
        params = [query, *args, query, n]

        def work(db):
            with db.transaction():
                if self._hnsw:
                    db.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(n, 1000))}")
                rows = db.execute(select, params).fetchall()
                if self._hnsw and len(rows) < n and filters:
                    # ordered by an expression the index cannot serve: an exact scan
                    exact = select.replace("ORDER BY embedding <=> %s", "ORDER BY cos DESC, id")
                    rows = db.execute(exact, params[:-2] + [n]).fetchall()
            return rows

        rows = self._retrying(work)
        return [(i, float(c)) for i, c in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _safe_url(url: str) -> str:
    """The URL without its password, for reprs and messages."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)
