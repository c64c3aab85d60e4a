"""Does a snake game folder work in a real browser? Seed 002's demo, checked as a player would.

    python benchmarks/snake_check.py workspace [--screenshot snake.png] [--json]

Debian's ``chromium`` (``/usr/bin/chromium``, or ``$TAO_CHROMIUM``) runs headless under Playwright;
no browser is downloaded. The folder is served on 127.0.0.1 and ``index.html`` loaded; every
request that leaves that server is refused, so the page must work from its own files.

The method, for games written by a model (any names, canvas or DOM):

- **Errors**: uncaught exceptions (``pageerror``), ``console.error`` messages, requests that fail
  or answer >= 400 (a missing ``game.js``), in any of the runs below. One is enough to fail.
- **Board**: a visible ``<canvas>`` (at least 50 x 50 px), a CSS grid, an element with >= 16
  children, or a visible element with children whose id or class says board/grid/game/snake.
- **Keys**: the page runs under Playwright's fake clock, paused from the start at the same tick
  (timers, ``requestAnimationFrame``, ``Date`` and ``performance.now`` advance only when told),
  with ``Math.random`` replaced by a seeded generator, in a fresh browser context each time (no
  ``localStorage`` carried over). So two runs without a key press show the same pixels at the
  same fake time - checked, the "control". Then one run per arrow key: after 300 ms of game
  time the key is pressed, and the state - every canvas's pixels (``toDataURL``) plus
  ``document.body.innerHTML`` and the title - is compared with the control's at 150, 450 and 1,500 ms after the press. A key whose state
  differs at any of them "changed the game state". One such key passes: the key pointing where
  the snake already goes, or straight back, rightly changes nothing. A key run whose state
  before the press is not the control's is loaded again (up to 6 times).

Limits: a game that waits for a click or a Start button before keys count fails the key check
(a start by arrow key passes); a game seeded from ``crypto.getRandomValues`` fails the control
check; WebGL canvases without ``preserveDrawingBuffer`` read as blank; a script that spins forever
after load hangs ``check`` - ``check_isolated`` runs it in a child process with a time limit.

- **Growth** (``grows``, reported beside ``ok``, not part of it: the issue's judge is the keys):
  the snake (a top-level array of ``{x, y}`` or ``[x, y]`` points) and the food (a point) found
  among the names the scripts declare; the head and its step learnt from one move; the food put
  one step ahead of the head; the body must get longer within two steps, and the food must lie a
  whole number of steps from the head, or no steering ever reaches it. ``None`` when the game keeps
  its state elsewhere (a class, a closure): then nothing is claimed.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

CHROMIUM = os.environ.get("TAO_CHROMIUM", "/usr/bin/chromium")
#: Launch flags that work as root in a container with no GPU and no network.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
KEYS = ("ArrowUp", "ArrowLeft", "ArrowDown", "ArrowRight")
WARMUP_MS = 300
AFTER_KEY_MS = (150, 300, 1050)  # run_for steps: snapshots 150, 450 and 1,500 ms after the press
LOAD_TIMEOUT_MS = 15_000
ALIGN_TRIES = 6
EPOCH_MS = 1_700_000_000_000  # the fake clock's Date.now() when the page loads

SEEDED_RANDOM = """(() => {
  let s = 0x2f6e2b1;  // mulberry32: the same food in every run
  Math.random = function () {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
})();"""

SNAPSHOT = """() => ({
  canvases: Array.from(document.querySelectorAll('canvas'), c => {
    try { return c.toDataURL(); } catch (e) { return 'unreadable: ' + e.name; }
  }),
  dom: document.body ? document.body.innerHTML : '',
  title: document.title,
})"""

BOARD = """() => {
  const shown = (el, min) => { const r = el.getBoundingClientRect(); return r.width >= min && r.height >= min; };
  const canvas = Array.from(document.querySelectorAll('canvas')).find(c => shown(c, 50));
  if (canvas) return `canvas ${canvas.width}x${canvas.height}`;
  const all = Array.from(document.querySelectorAll('body *'));
  for (const el of all) {
    const display = getComputedStyle(el).display;
    if (display.endsWith('grid') && el.children.length >= 4 && shown(el, 50))
      return `CSS grid <${el.tagName.toLowerCase()}> of ${el.children.length} cells`;
  }
  const cells = all.find(el => el.children.length >= 16 && shown(el, 50));
  if (cells) return `<${cells.tagName.toLowerCase()}> of ${cells.children.length} cells`;
  const named = all.find(el => /board|grid|game|snake/i.test((el.id || '') + ' ' + (el.getAttribute('class') || ''))
                              && el.children.length > 0 && shown(el, 100));
  if (named) return `board <${named.tagName.toLowerCase()} id="${named.id}" class="${named.getAttribute('class') || ''}">`;
  return null;
}"""


#: The snake and the food among the script's top-level names (``let``/``const``/``var``; an
#: indirect eval sees a script's lexical globals): the snake an array of points - ``{x, y}`` or
#: ``[x, y]`` - the food one point; a name saying snake / food wins among several.
FIND = """(names) => {
  const get = n => { try { return (0, eval)(n); } catch (e) { return undefined; } };
  const pt = v => v != null && typeof v === 'object' && (Array.isArray(v)
      ? v.length === 2 && typeof v[0] === 'number' && typeof v[1] === 'number'
      : typeof v.x === 'number' && typeof v.y === 'number');
  const bodies = names.filter(n => { const v = get(n); return Array.isArray(v) && v.length > 0 && v.every(pt); });
  const foods = names.filter(n => pt(get(n)) && !bodies.includes(n));
  const pick = (list, re) => list.find(n => re.test(n)) || list[0] || null;
  return { snake: pick(bodies, /snake/i), food: pick(foods, /food|apple|fruit|食物/i) };
}"""

READ = """([snake, food]) => {
  const xy = p => Array.isArray(p) ? [p[0], p[1]] : [p.x, p.y];
  const body = (0, eval)(snake), f = (0, eval)(food);
  return { body: Array.isArray(body) ? body.map(xy) : null, food: f != null ? xy(f) : null };
}"""

PLACE = """([food, x, y]) => {
  const f = (0, eval)(food);
  if (Array.isArray(f)) { f[0] = x; f[1] = y; } else { f.x = x; f.y = y; }
}"""

#: a declaration's line: ``let snake = ...``, ``let snake, dir, food;``, ``const a = 1, b = [2, 3]``
_DECLARED = re.compile(r"^\s*(?:let|const|var)\s+(.*)$", re.MULTILINE)
_NAME = re.compile(r"\s*([A-Za-z_$][\w$]*)")


class BrowserMissing(RuntimeError):
    """Playwright or Chromium is not installed here: a setup problem, not a verdict on a game."""


@dataclass
class Check:
    """The verdict on one folder: ``ok`` and the first ``reason`` it is not, with the evidence."""

    ok: bool
    reason: str
    errors: list[str] = field(default_factory=list)
    board: str | None = None
    keys: dict[str, bool] = field(default_factory=dict)  # arrow key -> changed the state
    animates: bool = False  # the control's state changed with time alone
    dialogs: list[str] = field(default_factory=list)  # alert()/confirm() texts (dismissed)
    loaded: list[str] = field(default_factory=list)  # the folder's files the page asked for
    seconds: float = 0.0
    # the seed's "吃到食物会变长", not part of ``ok`` (issue 10 judges keys): None when the probe
    # found no snake and food among the script's globals or the snake never moved
    grows: bool | None = None
    growth: str = ""


@dataclass
class _Run:
    snaps: list[dict]
    errors: list[str]
    dialogs: list[str]
    loaded: list[str] = field(default_factory=list)
    board: str | None = None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass


def _serve(folder: Path) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name="snake-check-http", daemon=True).start()
    return server


def _play(browser, base: str, key: str | None, screenshot: Path | None = None) -> _Run:
    """One load of the page in a fresh context under the fake clock; ``key`` pressed after the
    warm-up (or none: the control). The state is read after the warm-up and at each step."""
    context = browser.new_context(viewport={"width": 800, "height": 700})
    run = _Run([], [], [])
    try:
        context.add_init_script(SEEDED_RANDOM)
        context.route("**/*", lambda route: (run.loaded.append(_short(route.request.url, base)),
                                             route.continue_()) if route.request.url.startswith(base)
                      else route.abort("blockedbyclient"))
        page = context.new_page()
        page.set_default_timeout(LOAD_TIMEOUT_MS)
        page.on("pageerror", lambda e: run.errors.append(f"JavaScript error: {e.name}: {e.message}"))
        page.on("console", lambda m: m.type == "error" and not m.text.startswith(
            "Failed to load resource") and run.errors.append(f"console.error: {m.text}"))
        answered: set[str] = set()  # a 404 is one error, not also its aborted request

        def response(r) -> None:
            if r.status >= 400 and not r.url.endswith("/favicon.ico"):
                answered.add(r.url)
                run.errors.append(f"could not load {_short(r.url, base)}: HTTP {r.status}")

        def failed(r) -> None:
            if not r.url.startswith(base):
                run.errors.append(f"refused {r.url}: the page must work from its own files")
            elif r.url not in answered:
                run.errors.append(f"could not load {_short(r.url, base)}: {r.failure}")

        page.on("response", response)
        page.on("requestfailed", failed)
        page.on("dialog", lambda d: (run.dialogs.append(f"{d.type}: {d.message}"), d.dismiss()))
        # pause_at alone installs the fake clock already paused; install() first would let it
        # run for the few real milliseconds until the pause, a different phase on each load
        page.clock.pause_at(EPOCH_MS)
        try:
            page.goto(base + "index.html", wait_until="load")
        except Exception as e:  # noqa: BLE001 - Playwright's TimeoutError and navigation errors
            run.errors.append(f"index.html did not load: {str(e).splitlines()[0]}")
            return run
        _advance(page, WARMUP_MS, run)
        run.board = page.evaluate(BOARD)
        run.snaps.append(page.evaluate(SNAPSHOT))
        if key is not None:
            page.keyboard.press(key)
        for ms in AFTER_KEY_MS:
            _advance(page, ms, run)
            run.snaps.append(page.evaluate(SNAPSHOT))
        if screenshot is not None:
            page.screenshot(path=str(screenshot))
        return run
    finally:
        context.close()


def _aligned(browser, base: str, key: str | None, control: _Run,
             screenshot: Path | None = None) -> _Run | None:
    """``_play`` until the state before the key press is the control's (``None`` if it never
    is): a safety net for a page whose state before the press differs from load to load (the
    clock starts paused at the same tick each time, so a plain game matches at once)."""
    for _ in range(ALIGN_TRIES):
        run = _play(browser, base, key, screenshot)
        if not run.snaps or not control.snaps or run.snaps[0] == control.snaps[0]:
            return run
    return None


def _advance(page, ms: int, run: _Run) -> None:
    """``clock.run_for``; a timer callback that throws (in a real browser: an uncaught error in
    that callback) comes out of it as the first such error, after the other timers have run."""
    from playwright.sync_api import Error

    try:
        page.clock.run_for(ms)
    except Error as e:
        message = e.message.splitlines()[0] if e.message else str(e)
        message = message.removeprefix("Clock.run_for: ")
        run.errors.append(f"JavaScript error: {message}")


def _names(folder: Path) -> list[str]:
    """The names declared in the page's scripts (its .js files and index.html), in order."""
    texts = [p.read_text(encoding="utf-8", errors="replace")
             for p in [*sorted(folder.rglob("*.js")), folder / "index.html"] if p.is_file()]
    names: list[str] = []
    for line in _DECLARED.findall("\n".join(texts)):
        depth, part = 0, ""
        for ch in line + ",":  # the names of ``a = f(1, 2), b``: split on commas outside brackets
            depth += (ch in "([{") - (ch in ")]}")
            if ch == "," and depth == 0:
                if m := _NAME.match(part):
                    names.append(m.group(1))
                part = ""
            else:
                part += ch
    return list(dict.fromkeys(names))


