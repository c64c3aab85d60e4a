"""What a model or a tool can send that used to end a run: deep nesting, huge numbers, long
expression chains, lone surrogates, tools raising SystemExit / KeyboardInterrupt / other
BaseExceptions. Each becomes an observation and the run goes on, with its trace complete; only the
user (a real Ctrl-C, cancelling the run's task) stops it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

import pytest
from plan_scripts import of, plan_reply, step

from tao import ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.agents.text_parser import ParseFailure, parse_arguments, parse_reply
from tao.events import Error, FinalAnswer, Observation, RunFinished, StepFailed
from tao.messages import ToolCall
from tao.plan.agent import PlanExecuteAgent
from tao.plan.schema import PlanInvalid, load_json
from tao.safe_json import MAX_DEPTH, dumps
from tao.sinks import JsonlTrace, read_trace
from tao.tools.base import Toolbox, to_text

PROTOCOLS = ["tools", "text"]


def reply(protocol: str, name: str, **arguments):
    if protocol == "tools":
        return tool_call(name, **arguments)
    return f"Thought: I use {name}\nAction: {name}\nAction Input: {json.dumps(arguments)}"


def final(protocol: str, answer: str) -> str:
    return answer if protocol == "tools" else f"Thought: done\nFinal Answer: {answer}"


def traced_run(agent, task, tmp_path):
    """Run with a JSONL trace; the events read back from the file (the file must be valid UTF-8)."""
    path = tmp_path / "run.jsonl"
    with JsonlTrace(path) as trace:
        result = agent.run(task, sinks=[trace])
    for line in path.read_bytes().decode("utf-8").splitlines():  # strict UTF-8, one JSON a line
        json.loads(line)
    return result, read_trace(path)


def nested(depth: int):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


# -- deep nesting and huge numbers in what the model writes --------------------------------------

def test_992_nested_brackets_in_action_input_are_a_parse_error_not_a_recursion_error():
    text = 'Thought: t\nAction: calculator\nAction Input: {"a": ' + "[" * 992 + "]" * 992 + "}"
    parsed = parse_reply(text, {"calculator": ["operation", "a", "b"]})
    assert isinstance(parsed, ParseFailure) and parsed.reason == "bad_input"
    assert f"nested more than {MAX_DEPTH} levels deep" in parsed.values["error"]
    # unclosed, and far deeper than the interpreter's recursion limit
    assert parse_arguments('{"a": ' + "[" * 100_000, ["a"]) == (
        None, f"nested more than {MAX_DEPTH} levels deep at character 0")
    # Python literal and call syntax go through ast, which has its own limits
    assert parse_arguments("{'a': " + "[" * 5000 + "]" * 5000 + "}", ["a"])[0] is None
    assert parse_arguments("(" + "[" * 150 + "]" * 150 + ")", ["a"])[0] is None


def test_nesting_up_to_the_limit_still_parses():
    args, error = parse_arguments(json.dumps({"a": nested(MAX_DEPTH - 1)}), ["a"])
    assert error is None and args == {"a": nested(MAX_DEPTH - 1)}


def test_a_number_of_5000_digits_is_a_parse_error_and_a_result_of_5000_digits_reads():
    assert parse_arguments('{"a": ' + "9" * 5000 + "}", ["a"]) == (
        None, "a number has too many digits at character 0")
    assert to_text(10**5000) == "1.000000000000000e+5000 (an integer of 5001 digits)"
    assert to_text(-(10**5000)).startswith("-1.000000000000000e+5000")
    assert to_text({"n": 10**5000}) == '{"n": "<an integer of about 5001 digits>"}'


def test_a_3000_term_expression_chain_is_read_as_text_for_the_tool():
    chain = "+".join(["1"] * 3000)
    assert parse_arguments(f'{{"expression": "{chain}"}}', ["expression"]) == ({"expression": chain}, None)
    args, error = parse_arguments(f"expression={chain}", ["expression"])  # call syntax: ast
    assert error is None and args is not None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_deeply_nested_tool_arguments_are_an_observation_and_the_run_goes_on(protocol, tmp_path):
    bad = (tool_call("calculator", operation="add", a=nested(500), b=1) if protocol == "tools" else
           'Action: calculator\nAction Input: {"operation": "add", "a": ' + json.dumps(nested(120))
           + ', "b": 1}')
    model = ScriptedModel([bad, reply(protocol, "calculator", operation="add", a=1, b=2),
                           final(protocol, "3")])
    result, events = traced_run(ReActAgent(model, [calculator], protocol=protocol), "1+2?", tmp_path)

    assert (result.status, result.answer, result.turns) == ("done", "3", 3)
    assert type(events[-1]) is RunFinished
    if protocol == "tools":
        first = of(events, Observation)[0]
        assert first.is_error and "nested more than 100 levels deep" in first.content
        # the trace keeps 100 levels of the Action's arguments and a note, so it reads back
        assert "<nested more than 100 levels deep>" in (tmp_path / "run.jsonl").read_text("utf-8")
    else:
        [error] = of(events, Error)
        assert error.recoverable and "nested more than 100 levels deep" in error.message
    assert of(events, Observation)[-1].content == "3"


def test_a_plan_nested_too_deep_is_an_invalid_plan():
    with pytest.raises(PlanInvalid, match="nested more than 100 levels deep"):
        load_json('{"steps": ' + "[" * 5000)
    with pytest.raises(PlanInvalid, match="too many digits"):
        load_json('{"steps": [], "answer": ' + "7" * 5000 + "}")


# -- lone surrogates -----------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_lone_surrogate_in_model_text_keeps_the_trace_whole_and_reads_back(protocol, tmp_path):
    model = ScriptedModel([reply(protocol, "calculator", operation="add", a=1, b=2),
                           final(protocol, "三 \udcff 3")])
    result, events = traced_run(ReActAgent(model, [calculator], protocol=protocol), "1+2?", tmp_path)

    assert result.status == "done" and result.answer == "三 \udcff 3"
    assert of(events, FinalAnswer)[0].text == "三 \udcff 3"  # the same string, read back
    assert events[-1].result.answer == "三 \udcff 3"
    assert "三" in (tmp_path / "run.jsonl").read_text("utf-8")  # Chinese stays readable


def test_a_surrogate_in_tool_arguments_and_results_reaches_the_trace_intact(tmp_path):
    @tool
    def echo(text: str) -> dict:
        """Echo the text back.

        Args:
            text: any text
        """
        return {"echo": text}

    model = ScriptedModel([tool_call("echo", text="a\ud800b"), "ok"])
    result, events = traced_run(ReActAgent(model, [echo]), "echo", tmp_path)
    assert result.status == "done"
    assert events[2].call.arguments == {"text": "a\ud800b"}  # Action
    assert json.loads(of(events, Observation)[0].content) == {"echo": "a\ud800b"}


def test_dumps_never_raises_and_always_encodes():
    loop: list = []
    loop.append(loop)

    class Weird:
        def __str__(self):
            raise RuntimeError("no")

    for value in (nested(5000), loop, {"n": 10**5000}, Weird(), {"s": "\udcff"}, {1: "x"}):
        dumps(value).encode("utf-8")
    assert json.loads(dumps({"s": "\udcff", "t": "中"})) == {"s": "\udcff", "t": "中"}


# -- tools that raise what is not an Exception ----------------------------------------------------

class Halt(BaseException):
    """A BaseException of a tool's own, like gevent's GreenletExit or trio's Cancelled."""


