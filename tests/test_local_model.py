"""The embedded model: assembly and verification of the GGUF (fast, fake packages), and the real
Qwen2.5-Coder-0.5B on the six seed questions (slow; run alone with ``pytest -m local_model``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from tao import ReActAgent, calculate, calculator
from tao.errors import LocalModelError
from tao.evals import is_correct
from tao.events import Error, Observation, TokenDelta
from tao.models import gguf_store
from tao.models.gguf_store import GGUFInfo, ensure_gguf


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """Two fake part packages on sys.path and a registry entry for them."""
    site = tmp_path / "site"
    payload = b""
    for i, chunk in enumerate([b"GGUF-part-one-", b"part-two"], start=1):
        data = site / f"fakegguf_part{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("raise RuntimeError('never imported')\n")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
        payload += chunk
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path / "cache"))
    info = GGUFInfo("fake", "fake.gguf", ("fakegguf_part1", "fakegguf_part2"),
                    hashlib.sha256(payload).hexdigest(), len(payload), "pip install fake")
    monkeypatch.setitem(gguf_store.KNOWN, "fake", info)
    return info, payload


def test_parts_are_assembled_in_order_verified_and_cached(fake_model, tmp_path):
    info, payload = fake_model
    path = ensure_gguf("fake")
    assert path.read_bytes() == payload
    assert path.parent == tmp_path / "cache" / "models"
    assert "fakegguf_part1" not in sys.modules  # located, never imported
    mtime = path.stat().st_mtime_ns
    assert ensure_gguf("fake") == path and path.stat().st_mtime_ns == mtime  # not rebuilt


def test_the_first_run_says_what_it_is_doing_while_it_assembles_and_verifies(fake_model, capsys):
    """Not a terminal here: a line before and one after (on a terminal, a rich progress bar)."""
    path = ensure_gguf("fake")
    err = capsys.readouterr().err
    assert "tao: assembling fake.gguf from 2 packages and checking its SHA-256" in err
    assert "done in" in err
    marker = path.with_name(path.name + ".verified.json")
    marker.unlink()  # a later process that cannot trust the marker hashes the file again
    ensure_gguf("fake")
    assert "tao: verifying fake.gguf" in capsys.readouterr().err
    ensure_gguf("fake")  # verified and marked: silent
    assert capsys.readouterr().err == ""


def test_checksum_mismatch_is_refused_with_a_clear_message(fake_model, monkeypatch):
    info, _ = fake_model
    monkeypatch.setitem(gguf_store.KNOWN, "fake", GGUFInfo(
        info.name, info.filename, info.packages, "0" * 64, info.size, info.install_hint))
    with pytest.raises(LocalModelError, match="checksum mismatch"):
        ensure_gguf("fake")
    assert not list((gguf_store.cache_dir() / "models").glob("*.gguf"))  # nothing half-written kept


def test_a_corrupted_cached_file_is_rebuilt(fake_model):
    info, payload = fake_model
    path = ensure_gguf("fake")
    path.write_bytes(b"corrupted!")
    assert ensure_gguf("fake").read_bytes() == payload


def test_missing_packages_name_the_install_command(fake_model, monkeypatch):
    info, _ = fake_model
    monkeypatch.setitem(gguf_store.KNOWN, "fake", GGUFInfo(
        info.name, info.filename, ("no_such_pkg_part1",), info.sha256, info.size, "pip install fake"))
    with pytest.raises(LocalModelError, match="no_such_pkg_part1.*pip install fake"):
        ensure_gguf("fake")


def test_unknown_local_model_name():
    from tao.models.local import LocalModel

    with pytest.raises(LocalModelError, match="unknown local model"):
        LocalModel("gpt-17")


# -- the real embedded model --------------------------------------------------------------

@pytest.mark.local_model
@pytest.mark.parametrize("protocol", ["tools", "text"])
def test_local_model_on_the_six_seed_questions(local_model, seed_questions, protocol):
    solved, report = 0, []
    for task in seed_questions:
        task_id = task["id"]
        events = []
        agent = ReActAgent(local_model, [calculate, calculator], protocol=protocol, max_turns=6)
        result = agent.run(task["question"], sinks=[events.append])
        # Grammar-constrained decoding: every action the model emitted parsed, so there is no
        # corrective observation and no error - the run ends with an answer or at the budget.
        assert not [e for e in events if isinstance(e, Error)], (task_id, events)
        assert result.status in ("done", "max_turns"), (task_id, result)
        assert sum(isinstance(e, TokenDelta) for e in events) > result.turns  # it streamed
        observations = [e for e in events if isinstance(e, Observation)]
        assert len(observations) == result.tool_calls
        ok = is_correct(result.answer, task["answer"])
        solved += ok
        report.append((task_id, ok, result.turns, result.tool_calls, result.answer))
    # Accuracy is the benchmark's business (benchmarks/local_agents.py); this floor only shows
    # that tool results reach the model and answers come back (greedy decoding, 0.5B model).
    assert solved >= 2, report


@pytest.mark.local_model
def test_local_model_loads_once_per_process(local_model):
    from tao.models.local import LocalModel

    assert LocalModel().llm is local_model.llm


@pytest.mark.local_model
async def test_local_model_structured_output_follows_a_json_schema(local_model):
    import json

    from tao.messages import Message

    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    response = await local_model.complete(
        [Message.user("Give the capital of France and its population as JSON.")],
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
        max_tokens=60)
    data = json.loads(response.message.content)
    assert set(data) == {"city", "population"} and isinstance(data["population"], int)


XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"

_RUN = """
import json, sys
from tao.cli import build_agent
from tao.events import TokenDelta
from tao.models.local import LocalModel

