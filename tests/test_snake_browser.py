"""benchmarks/snake_check.py, the browser judge of seed 002's snake demo, on hand-written games.

Debian's ``chromium`` under Playwright (no browser download). Without either the tests skip,
except where ``TAO_REQUIRE_BROWSER=1`` (CI): there a missing browser fails them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
GOOD = DATA / "snake_good"
CHECKER = ROOT / "benchmarks" / "snake_check.py"

sys.path.insert(0, str(CHECKER.parent))
import snake_check  # noqa: E402 - benchmarks/ is not a package


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install playwright==1.65.2)"
    if not Path(snake_check.CHROMIUM).is_file():
        return f"no Chromium at {snake_check.CHROMIUM} (apt-get install -y chromium)"
    return None


@pytest.fixture(autouse=True)
def browser_here():
    problem = _missing()
    if problem and os.environ.get("TAO_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TAO_REQUIRE_BROWSER=1 but {problem}", pytrace=False)
    if problem:
        pytest.skip(problem)


def test_a_working_snake_game_passes():
    result = snake_check.check(GOOD)
    assert result.ok, result.reason
    assert result.errors == []
    assert result.board == "canvas 400x400"
    assert result.loaded == ["index.html", "style.css", "game.js"]
    assert result.animates  # it moves on its own, to the right
    # up and down turn it; left would reverse into itself and right is where it already goes,
    # so the game rightly ignores them - the comparison with the control tells them apart
    assert result.keys == {"ArrowUp": True, "ArrowLeft": False, "ArrowDown": True,
                           "ArrowRight": False}
    assert result.reason == "ok: canvas 400x400; ArrowUp, ArrowDown changed the game state"
    assert result.grows is True, result.growth  # seed 002's "吃到食物会变长"
    assert result.growth.startswith("grows on eating; the food lies on the snake's grid")


def _copy_good(folder: Path) -> Path:
    for f in GOOD.iterdir():
        shutil.copy(f, folder)
    return folder / "game.js"


def _broken(folder: Path, old: str, new: str) -> Path:
    """The working game with one line of game.js changed: what breaks is exactly that line."""
    game = _copy_good(folder)
    text = game.read_text(encoding="utf-8")
    assert text.count(old) == 1
    game.write_text(text.replace(old, new), encoding="utf-8")
    return folder


#: 'keypress' never fires for arrow keys: the snake runs and cannot be steered
KEYPRESS = ("addEventListener('keydown'", "addEventListener('keypress'")
#: a canvas id index.html does not have: null.getContext throws on load
WRONG_ID = ("getElementById('game')", "getElementById('snake')")


def test_keys_that_are_never_heard_fail_the_game(tmp_path):
    result = snake_check.check(_broken(tmp_path, *KEYPRESS))
    assert not result.ok
    assert result.errors == [] and result.animates
    assert not any(result.keys.values())
    assert result.reason.startswith("no arrow key changed the game state")


def test_a_snake_that_never_gets_longer_is_seen(tmp_path):
    # keys work, so the judge passes it; the growth probe puts the food in the head's way
    result = snake_check.check(_broken(tmp_path, "  } else {\n    snake.pop();\n  }",
                                       "  }\n  snake.pop();"))
    assert result.ok and result.grows is False
    assert result.growth == "the head (snake) reached the food (food) and the snake did not grow"


def test_food_off_the_snake_s_grid_can_never_be_eaten(tmp_path):
    # the 1.5B model's own bug: the snake starts at 10 px, food lies on multiples of 20 px
    result = snake_check.check(_broken(tmp_path, "x: Math.floor(Math.random() * COLS)",
                                       "x: Math.floor(Math.random() * COLS) + 0.5"))
    assert result.ok and result.grows is False
    assert "grows on eating, but the food lies off the snake's grid" in result.growth


def test_a_javascript_error_fails_the_game_with_the_error(tmp_path):
    result = snake_check.check(_broken(tmp_path, *WRONG_ID))
    assert not result.ok
    assert result.reason == "JavaScript error: TypeError: Cannot read properties of null " \
                            "(reading 'getContext')"


def test_an_error_thrown_later_by_a_timer_fails_the_game(tmp_path):
    # the 0.5B model's own bug: a loop that stops an interval it never started
    with _copy_good(tmp_path).open("a", encoding="utf-8") as f:
        f.write("setTimeout(() => clearInterval(gameInterval), 200);\n")
    result = snake_check.check(tmp_path)
    assert not result.ok
    assert result.reason == "JavaScript error: ReferenceError: gameInterval is not defined"


RAF_GAME = """
let x = 0, dx = 1;
document.addEventListener('keydown', e => { if (e.key === 'ArrowUp') dx = -1; });
function frame() {
  x += dx;
  const ctx = document.querySelector('canvas').getContext('2d');
  ctx.clearRect(0, 0, 200, 200);
  ctx.fillRect(100 + x % 100, 50, 10, 10);
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
"""


def test_a_game_drawn_frame_by_frame_is_compared_at_the_same_frame(tmp_path):
    # requestAnimationFrame fires on 16 ms steps of the clock: were the fake clock to start at a
    # different tick on each load, every key would look as if it moved the game
    (tmp_path / "index.html").write_text(
        '<!DOCTYPE html><canvas width="200" height="200"></canvas><script src="game.js"></script>',
        encoding="utf-8")
    (tmp_path / "game.js").write_text(RAF_GAME, encoding="utf-8")
    result = snake_check.check(tmp_path)
    assert result.ok, result.reason
    assert result.keys == {"ArrowUp": True, "ArrowLeft": False, "ArrowDown": False,
                           "ArrowRight": False}


def test_a_missing_file_fails_the_game(tmp_path):
    shutil.copy(GOOD / "index.html", tmp_path)
    shutil.copy(GOOD / "style.css", tmp_path)
    result = snake_check.check(tmp_path)
    assert not result.ok
    assert result.reason.startswith("could not load game.js: HTTP 404")


def test_a_page_that_needs_the_network_is_refused(tmp_path):
    _copy_good(tmp_path)
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    (tmp_path / "index.html").write_text(page.replace(
        '<script src="game.js">', '<script src="https://cdn.example.com/lib.js"></script>\n'
        '  <script src="game.js">'), encoding="utf-8")
    result = snake_check.check(tmp_path)
    assert not result.ok
    assert result.reason.startswith("refused https://cdn.example.com/lib.js: the page must work "
                                    "from its own files")


def test_no_index_html_is_a_clear_verdict(tmp_path):
    (tmp_path / "game.js").write_text("// nothing loads this\n", encoding="utf-8")
    result = snake_check.check(tmp_path)
    assert not result.ok and result.reason == f"no index.html in {tmp_path}"


DOM_GAME = """
const board = document.getElementById('board');
const cells = [];
for (let i = 0; i < 100; i++) { const c = document.createElement('div'); board.appendChild(c); cells.push(c); }
let snake = [[5, 5], [4, 5]], dir = [1, 0];
document.addEventListener('keydown', e => {
  const d = {ArrowUp: [0, -1], ArrowDown: [0, 1], ArrowLeft: [-1, 0], ArrowRight: [1, 0]}[e.key];
  if (d) dir = d;
});
function tick() {
  const head = [(snake[0][0] + dir[0] + 10) % 10, (snake[0][1] + dir[1] + 10) % 10];
  snake.unshift(head); snake.pop();
  cells.forEach(c => c.className = '');
  snake.forEach(([x, y]) => cells[y * 10 + x].className = 'snake');
}
setInterval(tick, 100);
"""


def test_a_grid_of_divs_is_a_board_too(tmp_path):
    (tmp_path / "index.html").write_text(
        '<!DOCTYPE html><html><head><link rel="stylesheet" href="style.css"></head><body>'
        '<div id="board"></div><script src="game.js"></script></body></html>', encoding="utf-8")
    (tmp_path / "style.css").write_text(
        "#board { display: grid; grid-template-columns: repeat(10, 20px); }\n"
        "#board div { height: 20px; } .snake { background: green; }\n", encoding="utf-8")
    (tmp_path / "game.js").write_text(DOM_GAME, encoding="utf-8")
    result = snake_check.check(tmp_path)
    assert result.ok, result.reason
    assert result.board == "CSS grid <div> of 100 cells"
    assert result.keys["ArrowUp"] and not result.keys["ArrowRight"]


def test_a_script_that_never_yields_is_stopped_in_time(tmp_path):
    with _copy_good(tmp_path).open("a", encoding="utf-8") as f:
        f.write("setInterval(() => { for (;;) {} }, 100);\n")
    result = snake_check.check_isolated(tmp_path, timeout_s=15)
    assert not result.ok
    assert result.reason == "the page did not finish in 15 s (a script that never yields?)"


def test_the_command_line_says_why_and_exits_1(tmp_path):
    proc = subprocess.run([sys.executable, str(CHECKER), str(_broken(tmp_path, *KEYPRESS))],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout.startswith("no arrow key changed the game state")
    ok = subprocess.run([sys.executable, str(CHECKER), str(GOOD)], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: canvas 400x400")


def test_the_benchmark_run_writes_judges_and_counts_a_scripted_game(tmp_path):
    # benchmarks/snake_local.py's run without the model: a ScriptedModel replays seed 002's
    # three write_file turns (the hand-written game), a try of the page and its Finish
    import snake_local
    from tao.models.scripted import ScriptedModel

    replies = [f"Thought: 写 {name}\nAction: write_file【{name}】\n```\n"
               f"{(GOOD / name).read_text(encoding='utf-8')}```"
               for name in ("index.html", "style.css", "game.js")]
    replies.append("Thought: 按方向键试一下\nAction: try_page【press ArrowUp; wait 300】")
    replies.append("Thought: 三个文件都写好了\nAction: Finish【已生成贪吃蛇游戏，共 3 个文件】")
    run = snake_local.one_run(ScriptedModel(replies), seed=0, folder=tmp_path / "workspace",
                              max_turns=6, check_timeout_s=120)
    assert run.written == ["index.html", "style.css", "game.js"] and run.write_turns == 3
    assert run.finished and run.turns == 5 and run.status == "done"
    assert sorted(run.files) == ["game.js", "index.html", "style.css"]
    for name in run.files:  # as written, less the newline before the closing fence
        assert (tmp_path / "workspace" / name).read_text(encoding="utf-8") == \
            (GOOD / name).read_text(encoding="utf-8").rstrip("\n")
    assert run.check.ok, run.check.reason
    assert snake_local.row(1, run).startswith("| 1 | yes | yes | 3 | yes | 5 | ")
