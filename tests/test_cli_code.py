"""``tao code``: seed 002's coding agent through typer's CliRunner and in a real terminal (pty),
the model a ScriptedModel writing seed 002's reply form."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_pty import launch

import tao.cli as cli
from tao import ScriptedModel, tool_call

SNAKE = ("使用 HTML + CSS + JS 生成一个贪吃蛇小游戏，代码分别放在 index.html、style.css、game.js "
         "三个文件中，要求能用方向键控制，吃到食物会变长。")
INDEX = '<!DOCTYPE html>\n<html>\n<head><link rel="stylesheet" href="style.css"></head>\n' \
        '<body><canvas id="game" width="400" height="400"></canvas>\n' \
        '<script src="game.js"></script></body>\n</html>'
STYLE = "body { margin: 0; background: #111; }\ncanvas { display: block; margin: 40px auto; }"
GAME = ("const snake = [{x: 10, y: 10}];\nlet dir = {x: 1, y: 0};\n"
        "document.addEventListener('keydown', e => {\n"
        "  if (e.key === 'ArrowUp') dir = {x: 0, y: -1};\n});")


def write(path: str, lang: str, content: str, thought: str) -> str:
    """A reply in seed 002's form: Thought, ``Action: write_file【path】``, the file fenced."""
    return f"Thought: {thought}\nAction: write_file【{path}】\n```{lang}\n{content}\n```"


SNAKE_REPLIES = [
    write("index.html", "html", INDEX, "先写页面骨架"),
    write("style.css", "css", STYLE, "再写样式"),
    write("game.js", "javascript", GAME, "最后写游戏逻辑"),
    "Thought: 像玩家一样按方向键试一下\nAction: try_page【press ArrowUp; wait 300】",
    "Thought: 三个文件都写好了\nAction: Finish【已生成贪吃蛇游戏，共 3 个文件】",
]
runner = CliRunner()


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LANG", "C.UTF-8")
    return tmp_path


@pytest.fixture
def use_model(monkeypatch):
    specs: list[str] = []

    def install(model):
        def resolve(spec="auto", timeout=None):
            specs.append(spec)
            return model

        monkeypatch.setattr(cli, "resolve_model", resolve)
        return specs

    return install


def test_the_snake_game_written_file_by_file(use_model, workdir):
    model = ScriptedModel(SNAKE_REPLIES, chunk_size=7)
    use_model(model)
    res = runner.invoke(cli.app, ["code", SNAKE, "--sandbox", "none"])
    assert res.exit_code == 0, res.output
    ws = workdir / "workspace"
    assert (ws / "index.html").read_text() == INDEX
    assert (ws / "style.css").read_text() == STYLE and (ws / "game.js").read_text() == GAME
    out = res.stdout
    for n in (1, 2, 3, 4, 5):
        assert f"第 {n} 轮" in out
    assert "Action: write_file【game.js】\n```javascript\nconst snake" in out  # the reply, as streamed
    assert f"Observation: 文件 index.html 写入成功（{len(INDEX)} 字符）" in out
    assert "最终答案：已生成贪吃蛇游戏，共 3 个文件" in out
    assert "完成：5 轮，4 次工具调用" in out
    listing = out[out.index(f"{ws} 中的文件（3 个）："):]
    sizes = {p: len(t.encode()) for p, t in (("index.html", INDEX), ("style.css", STYLE), ("game.js", GAME))}
    for line in listing.splitlines()[1:4]:
        name, size = line.split()[0], line.split()[1]
        assert int(size.replace(",", "")) == sizes.pop(name)
    assert sizes == {}  # every file listed with its size in bytes
    assert "write_file" in model.calls[0][0].content and "run_command" not in model.calls[0][0].content


