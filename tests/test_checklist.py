"""A checklist before the work (issue 27, point 2): ``agent.checklist()`` (``AgentSpec(...,
checklist=True)``, ``tao code --checklist``, the workbench's box) has the model write, in a call
of its own before the first turn, what a user will check; the items are shown (a ``Checklist``
event, in the console and the workbench), carried in the task, and handed to the answer checks -
the coder's reminder to run its code or try its page lists them. Off by default: on the coder it
did not raise the share of projects that work (BENCHMARKS.md)."""

import io

import pytest

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool_call
from tao.agents.checks import MAX_ITEM_CHARS, MAX_ITEMS, checklist_items
from tao.events import Checklist, RunStarted, TokenDelta, TurnStarted
from tao.workspace import Workspace

CHECKLIST = "- 运行 python3 add.py：打印 5\n- 打开 add.py：代码里没有写死的 5"


def events_of(agent, task):
    import asyncio

    async def collect():
        return [e async for e in agent.stream(task)]

    return asyncio.run(collect())


def test_the_coder_writes_its_checklist_first_and_is_reminded_of_it(tmp_path):
    from tao.factory import CODER, AgentSpec, build_agent

    model = ScriptedModel([CHECKLIST,
                           "Action: write_file【add.py】\n```python\nprint(2 + 3)\n```",
                           "Action: Finish【好了】",  # add.py was never run: reminded
                           "Action: run_command【python3 add.py】",
                           "Action: Finish【好了】"])
    with Workspace(tmp_path, sandbox="subprocess", language="zh") as ws:
        events = events_of(build_agent(AgentSpec(CODER, 6, workspace=ws, checklist=True), model),
                           "写 add.py，运行后打印 2 加 3 的和")

    kinds = [type(e) for e in events if type(e) is not TokenDelta]
    assert kinds[:3] == [RunStarted, Checklist, TurnStarted]  # before the first turn
    checklist = next(e for e in events if type(e) is Checklist)
    assert checklist.items == ["运行 python3 add.py：打印 5", "打开 add.py：代码里没有写死的 5"]
    assert model.calls[0][-1].content == "写 add.py，运行后打印 2 加 3 的和"  # the bare task
    *_, task, listed = model.calls[1]  # the first turn: the task, then the list on its own
    assert task.content == "写 add.py，运行后打印 2 加 3 的和"
    assert listed.content.startswith("检查清单") and "1. 运行 python3 add.py" in listed.content
    reminder = model.calls[3][-1].content
    assert "还没有运行过" in reminder and "2. 打开 add.py：代码里没有写死的 5" in reminder
    result = events[-1].result
    assert result.status == "done" and result.turns == 4  # the checklist's call is no turn


def test_checklist_items_are_read_from_lists_in_both_languages():
    assert checklist_items("Checklist:\n1. Click Add: the list grows\n2) Remove it\n"
                           "- [ ] Reload: it is gone\n* **Bold** item\n3.Type 1.5: 3 shows") == \
        ["Click Add: the list grows", "Remove it", "Reload: it is gone", "Bold item",
         "Type 1.5: 3 shows"]
    assert checklist_items("1.5B model\n-5 degrees") == ["1.5B model", "-5 degrees"]  # no marks
    assert checklist_items("<think>the user wants\n- not this</think>\n- run it: it prints 5") \
        == ["run it: it prints 5"]
    assert checklist_items("清单：\n1、输入 3，点击“加倍”：显示 6\n（2）清空输入：不报错") == \
        ["输入 3，点击“加倍”：显示 6", "清空输入：不报错"]
    assert checklist_items("type 3, press Enter: 6 appears\n\nclick Reset") == \
        ["type 3, press Enter: 6 appears", "click Reset"]  # no marks: every line
    long = checklist_items("\n".join(f"- item {i} " + "x" * 500 for i in range(20)))
    assert len(long) == MAX_ITEMS and all(len(i) == MAX_ITEM_CHARS for i in long)
    assert checklist_items("- same\n- same\n-  \n") == ["same"]
    assert checklist_items("- broken \udcff text") == ["broken \udcff text"]  # kept, not raised
    assert checklist_items("") == []


def test_a_reply_with_no_items_adds_nothing_and_the_run_goes_on():
    model = ScriptedModel(["   \n", "4"])
    agent = ReActAgent(model, [calculator])
    agent.checklist()
    events = events_of(agent, "What is 2 + 2?")
    assert [e.items for e in events if type(e) is Checklist] == [[]]  # the call ended: said
    assert [m.content for m in model.calls[1][1:]] == ["What is 2 + 2?"]
    assert events[-1].result.answer == "4"


