"""RAG on benchmarks/data/docs (32 documents, zh + en: Markdown, text, HTML, one PDF) with the
68 questions of benchmarks/data/rag_questions.jsonl, each with the file and the fact that
answers it.

    python benchmarks/rag_eval.py                   # retrieval: recall@1/@5, MRR (no model)
    flock /tmp/tao-model.lock python benchmarks/rag_eval.py --answers 20   # + the embedded model
    flock /tmp/tao-model.lock python benchmarks/rag_eval.py --answers 25 --offset 25 --rows r.jsonl
    python benchmarks/rag_eval.py --summarize r.jsonl                      # chunks added up

A question is retrieved when one of the top 5 passages is from its file and its line range holds
the line of the fact (a PDF: the page). ``--answers N``: ReAct on the embedded model with the
``search_docs`` tool answers the first N questions (en and zh in turn; ``--model``: the 1.5B
by default); an answer is
correct when it contains the expected value, and cites when it names the right file with a
line (``cited_line``: the fact's own line). ``--keyword`` runs the retrieval without vectors too, to show what they add.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE / "data" / "docs"
QUESTIONS = HERE / "data" / "rag_questions.jsonl"


def fact_line(file: str, fact: str) -> int | str:
    path = DOCS / file
    if path.suffix == ".pdf":
        from pypdf import PdfReader

        for n, page in enumerate(PdfReader(str(path)).pages, 1):
            if fact in (page.extract_text() or ""):
                return f"p{n}"
        raise ValueError(f"{fact!r} not in {file}")
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if fact in line:
            return n
    raise ValueError(f"{fact!r} not in {file}")


def covers(hit, file: str, line: int | str) -> bool:
    if hit.file != file:
        return False
    if isinstance(line, str) or isinstance(hit.line, str):
        return hit.line == line
    return hit.line <= line <= hit.end


def retrieval(index, questions: list[dict]) -> dict:
    ranks, took = [], []
    for q in questions:
        t = time.perf_counter()
        hits = index.search(q["question"], k=5)
        took.append(time.perf_counter() - t)
        line = fact_line(q["file"], q["fact"])
        ranks.append(next((r for r, h in enumerate(hits, 1) if covers(h, q["file"], line)), None))

    def recall(qs, k):
        rs = [r for q, r in zip(questions, ranks) if q in qs]
        return round(sum(1 for r in rs if r is not None and r <= k) / len(rs), 3)

    zh = [q for q in questions if any("\u4e00" <= c <= "\u9fff" for c in q["question"])]
    en = [q for q in questions if q not in zh]
    return {"questions": len(questions), "recall@1": recall(questions, 1),
            "recall@5": recall(questions, 5), "recall@5_en": recall(en, 5),
            "recall@5_zh": recall(zh, 5),
            "mrr": round(sum(1 / r for r in ranks if r) / len(ranks), 3),
            "search_ms_median": round(statistics.median(took) * 1000, 1),
            "missed": [q["question"] for q, r in zip(questions, ranks) if not r or r > 5]}


def interleaved(questions: list[dict]) -> list[dict]:
    """en, zh, en, zh...: any prefix (``--answers N``) and any slice (``--offset``) holds both."""
    zh = [q for q in questions if any("\u4e00" <= c <= "\u9fff" for c in q["question"])]
    en = [q for q in questions if q not in zh]
    out = [q for pair in zip(en, zh) for q in pair]
    return out + [q for q in questions if q not in out]


def answers(index, questions: list[dict], n: int, offset: int = 0, model_spec: str = "local",
            rows_file: Path | None = None) -> dict:
    from tao import ReActAgent
    from tao.memory.rag import cite
    from tao.models.resolve import resolve_model

    model = resolve_model(model_spec)
    picked = interleaved(questions)[offset:offset + n]
    rows = []
    t0 = time.perf_counter()
    for q in picked:
        t = time.perf_counter()
        result = ReActAgent(model, [index.tool()], max_turns=4).run(q["question"])
        answer = result.answer or ""
        queries = [c.arguments.get("query") for m in result.messages if m.role == "assistant"
                   for c in (m.tool_calls or ())]
        rows.append({"question": q["question"], "expected": q["answer"], "file": q["file"],
                     "fact": q["fact"],
                     "answer": answer[:300], "correct": q["answer"].casefold() in answer.casefold(),
                     "cited": f"{Path(q['file']).name}:" in answer or f"{q['file']}:" in answer,
                     "cited_line": cites_line(answer, q["file"], fact_line(q["file"], q["fact"])),
                     "status": result.status, "turns": result.turns, "queries": queries,
                     "error": result.error, "model": model.name,
                     "observations": [m.content for m in result.messages if m.role == "tool"],
                     "attributed": cite(answer, [m.content for m in result.messages
                                                 if m.role == "tool"]),
                     "seconds": round(time.perf_counter() - t, 1)})
        print(json.dumps(rows[-1], ensure_ascii=False), file=sys.stderr, flush=True)
        if rows_file is not None:
            with rows_file.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rows[-1], ensure_ascii=False) + "\n")
    return summary(rows, time.perf_counter() - t0)


def cites_line(answer: str, file: str, line: int | str) -> bool:
    """Whether the answer cites the fact's own line (``file:N``; a PDF: its page)."""
    import re

    name = re.escape(Path(file).name)
    return any(m == str(line) for m in re.findall(rf"{name}:(p?\d+)", answer))


