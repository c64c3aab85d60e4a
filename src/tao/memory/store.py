"""Long-term memory: facts, preferences and lessons an agent keeps across runs.

    from tao.memory import MemoryStore

    store = MemoryStore()                              # <data dir>/memory.sqlite3
    store.add("The user drinks green tea, never coffee", kind="preference", user="ana")
    store.add("用户喜欢喝绿茶", kind="preference", user="li")
    for item in store.search("what does Ana drink?", k=3, user="ana"):
        print(item.id, round(item.score, 2), item.text, item.metadata)
    prompt_part = store.context("绿茶", max_tokens=200)  # "- 用户喜欢喝绿茶" (≤ 200 tokens)

``add`` embeds the text locally (no LLM call, no network) and writes one row; it takes a few
milliseconds once the embedder is loaded. ``search`` ranks in three steps:

1. **Two retrievers**, each asked for ``max(50, 4k)`` candidates under the same metadata
   filters: BM25 keyword search (FTS5 on SQLite, ``tsvector`` on PostgreSQL, both over a
   segmented copy that finds two-character Chinese words) and exact cosine nearest neighbours
   of the query's embedding (sqlite-vec or numpy; pgvector).
2. **Reciprocal rank fusion** (``1/(60 + rank)`` summed over both lists) picks the candidates
   worth a closer look: the best ``max(20, 2k)`` of the union.
3. **Rerank** those by ``0.7 * cosine + 0.3 * coverage``: the cosine between the full query
   and memory vectors, and the share of the query's terms (CJK pairs, stemmed words without
   stopwords) that occur in the memory. RRF alone knows ranks, not how close a memory is; the
   rerank score is what ``item.score`` holds and what ``min_score`` compares against.
   Without an embedder (``embedder=False``) the score is the coverage alone.

:meth:`MemoryStore.context` turns the results into prompt text within a token budget
(:func:`compress`: duplicates dropped, the last item cut to fit). The same interface runs on
PostgreSQL with pgvector (``MemoryStore("postgresql://...")``), shared by many processes and
machines.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import TaoError
from .embed import as_embedder
from .scrub import scrub, scrub_value
from .text import compress, estimate_tokens, segment, stem, term_set, terms

RRF_K = 60
#: a long query (a whole task) is searched by its first 64 terms: 900 terms ORed took 0.6 s
#: on 10k memories; its embedding still reads all of it
MAX_TERMS = 64
COSINE_WEIGHT = 0.7
#: False orders the shortlist by RRF alone (benchmarks/memory_store.py compares the two)
RERANK = True


class MemoryStoreError(TaoError):
    """A store that cannot be used as asked: not a memory store, a newer schema, vectors
    from another embedder. Raised when it is opened; nothing in it is changed."""


@dataclass(frozen=True)
class MemoryItem:
    """One memory. ``score`` is the rerank score in [0, 1] when it came from a search, else
    ``None``; ``created`` is a Unix time."""

    id: int
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    created: float = 0.0

    def __getitem__(self, key: str) -> Any:
        return self.metadata[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)


def default_path() -> Path:
    """``memory.sqlite3`` in the user data directory the audit log and chat history use
    (``$TAO_DATA_DIR``, else ``$XDG_DATA_HOME/tao``, else ``~/.local/share/tao``)."""
    from ..paths import data_dir

    return data_dir() / "memory.sqlite3"


def _check_filters(filters: dict[str, Any]) -> dict[str, Any]:
    """Filters are ``key=value`` on the metadata: keys are identifiers, values scalars (a
    string matches that string, a number that number, True/False/None only themselves)."""
    for key, value in filters.items():
        if not key.isidentifier() or not key.isascii():
            raise ValueError(f"metadata filter keys are identifiers (letters, digits, _): "
                             f"{key!r}")
        if value is not None and not isinstance(value, (str, int, float)):
            raise TypeError(f"filter {key}= takes a string, number, bool or None, "
                            f"not {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"filter {key}= takes a finite number, not {value}")
    return filters


def _is_url(target: Any) -> bool:
    return isinstance(target, str) and target.split("://", 1)[0] in ("postgresql", "postgres")


class MemoryStore:
    """A long-term memory store: SQLite in one file by default, or PostgreSQL + pgvector when
    given a ``postgresql://`` URL (same methods, same ranking).

    ``embedder``: ``None`` for the default (USE multilingual in a wheel, no download),
    ``False`` for keyword search only, or an object with ``name``, ``dim`` and
    ``encode(texts)``. A store remembers which embedder wrote its vectors and refuses another.
    """

    def __init__(self, path: str | Path | None = None, *, url: str | None = None,
                 embedder: Any = None, table: str = "tao_memory"):
        if url is not None and (path is not None or not _is_url(url)):
            raise ValueError("url= takes a postgresql:// URL, instead of a path; "
                             f"got url={url!r}, path={path!r}")
        target = url if url is not None else path
        self._embedder = as_embedder(embedder)
        self._backfilled = False
        if _is_url(target):
            from .pg import PostgresBackend

            self._db = PostgresBackend(str(target), table=table,
                                       dim=self._embedder.dim if self._embedder else None)
        else:
            from .sqlite import SqliteBackend

            self._db = SqliteBackend(default_path() if target is None else target)
        if self._embedder is not None:
            wanted = f"{self._embedder.name}:{self._embedder.dim}"
            held = self._db.set_meta("embedder", wanted)
            if held != wanted:
                self._db.close()
                raise MemoryStoreError(
                    f"{self.location}: this store's vectors come from the embedder {held!r}, "
                    f"not {wanted!r}: open it with that embedder, or with embedder=False "
                    f"(keyword search only), or use another store")

    # ----- writing -----------------------------------------------------------------------
    def add(self, text: str, **metadata: Any) -> MemoryItem:
        """Stores ``text`` with its metadata (JSON values) and returns it. The same text with
        the same metadata is stored once: adding it again returns the first item. Secrets
        (API keys, tokens, ``password=...``) are stored as ``***`` (``scrub``)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"a memory is a non-empty string, not {text!r}")
        text, metadata = scrub(text.strip()), scrub_value(metadata)
        try:
            meta_json = json.dumps(metadata, ensure_ascii=False, sort_keys=True,
                                   allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise TypeError(f"memory metadata must be JSON (str, number, bool, None, list, "
                            f"dict): {e}") from None
        norm = " ".join(unicodedata.normalize("NFKC", text).split())
        digest = hashlib.sha256(f"{norm}\0{meta_json}".encode()).hexdigest()
        row = self._db.find(digest)
        if row is None:
            vector = self._embed([text])[0] if self._embedder is not None else None
            row = self._db.insert(text, segment(text), meta_json, time.time(), digest, vector)
        return self._item(row)

    def delete(self, item_id: int) -> bool:
        """Removes one memory; ``False`` if there was none with that id."""
        return self._db.delete(int(item_id))

    def delete_all(self, **filters: Any) -> int:
        """Removes every memory whose metadata has these values (``user="ana"``: all of
        Ana's), or every memory at all when given no filter; returns how many went."""
        return self._db.delete_all(_check_filters(filters))

    # ----- reading -----------------------------------------------------------------------
    def get(self, item_id: int) -> MemoryItem | None:
        rows = self._db.rows({}, [int(item_id)])
        return self._item(rows[0]) if rows else None

    def all(self, **filters: Any) -> list[MemoryItem]:
        """Every memory whose metadata has these values, oldest first."""
        return [self._item(r) for r in self._db.rows(_check_filters(filters))]

    def count(self, **filters: Any) -> int:
        return self._db.count(_check_filters(filters))

    def __len__(self) -> int:
        return self._db.count({})

    def search(self, query: str, k: int = 5, *, min_score: float = 0.0,
               **filters: Any) -> list[MemoryItem]:
        """The ``k`` memories that best match ``query`` among those whose metadata has the
        values in ``filters`` (``kind="lesson"``, ``user="ana"``), best first."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, not {type(query).__name__}")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, not {k!r}")
        _check_filters(filters)
        qterms = terms(query)[:MAX_TERMS]
        pool = max(50, 4 * k)
        lists: list[list[int]] = []
        if qterms:
            lists.append(self._db.keyword(qterms, pool, filters))
        cosine: dict[int, float] = {}
        qvec = None
        if self._embedder is not None and query.strip():
            qvec = self._embed([query])[0]
            self._backfill()
            near = self._db.nearest(qvec, pool, filters)
            cosine = dict(near)
            lists.append([i for i, _ in near])
        fused: dict[int, float] = {}
        for ranked in lists:
            for rank, item_id in enumerate(ranked):
                fused[item_id] = fused.get(item_id, 0.0) + 1.0 / (RRF_K + rank + 1)
        shortlist = sorted(fused, key=lambda i: -fused[i])[:max(20, 2 * k)]
        if qvec is not None:
            missing = [i for i in shortlist if i not in cosine]
            for i, v in self._db.vectors(missing).items():
                cosine[i] = float(v @ qvec)
        qset = {stem(t) for t in qterms}
        scored = []
        for row in self._db.rows({}, shortlist):
            cover = len(qset & term_set(row[1])) / len(qset) if qset else 0.0
            score = (COSINE_WEIGHT * max(0.0, cosine.get(row[0], 0.0))
                     + (1 - COSINE_WEIGHT) * cover) if qvec is not None else cover
            if score >= min_score:
                scored.append((score, fused[row[0]], row))
        scored.sort(key=(lambda s: (-s[0], -s[1])) if RERANK else (lambda s: -s[1]))
        return [replace(self._item(row), score=round(score, 6)) for score, _, row in scored[:k]]

    def context(self, query: str, max_tokens: int = 500, *, k: int = 10,
                min_score: float = 0.0, count: Callable[[str], int] = estimate_tokens,
                **filters: Any) -> str:
        """The best memories for ``query`` as prompt lines (``- text``), duplicates dropped,
        within ``max_tokens`` by ``count`` (default: :func:`estimate_tokens`); "" if none."""
        items = compress(self.search(query, k=k, min_score=min_score, **filters), max_tokens,
                         count=count, line="- {text}")
        return "\n".join(f"- {i.text}" for i in items)

    # ----- the same from async code, off the event loop ------------------------------------
    async def aadd(self, text: str, **metadata: Any) -> MemoryItem:
        return await asyncio.to_thread(self.add, text, **metadata)

    async def asearch(self, query: str, k: int = 5, **kwargs: Any) -> list[MemoryItem]:
        return await asyncio.to_thread(self.search, query, k, **kwargs)

    async def acontext(self, query: str, max_tokens: int = 500, **kwargs: Any) -> str:
        return await asyncio.to_thread(self.context, query, max_tokens, **kwargs)

    # ----- plumbing ----------------------------------------------------------------------
    @property
    def vector_backend(self) -> str | None:
        """``"sqlite-vec"``, ``"numpy"`` (sqlite-vec could not load), ``"pgvector"``, or
        ``None`` without an embedder."""
        return self._db.vector_backend if self._embedder is not None else None

    @property
    def location(self) -> str:
        return getattr(self._db, "location", None) or str(self._db.path)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({self.location!r}, vectors={self.vector_backend})"

    def _backfill(self) -> None:
        """Gives a vector to every memory written without one (by a store opened with
        ``embedder=False``, e.g. before the embedder's package was installed), once per
        store object, at its first search: else those stay findable by keyword only."""
        if self._backfilled:
            return
        while rows := self._db.unembedded(64):
            self._db.set_vectors(zip([i for i, _ in rows], self._embed([t for _, t in rows])))
        self._backfilled = True

    def _embed(self, texts: list[str]):
        import numpy as np

        out = np.asarray(self._embedder.encode(texts), dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    @staticmethod
    def _item(row: tuple) -> MemoryItem:
        meta = row[2] if isinstance(row[2], dict) else json.loads(row[2])  # scrubbed again:
        return MemoryItem(id=int(row[0]), text=scrub(row[1]),  # a store from before the rule
                          metadata=scrub_value(meta), created=float(row[3]))


__all__ = ["MemoryItem", "MemoryStore", "MemoryStoreError", "compress", "default_path"]
