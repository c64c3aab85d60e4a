"""Documents as lines with their numbers (Markdown, text, HTML, PDF), cut into overlapping
chunks that remember each line's number: what ``tao.memory.rag`` indexes, so that a passage
cites the line its words are on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from .text import estimate_tokens

SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "text",
            ".html": "html", ".htm": "html", ".pdf": "pdf"}
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)")
_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s*")


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    line: int | str  # the first line of the chunk (a PDF: "pN")
    end: int | str
    lines: tuple[int | str, ...] = ()  # the line of each line of text after the heading path



# -- reading ------------------------------------------------------------------------------
class _HTMLText(HTMLParser):
    """The visible text of an HTML page as (line, text) pieces: each block element's text, by
    the source lines it spans, so a passage cites the line its words are on."""

    BLOCKS = {"p", "div", "li", "tr", "br", "h1", "h2", "h3", "h4", "h5", "h6", "section",
              "article", "pre", "blockquote", "dt", "dd", "td", "th"}
    SKIP = {"script", "style", "title", "noscript", "template"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[tuple[int, str]] = []
        self._buf: list[tuple[int, str]] = []
        self._skip = 0
        self._heading = 0

    def _flush(self) -> None:
        lines: dict[int, str] = {}
        for start, data in self._buf:
            for j, part in enumerate(data.split("\n")):
                lines[start + j] = lines.get(start + j, "") + part
        first = True
        for n in sorted(lines):
            text = " ".join(lines[n].split())
            if text:
                mark = "#" * self._heading + " " if self._heading and first else ""
                self.pieces.append((n, mark + text))
                first = False
        self._buf = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.SKIP:
            self._skip += 1
        if tag in self.BLOCKS:
            self._flush()
            self._heading = int(tag[1]) if re.fullmatch(r"h[1-6]", tag) else 0

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self._skip:
            self._skip -= 1
        if tag in self.BLOCKS:
            self._flush()
            self._heading = 0

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._buf.append((self.getpos()[0], data))


def read_lines(path: Path) -> list[tuple[int | str, str]]:
    """The file's text as (line, text) pairs; a PDF's lines are labelled with their page."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind == "pdf":
        try:
            from pypdf import PdfReader
        except ImportError:
            raise ImportError("reading PDF needs pypdf: pip install 'pypdf==7.1.1'") from None
        out: list[tuple[int | str, str]] = []
        for n, page in enumerate(PdfReader(str(path)).pages, 1):
            out += [(f"p{n}", line) for line in (page.extract_text() or "").splitlines()]
        return out
    text = path.read_text(encoding="utf-8", errors="replace")
    if kind == "html":
        parser = _HTMLText()
        parser.feed(text)
        parser.close()
        parser._flush()
        return list(parser.pieces)
    return [(i, line) for i, line in enumerate(text.splitlines(), 1)]


# -- chunking -----------------------------------------------------------------------------
def _pieces(lines: list[tuple[int | str, str]], limit: int) -> Iterator[tuple[int | str, str]]:
    """Lines, a line longer than ``limit`` tokens split at its sentences (then hard)."""
    for n, line in lines:
        if estimate_tokens(line) <= limit:
            yield n, line
            continue
        part = ""
        for s in _SENTENCE.split(line):
            while estimate_tokens(s) > limit:  # a sentence too long on its own
                cut = max(1, len(s) * limit // max(1, estimate_tokens(s)))
                if part:
                    yield n, part
                    part = ""
                yield n, s[:cut]
                s = s[cut:]
            if part and estimate_tokens(part + " " + s) > limit:
                yield n, part
                part = ""
            part = f"{part} {s}".strip() if part else s
        if part:
            yield n, part


def chunk(lines: list[tuple[int | str, str]], chunk_tokens: int = 200,
          overlap_tokens: int = 40) -> list[Chunk]:
    """Chunks of about ``chunk_tokens``; each starts with the last ``overlap_tokens`` of the
    one before (whole lines), and a Markdown heading starts a new chunk. A chunk under a
    heading begins with that heading path, so that it is found by what its section is about."""
    if overlap_tokens >= chunk_tokens:
        raise ValueError("overlap_tokens must be less than chunk_tokens")
    chunks: list[Chunk] = []
    heads: list[str] = []
    cur: list[tuple[int | str, str]] = []
    size = 0

    def emit() -> None:
        body = [t for _, t in cur if t.strip()]
        if body and not all(_HEADING.match(t) for t in body):
            own = bool(heads) and _HEADING.match(body[0]) is not None  # starts at its heading
            path = " > ".join(heads[:-1] if own else heads)
            text = "\n".join(body)
            if path:
                text = f"[{path}]\n{text}"
            chunks.append(Chunk(text, cur[0][0], cur[-1][0],
                                tuple(n for n, t in cur if t.strip())))

    for n, line in _pieces(lines, chunk_tokens - overlap_tokens):
        h = _HEADING.match(line)
        if h:
            emit()
            level = len(h.group(1))
            heads[:] = heads[:level - 1] + [h.group(2)]
            cur, size = [(n, line)], estimate_tokens(line)
            continue
        cost = estimate_tokens(line) + 1
        if cur and size + cost > chunk_tokens and any(t.strip() for _, t in cur):
            emit()
            keep: list[tuple[int | str, str]] = []
            kept = 0
            for item in reversed(cur):
                c = estimate_tokens(item[1]) + 1
                if kept + c > overlap_tokens:
                    break
                keep.insert(0, item)
                kept += c
            cur, size = keep, kept
        if not cur and not line.strip():
            continue
        cur.append((n, line))
        size += cost
    emit()
    return chunks


__all__ = ["SUFFIXES", "Chunk", "chunk", "read_lines"]
