"""JSONL traces: one event per line, written as the run goes, read back into the same events.

    with JsonlTrace("run.jsonl") as trace:
        agent.run(task, sinks=[trace])
    for event in read_trace("run.jsonl"):
        console(event)            # replay into any sink
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from ..events import Event, event_from_dict
from ..safe_json import dumps, loads


class JsonlTrace:
    """A sink writing ``event.to_dict()`` as one JSON line per event, flushed per event so a
    crashed or interrupted run still leaves its trace. ``path_or_file`` is a path (opened here,
    parent folders created, closed by ``close()`` / the ``with`` block) or an open text file
    (left open). ``append=True`` adds to an existing file instead of replacing it.

    Whatever the model or a tool wrote, every line is valid JSON in UTF-8 and the trace is never
    cut: a lone surrogate (``"\\udcff"``, which UTF-8 cannot encode) is written as its JSON
    escape and reads back as the same string; a value JSON cannot hold (nested past
    ``safe_json.MAX_DEPTH``, a cycle) is written with a note in its place."""

    def __init__(self, path_or_file: str | os.PathLike[str] | IO[str], *, append: bool = False):
        if isinstance(path_or_file, (str, os.PathLike)):
            path = Path(path_or_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.file: IO[str] = open(path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
            self._owned = True
        else:
            self.file = path_or_file
            self._owned = False

    def __call__(self, event: Event) -> None:
        line = dumps(event.to_dict())
        self.file.write(line + "\n")
        self.file.flush()

    def close(self) -> None:
        if self._owned and not self.file.closed:
            self.file.close()

    def __enter__(self) -> JsonlTrace:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_trace(path_or_file: str | os.PathLike[str] | IO[str]) -> list[Event]:
    """The events of a JSONL trace, in order. Blank lines are skipped; a line that is not an
    event raises ``ValueError`` naming the line."""
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, encoding="utf-8") as f:
            return _read(f, str(path_or_file))
    return _read(path_or_file, getattr(path_or_file, "name", "<trace>"))


def _read(lines: IO[str], where: str) -> list[Event]:
    events = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(event_from_dict(loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{where}:{n}: not a tao event ({type(e).__name__}: {e})") from None
    return events
