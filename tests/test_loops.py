"""A run that loops is stopped (issue 26, points 5 and 6).

Small models send the same failing call again and again (``calculate("3*x + 17 = 80")``, five
times in a row, each answered ``invalid syntax``), and CodeAct models the same failing block. The
second identical failure in a row is said in its result; a third identical send is not run: the
run ends with ``status="budget"`` and the reason. A budget also holds when the loop is the very
same call object, as a script's ``[tool_call(...)] * 10`` is.

Plan-and-Execute's retries are not the model's: the executor retries a step on purpose, with
backoff, up to ``max_retries`` (a flaky service fails the same way, then works), and a step that
fails for good goes back to the planner (``tests/test_plan.py``).
"""

from __future__ import annotations

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.events import Error, FinalAnswer, Observation


def solver(ran: list, side_effects: bool = True):
    @tool(side_effects=side_effects)
    def calculate(expression: str) -> float:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. 3 * 7 + 17
        """
        ran.append(expression)
        if "=" in expression:
            raise ValueError("invalid syntax")
        return eval(expression, {"__builtins__": {}})  # the test's own expressions

    return calculate


def observations(events):
    return [e.content for e in events if type(e) is Observation]


# -- point 5: a budget holds against a loop ------------------------------------------------------

def test_the_identical_call_repeated_is_counted_against_max_tool_calls():
    same = tool_call("calculator", operation="add", a=1, b=1)
    model = ScriptedModel([same] * 10 + ["2"])
    result = ReActAgent(model, tools=[calculator], max_tool_calls=3).run("1 + 1?")
    assert result.status == "budget"
    assert result.tool_calls == 3
    assert result.error == "max_tool_calls=3: call 4 refused"


def test_ten_different_calls_stop_at_the_same_budget():
    calls = [tool_call("calculator", operation="add", a=i, b=1) for i in range(10)]
    result = ReActAgent(ScriptedModel(calls + ["2"]), tools=[calculator], max_tool_calls=3).run("?")
    assert (result.status, result.tool_calls) == ("budget", 3)


# -- point 6: the same failing action is not sent a third time -----------------------------------

def test_react_is_told_after_two_identical_failures_and_stopped_at_the_third():
    ran: list = []
    model = ScriptedModel([tool_call("calculate", expression="3*x + 17 = 80")] * 6 + ["21"])
    events: list = []
    result = ReActAgent(model, tools=[solver(ran)]).run("3x + 17 = 80, x = ?", sinks=[events.append])
    assert ran == ["3*x + 17 = 80"] * 2  # the third identical call never ran
    first, second = observations(events)
    assert "invalid syntax" in first and "twice in a row" not in first
    assert "failed twice in a row" in second and "final answer" in second
    assert result.status == "budget" and result.turns == 3
    assert result.error.startswith("stuck: the same call of 'calculate' failed 2 times in a row")
    assert [e for e in events if type(e) is Error][-1].message.endswith(result.error)


def test_a_changed_call_after_the_warning_goes_on_and_can_answer():
    ran: list = []
    script = [tool_call("calculate", expression="3*x + 17 = 80")] * 2 + [
        tool_call("calculate", expression="(80 - 17) / 3"), "21"]
    result = ReActAgent(ScriptedModel(script), tools=[solver(ran)]).run("3x + 17 = 80, x = ?")
    assert result.status == "done" and result.answer == "21"
    assert ran == ["3*x + 17 = 80", "3*x + 17 = 80", "(80 - 17) / 3"]


def test_failures_that_alternate_are_not_a_streak():
    ran: list = []
    a, b = (tool_call("calculate", expression=e) for e in ("x = 1", "y = 2"))
    result = ReActAgent(ScriptedModel([a, b, a, b, "?"]), tools=[solver(ran)]).run("?")
    assert result.status == "done" and len(ran) == 4


def test_the_warning_is_in_chinese_for_a_chinese_task():
    ran: list = []
    model = ScriptedModel([tool_call("calculate", expression="3*x + 17 = 80")] * 3)
    events: list = []
    result = ReActAgent(model, tools=[solver(ran)]).run("一个数的 3 倍加上 17 等于 80，这个数是多少？",
                                                       sinks=[events.append])
    assert "连续失败两次" in observations(events)[1]
    assert result.error.startswith("卡住了")


def test_codeact_does_not_run_the_same_failing_block_a_third_time():
    block = "```python\nprint(1 / 0)\n```"
    events: list = []
    result = CodeActAgent(ScriptedModel([block] * 5 + ["0"])).run(
        "1/0?", sinks=[events.append])
    assert result.status == "budget" and result.tool_calls == 2
    assert "the same code block failed 2 times in a row" in result.error
    told = [m.content for m in result.messages if m.role == "user"][-1]
    assert "ZeroDivisionError" in told and "failed twice in a row" in told
    assert not [e for e in events if type(e) is FinalAnswer]


def test_codeact_that_fixes_its_block_is_not_stopped():
    script = ["```python\nprint(1 / 0)\n```"] * 2 + ["```python\nprint(1 / 1)\n```",
                                                    "1.0"]
    result = CodeActAgent(ScriptedModel(script)).run("1/1?")
    assert result.status == "done" and result.answer == "1.0"


def test_a_working_call_beside_the_failing_one_does_not_hide_the_loop():
    ran: list = []
    turn = [tool_call("calculate", expression="3*x + 17 = 80"), tool_call("calculate", expression="1 + 1")]
    result = ReActAgent(ScriptedModel([turn] * 6 + ["21"]), tools=[solver(ran, False)]).run("x?")
    assert result.status == "budget" and ran.count("3*x + 17 = 80") == 2
    ran.clear()  # a tool with side effects: its first working call may have changed what the
    # failing one acts on, so that one gets two more tries; the same working call again does not
    result = ReActAgent(ScriptedModel([turn] * 6 + ["21"]), tools=[solver(ran)]).run("x?")
    assert result.status == "budget" and ran.count("3*x + 17 = 80") == 3
