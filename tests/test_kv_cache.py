"""The saved KV state of a prompt's fixed prefix (fast, no model): the key, atomic files, corrupt
files read as a miss, eviction, and how LocalModel decides what to evaluate, restore or keep."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tao.models import kv_cache, llama_engine as local
from tao.models.kv_cache import PrefixCache

PREFIX = list(range(100, 160))  # stands in for system prompt + tools + worked example


def cache(tmp_path, **kw) -> PrefixCache:
    return PrefixCache("sha256:abc|n_ctx=4096", tmp_path / "kv", **kw)


def test_the_key_is_the_model_context_and_exact_tokens(tmp_path):
    a = cache(tmp_path)
    assert a.key(PREFIX) == cache(tmp_path).key(list(PREFIX))
    assert a.key(PREFIX) != a.key([*PREFIX[:-1], 7])  # one token differs
    assert a.key(PREFIX) != a.key(PREFIX[:-1])
    assert a.key(PREFIX) != PrefixCache("sha256:abc|n_ctx=2048", None).key(PREFIX)
    assert a.key(PREFIX) != PrefixCache("sha256:def|n_ctx=4096", None).key(PREFIX)


def test_a_saved_prefix_is_found_by_the_next_process(tmp_path):
    cache(tmp_path).put(PREFIX, b"kv-bytes" * 100)
    files = list((tmp_path / "kv").iterdir())
    assert [f.suffix for f in files] == [".kv"]  # one file, no temporary left behind
    fresh = cache(tmp_path)  # nothing in memory: read from the file
    assert fresh.has(PREFIX) and not fresh.has(PREFIX[:-1])
    snap = fresh.get(PREFIX)
    assert snap.tokens.tolist() == PREFIX and snap.state == b"kv-bytes" * 100
    assert (fresh.hits, fresh.misses) == (1, 0)
    assert fresh.get(PREFIX[:10]) is None and fresh.misses == 1


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "garbage", "empty", "bad header"])
def test_a_corrupt_file_is_a_miss_and_is_rewritten(tmp_path, damage):
    cache(tmp_path).put(PREFIX, b"\x01\x02" * 500)
    (path,) = (tmp_path / "kv").iterdir()
    data = path.read_bytes()
    path.write_bytes({"flip a byte": data[:-10] + bytes([data[-10] ^ 1]) + data[-9:],
                      "truncate": data[: len(data) // 2],
                      "garbage": os.urandom(len(data)),
                      "empty": b"",
                      "bad header": kv_cache.MAGIC + b"{not json\n" + data[-100:]}[damage])
    fresh = cache(tmp_path)
    assert fresh.get(PREFIX) is None
    fresh.put(PREFIX, b"\x01\x02" * 500)  # what LocalModel does after evaluating the prefix again
    assert cache(tmp_path).get(PREFIX).state == b"\x01\x02" * 500


def test_a_file_for_other_tokens_is_not_taken(tmp_path):
    store = cache(tmp_path)
    store.put(PREFIX, b"state of PREFIX")
    (path,) = (tmp_path / "kv").iterdir()
    other = [*PREFIX[:-1], 999]
    path.rename(store.path(store.key(other)))  # a file under the wrong name
    assert cache(tmp_path).get(other) is None


def test_the_directory_stays_under_its_budget_least_recently_used_first(tmp_path):
    store = cache(tmp_path)
    prefixes = [[i] * 10 for i in range(3)]
    for n, p in enumerate(prefixes):
        store.put(p, b"x" * 1000)
        os.utime(store.path(store.key(p)), ns=(n * 10**9, n * 10**9))  # written in this order
    budget = 3 * store.path(store.key(prefixes[0])).stat().st_size  # room for three files
    fresh = cache(tmp_path, max_bytes=budget)
    fresh.put([7] * 10, b"x" * 1000)  # a fourth: the least recently used goes
    assert fresh.get(prefixes[0]) is None
    assert fresh.get(prefixes[1]) is not None  # read now, so used more recently than [2]
    fresh.put([8] * 10, b"x" * 1000)
    left = {p.name for p in (tmp_path / "kv").iterdir()}
    assert left == {f"{fresh.key(p)}.kv" for p in (prefixes[1], [7] * 10, [8] * 10)}


def test_a_state_over_the_budget_is_kept_in_memory_only(tmp_path):
    store = cache(tmp_path, max_bytes=100)
    store.put(PREFIX, b"x" * 1000)
    assert not (tmp_path / "kv").exists() or not list((tmp_path / "kv").iterdir())
    assert store.get(PREFIX).state == b"x" * 1000


def test_an_unwritable_directory_costs_speed_never_the_run(tmp_path):
    (tmp_path / "kv").write_text("a file where the directory should be")
    store = cache(tmp_path)
    store.put(PREFIX, b"state")  # no exception
    assert store.get(PREFIX).state == b"state"  # this process still has it
    assert cache(tmp_path).get(PREFIX) is None


def test_switches_and_location(monkeypatch, tmp_path):
    monkeypatch.delenv("TAO_KV_CACHE", raising=False)
    monkeypatch.delenv("TAO_KV_CACHE_DIR", raising=False)
    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path / "tao"))
    assert kv_cache.enabled() and kv_cache.default_dir() == tmp_path / "tao" / "kv"
    monkeypatch.setenv("TAO_KV_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert kv_cache.default_dir() == tmp_path / "elsewhere"
    for off in ("0", "off", "false", "no"):
        monkeypatch.setenv("TAO_KV_CACHE", off)
        assert not kv_cache.enabled()


def test_model_identity_is_the_verified_sha256_else_the_file_stat(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF weights")
    assert kv_cache.model_identity(gguf).startswith("file:")
    st = gguf.stat()
    marker = tmp_path / "m.gguf.verified.json"
    marker.write_text(json.dumps({"sha256": "ab" * 32, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    assert kv_cache.model_identity(gguf) == "sha256:" + "ab" * 32
    gguf.write_bytes(b"other weights")  # the marker no longer matches: not trusted
    assert kv_cache.model_identity(gguf).startswith("file:")


# -- what LocalModel evaluates, restores or keeps (a stand-in for llama_cpp.Llama) ---------

class FakeLlama:
    """The parts of ``Llama`` that ``local._prime`` touches; ``evaluated`` records each eval."""

    def __init__(self, store):
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self.evaluated: list[list[int]] = []
        self.tao_prefixes, self.tao_primed, self.tao_last = store, None, None

    def n_ctx(self):
        return 4096

    def reset(self):
        self.n_tokens = 0

    def eval(self, tokens):
        self.evaluated.append(list(tokens))
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)

    def generate(self, tokens, reply):
        """What a turn leaves in the context: Llama.generate reuses the common head."""
        held = local._common(self.input_ids[:self.n_tokens], tokens)
        self.n_tokens = held
        self.eval(tokens[held:] + reply)
        self.tao_last = tokens


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setattr(local, "_state", lambda llm: b"state:" + bytes(str(llm.n_tokens), "ascii"))

    def restore(llm, snap):
        llm.input_ids[:snap.tokens.size] = snap.tokens
        llm.n_tokens = int(snap.tokens.size)
        llm.evaluated.append(["restored", snap.state])

    monkeypatch.setattr(local, "_restore", restore)
    return lambda: FakeLlama(cache(tmp_path))


TASK1, TASK2 = [1, 2, 3], [1, 9, 9, 9]  # "<|im_start|>user ..." of two tasks: a common head


def turn(llm, tokens, cuts, reply):
    local._prime(llm, tokens, cuts)
    llm.generate(tokens, reply)


def test_the_prefix_is_evaluated_on_its_own_then_restored_by_the_next_process(fake):
    llm = fake()
    turn(llm, PREFIX + TASK1, [len(PREFIX)], [50, 51])
    assert llm.evaluated == [PREFIX, TASK1 + [50, 51]]
    second = fake()  # a new process: the prefix comes from the file, only the task is evaluated
    turn(second, PREFIX + TASK1, [len(PREFIX)], [50, 51])
    assert second.evaluated == [["restored", b"state:60"], TASK1 + [50, 51]]


def test_the_next_turn_reuses_the_whole_chat(fake):
    llm = fake()
    turn(llm, PREFIX + TASK1, [len(PREFIX)], [50, 51])
    turn(llm, PREFIX + TASK1 + [50, 51, 60], [len(PREFIX)], [52])
    assert llm.evaluated[1:] == [TASK1 + [50, 51], [60, 52]]  # only the observation is new


def test_a_new_run_in_the_same_process_starts_from_the_prefix_exactly(fake):
    """Task 2 shares a token with task 1 after the prefix; reusing it would cut task 2 into
    batches differently than a fresh process does, and greedy replies could differ."""
    llm = fake()
    turn(llm, PREFIX + TASK1, [len(PREFIX)], [50])
    turn(llm, PREFIX + TASK2, [len(PREFIX)], [70])
    assert llm.evaluated == [PREFIX, TASK1 + [50], TASK2 + [70]]


def test_the_longest_saved_cut_is_the_fixed_prefix(fake):
    """CodeAct's worked example is a user/assistant pair before the task: two cuts; turn 1
    saves the later one, and a later run of another task finds it."""
    example = [200, 201, 202]
    llm = fake()
    turn(llm, PREFIX + example + TASK1, [len(PREFIX), len(PREFIX) + 3], [50])
    assert llm.evaluated[0] == PREFIX + example
    other = fake()
    turn(other, PREFIX + example + TASK2, [len(PREFIX), len(PREFIX) + 3], [70])
    assert other.evaluated == [["restored", b"state:63"], TASK2 + [70]]


def test_a_prompt_without_a_fixed_prefix_is_evaluated_whole(fake):
    llm = fake()
    turn(llm, PREFIX + TASK1, [len(PREFIX)], [50])
    turn(llm, [5, 6, 7], [], [8])
    assert llm.evaluated[-1] == [5, 6, 7, 8] and llm.tao_primed is None
