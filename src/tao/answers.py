"""What an answer says, read the same way by every room that compares answers: a Vote counting
agreeing replies and ``tao eval`` scoring a word problem. Here, below both, so neither imports the
other. Both read the number an answer states (``stated_number``): its last number, passing over
figures it only repeats from the question."""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_number(text: str | None) -> float | None:
    """The last number written in ``text`` (thousands separators allowed), or None."""
    found = _numbers(text)
    return found[-1] if found else None


def _numbers(text: str | None) -> list[float]:
    """Every number written in ``text``, in order."""
    out = []
    for raw in _NUMBER.findall((text or "").replace("，", " ")):
        try:
            out.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return out


def stated_number(answer: str | None, question: str | None = None) -> float | None:
    """The number ``answer`` states: its last number that is not only repeated from
    ``question``, else its last number (or None). A model answers in a sentence that often ends
    on the question's own figures - "900 grams of flour are needed for 36 cookies", "two
    workers need 7 hours to pack 630 boxes" - and the last number of those is the question's,
    not the answer's. Without ``question`` it is ``last_number``."""
    found = _numbers(answer)
    if not found:
        return None
    given = set(_numbers(question))
    return next((x for x in reversed(found) if x not in given), found[-1])