def _growth(browser, base: str, names: list[str]) -> tuple[bool | None, str]:
    """Does the snake grow when it eats, and can it ever eat? A fresh load under the paused
    clock; the snake and the food found among the script's globals (``FIND``); one step watched
    to learn where the head is and how far it moves; the food then put one step ahead of the head
    (what steering there would do) and two steps watched for the body to get longer. The food
    must also lie on the head's grid - a whole number of steps away on both axes - or the snake
    can never reach it in play (a head starting at 10 px with food on multiples of 20 px)."""
    context = browser.new_context(viewport={"width": 800, "height": 700})
    sink = _Run([], [], [])
    try:
        context.add_init_script(SEEDED_RANDOM)
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                      else route.abort("blockedbyclient"))
        page = context.new_page()
        page.set_default_timeout(LOAD_TIMEOUT_MS)
        page.on("dialog", lambda d: d.dismiss())
        page.clock.pause_at(EPOCH_MS)
        page.goto(base + "index.html", wait_until="load")
        _advance(page, WARMUP_MS, sink)
        found = page.evaluate(FIND, names)
        if not found["snake"] or not found["food"]:
            return None, ("no snake (an array of points) and food (a point) among the script's "
                          "globals")
        pair = [found["snake"], found["food"]]

        def moved(before: dict) -> dict | None:
            for _ in range(125):  # up to 2 s of game time, a frame at a time
                _advance(page, 16, sink)
                now = page.evaluate(READ, pair)
                if now["body"] != before["body"]:
                    return now
            return None

        before = page.evaluate(READ, pair)
        after = moved(before)
        if after is None or not after["body"] or not before["body"]:
            return None, "the snake did not move in 2 s without a key"
        old, new = before["body"], after["body"]
        if new[0] not in old:
            head, was = new[0], old[0]
        elif new[-1] not in old:
            head, was = new[-1], old[-1]
        else:
            return None, "cannot tell the snake's head"
        dx, dy = head[0] - was[0], head[1] - was[1]
        cell = max(abs(dx), abs(dy))
        if cell == 0 or after["food"] is None:
            return None, "cannot tell the snake's step"

        def on_grid(food: list) -> bool:
            return all(abs((f - h) / cell - round((f - h) / cell)) < 1e-6 for f, h in zip(food, head))

        food = after["food"]
        page.evaluate(PLACE, [found["food"], head[0] + dx, head[1] + dy])
        length, now = len(new), after
        for _ in range(2):
            now = moved(now)
            if now is None or len(now["body"]) > length:
                break
        if now is None or len(now["body"]) <= length:
            return False, (f"the head ({found['snake']}) reached the food ({found['food']}) and the "
                           f"snake did not grow")
        where = f"food at {food}, head at {head}, steps of {cell:g}"
        if not on_grid(food) or (now["food"] is not None and not on_grid(now["food"])):
            return False, (f"grows on eating, but the food lies off the snake's grid ({where}): "
                           "it can never eat")
        return True, f"grows on eating; the food lies on the snake's grid ({where})"
    except Exception as e:  # noqa: BLE001 - the probe is a guess about model-written code
        return None, f"probe failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    finally:
        context.close()


