"""tao code on fifteen small projects of seed 002's size, each judged by what it does (issue 27).

    flock /tmp/tao-model.lock python benchmarks/coding_set.py [--half dev|held|held2|all]
        [--model local] [--max-turns 15] [--keep DIR] [--json FILE] [--judge-only DIR]

Each task is a paragraph in Chinese or English; the agent is what ``tao code TASK`` builds
(``tao.cli.code.build_coder`` on a fresh ``Workspace`` with ``check_pages=True`` and the
default sandbox), on the model ``tao.cli.code.for_coding`` gives. Then the judge:

- **web pages**: headless Chromium (Debian's ``chromium`` under Playwright, as
  ``snake_check``), the folder served on 127.0.0.1 and every other request refused; the judge
  types into inputs and clicks buttons by their text, as a person would, and reads the page's
  text. Any uncaught script error fails the task.
- **Python**: tests the agent never saw, run with pytest on a copy of the folder (a child
  process, 60 s); where the task asks for tests, the agent's own tests must pass too.

Half of the set (``dev``) was looked at while the coder was built; the other half (``held``)
is only ever scored. A second held-back half (``held2``, four more tasks) was added 2026-12-07
and is likewise never looked at while building, only scored. ``dev2`` (three Python tasks, two
of them packages with their own tests, added the same day) is looked at, like ``dev``: packages
were the kind the held halves failed. One table row per task: works,
the judge's reason, turns, tokens, seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import snake_check  # noqa: E402 - beside this file: the browser flags and the quiet server

# -- the tasks ------------------------------------------------------------------------------------
# A web step: ("fill", n, text) types text into the n-th <input> (0-based), ("click", label)
# clicks the button whose text is label, ("has", text) / ("lacks", text) read the page's text.

TASKS: list[dict[str, Any]] = [
    {"id": "double-web-en", "half": "dev", "kind": "web",
     "task": "Make a web page (index.html, with any CSS and JavaScript in files beside it) with "
             "a number input and a button labelled Double. Clicking Double shows twice the "
             "number typed, on the page.",
     "steps": [("fill", 0, "21"), ("click", "Double"), ("has", "42"),
               ("fill", 0, "-3.5"), ("click", "Double"), ("has", "-7")]},
    {"id": "counter-web-zh", "half": "dev", "kind": "web",
     "task": "做一个计数器网页（index.html，CSS 和 JavaScript 可以放在旁边的文件里）：页面上显示"
             "当前计数，从 0 开始；一个写着“加一”的按钮让计数加 1，一个写着“清零”的按钮让计数回到 0。",
     "steps": [("has", "0"), ("click", "加一"), ("click", "加一"), ("click", "加一"), ("has", "3"),
               ("click", "清零"), ("has", "0"), ("lacks", "3")]},
    {"id": "wordcount-py-en", "half": "dev", "kind": "python",
     "task": "Write a Python module wordcount.py with a function count_words(text) that returns a "
             "dict mapping each word, lowercased, to how many times it occurs; punctuation is not "
             "part of a word. Running `python wordcount.py FILE` prints each word and its count, "
             "most frequent first, one per line as `word count`.",
     "tests": """
        import subprocess, sys
        from wordcount import count_words

        def test_counts_lowercased_words_without_punctuation():
            assert count_words("The cat, the hat. THE end!") == {"the": 3, "cat": 1, "hat": 1, "end": 1}

        def test_empty_text():
            assert count_words("") == {}

        def test_command_line(tmp_path):
            f = tmp_path / "t.txt"
            f.write_text("b a b c b a")
            out = subprocess.run([sys.executable, "wordcount.py", str(f)], capture_output=True,
                                 text=True, timeout=20).stdout.split("\\n")
            assert out[0].split() == ["b", "3"] and out[1].split() == ["a", "2"]
        """},
    {"id": "roman-py-zh", "half": "dev", "kind": "python",
     "task": "写一个 Python 模块 roman.py：函数 to_roman(n) 把 1 到 3999 的整数转换成罗马数字字符串"
             "（例如 1994 → 'MCMXCIV'），函数 from_roman(s) 把罗马数字转换回整数；超出范围的 n 要抛出 "
             "ValueError。",
     "tests": """
        import pytest
        from roman import from_roman, to_roman

        def test_to_roman():
            assert [to_roman(n) for n in (1, 4, 9, 14, 40, 90, 400, 1994, 3999)] == \\
                ["I", "IV", "IX", "XIV", "XL", "XC", "CD", "MCMXCIV", "MMMCMXCIX"]

        def test_round_trip():
            assert all(from_roman(to_roman(n)) == n for n in range(1, 4000))

        def test_out_of_range():
            for n in (0, 4000, -1):
                with pytest.raises(ValueError):
                    to_roman(n)
        """},
    {"id": "celsius-web-zh", "half": "held", "kind": "web",
     "task": "做一个温度换算网页（index.html，CSS 和 JavaScript 可以放在旁边的文件里）：一个输入框"
             "输入摄氏度，点击“转换”按钮后，在页面上显示对应的华氏度（华氏度 = 摄氏度 × 9 / 5 + 32）。",
     "steps": [("fill", 0, "100"), ("click", "转换"), ("has", "212"),
               ("fill", 0, "-40"), ("click", "转换"), ("has", "-40")]},
    {"id": "todo-web-en", "half": "held", "kind": "web",
     "task": "Make a to-do list web page (index.html, with any CSS and JavaScript in files beside "
             "it): a text input and an Add button add the typed item to a list on the page; every "
             "item in the list has its own Remove button that takes that item away.",
     "steps": [("fill", 0, "buy milk"), ("click", "Add"), ("fill", 0, "call mom"),
               ("click", "Add"), ("has", "buy milk"), ("has", "call mom"),
               ("click", "Remove"), ("lacks", "buy milk"), ("has", "call mom")]},
    {"id": "shapes-pkg-en", "half": "held", "kind": "python", "own_tests": True,
     "task": "Write a small Python package `shapes` (a folder shapes/ with __init__.py) with "
             "classes Circle(radius) and Rectangle(width, height), each with methods area() and "
             "perimeter(); a negative size raises ValueError. Write its tests in "
             "tests/test_shapes.py and make sure they pass.",
     "tests": """
        import math
        import pytest
        from shapes import Circle, Rectangle

        def test_circle():
            c = Circle(2)
            assert math.isclose(c.area(), math.pi * 4) and math.isclose(c.perimeter(), 4 * math.pi)

        def test_rectangle():
            r = Rectangle(3, 4)
            assert r.area() == 12 and r.perimeter() == 14

        def test_negative_sizes():
            with pytest.raises(ValueError):
                Circle(-1)
            with pytest.raises(ValueError):
                Rectangle(1, -2)
        """},
    {"id": "inventory-py-zh", "half": "held", "kind": "python",
     "task": "写一个 Python 模块 inventory.py，里面有类 Inventory：add(name, qty) 增加某种物品的数量，"
             "remove(name, qty) 减少数量（数量不够时抛出 ValueError，库存不变），count(name) 返回当前"
             "数量（没有的物品返回 0）。",
     "tests": """
        import pytest
        from inventory import Inventory

        def test_add_and_count():
            inv = Inventory()
            inv.add("apple", 3)
            inv.add("apple", 2)
            assert inv.count("apple") == 5 and inv.count("pear") == 0

        def test_remove_too_many_leaves_stock():
            inv = Inventory()
            inv.add("pen", 2)
            with pytest.raises(ValueError):
                inv.remove("pen", 5)
            assert inv.count("pen") == 2
            inv.remove("pen", 2)
            assert inv.count("pen") == 0
        """},
    {"id": "average-web-zh", "half": "held2", "kind": "web",
     "task": "做一个算平均分的网页（index.html，CSS 和 JavaScript 可以放在旁边的文件里）：一个输入框"
             "输入分数，点击“添加”按钮把这个分数记下来；页面上一直显示目前所有分数的平均分，保留两位"
             "小数（例如 85.00）；点击“清空”按钮删掉所有记下的分数，之后再添加的分数重新开始算平均。",
     "steps": [("fill", 0, "80"), ("click", "添加"), ("fill", 0, "90"), ("click", "添加"),
               ("has", "85.00"), ("fill", 0, "75"), ("click", "添加"), ("has", "81.67"),
               ("lacks", "85.00"), ("click", "清空"), ("lacks", "81.67"),
               ("fill", 0, "60"), ("click", "添加"), ("has", "60.00")]},
    {"id": "guests-web-en", "half": "held2", "kind": "web",
     "task": "Make a guest check-in web page (index.html, with any CSS and JavaScript in files "
             "beside it): a text input and an Add Guest button add the typed name to a guest "
             "list on the page; each guest in the list has its own Check In button, which marks "
             "that guest as checked in and then goes away. The page always shows a line "
             "`Checked in: X of Y`, where Y is the number of guests and X how many of them are "
             "checked in.",
     "steps": [("has", "Checked in: 0 of 0"), ("fill", 0, "Ann"), ("click", "Add Guest"),
               ("fill", 0, "Bob"), ("click", "Add Guest"), ("has", "Ann"), ("has", "Bob"),
               ("has", "Checked in: 0 of 2"), ("click", "Check In"),
               ("has", "Checked in: 1 of 2"), ("click", "Check In"),
               ("has", "Checked in: 2 of 2"), ("lacks", "1 of 2")]},
    {"id": "duration-py-en", "half": "held2", "kind": "python",
     "task": "Write a Python module duration.py with two functions. parse_duration(text) turns a "
             "duration such as '1h30m', '45s' or '2h5s' (whole numbers each followed by h, m or "
             "s, in that order, each unit at most once, no spaces) into a number of seconds, and "
             "raises ValueError for anything else, such as '', 'abc' or '10x'. "
             "format_duration(seconds) does the reverse: hours, then minutes and seconds below "
             "60, leaving out the units that are zero ('1h2m5s', '1m', '2h'; 0 gives '0s'). "
             "Running `python duration.py D1 D2 ...` prints the total of the durations in that "
             "format: `python duration.py 1h30m 45m` prints 2h15m.",
     "tests": """
        import subprocess, sys
        import pytest
        from duration import format_duration, parse_duration

        def test_parse():
            assert parse_duration("1h30m") == 5400
            assert parse_duration("45s") == 45
            assert parse_duration("2h5s") == 7205

        def test_parse_rejects():
            for bad in ("", "abc", "10x"):
                with pytest.raises(ValueError):
                    parse_duration(bad)

        def test_format():
            assert [format_duration(n) for n in (3725, 60, 7200, 3601, 0)] == \\
                ["1h2m5s", "1m", "2h", "1h1s", "0s"]

        def test_command_line():
            out = subprocess.run([sys.executable, "duration.py", "1h30m", "45m"],
                                 capture_output=True, text=True, timeout=20).stdout
            assert out.strip() == "2h15m"
        """},
    {"id": "cipher-pkg-zh", "half": "held2", "kind": "python", "own_tests": True,
     "task": "写一个 Python 包 cipher（文件夹 cipher/，里面有 __init__.py），提供凯撒密码的两个函数："
             "encrypt(text, shift) 把每个英文字母在字母表里往后移 shift 位（z 之后回到 a，大小写不变），"
             "decrypt(text, shift) 把它还原；shift 可以是任意整数（负数或大于 26 都行）。只移动英文"
             "字母 a-z 和 A-Z，其他字符（数字、标点、空格、中文）原样保留。把它的测试写在 "
             "tests/test_cipher.py 里，并确保测试通过。",
     "tests": """
        from cipher import decrypt, encrypt

        def test_encrypt():
            assert encrypt("Hello, World!", 3) == "Khoor, Zruog!"
            assert encrypt("xyz XYZ", 3) == "abc ABC"
            assert encrypt("abc", -1) == "zab"

        def test_other_characters_unchanged():
            assert encrypt("你好 abc 123", 1) == "你好 bcd 123"

        def test_round_trip():
            text = "The Quick Brown Fox, 2026!"
            for shift in (-30, 0, 1, 25, 26, 52, 100):
                assert decrypt(encrypt(text, shift), shift) == text
            assert decrypt("Khoor", 3) == "Hello"
        """},
    {"id": "textstats-pkg-en", "half": "dev2", "kind": "python", "own_tests": True,
     "task": "Write a Python package `textstats` (a folder textstats/ with __init__.py) with a "
             "class TextStats(text) whose methods are words() - the number of words, "
             "sentences() - the number of sentences (each ends with '.', '!' or '?'), and "
             "longest_word() - the longest word without its punctuation (the first one on a "
             "tie). `from textstats import TextStats` must work. Write its tests in "
             "tests/test_textstats.py and make sure they pass.",
     "tests": """
        from textstats import TextStats

        def test_counts():
            t = TextStats("It rains. Does it pour? Yes, it pours!")
            assert t.words() == 8 and t.sentences() == 3

        def test_longest_word_without_punctuation():
            assert TextStats("A tiny elephant, walking slowly.").longest_word() == "elephant"
            assert TextStats("one two six").longest_word() == "one"
        """},
    {"id": "bank-pkg-zh", "half": "dev2", "kind": "python", "own_tests": True,
     "task": "写一个 Python 包 bank（文件夹 bank/，里面有 __init__.py），提供类 Account："
             "Account(owner, balance=0) 开户；deposit(amount) 存钱，withdraw(amount) 取钱，"
             "金额必须大于 0，取的钱超过余额时抛出 ValueError 且余额不变；balance() 返回当前余额；"
             "history() 返回按时间顺序的交易列表，每笔是 (\"deposit\" 或 \"withdraw\", 金额)。"
             "`from bank import Account` 要能用。把测试写在 tests/test_bank.py 里，并确保测试通过。",
     "tests": """
        import pytest
        from bank import Account

        def test_deposit_withdraw_history():
            a = Account("Li", 100)
            a.deposit(50)
            a.withdraw(30)
            assert a.balance() == 120
            assert a.history() == [("deposit", 50), ("withdraw", 30)]

        def test_overdraw_and_bad_amounts_change_nothing():
            a = Account("Wang")
            a.deposit(10)
            for bad in (lambda: a.withdraw(11), lambda: a.deposit(0), lambda: a.withdraw(-5)):
                with pytest.raises(ValueError):
                    bad()
            assert a.balance() == 10 and a.history() == [("deposit", 10)]
        """},
    {"id": "primes-py-en", "half": "dev2", "kind": "python",
     "task": "Write a Python module primes.py with two functions: is_prime(n), True when the "
             "integer n is a prime number (so False for 0, 1 and negative numbers), and "
             "primes_up_to(n), the list of all primes <= n in increasing order. Running "
             "`python primes.py N` prints the primes up to N on one line, separated by spaces: "
             "`python primes.py 10` prints `2 3 5 7`.",
     "tests": """
        import subprocess, sys
        from primes import is_prime, primes_up_to

        def test_is_prime():
            assert [n for n in range(-3, 30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]

        def test_primes_up_to():
            assert primes_up_to(1) == [] and primes_up_to(2) == [2]
            assert primes_up_to(30) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]

        def test_command_line():
            out = subprocess.run([sys.executable, "primes.py", "20"], capture_output=True,
                                 text=True, timeout=20).stdout
            assert out.split() == ["2", "3", "5", "7", "11", "13", "17", "19"]
        """},
]


@dataclass
class Verdict:
    id: str
    half: str
    works: bool = False
    reason: str = ""
    status: str = ""
    turns: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    attempts: int = 0
    each: list[dict[str, Any]] = field(default_factory=list)  # per attempt: the judge's verdict
    files: dict[str, int] = field(default_factory=dict)


# -- the judges -----------------------------------------------------------------------------------
class _Utf8(snake_check._Quiet):
    """Text files served as UTF-8, which is how the workspace writes them: a page that
    forgot ``<meta charset>`` is judged on what it does, not on the guess Chromium makes."""

    extensions_map = {**snake_check._Quiet.extensions_map,
                      **{ext: f"{kind}; charset=utf-8" for ext, kind in (
                          (".html", "text/html"), (".htm", "text/html"),
                          (".js", "text/javascript"), (".mjs", "text/javascript"),
                          (".css", "text/css"))}}


def judge_web(folder: Path, steps: list[tuple[Any, ...]]) -> tuple[bool, str]:
    """Play ``steps`` on ``folder/index.html`` in headless Chromium; (works, why not)."""
    from playwright.sync_api import sync_playwright

    if not (folder / "index.html").is_file():
        return False, "no index.html"
    handler = lambda *a, **k: _Utf8(*a, directory=str(folder), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    errors: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=snake_check.CHROMIUM,
                                        args=snake_check.FLAGS)
            page = browser.new_context().new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base)
                       else r.abort("blockedbyclient"))
            page.on("pageerror", lambda e: errors.append(f"uncaught {e}"))
            page.goto(base + "index.html", timeout=15_000)
            for step in steps:
                why = _step(page, step)
                if errors:
                    return False, f"{errors[0][:150]} (at {step})"
                if why:
                    return False, why
            browser.close()
    except Exception as e:  # noqa: BLE001 - a page that hangs or a step that times out
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
    finally:
        server.shutdown()
    return True, "every step did what the task says"


def _step(page: Any, step: tuple[Any, ...]) -> str:
    kind = step[0]
    if kind == "fill":
        inputs = page.locator("input:visible, textarea:visible")
        if inputs.count() <= step[1]:
            return f"no input number {step[1] + 1}"
        inputs.nth(step[1]).fill(step[2], timeout=3_000)
        return ""
    if kind == "click":
        button = page.get_by_role("button", name=step[1]).or_(
            page.locator(f"input[type=button][value='{step[1]}'], input[type=submit][value='{step[1]}']"))
        if button.count() == 0:
            return f"no button {step[1]!r}"
        button.first.click(timeout=3_000)
        page.wait_for_timeout(200)
        return ""
    text = page.inner_text("body")
    if kind == "has" and step[1] not in text:
        return f"{step[1]!r} not on the page: {' '.join(text.split())[:120]!r}"
    if kind == "lacks" and step[1] in text:
        return f"{step[1]!r} still on the page: {' '.join(text.split())[:120]!r}"
    return ""


def judge_python(folder: Path, tests: str, own_tests: bool) -> tuple[bool, str]:
    """The hidden tests (and the agent's own, when asked for) with pytest on a copy of
    ``folder``; (works, the first failure)."""
    if not folder.is_dir():
        return False, "no folder"
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "project"
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
        (copy / "test_judge_hidden.py").write_text(textwrap.dedent(tests), encoding="utf-8")
        runs = [["test_judge_hidden.py"]]
        if own_tests:
            own = [str(p.relative_to(copy)) for p in copy.rglob("test*.py")
                   if p.name != "test_judge_hidden.py"]
            if not own:
                return False, "the task asked for tests; none were written"
            runs.append(own)
        for args in runs:
            try:
                done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p",
                                       "no:cacheprovider", *args], cwd=copy, capture_output=True,
                                      text=True, timeout=60,
                                      env={**os.environ, "PYTHONPATH": str(copy)})
            except subprocess.TimeoutExpired:
                return False, f"{' '.join(args)}: over 60 s"
            if done.returncode != 0:
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("E ", "FAILED",
                                                                               "ERROR"))]
                return False, f"{'hidden' if args == runs[0] else 'own'} tests: " + \
                    " / ".join(lines[:2])[:200]
    return True, "hidden tests pass" + (", and its own" if own_tests else "")


def judge(task: dict[str, Any], folder: Path) -> tuple[bool, str]:
    if task["kind"] == "web":
        return judge_web(folder, task["steps"])
    return judge_python(folder, task["tests"], task.get("own_tests", False))


# -- the agent ------------------------------------------------------------------------------------
def run_task(model: Any, task: dict[str, Any], folder: Path, max_turns: int,
             attempts: int = 1, repair: bool = False) -> Verdict:
    from tao.cli.code import build_coder
    from tao.events import RunFinished, RunStarted, Thought, TokenDelta, TurnStarted, Observation
    from tao.lang import detect_language
    from tao.workspace import Workspace

    v = Verdict(task["id"], task["half"])
    ws = Workspace(folder, language=detect_language(task["task"]), check_pages=True)
    agent = build_coder(model, ws, max_turns, attempts=attempts)
    judged = [0.0]
    if attempts > 1 and repair:  # tao.Attempts(repair=True): keep the files, say the problems
        agent.repair = True
    if attempts > 1:  # each attempt judged as it ends: attempt 1 is the greedy run alone
        own_check = agent.check

        async def check(text: str, result: Any) -> list[str]:
            began = time.perf_counter()
            works, why = await asyncio.to_thread(judge, task, folder)
            v.each.append({"works": works, "why": why[:160]})
            judged[0] += time.perf_counter() - began  # not the coder's time
            return await own_check(text, result)

        agent.check = check
    start = time.perf_counter()
    with (folder.parent / f"{folder.name}.log").open("w", encoding="utf-8") as log:
        async def go() -> None:
            try:
                async for e in agent.stream(task["task"]):
                    if isinstance(e, TokenDelta):
                        log.write(e.text)
                    elif isinstance(e, TurnStarted):
                        log.write(f"\n\n===== turn {e.turn} =====\n")
                    elif isinstance(e, Observation):
                        log.write(f"\n----- observation -----\n{e.content}\n")
                    elif isinstance(e, RunStarted) and "attempts" not in e.agent:
                        v.attempts += 1  # the coder's own runs (not the Attempts around them)
                    elif isinstance(e, Thought) and re.match(r"attempt \d+/|第 \d+/\d+ 次尝试",
                                                             e.text):
                        log.write(f"\n\n##### {e.text}\n")
                    elif isinstance(e, RunFinished):
                        r = e.result
                        v.status, v.turns, v.tool_calls = r.status, r.turns, r.tool_calls
                        v.prompt_tokens = r.usage.prompt_tokens
                        v.completion_tokens = r.usage.completion_tokens
                    log.flush()
            finally:
                await ws.close()

        asyncio.run(go())
    v.seconds = time.perf_counter() - start - judged[0]
    v.files = {p.relative_to(folder).as_posix(): p.stat().st_size
               for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    v.works, v.reason = judge(task, folder)
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=("dev", "dev2", "held", "held2", "all"), default="all")
    ap.add_argument("--only", help="comma-separated task ids")
    ap.add_argument("--model", default="local", choices=("local", "local-0.5b", "local-1.5b"))
    ap.add_argument("--max-turns", type=int, default=15, help="tao code's default")
    ap.add_argument("--attempts", type=int, default=1, help="tao code --attempts")
    ap.add_argument("--repair", action="store_true",
                    help="with --attempts: a new attempt keeps the files and is told the problems")
    ap.add_argument("--keep", help="keep each task's folder and stream log here")
    ap.add_argument("--json", help="append one JSON line per task; tasks already in it are skipped")
    ap.add_argument("--judge-only", help="judge the folders under this --keep dir, run nothing")
    args = ap.parse_args(argv)
    tasks = [t for t in TASKS if args.half in ("all", t["half"])]
    if args.only:
        tasks = [t for t in tasks if t["id"] in args.only.split(",")]
    if args.judge_only:
        for t in tasks:
            ok, why = judge(t, Path(args.judge_only) / t["id"])
            print(f"| {t['id']} | {t['half']} | {'yes' if ok else 'no'} | {why} |")
        return 0
    done = set()
    if args.json and Path(args.json).exists():
        done = {json.loads(ln)["id"] for ln in Path(args.json).read_text().splitlines() if ln}
    from snake_local import model_for

    model = model_for(args.model)
    keep = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tao-coding-"))
    keep.mkdir(parents=True, exist_ok=True)
    print("| task | half | works | turns | tool calls | tokens | s | why |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for t in tasks:
        if t["id"] in done:
            continue
        folder = keep / t["id"]
        shutil.rmtree(folder, ignore_errors=True)
        v = run_task(model, t, folder, args.max_turns, args.attempts, args.repair)
        print(f"| {v.id} | {v.half} | {'yes' if v.works else 'no'} | {v.turns} | {v.tool_calls} | "
              f"{v.prompt_tokens}+{v.completion_tokens} | {v.seconds:.0f} | "
              f"{v.reason.replace('|', '/')[:160]} |", flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(asdict(v), ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
