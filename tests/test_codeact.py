"""The CodeAct loop, driven by the public ScriptedModel against a real sandbox (bwrap where it
works, else the subprocess backend): exact turns, executions, events and observations.

The scripts read the observations they are sent, the way a model would, so every number after
the first reply comes from code the sandbox really ran.
"""

from __future__ import annotations

import asyncio

import pytest
from codeact_scripts import last_observation

from tao import ScriptedModel, prompts, tool
from tao.agents.code_blocks import CODE_GRAMMAR
from tao.agents.codeact import CodeActAgent
from tao.events import (
    Action,
    CodeExecution,
    Error,
    ExecutionFinished,
    FinalAnswer,
    Observation,
    RunFinished,
    RunStarted,
    Thought,
    TokenDelta,
    TurnStarted,
    event_from_dict,
)
from tao.tools.arithmetic import ARITHMETIC, add, avg, divide, subtract, sum_

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"


def run(agent: CodeActAgent, task: str):
    events: list = []
    result = agent.run(task, sinks=[events.append])
    return result, events


def test_seed_xiaoming_two_turns_one_execution():
    model = ScriptedModel([
        "先算书和笔一共花了多少钱，再从 50 元里减去。\n```python\n"
        "spent = add(multiply(3, 12), multiply(2, 5))\nleft = subtract(50, spent)\nprint(left)\n```",
        lambda messages: f"他还剩 {last_observation(messages)} 元。",
    ])
    result, events = run(CodeActAgent(model), XIAOMING)
    assert result.ok and result.answer == "他还剩 4 元。"
    assert (result.turns, result.tool_calls) == (2, 1)
    kinds = [type(e) for e in events if type(e) is not TokenDelta]
    assert kinds == [RunStarted, TurnStarted, Thought, CodeExecution, *[Action, Observation] * 4,
                     ExecutionFinished, TurnStarted, FinalAnswer, RunFinished]
    calls = [(e.call.name, e.call.arguments) for e in events if type(e) is Action]
    assert calls == [("multiply", {"a": 3, "b": 12}), ("multiply", {"a": 2, "b": 5}),
                     ("add", {"a": 36, "b": 10}), ("subtract", {"a": 50, "b": 46})]
    assert [e.content for e in events if type(e) is Observation] == ["36", "10", "46", "4"]
    code = next(e for e in events if type(e) is CodeExecution)
    done = next(e for e in events if type(e) is ExecutionFinished)
    assert "subtract(50, spent)" in code.code
    assert (done.stdout, done.error, done.observation, done.turn) == ("4\n", None, "4", 1)
    assert done.duration_s > 0
    # the prompt followed the task's language and listed the seed's helpers
    system = model.calls[0][0].content
    assert "代码" in system and "final_answer(结果)" in system
    for name in ("add(", "subtract(", "multiply(", "divide(", "sum(", "avg(", "final_answer("):
        assert name in system


def test_state_persists_across_turns():
    model = ScriptedModel([
        "```python\nbooks = 3 * 12\npens = 2 * 5\n```",
        "```python\nprint(50 - books - pens)\n```",
        lambda messages: f"He has {last_observation(messages)} left.",
    ])
    result, events = run(CodeActAgent(model), "How much is left?")
    assert result.answer == "He has 4 left." and (result.turns, result.tool_calls) == (3, 2)
    first = [e for e in events if isinstance(e, ExecutionFinished)][0]
    assert first.observation == "[no output]"


def test_failing_code_is_read_and_fixed():
    def fix(messages):
        seen = last_observation(messages)
        assert "NameError" in seen and "totl" in seen and "Traceback" in seen
        assert "_worker" not in seen and "tao" not in seen  # trimmed to the model's own lines
        return "A typo.\n```python\nprint(total * 2)\n```"

    model = ScriptedModel([
        "```python\ntotal = 21\nprint(totl * 2)\n```",
        fix,
        lambda messages: f"The result is {last_observation(messages)}.",
    ])
    result, events = run(CodeActAgent(model), "Double 21")
    assert result.answer == "The result is 42." and result.tool_calls == 2
    runs = [e for e in events if isinstance(e, ExecutionFinished)]
    assert runs[0].error and "NameError" in runs[0].error and runs[1].error is None