def _short(url: str, base: str) -> str:
    return url[len(base):] if url.startswith(base) else url


def check(folder: str | os.PathLike, *, screenshot: str | os.PathLike | None = None) -> Check:
    """Load ``folder/index.html`` in headless Chromium and judge it (the module docstring says
    how). Raises ``BrowserMissing`` when Playwright or Chromium is not installed."""
    start = time.perf_counter()
    folder = Path(folder)
    if not (folder / "index.html").is_file():
        return Check(False, f"no index.html in {folder}", seconds=time.perf_counter() - start)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise BrowserMissing("Playwright is not installed: pip install playwright==1.65.2 "
                             "(its driver comes in the wheel; no 'playwright install')") from e
    if not Path(CHROMIUM).is_file():
        raise BrowserMissing(f"no Chromium at {CHROMIUM}: apt-get install -y chromium "
                             "(or set TAO_CHROMIUM to its path)")
    server = _serve(folder.resolve())
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as p:  # each launch gets a fresh profile directory of its own
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                control = _play(browser, base, None)
                again = _aligned(browser, base, None, control)
                runs = {k: _aligned(browser, base, k, control, screenshot if k == KEYS[0] else None)
                        for k in (KEYS if control.snaps else ())}
                grows = _growth(browser, base, _names(folder)) if control.snaps else (None, "")
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    out = _verdict(control, again, runs, time.perf_counter() - start)
    out.grows, out.growth = grows
    return out