def backfill(row: dict, index, questions: list[dict]) -> dict:
    """A row written before rows kept the passages shown: its searches run again (search is
    deterministic over the same documents), and ``cite`` reads those."""
    if "attributed" in row:
        return row
    from tao.memory.rag import cite

    q = next(q for q in questions if q["question"] == row["question"])
    tool = index.tool()
    shown = [tool.fn(query) for query in row.get("queries") or () if isinstance(query, str)]
    return {**row, "fact": q["fact"], "observations": shown,
            "cited_line": cites_line(row["answer"], q["file"], fact_line(q["file"], q["fact"])),
            "attributed": cite(row["answer"], shown)}


def attributed(row: dict) -> bool:
    """Whether ``tao.memory.rag.cite`` finds the fact's own line for a correct answer."""
    source = row.get("attributed")
    return bool(row["correct"] and source) and cites_line(
        f"[{source}]", row["file"], fact_line(row["file"], row["fact"]))


def summary(rows: list[dict], seconds: float | None = None) -> dict:
    n = max(1, len(rows))
    return {"answered": len(rows), "accuracy": round(sum(r["correct"] for r in rows) / n, 3),
            "cited": round(sum(r["cited"] for r in rows) / n, 3),
            "cited_line": round(sum(r.get("cited_line", False) for r in rows) / n, 3),
            "attributed_line": round(sum(attributed(r) for r in rows) / n, 3),
            "seconds": round(seconds if seconds is not None
                             else sum(r["seconds"] for r in rows), 1), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=0, help="questions for the embedded model")
    ap.add_argument("--offset", type=int, default=0, help="skip the first N (runs in chunks)")
    ap.add_argument("--model", default="local", help="local (1.5B), local-0.5b, openai...")
    ap.add_argument("--rows", type=Path, help="append each answer's row to this JSONL file")
    ap.add_argument("--summarize", type=Path, nargs="+", metavar="ROWS",
                    help="only report the answers in these --rows files (no model)")
    ap.add_argument("--keyword", action="store_true", help="also retrieve without vectors")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from tao.memory.rag import DocIndex

    questions = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        kinds = [("hybrid", None)] + ([("keyword", False)] if args.keyword else [])
        for name, embedder in kinds:
            t = time.perf_counter()
            index = DocIndex(DOCS, Path(tmp) / f"{name}.sqlite3", embedder=embedder)
            done = index.update()
            out[name] = {"files": done["files"], "chunks": done["chunks"],
                         "failed": done["failed"],
                         "index_s": round(time.perf_counter() - t, 2), **retrieval(index, questions)}
            if name == "hybrid" and args.summarize:
                rows = [json.loads(line) for f in args.summarize
                        for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
                out["answers"] = summary([backfill(r, index, questions) for r in rows])
            if name == "hybrid" and args.answers:
                out["answers"] = answers(index, questions, args.answers, args.offset,
                                         args.model, args.rows)
            index.close()
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return
    for name in ("hybrid", "keyword"):
        if name in out:
            r = out[name]
            print(f"{name}: {r['files']} files, {r['chunks']} chunks, indexed in {r['index_s']} s; "
                  f"recall@1 {r['recall@1']}, recall@5 {r['recall@5']} (en {r['recall@5_en']}, "
                  f"zh {r['recall@5_zh']}), MRR {r['mrr']}, search {r['search_ms_median']} ms")
            for m in r["missed"]:
                print("   missed:", m)
            if r["failed"]:
                print("   failed:", r["failed"])
    if "answers" in out:
        a = out["answers"]
        print(f"answers (embedded model): {a['accuracy']} correct, {a['cited']} cite the file "
              f"({a['cited_line']} the fact's line; tao's cite() finds it for "
              f"{a['attributed_line']}), "
              f"{a['answered']} questions in {a['seconds']} s")
        for row in a["rows"]:
            print(f"   {'ok ' if row['correct'] else 'NO '}{'cite ' if row['cited'] else '     '}"
                  f"{row['question']} -> {row['answer']!r}"
                  + ("" if row["correct"] else f" (expected {row.get('expected')!r}, "
                     f"searched {row.get('queries')})"))


if __name__ == "__main__":
    sys.exit(main())