@tool
def price_of(item: str) -> dict:
    """The unit price and currency of an item in the shop.

    Args:
        item: the item's name
    """
    prices = {"book": 12, "pen": 5}
    if item not in prices:
        raise KeyError(f"no such item: {item}")
    return {"price": prices[item], "currency": "CNY"}


def test_tool_bridge_round_trip_and_tool_errors_raise_inside():
    code = ("p = price_of('book')\nprint(type(p).__name__, p['price'] * 3, p['currency'])\n"
            "try:\n    price_of('lamp')\nexcept ToolError as e:\n    print('failed:', e)\n")
    model = ScriptedModel([f"```python\n{code}```",
                           lambda messages: last_observation(messages)])
    agent = CodeActAgent(model, [price_of])
    result, _ = run(agent, "What do 3 books cost?")
    lines = result.answer.splitlines()
    assert lines[0] == "dict 36 CNY"
    assert lines[1].startswith("failed:") and "no such item: lamp" in lines[1]
    system = model.calls[0][0].content
    assert "price_of(item: str)" in system and "unit price and currency" in system


def test_final_answer_in_code_ends_the_run_in_one_turn():
    model = ScriptedModel(["```python\nleft = 50 - 3 * 12 - 2 * 5\nfinal_answer(left)\n"
                           "print('never')\n```"])
    result, events = run(CodeActAgent(model), XIAOMING)
    assert result.ok and result.answer == "4" and (result.turns, result.tool_calls) == (1, 1)
    assert [e.text for e in events if isinstance(e, FinalAnswer)] == ["4"]
    done = next(e for e in events if isinstance(e, ExecutionFinished))
    assert "never" not in done.stdout


def test_final_answer_with_text_and_a_float():
    result, _ = run(CodeActAgent(ScriptedModel(["```python\nfinal_answer(f'{7 / 2} km')\n```"])), "x")
    assert result.answer == "3.5 km"
    result, _ = run(CodeActAgent(ScriptedModel(["```python\nfinal_answer(26.0)\n```"])), "x")
    assert result.answer == "26"


def test_plain_text_answer_without_code_and_label_stripped():
    result, _ = run(CodeActAgent(ScriptedModel(["执行结果：42 元。"])), "6 * 7 元?")
    assert result.answer == "42 元。"
    result, events = run(CodeActAgent(ScriptedModel(["Final Answer: 42"])), "What is 6 * 7?")
    assert result.answer == "42" and (result.turns, result.tool_calls) == (1, 0)
    assert not [e for e in events if isinstance(e, CodeExecution)]


def test_several_blocks_run_in_order_and_a_failure_skips_the_rest():
    model = ScriptedModel([
        "```python\nx = 2\n```\nthen\n```python\nprint(x + 1)\n```",
        "```python\n1 / 0\n```\n```python\nprint('not run')\n```",
        lambda messages: "done: " + last_observation(messages).replace("\n", " | "),
    ])
    agent = CodeActAgent(model)
    result, events = run(agent, "go")
    assert result.tool_calls == 3  # the skipped block did not run
    assert [e.index for e in events if isinstance(e, CodeExecution)] == [1, 2, 1]
    assert last_observation(model.calls[1]) == "3"
    second = last_observation(model.calls[2])
    assert "ZeroDivisionError" in second and "1 block(s) after it" in second
    assert "not run" not in second.replace("did not run", "")


def test_empty_reply_is_corrected_and_the_run_goes_on():
    model = ScriptedModel(["", "Four."])
    result, events = run(CodeActAgent(model), "2 + 2?")
    assert result.answer == "Four." and result.turns == 2
    errors = [e for e in events if isinstance(e, Error)]
    assert len(errors) == 1 and errors[0].recoverable
    assert model.calls[1][-1].content.startswith("Your reply was empty")


