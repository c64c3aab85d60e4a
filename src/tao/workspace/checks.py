"""The coder checks its own work before it finishes (issue 27): what the workspace remembers of
the checks, the page check with steps (``check_page``), and the guard against a write that cuts
a file.

- ``Checks``: the kinds of files written since they were last checked ("python": a ``.py``;
  "web": a page, script or style sheet). Running code with ``run_command`` (pytest, python,
  node) checks the Python side; ``check_page`` the web side. When the model gives its final
  answer while something it wrote was never checked - or the last check failed - the workspace
  sends back one reminder (``Workspace.before_finish``), once a run; the next answer ends it.
- ``drive``: a page of the workspace in headless Chromium driven by steps a small model can
  write, one a line (``click +1``, ``type hello``, ``press Enter``, ``expect 2``), in a process
  of its own (``_drive.py``) with a time limit: the folder served on 127.0.0.1, every other
  request refused, a fresh browser profile. It needs Playwright in the interpreter that runs
  tao and a Chromium (``page.chromium``); without them there is no ``check_page``.
- ``lost``: what a whole-file write would remove from a file - the functions, classes and element
  ids it defines, or most of its text - so that a write meant as an addition never cuts a file
  silently (``write_file`` refuses it once and points to ``append_file``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PY = (".py",)
WEB = (".html", ".htm", ".js", ".mjs", ".css")
#: a command that runs what was written (not ``ls`` or ``cat``)
RUNS_CODE = re.compile(r"\b(pytest|python3?|unittest|node|npm|make)\b")
DRIVE_TIMEOUT_S = 60
MAX_STEPS = 20

#: the verbs of a step, English and Chinese, and the names a small model drifts to
VERBS = {"click": "click", "tap": "click", "点击": "click", "单击": "click",
         "type": "type", "fill": "type", "enter": "type", "input": "type", "输入": "type",
         "press": "press", "key": "press", "按": "press", "按键": "press",
         "expect": "expect", "see": "expect", "check": "expect", "assert": "expect",
         "应显示": "expect", "期望": "expect", "看到": "expect", "检查": "expect",
         "wait": "wait", "等待": "wait", "read": "read", "读取": "read"}
_STEP = re.compile(r"^\s*(?:[-*•]|\d+[.)、])?\s*(\S+?)[\s:：]+(.*?)\s*$|^\s*(?:[-*•]|\d+[.)、])?\s*(\S+)\s*$")


def kind_of(path: str) -> str | None:
    low = path.lower()
    return "python" if low.endswith(PY) else "web" if low.endswith(WEB) else None


class Checks:
    """One workspace's checks; ``can_run``: there is ``run_command``; ``can_drive``: there is
    ``check_page``."""

    def __init__(self, can_run: bool, can_drive: bool):
        self.can_run, self.can_drive = can_run, can_drive
        self.unchecked: set[str] = set()
        self.failed: str | None = None  # the last check that failed, in short
        self.reminded: set[str] = set()  # the runs sent their one reminder

    def wrote(self, path: str) -> None:
        kind = kind_of(path)
        if kind is not None:
            self.unchecked.add(kind)

    def ran(self, command: str, status: int | None) -> None:
        """A ``run_command`` ended with exit ``status`` (``None``: timed out or did not run)."""
        if RUNS_CODE.search(command):
            self.unchecked.discard("python")
            self.failed = None if status == 0 else command.strip()[:80]

    def drove(self, page: str, ok: bool) -> None:
        self.unchecked.discard("web")
        self.failed = None if ok else f"check_page {page}"

    def reminder(self, run_id: str, text: dict[str, str]) -> str | None:
        """The one reminder of run ``run_id`` (``text``: the workspace's wording), or None."""
        if run_id in self.reminded:
            return None
        parts = []
        if self.failed is not None:
            parts.append(text["remind_failed"].replace("{what}", self.failed))
        if "python" in self.unchecked and self.can_run:
            parts.append(text["remind_python"])
        if "web" in self.unchecked and self.can_drive:
            parts.append(text["remind_web"])
        if not parts:
            return None
        self.reminded.add(run_id)
        return "\n".join(parts)


# -- the page check ---------------------------------------------------------------------------------
@functools.cache
def can_drive() -> bool:
    """Whether ``check_page`` can run here: Playwright importable, a Chromium found."""
    from .page import chromium

    return importlib.util.find_spec("playwright") is not None and chromium() is not None


def parse_steps(steps: str) -> tuple[list[tuple[str, str]], list[str]]:
    """``(steps, bad lines)``: each line one ``verb argument``; quotes around the argument
    dropped; blank lines and ``#`` comments skipped."""
    found, bad = [], []
    for line in steps.splitlines():
        if not line.strip() or line.strip().startswith(("#", "//")):
            continue
        m = _STEP.match(line)
        verb, arg = (m.group(1) or m.group(3) or "", m.group(2) or "") if m else ("", "")
        canon = VERBS.get(verb.lower())
        if canon is None:
            bad.append(line.strip())
            continue
        arg = arg.strip()
        if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "\"'`" or \
                arg[:1] in "“「【" and arg[-1:] in "”」】":
            arg = arg[1:-1]
        found.append((canon, arg))
    return found[:MAX_STEPS], bad


async def drive(root: Path, page: str, steps: list[tuple[str, str]]) -> dict[str, object]:
    """Run the steps on ``root/page`` in a driver process (``_drive.py``); its JSON answer, or
    ``{"fatal": why}``."""
    from .page import chromium

    request = {"root": str(root), "page": page, "steps": steps, "chromium": chromium(),
               "no_sandbox": os.geteuid() == 0, "step_ms": 3000}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).with_name("_drive.py")),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=str(root), start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(request).encode()),
                                          DRIVE_TIMEOUT_S)
    except TimeoutError:
        import signal

        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and the browser it started
        await proc.wait()
        return {"fatal": f"timeout after {DRIVE_TIMEOUT_S} s"}
    try:
        answer: dict[str, object] = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"fatal": (err.decode("utf-8", "replace").strip().splitlines() or ["no answer"])[-1][:300]}
    return answer


