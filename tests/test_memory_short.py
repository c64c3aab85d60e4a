"""Short-term memory: every model call fits the model's context; the oldest turns go (dropped or
summarised), never the system prompt, the task or the last turns. Fast ones on ``ScriptedModel``
(whose tokens tao estimates, see ``tao.memory.short``); one on the embedded model."""

from __future__ import annotations

import pytest

from tao import Message, ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.agents.codeact import CodeActAgent
from tao.memory.inject import Memory
from tao.memory.short import Counter, Fitter, estimate
from tao.models.history import WithHistory
from tao.plan.agent import PlanExecuteAgent


def provider_count(messages: list[Message]) -> int:
    """The prompt tokens ScriptedModel reports (4 characters a token): the provider's count
    that tao's estimate is calibrated against."""
    return sum(len(m.content) for m in messages) // 4 + 1


def chat(memory: Memory, turns: int, reply=None) -> list[list[Message]]:
    """``turns`` questions through ReAct with ``memory``; the messages of every call."""
    sent: list[list[Message]] = []

    def answer(messages):
        sent.append(messages)
        return reply(messages) if reply else "noted"

    for i in range(turns):
        question = f"Turn {i}: the code word is w{i}x. Please note it."
        result = ReActAgent(ScriptedModel([answer]), memory=memory).run(question)
        memory.history += [Message.user(question), Message.assistant(result.answer)]
    return sent


def test_a_200_turn_chat_never_overflows_and_keeps_system_prompt_task_and_last_turns():
    memory = Memory(max_context_tokens=600)
    sent = chat(memory, 200)
    budget = memory.fitter.budget(ScriptedModel([]), {})
    assert budget == 600 - 150  # a quarter of the window is kept for the reply
    assert max(provider_count(call) for call in sent) <= budget
    last = sent[-1]
    assert last[0].role == "system" and last[0].content == sent[0][0].content
    assert last[-1].content.startswith("Turn 199:")  # the task
    assert [m.content for m in last[-5:-1]] == [  # the last turns, as they were
        "Turn 197: the code word is w197x. Please note it.", "noted",
        "Turn 198: the code word is w198x. Please note it.", "noted"]
    assert not any("w3x" in m.content for m in last)  # the oldest went
    assert 200 // 20 < memory.fitter.cuts < 200 // 2  # cut with room to spare, not every turn


def test_summarize_has_the_model_write_one_summary_per_cut_and_it_is_counted():
    summaries: list[list[Message]] = []

    def reply(messages):
        if messages[0].content.startswith("Summarise"):  # the summary call
            summaries.append(messages)
            return "The user listed code words w0x and onwards."
        return "noted"

    memory = Memory(max_context_tokens=600, overflow="summarize")
    sent, runs = [], []
    for i in range(40):
        question = f"Turn {i}: the code word is w{i}x."
        model = ScriptedModel([reply] * 3)
        result = ReActAgent(model, memory=memory).run(question)
        sent.append(model.calls[-1])
        runs.append((model, result))
        memory.history += [Message.user(question), Message.assistant(result.answer)]
    assert summaries and len(summaries) == memory.fitter.cuts  # written once per cut
    assert "Turn 0: the code word is w0x." in summaries[0][1].content
    last = sent[-1]
    assert last[1].role == "system" and "The user listed code words" in last[1].content
    model, result = next((m, r) for m, r in runs if len(m.calls) == 2)  # a run that cut
    assert result.turns == 1  # the summary is no turn of the agent's, but its tokens count:
    assert result.usage.prompt_tokens == sum(provider_count(c) for c in model.calls)


def test_a_long_run_drops_its_oldest_tool_turns_whole_and_keeps_task_and_last_observation():
    """An agent's own run overflows too (big observations): an assistant call goes with its
    tool result, so no tool message is ever left without the call it answers."""
    @tool
    def lookup(n: int) -> str:
        """Row n of the table."""
        return f"{n}: " + "cell " * 40

    calls = [tool_call("lookup", n=i + 1) for i in range(30)]
    model = ScriptedModel([*calls, "done"])
    memory = Memory(max_context_tokens=1200)
    result = ReActAgent(model, [lookup], memory=memory, max_turns=40).run("Add one, 30 times.")
    assert result.answer == "done" and len(result.messages) == 2 + 2 * 30 + 1  # history whole
    for call in model.calls:
        assert provider_count(call) <= memory.fitter.budget(model, {})
        assert call[1].content == "Add one, 30 times."  # the task right after the system prompt
        for i, m in enumerate(call):
            if m.role == "tool":
                assert call[i - 1].role in ("assistant", "tool")
                assert any(c.id == m.tool_call_id for c in call[i - 1].tool_calls) \
                    or call[i - 1].role == "tool"
    assert model.calls[-1][-1].content.startswith("30")  # the newest observation is kept
    assert memory.fitter.cuts and len(model.calls[-1]) < len(result.messages) - 20


