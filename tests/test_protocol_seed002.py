"""Seed 002's coding-agent protocol: ``Action: write_file【index.html】`` with the file in the fenced
block after it, one Thought + Action a turn, ``Action: Finish【...】`` at the end - through
``ReActAgent(protocol="text")``, which switches to this form when a tool takes a long text."""

from __future__ import annotations

import pytest

from tao import Model, ReActAgent, ScriptedModel, Toolbox, calculator, tool
from tao.agents.blocks import ToolParams
from tao.agents.protocols import TextProtocol
from tao.agents.text_parser import ParsedAction, ParsedFinal, parse_reply
from tao.events import Action, Error, FinalAnswer, Observation, TokenDelta

try:
    from grammar_check import accepts, sampler
except ImportError:  # tests/ became a package
    from .grammar_check import accepts, sampler

TASK = ("使用 HTML + CSS + JS 生成一个贪吃蛇小游戏，代码分别放在 index.html、style.css、game.js 三个文件中，"
        "要求能用方向键控制，吃到食物会变长。")
HTML = ('<!DOCTYPE html>\n<html>\n<head><link rel="stylesheet" href="style.css"></head>\n'
        '<body><canvas id="game" width="400" height="400"></canvas><script src="game.js"></script></body>\n</html>')
CSS = "body { background: #222; }\ncanvas { display: block; margin: 2em auto; background: #000; }\ninput:focus { outline: none; }"
JS = ("const snake = [{x: 10, y: 10}];\nlet dir = {x: 1, y: 0};\n"
      "document.addEventListener('keydown', e => {\n  if (e.key === 'ArrowUp') dir = {x: 0, y: -1};\n});")
REPLIES = [
    f"Thought: 先创建 HTML 结构，引入样式和脚本\nAction: write_file【index.html】\n```html\n{HTML}\n```",
    f"Thought: 接下来写样式\nAction: write_file【style.css】\n```css\n{CSS}\n```",
    f"Thought: 最后写游戏逻辑\nAction: write_file【game.js】\n```javascript\n{JS}\n```",
    "Thought: 三个文件都写完了\nAction: Finish【已生成贪吃蛇小游戏，打开 index.html 即可游玩】",
]


