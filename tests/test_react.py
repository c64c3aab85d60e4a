"""The ReAct loop, driven by the public ScriptedModel: exact turns, tool calls and events.

The scripts below read the observations they receive and put them into the next call, the way a
model would - so every number after the first call comes from the real calculator, not the script.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tao import Message, ReActAgent, ScriptedModel, Usage, calculator, tool, tool_call
from tao.events import (Action, Error, FinalAnswer, Observation, RunFinished, RunStarted, Thought,
                        TokenDelta, TurnStarted)
from tao.models.base import Model, ModelResponse

PROTOCOLS = ["tools", "text", "json"]

# The seeds' solutions, one calculator call a step; "$n" is the n-th observation the model has seen.
SCRIPTS = {
    "seed-1": [("add", 15, 27)],
    "seed-2": [("divide", 100, 4), ("add", "$1", 30)],
    "seed-3": [("multiply", 3, 12), ("multiply", 2, 5), ("add", "$1", "$2"), ("subtract", 50, "$3")],
}
OBSERVED = {"seed-1": ["42"], "seed-2": ["25", "55"], "seed-3": ["36", "10", "46", "4"]}
SEED_IDS = [f"seed-{n}-{lang}" for n in (1, 2, 3) for lang in ("zh", "en")]


def observations(messages: list[Message]) -> list[str]:
    """The tool results a model has been shown so far, in either protocol."""
    out = []
    for m in messages:
        if m.role == "tool":
            out.append(m.content)
        elif m.role == "user" and m.content.startswith("Observation: "):
            out.append(m.content.removeprefix("Observation: "))
    return out


def number(text: str) -> float:
    return float(text)


def calculator_reply(protocol: str, thought: str, **arguments):
    if protocol == "tools":
        return (thought, tool_call("calculator", **arguments))
    if protocol == "json":  # seed 003's decision object
        return json.dumps({"thought": thought, "action": "calculator", "action_input": arguments})
    return f"Thought: {thought}\nAction: calculator\nAction Input: {json.dumps(arguments)}"


def final_reply(protocol: str, answer: str) -> str:
    if protocol == "tools":
        return answer
    if protocol == "json":
        return json.dumps({"thought": "I now know the final answer", "action": "final", "action_input": answer})
    return f"Thought: I now know the final answer\nFinal Answer: {answer}"


def seed_script(seed: str, protocol: str) -> list:
    """Replies for ScriptedModel: each a callable that sees the messages sent to the model."""

    def step_reply(op, a, b):
        def reply(messages):
            seen = observations(messages)
            value = lambda x: number(seen[int(x[1:]) - 1]) if isinstance(x, str) else x  # noqa: E731
            return calculator_reply(protocol, f"{op} {a} and {b}", operation=op, a=value(a), b=value(b))

        return reply

    replies = [step_reply(*step) for step in SCRIPTS[seed]]
    replies.append(lambda messages: final_reply(protocol, f"The result is {observations(messages)[-1]}"))
    return replies


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("task_id", SEED_IDS)
def test_seed_tasks_exact_turns_and_calls(seed_tasks, task_id, protocol):
    task = seed_tasks[task_id]
    seed = task_id.rsplit("-", 1)[0]
    model = ScriptedModel(seed_script(seed, protocol))
    agent = ReActAgent(model, tools=[calculator], protocol=protocol)
    events = []

    result = agent.run(task["question"], sinks=[events.append])

    assert result.status == "done" and result.ok
    assert result.turns == task["expect"]["react_turns"]
    assert result.tool_calls == task["expect"]["react_tool_calls"]
    assert task["answer"] in result.answer
    assert model.remaining == 0
    # The observations are what the calculator returned (25.0 reads as "25")...
    assert [e.content for e in events if type(e) is Observation] == OBSERVED[seed]
    assert not any(e.is_error for e in events if type(e) is Observation)
    # ...and the model used them: later calls carry numbers only the tool produced.
    actions = [e.call for e in events if type(e) is Action]
    assert len(actions) == result.tool_calls
    if seed == "seed-3":
        assert actions[2].arguments == {"operation": "add", "a": 36, "b": 10}
        assert actions[3].arguments == {"operation": "subtract", "a": 50, "b": 46}
    final = [e for e in events if type(e) is FinalAnswer]
    assert len(final) == 1 and final[0].text == result.answer and final[0].turn == result.turns


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_result_messages_keep_the_conversation_in_order(protocol):
    model = ScriptedModel(seed_script("seed-2", protocol))
    result = ReActAgent(model, [calculator], protocol=protocol).run("100 / 4 + 30?")

    observation_role = "tool" if protocol == "tools" else "user"
    assert [m.role for m in result.messages] == [
        "system", "user", "assistant", observation_role, "assistant", observation_role, "assistant"]
    assert result.messages[1].content == "100 / 4 + 30?"
    if protocol == "tools":
        calls = [m.tool_calls[0] for m in result.messages if m.tool_calls]
        replies = [m for m in result.messages if m.role == "tool"]
        assert [r.tool_call_id for r in replies] == [c.id for c in calls]
        assert all(r.name == "calculator" for r in replies)
    else:
        assert result.messages[3].content == "Observation: 25"
        assert result.messages[5].content == "Observation: 55"


def test_max_turns_is_a_result_not_an_exception():
    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=1)] * 5)
    result = ReActAgent(model, [calculator], max_turns=3).run("keep adding")

    assert result.status == "max_turns" and not result.ok
    assert result.answer is None and result.error is None
    assert result.turns == 3 and result.tool_calls == 3
    assert model.remaining == 2


def test_script_running_out_ends_the_run_with_error_and_keeps_history():
    model = ScriptedModel([tool_call("calculator", operation="add", a=15, b=27)])
    events = []
    result = ReActAgent(model, [calculator]).run("15+27?", sinks=[events.append])

    assert result.status == "error"
    assert "ScriptExhausted" in result.error and "ran out of replies" in result.error
    assert result.turns == 2 and result.tool_calls == 1
    assert [m.role for m in result.messages] == ["system", "user", "assistant", "tool"]
    assert result.messages[-1].content == "42"
    errors = [e for e in events if type(e) is Error]
    assert len(errors) == 1 and not errors[0].recoverable and errors[0].message == result.error
    assert type(events[-1]) is RunFinished


async def test_event_stream_order():
    model = ScriptedModel([("I should add 15 and 27", tool_call("calculator", operation="add", a=15, b=27)),
                           "15 + 27 = 42"], chunk_size=4)
    agent = ReActAgent(model, [calculator])

    events = [e async for e in agent.stream("What is 15 + 27?")]

    assert [e.kind for e in events if type(e) is not TokenDelta] == [
        "run_started", "turn_started", "thought", "action", "observation",
        "turn_started", "final_answer", "run_finished"]
    assert events[0] == RunStarted("What is 15 + 27?", "react", "scripted")
    assert [e.turn for e in events if type(e) is TurnStarted] == [1, 2]
    # Tokens stream in pieces and come before the step they belong to is read.
    tokens = [e for e in events if type(e) is TokenDelta]
    assert "".join(t.text for t in tokens if t.turn == 2) == "15 + 27 = 42"
    assert len([t for t in tokens if t.turn == 2]) == 3
    kinds = [e.kind for e in events]
    assert kinds.index("token") < kinds.index("thought")
    thought = next(e for e in events if type(e) is Thought)
    action = next(e for e in events if type(e) is Action)
    observation = next(e for e in events if type(e) is Observation)
    assert thought.text == "I should add 15 and 27" and thought.turn == 1
    assert action.call.name == "calculator" and observation.call_id == action.call.id
    assert observation.content == "42" and not observation.is_error and observation.duration_s >= 0
    assert events[-1].result.answer == "15 + 27 = 42"


async def test_text_protocol_event_stream_has_thoughts():
    model = ScriptedModel(seed_script("seed-1", "text"))
    events = [e async for e in ReActAgent(model, [calculator], protocol="text").stream("15+27?")]

    assert [e.kind for e in events if type(e) is not TokenDelta] == [
        "run_started", "turn_started", "thought", "action", "observation",
        "turn_started", "thought", "final_answer", "run_finished"]
    assert events[0].agent == "react-text"


async def test_arun():
    model = ScriptedModel([tool_call("calculator", operation="add", a=15, b=27), "42"])
    result = await ReActAgent(model, [calculator]).arun("15+27?")
    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "42", 2, 1)


async def test_run_works_inside_a_running_event_loop():
    asyncio.get_running_loop()  # as in Jupyter: a loop is already running
    model = ScriptedModel([tool_call("calculator", operation="multiply", a=6, b=7), "42"])
    events = []
    result = ReActAgent(model, [calculator]).run("6*7?", sinks=[events.append])
    assert result.answer == "42" and result.tool_calls == 1
    assert type(events[-1]) is RunFinished


def broken_sink(event):
    raise RuntimeError("sink broke")


async def test_a_failing_sink_raises_the_same_inside_a_running_loop():
    # A sink is the library user's code: its exception reaches the caller unchanged, with or
    # without a running event loop (not an IndexError from the helper thread).
    with pytest.raises(RuntimeError, match="sink broke"):
        ReActAgent(ScriptedModel(["42"])).run("x", sinks=[broken_sink])
    with pytest.raises(RuntimeError, match="sink broke"):
        await ReActAgent(ScriptedModel(["42"])).arun("x", sinks=[broken_sink])


def test_a_failing_sink_raises_without_a_loop():
    with pytest.raises(RuntimeError, match="sink broke"):
        ReActAgent(ScriptedModel(["42"])).run("x", sinks=[broken_sink])


# -- several calls in one turn ------------------------------------------------------------------

async def test_async_tools_in_one_turn_run_concurrently():
    @tool
    async def fetch_a() -> str:
        """Fetch A."""
        await asyncio.sleep(0.2)
        return "A"

    @tool
    async def fetch_b() -> str:
        """Fetch B."""
        await asyncio.sleep(0.2)
        return "B"

    model = ScriptedModel([[tool_call("fetch_a"), tool_call("fetch_b")], "A and B"])
    start = time.perf_counter()
    result = await ReActAgent(model, [fetch_a, fetch_b]).arun("fetch both")
    elapsed = time.perf_counter() - start

    assert elapsed < 0.35, f"two 0.2 s tools took {elapsed:.3f} s: not concurrent"
    assert result.turns == 2 and result.tool_calls == 2
    assert [m.content for m in result.messages if m.role == "tool"] == ["A", "B"]


async def test_observations_come_back_in_call_order_not_finish_order():
    @tool
    async def wait(label: str, seconds: float) -> str:
        """Sleep, then return the label."""
        await asyncio.sleep(seconds)
        return label

    calls = [tool_call("wait", label="slow", seconds=0.2), tool_call("wait", label="fast", seconds=0.01),
             tool_call("wait", label="medium", seconds=0.1)]
    model = ScriptedModel([calls, "done"])
    events = [e async for e in ReActAgent(model, [wait]).stream("wait")]

    observed = [e for e in events if type(e) is Observation]
    assert [o.content for o in observed] == ["slow", "fast", "medium"]
    assert [o.call_id for o in observed] == [c.id for c in calls]
    messages = events[-1].result.messages
    assert [m.tool_call_id for m in messages if m.role == "tool"] == [c.id for c in calls]


async def test_sync_tools_in_one_turn_run_in_threads():
    @tool
    def slow_a() -> str:
        """Block for a while."""
        time.sleep(0.2)
        return "a"

    @tool
    def slow_b() -> str:
        """Block for a while."""
        time.sleep(0.2)
        return "b"

    model = ScriptedModel([[tool_call("slow_a"), tool_call("slow_b")], "a and b"])
    start = time.perf_counter()
    result = await ReActAgent(model, [slow_a, slow_b]).arun("both")
    elapsed = time.perf_counter() - start

    assert elapsed < 0.35, f"two 0.2 s sync tools took {elapsed:.3f} s: not concurrent"
    assert [m.content for m in result.messages if m.role == "tool"] == ["a", "b"]


# -- what the model gets wrong becomes an observation ------------------------------------------

def run_with_first_call(bad_call, protocol="tools"):
    """A run whose first call is ``bad_call``, then a correct call and an answer."""
    model = ScriptedModel([bad_call, tool_call("calculator", operation="add", a=15, b=27), "42"])
    events = []
    result = ReActAgent(model, [calculator], protocol=protocol).run("15+27?", sinks=[events.append])
    return result, [e for e in events if type(e) is Observation], model


def test_unknown_tool_lists_the_available_tools_and_the_run_goes_on():
    result, observed, model = run_with_first_call(tool_call("weather", city="Beijing"))

    assert observed[0].is_error
    assert "unknown tool 'weather'" in observed[0].content
    assert "Available tools: calculator" in observed[0].content
    assert model.calls[1][-1].content == observed[0].content  # the model read it
    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "42", 3, 2)
    assert observed[1].content == "42" and not observed[1].is_error


@pytest.mark.parametrize("arguments, named", [
    ({"operation": "add", "a": "fifteen", "b": 27}, "a"),
    ({"operation": "add", "a": 15}, "b"),
    ({"operation": "plus", "a": 15, "b": 27}, "operation"),
    ({"operation": "add", "a": 15, "b": 27, "c": 1}, "c"),
])
def test_invalid_arguments_name_the_parameter_and_the_run_goes_on(arguments, named):
    result, observed, _ = run_with_first_call(tool_call("calculator", **arguments))

    assert observed[0].is_error
    assert observed[0].content.startswith("Error: invalid arguments for calculator(")
    assert f"- {named}:" in observed[0].content
    assert result.status == "done" and result.answer == "42" and result.tool_calls == 2


def test_tool_exception_is_an_observation_and_the_run_goes_on():
    result, observed, _ = run_with_first_call(tool_call("calculator", operation="divide", a=1, b=0))

    assert observed[0].is_error
    assert "ZeroDivisionError" in observed[0].content and "division by zero" in observed[0].content
    assert result.status == "done" and result.turns == 3


def test_text_protocol_bad_json_is_an_observation_and_the_run_goes_on():
    bad = 'Thought: add\nAction: calculator\nAction Input: {"operation": "add", "a": 15, "b": }'
    model = ScriptedModel([bad, calculator_reply("text", "add", operation="add", a=15, b=27),
                           final_reply("text", "42")])
    events = []
    result = ReActAgent(model, [calculator], protocol="text").run("15+27?", sinks=[events.append])

    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "42", 3, 1)
    correction = model.calls[1][-1]
    assert correction.role == "user" and "not a valid JSON object" in correction.content
    assert [e.recoverable for e in events if type(e) is Error] == [True]


# -- the text protocol's corrective observation ------------------------------------------------

def test_unparsable_reply_gets_a_corrective_observation_and_the_loop_goes_on():
    model = ScriptedModel([
        "I think the answer is probably 42.",
        calculator_reply("text", "add them", operation="add", a=15, b=27),
        final_reply("text", "15 + 27 = 42"),
    ])
    events = []
    result = ReActAgent(model, [calculator], protocol="text").run("What is 15 + 27?", sinks=[events.append])

    assert (result.status, result.answer) == ("done", "15 + 27 = 42")
    assert result.turns == 3 and result.tool_calls == 1
    correction = model.calls[1][-1]
    assert correction.role == "user"
    assert correction.content.startswith("Observation: your last reply could not be parsed")
    assert "neither an Action nor a Final Answer" in correction.content
    assert "one of [calculator]" in correction.content
    errors = [e for e in events if type(e) is Error]
    assert len(errors) == 1 and errors[0].recoverable and errors[0].turn == 1
    assert model.calls[2][-1].content == "Observation: 42"
    # The unusable reply stays in the history, followed by the correction.
    assert [m.role for m in result.messages[2:4]] == ["assistant", "user"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_chinese_task_gets_chinese_prompt_and_correction(protocol):
    bad = "我觉得是 42" if protocol != "tools" else ""
    model = ScriptedModel([bad, final_reply(protocol, "42")])
    result = ReActAgent(model, [calculator], protocol=protocol).run("请帮我计算 15 + 27 等于多少？")

    assert result.status == "done" and result.turns == 2
    assert model.calls[0][0].role == "system"
    assert "你是一个严谨的助手" in model.calls[0][0].content
    correction = model.calls[1][-1].content
    if protocol == "text":
        assert "无法解析你的上一条回复" in correction and "既没有 Action 也没有 Final Answer" in correction
    elif protocol == "json":
        assert correction.startswith("Observation: 无法使用你的上一条回复：回复里没有 JSON 对象")
        assert '"action": "final"' in correction
    else:
        assert correction == "回复是空的"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_english_task_gets_english_prompt_and_correction(protocol):
    bad = "It is 42, I think" if protocol != "tools" else ""
    model = ScriptedModel([bad, final_reply(protocol, "42")])
    result = ReActAgent(model, [calculator], protocol=protocol).run("What is 15 + 27?")

    assert result.status == "done" and result.turns == 2
    system = model.calls[0][0].content
    assert "You are a careful assistant" in system and "你" not in system
    correction = model.calls[1][-1].content
    if protocol == "text":
        assert "could not be parsed" in correction
    elif protocol == "json":
        assert correction.startswith("Observation: your last reply could not be used: the reply holds no JSON object")
    else:
        assert correction == "the reply is empty"


def test_language_can_be_chosen_explicitly():
    model = ScriptedModel(["42"])
    ReActAgent(model, [calculator], language="en").run("请帮我计算 15 + 27 等于多少？")
    assert "You are a careful assistant" in model.calls[0][0].content


def test_text_protocol_prompt_lists_the_tools():
    model = ScriptedModel([final_reply("text", "42")])
    ReActAgent(model, [calculator], protocol="text").run("What is 15 + 27?")
    system = model.calls[0][0].content
    assert "calculator(operation: 'add' | 'subtract' | 'multiply' | 'divide', a: float, b: float)" in system
    assert "[calculator]" in system and "{tools}" not in system and "{example}" not in system


# -- usage ------------------------------------------------------------------------------------

class MeteredModel(Model):
    """A model of your own: ScriptedModel's replies with a fixed usage per call."""

    name = "metered"

    def __init__(self, replies):
        self.inner = ScriptedModel(replies)

    async def stream(self, messages, **kwargs):
        async for chunk in self.inner.stream(messages, **kwargs):
            if isinstance(chunk, ModelResponse):
                chunk = ModelResponse(chunk.message, Usage(100, 7), chunk.finish_reason)
            yield chunk


def test_usage_accumulates_across_turns():
    model = MeteredModel(seed_script("seed-2", "tools"))
    result = ReActAgent(model, [calculator]).run("100 / 4 + 30?")

    assert result.turns == 3
    assert result.usage == Usage(300, 21)
    assert result.usage.total_tokens == 321
    assert result.to_dict()["usage"] == {"prompt_tokens": 300, "completion_tokens": 21, "total_tokens": 321}


def test_scripted_model_usage_grows_with_the_conversation():
    model = ScriptedModel(seed_script("seed-3", "tools"))
    result = ReActAgent(model, [calculator]).run("小明有 50 元 ...")
    assert result.usage.prompt_tokens > 5 * 10 and result.usage.completion_tokens >= 5


def test_user_mistakes_are_exceptions_at_once():
    with pytest.raises(ValueError, match="protocol"):
        ReActAgent(ScriptedModel([]), [calculator], protocol="xml")
    with pytest.raises(ValueError, match="max_turns"):
        ReActAgent(ScriptedModel([]), [calculator], max_turns=0)
    with pytest.raises(ValueError, match="two tools are named 'calculator'"):
        ReActAgent(ScriptedModel([]), [calculator, calculator])
