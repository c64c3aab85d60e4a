"""A file longer than one reply: written in parts, never cut silently (issue 27, point 4).

When the model's reply ends inside a ``write_file`` block (the length limit), the complete lines
it got are written and the model is told where it stopped, so it carries on with
``append_file`` instead of writing the whole file again and being cut at the same place."""

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tao import ReActAgent, ScriptedModel
from tao.agents.protocols import TextProtocol
from tao.agents.text_parser import ParseFailure, parse_reply
from tao.events import Observation
from tao.messages import Message, ToolCall
from tao.tools.base import Toolbox
from tao.workspace import Workspace

from sandbox_backends import skip_mark

HEAD = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - "  # cut mid-line
TAIL = "    return a - b\n\nprint(add(2, 3), sub(5, 1))"


def test_a_file_cut_by_the_length_limit_is_finished_with_append_file(tmp_path):
    replies = [
        "Thought: write the module\nAction: write_file【calc.py】\n```python\n" + HEAD,
        "Thought: go on after the cut\nAction: append_file【calc.py】\n```python\n" + TAIL + "\n```",
        "Thought: done\nAction: Finish【calc.py is written】",
    ]
    model = ScriptedModel(replies)
    result = ReActAgent(model, Workspace(tmp_path, sandbox=False), protocol="text",
                        language="en").run("Write calc.py")

    assert result.status == "done" and result.tool_calls == 2
    assert (tmp_path / "calc.py").read_text() == \
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n" + TAIL  # the cut line redone
    first = model.calls[1][-1].content  # what the model was told after the cut
    assert "only the block's first 4 lines were written" in first
    assert "The last line written is: def sub(a, b):" in first
    assert "go on with append_file【calc.py】" in first
    assert "wrote calc.py (47 characters). But calc.py is not valid Python (line 4" in first  # the tool's
    # own line follows; the cut message said errors may only mean the file is not complete yet


def test_the_model_is_told_in_chinese_too(tmp_path):
    replies = ["Action: write_file【a.txt】\n```\n第一行\n第二行\n第三", "Action: Finish【好了】"]
    model = ScriptedModel(replies)
    ReActAgent(model, Workspace(tmp_path, sandbox=False, language="zh"),
               protocol="text", language="zh").run("写 a.txt")
    said = model.calls[1][-1].content
    assert "只写入了前 2 行" in said and "写入的最后一行是：第二行" in said
    assert "append_file【a.txt】" in said
    assert (tmp_path / "a.txt").read_text() == "第一行\n第二行"


def test_a_block_cut_in_its_first_line_writes_nothing(tmp_path):
    replies = ["Action: write_file【a.txt】\n```\nonly a start", "Action: Finish【x】"]
    events = []
    ReActAgent(ScriptedModel(replies), Workspace(tmp_path, sandbox=False), protocol="text",
               language="en").run("write a.txt", sinks=[events.append])
    assert not (tmp_path / "a.txt").exists()
    said = [e.content for e in events if type(e) is Observation]
    assert not said  # a correction, not a tool's observation: nothing ran


def test_a_tool_that_cannot_carry_on_keeps_the_old_rule(tmp_path):
    """Without ``continued_by`` (a user's own writer), a cut block is still never run half."""
    from tao import tool

    written = {}

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        written[path] = content
        return "ok"

    box = Toolbox([write_file])
    protocol = TextProtocol()
    reply = Message.assistant("Action: write_file【a.txt】\n```\none\ntwo\nthr")
    step = protocol.read(reply, "en", box)
    assert step.calls == [] and "nothing was written" in step.error
    assert written == {}


def test_the_parser_keeps_the_complete_lines_for_the_protocol_to_decide():
    from tao.agents.blocks import ToolParams

    shapes = {"write_file": ToolParams.of({"properties": {"path": {"type": "string"},
                                                          "content": {"type": "string"}},
                                           "required": ["path", "content"]})}
    parsed = parse_reply("Action: write_file【a.txt】\n```\none\ntwo\nthr", shapes)
    assert isinstance(parsed, ParseFailure) and parsed.reason == "unclosed_block"
    assert parsed.partial.arguments == {"path": "a.txt", "content": "one\ntwo"}