def test_turn_budget():
    model = ScriptedModel(["```python\nprint(1)\n```"] * 2)
    result, _ = run(CodeActAgent(model, max_turns=2), "loop")
    assert result.status == "max_turns" and result.answer is None and result.tool_calls == 2
    with pytest.raises(ValueError):
        CodeActAgent(model, max_turns=0)


def test_a_given_sandbox_is_reused_across_runs_and_left_open():
    from tao.sandbox import get_sandbox

    async def main():
        async with get_sandbox() as sandbox:
            agent = CodeActAgent(ScriptedModel(["```python\nmemo = 'kept'\n```", "ok"]),
                                 sandbox=sandbox)
            await agent.arun("remember")
            agent = CodeActAgent(ScriptedModel(["```python\nprint(memo, add(1, 2))\n```",
                                                lambda m: last_observation(m)]), sandbox=sandbox)
            result = await agent.arun("recall")
            assert result.answer == "kept 3"
            again = await sandbox.execute("print(memo)")  # still open after both runs
            assert again.stdout == "kept\n"

    asyncio.run(main())


def test_own_sandbox_is_closed_at_the_end(monkeypatch):
    import tao.sandbox as sandboxes

    made = []
    real = sandboxes.get_sandbox

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(sandboxes, "get_sandbox", spy)
    result, _ = run(CodeActAgent(ScriptedModel(["```python\nprint(1)\n```", "1"])), "one")
    assert result.ok and len(made) == 1 and made[0]._closed
    assert "add" in made[0].tool_names


def test_a_model_failure_ends_the_run_with_error_status():
    result, events = run(CodeActAgent(ScriptedModel([])), "nothing scripted")
    assert result.status == "error" and "ScriptExhausted" in result.error
    assert isinstance(events[-1], RunFinished)


def test_prompt_in_both_languages_lists_tools_with_docstrings():
    agent = CodeActAgent(ScriptedModel([]), [price_of])
    for lang in ("en", "zh"):
        prompt = agent.prompt(lang)
        assert "final_answer(" in prompt and "Python" in prompt
        assert "avg(numbers: list)" in prompt and "The average" in prompt
        question, reply = agent.example(lang)  # a worked exchange, sent before the task
        assert (question.role, reply.role) == ("user", "assistant")
        assert reply.content.startswith("```python\n") and "final_answer(" in reply.content
        assert "小明" not in question.content and "Xiao Ming" not in question.content
    assert CodeActAgent(ScriptedModel([]), helpers=False).toolbox.names == []
    # a tool the user gives wins over a helper of the same name
    @tool
    def add(x: str, y: str) -> str:
        """Concatenate."""
        return x + y
    agent = CodeActAgent(ScriptedModel([]), [add])
    assert agent.toolbox["add"] is add and agent.toolbox.names.count("add") == 1


def test_the_example_precedes_the_task_unless_the_prompt_is_replaced():
    model = ScriptedModel(["```python\nfinal_answer(6 * 7)\n```"] * 2)
    assert CodeActAgent(model).run("6 * 7?").answer == "42"
    roles = [m.role for m in model.calls[0]]
    assert roles == ["system", "user", "assistant", "user"] and model.calls[0][-1].content == "6 * 7?"
    CodeActAgent(model, system_prompt="Write Python.").run("6 * 7?")
    assert [m.content for m in model.calls[1]] == ["Write Python.", "6 * 7?"]


def test_model_kwargs_grammar_only_where_enforced():
    model = ScriptedModel([])
    assert "grammar" not in CodeActAgent(model).model_kwargs()
    assert CodeActAgent(model).model_kwargs()["stop"]
    model.supports_grammar = True
    kwargs = CodeActAgent(model).model_kwargs()
    assert kwargs["grammar"] == CODE_GRAMMAR and "stop" not in kwargs


