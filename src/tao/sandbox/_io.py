"""Host-side plumbing: capped output buffers, protocol frames, values made safe to send.

The host never trusts what comes out of the sandbox: output is kept up to a cap and only counted
beyond it, frames have a size limit and are parsed with ``json`` (never ``marshal``/``pickle``).
What the host sends *in* is ``marshal`` (the worker cannot afford to import ``json`` at start).
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
from typing import Any

MAX_FRAME = 16 << 20


class ProtocolError(Exception):
    """The worker sent something that is not a valid frame: it is killed."""


class OutputBuffer:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    __slots__ = ("cap", "data", "total")

    def __init__(self, cap: int):
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.total += len(chunk)

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self, killed: bool = False) -> str:
        text = self.data.decode("utf-8", "replace")
        if self.truncated:
            more = "at least " if killed else ""
            text += (f"\n[... output truncated: showing the first {len(self.data)} of {more}"
                     f"{self.total} bytes ...]\n")
        return text


def drain(fd: int, buf: OutputBuffer, limit: int) -> bool:
    """Read what is in a non-blocking pipe now; False once the write end is closed for good."""
    while buf.total <= limit:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        buf.feed(chunk)
    return True


class FrameReader:
    """Splits the worker's byte stream into JSON messages."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            n = int.from_bytes(self.buf[:4], "big")
            if n > MAX_FRAME:
                raise ProtocolError(f"frame of {n} bytes")
            if len(self.buf) < 4 + n:
                break
            payload = bytes(self.buf[4:4 + n])
            del self.buf[:4 + n]
            try:
                msg = json.loads(payload.decode("utf-8", "surrogatepass"))
            except (ValueError, RecursionError) as e:  # RecursionError: a nesting bomb
                raise ProtocolError(f"bad frame: {type(e).__name__}") from None
            if not isinstance(msg, dict):
                raise ProtocolError("frame is not an object")
            out.append(msg)
        return out


def frame(msg: dict[str, Any]) -> bytes:
    """A host -> worker frame (marshal version 4: readable by every Python 3 the worker may run)."""
    data = marshal.dumps(msg, 4)
    return len(data).to_bytes(4, "big") + data


def plain(value: Any) -> Any:
    """A tool's return value as plain JSON data (what the sandbox gets back): pydantic models and
    dataclasses become dicts, sets and tuples lists, anything else unknown its ``str``."""
    return json.loads(json.dumps(value, default=_default, ensure_ascii=False))


def _default(o: Any) -> Any:
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json")
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, (set, frozenset)):
        return list(o)
    if isinstance(o, bytes):
        return o.decode("utf-8", "replace")
    return str(o)