def test_append_file_adds_lines_and_makes_a_missing_file(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)

    def call(name, **arguments):
        return asyncio.run(ws.execute(ToolCall("c", name, arguments)))

    assert call("append_file", path="notes/a.txt", content="one").content == \
        "appended 1 lines to notes/a.txt (now 1 lines)"
    assert call("append_file", path="notes/a.txt", content="two\nthree").content == \
        "appended 2 lines to notes/a.txt (now 3 lines)"
    assert (tmp_path / "notes" / "a.txt").read_text() == "one\ntwo\nthree"
    empty = call("append_file", path="notes/a.txt", content="")
    assert empty.is_error and "empty" in empty.content
    outside = call("append_file", path="../x.txt", content="pwned")
    assert outside.is_error and not (tmp_path.parent / "x.txt").exists()
    # what the tools wrote stays trusted when read back (the guard's view)
    assert ws._read_ours == {} and call("read_file", path="notes/a.txt").content.startswith(
        "notes/a.txt: lines 1-3 of 3")
    assert ws._read_ours == {"notes/a.txt": True}


# -- Finish after the code ran (issue 27, point 1) -------------------------------------------------

@pytest.fixture
def coder_dir():
    """A workspace the subprocess sandbox's own uid can reach: pytest's tmp_path sits under a
    root-only folder, where ``python3 add.py`` fails with "Permission denied"."""
    where = Path(tempfile.mkdtemp(prefix="tao-coder-"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def code(folder, replies, task, turns=8, language="en"):
    """``tao code``'s agent on ``folder`` (the subprocess sandbox) with scripted replies:
    ``(result, model)``, the model holding every message it was sent."""
    from tao.factory import CODER, AgentSpec, build_agent

    model = ScriptedModel(replies)
    with Workspace(folder, sandbox="subprocess", language=language) as ws:
        return build_agent(AgentSpec(CODER, turns, workspace=ws), model).run(task), model


def test_a_coder_that_never_ran_its_python_gets_one_reminder(coder_dir):
    replies = ["Action: write_file【add.py】\n```python\nprint(1 + 1)\n```",
               "Action: Finish【add.py prints 2】",  # not run: reminded
               "Action: run_command【python3 add.py】",
               "Action: Finish【add.py prints 2】"]
    result, model = code(coder_dir, replies, "Write add.py", turns=6)
    assert result.status == "done" and result.turns == 4
    reminder = model.calls[2][-1].content
    assert "add.py were written but never run" in reminder and "python3 add.py" in reminder
    assert model.calls[3][-1].content == "Observation: 2\n[exit status 0]"  # the output came back


def test_a_module_of_functions_is_to_be_called_not_just_run(coder_dir):
    replies = ["Action: write_file【roman.py】\n```python\ndef to_roman(n):\n    return 'I' * n\n```",
               "Action: Finish【done】", "Action: Finish【done】"]
    _, model = code(coder_dir, replies, "Write roman.py", turns=6)
    assert 'python3 -c "from roman import to_roman; print(to_roman(an example from the task))"' in \
        model.calls[2][-1].content


def test_the_reminder_is_said_once_and_names_pytest_for_tests(coder_dir):
    replies = ["Action: write_file【test_add.py】\n```python\ndef test_add():\n    assert 1 + 1 == 2\n```",
               "Action: Finish【done】", "Action: Finish【done】"]
    result, model = code(coder_dir, replies, "写测试", turns=6, language="zh")
    assert result.status == "done" and result.turns == 3 and result.answer == "done"
    assert "还不能结束" in model.calls[2][-1].content
    assert "python3 -m pytest -q" in model.calls[2][-1].content


def test_an_answer_check_is_a_hook_any_agent_takes():
    from tao import CodeActAgent

    agent = CodeActAgent(ScriptedModel(["<solution>41</solution>", "<solution>42</solution>"]))

    seen = []

    @agent.answer_check
    def sure(answering):
        seen.append(answering)
        return None if answering.answer == "42" else f"Check {answering.answer} again."

    result = agent.run("What is 6 * 7?")
    assert result.answer == "42" and result.turns == 2
    assert [a.answer for a in seen] == ["41"]  # it spoke once: the next answer stands
    assert (seen[0].task, seen[0].lang, seen[0].replies) == \
        ("What is 6 * 7?", "en", ("<solution>41</solution>",))


@(skip_mark("bwrap") or (lambda f: f))
def test_python_and_pytest_are_there_for_the_coders_commands(tmp_path):
    """Whatever the system calls its Pythons, a command's python, python3 and pytest are the
    interpreter tao runs on, with its packages: the checks a coder is reminded to make work."""
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    with Workspace(tmp_path, sandbox="bwrap") as ws:
        out = asyncio.run(ws.execute(ToolCall("c", "run_command", {
            "command": "python -c 'print(6 * 7)' && pytest -q test_one.py"}))).content
    assert out.startswith("42\n") and "1 passed" in out and out.endswith("[exit status 0]")


def test_a_run_that_printed_nothing_checked_nothing(coder_dir):
    """``python3 wordcount.py FILE`` on a module of functions exits 0 and prints nothing; the
    model took that for a pass and said Finish (the coder's runs, 2026-12-06). The silence is
    named, a call is suggested, and Finish still gets its reminder."""
    replies = ["Action: write_file【wordcount.py】\n```python\ndef count_words(text):\n    return {}\n```",
               "Action: run_command【python3 wordcount.py FILE】",
               "Action: Finish【done】",
               'Action: run_command【python3 -c "import wordcount; print(wordcount.count_words(\'a a\'))"】',
               "Action: Finish【done】"]
    result, model = code(coder_dir, replies, "Write wordcount.py", turns=8)
    silent = model.calls[2][-1].content
    assert silent.startswith("Observation: [exit status 0]\nIt printed nothing: wordcount.py only "
                             "defines functions and classes, so run as a command it does nothing.")
    assert 'if __name__ == "__main__": block at the end of wordcount.py' in silent
    assert 'python3 -c "from wordcount import count_words; print(count_words(' in silent
    assert "wordcount.py were written but never run" in model.calls[3][-1].content
    assert "{}" in model.calls[4][-1].content  # the call printed, so it counts
    assert result.status == "done" and result.turns == 5


def test_a_silent_script_after_a_printing_run_owes_nothing(coder_dir):
    replies = ["Action: write_file【say.py】\n```python\nprint('hi')\n```",
               "Action: run_command【python3 say.py】",
               "Action: run_command【python3 -c \"pass\"】",
               "Action: Finish【done】"]
    result, model = code(coder_dir, replies, "Write say.py", turns=8)
    assert "hi" in model.calls[2][-1].content
    assert "printed nothing" not in model.calls[3][-1].content  # nothing was owed any more
    assert result.status == "done" and result.turns == 4


def test_a_function_no_run_called_is_still_owed(coder_dir):
    """to_roman was tried, from_roman never was, and its bug went out with the Finish (the
    coder's runs, 2026-12-07): after the reminder to run the module, a second one names what
    no run called."""
    module = "def to_roman(n):\n    return 'I' * n\n\n\ndef from_roman(s):\n    return len(s)\n"
    replies = [f"Action: write_file【roman.py】\n```python\n{module}```",
               "Action: Finish【done】",  # never run: reminded
               'Action: run_command【python3 -c "import roman; print(roman.to_roman(3))"】',
               "Action: Finish【done】",  # from_roman never called: reminded
               'Action: run_command【python3 -c "from roman import from_roman; print(from_roman(\'III\'))"】',
               "Action: Finish【done】"]
    result, model = code(coder_dir, replies, "Write roman.py", turns=8)
    assert "roman.py were written but never run" in model.calls[2][-1].content
    assert model.calls[3][-1].content == "Observation: III\n[exit status 0]"
    reminder = model.calls[4][-1].content
    assert reminder.startswith("Not done yet: from_roman (roman.py) never called")
    assert 'python3 -c "from roman import from_roman; print(from_roman(an example from the task))"' in reminder
    assert model.calls[5][-1].content == "Observation: 3\n[exit status 0]"
    assert result.status == "done" and result.turns == 6 and result.answer == "done"


def test_what_tests_call_counts_and_a_package_is_imported_from_its_top(coder_dir):
    replies = ["Action: write_file【shop/__init__.py】\n```python\n```",
               "Action: write_file【shop/cart.py】\n```python\nclass Cart:\n    pass\n\n\ndef total(c):\n    return 0\n```",
               "Action: write_file【tests/test_cart.py】\n```python\nfrom shop.cart import Cart\n\n\ndef test_cart():\n    assert Cart()\n```",
               "Action: run_command【python3 -m pytest -q】",
               "Action: Finish【done】", "Action: Finish【done】"]
    result, model = code(coder_dir, replies, "写 shop 包", turns=8, language="zh")
    reminder = model.calls[5][-1].content  # pytest ran (whether it passed is its output's to say)
    assert reminder.startswith("还不能结束：total (shop/cart.py) 还没有被调用过")  # Cart was, by the test
    assert 'python3 -c "from shop import total; print(total(任务里的一个例子))"' in reminder
    assert result.status == "done" and result.turns == 6


def test_a_class_is_made_as_its_init_allows_and_a_method_of_it_called(coder_dir):
    """Told to call ``Inventory(an example from the task)``, the coder gave ``__init__`` a
    parameter the task never asked for (2026-12-07): a class is made as it stands."""
    stock = ("class Inventory:\n    def __init__(self):\n        self.items = {}\n\n"
             "    def add(self, name, qty):\n        self.items[name] = qty\n")
    replies = [f"Action: write_file【inventory.py】\n```python\n{stock}```",
               "Action: Finish【done】", "Action: Finish【done】"]
    _, model = code(coder_dir, replies, "Write inventory.py", turns=6)
    assert ('python3 -c "from inventory import Inventory; x = Inventory(); '
            'print(x.add(an example from the task))"') in model.calls[2][-1].content


def test_a_function_the_task_names_that_no_file_defines_is_owed(coder_dir):
    task = "写一个 Python 模块 roman.py：函数 to_roman(n) 转成罗马数字，函数 from_roman(s) 转回整数。"
    replies = ["Action: write_file【roman.py】\n```python\ndef to_roman(n):\n    return 'I' * n\n```",
               'Action: run_command【python3 -c "from roman import to_roman; print(to_roman(2))"】',
               "Action: Finish【好了】",  # from_roman was never written: reminded
               "Action: append_file【roman.py】\n```python\ndef from_roman(s):\n    return len(s)\n```",
               'Action: run_command【python3 -c "from roman import from_roman; print(from_roman(\'II\'))"】',
               "Action: Finish【好了】"]
    result, model = code(coder_dir, replies, task, turns=8, language="zh")
    assert model.calls[3][-1].content.startswith(
        "还不能结束：任务里写了 from_roman，但没有哪个 Python 文件定义了它们")
    assert result.status == "done" and result.turns == 6


def test_methods_count_as_defined_and_a_web_task_owes_no_names(coder_dir):
    stock = ("class Inventory:\n    def add(self, name, qty):\n        return qty\n\n"
             "    def count(self, name):\n        return 0\n")
    replies = [f"Action: write_file【inventory.py】\n```python\n{stock}```",
               'Action: run_command【python3 -c "from inventory import Inventory; x = Inventory(); '
               'print(x.add(1, 2), x.count(1))"】',
               "Action: Finish【done】"]
    result, model = code(coder_dir, replies, "inventory.py with a class Inventory: add(name, qty), count(name); print() the count", turns=6)
    assert result.status == "done" and result.turns == 3


def test_a_class_in_a_module_of_a_package_is_imported_by_the_package(coder_dir):
    """``from shapes import Circle`` gave the module ``shapes/Circle.py`` (the coder's runs,
    2026-12-07): what the task names must be importable from the package's top."""
    replies = ["Action: write_file【geo/__init__.py】\n```python\n```",
               "Action: write_file【geo/square.py】\n```python\nclass Square:\n    def area(self):\n        return 1\n```",
               'Action: run_command【python3 -c "from geo.square import Square; print(Square().area())"】',
               "Action: Finish【done】",
               "Action: append_file【geo/__init__.py】\n```python\nfrom .square import Square\n```",
               "Action: Finish【done】"]
    result, model = code(coder_dir, replies, "Write a package geo with a class Square() whose area() is 1.", turns=8)
    assert model.calls[4][-1].content == (
        "Not done yet: Square is written in geo/square.py, but geo/__init__.py does not import it, "
        "so from geo import Square gives the module or fails. Add from .square import Square to "
        "geo/__init__.py, then call Finish.")
    assert result.status == "done" and result.turns == 6


def test_a_file_the_task_names_by_its_path_is_owed_before_finish(coder_dir):
    """A package task asked for its tests in tests/test_bank.py; the coder wrote the package
    and finished without them (2026-12-07). Files and folders the task names by path are
    owed; a library name such as Node.js, a unit such as km/h, is no path."""
    task = ("写一个 Python 包 bank（文件夹 bank/，里面有 __init__.py），提供 deposit(amount)；"
            "把测试写在 tests/test_bank.py 里，并确保测试通过。不要用 Node.js，速度以 km/h 计。")
    replies = ["Action: write_file【bank/__init__.py】\n```python\ndef deposit(amount):\n    return amount\n```",
               'Action: run_command【python3 -c "from bank import deposit; print(deposit(5))"】',
               "Action: Finish【好了】",  # no tests/test_bank.py: reminded
               "Action: write_file【tests/test_bank.py】\n```python\nfrom bank import deposit\n\n\n"
               "def test_deposit():\n    assert deposit(5) == 5\n```",
               "Action: run_command【python3 -m pytest -q】",
               "Action: Finish【好了】"]
    result, model = code(coder_dir, replies, task, turns=8, language="zh")
    assert model.calls[3][-1].content.startswith(
        "还不能结束：任务里写到了 tests/test_bank.py，但工作区里还没有")
    assert result.status == "done" and result.turns == 6  # the tests were written, then run
    assert (coder_dir / "tests" / "test_bank.py").is_file()


def test_a_command_the_task_shows_is_owed_until_a_run_ran_its_script(coder_dir):
    """The coder called primes_up_to, saw [2, 3, 5, 7] and finished; the command line the
    task showed was never written, and only running it tells (2026-12-07). Any arguments
    will do, and python3 is python."""
    task = "Write primes.py with primes_up_to(n). Running `python primes.py 10` prints `2 3 5 7`."
    module = "def primes_up_to(n):\n    return [k for k in range(2, n + 1) if all(k % d for d in range(2, k))]\n"
    replies = [f"Action: write_file【primes.py】\n```python\n{module}```",
               'Action: run_command【python3 -c "from primes import primes_up_to; print(primes_up_to(10))"】',
               "Action: Finish【done】",  # `python primes.py 10` never ran: reminded
               "Action: run_command【python3 primes.py 20】",
               "Action: Finish【done】"]
    result, model = code(coder_dir, replies, task, turns=8)
    assert model.calls[3][-1].content.startswith(
        "Not done yet: the task shows the command python primes.py 10, which no run_command ran.")
    assert "It printed nothing: primes.py only defines functions" in model.calls[4][-1].content
    assert result.status == "done" and result.turns == 5


def test_a_command_that_prints_other_than_the_task_says_is_owed(coder_dir):
    """`python primes.py 10` prints `2 3 5 7`, the task said; the coder's printed [2, 3, 5, 7],
    and it finished (2026-12-07). The very command's output is compared word by word."""
    task = "Write primes.py: running `python primes.py 10` prints `2 3 5 7`."
    listing = ("import sys\n\n\ndef primes(n):\n    return [k for k in range(2, n + 1) "
               "if all(k % d for d in range(2, k))]\n\n\nif __name__ == '__main__':\n"
               "    print({})\n")
    replies = ["Action: write_file【primes.py】\n```python\n" + listing.format("primes(int(sys.argv[1]))") + "```",
               "Action: run_command【python3 primes.py 10】",
               "Action: Finish【done】",  # printed [2, 3, 5, 7]: reminded
               "Action: write_file【primes.py】\n```python\n"
               + listing.format("*primes(int(sys.argv[1]))") + "```",
               "Action: run_command【python primes.py 10】",
               "Action: Finish【done】"]
    result, model = code(coder_dir, replies, task, turns=8)
    assert model.calls[3][-1].content == (
        "Not done yet: the task says python primes.py 10 prints 2 3 5 7, but it printed "
        "[2, 3, 5, 7]. Make it print exactly what the task says, run it again, then call Finish.")
    assert model.calls[5][-1].content.startswith("Observation: 2 3 5 7\n")
    assert result.status == "done" and result.turns == 6


@(skip_mark("bwrap") or (lambda f: f))
def test_the_commands_python_is_taos_own_with_its_venv(tmp_path):
    """In a venv (the README's install), ``python3`` in a command was a link to tao's
    interpreter, and a venv's python run through a link elsewhere starts as the base Python:
    none of the venv's packages, pytest among them. It runs with tao's own prefix."""
    with Workspace(tmp_path, sandbox="bwrap") as ws:
        out = asyncio.run(ws.execute(ToolCall("c", "run_command", {
            "command": "python3 -c 'import sys; print(sys.prefix)'; "
                       "python -c 'import sys; print(sys.prefix)'"}))).content
    assert out.split("\n")[:2] == [sys.prefix, sys.prefix], out


def test_a_task_command_counts_as_run_by_its_program_and_script(coder_dir):
    from types import SimpleNamespace

    task = SimpleNamespace(task="Make sure `pytest` passes and `python3 tool.py --help` works.",
                           checklist=())
    with Workspace(coder_dir, sandbox="subprocess") as ws:
        ws._ran("python3 -m pytest -q tests", "1 passed\n[exit status 0]")
        assert ws.commands_check(task).startswith(
            "Not done yet: the task shows the command python3 tool.py --help, which no run_command ran.")
        ws._ran("python tool.py", "usage\n[exit status 0]")
        assert ws.commands_check(task) is None
