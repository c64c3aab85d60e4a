"""How a tool's value reads to a model: numbers without float noise, JSON for structures, cut
at ``MAX_OBSERVATION_CHARS`` (a model copies what it reads, and pays for every character)."""

from __future__ import annotations

import math
from typing import Any

from ..safe_json import dumps

MAX_OBSERVATION_CHARS = 8000


def to_text(value: Any) -> str:
    """How a tool's return value reads to a model: 36.0 reads as 36, dicts as JSON, and float
    noise is rounded away at 15 significant digits (``240 * 0.8 - 20`` reads as 172, not
    172.00000000000003; 1/3 keeps its digits), because a model copies what it reads. Never
    raises: an integer too long for ``str`` (over 4,300 digits) reads in scientific notation,
    a structure ``json`` cannot write has the part it cannot write replaced by a note."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool) or value is None:
        text = str(value)
    elif isinstance(value, float):
        short = f"{value:.15g}"
        if math.isfinite(value) and len(short) < len(repr(value)) - 2:  # noise: 0000…3, 9999…86
            value = float(short)
        text = str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    elif isinstance(value, int):
        text = _int_text(value)
    elif isinstance(value, complex):
        text = str(value)
    else:
        text = dumps(value)
    if len(text) > MAX_OBSERVATION_CHARS:
        cut = len(text) - MAX_OBSERVATION_CHARS
        text = f"{text[:MAX_OBSERVATION_CHARS]}\n... [truncated {cut} characters]"
    return text


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits()
        from decimal import Decimal

        d = Decimal(value)
        return f"{d:.15e} (an integer of {d.adjusted() + 1} digits)"
