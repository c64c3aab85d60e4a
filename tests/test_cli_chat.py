"""``tao chat`` in a real terminal (a pty driven by pexpect) and through typer's CliRunner, the
model a ScriptedModel. The scripted ``echo`` reply says what the model was sent after the system
prompt, so an answer shows whether the conversation so far reached the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_pty import launch

import tao.cli as cli
from tao import ScriptedModel, tool_call

WEATHER = str(Path(__file__).resolve().parent.parent / "examples" / "weather.py")
ECHO = """
def echo(messages):
    return "seen: " + " | ".join(m.content for m in messages[1:])
"""


def test_a_conversation_kept_across_prompts_reset_and_ctrl_c(tmp_path):
    term = launch(ECHO + """
model = Paced([tool_call("calculator", operation="add", a=2, b=3), "2 + 3 = 5", echo,
               echo, Sleep("Thinking it over", 60), echo])
""", ["chat"], cwd=tmp_path)
    term.expect("tao chat · react · scripted")
    term.expect("What should the agent do?")
    term.expect("> ")
    term.sendline("What is 2+3?")
    term.expect("Observation: 5")
    term.expect("Final Answer: 2 + 3 = 5")
    term.expect("What should the agent do?")
    term.sendline("And times 4?")  # the first exchange goes with the second question
    term.expect("Final Answer: seen: What is 2+3? | 2 + 3 = 5 | And times 4?\n")

    term.sendline("/reset")
    term.expect("Conversation cleared.")
    term.sendline("What did I ask?")
    term.expect("Final Answer: seen: What did I ask?\n")  # nothing before it any more

    term.sendline("Think slowly")
    term.expect("Thinking it over")  # streaming, then the model hangs for a minute
    term.interrupt()
    stopped = term.expect("Stopped.", timeout=10)
    assert term.expect("What should the agent do?", timeout=5) - stopped < 5
    term.sendline("Still there?")  # the stopped question left no trace in the conversation
    term.expect("Final Answer: seen: What did I ask? | seen: What did I ask? | Still there?\n")
    term.sendline("/exit")
    assert term.wait_exit() == 0


@pytest.mark.parametrize("keys", ["ctrl-d", "ctrl-c twice"])
def test_leaving_with_ctrl_d_or_a_second_ctrl_c_at_the_prompt(tmp_path, keys):
    term = launch("model = ScriptedModel(['hi'])", ["chat"], cwd=tmp_path)
    term.prompt()
    if keys == "ctrl-d":
        term.child.sendcontrol("d")
    else:
        term.interrupt()
        term.expect("Press Ctrl-C again (or Ctrl-D) to leave.")
        term.prompt()
        term.sendline("hello")  # a line in between: the next Ctrl-C is a first one again
        term.expect("Final Answer: hi")
        term.prompt()
        term.interrupt()
        term.expect("Press Ctrl-C again")
        term.prompt()
        term.interrupt()
    assert term.wait_exit() == 0


def test_zh_or_en_follows_the_user(tmp_path):
    term = launch("""