def _verdict(control: _Run, again: _Run | None, runs: dict[str, _Run | None],
             seconds: float) -> Check:
    errors: list[str] = []
    dialogs: list[str] = []
    for run in (control, again, *runs.values()):
        if run is not None:
            errors += [e for e in run.errors if e not in errors]
            dialogs += [d for d in run.dialogs if d not in dialogs]
    loaded = list(dict.fromkeys(control.loaded))
    keys = {k: r is not None and bool(r.snaps) and r.snaps != control.snaps for k, r in runs.items()}
    animates = len(control.snaps) > 1 and any(s != control.snaps[0] for s in control.snaps[1:])
    out = Check(False, "", errors, control.board, keys, animates, dialogs, loaded, seconds)
    unaligned = [k for k, r in runs.items() if r is None]
    if errors:
        out.reason = errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
    elif not control.board:
        out.reason = "no canvas or grid on the page"
    elif again is None or control.snaps != again.snaps:
        out.reason = ("two runs without a key press differ (same fake clock and Math.random): "
                      "cannot tell what a key changes")
    elif not any(keys.values()):
        out.reason = (f"no arrow key changed the game state ({', '.join(KEYS)} each pressed after "
                      f"{WARMUP_MS} ms; canvas pixels and DOM compared with a run without a key)")
        if unaligned:
            out.reason += (f"; {', '.join(unaligned)}: no load of {ALIGN_TRIES} matched the "
                           "control before the press")
    else:
        out.ok = True
        out.reason = f"ok: {control.board}; {', '.join(k for k, v in keys.items() if v)} changed the game state"
    return out


