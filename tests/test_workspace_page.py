"""The page check tao code turns on (``Workspace(check_pages=True)``): once a write leaves
index.html with every script and style sheet it loads, the page is opened in headless Chromium
and what its scripts throw is told in the write's observation, with file and line - the model
cannot see a ReferenceError in its own files, the browser can.

Debian's ``chromium``; without it these tests skip, except where ``TAO_REQUIRE_BROWSER=1`` (CI).
"""

from __future__ import annotations

import http.server
import os
import threading

import pytest

from tao.workspace import page as workspace_page
from tao.workspace import Workspace

PAGE = ('<!DOCTYPE html>\n<html>\n<head><link rel="stylesheet" href="style.css"></head>\n<body>\n'
        '<canvas id="game" width="200" height="200"></canvas>\n<script src="game.js"></script>\n'
        '</body>\n</html>')
STYLE = "canvas { background: #000; }"
BROKEN = ("const ctx = document.getElementById('game').getContext('2d');\n"
          "function tick() {\n  ctx.fillRect(snakePosition.x, 0, 10, 10);\n}\n"
          "setInterval(tick, 100);")
FIXED = BROKEN.replace("function tick", "let snakePosition = {x: 0};\nfunction tick")


@pytest.fixture(autouse=True)
def browser_here():
    if workspace_page.chromium() is None:
        if os.environ.get("TAO_REQUIRE_BROWSER") == "1":
            pytest.fail("TAO_REQUIRE_BROWSER=1 but no Chromium (apt-get install -y chromium)",
                        pytrace=False)
        pytest.skip("no Chromium here (apt-get install -y chromium)")


def test_the_page_is_checked_once_whole_its_errors_come_back_with_file_and_line_and_a_clean_page_says_so(tmp_path):
    ws = Workspace(tmp_path, language="zh", sandbox=False, check_pages=True)
    assert ws.write_file("index.html", PAGE) == f"文件 index.html 写入成功（{len(PAGE)} 字符）"
    assert ws.write_file("style.css", STYLE) == f"文件 style.css 写入成功（{len(STYLE)} 字符）"
    # game.js missing until now: nothing was checked; with it, the first tick throws
    told = ws.write_file("game.js", BROKEN)
    assert told == (f"文件 game.js 写入成功（{len(BROKEN)} 字符）\n"
                    "在无头浏览器里打开 index.html，页面报错了（请修正出错的文件，再用 write_file 把它完整重写一遍）：\n"
                    "- game.js:3: Uncaught ReferenceError: snakePosition is not defined")
    assert ws.write_file("game.js", FIXED) == (f"文件 game.js 写入成功（{len(FIXED)} 字符）\n"
                                               "在无头浏览器里打开 index.html，没有报错。文件都写好后，用 try_page 像用户那样操作一遍（点击按钮、输入内容），页面显示正确就调用 Finish 结束")
    told = ws.edit_file("game.js", "let snakePosition", "let snakePos")
    assert told.endswith("- game.js:4: Uncaught ReferenceError: snakePosition is not defined")


def test_english_and_off_by_default(tmp_path):
    (tmp_path / "a").mkdir()
    quiet = Workspace(tmp_path / "a", sandbox=False)
    for name, text in (("index.html", PAGE), ("style.css", STYLE), ("game.js", BROKEN)):
        told = quiet.write_file(name, text)
    assert told == f"wrote game.js ({len(BROKEN)} characters)"  # a plain Workspace opens nothing
    checked = Workspace(tmp_path / "a", sandbox=False, check_pages=True)
    told = checked.write_file("style.css", STYLE + "\n")  # any web file of the page: checked
    assert told.splitlines()[1:] == [
        "Opened in a headless browser, index.html threw errors (fix the file at fault and write it "
        "whole again with write_file):", "- game.js:3: Uncaught ReferenceError: snakePosition is not defined"]
    assert checked.write_file("notes.txt", "x") == "wrote notes.txt (1 characters)"  # not a web file
    checked.write_file("game.js", FIXED)
    assert checked.write_file("style.css", STYLE).splitlines()[1] == (
        "Opened in a headless browser, index.html threw no errors. Once every file is written, use "
        "the page with try_page as a person would (click its buttons, type into its inputs); if it "
        "shows the right thing, call Finish")


def test_the_page_has_no_network(tmp_path):
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the base's name
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        page = (f'<!DOCTYPE html><img src="{url}/img"><script>fetch("{url}/fetch");'
                f'new Image().src = "http://1.1.1.1/x";</script>')
        ws = Workspace(tmp_path, sandbox=False, check_pages=True)
        ws.write_file("index.html", page)
    finally:
        server.shutdown()
        server.server_close()
    assert asked == []  # not even the loopback server was reached


def test_without_chromium_nothing_is_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_CHROMIUM", str(tmp_path / "no-such-browser"))
    ws = Workspace(tmp_path, sandbox=False, check_pages=True)
    ws.write_file("index.html", PAGE.replace('<link rel="stylesheet" href="style.css">', ""))
    assert ws.write_file("game.js", BROKEN) == f"wrote game.js ({len(BROKEN)} characters)"
