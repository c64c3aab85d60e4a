"""A coding run's workspace as the page shows it: the files and their text, read with the
workspace tools' own path checks (``tao.workspace.safe_path``: no ``..``, no absolute path, no
symbolic link followed), so the page cannot read what the agent could not write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..workspace import safe_path
from .words import Refusal

MAX_BYTES = 2 << 20  # what the page shows of one file
MAX_FILES = 2000


def listing(root: Path) -> list[dict[str, Any]]:
    """Every regular file under ``root``: its path (``/``-separated) and size, sorted."""
    if not root.is_dir():
        return []
    found: list[dict[str, Any]] = []
    todo: list[list[str]] = [[]]
    while todo and len(found) < MAX_FILES:
        parts = todo.pop()
        try:
            entries = safe_path.entries(str(root), parts)
        except (safe_path.Refused, OSError):
            continue
        for name, kind, size, _ in entries:
            if kind == "dir":
                todo.append([*parts, name])
            elif kind == "file":
                found.append({"path": "/".join([*parts, name]), "size": size})
    return sorted(found, key=lambda f: f["path"])[:MAX_FILES]


def read(root: Path, path: str) -> str:
    """The text of ``path`` in ``root``: 400 for a path that leaves it (``..``, absolute, a
    symbolic link), 404 for none there, 413 for one too big to show."""
    try:
        parts = safe_path.parts_of(path)
    except safe_path.Refused:
        raise Refusal(400, "outside", path=repr(path)) from None
    try:
        data = safe_path.read_bytes(str(root), parts, MAX_BYTES)
    except safe_path.Refused as e:
        if e.key == "too_big_read":
            raise Refusal(413, "too_big", path=repr(path)) from None
        if e.key in ("not_found", "not_dir"):
            raise Refusal(404, "no_file", path=repr(path)) from None
        raise Refusal(400, "outside", path=repr(path)) from None
    except OSError:
        raise Refusal(404, "no_file", path=repr(path)) from None
    return data.decode("utf-8", errors="replace")