def test_workspace_option_tao_toml_and_extra_tools(use_model, workdir):
    (workdir / "helpers.py").write_text(
        "from tao import tool\n\n@tool\ndef today() -> str:\n    '''Today's date.'''\n"
        "    return '2025-06-01'\n")
    (workdir / "tao.toml").write_text('workspace = "site"\ntools = ["helpers.py"]\nmax_turns = 3\n')
    model = ScriptedModel(['Thought: what day is it\nAction: today\nAction Input: {}',
                           write("date.txt", "", "2025-06-01", "write it down"),
                           "Thought: done\nAction: Finish【wrote date.txt】"])
    use_model(model)
    res = runner.invoke(cli.app, ["code", "Write today's date to date.txt", "--sandbox", "none"])
    assert res.exit_code == 0, res.output
    assert (workdir / "site" / "date.txt").read_text() == "2025-06-01"  # tao.toml's workspace
    assert "Observation: 2025-06-01" in res.stdout and "Turn 3" in res.stdout
    assert "Files in" in res.stdout and "date.txt" in res.stdout

    model = ScriptedModel([write("a.txt", "", "A", "one file")] * 3)
    use_model(model)
    res = runner.invoke(cli.app, ["code", "Write a.txt", "-w", "elsewhere", "--sandbox", "none"])
    assert res.exit_code == 1, res.output  # tao.toml's max_turns = 3 ran out
    assert (workdir / "elsewhere" / "a.txt").read_text() == "A"  # the option wins over the file
    assert "stopped: turn limit reached: 3 turns" in res.stdout


def test_no_task_asks_for_one(use_model):
    use_model(ScriptedModel(["Thought: nothing to write\nAction: Finish【nothing asked】"]))
    res = runner.invoke(cli.app, ["code", "--sandbox", "none"], input="\nSay hello\n")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("What should the agent do?\n> What should the agent do?\n> ")
    assert "Task: Say hello" in res.stdout and "Final Answer: nothing asked" in res.stdout


@pytest.mark.parametrize("args, toml, message", [
    (["--tools", "tools_here.py"], "", "two tools are named 'write_file'"),
    (["--workspace", "a_file"], "", "'a_file' is a file"),
    ([], 'workspace = "a_file"', "cannot use {cwd}/a_file as the workspace"),
    (["--sandbox", "chroot"], "", "'chroot' is not one of bwrap, subprocess, docker, none"),
])
def test_usage_errors(use_model, workdir, args, toml, message):
    (workdir / "tools_here.py").write_text(
        "from tao import tool\n\n@tool\ndef write_file(path: str) -> str:\n    '''Mine.'''\n    return path\n")
    (workdir / "a_file").write_text("not a folder")
    (workdir / "tao.toml").write_text(toml)
    use_model(ScriptedModel([]))
    sandbox = [] if "--sandbox" in args else ["--sandbox", "none"]
    res = runner.invoke(cli.app, ["code", "x", *sandbox, *args])
    assert res.exit_code == 2, res.output
    assert message.format(cwd=workdir) in " ".join(res.stderr.replace("│", " ").split())
    assert (workdir / "a_file").read_text() == "not a folder"


# -- in a terminal: tokens as they arrive, Ctrl-C ---------------------------------------------

PACED = f"""
import json
INDEX = {json.dumps(INDEX)}
model = Paced([
    "Thought: 先写页面\\nAction: write_file【index.html】\\n```html\\n" + INDEX + "\\n```",
    Sleep("Thought: 再写 game.js，这个文件很长", 60),
], chunk_size=5)
"""


def test_tokens_stream_as_they_arrive_and_ctrl_c_keeps_the_files(tmp_path):
    term = launch(PACED, ["code", SNAKE, "--sandbox", "none"], cwd=tmp_path, lang="zh_CN.UTF-8")
    term.expect("第 1 轮")
    term.expect("Observation: 文件 index.html 写入成功")
    term.expect("第 2 轮")
    seen = term.expect("Thought: 再写 game.js，这个文件很长")  # shown while the model still writes
    term.interrupt()
    stopped = term.expect(f"已中断：已写入的文件保留在 {tmp_path / 'workspace'}", timeout=10)
    assert stopped - seen < 10  # not the minute the reply would have taken
    term.expect("中的文件（1 个）：")
    term.expect("index.html")
    assert term.wait_exit() == 130
    assert [p.name for p in (tmp_path / "workspace").iterdir()] == ["index.html"]  # no temp file left
    assert (tmp_path / "workspace" / "index.html").read_text() == INDEX


