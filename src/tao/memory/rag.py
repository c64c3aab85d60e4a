"""RAG over your own documents: ``tao index DIR``, the ``search_docs`` tool, ``tao run --docs``.

    from tao.memory.rag import DocIndex

    docs = DocIndex.for_dir("handbook/")          # <data dir>/docs/<name>-<hash>.sqlite3
    docs.update()                                 # new and changed files only
    for hit in docs.search("how many vacation days?", k=5):
        print(hit.source, hit.score)              # handbook/leave.md:12  0.61
    ReActAgent(model, [docs.tool()]).run("How many vacation days do I get?")

Markdown, text, HTML and PDF (``pypdf``) files are read with their line numbers, cut into
chunks of about ``chunk_tokens`` with ``overlap_tokens`` carried over from the chunk before (so a
fact cut in two is whole in one of them), a Markdown chunk prefixed with its heading path, and
stored in a ``MemoryStore`` (the same hybrid keyword + vector search) with ``file`` and ``line``.
A passage's source is ``file:line`` (a PDF's ``file:pN``, its page), which the tool shows and
asks the model to cite.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from .. import prompts
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


@dataclass(frozen=True, slots=True)
class Hit:
    text: str
    file: str
    line: int | str
    end: int | str
    score: float
    lines: tuple[int | str, ...] = ()

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"

    def shown(self) -> str:
        """The passage as ``search_docs`` shows it: each line after its own ``[file:line]``, so
        the source a model copies is the line it read the fact on (an index written before
        lines were kept: one label for the passage)."""
        body = self.text.split("\n")
        head = body.pop(0)[1:-1] if len(body) == len(self.lines) + 1 else None
        if len(body) != len(self.lines):
            return f"[{self.source}] {self.text}"
        out = [f"{self.file} · {head}"] if head else []
        return "\n".join([*out, *(f"[{self.file}:{n}] {t}" for n, t in zip(self.lines, body))])


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


# -- the index ----------------------------------------------------------------------------
def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class DocIndex:
    """The chunks of the documents under ``root``, in the ``MemoryStore`` at ``path``."""

    def __init__(self, root: str | Path, path: str | Path, *, embedder: Any = None,
                 chunk_tokens: int = 200, overlap_tokens: int = 40):
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise FileNotFoundError(f"no directory {root}")
        from .inject import open_store
        from .store import MemoryStore

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.store = open_store(path) if embedder is None else MemoryStore(path, embedder=embedder)
        self.path = Path(path)
        self.chunk_tokens, self.overlap_tokens = chunk_tokens, overlap_tokens

    @classmethod
    def for_dir(cls, root: str | Path, **kwargs: Any) -> DocIndex:
        """The index of ``root`` in the user data directory (one file per directory)."""
        from .store import default_path

        resolved = Path(root).resolve()
        key = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
        path = default_path().parent / "docs" / f"{resolved.name}-{key}.sqlite3"
        return cls(root, path, **kwargs)

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*")
                      if p.is_file() and p.suffix.lower() in SUFFIXES
                      and not any(part.startswith(".") for part in p.relative_to(self.root).parts))

    def update(self, rebuild: bool = False) -> dict[str, Any]:
        """Index new and changed files, forget removed ones; what was done, and the files that
        could not be read (with why) - one bad file does not stop the rest."""
        held: dict[str, tuple[str, list[int]]] = {}
        for item in self.store.all(kind="doc"):
            digest, ids = held.get(item["file"], (item["digest"], []))
            held[item["file"]] = (digest, [*ids, item.id])
        done = {"files": 0, "chunks": 0, "unchanged": 0, "removed": 0, "failed": {}}
        present = set()
        for path in self.files():
            rel = path.relative_to(self.root).as_posix()
            present.add(rel)
            try:
                digest = _digest(path)
                if not rebuild and rel in held and held[rel][0] == digest:
                    done["unchanged"] += 1
                    continue
                chunks = chunk(read_lines(path), self.chunk_tokens, self.overlap_tokens)
            except Exception as e:  # noqa: BLE001 - a broken PDF, a file gone: said; the rest go on
                done["failed"][rel] = f"{type(e).__name__}: {e}"
                continue
            for item_id in held.get(rel, ("", []))[1]:
                self.store.delete(item_id)
            for c in chunks:
                self.store.add(c.text, kind="doc", file=rel, line=c.line, end=c.end,
                               lines=list(c.lines), digest=digest)
            done["files"] += 1
            done["chunks"] += len(chunks)
        for rel in set(held) - present:
            for item_id in held[rel][1]:
                self.store.delete(item_id)
            done["removed"] += 1
        return done

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return [Hit(i.text, i["file"], i["line"], i.get("end", i["line"]), i.score or 0.0,
                    tuple(i.get("lines") or ())) for i in self.store.search(query, k=k, kind="doc")]

    def tool(self, name: str = "search_docs") -> Any:
        """A tool any agent can use: the best passages for a query, each with its source."""
        from ..tools.base import FunctionTool

        t = prompts.table("memory")

        def search_docs(query: str, k: int = 5) -> str:
            lang = "zh" if re.search(r"[\u4e00-\u9fff]", query) else "en"
            hits = self.search(query, k=max(1, min(int(k), 10)))
            if not hits:
                return prompts.render(t[lang]["no_docs"], query=query)
            shown = "\n\n".join(h.shown() for h in hits)
            return shown + "\n\n" + prompts.render(t[lang]["cite"], source=hits[0].source)

        return FunctionTool(search_docs, name=name, description=t["en"]["search_docs"])

    def close(self) -> None:
        self.store.close()


__all__ = ["Chunk", "DocIndex", "Hit", "chunk", "read_lines"]
