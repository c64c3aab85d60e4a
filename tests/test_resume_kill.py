"""Proof that a resumed run repeats no side effect: a scripted 5-tool ReAct run and a plan with
two parallel steps are SIGKILLed right after each journal write (``TAO_TEST_KILL_AT``), some
twice (the resume killed too), and resumed: every effect counter ends at exactly 1 and the
answer is the uninterrupted run's. Each killed process is forked from a clean process that has
tao loaded (``resume_scripts.serve``), so 100+ kills take seconds, not minutes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import resume_scripts

from tao.guard import Decision


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, "-c", "import resume_scripts; resume_scripts.serve()"],
                            cwd=Path(__file__).parent, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    yield proc
    proc.stdin.close()
    proc.wait(30)


def killer(server):
    def kill(kind, journal, effects, n):
        server.stdin.write(f"{kind}\t{journal}\t{effects}\t{n}\n")
        server.stdin.flush()
        return server.stdout.readline().strip() == "killed"
    return kill


def counters(effects):
    return {p.stem: json.loads(p.read_text())["count"] for p in sorted(effects.glob("*.json"))}


def writes(kind, tmp_path):
    """The uninterrupted run: its answer and how many journal writes it made."""
    journal, effects = tmp_path / "clean.db", tmp_path / "clean"
    effects.mkdir()
    answer = resume_scripts.go(kind, str(journal), str(effects))
    (run,) = resume_scripts.Journal(journal).runs()
    n = len(resume_scripts.Journal(journal).records(run["run_id"])) + 2  # + the run's row, its end
    return answer, n, counters(effects)


# 18 + 17 * 4 = 86 trials for the ReAct run, 9 + 8 * 3 = 33 for the plan: 119 in all
@pytest.mark.parametrize("kind, second_kills, at_least", [("react", 4, 86), ("plan", 3, 33)])
def test_killed_at_every_journal_boundary_then_resumed_pays_each_once(server, tmp_path, kind,
                                                                    second_kills, at_least):
    kill = killer(server)
    answer, n, clean = writes(kind, tmp_path)
    assert set(clean.values()) == {1} and len(clean) == (4 if kind == "react" else 2)
    trials = [(k, None) for k in range(1, n + 1)] + \
             [(k, m) for k in range(1, n) for m in range(1, second_kills + 1)]
    killed = 0
    for i, (k, m) in enumerate(trials):
        journal, effects = tmp_path / f"{i}.db", tmp_path / f"fx{i}"
        effects.mkdir()
        killed += kill(kind, journal, effects, k)
        if m is not None:  # the resume dies too, after its mth write
            killed += kill(kind, journal, effects, m)
        got = resume_scripts.go(kind, str(journal), str(effects))
        assert got == answer, f"killed after write {k} (then {m}): {got!r}"
        assert counters(effects) == clean, f"killed after write {k} (then {m})"
        (run,) = resume_scripts.Journal(journal).runs()
        assert run["status"] == "done"
    assert len(trials) >= at_least and killed >= len(trials)


def test_a_call_without_an_idempotency_key_cut_short_is_asked_about_never_rerun(server,
                                                                               tmp_path):
    """``send`` keeps no key: killed between its start and its result, the resumed run cannot
    know whether it went out, so it asks - here the approver says no - and never sends twice."""
    kill = killer(server)
    answer, n, _ = writes("react-send", tmp_path)
    asked_at = []
    for k in range(1, n + 1):
        journal, effects = tmp_path / f"s{k}.db", tmp_path / f"sfx{k}"
        effects.mkdir()
        assert kill("react-send", journal, effects, k)
        asked = []

        def approve(request):
            asked.append(request.tool)
            return Decision.reject("it may have gone out already")

        resume_scripts.go("react-send", str(journal), str(effects), approve)
        sent = json.loads((effects / "sent-bob.json").read_text())["count"] \
            if (effects / "sent-bob.json").exists() else 0
        assert sent <= 1, f"killed after write {k}: sent {sent} times"
        if asked:
            assert asked == ["send"]
            asked_at.append(k)
        else:
            assert sent == 1  # not cut short: sent once, by the first run or the resumed one
    # asked exactly when the kill fell between send's start and its result
    records = resume_scripts.Journal(tmp_path / "clean.db").records(
        resume_scripts.Journal(tmp_path / "clean.db").runs()[0]["run_id"])
    start = next(r["seq"] for r in records if r["kind"] == "tool.start"
                 and r["data"]["tool"] == "send")
    assert asked_at == [start + 1]  # write start+1 is the record: the run's row is write 1