def recording_write_file():
    """A ``write_file`` tool that keeps what it was given, and the dict it keeps it in."""
    files: dict[str, str] = {}

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a text file (folders are made as needed)."""
        files[path] = content
        return f"文件 {path} 写入成功（{len(content)} 字符）"

    return files, write_file


@tool
def read_file(path: str, offset: int = 1) -> str:
    """Read a text file."""
    return f"(contents of {path})"


def test_the_seed_002_agent_writes_three_files_and_finishes():
    files, write_file = recording_write_file()
    model = ScriptedModel(REPLIES, chunk_size=7)  # streamed in small pieces, as a real model does
    events = []

    result = ReActAgent(model, [write_file], protocol="text").run(TASK, sinks=[events.append])

    assert (result.status, result.turns, result.tool_calls) == ("done", 4, 3)
    assert result.answer == "已生成贪吃蛇小游戏，打开 index.html 即可游玩"
    assert files == {"index.html": HTML, "style.css": CSS, "game.js": JS}  # the blocks, byte for byte
    assert [e.content for e in events if type(e) is Observation] == [
        f"文件 index.html 写入成功（{len(HTML)} 字符）", f"文件 style.css 写入成功（{len(CSS)} 字符）",
        f"文件 game.js 写入成功（{len(JS)} 字符）"]
    assert [e.call.arguments["path"] for e in events if type(e) is Action] == ["index.html", "style.css", "game.js"]
    assert [e.text for e in events if type(e) is FinalAnswer] == [result.answer]
    for turn, reply in enumerate(REPLIES, 1):  # every token reached the sinks as it came
        assert "".join(e.text for e in events if type(e) is TokenDelta and e.turn == turn) == reply
    system = model.calls[0][0].content  # the seed's rules, in the task's language
    assert "write_file【path】" in system and "Finish【最终答案】" in system and "每次只调用一个工具" in system
    assert model.calls[1][-1].content == f"Observation: 文件 index.html 写入成功（{len(HTML)} 字符）"


def test_the_real_workspace_tools_take_the_seed_002_form(tmp_path):
    from tao.workspace import Workspace

    ws = Workspace(tmp_path / "workspace", sandbox=False)  # write_file, read_file, list_dir, edit_file
    events = []
    result = ReActAgent(ScriptedModel(REPLIES), ws, protocol="text", language="en").run(
        TASK, sinks=[events.append])

    assert result.status == "done" and result.tool_calls == 3
    assert [e.content for e in events if type(e) is Observation][0] == f"wrote index.html ({len(HTML)} characters)"
    root = tmp_path / "workspace"
    assert sorted(p.name for p in root.iterdir()) == ["game.js", "index.html", "style.css"]
    assert (root / "index.html").read_text(encoding="utf-8") == HTML
    assert (root / "game.js").read_text(encoding="utf-8") == JS


# -- what is read, and as what ---------------------------------------------------------------

_, _write = recording_write_file()
TOOLS = Toolbox([_write, read_file, calculator])
PARAMS = {t.name: ToolParams.of(t.spec.parameters) for t in TOOLS}


def write(path, content, thought=""):
    return ParsedAction("write_file", {"path": path, "content": content}, thought)


README = "# Snake\n\nRun it:\n\n```bash\npython -m http.server\n```\n\nThen open the page."
FORMS = [
    ("the seed's form", "Thought: 先写 HTML\nAction: write_file【index.html】\n```html\n<p>hi</p>\n```",
     write("index.html", "<p>hi</p>", "先写 HTML")),
    ("an English thought, half-width brackets", "Thought: the page first\nAction: write_file[index.html]\n```html\n<p>\n```",
     write("index.html", "<p>", "the page first")),
    ("call syntax", "Action: write_file(index.html)\n```\n<p>\n```", write("index.html", "<p>")),
    ("call syntax, quoted", 'Action: write_file("a b.txt")\n```\nx\n```', write("a b.txt", "x")),
    ("call syntax, keyword", 'Action: write_file(path="a.txt")\n```\nx\n```', write("a.txt", "x")),
    ("a full-width colon and a Chinese thought label", "思考：写样式\nAction：write_file【style.css】\n```css\na {}\n```",
     write("style.css", "a {}", "写样式")),
    ("bold labels", "**Thought:** t\n**Action:** write_file【a.js】\n```js\nx\n```", write("a.js", "x", "t")),
    ("no language tag", "Action: write_file【a.txt】\n```\nplain\n```", write("a.txt", "plain")),
    ("a tilde fence", "Action: write_file【a.txt】\n~~~\n```\n~~~", write("a.txt", "```")),
    ("a longer fence around a file that holds ```", f"Action: write_file【README.md】\n````markdown\n{README}\n````",
     write("README.md", README)),
    ("a Markdown file's own ```bash example inside a ``` block",
     f"Action: write_file【README.md】\n```markdown\n{README}\n```", write("README.md", README)),
    ("the fence on the Action line", "Action: write_file【a.html】```html\n<p>\n```", write("a.html", "<p>")),
    ("prose between the Action and the block", "Action: write_file【a.txt】\nHere it is:\n\n```\nx\n```",
     write("a.txt", "x")),
    ("an Action Input label before the block", "Action: write_file【a.txt】\nAction Input:\n```\nx\n```",
     write("a.txt", "x")),
    ("the closing fence at the end of the last line", "Action: write_file【a.js】\n```js\nf();```", write("a.js", "f();")),
    ("blank lines and indentation kept", "Action: write_file【a.py】\n```python\ndef f():\n\n    return 1\n\n```",
     write("a.py", "def f():\n\n    return 1\n")),
    ("an empty file", "Action: write_file【empty.txt】\n```\n```", write("empty.txt", "")),
    ("lines that look like labels stay in the file",
     "Action: write_file【notes.md】\n```\nThought: a line of the file\nAction: not an action\nObservation: kept\ninput:focus {}\n```",
     write("notes.md", "Thought: a line of the file\nAction: not an action\nObservation: kept\ninput:focus {}")),
    ("an invented observation after the block is dropped",
     "Action: write_file【a.txt】\n```\nx\n```\nObservation: 文件 a.txt 写入成功\nAction: Finish【done】", write("a.txt", "x")),
    ("windows line endings", "Thought: t\r\nAction: write_file【a.txt】\r\n```\r\nx\r\ny\r\n```\r\n", write("a.txt", "x\ny", "t")),
    ("a path with folders, spaces trimmed", "Action: write_file【 snake/css/style.css 】\n```\nx\n```",
     write("snake/css/style.css", "x")),
    ("a tool that needs no block", "Action: read_file【index.html】", ParsedAction("read_file", {"path": "index.html"})),
    ("seed 001's form beside it", 'Action: calculator\nAction Input: {"operation": "add", "a": 1, "b": 2}',
     ParsedAction("calculator", {"operation": "add", "a": 1, "b": 2})),
    ("Finish", "Thought: 三个文件都写完了\nAction: Finish【已生成贪吃蛇小游戏】", ParsedFinal("已生成贪吃蛇小游戏", "三个文件都写完了")),
    ("Finish over several lines", "Action: Finish【done:\n- index.html\n- game.js】", ParsedFinal("done:\n- index.html\n- game.js")),
    ("Finish, half-width, lower case", "Action: finish[done]", ParsedFinal("done")),
    ("Finish with brackets inside", "Action: Finish【见【说明】】", ParsedFinal("见【说明】")),
    ("Finish and an Action Input", "Action: Finish\nAction Input: all done", ParsedFinal("all done")),
    ("Final Answer still works", "Thought: t\nFinal Answer: done", ParsedFinal("done", "t")),
    ("two actions: the first runs", "Action: write_file【a.txt】\n```\na\n```\nAction: write_file【b.txt】\n```\nb\n```",
     write("a.txt", "a")),
]


@pytest.mark.parametrize("reply, expected", [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_seed_002_forms(reply, expected):
    assert parse_reply(reply, PARAMS) == expected


@tool
def run_command(command: str) -> str:
    """Run a shell command."""
    return command


COMMANDS = {"run_command": ToolParams.of(run_command.spec.parameters)}


@pytest.mark.parametrize("inside, command", [
    ('python3 -c "import roman; print(roman.to_roman(1994))"',
     'python3 -c "import roman; print(roman.to_roman(1994))"'),
    ("python -c 'print(1)'", "python -c 'print(1)'"),
    ('echo "a" "b"', 'echo "a" "b"'),
    ('"pytest -q"', "pytest -q"),
    ("`ls`", "ls"),
    ('pytest -q"', "pytest -q"),
])
def test_a_commands_own_quotes_reach_the_shell(inside, command):
    """A command that ends in a quote kept it: the shell said "Unterminated quoted string" and
    the model, which never saw why, edited its module instead (the coder's runs, 2026-12-06).
    Only a quote around the whole command, or a stray one, is dropped."""
    assert parse_reply(f"Thought: run it\nAction: run_command【{inside}】", COMMANDS) == \
        ParsedAction("run_command", {"command": command}, "run it")


# -- what is wrong gets a corrective observation; nothing half-done is written ---------------

UNUSABLE = [  # (case, reply, what the model is told)
    ("an unknown tool", "Action: create_file【a.html】\n```html\n<p>\n```",
     "there is no tool named create_file (the tools: write_file, read_file, calculator; to finish, use Finish【the final answer】)"),
    ("no block after write_file", "Thought: t\nAction: write_file【a.html】",
     "write_file【a.html】 has no code block after it: write the content in a Markdown code block (```) on the lines after the Action"),
    ("the block before the Action", "```html\n<p>\n```\nAction: write_file【a.html】",
     "write_file【a.html】 has no code block after it: write the content in a Markdown code block (```) on the lines after the Action"),
    ("the block cut at the token limit", "Action: write_file【game.js】\n```js\nconst a = 1;\nfunction loop() {",
     "the code block after write_file is not closed: the reply ended after 2 lines inside it (perhaps at the length "
     "limit), so nothing was written. Write the whole content again and close the block with ``` on a line of its own; "
     "split a long file into smaller ones"),
    ("a nested ```bash example never closed", "Action: write_file【README.md】\n```markdown\n# T\n```bash\nls\n```",
     "the code block after write_file is not closed: the reply ended after 4 lines inside it (perhaps at the length "
     "limit), so nothing was written. Write the whole content again and close the block with ``` on a line of its own; "
     "split a long file into smaller ones"),
    ("no closing bracket", "Action: write_file【a.html\n```html\n<p>\n```", "write_file【 has no closing 】"),
    ("an empty path", "Action: write_file【】\n```\nx\n```", "write_file【】 has nothing between the brackets; put the path there"),
    ("a path without brackets", "Action: write_file a.html\n```html\n<p>\n```",
     "the argument goes between brackets: write_file【a.html】"),
    ("a block without a path", "Action: write_file\n```html\n<p>\n```",
     "write_file needs its path: write write_file【path】 and the content in a code block on the lines after it"),
    ("an empty Finish", "Thought: done\nAction: Finish【】", "Finish【】 has no final answer between the brackets"),
    ("Finish cut before its bracket closed", "Action: Finish【Wrote the three files and", "Finish【 has no closing 】"),
    ("a block and no Action", "Here is the page:\n```html\n<p>\n```", "it has neither an Action nor a Final Answer"),
]


@pytest.mark.parametrize("reply, told", [u[1:] for u in UNUSABLE], ids=[u[0] for u in UNUSABLE])
def test_an_unusable_reply_is_a_corrective_observation_and_the_run_goes_on(reply, told):
    files, write_file = recording_write_file()
    model = ScriptedModel([reply, "Action: write_file【a.txt】\n```\nok\n```", "Action: Finish【done】"])
    events = []

    result = ReActAgent(model, [write_file, read_file, calculator], protocol="text").run(
        "Write a.txt", sinks=[events.append])

    assert [e.message for e in events if type(e) is Error] == [told]
    correction = model.calls[1][-1]
    assert correction.role == "user"
    assert correction.content.startswith(f"Observation: your last reply could not be parsed: {told}\n")
    assert "Action: write_file【path】\n```" in correction.content  # the form, shown again
    assert files == {"a.txt": "ok"}  # nothing from the unusable reply was written
    assert (result.status, result.answer, result.turns) == ("done", "done", 3)


def test_the_correction_follows_the_task_language():
    model = ScriptedModel(["Action: write_file【game.js】\n```js\nlet a", "Action: Finish【好了】"])
    _, write_file = recording_write_file()
    ReActAgent(model, [write_file], protocol="text").run(TASK)
    correction = model.calls[1][-1].content
    assert correction.startswith("Observation: 无法解析你的上一条回复：write_file 后面的代码块没有闭合：写了 1 行之后")
    assert "所以什么都没有写入" in correction and "Action: write_file【path】" in correction


def test_max_turns_bounds_a_model_that_never_closes_its_block():
    _, write_file = recording_write_file()
    model = ScriptedModel(["Action: write_file【a.js】\n```js\nlet a"] * 3)
    result = ReActAgent(model, [write_file], protocol="text", max_turns=3).run("write a.js")
    assert (result.status, result.turns, result.tool_calls) == ("max_turns", 3, 0)


# -- on the embedded model a grammar holds replies to the form --------------------------------

class GrammarModel(Model):
    """Stands in for LocalModel where only ``supports_grammar`` matters: nothing is decoded."""

    supports_grammar = True

    async def stream(self, messages, **kwargs):  # pragma: no cover - never called
        raise AssertionError


def block_grammar():
    _, write_file = recording_write_file()
    tools = Toolbox([write_file, read_file, calculator])
    return TextProtocol().model_kwargs(GrammarModel(), tools, "zh")


def test_with_a_file_tool_the_grammar_is_seed_002s_and_llama_cpp_parses_it():
    kwargs = block_grammar()
    assert "stop" not in kwargs  # the grammar ends the reply: a file may hold a line "Observation: ..."
    gbnf = kwargs["grammar"]
    assert '"Action: " "write_file" "【" arg "】" "\\n" block' in gbnf
    assert '"Action: " "read_file" "【" arg "】"' in gbnf and '"Action: Finish【"' in gbnf
    sampler(gbnf)


def test_the_grammar_takes_the_seed_002_replies():
    gbnf = block_grammar()["grammar"]
    for reply in REPLIES:
        assert accepts(gbnf, reply), reply
    assert accepts(gbnf, f"Thought: t\nAction: write_file【README.md】\n```markdown\n{README}\n```")
    assert accepts(gbnf, "Thought: t\nAction: read_file【index.html】")
    # Qwen's tokenizer writes "```\n" as "``" + "`\n": the fence and a newline may end the reply
    assert accepts(gbnf, REPLIES[1] + "\n")
    assert accepts(gbnf, 'Thought: t\nAction: calculator\nAction Input: {"operation": "add", "a": 1, "b": 2}')


@pytest.mark.parametrize("reply", [
    "Thought: t\nAction: write_file【a.js】\n```js\nlet a",  # unclosed: the grammar would go on
    "Thought: t\nAction: write_file【a.md】\n```\n```\nmore\n```",  # a bare fence inside: it must end the file
    "Thought: t\nAction: write_file【a.md】\n```\n  ```\nmore\n```",  # an indented one too
    "Thought: t\nAction: write_file【】\n```\nx\n```",
    "Thought: t\nAction: write_file【a.txt】",
    "Thought: t\nAction: create_file【a.txt】\n```\nx\n```",
    "Thought: t\nAction: Finish【】",
    "Thought: t\nFinal Answer: done",  # this toolbox's grammar ends with Finish【...】 only
    "Thought: t\nAction: write_file【a.txt】\n```\nx\n```\nObservation: invented",
])
def test_the_grammar_refuses_what_the_parser_would_refuse_or_read_otherwise(reply):
    assert not accepts(block_grammar()["grammar"], reply)


def test_grammar_and_parser_agree_on_where_a_file_ends():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    gbnf = block_grammar()["grammar"]
    pieces = st.sampled_from(["```", "``", "`", "```bash", "```js x", "~~~", " ", "   ", "    ", "\t", "a", "}",
                              "Observation: x", "Action: y", "】", "【", "中文", "\\", '"'])
    line = st.lists(pieces, max_size=4).map("".join)

    @hypothesis.settings(max_examples=150, deadline=None, derandomize=True)
    @hypothesis.given(st.lists(line, max_size=6))
    def check(lines):
        content = "\n".join(lines)
        reply = f"Thought: t\nAction: write_file【f.md】\n```\n{content}\n```" if lines else \
            "Thought: t\nAction: write_file【f.md】\n```\n```"
        if accepts(gbnf, reply):  # whatever the grammar lets through is read back whole
            assert parse_reply(reply, PARAMS) == write("f.md", content, "t")

    check()


def test_other_toolboxes_keep_seed_001s_grammar():
    from tao.grammar import react_text_grammar

    kwargs = TextProtocol().model_kwargs(GrammarModel(), Toolbox([calculator]), "en")
    assert kwargs == {"stop": TextProtocol.stop, "grammar": react_text_grammar(Toolbox([calculator]).specs())}
    system = TextProtocol().system_prompt("en", Toolbox([calculator]))
    assert "Action Input: the tool arguments as a JSON object" in system and "【" not in system