def test_with_no_task_it_asks_like_seed_002(tmp_path):
    term = launch("model = ScriptedModel(['Thought: 好\\nAction: Finish【完成了】'])",
                  ["code", "--sandbox", "none"], cwd=tmp_path, lang="zh_CN.UTF-8")
    term.expect("你想让 Agent 做什么？\n> ")
    term.sendline("写一个 hello world 页面")
    term.expect("任务：写一个 hello world 页面")
    term.expect("最终答案：完成了")
    term.expect("还没有文件")
    assert term.wait_exit() == 0


def test_native_tool_calls_show_in_short(use_model, workdir):
    """An endpoint's native calls stream no text: the turn shows its Action with the content
    counted, not dumped."""
    import io

    from rich.console import Console

    from tao.cli.code_view import CodeView
    from tao.events import Action, TurnStarted

    console = Console(file=io.StringIO(), width=100)
    view = CodeView(workdir, "en", console)
    view(TurnStarted(1))
    view(Action(tool_call("write_file", path="game.js", content=GAME), 1))
    assert f'Action: write_file(path=\'game.js\', content=<{len(GAME)} characters>)' in console.file.getvalue()


def test_the_embedded_model_gets_room_for_a_whole_file(tmp_path):
    # LocalModel's 512-token replies cut a game.js in the middle, and a cut block writes nothing
    from tao.cli.code import for_coding
    from tao.models.local import LocalModel

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: the limits are set before the weights load
    model = for_coding(LocalModel(path=gguf))
    assert (model.max_tokens, model.n_ctx) == (2048, 8192)
    roomier = for_coding(LocalModel(path=gguf, max_tokens=4096, n_ctx=16384))
    assert (roomier.max_tokens, roomier.n_ctx) == (4096, 16384)  # more than that is kept
    scripted = ScriptedModel(["Thought: done\nAction: Finish【ok】"])
    assert for_coding(scripted) is scripted


def test_a_page_that_throws_is_told_to_the_model_which_writes_it_again(use_model, workdir):
    from tao.workspace import page as workspace_page

    if workspace_page.chromium() is None:  # CI has one (.ci/run): there a missing one fails
        if os.environ.get("TAO_REQUIRE_BROWSER") == "1":
            pytest.fail("TAO_REQUIRE_BROWSER=1 but no Chromium (apt-get install -y chromium)",
                        pytrace=False)
        pytest.skip("no Chromium here (apt-get install -y chromium)")
    broken = GAME + "\nsetInterval(() => snake.push(nextHead()), 100);"
    fixed = GAME + "\nconst nextHead = () => ({x: snake[0].x + dir.x, y: snake[0].y + dir.y});" \
                   "\nsetInterval(() => snake.push(nextHead()), 100);"
    model = ScriptedModel([*SNAKE_REPLIES[:2], write("game.js", "javascript", broken, "写游戏逻辑"),
                           write("game.js", "javascript", fixed, "nextHead 没有定义，补上"),
                           *SNAKE_REPLIES[3:]])
    use_model(model)
    res = runner.invoke(cli.app, ["code", SNAKE, "--sandbox", "none"])
    assert res.exit_code == 0, res.output
    told = ("在无头浏览器里打开 index.html，页面报错了（请修正出错的文件，再用 write_file 把它完整重写一遍）：\n"
            "- game.js:6: Uncaught ReferenceError: nextHead is not defined")
    assert told in res.stdout  # on the console, under the write's observation
    assert told in model.calls[3][-1].content  # and to the model, before it wrote game.js again
    assert (workdir / "workspace" / "game.js").read_text() == fixed
    assert "在无头浏览器里打开 index.html，没有报错。文件都写好后，用 try_page 像用户那样操作一遍（点击按钮、输入内容），页面显示正确就调用 Finish 结束" in \
        model.calls[4][-1].content  # the page works: the model is told it may finish
    assert "完成：6 轮，5 次工具调用" in res.stdout
