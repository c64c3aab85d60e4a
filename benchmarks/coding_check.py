"""The judges of ``benchmarks/coding_tasks.py``: does a folder the coding agent wrote do what its
task says? By behaviour only - never by reading the code.

- **Web pages**: the folder served on 127.0.0.1 (every other request refused), ``index.html``
  opened in Debian's headless Chromium under Playwright, then the task's steps as a person would
  do them: click a button found by its text, type into a field, press a key, read the page's text.
  An uncaught JavaScript error fails the page too.
- **Python**: the folder copied, the task's hidden pytest file (``coding_hidden/``; the agent never
  sees it) dropped in beside the agent's files and run with this interpreter's pytest; where the
  task asks for tests, the agent's own tests must exist and pass as well.

    python benchmarks/coding_check.py TASK_NAME FOLDER      # one verdict, as JSON
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

CHROMIUM = os.environ.get("TAO_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HIDDEN = Path(__file__).resolve().parent / "coding_hidden"


@dataclass
class Verdict:
    works: bool
    why: str


# -- web ------------------------------------------------------------------------------------------
class _Quiet(http.server.SimpleHTTPRequestHandler):
    #: served as UTF-8 whether or not the page says <meta charset>: the judge is not about that
    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
        ".css": "text/css; charset=utf-8"}

    def log_message(self, format: str, *args: object) -> None:
        pass


class Page:
    """What a judge does on the page: ``click(text)``, ``type(text, nth=0)``, ``press(key)``,
    ``text()``. Each step failing raises ``Fail`` with what a person would have seen."""

    def __init__(self, page, errors: list[str]):
        self.page, self.errors = page, errors

    def click(self, text: str) -> None:
        p = self.page
        for loc in (p.get_by_role("button", name=text, exact=True),
                    p.get_by_role("button", name=text),
                    p.locator("input[type=button], input[type=submit]").filter(has_text=text),
                    p.get_by_text(text, exact=True)):
            if loc.count():
                loc.first.click(timeout=3000)
                p.wait_for_timeout(150)
                return
        raise Fail(f"no button {text!r} to click")

    def field(self, nth: int = 0):
        fields = self.page.locator("input:not([type=button]):not([type=submit]):not([type=hidden])"
                                   ":not([type=checkbox]):not([type=radio]), textarea")
        if fields.count() <= nth:
            raise Fail(f"no text field #{nth + 1} to type into (found {fields.count()})")
        return fields.nth(nth)

    def type(self, text: str, nth: int = 0, clear: bool = True) -> None:
        f = self.field(nth)
        f.click(timeout=3000)
        if clear:
            f.fill("")
        f.press_sequentially(text, delay=5)
        self.page.wait_for_timeout(150)

    def press(self, key: str) -> None:
        self.page.keyboard.press(key)
        self.page.wait_for_timeout(150)

    def text(self) -> str:
        """The page's visible text, with what the fields hold (a result written into an input)."""
        body = self.page.evaluate("document.body ? document.body.innerText : ''")
        values = self.page.evaluate(
            "Array.from(document.querySelectorAll('input, output, textarea'), e => e.value || '')"
            ".join('\\n')")
        return f"{body}\n{values}"


class Fail(Exception):
    pass


def web(folder: Path, steps: Callable[[Page], None]) -> Verdict:
    if not (folder / "index.html").is_file():
        return Verdict(False, "no index.html")
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(folder.resolve()))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    errors: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                context = browser.new_context()
                context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base)
                              else r.abort("blockedbyclient"))
                page = context.new_page()
                page.set_default_timeout(5000)
                page.on("pageerror", lambda e: errors.append(f"{e.name}: {e.message}"))
                page.on("dialog", lambda d: d.dismiss())
                page.goto(base + "index.html", wait_until="load")
                page.wait_for_timeout(300)
                try:
                    steps(Page(page, errors))
                except Fail as e:
                    return Verdict(False, str(e) + (f"; JS errors: {errors[:2]}" if errors else ""))
                except Exception as e:  # noqa: BLE001 - a Playwright timeout: the page hangs
                    return Verdict(False, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                if errors:
                    return Verdict(False, f"JavaScript error: {errors[0]}")
                return Verdict(True, "every step did what the task says")
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


def shows(page: Page, *wanted: str, absent: tuple[str, ...] = ()) -> None:
    text = page.text()
    for w in wanted:
        if w not in text:
            raise Fail(f"expected {w!r} on the page, it shows {_short(text)!r}")
    for a in absent:
        if a in text:
            raise Fail(f"{a!r} should be gone, the page shows {_short(text)!r}")


def number_shown(page: Page, value: float, tol: float = 0.051) -> None:
    text = page.text()
    found = [float(m) for m in re.findall(r"-?\d+(?:\.\d+)?", text)]
    if not any(abs(f - value) <= tol for f in found):
        raise Fail(f"expected {value:g} on the page, it shows {_short(text)!r}")


def _short(text: str) -> str:
    return " ".join(text.split())[:160]


# -- python ---------------------------------------------------------------------------------------
def python(folder: Path, hidden: str, own_tests: bool = False) -> Verdict:
    """The hidden tests ``coding_hidden/<hidden>`` against a copy of ``folder``; with
    ``own_tests`` the agent's own tests too (at least one must be collected, all must pass)."""
    with tempfile.TemporaryDirectory(prefix="tao-judge-") as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns(
            "__pycache__", ".pytest_cache", "conftest.py"))
        judge_dir = work / "_judge"
        judge_dir.mkdir()
        shutil.copy(HIDDEN / hidden, judge_dir / ("test_" + hidden.removeprefix("test_")))
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                              "--rootdir", str(work), str(judge_dir)], cwd=work, env=env,
                             capture_output=True, text=True, timeout=120, check=False)
        if run.returncode != 0:
            return Verdict(False, "hidden tests: " + _tail(run.stdout))
        if own_tests:
            shutil.rmtree(judge_dir)
            own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                  "--rootdir", str(work)], cwd=work, env=env,
                                 capture_output=True, text=True, timeout=120, check=False)
            if own.returncode == 5:
                return Verdict(False, "the task asks for tests; the agent wrote none pytest finds")
            if own.returncode != 0:
                return Verdict(False, "the agent's own tests fail: " + _tail(own.stdout))
        return Verdict(True, "hidden tests pass" + (", and the agent's own" if own_tests else ""))


def _tail(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR", "E "))]
    return " | ".join((failed or lines)[-3:])[:300]


def judge(name: str, folder: str | os.PathLike[str]) -> Verdict:
    from coding_tasks import TASKS  # beside this file

    task = next(t for t in TASKS if t.name == name)
    try:
        return task.judge(Path(folder))
    except subprocess.TimeoutExpired:
        return Verdict(False, "timed out")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print(json.dumps(asdict(judge(sys.argv[1], sys.argv[2])), ensure_ascii=False))
