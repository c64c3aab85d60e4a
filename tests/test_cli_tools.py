"""``--tools`` and ``tao.toml``: your own tools on the command line, through typer's CliRunner with
``tao.cli.resolve_model`` patched to a ScriptedModel. Every test runs in its own working
directory, so a ``tao.toml`` is only the one it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tao.cli as cli
from tao import ScriptedModel, tool_call

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WEATHER = str(EXAMPLES / "weather.py")
QUESTION = "北京和上海哪个城市今天更适合户外跑步？"
runner = CliRunner()


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def use_model(monkeypatch):
    """``use_model(model)``: the CLI gets ``model``; the specs it asked for are recorded."""
    specs: list[str] = []

    def install(model):
        def resolve(spec="auto", timeout=None):
            specs.append(spec)
            return model

        monkeypatch.setattr(cli, "resolve_model", resolve)
        return specs

    return install


def said(res) -> str:
    """stderr with the usage box's borders and line breaks taken out."""
    return " ".join(res.stderr.replace("│", " ").split())


class ToolsSeen(ScriptedModel):
    """A ScriptedModel that also keeps the tool specs each call was given (native calls)."""

    def __init__(self, replies, **kw):
        super().__init__(replies, **kw)
        self.tools: list[list] = []

    def stream(self, messages, *, tools=None, **kw):
        self.tools.append(list(tools or ()))
        return super().stream(messages, tools=tools, **kw)


def seed_001_model() -> ScriptedModel:
    return ScriptedModel([
        'Thought: 要比较两个城市，先查北京今天的天气\nAction: get_weather\nAction Input: {"city": "北京"}',
        'Thought: 再查上海的天气\nAction: get_weather\nAction Input: {"city": "上海"}',
        'Thought: 上海在下中雨，查一下雨天和气温对跑步的影响\nAction: search_web\n'
        'Action Input: {"query": "雨天 跑步 温度"}',
        "Thought: 我已经知道最终答案了\nFinal Answer: 北京更适合：晴、19°C、空气良；上海中雨路滑，建议室内。",
    ], chunk_size=4)