def raising(exc: BaseException, *, asynchronous: bool = False, timeout: float | None = None):
    if asynchronous:
        async def fail(x: int) -> int:
            raise exc
    else:
        def fail(x: int) -> int:
            raise exc
    fail.__doc__ = "A tool that fails."
    return tool(fail, timeout=timeout)


EXCEPTIONS = {
    "SystemExit": (SystemExit(3), "SystemExit: 3"),
    "sys.exit()": (SystemExit(), "SystemExit"),
    "KeyboardInterrupt": (KeyboardInterrupt(), "KeyboardInterrupt"),
    "GeneratorExit": (GeneratorExit("closed"), "GeneratorExit: closed"),
    "own BaseException": (Halt("stop"), "Halt: stop"),
    "own CancelledError": (asyncio.CancelledError(), "CancelledError"),
}
HOW = {"inline": {}, "async": {"asynchronous": True}, "thread": {"timeout": 5.0},
       "async+timeout": {"asynchronous": True, "timeout": 5.0}}


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("name", EXCEPTIONS)
async def test_toolbox_execute_turns_every_base_exception_of_a_tool_into_an_error(name, how):
    exc, text = EXCEPTIONS[name]
    res = await Toolbox([raising(exc, **HOW[how])]).execute(ToolCall("1", "fail", {"x": 1}))
    assert res.is_error and res.content == f"Error: {text} (raised by the tool; the run goes on)"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "own BaseException"])
