"""The guarded path's cost does not grow with the run (issue 25, point 5): the journal's key of a
model call (``model_key``, a hash of the messages sent) is computed incrementally, each call
hashing only the messages added since the last, and stays byte for byte the key journals were
written with, so a run journaled before still resumes. Work is counted here, never time
(``benchmarks/overhead.py --guarded`` times it)."""

from __future__ import annotations

import itertools
import sqlite3

import pytest

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.messages import Message, ToolCall, model_key
from tao.runs.resume import ModelKeys


def conversation() -> list[Message]:
    return [Message.system("你是一个助手。"), Message.user("小明有 50 元"),
            Message.assistant("先算", [ToolCall("c1", "add", {"a": 1, "b": 2})]),
            Message.tool("3", "c1", "add"), Message.assistant("答案是 3")]


#: model_key of each prefix of ``conversation()``, as tao wrote them before the keys were
#: computed incrementally: a journal holds these, and must still be served under them
KEYS = ["4f53cda18c2baa0c0354bb5f9a3ecbe5", "a70aff436d1b848c0d6cbc054c9f324e",
        "6e851968f476e2a7def7086158353778", "73446735d17caea7b40791feab598910",
        "c9ccdd125ccf0e6a2e4e293a5f3ccc7c", "7500920f7b72e90c01cedf51a4193fc0"]


def test_the_key_of_a_conversation_is_the_one_journals_were_written_with():
    msgs = conversation()
    assert [model_key(msgs[:i]) for i in range(len(msgs) + 1)] == KEYS
    keys = ModelKeys()
    assert [keys(msgs[:i]) for i in range(len(msgs) + 1)] == KEYS


def nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


ODD = [  # what a model or a tool can put in a conversation
    Message.user("a lone surrogate \udcff, 中文, emoji 🎉, quotes \" and \\ and \n"),
    Message.assistant("", [ToolCall("c9", "f", {"b": [1, 2.5, None, True], "a": {"z": "é"}}),
                           ToolCall("c10", "g", {}, parse_error="not JSON")]),
    Message.tool("", "c9", None),
    Message.assistant("deep", [ToolCall("c11", "f", nested(96))]),  # deep, but fine in the list
    Message.assistant("deeper", [ToolCall("c12", "f", nested(97))]),  # too deep inside the list
]


@pytest.mark.parametrize("odd", ODD, ids=range(len(ODD)))
def test_incremental_keys_equal_model_key_call_by_call(odd):
    keys, msgs = ModelKeys(), conversation()[:2]
    for i in range(12):
        msgs.append(odd if i == 5 else Message.assistant(f"turn {i}",
                                                          [ToolCall(f"c{i}", "add", {"a": i})]))
        msgs.append(Message.tool(str(i), f"c{i}", "add"))
        assert keys(msgs) == model_key(msgs)
        assert keys(list(msgs)) == model_key(msgs)  # a copy of the list: the same key
    rebuilt = [Message.from_dict(m.to_dict()) for m in msgs]  # equal, not the same objects
    assert keys(rebuilt) == model_key(msgs)
    for cut in (0, 1, 2, 7, len(msgs) - 1):  # a conversation branching off an earlier point
        other = msgs[:cut] + [Message.user(f"branch {cut}")]
        assert keys(other) == model_key(other)
        assert keys(msgs) == model_key(msgs)


def test_an_argument_json_cannot_write_sends_the_call_to_model_key_itself():
    loop: dict = {"a": 1}
    loop["self"] = loop  # a cycle: safe_json writes the whole list tamed
    msgs = conversation() + [Message.assistant("", [ToolCall("c2", "f", loop)])]
    assert ModelKeys()(msgs) == model_key(msgs)