async def page_check(ws: Any, page: str, steps: str) -> str:
    """``Workspace.check_page`` once the page is known to be there: the steps read, driven,
    worded in the workspace's language; the outcome kept in ``ws.checks``."""
    from .safe_path import Refused

    parsed, bad = parse_steps(steps)
    if bad or not parsed:
        raise Refused("bad_steps", lines="; ".join(bad[:3]) or steps.strip()[:80])
    answer = await drive(ws.root, page, parsed)
    text, ok = worded(page, parsed, answer, ws._say)
    ws.checks.drove(page, ok)
    return text


def worded(page: str, steps: list[tuple[str, str]], answer: dict[str, object],
           say: Callable[..., str]) -> tuple[str, bool]:
    """The observation for ``answer`` and whether every step passed with no error."""
    if "fatal" in answer:
        return say("drive_fatal", page=page, error=answer["fatal"]), False
    results = answer.get("steps") or []
    assert isinstance(results, list)
    lines, ok = [say("drive_header", page=page)], True
    given = iter(steps)
    for i, r in enumerate(results, 1):
        if r.get("why") == "dialog":
            lines.append(f"   {say('drive_dialog', shown=r['seen'])}")
            continue
        verb, arg = next(given, ("", ""))
        if r.get("why") == "read":
            lines.append(f"{i}. {verb} {arg}: {r['seen']}")
            continue
        result = say("drive_ok") if r["ok"] else say(f"drive_{r['why']}", arg=arg, seen=r["seen"])
        ok = ok and bool(r["ok"])
        lines.append(f"{i}. {verb} {arg}: {result}".replace("  ", " "))
    errors = answer.get("errors") or []
    assert isinstance(errors, list)
    if errors:
        ok = False
        lines.append(say("drive_errors", errors="\n".join(f"- {e}" for e in errors[:5])))
    lines.append(say("drive_text", shown=answer.get("text", "")))
    lines.append(say("drive_passed" if ok else "drive_failed"))
    return "\n".join(lines), ok


# -- a write that cuts a file -----------------------------------------------------------------------
_DEFS = {
    "python": re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.MULTILINE),
    "web": re.compile(r"\bfunction[ \t]+([A-Za-z_$][\w$]*)|^[ \t]*class[ \t]+([A-Za-z_$][\w$]*)"
                      r"|^[ \t]*(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*=[ \t]*(?:async[ \t]*)?"
                      r"(?:function\b|\([^)\n]*\)[ \t]*=>|[A-Za-z_$][\w$]*[ \t]*=>)"
                      r"|\bid=[\"']([^\"']+)[\"']", re.MULTILINE),
}


def defined(path: str, text: str) -> list[str]:
    pattern = _DEFS.get(kind_of(path) or "")
    if pattern is None:
        return []
    names = (next(g for g in m.groups() if g) for m in pattern.finditer(text))
    return list(dict.fromkeys(names))


def appended(ws: Any, parts: list[str], content: str) -> bytes:
    """What ``ws.append_file`` leaves: the file (or nothing), a newline if it lacks one, and
    ``content``. ``Refused`` when ``content`` starts as the file does: the whole file written
    again, which belongs to ``write_file``."""
    from .safe_path import Refused

    try:
        old = ws._read(parts)
    except Refused as e:
        if e.key != "not_found":
            raise
        old = b""
    try:
        new = content.encode()
    except UnicodeEncodeError as e:
        raise Refused("bad_content", index=e.start + 1) from None
    first = [next((ln.strip() for ln in t.splitlines() if ln.strip()), b"") for t in (old, new)]
    if first[0] and first[0] == first[1]:
        raise Refused("append_whole", path="/".join(parts), line=first[0].decode()[:80])
    return old + (b"\n" if old[-1:] not in (b"", b"\n") else b"") + new


def not_cut(ws: Any, parts: list[str], content: str) -> None:
    """Before ``ws.write_file`` writes ``content`` over a file: what ``lost`` finds is refused
    (``Refused``), once a path - the model is told; its next write of the path is meant."""
    from .safe_path import Refused

    where = "/".join(parts)
    try:
        if where not in ws._cut_told:
            cut(where, ws._read(parts).decode("utf-8"), content)
    except Refused as e:
        if e.key.startswith("would_cut"):
            ws._cut_told.add(where)
            raise  # any other refusal (no such file yet): the write itself says it
    except UnicodeDecodeError:
        pass


def cut(where: str, old: str, new: str) -> None:
    """Raises ``Refused`` when ``new`` written over ``old`` loses what ``lost`` finds."""
    from .safe_path import Refused

    names, shrunk = lost(where, old, new)
    if names or shrunk:
        raise Refused("would_cut_names" if names else "would_cut", path=where, old=len(old),
                      new=len(new), names=", ".join(names[:8]))


def lost(path: str, old: str, new: str) -> tuple[list[str], bool]:
    """``(names, shrunk)``: the names ``old`` defines that ``new`` does not, and whether ``new``
    keeps less than a third of a file of 400 characters or more."""
    names = set(defined(path, new))
    gone = [n for n in defined(path, old) if n not in names]
    return gone, len(old) >= 400 and len(new) * 3 < len(old)
