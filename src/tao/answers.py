"""What an answer says, read the same way by every room that compares answers: a Vote counting
agreeing replies and ``tao eval`` scoring a word problem. Here, below both, so neither imports the
other."""

from __future__ import annotations

import re

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