def test_react_goes_on_after_a_tool_raises_a_base_exception(protocol, name, tmp_path):
    exc, text = EXCEPTIONS[name]
    model = ScriptedModel([reply(protocol, "fail", x=1),
                           reply(protocol, "calculator", operation="add", a=1, b=2),
                           final(protocol, "3")])
    agent = ReActAgent(model, [raising(exc), calculator], protocol=protocol)
    result, events = traced_run(agent, "1+2?", tmp_path)

    assert (result.status, result.answer, result.tool_calls) == ("done", "3", 2)
    first, second = of(events, Observation)
    assert first.is_error and first.content.startswith(f"Error: {text}")
    assert second.content == "3" and type(events[-1]) is RunFinished


def test_react_runs_two_calls_in_one_turn_when_one_exits():
    model = ScriptedModel([[tool_call("fail", x=1), tool_call("calculator", operation="add", a=1, b=2)],
                           "3"])
    result = ReActAgent(model, [raising(SystemExit(1)), calculator]).run("1+2?")
    assert result.status == "done" and result.tool_calls == 2


def test_a_plan_step_whose_tool_exits_fails_and_the_replan_finishes(tmp_path):
    bad = {"steps": [{"id": "step1", "description": "fail", "tool": "fail", "args": {"x": 1},
                      "depends_on": []}], "answer": "$step1"}
    good = {"steps": [step(2, "add", 1, 2)], "answer": "$step2"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(bad), plan_reply(good)]),
                             [raising(SystemExit(2)), calculator], max_retries=1, retry_backoff=0)
    result, events = traced_run(agent, "1+2?", tmp_path)

    assert (result.status, result.answer) == ("done", "3")
    [failed] = of(events, StepFailed)
    assert failed.attempts == 2 and "SystemExit: 2" in failed.error
    assert type(events[-1]) is RunFinished


def test_a_plan_whose_tool_exits_and_no_replan_left_ends_with_a_clean_error(tmp_path):
    bad = {"steps": [{"id": "step1", "description": "fail", "tool": "fail", "args": {"x": 1},
                      "depends_on": []}], "answer": "$step1"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(bad)]), [raising(KeyboardInterrupt())],
                             max_retries=0, max_replans=0)
    result, events = traced_run(agent, "x", tmp_path)
    assert result.status == "error" and "KeyboardInterrupt" in result.error
    assert type(events[-1]) is RunFinished and events[-1].result.status == "error"


def test_a_ray_worker_reports_a_tools_system_exit_as_its_error():
    from tao.plan.ray_executor import _call

    def exits(x):
        sys.exit(f"bye {x}")

    assert _call(exits, False, {"x": 1}) == (False, "Error: SystemExit: bye 1 (raised by the tool; "
                                             "the run goes on)", True)


# -- what the user does still stops the run ------------------------------------------------------

def sigint_tool(times: int, asynchronous: bool = False):
    """A tool the user presses Ctrl-C on ``times`` times (the signal is sent to this process)."""
    reached = []

    def long_job(x: int) -> str:
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here, between bytecodes
        reached.append(True)
        return "finished"

    async def long_async_job(x: int) -> str:
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(0.05)
        reached.append(True)
        return "finished"

    job = long_async_job if asynchronous else long_job
    job.__doc__ = "A long job."
    return tool(job, name="long_job"), reached


def test_ctrl_c_during_a_tool_still_stops_agent_run():
    """Under ``agent.run`` asyncio's handler is in place: the first Ctrl-C cancels the run (the
    tool finishes first), the second raises at once."""
    for times, finished in ((1, [True]), (2, [])):
        job, reached = sigint_tool(times)
        model = ScriptedModel([tool_call("long_job", x=1), "done"])
        with pytest.raises(KeyboardInterrupt):
            ReActAgent(model, [job]).run("go")
        assert reached == finished
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_ctrl_c_during_a_tool_stops_a_run_on_a_loop_of_ones_own(asynchronous):
    """With Python's default handler the Ctrl-C is a KeyboardInterrupt inside the tool: it is the
    user's, and it propagates."""
    job, reached = sigint_tool(1, asynchronous)
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(ReActAgent(ScriptedModel([tool_call("long_job", x=1), "done"]),
                                               [job]).arun("go"))
    finally:
        loop.close()
    assert reached == [] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def test_cancelling_the_run_cancels_a_running_tool():
    started = asyncio.Event()

    @tool
    async def slow(x: int) -> str:
        """A slow job."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    run = asyncio.ensure_future(ReActAgent(ScriptedModel([tool_call("slow", x=1), "x"]), [slow]).arun("go"))
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