model = ScriptedModel([tool_call("get_weather", city="北京"), "北京晴，19°C，适合跑步。", "Sunny in Beijing."])
""", ["chat", "--tools", WEATHER], cwd=tmp_path, lang="zh_CN.UTF-8")
    term.expect("工具：get_weather、search_web、calculate")
    term.expect("你想让 Agent 做什么？")
    term.sendline("北京今天适合跑步吗？")
    term.expect("第 1 轮")
    term.expect("Observation: 北京：晴，19°C")
    term.expect("完成：2 轮，1 次工具调用")
    term.expect("你想让 Agent 做什么？")
    term.sendline("And in English?")
    term.expect("Turn 1")
    term.expect("done: 1 turn, 0 tool calls")
    term.expect("What should the agent do?")
    term.sendline("/reset")
    term.expect("Conversation cleared.")  # a command keeps the language of the conversation
    term.prompt()
    term.child.sendcontrol("d")
    assert term.wait_exit() == 0


def test_line_editing_and_the_history_file(tmp_path):
    term = launch(ECHO + "model = ScriptedModel([echo, echo])", ["chat"], cwd=tmp_path)
    term.prompt()
    term.send("Wht is 2+3?")
    term.send("\x01\x06\x06a\r")  # Ctrl-A: line start, Ctrl-F twice: after "Wh"; the missing "a"
    term.expect("Final Answer: seen: What is 2+3?\n")
    term.sendline("/exit")
    assert term.wait_exit() == 0
    saved = tmp_path / "data" / "chat_history"
    assert saved.read_text().splitlines()[-2:] == ["What is 2+3?", "/exit"]

    term = launch(ECHO + "model = ScriptedModel([echo])", ["chat"], cwd=tmp_path)
    term.prompt()
    term.send("\x10\x10\r")  # Ctrl-P twice: back past /exit to the question of last session
    term.expect("Final Answer: seen: What is 2+3?\n")
    term.prompt()
    term.child.sendcontrol("d")
    assert term.wait_exit() == 0


# -- the commands, through CliRunner (stdin is not a terminal: no readline, same loop) ---------

runner = CliRunner()


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LANG", "C.UTF-8")
    return tmp_path


def echo(messages):
    return "seen: " + " | ".join(m.content for m in messages[1:])


def test_agent_and_model_switch_for_the_next_question_and_keep_the_conversation(monkeypatch):
    first = ScriptedModel(["Paris."])
    second = ScriptedModel(["Thought: I remember\nFinal Answer: " + "x", echo])
    specs = []

    def resolve(spec="auto", timeout=None):
        specs.append(spec)
        if spec == "auto":
            return first
        if spec == "openai:other":
            return second
        raise ValueError(f"unknown model {spec!r}")

    monkeypatch.setattr(cli, "resolve_model", resolve)
    typed = "\n".join(["Capital of France?", "/agent", "/agent planner", "/agent react-text",
                       "/model banana", "/model openai:other", "Which city did I ask about?",
                       "/agent react", "And now?", "/help", "/nonsense", "/exit", "never read"])
    res = runner.invoke(cli.app, ["chat"], input=typed + "\n")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Final Answer: Paris." in out
    assert "agent: react\n" in out  # /agent alone says which
    assert "No agent named planner; choose one of: react, react-text, react-json, codeact, plan" in out
    assert "agent: react-text" in out
    assert "error: unknown model 'banana'" in out and "model: openai:other (scripted)" in out
    assert "Action Input:" in second.calls[0][0].content  # react-text's system prompt
    assert [m.content for m in second.calls[0][1:]] == ["Capital of France?", "Paris.",
                                                        "Which city did I ask about?"]
    assert "seen: Capital of France? | Paris. | Which city did I ask about? | x | And now?" in \
        " ".join(out.split())  # a console of 80 columns wraps the answer
    assert "/reset" in out and "forget the conversation" in out  # /help
    assert "Unknown command /nonsense; /help lists them." in out
    assert "never read" not in out
    assert specs == ["auto", "banana", "openai:other"]


def test_a_run_that_fails_adds_nothing_and_the_session_goes_on(monkeypatch):
    def fail(messages):
        raise ConnectionError("endpoint went away")

    model = ScriptedModel([fail, echo])
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)
    res = runner.invoke(cli.app, ["chat"], input="First?\nSecond?\n")
    assert res.exit_code == 0, res.output
    assert "endpoint went away" in res.stdout
    assert "Final Answer: seen: Second?" in res.stdout


def test_tao_toml_and_tools_apply_to_chat(monkeypatch, workdir):
    (workdir / "tao.toml").write_text(f'agent = "react-text"\ntools = [{json.dumps(WEATHER)}]\n')
    model = ScriptedModel(['Thought: 查天气\nAction: get_weather\nAction Input: {"city": "上海"}',
                           "Thought: 我已经知道最终答案了\nFinal Answer: 上海在下雨。"])
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)
    res = runner.invoke(cli.app, ["chat"], input="上海今天怎么样？\n")
    assert res.exit_code == 0, res.output
    assert "tao chat · react-text" in res.stdout and "Observation: 上海：中雨" in res.stdout
    assert "get_weather" in model.calls[0][0].content


def test_chat_usage_errors_before_any_model(monkeypatch, workdir):
    specs = []
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: specs.append(spec))
    res = runner.invoke(cli.app, ["chat", "--tools", "missing.py"])
    assert res.exit_code == 2 and "missing.py: no such file" in " ".join(res.stderr.replace("│", " ").split())
    assert runner.invoke(cli.app, ["chat", "--agent", "chatty"]).exit_code == 2
    assert specs == []


def test_a_named_session_goes_on_in_the_next_chat(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path))
    model = ScriptedModel(["Hello Ann.", echo])
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)
    first = runner.invoke(cli.app, ["chat", "--session", "ann"], input="I am Ann.\n")
    assert first.exit_code == 0, first.output
    second = runner.invoke(cli.app, ["chat", "--session", "ann"], input="Who am I?\n")
    assert second.exit_code == 0, second.output
    assert "seen: I am Ann. | Hello Ann. | Who am I?" in " ".join(second.stdout.split())
    from tao import Session

    assert len(Session("ann").messages()) == 4  # both turns, in <data dir>/sessions.db
