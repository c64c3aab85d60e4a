"""The workspace tools as the coding agent of seed 002 uses them: real files in tmp_path, the real
bubblewrap sandbox behind run_command, a ReAct run through ScriptedModel writing the snake game."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.events import Observation
from tao.messages import ToolCall
from tao.sandbox import SandboxUnavailable, backend_problem
from tao.tools import Toolbox
from tao.workspace import Workspace
from tao.workspace import safe_path
from tao.workspace import WorkspaceError

from sandbox_backends import skip_mark

needs_bwrap = skip_mark("bwrap") or (lambda f: f)
INDEX = "<!DOCTYPE html>\n<html>\n<head><link rel=\"stylesheet\" href=\"style.css\"></head>\n" \
        "<body><canvas id=\"game\" width=\"400\" height=\"400\"></canvas>\n" \
        "<script src=\"game.js\"></script></body>\n</html>\n"
STYLE = "body { background: #111; display: flex; justify-content: center; }\n"
GAME = textwrap.dedent("""\
    const snake = [{x: 10, y: 10}];
    let dir = {x: 1, y: 0};
    document.addEventListener('keydown', e => {
      if (e.key === 'ArrowUp') dir = {x: 0, y: -1};
    });
    """)


def run(ws, name, **arguments):
    """One call through Toolbox.execute, the door every agent uses."""
    return asyncio.run(ws.execute(ToolCall("c1", name, arguments)))


# -- the file tools ------------------------------------------------------------------------------
def test_write_read_list_edit_say_what_happened_in_english(tmp_path):
    ws = Workspace(tmp_path / "ws", sandbox=False)

    assert ws.write_file("index.html", INDEX) == f"wrote index.html ({len(INDEX)} characters)"
    assert ws.write_file("css/style.css", STYLE) == f"wrote css/style.css ({len(STYLE)} characters)"
    assert (tmp_path / "ws" / "css" / "style.css").read_text() == STYLE  # the folder was made

    text = ws.read_file("index.html")
    assert text.splitlines()[0] == "index.html: lines 1-6 of 6"
    assert text.split("\n", 1)[1] == INDEX.rstrip("\n")

    listing = ws.list_dir().splitlines()
    assert listing == [". (entries: 2)", "css/  (folder)",
                       f"index.html  (file, {len(INDEX.encode())} bytes)"]

    assert ws.edit_file("index.html", 'width="400"', 'width="600"') == \
        f"edited index.html: replaced the 1 match at line 4 (now {len(INDEX)} characters)"
    assert 'width="600"' in (tmp_path / "ws" / "index.html").read_text()


def test_observations_in_chinese_as_the_seed_says_them(tmp_path):
    ws = Workspace(tmp_path, language="zh", sandbox=False)
    assert ws.write_file("index.html", INDEX) == f"文件 index.html 写入成功（{len(INDEX)} 字符）"
    assert ws.read_file("index.html").splitlines()[0] == "index.html：第 1-6 行，共 6 行"
    with pytest.raises(WorkspaceError, match="不能包含 .."):
        ws.write_file("../x.html", "x")
    assert "写入成功" in ws.write_file("说明.md", "贪吃蛇")  # Chinese names are fine
    assert (tmp_path / "说明.md").read_text() == "贪吃蛇"


def test_read_file_pages_by_lines_and_says_more_remain(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("log.txt", "".join(f"line {i}\n" for i in range(1, 501)))

    first = ws.read_file("log.txt").splitlines()
    assert first[0] == "log.txt: lines 1-200 of 500"
    assert first[1] == "line 1" and first[200] == "line 200"
    assert first[-1] == "(300 more lines not shown; read on with offset=201)"

    last = ws.read_file("log.txt", offset=451, limit=100).splitlines()
    assert last[0] == "log.txt: lines 451-500 of 500" and last[-1] == "line 500"
    assert "past the end" in run(ws, "read_file", path="log.txt", offset=501).content


def test_a_read_never_outgrows_one_observation(tmp_path):
    """The Toolbox cuts observations at 8000 characters, mid-line; read_file stops at a line
    boundary before that and says where to go on."""
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("wide.txt", "".join(f"{i:04d} " + "x" * 95 + "\n" for i in range(200)))
    text = ws.read_file("wide.txt")
    assert len(text) < 8000 and "truncated" not in text
    shown = text.splitlines()
    assert shown[0].startswith("wide.txt: lines 1-")
    next_line = int(shown[-1].split("offset=")[1].rstrip(")"))
    assert shown[-2].startswith(f"{next_line - 2:04d} ")  # nothing skipped between the windows
    following = ws.read_file("wide.txt", offset=next_line).splitlines()
    assert following[1].startswith(f"{next_line - 1:04d}")

    ws.write_file("min.js", "a" * 50_000)  # one line longer than an observation
    text = ws.read_file("min.js")
    assert len(text) < 8000 and "line 1 is 50000 characters long" in text


def test_edit_file_needs_exactly_one_match(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("game.js", "let a = 1;\nlet b = 1;\nlet c = 2;\n")

    none = run(ws, "edit_file", path="game.js", old="let d", new="let e")
    assert none.is_error and "not found in game.js" in none.content and "read_file" in none.content
    many = run(ws, "edit_file", path="game.js", old=" = 1;", new=" = 3;")
    assert many.is_error and "occurs 2 times in game.js (lines 1, 2)" in many.content
    assert "include more surrounding lines" in many.content
    assert (tmp_path / "game.js").read_text() == "let a = 1;\nlet b = 1;\nlet c = 2;\n"  # untouched

    ok = run(ws, "edit_file", path="game.js", old="let b = 1;", new="let b = 5;")
    assert not ok.is_error and "line 2" in ok.content
    assert (tmp_path / "game.js").read_text() == "let a = 1;\nlet b = 5;\nlet c = 2;\n"
    assert "empty" in run(ws, "edit_file", path="game.js", old="", new="x").content


def test_refusals_are_error_observations_that_say_retrying_cannot_help(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    r = run(ws, "write_file", path="../escape.txt", content="x")
    assert r.is_error and not r.retryable
    assert r.content == "Error: WorkspaceError: the path ../escape.txt may not contain '..': " \
                        "every file stays inside the workspace"
    assert not (tmp_path.parent / "escape.txt").exists()


def test_a_replaced_file_keeps_its_mode(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("run.sh", "#!/bin/sh\necho one\n")
    os.chmod(tmp_path / "run.sh", 0o755)
    ws.write_file("run.sh", "#!/bin/sh\necho two\n")
    assert os.stat(tmp_path / "run.sh").st_mode & 0o777 == 0o755


def test_a_module_fixed_within_the_second_runs_as_fixed_not_from_its_stale_bytecode(tmp_path):
    # Python trusts a .pyc whose source mtime (whole seconds) and size match: a fix of the same
    # length, written in the second the buggy code ran, would be ignored by the next run.
    ws = Workspace(tmp_path, sandbox=False)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def add_1_2() -> str:
        return subprocess.run([sys.executable, "-c", "import calc; print(calc.add(1, 2))"],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              check=True).stdout.strip()

    ws.write_file("calc.py", "def add(a, b):\n    return a - b\n")
    assert add_1_2() == "-1"
    assert list((tmp_path / "__pycache__").glob("calc.*.pyc"))  # the buggy code's bytecode
    first = (tmp_path / "calc.py").stat().st_mtime_ns

    def same_second() -> None:  # as a quick fix gets it; the test does not wait on the clock
        os.utime(tmp_path / "calc.py", ns=(first, first))

    ws.edit_file("calc.py", "a - b", "a + b")  # the same size
    same_second()
    assert add_1_2() == "3"
    ws.write_file("calc.py", "def add(a, b):\n    return a * b\n")
    same_second()
    assert add_1_2() == "2"


# -- atomic writes -------------------------------------------------------------------------------
@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named-temp"])
def test_a_failure_between_write_and_rename_leaves_the_old_file_and_no_debris(tmp_path, monkeypatch,
                                                                              unnamed):
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("game.js", GAME)
    if not unnamed:  # no /proc to name an O_TMPFILE by: the named-temporary path
        monkeypatch.setattr(safe_path.os, "link", _fail)
    monkeypatch.setattr(safe_path.os, "replace", _fail)

    r = run(ws, "write_file", path="game.js", content="half" * 1000)
    assert r.is_error and "game.js" in r.content
    assert (tmp_path / "game.js").read_text() == GAME
    assert sorted(os.listdir(tmp_path)) == ["game.js"]


def _fail(*args, **kwargs):
    raise OSError(5, "Input/output error")


def test_a_process_killed_mid_write_leaves_the_old_file_whole(tmp_path):
    """A real SIGKILL after the new bytes are written, before the rename: the old file is intact
    and, with O_TMPFILE, no temporary file is left behind."""
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("game.js", GAME)
    script = textwrap.dedent(f"""
        import os, signal
        from tao.workspace import Workspace, safe_path
        ws = Workspace({str(tmp_path)!r}, sandbox=False, max_write_bytes=64 << 20)
        safe_path.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        ws.write_file("game.js", "x" * (32 << 20))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9
    assert (tmp_path / "game.js").read_text() == GAME
    assert sorted(os.listdir(tmp_path)) == ["game.js"]


