"""What tao.memory.MemoryStore costs and how well it finds things, on 200 facts of our own
(benchmarks/data/memory_facts.jsonl: 100 English, 100 Chinese - preferences, people, project
facts, lessons; many Chinese facts say what an English one says, which makes the other
language's twin a hard distractor).

Each fact has one paraphrased query (other words, same meaning: "What hot drink does Ana start
her day with?" for "Ana drinks green tea every morning and avoids coffee.") and 97 Chinese facts
a two-character word of theirs as a query ("绿茶"). A query counts as found when its own fact
is in the top 5 (recall@5); a fact's translation does not count.

Reported: add() latency (the first add loads the embedder and is shown apart), recall@5 per
query kind for the default ranking and for each part alone (vector only, keyword only, RRF
without the rerank), MRR@10 and recall@1, search latency; then search latency with 10,000
more rows (random vectors, texts of words drawn from the facts) on sqlite-vec and on the numpy
fallback; the keyword index chosen against a trigram one; and with --pg, the same on
PostgreSQL + pgvector (a pgserver started in a temporary folder).

Also adds per second with 4 processes writing one store at once (SQLite; PostgreSQL with --pg).

    python benchmarks/memory_store.py [--pg] [--scale 10000] [--procs 4]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tao.memory.store as store_module
from tao.memory import MemoryStore, USEEmbedder
from tao.memory.text import segment

DATA = Path(__file__).parent / "data" / "memory_facts.jsonl"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def ms(v: float) -> str:
    return f"{v * 1000:.1f}"


def load(store: MemoryStore, facts: list[dict]) -> tuple[dict[str, int], list[float]]:
    ids, times = {}, []
    for f in facts:
        t = time.perf_counter()
        ids[f["id"]] = store.add(f["text"], lang=f["lang"]).id
        times.append(time.perf_counter() - t)
    return ids, times


def queries(facts: list[dict], ids: dict[str, int]) -> list[tuple[str, int, str]]:
    out = [(f["paraphrase"], ids[f["id"]], f"paraphrase {f['lang']}") for f in facts]
    out += [(f["word"], ids[f["id"]], "2-char zh word") for f in facts if "word" in f]
    return out


def evaluate(search, qs) -> tuple[dict[str, float], float, float, list[float]]:
    """recall@5 by kind (and "all"), MRR@10, recall@1, per-query seconds."""
    found: dict[str, list[bool]] = {}
    rr, times = [], []
    for q, target, kind in qs:
        t = time.perf_counter()
        ranked = search(q)
        times.append(time.perf_counter() - t)
        rank = ranked.index(target) + 1 if target in ranked else None
        found.setdefault(kind, []).append(rank is not None and rank <= 5)
        rr.append(1 / rank if rank else 0.0)
    recall = {k: sum(v) / len(v) for k, v in found.items()}
    recall["all"] = sum(sum(v) for v in found.values()) / len(qs)
    return recall, statistics.mean(rr), sum(r == 1 for r in rr) / len(rr), times


def ranking_table(store: MemoryStore, kw_store: MemoryStore, qs) -> list[tuple]:
    def hybrid(q):
        return [i.id for i in store.search(q, k=10)]

    def vector_only(q):
        qv = store._embed([q])[0]
        return [i for i, _ in store._db.nearest(qv, 10, {})]

    def keyword_only(q):
        return [i.id for i in kw_store.search(q, k=10)]

    def rrf_only(q):
        store_module.RERANK = False
        try:
            return hybrid(q)
        finally:
            store_module.RERANK = True

    rows = []
    for name, fn in [("hybrid: RRF + rerank (default)", hybrid), ("RRF, no rerank", rrf_only),
                     ("vector only", vector_only), ("keyword only", keyword_only)]:
        recall, mrr, r1, times = evaluate(fn, qs)
        rows.append((name, recall, mrr, r1, times))
    return rows


def print_ranking(title: str, rows: list[tuple]) -> None:
    kinds = ["paraphrase en", "paraphrase zh", "2-char zh word", "all"]
    print(f"\n{title}\n{'ranking':32} " + " ".join(f"{k:>14}" for k in kinds)
          + f" {'MRR@10':>7} {'R@1':>6} {'p50 ms':>7} {'p95 ms':>7}")
    for name, recall, mrr, r1, times in rows:
        print(f"{name:32} " + " ".join(f"{recall[k]:>14.3f}" for k in kinds)
              + f" {mrr:>7.3f} {r1:>6.3f} {ms(pct(times, 50)):>7} {ms(pct(times, 95)):>7}")


def print_adds(label: str, times: list[float]) -> None:
    rest = times[1:]
    print(f"{label:32} first {ms(times[0]):>7} ms   p50 {ms(pct(rest, 50)):>6} ms   "
          f"p95 {ms(pct(rest, 95)):>6} ms   max {ms(max(rest)):>6} ms   (n={len(rest)})")


def fill(store: MemoryStore, n: int, facts: list[dict], seed: int = 7) -> None:
    """``n`` more rows written straight through the backend: random unit vectors (so the
    embedder's cost stays out) and :func:`filler_texts`."""
    import numpy as np

    texts = filler_texts(facts, n, seed)
    vecs = np.random.default_rng(seed).standard_normal((n, store._embedder.dim))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype("float32")
    for i, text in enumerate(texts):
        digest = hashlib.sha256(text.encode()).hexdigest()
        store._db.insert(text, segment(text), '{"kind":"filler"}', time.time(), digest, vecs[i])


def filler_texts(facts: list[dict], n: int, seed: int = 7) -> list[str]:
    """8-14 "words" drawn from the facts (a Chinese fact's clause is one word: the filler
    repeats whole clauses of the facts, a hard distractor for keyword search)."""
    rng = random.Random(seed)
    vocab = [w for f in facts for w in f["text"].replace("，", " ").split()]
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(8, 14))) + f" #{i}"
            for i in range(n)]