def test_seed_001_chain_with_the_weather_tools(use_model):
    model = seed_001_model()
    use_model(model)
    res = runner.invoke(cli.app, ["run", QUESTION, "--tools", WEATHER, "--agent", "react-text"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Action: get_weather" in out and 'Action Input: {"city": "上海"}' in out
    assert "Observation: 北京：晴，19°C" in out and "Observation: 上海：中雨，16°C" in out
    assert "中雨及以上路面湿滑" in out  # search_web's page on rain
    assert "Final Answer: 北京更适合" in out and "完成：4 轮，3 次工具调用" in out
    system = model.calls[0][0].content  # the tools the model was told about: yours, not tao's
    assert "get_weather(city: str)" in system and "search_web" in system and "calculate" in system
    assert "calculator" not in system
    assert "杭州和成都" in system and "水箱" not in system  # the weather worked example, not the arithmetic one


def test_one_tool_by_name_and_the_same_file_twice(use_model):
    model = ToolsSeen([tool_call("calculate", expression="(19 + 16) / 2"), "平均 17.5 度"])
    use_model(model)
    res = runner.invoke(cli.app, ["run", "两地平均气温？", "--tools", f"{WEATHER}:calculate", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tool_calls"] == 1
    assert [t.name for t in model.tools[0]] == ["calculate"]  # that one only
    model = ToolsSeen(["ok"])
    use_model(model)
    res = runner.invoke(cli.app, ["run", "x", "--tools", WEATHER, "--tools", f"{WEATHER}:calculate"])
    assert res.exit_code == 0, res.output
    assert [t.name for t in model.tools[0]] == ["get_weather", "search_web", "calculate"]  # once


def test_tools_from_an_importable_module_and_a_file_beside_it(use_model, workdir):
    (workdir / "shop").mkdir()
    (workdir / "shop" / "__init__.py").write_text("")
    (workdir / "shop" / "prices.py").write_text(
        "from tao import tool\nfrom .stock import STOCK\n\n"
        "@tool\ndef price(item: str) -> float:\n    '''The price of an item in yuan.'''\n"
        "    return STOCK[item]\n")
    (workdir / "shop" / "stock.py").write_text("STOCK = {'book': 12.0, 'pen': 5.0}\n")
    (workdir / "extra.py").write_text(
        "from tao import Toolbox, tool\nfrom helper import RATE\n\n"
        "@tool\ndef to_usd(yuan: float) -> float:\n    '''Yuan to US dollars.'''\n"
        "    return round(yuan * RATE, 2)\n\nTOOLS = Toolbox([to_usd])\n")
    (workdir / "helper.py").write_text("RATE = 0.14\n")  # imported by extra.py, from its folder
    model = ToolsSeen([tool_call("price", item="book"), tool_call("to_usd", yuan=12),
                           "A book is 12 yuan, 1.68 dollars."])
    use_model(model)
    res = runner.invoke(cli.app, ["run", "How much is a book in dollars?", "-t", "shop.prices",
                                  "--tools", "extra.py"])
    assert res.exit_code == 0, res.output
    assert "Observation: 12" in res.stdout and "Observation: 1.68" in res.stdout
    assert [t.name for t in model.tools[0]] == ["price", "to_usd"]


@pytest.mark.parametrize("files, spec, message", [
    ({}, "tools/missing.py", "tools/missing.py: no such file"),
    ({"bad.py": "from tao import tool\n\nx = 1\nprint(undefined)\n"}, "bad.py",
     "bad.py: importing it failed: NameError: name 'undefined' is not defined (bad.py, line 4: "
     "print(undefined))"),
    ({"syn.py": "def f(:\n    pass\n"}, "syn.py", "SyntaxError: invalid syntax (syn.py, line 1: def f(:)"),
    ({"needs.py": "import not_installed_anywhere\n"}, "needs.py",
     "No module named 'not_installed_anywhere' (needs.py, line 1"),
    ({"empty.py": "def helper(x):\n    return x\n"}, "empty.py",
     "empty.py: no tools found; decorate functions with @tool"),
    ({"plain.py": "def helper(x):\n    return x\n"}, "plain.py:helper",
     "'helper' is not a tool but function - decorate it with @tool"),
    ({}, f"{WEATHER}:get_forecast", "has no attribute 'get_forecast' (tools there: get_weather, "
     "search_web, calculate)"),
    ({}, "no_such_module_here", "no module named 'no_such_module_here'"),
    ({}, "tao.tools.calculator", None),  # fine alone; with the weather file: two 'calculate's
])
def test_tools_that_cannot_be_loaded_are_usage_errors(use_model, workdir, files, spec, message):
    for name, text in files.items():
        (workdir / name).write_text(text)
    specs = use_model(ScriptedModel([]))
    args = ["run", "hi", "--tools", spec] + (["--tools", WEATHER] if message is None else [])
    res = runner.invoke(cli.app, args)
    assert res.exit_code == 2, res.output
    assert "--tools" in said(res)
    assert (message or "two tools are named 'calculate'") in said(res), said(res)
    assert "Traceback" not in res.output
    assert specs == []  # refused before any model was built


# -- tao.toml ----------------------------------------------------------------------------------

def test_tao_toml_sets_tools_model_agent_and_limits(monkeypatch, workdir):
    (workdir / "tao.toml").write_text(
        f'model = "openai:deepseek-chat"\nagent = "react-text"\ntools = [{json.dumps(WEATHER)}]\n'
        "max_turns = 2\ntimeout = 90\n", encoding="utf-8")
    model = ScriptedModel(['Thought: 查北京\nAction: get_weather\nAction Input: {"city": "北京"}'] * 2)
    seen = []

    def resolve(spec="auto", timeout=None):
        seen.append((spec, timeout))
        return model

    monkeypatch.setattr(cli, "resolve_model", resolve)
    res = runner.invoke(cli.app, ["run", QUESTION, "--json"])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "max_turns" and data["turns"] == 2  # max_turns from the file
    assert "Action Input:" in model.calls[0][0].content  # react-text from the file
    assert "get_weather" in model.calls[0][0].content  # its tools
    assert seen == [("openai:deepseek-chat", 90.0)]


def test_the_command_line_wins_over_tao_toml(use_model, workdir):
    (workdir / "tao.toml").write_text(
        f'model = "local"\nagent = "react-text"\ntools = [{json.dumps(WEATHER)}]\nmax_turns = 1\n')
    specs = use_model(ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"]))
    res = runner.invoke(cli.app, ["run", "1+2?", "--agent", "react", "--model", "openai",
                                  "--max-turns", "3", "--tools", "tao.tools.calculator:calculator",
                                  "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["answer"] == "3"
    assert specs == ["openai"]


@pytest.mark.parametrize("text, message", [
    ('model = "local"\nagent = react\n', "tao.toml: invalid TOML: Invalid value (at line 2, column 9)"),
    ('modle = "local"\n', "tao.toml: unknown key 'modle' (did you mean 'model'?); tao.toml may set "
                          "model, agent, tools"),
    ('max-tokens = 9\n', "unknown key 'max-tokens' (did you mean 'max_tokens'?)"),
    ("deny = 3\n", 'deny must be a list of tool names, e.g. ["run_command"], not 3'),
    ("max_cost = -1\n", "max_cost must be a number of dollars above 0, not -1"),
    ("max_tool_calls = 1.5\n", "max_tool_calls must be a whole number of at least 1, not 1.5"),
    ("audit = true\n", "audit must be the audit log's path, or false for none, not True"),
    ('require_approval = { run_command = "(rm" }\n',
     "require_approval.run_command: '(rm' is not a regular expression: missing ), unterminated"),
    ("require_approval = { run_command = 1 }\n", "require_approval.run_command must be true, false or a regex"),
    ('agent = "reactive"\n', "agent must be one of react, react-text, react-json, codeact, plan, not 'reactive'"),
    ("max_turns = 0\n", "max_turns must be a whole number of at least 1, not 0"),
    ("timeout = -1\n", "timeout must be a number of seconds above 0, not -1"),
    ("tools = [1]\n", 'tools must be a list of files or modules'),
])
def test_a_bad_tao_toml_is_a_clear_error_naming_the_file(use_model, workdir, text, message):
    (workdir / "tao.toml").write_text(text)
    specs = use_model(ScriptedModel([]))
    res = runner.invoke(cli.app, ["run", "hi"])
    assert res.exit_code == 2
    assert message in said(res), said(res)
    assert str(workdir / "tao.toml") in said(res)
    assert specs == []


def test_tao_toml_guardrails_hold_for_tao_run(use_model, workdir, monkeypatch):
    """deny, require_approval with a regex, the budgets and an audit path beside the file."""
    (workdir / "proj").mkdir()
    (workdir / "proj" / "tao.toml").write_text(
        'deny = ["calculate"]\nrequire_approval = { calculator = "^multiply$" }\n'
        'max_tool_calls = 3\naudit = "logs/audit.jsonl"\n', encoding="utf-8")
    from tao.guard.audit import entries

    model = ScriptedModel([tool_call("calculate", expression="1+2"),
                           tool_call("calculator", operation="multiply", a=6, b=7),
                           tool_call("calculator", operation="add", a=1, b=2),
                           tool_call("calculator", operation="add", a=1, b=3), "never read"])
    use_model(model)
    monkeypatch.chdir(workdir / "proj")
    res = runner.invoke(cli.app, ["run", "sums", "--json"])  # stdin is no terminal: auto-reject
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "budget" and data["error"] == "max_tool_calls=3: call 4 refused"
    seen = [m.content for m in model.calls[-1] if m.role == "tool"]
    assert "'calculate' is denied" in seen[0]
    assert "stdin is not a terminal" in seen[1]  # multiply matched the regex: asked, rejected
    assert seen[2] == "3"  # add did not match: ran
    calls = [(r["tool"], r["status"]) for r in entries(workdir / "proj" / "logs" / "audit.jsonl")
             if r["kind"] == "tool.call"]
    assert calls == [("calculate", "denied"), ("calculator", "rejected"), ("calculator", "ok"),
                     ("calculator", "budget")]


def test_flags_add_to_the_file_s_restrictions_and_win_over_its_limits(use_model, workdir):
    (workdir / "tao.toml").write_text('deny = ["calculate"]\nallow = ["calculate"]\n'
                                      "max_tool_calls = 1\naudit = false\n")
    model = ScriptedModel([tool_call("calculate", expression="1+2"),
                           tool_call("calculator", operation="add", a=1, b=2), "3"])
    use_model(model)
    res = runner.invoke(cli.app, ["run", "1+2?", "--json", "--deny", "calculator",
                                  "--allow", "calculate,calculator", "--max-tool-calls", "5"])
    assert res.exit_code == 0, res.output
    seen = [m.content for m in model.calls[-1] if m.role == "tool"]
    assert "'calculate' is denied" in seen[0] and "'calculator' is denied" in seen[1]
    import os

    assert not (Path(os.environ["TAO_DATA_DIR"]) / "audit.jsonl").exists()  # audit = false
    use_model(ScriptedModel(["3"]))
    res = runner.invoke(cli.app, ["run", "1+2?", "--json", "--audit", "mine.jsonl"])
    assert res.exit_code == 0 and (workdir / "mine.jsonl").exists()  # --audit FILE wins


def test_tools_in_tao_toml_that_cannot_be_loaded_name_the_file(use_model, workdir):
    (workdir / "tao.toml").write_text('tools = ["gone.py"]\n')
    use_model(ScriptedModel([]))
    res = runner.invoke(cli.app, ["run", "hi"])
    assert res.exit_code == 2
    assert "'tools' in" in said(res) and "tao.toml" in said(res) and "gone.py: no such file" in said(res)


def test_react_json_agent_with_your_tools(use_model):
    """Seed 003's decision objects drive your tools the same way."""
    model = ScriptedModel([
        json.dumps({"thought": "先查北京", "action": "get_weather", "action_input": {"city": "北京"}},
                   ensure_ascii=False),
        json.dumps({"thought": "够了", "action": "final", "action_input": "北京晴，适合跑步"},
                   ensure_ascii=False),
    ])
    use_model(model)
    res = runner.invoke(cli.app, ["run", "北京今天适合跑步吗？", "--tools", WEATHER, "--agent", "react-json"])
    assert res.exit_code == 0, res.output
    assert "Observation: 北京：晴，19°C" in res.stdout and "Final Answer: 北京晴，适合跑步" in res.stdout
