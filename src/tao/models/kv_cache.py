"""Saved KV state of a prompt's fixed prefix, so a second process does not evaluate it again.

On two CPU cores the 0.5B model needs about 4 s for the 627 tokens of ReAct's system prompt, tool
list and worked example - most of a short ``tao run`` after the load - and without this every run
would pay it again before its first token. A file keeps llama.cpp's own state bytes (what
``Llama.save_state()`` takes: the KV cells of the prefix, 7.7 MB there) and the prefix tokens, not
the ``scores`` that ``save_state`` adds (n_batch x vocab floats, 311 MB for Qwen, unused with
``logits_all=False``: sampling reads the context's logits, refreshed after a restore).

A file is named by a hash of the model's identity, n_ctx, llama-cpp's version and the exact prefix
tokens, so a changed prompt, model or library simply misses. It is written atomically, checked
with its SHA-256 on read (a torn, corrupt or foreign file is a miss, re-evaluated and rewritten),
and the directory is kept under a byte budget by deleting the least recently used files.
``TAO_KV_CACHE=0`` turns the files off; ``TAO_KV_CACHE_DIR`` moves them (default
``<tao cache>/kv``, beside the models). Nothing here imports llama_cpp.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .gguf_store import _marker, _stamp, cache_dir

log = logging.getLogger(__name__)

MAGIC = b"TAOKV1\n"
SUFFIX = ".kv"
DEFAULT_MAX_BYTES = 512 << 20


def enabled() -> bool:
    return os.environ.get("TAO_KV_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


def default_dir() -> Path:
    return Path(os.environ.get("TAO_KV_CACHE_DIR") or cache_dir() / "kv")


def model_identity(path: Path) -> str:
    """The model's SHA-256 from the verified marker ``gguf_store`` keeps beside it; a GGUF given by
    path without one is named by path, size and mtime (hashing 1 GB would cost seconds a run)."""
    path = Path(path).resolve()
    try:
        stamp = json.loads(_marker(path).read_text())
        if stamp == _stamp(path, stamp.get("sha256", "")):
            return f"sha256:{stamp['sha256']}"
    except (OSError, ValueError, AttributeError):
        pass
    st = path.stat()
    return f"file:{path}:{st.st_size}:{st.st_mtime_ns}"


@dataclass(frozen=True)
class Snapshot:
    """What ``Llama.load_state`` needs back: the prefix tokens and llama.cpp's state bytes."""

    tokens: np.ndarray  # int32, the prefix
    state: bytes


class PrefixCache:
    """Snapshots by prefix: a few in memory (a process switching between agents' prompts), the
    rest in ``directory`` (``None``: memory only)."""

    def __init__(self, identity: str, directory: Path | None, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 in_memory: int = 4):
        self.identity = identity
        self.directory = Path(directory) if directory is not None else None
        self.max_bytes = max_bytes
        self.in_memory = in_memory
        self._ram: OrderedDict[str, Snapshot] = OrderedDict()
        self.hits = self.misses = 0

    def key(self, tokens: Sequence[int]) -> str:
        h = hashlib.sha256(self.identity.encode() + b"\0")
        h.update(np.asarray(tokens, dtype="<i4").tobytes())
        return h.hexdigest()

    def path(self, key: str) -> Path | None:
        return self.directory / f"{key}{SUFFIX}" if self.directory is not None else None

    # -- read ----------------------------------------------------------------------------
    def get(self, tokens: Sequence[int]) -> Snapshot | None:
        key = self.key(tokens)
        snap = self._ram.get(key)
        if snap is not None:
            self._ram.move_to_end(key)
        else:
            snap = self._read(key, tokens)
            if snap is not None:
                self._remember(key, snap)
        if snap is None:
            self.misses += 1
        else:
            self.hits += 1
        return snap

    def has(self, tokens: Sequence[int]) -> bool:
        key = self.key(tokens)
        path = self.path(key)
        return key in self._ram or (path is not None and path.is_file())

    def _read(self, key: str, tokens: Sequence[int]) -> Snapshot | None:
        path = self.path(key)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.debug("kv cache: cannot read %s: %s", path, e)
            return None
        snap = _decode(data, key, tokens)
        if snap is None:
            log.debug("kv cache: ignoring corrupt or foreign %s", path)
            return None
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        return snap

    # -- write ---------------------------------------------------------------------------
    def put(self, tokens: Sequence[int], state: bytes) -> None:
        key = self.key(tokens)
        snap = Snapshot(np.asarray(tokens, dtype="<i4").copy(), bytes(state))
        self._remember(key, snap)
        path = self.path(key)
        if path is None:
            return
        data = _encode(key, snap)
        if len(data) > self.max_bytes:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)  # readers see the old file or the whole new one
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:  # a full or read-only disk costs speed, never the run
            log.debug("kv cache: cannot write %s: %s", path, e)
            return
        self.evict(keep=path)

    def evict(self, keep: Path | None = None) -> None:
        """Delete the least recently used files until the directory fits ``max_bytes``."""
        if self.directory is None:
            return
        files = []
        try:
            for p in self.directory.glob(f"*{SUFFIX}"):
                try:
                    st = p.stat()
                except OSError:
                    continue
                files.append((st.st_mtime_ns, st.st_size, p))
        except OSError:
            return
        total = sum(size for _, size, _ in files)
        for _, size, p in sorted(files, key=lambda f: f[0]):
            if total <= self.max_bytes:
                break
            if p == keep:
                continue
            try:
                p.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                log.debug("kv cache: cannot evict %s: %s", p, e)
                continue
            total -= size

    def _remember(self, key: str, snap: Snapshot) -> None:
        self._ram[key] = snap
        self._ram.move_to_end(key)
        while len(self._ram) > self.in_memory:
            self._ram.popitem(last=False)


def _encode(key: str, snap: Snapshot) -> bytes:
    payload = snap.tokens.astype("<i4").tobytes() + snap.state
    header = {"key": key, "n_tokens": int(snap.tokens.size), "state_bytes": len(snap.state),
              "sha256": hashlib.sha256(payload).hexdigest()}
    return MAGIC + json.dumps(header).encode() + b"\n" + payload


def _decode(data: bytes, key: str, tokens: Sequence[int]) -> Snapshot | None:
    """The snapshot in ``data`` if it is whole and is the one for ``key`` and ``tokens``."""
    if not data.startswith(MAGIC):
        return None
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(data[len(MAGIC):end])
        n, size, digest = int(header["n_tokens"]), int(header["state_bytes"]), header["sha256"]
        if header["key"] != key:
            return None
    except (ValueError, KeyError, TypeError):
        return None
    payload = memoryview(data)[end + 1:]
    if n < 0 or size < 0 or len(payload) != 4 * n + size:
        return None
    if hashlib.sha256(payload).hexdigest() != digest:
        return None
    ids = np.frombuffer(payload[:4 * n], dtype="<i4").copy()
    if not np.array_equal(ids, np.asarray(tokens, dtype="<i4")):
        return None
    return Snapshot(ids, bytes(payload[4 * n:]))