def keyword_choice(facts: list[dict], filler: int) -> None:
    """The keyword index chosen (FTS5 unicode61 over the CJK-segmented copy) against the other
    candidate, an FTS5 trigram table with a LIKE scan for queries under 3 characters (trigram
    cannot match them), keyword search alone; filler rows first, so that LIKE's row order
    does not favour the facts."""
    import re

    from tao.memory.sqlite import _TOKENIZE, _driver
    from tao.memory.text import fts5_query, terms

    print(f"\nkeyword index alone: recall@5 (p50 ms), {len(facts)} facts after N filler rows")
    print(f"{'index':28} {'N':>6} {'2-char zh word':>16} {'paraphrase':>16}")
    for n in (0, filler):
        db = _driver().connect(":memory:")
        db.execute(f"CREATE VIRTUAL TABLE seg USING fts5(body, tokenize='{_TOKENIZE}')")
        db.execute("CREATE VIRTUAL TABLE tri USING fts5(body, tokenize='trigram')")
        texts = filler_texts(facts, n) + [f["text"] for f in facts]
        for i, t in enumerate(texts, 1):
            db.execute("INSERT INTO seg (rowid, body) VALUES (?, ?)", (i, segment(t)))
            db.execute("INSERT INTO tri (rowid, body) VALUES (?, ?)", (i, t))

        def seg(q):
            return [r[0] for r in db.execute("SELECT rowid FROM seg WHERE seg MATCH ? "
                                             "ORDER BY bm25(seg) LIMIT 5", (fts5_query(terms(q)),))]

        def tri(q):
            if len(q.strip()) < 3:
                return [r[0] for r in db.execute("SELECT rowid FROM tri WHERE body LIKE ? "
                                                 "LIMIT 5", (f"%{q}%",))]
            grams = {w[i:i + 3] for w in re.findall(r"\w+", q.lower()) for i in range(len(w) - 2)}
            return [r[0] for r in db.execute("SELECT rowid FROM tri WHERE tri MATCH ? ORDER BY "
                                             "bm25(tri) LIMIT 5", (fts5_query(grams),))]

        for name, fn in (("unicode61 + CJK pairs (used)", seg),
                         ("trigram, LIKE under 3 chars", tri)):
            cells = []
            for field in ("word", "paraphrase"):
                hits, times = [], []
                for k, f in enumerate(facts, n + 1):
                    if field in f:
                        t = time.perf_counter()
                        hits.append(k in fn(f[field]))
                        times.append(time.perf_counter() - t)
                cells.append(f"{sum(hits) / len(hits):.3f} ({ms(pct(times, 50))})")
            print(f"{name:28} {n:>6} {cells[0]:>16} {cells[1]:>16}")
        db.close()


def scale_rows(path: Path, use, qs) -> list[tuple[str, float, float, float, float]]:
    out = []
    for backend in ("sqlite-vec", "numpy"):
        if backend == "numpy":
            sys.modules["sqlite_vec"] = None  # as if not installed
        try:
            s = MemoryStore(path, embedder=use)
            assert s.vector_backend == backend, s.vector_backend
            recall, _, _, times = evaluate(lambda q: [i.id for i in s.search(q, k=10)], qs)
            filt = []
            for q, _, _ in qs[:60]:
                t = time.perf_counter()
                s.search(q, k=5, lang="zh")
                filt.append(time.perf_counter() - t)
            out.append((backend, recall["all"], pct(times, 50), pct(times, 95), pct(filt, 50)))
            s.close()
        finally:
            sys.modules.pop("sqlite_vec", None)
    return out


