"""Eight coding tasks of seed 002's size for ``tao code``, each judged by behaviour
(``coding_check.py``), run on the default embedded model.

    flock /tmp/tao-model.lock python benchmarks/coding_tasks.py --half looked [--task NAME]
        [--src DIR] [--max-turns 15] [--json FILE] [--keep DIR]
    python benchmarks/coding_tasks.py --table FILE            # the table of a --json file

**The split, fixed before any run** (issue 27: tune on one half, report the other apart):

- ``looked`` (the half looked at while building the coder): ``counter`` (web, en), ``todo``
  (web, zh), ``wordfreq`` (Python module with a command line, en), ``bank`` (Python package with
  its own tests, zh);
- ``held`` (held out: run only for the before/after figures, its runs never read while tuning):
  ``celsius`` (web, en), ``charcount`` (web, zh), ``roman`` (Python module with its own tests,
  en), ``inventory`` (Python module with a command line, zh).

Each run is ``python -m tao code TASK --workspace DIR --trace FILE`` in a fresh folder, with
``--src`` first on PYTHONPATH (so the tao before a change can be run from an export of an older
commit); turns, tokens and seconds are the run's own ``RunFinished``; "works" is the judge's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import coding_check as cc  # beside this file

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Task:
    name: str
    half: str  # "looked" | "held"
    kind: str  # "web" | "python"
    lang: str
    text: str
    judge: Callable[[Path], cc.Verdict]


# -- the judges' steps ----------------------------------------------------------------------------
def _counter(p: cc.Page) -> None:
    cc.number_shown(p, 0)
    for _ in range(3):
        p.click("+1")
    p.click("-1")
    cc.number_shown(p, 2)
    p.click("Reset")
    cc.number_shown(p, 0)
    if "2" in p.text().replace("+1", "").replace("-1", ""):
        raise cc.Fail("Reset left the 2 on the page")


def _todo(p: cc.Page) -> None:
    p.type("买牛奶")
    p.click("添加")
    p.type("写作业")
    p.click("添加")
    cc.shows(p, "买牛奶", "写作业")
    buttons = p.page.get_by_role("button", name="删除")
    if buttons.count() < 2:
        raise cc.Fail(f"expected a 删除 button beside each item, found {buttons.count()}")
    buttons.first.click()
    p.page.wait_for_timeout(150)
    cc.shows(p, "写作业", absent=("买牛奶",))


def _celsius(p: cc.Page) -> None:
    p.type("100")
    p.click("Convert")
    cc.number_shown(p, 212)
    p.type("37")
    p.click("Convert")
    cc.number_shown(p, 98.6)


def _charcount(p: cc.Page) -> None:
    p.type("hello")
    cc.shows(p, "字数：5")
    p.type(" world", clear=False)
    cc.shows(p, "字数：11")


TASKS = [
    Task("counter", "looked", "web", "en",
         "Make a web page with a counter, in three files: index.html, style.css and app.js. It "
         "shows a number that starts at 0, a button labelled \"+1\" that adds one, a button "
         "labelled \"-1\" that takes one away, and a button labelled \"Reset\" that sets the "
         "number back to 0.",
         lambda f: cc.web(f, _counter)),
    Task("todo", "looked", "web", "zh",
         "用 HTML + CSS + JS 做一个待办清单页面，代码分别放在 index.html、style.css、app.js 三个文件中："
         "页面上有一个输入框和一个“添加”按钮，点击“添加”把输入框里的内容加到下面的列表里；列表的每一项旁边"
         "都有一个“删除”按钮，点击后删除这一项。",
         lambda f: cc.web(f, _todo)),
    Task("wordfreq", "looked", "python", "en",
         "Write a Python module wordfreq.py. It has a function top_words(text, n) that returns "
         "the n most common words of text as a list of (word, count) tuples, most common first, "
         "ties in alphabetical order; words are compared lower-cased, and punctuation around "
         "them is ignored. It also works from the command line: `python wordfreq.py FILE N` "
         "prints the N most common words of the file, one per line, as `word: count`.",
         lambda f: cc.python(f, "wordfreq.py")),
    Task("bank", "looked", "python", "zh",
         "写一个 Python 包 bank（bank/__init__.py 和 bank/account.py）：Account 类，Account(owner, "
         "balance=0) 创建账户；deposit(amount) 存钱，withdraw(amount) 取钱；金额不是正数、或者取钱时"
         "余额不够，都抛出 ValueError；balance 属性是当前余额，owner 属性是户主。bank 包里可以直接 "
         "from bank import Account。再用 pytest 写测试 tests/test_account.py。",
         lambda f: cc.python(f, "bank.py", own_tests=True)),
    Task("celsius", "held", "web", "en",
         "Build a small web page, index.html and script.js, that converts Celsius to "
         "Fahrenheit: an input field for the temperature in Celsius, a button labelled "
         "\"Convert\", and the result in Fahrenheit shown on the page after the click.",
         lambda f: cc.web(f, _celsius)),
    Task("charcount", "held", "web", "zh",
         "做一个网页（index.html 和 main.js）：页面上有一个多行文本框，文本框下面实时显示已输入的字符数，"
         "格式是“字数：N”，每输入或删除一个字符都立刻更新。",
         lambda f: cc.web(f, _charcount)),
    Task("roman", "held", "python", "en",
         "Write a Python module roman.py with two functions: to_roman(n) turns an integer from "
         "1 to 3999 into a Roman numeral string (e.g. 1994 -> \"MCMXCIV\"), and from_roman(s) "
         "turns such a string back into the integer. Both raise ValueError on input out of "
         "range or not valid. Also write pytest tests for them in test_roman.py.",
         lambda f: cc.python(f, "roman.py", own_tests=True)),
    Task("inventory", "held", "python", "zh",
         "写一个 Python 模块 inventory.py：Inventory 类，add(name, qty) 增加某件物品的数量，"
         "remove(name, qty) 减少数量（数量不够时抛出 ValueError），count(name) 返回某件物品的数量"
         "（没有的返回 0），total() 返回所有物品的总数。还要有命令行入口：`python inventory.py "
         "FILE` 读取文件，文件每行是“物品名 数量”，把它们都加进库存后，打印“总数：N”。",
         lambda f: cc.python(f, "inventory.py")),
]


# -- one run --------------------------------------------------------------------------------------
def run_task(task: Task, src: Path, max_turns: int, keep: Path | None, timeout: float) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"tao-code-{task.name}-"))
    trace = folder.with_suffix(".jsonl")
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, "-m", "tao", "code", task.text, "--workspace", str(folder),
           "--trace", str(trace), "--max-turns", str(max_turns)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
        log = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        log = f"timed out after {timeout:.0f} s\n{e.stdout or ''}"
    wall = time.perf_counter() - start
    row = {"task": task.name, "half": task.half, "kind": task.kind, "lang": task.lang,
           "src": str(src), "status": "", "turns": 0, "tokens": "", "seconds": round(wall, 1),
           "checks": 0, "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    if trace.exists():
        row.update(from_trace(trace))
    verdict = cc.judge(task.name, folder)
    row.update(works=verdict.works, why=verdict.why, files=sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and ".pytest_cache" not in p.parts))
    if keep is not None:
        dest = keep / task.name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(folder, dest)
        (dest.parent / f"{task.name}.log").write_text(log, encoding="utf-8")
        if trace.exists():
            shutil.copy(trace, dest.parent / f"{task.name}.jsonl")
    shutil.rmtree(folder, ignore_errors=True)
    trace.unlink(missing_ok=True)
    return row


def from_trace(trace: Path) -> dict:
    """status, turns, tokens and seconds from the run's ``RunFinished``; checks: the
    run_command and check_page calls it made."""
    row: dict = {"checks": 0}
    for line in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("type") == "run_finished":
            r = event["result"]
            u = r.get("usage", {})
            row.update(status=r["status"], turns=r["turns"], seconds=round(r["duration_s"], 1),
                       tokens=f"{u.get('prompt_tokens', 0)}+{u.get('completion_tokens', 0)}")
        elif event.get("type") == "action":
            row["checks"] += event["call"]["name"] in ("check_page", "run_command")
    return row


def table(rows: list[dict]) -> str:
    out = ["| task | half | kind | lang | works | turns | checks | s | tokens | judge |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['task']} | {r['half']} | {r['kind']} | {r['lang']} | "
                   f"{'yes' if r['works'] else 'no'} | {r['turns']} | {r.get('checks', 0)} | "
                   f"{r['seconds']} | {r['tokens']} | {r['why'][:90]} |")
    for half in ("looked", "held"):
        mine = [r for r in rows if r["half"] == half]
        if mine:
            out.append(f"\n{half}: {sum(r['works'] for r in mine)} of {len(mine)} work")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--half", choices=("looked", "held", "all"), default="looked")
    ap.add_argument("--task", action="append", help="only this task (repeat for more)")
    ap.add_argument("--src", type=Path, default=HERE.parent / "src")
    ap.add_argument("--max-turns", type=int, default=15)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", type=Path, help="append each row to this JSONL file")
    ap.add_argument("--keep", type=Path, help="keep each workspace, log and trace here")
    ap.add_argument("--table", type=Path, help="print the table of a --json file and stop")
    ap.add_argument("--retrace", type=Path, help="with --table: turns, tokens and seconds read "
                    "again from the traces kept in this --keep folder")
    a = ap.parse_args(argv)
    if a.table:
        rows = [json.loads(x) for x in a.table.read_text().splitlines() if x.strip()]
        for r in rows if a.retrace else ():
            trace = a.retrace / f"{r['task']}.jsonl"
            if trace.exists():
                r.update(from_trace(trace))
        print(table(rows))
        return 0
    chosen = [t for t in TASKS if (a.half == "all" or t.half == a.half)
              and (not a.task or t.name in a.task)]
    rows = []
    for task in chosen:
        row = run_task(task, a.src.resolve(), a.max_turns, a.keep, a.timeout)
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
        if a.json:
            with a.json.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