model = LocalModel()
for _ in range(int(sys.argv[1])):
    events = []
    result = build_agent("react", model).run(sys.argv[2], sinks=[events.append])
    text = "".join(e.text for e in events if isinstance(e, TokenDelta))
    print(json.dumps({"answer": result.answer, "text": text, **model.stats()}))
"""


@pytest.mark.local_model
def test_a_second_process_restores_the_fixed_prefix_and_answers_the_same(tmp_path):
    """``tao run`` twice: the second process reads the prefix's KV state from the cache
    directory instead of evaluating it, and greedy decoding gives the same tokens as with the
    cache off, in a cold process, and in a second run inside one process."""
    kv = tmp_path / "kv"

    def run(runs: int = 1, **env: str) -> list[dict]:
        done = subprocess.run([sys.executable, "-c", _RUN, str(runs), XIAOMING], capture_output=True,
                              text=True, timeout=900, check=True,
                              env={**os.environ, "TAO_KV_CACHE_DIR": str(kv), **env})
        return [json.loads(line) for line in done.stdout.splitlines()]

    (off,) = run(TAO_KV_CACHE="0")
    assert not kv.exists()
    cold, again = run(2)
    (saved,) = kv.glob("*.kv")
    prefix = json.loads(saved.read_bytes().split(b"\n")[1])["n_tokens"]
    (warm,) = run()

    assert off["text"] == cold["text"] == again["text"] == warm["text"], (off, cold, again, warm)
    assert "4" in warm["answer"]
    assert (cold["prefix_misses"], warm["prefix_hits"], warm["prefix_misses"]) == (1, 1, 0)
    assert prefix > 300  # system prompt, tool list and worked example
    # llama.cpp's own count of prompt tokens evaluated: the warm process skips exactly the prefix
    assert off["prompt_tokens"] == cold["prompt_tokens"]
    assert cold["prompt_tokens"] - warm["prompt_tokens"] == prefix
    # the second run in the first process evaluated only what follows the prefix, like warm
    assert again["prompt_tokens"] - cold["prompt_tokens"] == warm["prompt_tokens"]