def test_with_history_is_fitted_too_and_codeact_and_plan_take_memory():
    history = [Message.user("x" * 400), Message.assistant("y" * 400)] * 20
    model = ScriptedModel(["```python\nfinal_answer(1)\n```"])
    agent = CodeActAgent(WithHistory(model, history, "one?"), memory=Memory(max_context_tokens=2000),
                         sandbox="subprocess")
    assert agent.run("one?").answer == "1"
    assert provider_count(model.calls[0]) <= 1500
    assert any(m.content == "y" * 400 for m in model.calls[0])  # the newest history stayed
    assert len(model.calls[0]) < 10 + len(history) // 2
    plan = '{"steps": [{"id": "step1", "description": "d", "tool": "calculator", ' \
           '"args": {"operation": "add", "a": 1, "b": 1}, "depends_on": []}], "answer": "$step1"}'
    model = ScriptedModel([plan])
    agent = PlanExecuteAgent(model, [calculator], memory=Memory(history=history,
                                                                max_context_tokens=3000))
    assert agent.run("1+1?").answer == "2"
    assert provider_count(model.calls[0]) <= 3000 - 750


def test_nothing_is_wrapped_or_changed_when_nothing_needs_fitting():
    model = ScriptedModel(["hi"])
    agent = ReActAgent(model)
    assert agent.memory.start("hi", "en").wrap(model) is model  # no window known: no wrapper
    assert agent.run("hi").answer == "hi"


def test_bad_settings_are_errors_at_once():
    with pytest.raises(ValueError, match="overflow"):
        Memory(overflow="forget")
    with pytest.raises(ValueError, match="max_context_tokens"):
        Fitter(max_context_tokens=10)
    with pytest.raises(TypeError, match="store must be"):
        ReActAgent(ScriptedModel([]), memory=42)


def test_the_estimate_counts_cjk_characters_as_tokens():
    assert estimate("abcd" * 10) == 10
    assert estimate("北京今天天气怎么样") == 9
    counter = Counter(ScriptedModel([]))
    from tao.messages import Usage

    counter.observe([Message.user("abcd" * 100)], None, Usage(200, 1))  # the provider says 2x
    assert counter.prompt([Message.user("abcd" * 100)]) == pytest.approx(200, rel=0.05)


@pytest.mark.local_model
def test_the_embedded_model_in_a_200_turn_chat_never_overflows_and_answers_about_the_last_turn(
        local_model):
    """Every one of 200 turns is fitted and counted with llama's own tokenizer (the prompt as
    the chat template renders it); the model itself answers the last question only - 200 real
    turns would take an hour on two cores."""
    memory = Memory()
    counter = Counter(local_model)
    budget = memory.fitter.budget(local_model, {})
    assert budget == local_model.n_ctx - local_model.max_tokens
    worst = 0
    for i in range(200):
        question = f"Note {i}: the locker code for today is {1000 + 7 * i}."
        run = memory.start(question, "en")
        model = run.wrap(local_model)
        sent, head, task = model.assemble([Message.system("You are a helpful assistant."),
                                           Message.user(question)])
        import asyncio

        fitted, _ = asyncio.run(memory.fitter.fit(local_model, model.counter, sent, head, task, {}))
        worst = max(worst, counter.prompt(fitted))
        memory.history += [Message.user(question), Message.assistant(f"Noted: {1000 + 7 * i}.")]
    assert worst <= budget and memory.fitter.cuts > 1
    result = ReActAgent(local_model, [], memory=memory).run(
        "What was the locker code in note 199? Reply with the number.")
    assert result.ok and "2393" in result.answer
