"""Console and JSONL sinks, driven by real ReAct runs on ScriptedModel."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest
from rich.console import Console

from tao import ReActAgent, ScriptedModel, calculate, calculator, tool_call
from tao.events import (Error, FinalAnswer, ModelRetry, Observation, RunFinished, RunStarted,
                        TokenDelta, TurnStarted)
from tao.sinks import ConsoleSink, JsonlTrace, read_trace

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def xiaoming_model(chunk_size: int = 0) -> ScriptedModel:
    return ScriptedModel([
        tool_call("calculator", operation="multiply", a=3, b=12),
        tool_call("calculator", operation="multiply", a=2, b=5),
        tool_call("calculator", operation="add", a=36, b=10),
        tool_call("calculator", operation="subtract", a=50, b=46),
        "他还剩 4 元。",
    ], chunk_size=chunk_size)


def text_model(chunk_size: int = 0) -> ScriptedModel:
    return ScriptedModel([
        'Thought: I need to multiply\nAction: calculator\n'
        'Action Input: {"operation": "multiply", "a": 15, "b": 27}',
        "Thought: I now know the final answer\nFinal Answer: 15 * 27 = 405",
    ], chunk_size=chunk_size)


def new_console(**kw) -> Console:
    return Console(file=io.StringIO(), width=100, **kw)


def render(model, task, *, protocol="tools", **sink_kw) -> tuple[str, object]:
    console = new_console()
    sink = ConsoleSink(console, **sink_kw)
    result = ReActAgent(model, [calculator, calculate], protocol=protocol).run(task, [sink])
    return console.file.getvalue(), result


def test_zh_run_renders_the_chain_with_chinese_turns_and_summary():
    out, result = render(xiaoming_model(), XIAOMING)
    assert result.turns == 5 and result.tool_calls == 4
    positions = [out.index(f"第 {n} 轮") for n in range(1, 6)]
    assert positions == sorted(positions)
    assert "第 6 轮" not in out and "Turn 1" not in out
    assert out.count("Action: calculator") == 4
    assert 'Action Input: {"operation": "multiply", "a": 3, "b": 12}' in out
    for value in ("36", "10", "46", "4"):
        assert f"Observation: {value}\n" in out
    assert "Final Answer: 他还剩 4 元。" in out
    p, c = result.usage.prompt_tokens, result.usage.completion_tokens
    assert re.search(rf"完成：5 轮，4 次工具调用，tokens {p}\+{c}，\d+\.\d\d 秒", out)


def test_thoughts_and_non_ascii_action_input():
    model = ScriptedModel([("先算书的钱", tool_call("calculate", expression="3×12")), "36 元"])
    out, _ = render(model, "三本书每本 12 元，一共多少钱？")
    assert "Thought: 先算书的钱" in out
    assert 'Action Input: {"expression": "3×12"}' in out  # ensure_ascii=False
    assert "完成：2 轮，1 次工具调用" in out


def test_en_text_protocol_run_is_labelled_turn_n():
    out, result = render(text_model(), "What is 15 * 27?", protocol="text")
    assert result.answer == "15 * 27 = 405"
    assert "Turn 1" in out and "Turn 2" in out and "第" not in out
    assert "Thought: I need to multiply\nAction: calculator\n" in out
    assert "Observation: 405" in out
    assert "Final Answer: 15 * 27 = 405" in out
    assert re.search(r"done: 2 turns, 1 tool call, tokens \d+\+\d+, \d+\.\d\d s", out)


@pytest.mark.parametrize("chunk_size", [0, 3])
def test_streamed_tokens_are_not_duplicated(chunk_size):
    out, _ = render(xiaoming_model(chunk_size), XIAOMING)
    assert out.count("他还剩 4 元。") == 1
    out, _ = render(text_model(chunk_size), "What is 15 * 27?", protocol="text")
    assert out.count("I need to multiply") == 1
    assert out.count("15 * 27 = 405") == 1
    assert "Action Input:" in out and out.count("multiply") == 2  # thought + Action Input


def test_streaming_on_a_terminal_uses_a_transient_live_view():
    console = Console(file=io.StringIO(), width=100, height=30, force_terminal=True)
    sink = ConsoleSink(console)
    result = ReActAgent(text_model(3), [calculator], protocol="text").run("What is 15 * 27?", [sink])
    assert result.ok and sink._live is None  # the live view ended with the turn
    raw = console.file.getvalue()
    assert "\x1b[2K" in raw  # the partial text was erased ...
    plain = ANSI.sub("", raw)
    assert "Final Answer: 15 * 27 = 405" in plain  # ... and the tidy chain printed
    assert plain.rstrip().splitlines()[-1].startswith("done: 2 turns")


def test_model_retry_drops_the_partial_text():
    console = Console(file=io.StringIO(), width=100, force_terminal=True)
    sink = ConsoleSink(console)
    sink(RunStarted("What is 1+1?", "react", "scripted"))
    sink(TurnStarted(1))
    sink(TokenDelta("The ans", 1))
    assert sink._partial == "The ans" and sink._live is not None
    sink(ModelRetry(1, 1, "429 Too Many Requests", 1.2))
    assert sink._partial == "" and sink._live is None
    sink(TokenDelta("2", 1))
    assert sink._partial == "2"
    sink(FinalAnswer("2", 1))
    assert sink._live is None
    plain = ANSI.sub("", console.file.getvalue())
    assert "retrying in 1.2 s (attempt 1): 429 Too Many Requests" in plain
    assert "Final Answer: 2" in plain


def test_errors_and_failed_observations_are_coloured():
    console = Console(file=io.StringIO(), width=100, force_terminal=True, color_system="standard")
    sink = ConsoleSink(console)
    sink(RunStarted("x", "react", "scripted"))
    sink(Observation("c1", "calculator", "Error: division by zero", True, 1))
    sink(Error("reply had no Action", 1, recoverable=True))
    sink(Error("RuntimeError: boom", 2))
    raw = console.file.getvalue()
    assert re.search(r"\x1b\[31mError: division by zero", raw)  # red observation
    assert re.search(r"Warning: .*\x1b\[33mreply had no Action", raw)  # yellow warning
    assert re.search(r"Error: .*\x1b\[31mRuntimeError: boom", raw)  # red fatal error


def test_markup_in_model_output_is_printed_verbatim():
    out, _ = render(ScriptedModel(["[bold]x[/bold] costs [red]5[/]"]), "price?")
    assert "Final Answer: [bold]x[/bold] costs [red]5[/]" in out


def test_quiet_prints_only_the_final_answer():
    out, _ = render(xiaoming_model(3), XIAOMING, quiet=True)
    assert out == "他还剩 4 元。\n"


def test_show_tokens_false_and_max_turns_summary():
    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=1)] * 2)
    console = new_console()
    agent = ReActAgent(model, [calculator], max_turns=2)
    result = agent.run("Add forever", [ConsoleSink(console, show_tokens=False)])
    out = console.file.getvalue()
    assert result.status == "max_turns"
    assert "tokens" not in out
    assert re.search(r"turn limit reached: 2 turns, 2 tool calls, \d+\.\d\d s", out)


def run_events(model, task, protocol="tools"):
    events = []
    ReActAgent(model, [calculator, calculate], protocol=protocol).run(task, [events.append])
    return events


@pytest.mark.parametrize("protocol", ["tools", "text"])
def test_jsonl_round_trip_and_replay(tmp_path, protocol):
    model = xiaoming_model(3) if protocol == "tools" else text_model(3)
    task = XIAOMING if protocol == "tools" else "What is 15 * 27?"
    path = tmp_path / "traces" / "run.jsonl"
    events = []
    with JsonlTrace(path) as trace:
        ReActAgent(model, [calculator, calculate], protocol=protocol).run(
            task, [trace, events.append])
    assert trace.file.closed
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(events)
    assert all(isinstance(json.loads(line), dict) for line in lines)
    if protocol == "tools":
        assert "小明" in lines[0]  # ensure_ascii=False

    back = read_trace(path)
    assert back[:-1] == events[:-1]  # everything but the timing of the result is exact
    assert isinstance(back[-1], RunFinished)
    assert [e.to_dict() for e in back] == [e.to_dict() for e in events]
    original, replayed = events[-1].result, back[-1].result
    assert replayed.duration_s == pytest.approx(original.duration_s, abs=1e-6)
    assert replayed.messages == original.messages

    live, replay = new_console(), new_console()
    for sink, stream in ((ConsoleSink(live), events), (ConsoleSink(replay), back)):
        for event in stream:
            sink(event)
    assert replay.file.getvalue() == live.file.getvalue()


def test_jsonl_trace_on_an_open_file_leaves_it_open():
    buf = io.StringIO()
    events = run_events(ScriptedModel(["hi"]), "say hi")
    with JsonlTrace(buf) as trace:
        for event in events:
            trace(event)
    assert not buf.closed
    buf.seek(0)
    assert read_trace(buf)[:-1] == events[:-1]


def test_read_trace_names_a_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "turn_started", "turn": 1}\n\n{"type": "nope"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:3"):
        read_trace(path)


def test_importing_tao_and_sinks_does_not_import_rich():
    code = ("import sys, tao, tao.sinks, tao.models.resolve; "
            "assert not {'rich', 'typer', 'openai'} & set(sys.modules), sys.modules.keys()")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_codeact_code_is_highlighted_and_a_failure_is_red():
    from tao.agents.codeact import CodeActAgent

    model = ScriptedModel(["```python\nprint(totl)\n```", "```python\nprint(6 * 7)\n```", "42"])
    buf = io.StringIO()
    CodeActAgent(model).run("What is 6 * 7?", sinks=[ConsoleSink(Console(
        file=buf, width=100, force_terminal=True, color_system="truecolor"))])
    out = buf.getvalue()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert "Code:" in plain and "1 print(totl)" in plain and "NameError" in plain
    assert "\x1b[1;31mOutput:" in out  # the failed execution is red, the good one green
    assert "\x1b[1;32mOutput:" in out
    assert "3 turns, 2 executions" in plain