def _writer(target: str, table: str, proc: int, n: int, start, out) -> None:
    s = MemoryStore(target, embedder=False, table=table) if target.startswith("postgres") \
        else MemoryStore(target, embedder=False)
    start.wait()
    t = time.perf_counter()
    for i in range(n):
        s.add(f"process {proc} writes memory number {i} 进程{proc}的第{i}条记忆", proc=proc)
    out.put(time.perf_counter() - t)
    s.close()


def concurrent_adds(target: str, procs: int, n: int, table: str = "bench_procs") -> float:
    """Adds per second with ``procs`` processes writing one store at once (no embedder: the
    store's cost, not the model's), counted from when all are ready until the last is done."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(procs + 1), ctx.Queue()
    workers = [ctx.Process(target=_writer, args=(target, table, p, n, start, out))
               for p in range(procs)]
    for w in workers:
        w.start()
    start.wait()
    t = time.perf_counter()
    [out.get() for _ in workers]
    wall = time.perf_counter() - t
    for w in workers:
        w.join()
    check = MemoryStore(target, embedder=False, table=table) if target.startswith("postgres") \
        else MemoryStore(target, embedder=False)
    assert len(check) == procs * n, (len(check), procs * n)
    check.close()
    return procs * n / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", action="store_true", help="also PostgreSQL + pgvector (pgserver)")
    ap.add_argument("--scale", type=int, default=10_000, help="rows added for the scale run")
    ap.add_argument("--procs", type=int, default=4, help="processes adding at once")
    ap.add_argument("--dir", default=".", help="where the SQLite files go (a real disk)")
    args = ap.parse_args()
    facts = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    folder = Path(tempfile.mkdtemp(prefix="tao-memory-bench-", dir=args.dir))
    print(f"{len(facts)} facts; store files in {folder}")

    use = USEEmbedder()
    t = time.perf_counter()
    s = MemoryStore(folder / "facts.sqlite3", embedder=use)
    opened = time.perf_counter() - t
    ids, add_times = load(s, facts)
    print(f"\nadd() on SQLite ({s.vector_backend}); opening the store took {ms(opened)} ms")
    print_adds("add(), embedder USE", add_times)
    kw = MemoryStore(folder / "keyword.sqlite3", embedder=False)
    _, kw_times = load(kw, facts)
    print_adds("add(), embedder=False", kw_times)
    qs = queries(facts, ids)
    kw.close()
    kw = MemoryStore(folder / "facts.sqlite3", embedder=False)
    print_ranking(f"recall@5 on SQLite, {len(qs)} queries", ranking_table(s, kw, qs))
    s.close()

    keyword_choice(facts, args.scale)

    lite_rate = concurrent_adds(str(folder / "procs.sqlite3"), args.procs, 200)
    print(f"\n{args.procs} processes adding to one SQLite store at once: {lite_rate:.0f} adds/s "
          f"(WAL, synchronous=NORMAL, embedder=False)")

    big = folder / "scale.sqlite3"
    with MemoryStore(big, embedder=use) as b:
        ids_b, _ = load(b, facts)
        fill(b, args.scale, facts)
        n = len(b)
    print(f"\nsearch with {n} rows (the facts + {args.scale} filler), default ranking")
    print(f"{'vectors':12} {'recall@5':>9} {'p50 ms':>7} {'p95 ms':>7} {'p50 ms lang=zh':>15}")
    for backend, recall, p50, p95, f50 in scale_rows(big, use, queries(facts, ids_b)):
        print(f"{backend:12} {recall:>9.3f} {ms(p50):>7} {ms(p95):>7} {ms(f50):>15}")

    if args.pg:
        import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="tao-pg-"), cleanup_mode="delete")
        try:
            pg = MemoryStore(server.get_uri(), embedder=use, table="bench_facts")
            ids_pg, pg_times = load(pg, facts)
            print("\nPostgreSQL + pgvector (pgserver, one connection, Unix socket)")
            print_adds("add(), embedder USE", pg_times)
            pkw = MemoryStore(server.get_uri(), embedder=False, table="bench_facts")
            qs_pg = queries(facts, ids_pg)
            print_ranking("recall@5 on PostgreSQL", ranking_table(pg, pkw, qs_pg))
            t = time.perf_counter()
            fill(pg, args.scale, facts)
            filled = time.perf_counter() - t
            recall, _, _, times = evaluate(lambda q: [i.id for i in pg.search(q, k=10)], qs_pg)
            print(f"\nwith {len(pg)} rows ({args.scale} filler written in {filled:.0f} s, HNSW "
                  f"index): recall@5 {recall['all']:.3f}, search p50 {ms(pct(times, 50))} ms, "
                  f"p95 {ms(pct(times, 95))} ms")
            pg.close()
            pkw.close()
            rate = concurrent_adds(server.get_uri(), args.procs, 200)
            print(f"\n{args.procs} processes adding to one PostgreSQL table at once: "
                  f"{rate:.0f} adds/s (one connection each, embedder=False)")
        finally:
            server.cleanup()


if __name__ == "__main__":
    main()
