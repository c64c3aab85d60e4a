"""The ``tao`` command, run through typer's CliRunner with ``resolve_model`` patched."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import types

import pytest
from rich.console import Console
from typer.testing import CliRunner

import tao
import tao.cli as cli
from tao import ReActAgent, ScriptedModel, tool_call
from tao.errors import LocalModelError, ModelConfigError
from tao.events import FinalAnswer, RunFinished
from tao.models.resolve import resolve_model
from tao.sinks import ConsoleSink, read_trace

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
runner = CliRunner()


def xiaoming_model() -> ScriptedModel:
    return ScriptedModel([
        tool_call("calculator", operation="multiply", a=3, b=12),
        tool_call("calculator", operation="multiply", a=2, b=5),
        tool_call("calculator", operation="add", a=36, b=10),
        tool_call("calculator", operation="subtract", a=50, b=46),
        "他还剩 4 元。",
    ], chunk_size=3)


@pytest.fixture
def use_model(monkeypatch):
    """``use_model(model)``: ``tao run`` gets ``model``; the specs asked for are recorded."""
    specs: list[str] = []

    def install(model):
        def fake_resolve(spec="auto", timeout=None):
            specs.append(spec)
            if isinstance(model, Exception):
                raise model
            return model

        monkeypatch.setattr(cli, "resolve_model", fake_resolve)
        return specs

    return install


def test_json_output(use_model):
    specs = use_model(xiaoming_model())
    res = runner.invoke(cli.app, ["run", XIAOMING, "--json", "--model", "openai:deepseek-chat"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data) == {"answer", "status", "turns", "tool_calls", "usage", "duration_s"}
    assert data["answer"] == "他还剩 4 元。" and data["status"] == "done"
    assert (data["turns"], data["tool_calls"]) == (5, 4)
    assert data["usage"]["total_tokens"] > 0
    assert specs == ["openai:deepseek-chat"]


def test_default_run_renders_the_chain(use_model):
    specs = use_model(xiaoming_model())
    res = runner.invoke(cli.app, ["run", XIAOMING])
    assert res.exit_code == 0, res.output
    assert "第 5 轮" in res.stdout and "Observation: 36" in res.stdout
    assert "完成：5 轮，4 次工具调用" in res.stdout
    assert specs == ["auto"]


def test_react_text_agent(use_model):
    model = ScriptedModel([
        'Thought: multiply\nAction: calculator\nAction Input: {"operation": "multiply", "a": 15, "b": 27}',
        "Thought: I now know the final answer\nFinal Answer: 405",
    ])
    use_model(model)
    res = runner.invoke(cli.app, ["run", "What is 15 * 27?", "--agent", "react-text"])
    assert res.exit_code == 0, res.output
    assert "Turn 2" in res.stdout and "Observation: 405" in res.stdout
    assert "Final Answer: 405" in res.stdout
    assert "Action Input:" in model.calls[0][0].content  # the text-protocol system prompt


def test_unknown_agent_is_a_usage_error(use_model):
    use_model(xiaoming_model())
    res = runner.invoke(cli.app, ["run", "x", "--agent", "codeact-ish"])
    assert res.exit_code == 2


def test_trace_writes_a_replayable_file(use_model, tmp_path):
    use_model(xiaoming_model())
    path = tmp_path / "run.jsonl"
    res = runner.invoke(cli.app, ["run", XIAOMING, "--trace", str(path), "--quiet"])
    assert res.exit_code == 0, res.output
    events = read_trace(path)
    assert isinstance(events[-1], RunFinished) and events[-1].result.answer == "他还剩 4 元。"
    assert sum(isinstance(e, FinalAnswer) for e in events) == 1
    console = Console(file=io.StringIO(), width=100)
    sink = ConsoleSink(console)
    for event in events:
        sink(event)
    assert "完成：5 轮，4 次工具调用" in console.file.getvalue()


def test_unwritable_trace_is_a_usage_error(use_model, tmp_path):
    use_model(xiaoming_model())
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = runner.invoke(cli.app, ["run", XIAOMING, "--trace", str(blocker / "run.jsonl")])
    assert res.exit_code == 2
    assert "--trace" in res.output


def test_exit_1_on_max_turns(use_model):
    use_model(ScriptedModel([tool_call("calculator", operation="add", a=1, b=1)] * 3))
    res = runner.invoke(cli.app, ["run", "add forever", "--max-turns", "3", "--json"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["status"] == "max_turns" and data["turns"] == 3 and data["answer"] is None


def test_exit_1_on_a_run_error_quiet_says_why(use_model):
    use_model(ScriptedModel([]))  # runs out at once: the run ends with status "error"
    res = runner.invoke(cli.app, ["run", "hello", "--quiet"])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert "ScriptExhausted" in res.stderr


def test_tao_error_building_the_model_exits_2_without_traceback(use_model):
    use_model(LocalModelError("checksum mismatch for qwen2.5-coder-0.5b.gguf: expected 1d96…"))
    res = runner.invoke(cli.app, ["run", "hello"])
    assert res.exit_code == 2
    assert "error: checksum mismatch for qwen2.5-coder-0.5b.gguf" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output
    assert isinstance(res.exception, SystemExit)  # a clean exit, not an escaped TaoError


def test_unknown_model_spec_exits_2():
    res = runner.invoke(cli.app, ["run", "hello", "--model", "gpt-banana"])
    assert res.exit_code == 2
    assert "unknown model 'gpt-banana'" in res.stderr and "openai:NAME" in res.stderr


def test_bad_max_turns_exits_2(use_model):
    use_model(xiaoming_model())
    assert runner.invoke(cli.app, ["run", "x", "--max-turns", "0"]).exit_code == 2


def test_quiet_prints_only_the_answer(use_model):
    use_model(xiaoming_model())
    res = runner.invoke(cli.app, ["run", XIAOMING, "--quiet"])
    assert res.exit_code == 0
    assert res.stdout == "他还剩 4 元。\n"


def test_version():
    res = runner.invoke(cli.app, ["version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"tao {tao.__version__}"


def test_python_dash_m_tao():
    out = subprocess.run([sys.executable, "-m", "tao", "version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == f"tao {tao.__version__}"


def test_build_agent_and_run_task():
    agent = cli.build_agent("react-text", ScriptedModel(["Final Answer: 1"]), max_turns=4)
    assert isinstance(agent, ReActAgent) and agent.name == "react-text" and agent.max_turns == 4
    assert cli.build_agent("react", ScriptedModel([])).name == "react"
    with pytest.raises(ValueError, match="react-text"):
        cli.build_agent("dask", ScriptedModel([]))
    console = Console(file=io.StringIO(), width=100)
    result = cli.run_task(XIAOMING, xiaoming_model(), console=console)
    assert (result.turns, result.tool_calls) == (5, 4)
    assert "第 5 轮" in console.file.getvalue()


# -- resolve_model dispatch, with stand-ins for the OpenAI and local backends ---------------------


@pytest.fixture
def fake_backends(monkeypatch):
    made: list[tuple] = []

    class OpenAIModel:
        def __init__(self, model=None, **kw):
            made.append(("openai", model))

    class LocalModel:
        def __init__(self, name):
            made.append(("local", name))

    monkeypatch.setitem(sys.modules, "tao.models.openai",
                        types.SimpleNamespace(OpenAIModel=OpenAIModel))
    monkeypatch.setitem(sys.modules, "tao.models.local", types.SimpleNamespace(LocalModel=LocalModel))
    for var in ("TAO_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "TAO_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return made


@pytest.mark.parametrize("spec, expected", [
    ("local", ("local", "qwen2.5-coder-1.5b")),
    ("local-1.5b", ("local", "qwen2.5-coder-1.5b")),
    ("local-0.5b", ("local", "qwen2.5-coder-0.5b")),
    ("openai", ("openai", None)),
    ("openai:deepseek-chat", ("openai", "deepseek-chat")),
    ("openai:", ("openai", None)),
    ("auto", ("local", "qwen2.5-coder-1.5b")),
])
def test_resolve_model_specs(fake_backends, spec, expected):
    resolve_model(spec)
    assert fake_backends == [expected]


def test_the_default_local_model_is_the_one_local_model_builds():
    from tao.models import gguf_store, resolve

    assert resolve._LOCAL["local"] == gguf_store.DEFAULT_LOCAL


@pytest.mark.parametrize("var", ["TAO_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "TAO_BASE_URL"])
def test_resolve_auto_prefers_a_configured_endpoint(fake_backends, monkeypatch, var):
    monkeypatch.setenv(var, "x")
    resolve_model()
    assert fake_backends == [("openai", None)]


def test_resolve_unknown_spec_lists_valid_ones():
    with pytest.raises(ValueError, match="local-1.5b.*openai:NAME"):
        resolve_model("llama")


@pytest.mark.parametrize("error", [LocalModelError("llama-cpp-python is not installed"),
                                   ModelConfigError("401 Unauthorized: bad API key")])
def test_config_errors_at_the_first_model_call_exit_2(use_model, error):
    def fail(messages):
        raise error

    use_model(ScriptedModel([fail, fail]))  # one call per invocation below
    res = runner.invoke(cli.app, ["run", "hello", "--json"])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"].startswith(type(error).__name__)
    res = runner.invoke(cli.app, ["run", "hello", "--quiet"])
    assert res.exit_code == 2 and str(error) in res.stderr


def test_codeact_agent_shows_code_and_output(use_model, tmp_path):
    use_model(ScriptedModel([
        "Books and pens first.\n```python\nspent = add(multiply(3, 12), multiply(2, 5))\n"
        "print(subtract(50, spent))\n```",
        "He has 4 yuan left.",
    ]))
    path = tmp_path / "run.jsonl"
    res = runner.invoke(cli.app, ["run", "How much is left?", "--agent", "codeact",
                                  "--trace", str(path)])
    assert res.exit_code == 0, res.output
    assert "Code:" in res.stdout and "print(subtract(50, spent))" in res.stdout
    assert "Output:" in res.stdout and "\n4\n" in res.stdout
    assert "Final Answer: He has 4 yuan left." in res.stdout
    assert "2 turns, 1 execution" in res.stdout
    kinds = [e.kind for e in read_trace(path)]
    assert "code" in kinds and "execution" in kinds
    agent = cli.build_agent("codeact", ScriptedModel([]), max_turns=3)
    assert agent.name == "codeact" and agent.max_turns == 3 and "calculate" in agent.toolbox


# -- where the task comes from: TASK, stdin (-), --task-file ------------------------------------
def test_task_from_stdin(use_model):
    model = xiaoming_model()
    use_model(model)
    res = runner.invoke(cli.app, ["run", "-", "--json"], input=f"{XIAOMING}\n".encode())
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["answer"] == "他还剩 4 元。"
    assert model.calls[0][-1].content == XIAOMING  # the trailing newline dropped


def test_long_task_from_a_file(use_model, tmp_path):
    model = xiaoming_model()
    use_model(model)
    task = "\n".join([XIAOMING] + [f"第 {i} 条背景：这一行只是上下文。" for i in range(2000)])
    path = tmp_path / "task.txt"
    path.write_bytes(b"\xef\xbb\xbf" + task.encode())  # with the BOM Windows editors write
    res = runner.invoke(cli.app, ["run", "--task-file", str(path), "--quiet"])
    assert res.exit_code == 0, res.output
    assert res.stdout == "他还剩 4 元。\n"
    assert model.calls[0][-1].content == task and len(task) > 40_000


@pytest.mark.parametrize("args, stdin, message", [
    (["run", ""], None, "the task is empty"),
    (["run", "  \t\n "], None, "the task is empty"),
    (["run", "-"], b" \n\n", "the task is empty (stdin)"),
    (["run"], None, "give the task, '-' to read it from stdin, or --task-file FILE"),
    (["run", "-"], b"\xff\xfe1\x002\x00", "stdin is not UTF-8 text (byte 0 is b'\\xff')"),
    (["compare", " "], None, "the task is empty"),
])
def test_no_task_is_a_usage_error_before_any_model_is_built(use_model, args, stdin, message):
    specs = use_model(xiaoming_model())
    res = runner.invoke(cli.app, args, input=stdin)
    assert res.exit_code == 2
    assert message in " ".join(res.stderr.replace("│", " ").split())
    assert specs == []  # refused before resolve_model: nothing was loaded or paid for


def test_task_file_errors_are_usage_errors(use_model, tmp_path):
    specs = use_model(xiaoming_model())
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Combien coûte un café ?".encode("latin-1"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    cases = [
        (["run", "--task-file", str(tmp_path / "missing.txt")], "does not exist"),
        (["run", "--task-file", str(tmp_path)], "is a directory"),
        (["run", "--task-file", str(latin1)], "is not UTF-8 text (byte 10 is b'\\xfb'); save it as UTF-8"),
        (["run", "--task-file", str(empty)], "the task is empty"),
        (["run", "hello", "--task-file", str(empty)], "give the task as TASK or with --task-file, not both"),
    ]
    for args, message in cases:
        res = runner.invoke(cli.app, args)
        assert res.exit_code == 2, (args, res.output)
        assert message in " ".join(res.stderr.replace("│", " ").split()), (args, res.stderr)
    assert specs == []


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_bad_timeout_is_a_usage_error(use_model, value):
    specs = use_model(xiaoming_model())
    res = runner.invoke(cli.app, ["run", "hello", "--timeout", value])
    assert res.exit_code == 2 and "--timeout" in res.stderr
    assert specs == []


def test_timeout_reaches_the_endpoint_model(fake_backends, monkeypatch):
    made = []

    class OpenAIModel:
        def __init__(self, model=None, **kw):
            made.append((model, kw))

    monkeypatch.setitem(sys.modules, "tao.models.openai", types.SimpleNamespace(OpenAIModel=OpenAIModel))
    resolve_model("openai:qwen", timeout=120.0)
    resolve_model("openai")
    resolve_model("local", timeout=5.0)  # nothing to time out: the embedded model runs here
    assert made == [("qwen", {"timeout": 120.0}), (None, {})]
    assert fake_backends == [("local", "qwen2.5-coder-1.5b")]


def test_run_help_shows_the_task_sources_and_the_timeout():
    res = runner.invoke(cli.app, ["run", "--help"], env={"COLUMNS": "120"})
    text = " ".join(res.stdout.replace("│", " ").split())
    assert res.exit_code == 0
    assert "Usage: tao run [OPTIONS] [TASK]" in text
    assert "- reads it from stdin" in text and "--task-file" in text
    assert "--timeout SECONDS" in text and "[default: 60.0]" in text


SURROGATE_RUN = """
import tao.cli as cli
from tao import ScriptedModel, tool_call
cli.resolve_model = lambda spec, **k: ScriptedModel(
    [tool_call("calculator", operation="add", a=1, b=2), "caf\\udcff: 3"])
cli.main()
"""


@pytest.mark.parametrize("encoding", ["utf-8:strict", "ascii"])
def test_a_lone_surrogate_in_the_answer_is_printed_escaped_not_a_crash(encoding):
    out = subprocess.run([sys.executable, "-c", SURROGATE_RUN, "run", "hi"], capture_output=True,
                         env={"PYTHONIOENCODING": encoding, "PATH": "/usr/bin:/bin"}, timeout=60)
    assert out.returncode == 0, out.stderr.decode("utf-8", "replace")
    assert "caf\\udcff: 3" in out.stdout.decode(encoding.split(":")[0])