# -- run_command in the real sandbox -------------------------------------------------------------
@needs_bwrap
def test_run_command_output_exit_status_and_the_workspace_as_cwd(tmp_path):
    async def main():
        async with Workspace(tmp_path) as ws:
            ws.write_file("hello.py", "print('hello from', __import__('os').getcwd())\n")
            first = await ws.run_command("python3 hello.py; echo oops >&2; exit 3")
            second = await ws.run_command("cd /tmp && X=1; echo made > made.txt; pwd")
            third = await ws.run_command("echo $X; pwd")
            return first, second, third

    first, second, third = asyncio.run(main())
    assert first == "hello from /workspace\n[stderr]\noops\n[exit status 3]"
    assert second == "/tmp\n[exit status 0]"
    assert third == "\n/workspace\n[exit status 0]"  # no shell state carried over
    assert not (tmp_path / "made.txt").exists()  # it went to the sandbox's private /tmp


@needs_bwrap
def test_commands_change_the_files_the_tools_wrote_and_the_tools_see_theirs(tmp_path):
    async def main():
        async with Workspace(tmp_path) as ws:
            ws.write_file("src/game.js", GAME)
            out = await ws.run_command("echo '// more' >> src/game.js && mkdir -p build && "
                                       "cp src/game.js build/game.min.js && ls build")
            ws.write_file("src/later.js", "1")  # written after the sandbox exists
            later = await ws.run_command("echo 2 >> src/later.js && cat src/later.js")
            return out, later, ws.read_file("build/game.min.js")

    out, later, copied = asyncio.run(main())
    assert out == "game.min.js\n[exit status 0]"
    assert later == "12\n[exit status 0]"
    assert copied.endswith("// more")
    assert (tmp_path / "src" / "game.js").read_text() == GAME + "// more\n"