def test_code_events_round_trip_through_json():
    for e in (CodeExecution("print(1)", 2, 1),
              ExecutionFinished("1\n", None, 2, 0.01, "", None, "1"),
              ExecutionFinished("", "Traceback ...", 3, 0.5, "warn", "timeout", "...")):
        assert event_from_dict(e.to_dict()) == e
    assert CodeExecution("x", 1).to_dict()["type"] == "code"
    assert ExecutionFinished("", None, 1).to_dict()["type"] == "execution"


def test_arithmetic_helpers():
    assert [t.name for t in ARITHMETIC] == ["add", "subtract", "multiply", "divide", "sum", "avg"]
    assert subtract(50, 46) == 4 and isinstance(subtract(50, 46), int)
    assert add(0.1, 0.2) == 0.3 and divide(7, 2) == 3.5
    assert sum_([1, 2, 3.5]) == 6.5 and avg([2, 4, 9]) == 5
    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
    with pytest.raises(ValueError):
        avg([])


class GrammarScriptedModel(ScriptedModel):
    """A ScriptedModel that says it enforces grammars and records the grammar of each call."""

    supports_grammar = True

    def __init__(self, replies):
        super().__init__(replies)
        self.grammars: list[str | None] = []

    def stream(self, messages, **kwargs):
        self.grammars.append(kwargs.get("grammar"))
        return super().stream(messages, **kwargs)


def test_grammar_every_turn_and_a_reminder_only_after_clean_runs():
    """Under the grammar every reply is a block; the answer comes from final_answer(). After a
    block that ran cleanly without answering, the observation reminds the model of
    final_answer(); after an error it does not (the model should fix the code)."""
    model = GrammarScriptedModel([
        "```python\nprint(totl)\n```",
        "```python\nx = 6 * 7\nprint(x)\n```",
        "```python\nfinal_answer(x)\n```",
    ])
    result, _ = run(CodeActAgent(model), "6 * 7?")
    assert (result.answer, result.turns, result.tool_calls) == ("42", 3, 3)
    assert model.grammars == [CODE_GRAMMAR] * 3
    after_error, after_output = (m.content for m in result.messages if m.role == "user"
                                 and m.content.startswith("Observation:"))
    reminder = prompts.table("codeact")["en"]["unanswered"]
    assert "NameError" in after_error and reminder not in after_error
    assert after_output == "Observation:\n42" + reminder


def test_a_numeric_final_answer_reads_without_float_noise():
    model = ScriptedModel(["```python\nfinal_answer(240 * 0.8 - 20)\n```"])
    assert CodeActAgent(model).run("price?").answer == "172"


# -- the formats of other models, and replies that are not answers ------------------------------

def test_execute_tags_run_and_a_solution_ends_the_run():
    """The issue's reproduction: an <execute> reply used to be "done" with the raw reply as the
    answer and nothing run."""
    model = ScriptedModel([
        "<execute>\nprint(6*7)\n</execute>",
        lambda m: f"The answer is <solution> {last_observation(m)} </solution>.",
    ])
    result, events = run(CodeActAgent(model), "6*7?")
    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "42", 2, 1)
    assert [e.code for e in events if isinstance(e, CodeExecution)] == ["print(6*7)"]


def test_a_solution_beside_code_waits_for_the_output():
    model = ScriptedModel(["<execute> print(3 * 4) </execute>\n<solution> 13 </solution>",
                           lambda m: f"<solution> {last_observation(m)} </solution>"])
    result, _ = run(CodeActAgent(model), "3 * 4?")
    assert (result.answer, result.turns, result.tool_calls) == ("12", 2, 1)
    seen = model.calls[1][-1].content
    assert "12" in seen and "<solution> was written before this output" in seen


