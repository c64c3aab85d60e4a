"""JSON in and out of model-written text, with limits a hostile reply cannot break.

``json.loads`` raises ``RecursionError`` (not ``JSONDecodeError``) at about 1,000 nested brackets
and ``ValueError`` on an integer of more than 4,300 digits (Python's ``int_max_str_digits``); a
value nested a few hundred levels deep parses, then breaks whatever walks it later - ``repr``,
a trace sink's ``json.dumps``, pydantic - because the agent loop already sits deep in the stack.
So model-written JSON is read through ``loads``/``raw_decode`` here, where each of those is a
``JSONDecodeError`` (the callers already turn that into an observation) and nesting is capped at
``MAX_DEPTH``; and values are written through ``dumps``, which never raises and always gives text
that encodes as UTF-8 (a lone surrogate is written as its ``\\udcff`` escape: the same string).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

#: Deeper than any real tool call or plan; shallow enough that walking it never nears the stack limit.
MAX_DEPTH = 100

_DECODER = json.JSONDecoder()
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTAINERS = (dict, list, tuple)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether dicts/lists/tuples in ``value`` nest more than ``limit`` levels (a cycle counts as
    too deep). Iterative, so it works on values that would break a recursive walk; a flat dict of
    arguments costs a fraction of a microsecond."""
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    for c in value:
        if isinstance(c, _CONTAINERS):
            break
    else:
        return False  # flat: the common case, without building a stack
    stack = [(c, 2) for c in value if isinstance(c, _CONTAINERS)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        children = v.values() if isinstance(v, dict) else v
        stack.extend((c, depth + 1) for c in children if isinstance(c, _CONTAINERS))
    return False


def raw_decode(text: str, start: int = 0) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode`` (a value at ``start``, text after it ignored) that
    raises only ``json.JSONDecodeError``."""
    try:
        value, end = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError:
        raise
    except (RecursionError, MemoryError):
        raise json.JSONDecodeError(f"nested more than {MAX_DEPTH} levels deep", text, start) from None
    except ValueError:  # an integer literal over int_max_str_digits
        raise json.JSONDecodeError("a number has too many digits", text, start) from None
    # fewer opening brackets than the limit cannot nest deeper than it: skip the walk
    if text.count("[", start) + text.count("{", start) > MAX_DEPTH and too_deep(value):
        raise json.JSONDecodeError(f"nested more than {MAX_DEPTH} levels deep", text, start)
    return value, end


def loads(text: str) -> Any:
    """``json.loads`` that raises only ``json.JSONDecodeError`` (see ``raw_decode``)."""
    value, end = raw_decode(text, len(text) - len(text.lstrip()))
    rest = text[end:]
    if rest.strip():
        raise json.JSONDecodeError("Extra data", text, end + len(rest) - len(rest.lstrip()))
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, default=str, **kwargs)`` that never raises and
    writes what ``loads`` reads back: what it cannot (nesting deeper than ``MAX_DEPTH``, a cycle,
    a huge integer, an object whose ``str`` fails) is written as a short note in its place. Lone
    surrogates come out as ``\\uXXXX`` escapes, so the text always encodes as UTF-8."""
    try:
        if not kwargs:  # the common call: the cached encoder, no keyword handling
            text = "".join(_encoder(_DEFAULT)(value, 0))
        elif kwargs.keys() <= _CACHED and kwargs.get("default", str) is str \
                and not kwargs.get("ensure_ascii", False) \
                and type(kwargs.get("separators", ())) is tuple:
            text = "".join(_encoder((bool(kwargs.get("sort_keys")),
                                     kwargs.get("separators")))(value, 0))
        else:
            text = json.dumps(value, **{"ensure_ascii": False, "default": str, **kwargs})
        if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(value):
            raise RecursionError  # it would not read back through ``loads``
    except Exception:  # noqa: BLE001 - RecursionError, a cycle, a huge int, a failing __str__...
        kwargs = {"ensure_ascii": False, **kwargs, "default": _note}
        text = json.dumps(_tame(value, MAX_DEPTH, set()), **kwargs)
    return escape_surrogates(text)


_CACHED = frozenset({"ensure_ascii", "default", "sort_keys", "separators"})
_DEFAULT: tuple[bool, Any] = (False, None)
_ENCODERS: dict[tuple[bool, Any], Callable[[Any, int], Any]] = {}


def plain(value: Any, sort_keys: bool = False, room: int = 0) -> str | None:
    """``dumps(value, sort_keys=sort_keys)`` when ``dumps`` would write ``value`` as it is -
    also nested ``room`` levels deep inside another value - else None (it would be tamed): a
    value's text to splice into a larger JSON text that ``dumps`` would write the same."""
    try:
        text = "".join(_encoder((sort_keys, None))(value, 0))
    except Exception:  # noqa: BLE001 - what dumps tames
        return None
    if text.count("[") + text.count("{") > MAX_DEPTH - room and too_deep(value, MAX_DEPTH - room):
        return None
    return escape_surrogates(text)


def _encoder(key: tuple[bool, Any]) -> Callable[[Any, int], Any]:
    """``json.dumps``'s encoder for ``(sort_keys, separators)`` (``ensure_ascii=False``,
    ``default=str``), made once: ``json.dumps`` makes one per call with keywords, and
    ``JSONEncoder.encode`` makes its C encoder per call too (~1 us, as much as encoding a
    tool's arguments). ``"".join(encoder(value, 0))`` is ``json.dumps``'s text. Made without
    ``check_circular``'s table, which one encoder shared by threads cannot keep: a cycle ends
    in ``RecursionError`` instead of ``ValueError``, and is tamed the same."""
    encoder = _ENCODERS.get(key)
    if encoder is None:
        item, colon = key[1] or (", ", ": ")
        try:
            encoder = c_make_encoder(None, str, encode_basestring, None, colon, item, key[0],
                                     False, True)
        except TypeError:  # no C accelerator (None), or one that is made another way
            py = json.JSONEncoder(ensure_ascii=False, default=str, sort_keys=key[0],
                                  separators=key[1])
            encoder = lambda value, _: (py.encode(value),)
        _ENCODERS[key] = encoder
    return encoder


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (``"\\udcff"``: what ``surrogateescape`` makes of a
    non-UTF-8 byte, or half of a pair a model split) written as its six-character escape, so it
    encodes as UTF-8. In JSON text the escape reads back as the same string."""
    if text.isascii():
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _note(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - whatever the object's __str__ raises
        return f"<{type(value).__name__} object>"


def _tame(value: Any, depth: int, seen: set[int]) -> Any:
    """A copy of ``value`` that ``json.dumps`` can write (recursion bounded by ``depth``)."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        bits = value.bit_length()  # 10,000 bits: 3,011 digits, under int_max_str_digits
        return value if bits < 10_000 else f"<an integer of about {int(bits * 0.30103) + 1} digits>"
    if not isinstance(value, _CONTAINERS):
        return _note(value)
    if depth <= 0:
        return f"<nested more than {MAX_DEPTH} levels deep>"
    if id(value) in seen:
        return "<circular reference>"
    seen = seen | {id(value)}
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _note(k): _tame(v, depth - 1, seen) for k, v in value.items()}
    return [_tame(v, depth - 1, seen) for v in value]