@needs_bwrap
def test_commands_have_no_network_and_nothing_but_the_workspace_is_writable(tmp_path):
    async def main():
        async with Workspace(tmp_path) as ws:
            return await ws.run_command(
                "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 2)' "
                "2>&1 | tail -1; touch /usr/x /usr/bin/x /x 2>&1; echo done")

    out = asyncio.run(main())
    assert "PermissionError" in out or "Operation not permitted" in out
    assert out.count("Read-only file system") == 3
    assert out.endswith("done\n[exit status 0]")


@needs_bwrap
def test_a_command_past_its_timeout_is_killed_with_what_it_started(tmp_path):
    async def main():
        async with Workspace(tmp_path) as ws:
            slow = await ws.run_command("echo started; (sleep 5; echo late > late.txt) & sleep 30",
                                        timeout=1)
            after = await ws.run_command("echo next")
            return slow, after

    slow, after = asyncio.run(main())
    assert slow == "started\n[timed out: the command was killed after 1 s]"
    assert after == "next\n[exit status 0]"
    import time
    time.sleep(0.2)
    assert not (tmp_path / "late.txt").exists()


@needs_bwrap
def test_long_output_keeps_its_head_and_its_tail(tmp_path):
    async def main():
        async with Workspace(tmp_path) as ws:
            return await ws.run_command("seq 1 20000; echo the-error >&2; exit 1")

    out = asyncio.run(main())
    assert len(out) < 8000
    assert out.startswith("1\n2\n3\n") and "bytes left out here" in out
    assert "\n20000\n[stderr]\nthe-error\n[exit status 1]" in out