@pytest.mark.parametrize("reply, told", [
    ("```bash\necho 42\n```", "a ```bash block (only Python runs here)"),
    ("<execute>\n</execute>", "an empty <execute>"),
    ("<thought> I will add them. </thought>", "a <thought> tag with neither code nor a <solution>"),
    ("Let me compute:\nprint(6 * 7", "code outside a code block (print(6 * 7)"),
    ("The result is:\n```\n42\n```", "``` (not Python code)"),
])
def test_a_marker_without_runnable_code_is_corrected_not_taken_as_the_answer(reply, told):
    model = ScriptedModel([reply, "```python\nfinal_answer(6 * 7)\n```"])
    result, events = run(CodeActAgent(model), "6 * 7?")
    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "42", 2, 1)
    errors = [e for e in events if isinstance(e, Error)]
    assert len(errors) == 1 and errors[0].recoverable and errors[0].turn == 1
    correction = model.calls[1][-1].content
    assert told in correction
    assert "```python\nresult = 6 * 7\nfinal_answer(result)\n```" in correction  # the exact format


def test_corrections_are_bounded_by_max_turns_and_speak_the_tasks_language():
    model = ScriptedModel(["```bash\nls\n```"] * 3)
    result, events = run(CodeActAgent(model, max_turns=3), "小明有几本书？")
    assert (result.status, result.answer, result.tool_calls) == ("max_turns", None, 0)
    assert sum(isinstance(e, Error) for e in events) == 3
    assert model.calls[1][-1].content.startswith("回复里有一个 ```bash 代码块")


# -- the sandbox that ran the code is named -----------------------------------------------------

def test_the_sandbox_is_named_in_run_started_the_result_and_json():
    from tao.sandbox import get_sandbox

    result, events = run(CodeActAgent(ScriptedModel(["```python\nfinal_answer(1)\n```"])), "one")
    started = events[0]
    assert isinstance(started, RunStarted) and started.sandbox == result.sandbox
    kind = get_sandbox().kind  # what the default chooses here
    assert result.sandbox.startswith(kind)
    assert result.to_dict()["sandbox"] == result.sandbox
    assert event_from_dict(started.to_dict()) == started
    # a trace written before the field existed still reads
    old = {"type": "run_started", "task": "t", "agent": "codeact", "model": "m"}
    assert event_from_dict(old) == RunStarted("t", "codeact", "m")
    assert event_from_dict(old).sandbox is None


def test_sandbox_by_name_and_a_backend_that_cannot_run_ends_the_run_at_once(monkeypatch):
    import tao.sandbox as sandboxes

    result, _ = run(CodeActAgent(ScriptedModel(["```python\nfinal_answer(2)\n```"]),
                                 sandbox="subprocess"), "two")
    assert result.answer == "2" and result.sandbox.startswith("subprocess")
    with pytest.raises(ValueError, match="choose one of"):
        CodeActAgent(ScriptedModel([]), sandbox="firejail")

    def unavailable(*args, **kwargs):
        raise sandboxes.SandboxUnavailable("the bwrap sandbox cannot run here: execvp failed")

    monkeypatch.setattr(sandboxes, "get_sandbox", unavailable)
    model = ScriptedModel(["```python\nfinal_answer(3)\n```"])
    result, events = run(CodeActAgent(model), "three")
    assert (result.status, result.turns, result.tool_calls, model.calls) == ("error", 0, 0, [])
    assert "execvp failed" in result.error and 'sandbox="subprocess"' in result.error
    assert [type(e) for e in events] == [RunStarted, Error, RunFinished]


def test_console_header_names_the_sandbox():
    import io

    from rich.console import Console

    from tao.sinks.console import ConsoleSink

    out = io.StringIO()
    sink = ConsoleSink(Console(file=out, width=200))
    sink(RunStarted("6 * 7?", "codeact", "scripted", "bwrap · namespaces"))
    sink(RunStarted("6 * 7?", "react", "scripted"))
    first, second = out.getvalue().splitlines()
    assert first.endswith("(codeact · scripted · bwrap · namespaces)")
    assert second.endswith("(react · scripted)")