def test_any_agent_takes_a_checklist_of_its_own_words():
    model = ScriptedModel(["- the answer is a number", tool_call("calculator", operation="add",
                                                                   a=2, b=2), "4"])
    agent = ReActAgent(model, [calculator])
    agent.checklist("List what a reader of the answer will check.")
    result = agent.run("What is 2 + 2?")
    assert result.answer == "4" and result.turns == 2
    assert model.calls[0][0].content == "List what a reader of the answer will check."
    assert "1. the answer is a number" in model.calls[1][-1].content


def test_codeact_and_plan_carry_the_checklist_too():
    from tao import PlanExecuteAgent

    code = CodeActAgent(ScriptedModel(["- prints 42", "<solution>42</solution>"]), sandbox="subprocess")
    code.checklist()
    events = events_of(code, "Print 42")
    assert [e.items for e in events if type(e) is Checklist] == [["prints 42"]]
    assert events[-1].result.answer == "42"

    plan = {"steps": [{"id": "step1", "description": "add", "tool": "calculator",
                       "args": {"operation": "add", "a": 2, "b": 2}, "depends_on": []}],
            "answer": "$step1"}
    import json

    model = ScriptedModel(["- the sum is right", json.dumps(plan)])
    planner = PlanExecuteAgent(model, [calculator])
    planner.checklist()
    result = planner.run("What is 2 + 2?")
    assert result.answer == "4"
    assert "1. the sum is right" in model.calls[1][-1].content  # the planner plans with it
    checklist_tokens = len("- the sum is right") // 4 + 1  # ScriptedModel: 4 characters a token
    assert result.usage.completion_tokens == checklist_tokens + len(json.dumps(plan)) // 4 + 1
    assert "the sum is right" not in str(model.calls[2:])  # no step agent, replan or synthesis


def test_the_history_still_comes_before_the_task(tmp_path):
    from tao import Session

    session = Session("ann", path=tmp_path / "sessions.db")
    ReActAgent(ScriptedModel(["Noted."])).run("I like tea", session=session)
    model = ScriptedModel(["- the answer names a drink", "Tea."])
    agent = ReActAgent(model)
    agent.checklist()
    assert agent.run("What do I like?", session=session).answer == "Tea."
    sent = [(m.role, m.content) for m in model.calls[1][1:]]
    assert sent[:3] == [("user", "I like tea"), ("assistant", "Noted."), ("user", "What do I like?")]
    assert sent[3][0] == "user" and "1. the answer names a drink" in sent[3][1]


def test_an_agent_that_runs_another_refuses_a_checklist():
    from tao import Vote
    from tao.factory import AgentSpec

    inner = ReActAgent(ScriptedModel([]), [calculator])
    with pytest.raises(TypeError, match="give the checklist to that agent"):
        Vote(inner, n=3).checklist()
    with pytest.raises(ValueError, match="cannot write a checklist"):
        AgentSpec("react", votes=3, checklist=True)


def test_checklist_prompts_must_be_text():
    agent = ReActAgent(ScriptedModel([]))
    with pytest.raises(ValueError, match="non-empty text"):
        agent.checklist({"en": "  "})
    with pytest.raises(ValueError, match="non-empty text"):
        agent.checklist({})


def test_the_console_and_the_coders_view_show_the_checklist(tmp_path):
    from rich.console import Console

    from tao.cli.code_view import CodeView
    from tao.sinks.console import ConsoleSink

    out = io.StringIO()
    sink = ConsoleSink(Console(file=out, width=100))
    sink(RunStarted("数一数", "react", "m"))
    sink(Checklist(["点击加一：显示 1", "再点：显示 2"]))
    assert "检查清单：" in out.getvalue() and "2. 再点：显示 2" in out.getvalue()

    out = io.StringIO()
    view = CodeView(tmp_path, "en", console=Console(file=out, width=100))
    view(TokenDelta("- click", 0))
    view(TokenDelta(" Add", 0))
    view(Checklist(["click Add: 1 shows"]))
    text = out.getvalue()
    assert "writing the checklist" in text and "Checklist:" in text and "1. click Add: 1 shows" in text
    assert "- click Add" not in text  # the raw reply is not printed beside the list


