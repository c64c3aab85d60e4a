"""``--out DIR``: the per-task records of a run, appended as they finish, read back to resume."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from ..safe_json import dumps


class Store:
    """Records by (agent, task id); in memory only when ``out`` is None.

    ``out/run.json`` holds the suite, model and votes of the run (a resume with another suite,
    model or --votes is refused rather than mixed in) and when and where it started;
    ``out/results.jsonl`` one record a line; ``out/transcripts.jsonl`` each task's messages, a
    line each. A last line without its newline was cut off mid-write: it is dropped (and the
    record's task runs again). Any other line that is not a record is an error naming the line."""

    def __init__(self, out: str | Path | None, meta: dict[str, Any]):
        self._records: dict[tuple[str, str], dict[str, Any]] = {}
        self.path: Path | None = None
        if out is None:
            return
        out = Path(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"cannot create {out}: {e.strerror or e}") from None
        self._check_meta(out / "run.json", meta)
        self.path = out / "results.jsonl"
        if self.path.exists():
            self._load(self.path)
        _drop_cut_line(out / "transcripts.jsonl")

    @staticmethod
    def _check_meta(path: Path, meta: dict[str, Any]) -> None:
        if path.exists():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as e:
                raise ValueError(f"{path} is not a tao eval run file ({e})") from None
            for key in ("suite", "model"):
                if old.get(key) != meta[key]:
                    raise ValueError(f"{path.parent} holds a run of suite {old.get('suite')!r} "
                                     f"with model {old.get('model')!r}, not {meta['suite']!r} with "
                                     f"{meta['model']!r}: give another --out")
            if old.get("votes", 1) != meta.get("votes", 1):
                raise ValueError(f"{path.parent} holds a run with --votes {old.get('votes', 1)}, "
                                 f"not {meta.get('votes', 1)}: give the same --votes or another --out")
            return
        started = {"started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                   "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
                              f"Python {platform.python_version()})"}
        path.write_text(json.dumps({**meta, **started}, ensure_ascii=False, indent=1) + "\n",
                        encoding="utf-8")

    def _load(self, path: Path) -> None:
        _drop_cut_line(path)
        data = path.read_bytes()
        for n, line in enumerate(data.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key = (record["agent"], record["task_id"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}:{n} is not a tao eval record; fix or remove that line") from None
            self._records[key] = record

    def meta(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        return json.loads((self.path.parent / "run.json").read_text(encoding="utf-8"))

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._records

    def __getitem__(self, key: tuple[str, str]) -> dict[str, Any]:
        return self._records[key]

    def add(self, record: dict[str, Any]) -> None:
        """Keep ``record``; its ``messages`` (the run's conversation) go to
        ``transcripts.jsonl`` beside it, first, so a record never lacks its transcript (a
        task cut off between the two writes runs again on resume and is transcribed twice:
        the last line for a task is its transcript)."""
        messages = record.pop("messages", None)
        self._records[(record["agent"], record["task_id"])] = record
        if self.path is None:
            return
        if messages is not None:
            line = {"task_id": record["task_id"], "agent": record["agent"],
                    "correct": record["correct"], "messages": messages}
            with open(self.path.parent / "transcripts.jsonl", "a", encoding="utf-8") as f:
                f.write(dumps(line) + "\n")
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(dumps(record) + "\n")  # a lone surrogate a model wrote: its escape


def _drop_cut_line(path: Path) -> None:
    """Cut a last line a crash left without its newline, so the next line appended stands alone."""
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
    except OSError:  # missing or empty
        return
    data = path.read_bytes()
    with open(path, "r+b") as f:
        f.truncate(data.rfind(b"\n") + 1)
