"""CodeAct on real replies of real models: ``tests/data/codeact_replies.jsonl``.

Each entry is one reply as a model wrote it, with where it comes from (a MINT trajectory file of
xingyaoww/mint-bench, Apache-2.0, or tao's own 0.5B model recorded by
``tests/data/record_local_replies.py``),
the model, its format, and what CodeAct must read from it: the Python blocks in order, the
``<solution>``, and the final answer (null when the reply is not one). The expectations were
checked by hand against each reply.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tao import ScriptedModel
from tao.agents.code_blocks import split_reply
from tao.agents.codeact import CodeActAgent
from tao.events import CodeExecution, Error

DATA = Path(__file__).parent / "data" / "codeact_replies.jsonl"
CORPUS = [json.loads(line) for line in DATA.read_text("utf-8").splitlines()]


def test_the_corpus_is_real_replies_of_several_models_in_several_formats():
    assert len(CORPUS) >= 100
    models = Counter(e["model"] for e in CORPUS)
    assert len(models) >= 10 and any("LocalModel" in m for m in models)
    formats = {e["format"] for e in CORPUS}
    assert {"execute multi-line", "execute one-line", "execute several", "execute unclosed",
            "solution only", "fence, no tags", "prose, no marker"} <= formats
    assert all(e["source"] and e["reply"] for e in CORPUS)


IDS = [f"{i}-{e['model'][:20]}" for i, e in enumerate(CORPUS)]


@pytest.mark.parametrize("entry", CORPUS, ids=IDS)
def test_blocks_solution_and_answer_of_each_reply(entry):
    reply = split_reply(entry["reply"])
    assert reply.blocks == entry["blocks"]
    assert reply.solution == entry["solution"]
    assert reply.answer == entry["answer"]


def test_no_reply_ends_a_run_as_done_without_an_answer_it_earned():
    """One turn per reply, the code run for real: a run is "done" only on a final answer the
    reply gives without code, or one its code computed with final_answer(); a reply with a code
    marker and nothing to run gets a correction."""
    for entry in CORPUS:
        events: list = []
        agent = CodeActAgent(ScriptedModel([entry["reply"]]), max_turns=1, timeout=5)
        result = agent.run("the task", sinks=[events.append])
        ran = [e.code for e in events if isinstance(e, CodeExecution)]
        assert ran == entry["blocks"][:len(ran)] and bool(ran) == bool(entry["blocks"]), entry
        if entry["answer"] is not None:
            assert (result.status, result.answer) == ("done", entry["answer"]), entry["source"]
        elif result.status == "done":  # only from final_answer() in code that ran
            assert ran and any("final_answer" in code for code in ran), entry["source"]
        if not entry["blocks"] and entry["answer"] is None:
            assert result.status == "max_turns" and any(
                isinstance(e, Error) and e.recoverable for e in events), entry["source"]
