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
A passage's source is ``file:line`` (a PDF's ``file:pN``, its page): the tool shows it before
every line and asks the model to cite it; :func:`cite` finds the line an answer was read from
in what the tool showed, for a model that does not (``cite(result.answer, observations)``).
Reading and chunking: ``tao.memory.chunks``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import prompts
from .chunks import SUFFIXES, Chunk, chunk, read_lines
from .text import stem, term_set, terms

_LABELLED = re.compile(r"^\[(?P<source>[^\[\]\n]+:p?\d+)\] (?P<text>.+)$", re.M)


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

    def tool(self, name: str = "search_docs", language: str | None = None) -> Any:
        """A tool any agent can use: the best passages for a query, each with its source. Its
        description is in ``language`` ("zh" or "en"), by default in both, for users of both.
        (That did not make the 1.5B search more often before Chinese answers: it skipped the
        search on 4 of 13 with the English description and on 7 of 17 with both;
        benchmarks/rag_eval.py, BENCHMARKS.md.)"""
        from ..tools.base import FunctionTool

        t = prompts.table("memory")

        def search_docs(query: str, k: int = 5) -> str:
            lang = "zh" if re.search(r"[\u4e00-\u9fff]", query) else "en"
            hits = self.search(query, k=max(1, min(int(k), 10)))
            if not hits:
                return prompts.render(t[lang]["no_docs"], query=query)
            shown = "\n\n".join(h.shown() for h in hits)
            return shown + "\n\n" + prompts.render(t[lang]["cite"], source=hits[0].source)

        description = t[language]["search_docs"] if language in ("zh", "en") else \
            f'{t["en"]["search_docs"]} {t["zh"]["search_docs"]}'
        return FunctionTool(search_docs, name=name, description=description)

    def close(self) -> None:
        self.store.close()


def cite(answer: str, shown: Iterable[str]) -> str | None:
    """The ``file:line`` of the line, among those ``search_docs`` showed (its observations),
    that ``answer`` was most likely read from: the most of the answer's terms, a number
    counting three times; ``None`` when no line shares a number or three terms with it. For a
    model that answers from the passages but does not cite them (the embedded 1.5B never did)."""
    want = {stem(t) for t in terms(answer or "")}
    numbers = {t for t in want if any(c.isdigit() for c in t)}
    best, best_score = None, 0
    for text in shown:
        for m in _LABELLED.finditer(text):
            score = sum(3 if t in numbers else 1 for t in want & term_set(m["text"]))
            if score > best_score:
                best, best_score = m["source"], score
    return best if best_score >= 3 else None


__all__ = ["SUFFIXES", "Chunk", "DocIndex", "Hit", "chunk", "cite", "read_lines"]