@needs_bwrap
def test_run_command_refuses_what_no_shell_should_get(tmp_path):
    ws = Workspace(tmp_path)
    assert "NUL" in run(ws, "run_command", command="ls\x00 /").content
    assert "empty" in run(ws, "run_command", command="  ").content
    r = run(ws, "run_command", command="ls", timeout=0)
    assert "timeout must be between 1 and 600" in r.content
    assert ws._commands.sandbox is None  # refused before any sandbox was made


# -- lifecycle and composition -------------------------------------------------------------------
@needs_bwrap
def test_one_sandbox_made_lazily_reused_and_ended_by_close(tmp_path):
    ws = Workspace(tmp_path)
    assert ws._commands.sandbox is None  # constructing and writing files start nothing
    ws.write_file("a.txt", "a")
    assert ws._commands.sandbox is None

    async def two_commands():
        await ws.run_command("true")
        first = ws._commands.sandbox
        await ws.run_command("true")
        return first

    first = asyncio.run(two_commands())
    assert first is ws._commands.sandbox is not None
    asyncio.run(ws.close())
    assert ws._commands.sandbox is None and first._closed
    assert (tmp_path / "a.txt").read_text() == "a"  # the files stay
    # a later command (a new asyncio.run, as agent.run does) starts a fresh sandbox
    assert asyncio.run(ws.run_command("cat a.txt")) == "a\n[exit status 0]"
    with ws:  # the sync form for sync code
        pass
    assert ws._commands.sandbox is None


def test_sandbox_choice_is_checked_at_once(tmp_path):
    with pytest.raises(ValueError, match="unknown sandbox 'chroot'"):
        Workspace(tmp_path, sandbox="chroot")
    if backend_problem("docker") is not None:
        with pytest.raises(SandboxUnavailable, match="sandbox=False"):
            Workspace(tmp_path, sandbox="docker")
    assert Workspace(tmp_path, sandbox=False).names == ["write_file", "append_file", "read_file", "list_dir",
                                                        "edit_file"]


