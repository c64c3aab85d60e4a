"""Scoring answers to numeric word problems (calculator tasks, GSM8K): the last number wins."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_number(text: str | None) -> float | None:
    """The last number written in ``text`` (thousands separators allowed), or None."""
    found = _NUMBER.findall((text or "").replace("，", " "))
    for raw in reversed(found):
        try:
            return float(raw.replace(",", ""))
        except ValueError:
            continue
    return None


def is_correct(answer: str | None, expected: str | float, tol: float = 1e-6) -> bool:
    got = last_number(answer)
    return got is not None and abs(got - float(expected)) <= tol * max(1.0, abs(float(expected)))


def load_tasks(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
