"""A coding run's workspace as the page shows it: the files and their text, read with the
workspace tools' own path checks (``tao.tools.safe_path``: no ``..``, no absolute path, no
symbolic link followed), so the page cannot read what the agent could not write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import HTTPException

from ..tools import safe_path

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
    """The text of ``path`` in ``root``: 400 for a path that leaves it, 404 for none there."""
    try:
        parts = safe_path.parts_of(path)
    except safe_path.Refused as e:
        raise HTTPException(400, f"not a path inside the workspace: {path!r} ({e.key})") from None
    try:
        data = safe_path.read_bytes(str(root), parts, MAX_BYTES)
    except safe_path.Refused as e:
        code = 413 if e.key == "too_big_read" else 404 if e.key in ("missing", "not_found") else 400
        raise HTTPException(code, f"cannot show {path!r} ({e.key})") from None
    except FileNotFoundError:
        raise HTTPException(404, f"no file {path!r} in the workspace") from None
    except OSError as e:
        raise HTTPException(404, f"cannot read {path!r}: {e.strerror or e}") from None
    return data.decode("utf-8", errors="replace")