def test_tao_code_checklist_shows_it_before_the_first_turn(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from tao import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: ScriptedModel([
        "1. open note.txt: it says hello",
        "Action: write_file【note.txt】\n```\nhello\n```",
        "Action: Finish【done】"]))
    res = CliRunner().invoke(cli.app, ["code", "Write note.txt saying hello", "--sandbox", "none",
                                       "--checklist"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "writing the checklist...\nChecklist:\n  1. open note.txt: it says hello\n" in out
    assert out.index("Checklist:") < out.index("Turn 1") and "done: 2 turns" in out
    res = CliRunner().invoke(cli.app, ["code", "--help"])
    assert "--checklist" in res.stdout


def test_without_the_flag_no_call_is_made_for_it(tmp_path):
    from tao.factory import CODER, AgentSpec, build_agent

    model = ScriptedModel(["Action: Finish【nothing to do】"])
    ws = Workspace(tmp_path, sandbox=False)
    result = build_agent(AgentSpec(CODER, 3, workspace=ws), model).run("Nothing")
    assert result.answer == "nothing to do" and len(model.calls) == 1


def test_the_checklists_call_is_a_chat_span_of_its_own():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tao

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(["- the answer is 36, a number twelve characters long",
                           tool_call("calculator", operation="multiply", a=3, b=12), "36"])
    agent = ReActAgent(model, [calculator])
    agent.checklist()
    tao.instrument(provider)
    try:
        result = agent.run("3 books at 12 each: how much?")
    finally:
        tao.uninstrument()
    chats = sorted((s for s in exporter.get_finished_spans() if s.name.startswith("chat ")),
                   key=lambda s: s.start_time)
    assert len(chats) == 3  # the checklist, then one a turn, each with its own tokens
    tokens = [c.attributes["gen_ai.usage.output_tokens"] for c in chats]
    assert tokens[0] == len(model.replies[0]) // 4 + 1 and tokens[2] == len("36") // 4 + 1
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == \
        result.usage.completion_tokens


def test_a_write_in_between_makes_the_same_failing_call_a_new_try(tmp_path):
    from tao import tool

    pages = {"index.html": "<p>draft</p>"}

    @tool(side_effects=False)
    def check(page: str) -> str:
        """Check a page."""
        if "done" not in pages[page]:
            raise ValueError(f"{page} is not done")
        return "ok"

    @tool
    def write(page: str, text: str) -> str:
        """Write a page."""
        pages[page] = text
        return "written"

    fail = tool_call("check", page="index.html")
    model = ScriptedModel([fail, tool_call("write", page="index.html", text="<p>still</p>"), fail,
                           tool_call("write", page="index.html", text="<p>done</p>"), fail, "ok"])
    result = ReActAgent(model, [check, write]).run("Finish the page")
    assert result.status == "done" and result.answer == "ok"  # three sends, each after a change
    model = ScriptedModel([fail, fail, fail, "never"])
    pages["index.html"] = "<p>draft</p>"
    result = ReActAgent(model, [check, write]).run("Finish the page")
    assert result.status == "budget" and result.tool_calls == 2  # nothing changed: a loop
    a, b = (tool_call("write", page="index.html", text=t) for t in ("<p>a</p>", "<p>b</p>"))
    model = ScriptedModel([fail, a, fail, b, fail, a, fail, b, fail, "never"])
    result = ReActAgent(model, [check, write]).run("Finish the page")
    assert result.status == "budget" and result.tool_calls == 8  # two edits, back and forth


def test_tao_run_checklist_shows_it_before_the_first_turn(monkeypatch):
    from typer.testing import CliRunner

    from tao import cli

    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: ScriptedModel([
        "1. the answer is in square metres",
        tool_call("calculate", expression="8*5"),
        "40 square metres"]))
    res = CliRunner().invoke(cli.app, ["run", "How large is a room of 8 m by 5 m?", "--checklist"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Checklist:\n  1. the answer is in square metres\n" in out
    assert out.index("Checklist:") < out.index("Turn 1") and "40 square metres" in out
    assert "--checklist" in CliRunner().invoke(cli.app, ["run", "--help"]).stdout


def test_tao_run_plan_checklist_is_drawn_above_the_plan(monkeypatch):
    from typer.testing import CliRunner

    from tao import cli

    plan = ('{"steps": [{"id": "step1", "description": "area", "tool": "calculate", '
            '"args": {"expression": "8*5"}, "depends_on": []}], "answer": "$step1 m2"}')
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: ScriptedModel([
        "- the answer is in square metres", plan]))
    res = CliRunner().invoke(cli.app, ["run", "How large is a room of 8 m by 5 m?", "--agent",
                                       "plan", "--checklist"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Checklist:\n  1. the answer is in square metres\n" in out
    assert out.index("Checklist:") < out.index("Plan ·") and "40 m2" in out


def test_a_vote_cannot_take_a_checklist_on_the_command_line():
    from typer.testing import CliRunner

    from tao import cli

    res = CliRunner().invoke(cli.app, ["run", "1+1?", "--votes", "3", "--checklist"])
    assert res.exit_code == 2 and "a checklist is for one agent's run" in res.output