def check_isolated(folder: str | os.PathLike, *, timeout_s: float = 120,
                   screenshot: str | os.PathLike | None = None) -> Check:
    """``check`` in a child process with a time limit: a model-written page whose script spins
    forever cannot hang the caller (Playwright's fake clock waits on it without a timeout)."""
    start = time.perf_counter()
    cmd = [sys.executable, str(Path(__file__).resolve()), str(folder), "--json"]
    if screenshot is not None:
        cmd += ["--screenshot", str(screenshot)]
    # its own process group: on a timeout the browser it started goes too, not only the child
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Check(False, f"the page did not finish in {timeout_s:.0f} s (a script that never "
                     "yields?)", seconds=time.perf_counter() - start)
    try:
        return Check(**json.loads(out.strip().splitlines()[-1]))
    except (IndexError, ValueError, TypeError):
        tail = (err or out).strip().splitlines()[-1:] or ["no output"]
        raise BrowserMissing(f"snake_check exited {proc.returncode}: {tail[0]}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="the folder holding index.html (and its style.css, game.js)")
    ap.add_argument("--screenshot", help="save a PNG of the page after ArrowUp and 1.5 s of play")
    ap.add_argument("--json", action="store_true", help="print the verdict as one JSON line")
    args = ap.parse_args(argv)
    try:
        result = check(args.folder, screenshot=args.screenshot)
    except BrowserMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(result), ensure_ascii=False))
    else:
        print(result.reason)
        for e in result.errors[1:]:
            print(f"  also: {e}")
        print(f"  grows: {result.growth or 'not probed'}")
        print(f"  board: {result.board}; keys: {result.keys}; animates: {result.animates}; "
              f"dialogs: {result.dialogs}; loaded: {result.loaded}; {result.seconds:.1f} s")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