def test_a_workspace_combines_with_other_tools(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    for tools in ([*ws, calculator], Toolbox([ws, calculator])):
        agent = ReActAgent(ScriptedModel([]), tools=tools)
        assert agent.toolbox.names == ["write_file", "append_file", "read_file", "list_dir", "edit_file",
                                       "calculator"]
    box = Toolbox([ws, calculator])
    assert run(box, "write_file", path="a.txt", content="1").content == "wrote a.txt (1 characters)"
    assert run(box, "calculator", operation="add", a=1, b=2).content == "3"


def test_tool_descriptions_are_short_and_name_their_arguments(tmp_path):
    ws = Workspace(tmp_path, sandbox=None if backend_problem("bwrap") is None else False)
    for spec in ws.specs():
        assert len(spec.description) < 200, spec.name
        for name, prop in spec.parameters["properties"].items():
            assert prop.get("description"), f"{spec.name}.{name}"


# -- the seed 002 run ----------------------------------------------------------------------------
def test_react_agent_writes_the_snake_game_and_finishes(tmp_path):
    """Seed 002's demo through native tool calls: three write_file turns, then the answer."""
    ws = Workspace(tmp_path / "workspace", language="zh", sandbox=False)
    model = ScriptedModel([
        ("先创建 HTML 结构，引入样式和脚本", tool_call("write_file", path="index.html", content=INDEX)),
        ("接下来写样式", tool_call("write_file", path="style.css", content=STYLE)),
        ("最后写游戏逻辑", tool_call("write_file", path="game.js", content=GAME)),
        "已生成贪吃蛇小游戏，打开 index.html 即可游玩",
    ])
    agent = ReActAgent(model, tools=ws)
    events = []

    result = agent.run("使用 HTML + CSS + JS 生成一个贪吃蛇小游戏，代码分别放在 index.html、style.css、"
                       "game.js 三个文件中", sinks=[events.append])

    assert result.status == "done" and result.turns == 4 and result.tool_calls == 3
    assert result.answer == "已生成贪吃蛇小游戏，打开 index.html 即可游玩"
    assert [e.content for e in events if type(e) is Observation] == [
        f"文件 index.html 写入成功（{len(INDEX)} 字符）",
        f"文件 style.css 写入成功（{len(STYLE)} 字符）",
        f"文件 game.js 写入成功（{len(GAME)} 字符）",
    ]
    root = tmp_path / "workspace"
    assert sorted(os.listdir(root)) == ["game.js", "index.html", "style.css"]
    assert (root / "index.html").read_text() == INDEX
    assert (root / "style.css").read_text() == STYLE
    assert (root / "game.js").read_text() == GAME


def test_react_agent_recovers_from_a_refused_path(tmp_path):
    """A refusal is an observation: the model reads it and writes inside the workspace instead."""
    ws = Workspace(tmp_path / "workspace", sandbox=False)
    model = ScriptedModel([
        tool_call("write_file", path="/etc/snake.html", content=INDEX),
        tool_call("write_file", path="snake.html", content=INDEX),
        "done",
    ])
    events = []
    result = ReActAgent(model, tools=ws).run("write snake.html", sinks=[events.append])
    obs = [e for e in events if type(e) is Observation]
    assert result.status == "done" and [o.is_error for o in obs] == [True, False]
    assert "absolute path /etc/snake.html refused" in obs[0].content
    assert "snake.html" in model.calls[1][-1].content  # the model was told
    assert not os.path.exists("/etc/snake.html")
    assert (tmp_path / "workspace" / "snake.html").read_text() == INDEX


@needs_bwrap
def test_two_commands_in_one_turn_take_turns_in_the_one_sandbox(tmp_path):
    async def main():
        async with Workspace(tmp_path) as ws:
            return await ws.execute_all([ToolCall("a", "run_command", {"command": "echo a"}),
                                         ToolCall("b", "run_command", {"command": "echo b"})])

    a, b = asyncio.run(main())
    assert (a.content, b.content) == ("a\n[exit status 0]", "b\n[exit status 0]")


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="as root each sandbox has a uid of its own")
def test_a_later_sandbox_may_change_what_an_earlier_one_made(tmp_path):
    ws = Workspace(tmp_path)
    (tmp_path / "theirs.txt").write_text("the user's")  # there before: readable, not changeable
    assert asyncio.run(ws.run_command("mkdir out && echo 1 > out/n.txt")) == "[exit status 0]"
    asyncio.run(ws.close())
    out = asyncio.run(ws.run_command("echo 2 >> out/n.txt && cat out/n.txt theirs.txt; "
                                     "echo x >> theirs.txt"))
    asyncio.run(ws.close())
    assert out.startswith("1\n2\nthe user's\n[stderr]\n") and "Permission denied" in out
    assert (tmp_path / "theirs.txt").read_text() == "the user's"


@pytest.mark.skipif(backend_problem("subprocess") is not None, reason="no subprocess sandbox here")
def test_the_subprocess_sandbox_is_a_choice_and_runs_in_the_root(tmp_path):
    async def main():
        async with Workspace(tmp_path, sandbox="subprocess") as ws:
            assert ws.sandbox_kind == "subprocess"
            return await ws.run_command("pwd; echo hi > made.txt")

    assert asyncio.run(main()) == f"{tmp_path}\n[exit status 0]"
    assert (tmp_path / "made.txt").read_text() == "hi\n"


@needs_bwrap
def test_react_agent_writes_a_script_runs_it_and_answers_with_its_output(tmp_path):
    ws = Workspace(tmp_path)
    model = ScriptedModel([
        tool_call("write_file", path="fib.py",
                  content="a, b = 0, 1\nfor _ in range(30):\n    a, b = b, a + b\nprint(a)\n"),
        tool_call("run_command", command="python3 fib.py"),
        tool_call("calculator", operation="add", a=832040, b=1),
        lambda messages: f"fib(30) is {messages[-3].content.splitlines()[0]}",
    ])
    events = []
    with ws:
        result = ReActAgent(model, tools=[*ws, calculator]).run("fib(30)?", sinks=[events.append])
    assert result.status == "done" and result.answer == "fib(30) is 832040"
    assert [e.content for e in events if type(e) is Observation] == [
        "wrote fib.py (61 characters)", "832040\n[exit status 0]", "832041"]
    assert ws._commands.sandbox is None  # leaving `with` closed it


