"""Text helpers the memory store shares between its backends: CJK segmentation for keyword
search, query terms, and the token estimate used to fit memories into a budget.

Why segment: SQLite's FTS5 ``unicode61`` tokenizer takes a run of Chinese characters as one
token (``我喜欢喝绿茶`` is a single word to it), and ``trigram`` cannot match anything shorter
than three characters, so ``MATCH '绿茶'`` finds nothing with either. The store indexes a
*segmented copy* of each text instead: every run of Han/Kana characters becomes its single
characters plus its overlapping two-character pairs (``绿 茶 绿茶``), and other text is left to
the tokenizer. A query is segmented the same way, into pairs only (single characters when the
run is one character long), so a two-character word matches exactly its pair. PostgreSQL's
``simple`` text search reads the same copy, which keeps both backends ranking alike.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

# Han (basic, extension A, compatibility, extensions B+), Hiragana, Katakana
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\U00020000-\U0002ffff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
# a "word" outside CJK runs: letters and digits (unicode61 splits the same way)
_WORD = re.compile(rf"[^\W_{_CJK}]+", re.UNICODE)
_WORD_OR_GRAM = re.compile(r"[^\W_]+", re.UNICODE)

# Common English function words: left out of a query so that "what does the user drink"
# ranks by "drink", not by every memory that says "the". Never removed from the index.
STOPWORDS = frozenset(
    "a an and are as at be been but by can could do does did for from had has have how i if in "
    "into is it its me my of on or our should so than that the their them then there these they "
    "this to was we were what when where which who whom why will with would you your".split())


def _pairs(run: str) -> list[str]:
    return [run[i:i + 2] for i in range(len(run) - 1)] if len(run) > 1 else [run]


def segment(text: str) -> str:
    """The copy of ``text`` that the keyword index stores: NFKC-normalised, every CJK run
    replaced by its characters and its overlapping pairs, separated by spaces."""
    text = unicodedata.normalize("NFKC", text)

    def split(m: re.Match) -> str:
        run = m.group(0)
        grams = list(run) + (_pairs(run) if len(run) > 1 else [])
        return " " + " ".join(grams) + " "

    return _CJK_RUN.sub(split, text)


def terms(text: str) -> list[str]:
    """A query's search terms, lowercase, each once, in the order they occur: CJK pairs (a
    lone character stays single) and the other words except English stopwords (all of them
    if the query has nothing else)."""
    text = unicodedata.normalize("NFKC", text).lower()
    found: list[tuple[str, bool]] = []  # (term, is an English-style word)
    pos = 0
    for m in _CJK_RUN.finditer(text):
        found += [(w, True) for w in _WORD.findall(text[pos:m.start()])]
        found += [(p, False) for p in _pairs(m.group(0))]
        pos = m.end()
    found += [(w, True) for w in _WORD.findall(text[pos:])]
    kept = [t for t, word in found if not (word and t in STOPWORDS)] or [t for t, _ in found]
    return list(dict.fromkeys(kept))


def stem(word: str) -> str:
    """A light English stem for comparing terms ("prefers", "preferred" -> "prefer"); the
    FTS index itself uses Porter's."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[:-len(suffix)]
    return word


def term_set(text: str) -> set[str]:
    """What a memory's text offers to a query's :func:`terms`: its CJK characters and
    pairs, and its words, lowercase and stemmed."""
    return {stem(t) for t in _WORD_OR_GRAM.findall(segment(text).lower())}


def fts5_query(query_terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: the terms ORed, each quoted, so that nothing in a user's
    query (``AND``, ``-``, ``*``, ``"``, ``NEAR``) is read as query syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query_terms)


def estimate_tokens(text: str) -> int:
    """A model-independent estimate, on the high side for the tokenizers tao meets (Qwen,
    Llama 3, OpenAI cl100k/o200k): one token per CJK character, plus one per four other
    characters (rounded up). Pass a real tokenizer's counter where exactness matters."""
    cjk = len(_CJK_CHAR.findall(text))
    rest = len(text) - cjk
    return cjk + (rest + 3) // 4


def truncate(text: str, max_tokens: int, count: Callable[[str], int] = estimate_tokens) -> str:
    """The longest prefix of ``text`` that fits ``max_tokens`` with a closing "…" (cut at a
    space where one is near), or "" if not even that fits."""
    if count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on the prefix length: count() need not be additive
        mid = (lo + hi + 1) // 2
        if count(text[:mid].rstrip() + "…") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return ""
    cut = text[:lo]
    space = cut.rfind(" ")
    if space > lo * 0.8:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _near_duplicate(a: set[str], b: set[str]) -> bool:
    return bool(a and b) and len(a & b) / len(a | b) >= 0.8


def compress(items: Iterable[Any], max_tokens: int, *,
             count: Callable[[str], int] = estimate_tokens,
             line: str = "- {text}") -> list[Any]:
    """The items (:class:`~tao.memory.MemoryItem` or any dataclass with ``text``), best
    first, that fit ``max_tokens`` once each is written as ``line``:
    an item whose text equals, contains or is contained in one already kept, or shares 80% of
    its terms with one (Jaccard), is dropped; the first item that does not fit is cut (with
    "…") if at least 16 tokens of room are left, and nothing after it is kept."""
    if not isinstance(max_tokens, int) or max_tokens < 0:
        raise ValueError(f"max_tokens must be a non-negative integer, not {max_tokens!r}")
    kept: list[Any] = []
    seen: list[tuple[str, set[str]]] = []
    used = 0
    for item in items:
        norm = " ".join(unicodedata.normalize("NFKC", item.text).casefold().split())
        tset = term_set(item.text)
        if any(norm in s or s in norm or _near_duplicate(tset, t) for s, t in seen):
            continue
        cost = count(line.format(text=item.text)) + (1 if kept else 0)  # + the newline
        if used + cost <= max_tokens:
            kept.append(item)
            used += cost
            seen.append((norm, tset))
            continue
        room = max_tokens - used - (1 if kept else 0) - count(line.format(text=""))
        if room >= 16:
            cut = truncate(item.text, room, count)
            if cut:
                kept.append(replace(item, text=cut))
        break
    return kept