def test_a_conversation_with_an_earlier_message_replaced_is_keyed_by_what_it_says_now():
    keys, msgs = ModelKeys(), conversation()
    keys(msgs)
    edited = msgs[:3] + [Message.tool("4", "c1", "add")] + msgs[4:]
    assert keys(edited) == model_key(edited) != model_key(msgs)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_each_model_call_of_a_guarded_run_serializes_only_what_is_new(tmp_path, monkeypatch):
    """A 120-turn run with a deny list, an audit log and a journal: the messages serialized at
    the model door per call (for its key and its journal record) stay the same few from the
    first turn to the last, while the conversation grows to 240 messages."""
    counted = {"to_dict": 0}
    to_dict = Message.to_dict

    def counting(self):
        counted["to_dict"] += 1
        return to_dict(self)

    monkeypatch.setattr(Message, "to_dict", counting)
    per_call, sizes = [], []

    def reply(i: int):
        def pick(messages):
            per_call.append(counted["to_dict"])
            sizes.append(len(messages))
            return tool_call("add", a=i, b=1) if i < 119 else "done"
        return pick

    result = ReActAgent(ScriptedModel([reply(i) for i in range(120)]), [add], max_turns=120,
                        deny=["run_command"], audit=tmp_path / "audit.jsonl", audit_fsync=False,
                        journal=tmp_path / "runs.db", journal_fsync=False).run("count")
    assert result.answer == "done" and result.turns == 120 and sizes[-1] == 240
    work = [b - a for a, b in itertools.pairwise(per_call)]
    assert max(work) <= 4 and max(work[-20:]) <= max(work[:20]), work


def journal_rows(path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT kind, key FROM records ORDER BY seq").fetchall()


def test_a_journaled_run_resumes_identically_and_its_keys_are_model_keys(tmp_path):
    """A 30-turn run is journaled; its model keys are those ``model_key`` gives the messages each
    call was sent (computed from scratch). The journal is cut as a crash at turn 20 leaves it,
    and the run resumed: the first 20 replies come from the journal (the model is asked only for
    the other 10), and it ends as the whole run did."""
    path = tmp_path / "runs.db"
    script = [tool_call("add", a=i, b=1) for i in range(29)] + ["done: 29"]
    model = ScriptedModel(script)
    first = ReActAgent(model, [add], max_turns=30, journal=path, audit=tmp_path / "a.jsonl").run(
        "count to 29")
    assert first.answer == "done: 29" and first.turns == 30
    keys = [key for kind, key in journal_rows(path) if kind == "model"]
    assert keys == [model_key(sent) for sent in model.calls]
    assert len(set(keys)) == 30

    with sqlite3.connect(path) as db:  # what a run killed during turn 21's model call leaves
        (seq,) = db.execute("SELECT seq FROM records WHERE kind='model' ORDER BY seq "
                            "LIMIT 1 OFFSET 20").fetchone()
        db.execute("DELETE FROM records WHERE seq >= ?", (seq,))
        db.execute("UPDATE runs SET status='running'")
        (run_id,) = db.execute("SELECT run_id FROM runs").fetchone()
    again_model = ScriptedModel(script[20:])
    again = ReActAgent(again_model, [add], max_turns=30, journal=path).resume(run_id)
    assert (again.answer, again.turns, again.tool_calls) == (first.answer, first.turns,
                                                             first.tool_calls)
    assert [m.to_dict() for m in again.messages] == [m.to_dict() for m in first.messages]
    assert len(again_model.calls) == 10 and again_model.remaining == 0
    assert [key for kind, key in journal_rows(path) if kind == "model"] == keys


def test_the_journals_wal_is_checkpointed_by_its_own_thread_not_by_a_runs_commit(tmp_path):
    """The run's connection never checkpoints (``wal_autocheckpoint=0``): a thread of the
    journal's does, every ``CHECKPOINT_EVERY`` records, so the records reach the database file
    while the run goes on, and the WAL does not grow without end."""
    import os
    import time

    from tao.runs import Journal
    from tao.runs.journal import CHECKPOINT_EVERY

    path = tmp_path / "runs.db"
    journal = Journal(path, fsync=False)
    run = journal.start("r1", "react", "scripted", "count")
    assert journal._conn().execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    before = os.path.getsize(path)
    for i in range(2 * CHECKPOINT_EVERY):
        run.note("step", {"n": i, "text": "字" * 200})
    deadline = time.monotonic() + 30
    while os.path.getsize(path) <= before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.path.getsize(path) > before  # copied into the database file: a checkpoint ran
    assert len(journal.records("r1")) == 2 * CHECKPOINT_EVERY
    journal.close()