# -- a whole-file rewrite that drops what the file defined (issue 27) -----------------------------

def test_rewriting_a_module_without_its_function_says_what_is_gone(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    first = run(ws, "write_file", path="temp.py", content="def c2f(c):\n    return c * 9 / 5 + 32\n")
    assert "gone" not in first.content
    second = run(ws, "write_file", path="temp.py", content="def f2c(f):\n    return (f - 32) * 5 / 9\n")
    assert not second.is_error  # written as asked; the loss is said, not refused
    assert "what it defined before is gone now: c2f" in second.content
    assert "append_file or edit_file" in second.content
    assert (tmp_path / "temp.py").read_text().startswith("def f2c")


def test_a_rewrite_that_calls_what_it_leaves_out_is_refused_and_appended_instead(tmp_path):
    """The 1.5B writes a module one function per write_file: ``primes_up_to`` replaced the
    ``is_prime`` it calls, and the note that it was gone went unheeded (2026-12-07). Such a
    write is an addition sent as a rewrite; it is refused, nothing lost, with the way to add."""
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("primes.py", "def is_prime(n):\n    return n > 1\n")
    later = "def primes_up_to(n):\n    return [k for k in range(n + 1) if is_prime(k)]\n"
    res = run(ws, "write_file", path="primes.py", content=later)
    assert res.is_error and res.content.startswith(
        "Error: WorkspaceError: Not written: this content uses is_prime, which primes.py defines "
        "now and the content leaves out")
    assert "send the same content with append_file" in res.content
    assert (tmp_path / "primes.py").read_text() == "def is_prime(n):\n    return n > 1\n"
    assert not run(ws, "append_file", path="primes.py", content=later).is_error
    main = "import sys\n\nif __name__ == '__main__':\n    print(primes_up_to(int(sys.argv[1])))\n"
    assert run(ws, "write_file", path="primes.py", content=main).is_error  # a main block alone too


def test_appending_what_the_file_already_holds_word_for_word_is_refused(tmp_path):
    """Told to append what a refused rewrite held, the 1.5B did so after writing the file
    whole: two copies of each function, then "occurs 2 times" on every edit (2026-12-07)."""
    ws = Workspace(tmp_path, sandbox=False)
    both = "def is_prime(n):\n    return n > 1\n\n\ndef primes_up_to(n):\n    return []\n"
    ws.write_file("primes.py", both)
    res = run(ws, "append_file", path="primes.py", content=both)
    assert res.is_error and "already holds this content word for word" in res.content
    assert (tmp_path / "primes.py").read_text() == both
    assert not run(ws, "append_file", path="primes.py", content="\nprint(is_prime(7))\n").is_error
    assert not run(ws, "append_file", path="notes.txt", content="def x\n").is_error  # not code
    assert not run(ws, "append_file", path="notes.txt", content="def x\n").is_error


def test_a_write_that_changes_nothing_is_refused_with_what_to_do_next(tmp_path):
    """The 1.5B wrote the same __init__.py ten times in a row, each time told "written"
    (2026-12-07): a write of exactly what the file holds changes nothing and says so, as an
    edit whose old and new are the same does, so the loop stop sees it."""
    ws = Workspace(tmp_path, sandbox=False, language="zh")
    ws.write_file("bank/__init__.py", "from .account import Account\n")
    res = run(ws, "write_file", path="bank/__init__.py", content="from .account import Account\n")
    assert res.is_error and "没有写入：bank/__init__.py 里已经正好是这些内容，什么也没有改变" in res.content
    assert not run(ws, "write_file", path="bank/__init__.py", content="").is_error


def test_an_append_that_starts_with_the_whole_file_adds_only_its_new_lines(tmp_path):
    """Asked for a main block, the 1.5B appended the module again with the block below it:
    every function twice (2026-12-07). Only the lines after the copy go on, and it is said."""
    ws = Workspace(tmp_path, sandbox=False)
    module = "def primes_up_to(n):\n    return [2, 3]\n"
    ws.write_file("primes.py", module)
    main = "if __name__ == '__main__':\n    print(primes_up_to(3))\n"
    said = ws.append_file("primes.py", module + main)
    assert said.startswith("primes.py already held the start of this content word for word, so "
                           "only the new lines after it went on: appended 3 lines to primes.py")
    assert (tmp_path / "primes.py").read_text() == module + main


def test_a_page_script_rewritten_without_a_function_it_calls_is_refused_in_chinese(tmp_path):
    ws = Workspace(tmp_path, sandbox=False, language="zh")
    ws.write_file("app.js", "function render() { document.body.textContent = items.join(); }\n")
    with pytest.raises(WorkspaceError, match="没有写入：这段内容用到了 render"):
        ws.write_file("app.js", "const items = [];\nfunction add(x) { items.push(x); render(); }\n")
    assert (tmp_path / "app.js").read_text().startswith("function render()")


def test_a_page_rewritten_without_its_handler_says_so_in_chinese(tmp_path):
    ws = Workspace(tmp_path, sandbox=False, language="zh")
    run(ws, "write_file", path="app.js",
        content="function add() {}\nconst remove = (i) => { items.splice(i, 1); };\n")
    res = run(ws, "write_file", path="app.js", content="function add() { render(); }\n")
    assert "原文件里的 remove 现在没有了" in res.content


def test_a_rewrite_that_keeps_every_definition_or_a_new_file_adds_no_note(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    run(ws, "write_file", path="m.py", content="def f():\n    return 1\n")
    kept = run(ws, "write_file", path="m.py", content="def f():\n    return 2\n\n\ndef g():\n    pass\n")
    fresh = run(ws, "write_file", path="notes.txt", content="def f(): not code")
    broken = run(ws, "write_file", path="m.py", content="def f(:\n    return 3\ndef g(): pass\n")
    assert not any("gone" in r.content for r in (kept, fresh, broken))


def test_an_edit_that_would_break_a_module_is_not_made(tmp_path):
    """The coder "fixed" a method by putting its body on the def line, above the old body: the
    module no longer imported and the run ended on it (2026-12-07). A .py file that parsed
    before an edit still parses after one, or the edit is refused with the line and why."""
    ws = Workspace(tmp_path, sandbox=False)
    module = "class Stock:\n    def count(self, name):\n        return 0\n"
    ws.write_file("stock.py", module)
    with pytest.raises(WorkspaceError, match=r"not made: it would leave stock.py invalid Python "
                                             r"\(line 3: unexpected indent\)"):
        ws.edit_file("stock.py", "def count(self, name):", "def count(self, name): return 1")
    assert (tmp_path / "stock.py").read_text() == module  # nothing lost
    assert ws.edit_file("stock.py", "return 0", "return 1").startswith("edited stock.py")


def test_a_module_that_does_not_parse_is_said_at_once_and_may_be_fixed_by_edits(tmp_path):
    ws = Workspace(tmp_path, sandbox=False, language="zh")
    said = ws.write_file("calc.py", "def add(a, b:\n    return a + b\n")
    assert said.endswith("但 calc.py 不是合法的 Python（line 1: '(' was never closed），运行前要先修好")
    assert ws.edit_file("calc.py", "def add(a, b:", "def add(a, b):").startswith("文件 calc.py 修改成功")
    assert "合法" not in ws.write_file("ok.py", "x = 1\n")


def test_a_package_module_named_as_its_class_is_said_to_shadow_it(tmp_path):
    """``shapes/Circle.py`` holding ``class Circle`` beside an ``__init__.py`` that does not
    import it: ``from shapes import Circle`` gives the module, and the coder's tests said only
    "'module' object is not callable" (2026-12-07). Either write order is caught."""
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("geo/__init__.py", "# the package\n")
    said = ws.write_file("geo/Square.py", "class Square:\n    pass\n")
    assert said.endswith("Note: geo/__init__.py does not import Square, so from geo import Square "
                         "gives the module geo.Square, not the Square inside it; add from .Square "
                         "import Square to geo/__init__.py")
    ws.write_file("tax/rate.py", "def rate(x):\n    return x\n")
    assert "from .rate import rate" in ws.write_file("tax/__init__.py", "")
    assert "Note" not in ws.write_file("tax/__init__.py", "from .rate import rate\n")
    assert "Note" not in ws.write_file("geo/util.py", "def helper():\n    pass\n")  # no shadow
    assert "Note" not in ws.write_file("square.py", "class square:\n    pass\n")  # no package


def test_a_method_hidden_by_an_attribute_of_its_name_is_said_at_the_write(tmp_path):
    """``self.balance = balance`` in ``__init__`` beside ``def balance(self)``: the issue 27
    filer's package, whose ``account.balance()`` raised "'int' object is not callable" while
    the coder's own runs never called it. pylint calls it method-hidden."""
    ws = Workspace(tmp_path, sandbox=False)
    account = ("class Account:\n    def __init__(self, balance=0):\n        self.balance = balance\n"
               "\n    def balance(self):\n        return self.balance\n")
    assert ws.write_file("bank.py", account).endswith(
        "Note: self.balance = ... at line 3 of bank.py hides the method balance() of Account: "
        "calling x.balance() then fails with a TypeError (such as 'int' object is not callable). "
        "Give the attribute another name (such as self._balance) everywhere the class sets or "
        "reads it as a value: best write the whole file again with write_file")
    zh = Workspace(tmp_path / "zh", sandbox=False, language="zh")
    assert "把 Account 的方法 balance() 盖住了" in zh.write_file("bank.py", account)
    fine = ("class Account:\n    def __init__(self, balance=0):\n        self._balance = balance\n"
            "        self.owner = None\n\n    def balance(self):\n        return self._balance\n\n"
            "    @property\n    def owner(self):\n        return self._owner\n\n"
            "    @owner.setter\n    def owner(self, value):\n        self._owner = value\n")
    assert "Note" not in ws.write_file("bank.py", fine)  # a property's setter is meant to be set


def test_two_notes_on_one_write_read_as_sentences(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("a.py", "def f():\n    return 1\n")
    said = ws.write_file("a.py", "x = (\n")
    assert "write those back too. But a.py is not valid Python" in said and ".." not in said


def test_the_finish_checks_read_no_fifo_and_no_link_out_of_the_workspace(tmp_path):
    """A command may leave a FIFO named test_x.py, or a link to a file outside: reading them
    for the names a run called would hang or reach out. They read as empty."""
    import os

    outside = tmp_path / "secret.py"
    outside.write_text("def leaked():\n    pass\n")
    ws = Workspace(tmp_path / "ws", sandbox=False)
    ws.write_file("mod.py", "def used():\n    return 1\n")
    os.mkfifo(tmp_path / "ws" / "test_fifo.py")
    os.symlink(outside, tmp_path / "ws" / "test_link.py")
    ws._ran("python3 -m pytest -q")  # returns at once: the FIFO is not opened
    assert ws._head("test_fifo.py") == "" and ws._head("test_link.py") == ""
    assert ws._uncalled("mod.py", ws._unrun["mod.py"]) == ["used"]


@needs_bwrap
def test_failing_tests_are_told_what_to_read_and_which_side_to_fix(tmp_path):
    """Shown three pytest failures, the 1.5B sent edit_file with a line of pytest's output as
    ``old`` (2026-12-07): a failing run says how to read a failure and where ``old`` comes from."""
    (tmp_path / "test_add.py").write_text("def test_add():\n    assert 1 + 1 == 3\n")
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    with Workspace(tmp_path, sandbox="bwrap") as ws:
        failed = run(ws, "run_command", command="pytest -q test_add.py").content
        passed = run(ws, "run_command", command="pytest -q test_ok.py").content
    assert "1 failed" in failed and failed.endswith(
        "Some tests failed. In each failure the line marked > is the check that failed and the E "
        "lines what came out. Work out the right value from the task first: if the code is wrong, "
        "fix the code; if the test expects a wrong value, fix the test. edit_file's old is text "
        "copied from the file, never from this output.")
    assert "1 passed" in passed and "Some tests failed" not in passed
