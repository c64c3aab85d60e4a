"""The page check of ``tao code``: a web page the agent wrote, opened in headless Chromium, its
JavaScript errors said back to the model.

Seed 002 ends with "Agent 能写文件，不代表代码一定对" and suggests pasting the browser's errors
back. A small model's game often dies on its first tick (a variable it never declared, an id
index.html does not have), and it cannot see that from the files alone; told the error and the
line, it can rewrite the file. So once a write leaves ``index.html`` with every local script and
style sheet it loads, the page is opened the way the user would open it - ``chromium --headless``
on the file, two seconds of virtual time so timers and animation frames run - and the uncaught
errors Chromium prints are returned (``console.error`` is not told from ``console.log`` in its
log, so only what a script throws counts).

The browser runs with a fresh profile, every request sent to a dead proxy, and a time limit;
where bubblewrap works, inside it too: no network namespace at all, the system read-only, and of
the user's files only the page's folder (read-only), so a page cannot load ``file:///root/...``
as a script and show what it holds. Not inside ``tao.sandbox`` itself: Chromium needs more of
the system than that sandbox lends (its seccomp filter traps it). Without Chromium on the PATH
(or ``$TAO_CHROMIUM``) there is no check.
"""

from __future__ import annotations

import functools
import html.parser
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

#: Chromium's stderr line for a console message: ``...:CONSOLE:26] "text", source: URL (26)``
_CONSOLE = re.compile(r':CONSOLE:\d+\] "(?P<text>.*)", source: (?P<source>\S*) \((?P<line>\d+)\)$')
VIRTUAL_MS = 2000
MAX_ERRORS = 5


def chromium() -> str | None:
    """The Chromium to run: ``$TAO_CHROMIUM``, else the first of chromium, chromium-browser,
    google-chrome on the PATH; ``None`` when there is none."""
    found = os.environ.get("TAO_CHROMIUM")
    if found:
        return found if Path(found).is_file() else None
    return next((p for n in ("chromium", "chromium-browser", "google-chrome")
                 if (p := shutil.which(n))), None)


class _Refs(html.parser.HTMLParser):
    """The local files a page loads: ``<script src>`` and ``<link rel=stylesheet href>``."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        ref = a.get("src") if tag == "script" else \
            a.get("href") if tag == "link" and "stylesheet" in (a.get("rel") or "").lower() else None
        if ref and not re.match(r"[a-zA-Z][\w+.-]*:|//", ref):  # not http:, data:, //cdn...
            self.refs.append(ref.split("#")[0].split("?")[0])


def local_refs(page: Path) -> list[str]:
    parser = _Refs()
    try:
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    except (OSError, AssertionError):  # AssertionError: html.parser on hostile markup
        return []
    return parser.refs


def ready(root: Path, page: str = "index.html") -> bool:
    """Whether ``root/page`` exists with every local file it loads: the moment to check it."""
    where = root / page
    if not where.is_file():
        return False
    return all((where.parent / ref).is_file() for ref in local_refs(where) if ref)


def page_errors(root: Path, page: str = "index.html", *, timeout: float = 30) -> list[str] | None:
    """The JavaScript errors of ``root/page`` in headless Chromium, as ``game.js:26: Uncaught
    ReferenceError: ...`` (distinct ones, in order, at most ``MAX_ERRORS``); ``None`` when there
    is no Chromium or it did not run."""
    exe = chromium()
    if exe is None:
        return None
    root = Path(root).resolve()
    proc = run_chromium(exe, root / page, root, virtual_ms=VIRTUAL_MS, timeout=timeout)
    if proc is None:
        return None
    errors: list[str] = []
    for found in uncaught(proc.stderr, root, page):
        if found not in errors:
            errors.append(found)
    return errors[:MAX_ERRORS]


def uncaught(stderr: str, root: Path, page: str) -> list[str]:
    """What scripts threw, in order, from Chromium's log: ``game.js:26: Uncaught ...`` (the
    log keeps the message a ``file://`` page's own error event hides as "Script error.")."""
    found: list[str] = []
    prefix = root.as_uri() + "/"
    for line in stderr.splitlines():
        m = _CONSOLE.search(line)
        if not m:
            continue
        text = m.group("text")
        if not text.startswith("Uncaught"):
            continue  # console.log, .warn and .error look the same in this log: only throws count
        source = m.group("source").removeprefix(prefix) or page
        found.append(f"{source}:{m.group('line')}: {text}")
    return found


def run_chromium(exe: str, page: Path, folder: Path, *, virtual_ms: int, timeout: float
                 ) -> subprocess.CompletedProcess[str] | None:
    """Chromium on ``page`` (a file in ``folder``, all it may see) for ``virtual_ms`` of
    virtual time, confined as the module says; its DOM on stdout, its console on stderr.
    ``None`` when it did not run in time."""
    flags = ["--headless", "--disable-gpu", "--no-first-run", "--mute-audio",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--proxy-server=socks5://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
             "--enable-logging=stderr", "--v=0", f"--virtual-time-budget={virtual_ms}",
             "--dump-dom", page.as_uri()]
    jail = _jail(exe, folder)
    with tempfile.TemporaryDirectory(prefix="tao-page-") as profile:
        if jail:  # bwrap is the sandbox: Chromium's own cannot start in its namespaces
            cmd = [*jail, exe, "--no-sandbox", "--user-data-dir=/tmp/profile", *flags]
        else:
            cmd = [exe, f"--user-data-dir={profile}", *flags]
            if os.geteuid() == 0:
                cmd.insert(1, "--no-sandbox")  # Chromium's own sandbox refuses to start as root
        try:
            return subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None


def _jail(exe: str, folder: Path) -> list[str]:
    """bubblewrap around Chromium where it works here: no network namespace at all, the system
    read-only, a private /tmp for the profile, and of the user's files only ``folder`` (read
    only); ``[]`` (the flags alone confine it) without bwrap or user namespaces."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or not _jail_works(bwrap):
        return []
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/bin:/bin",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for top in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for extra in ("/etc/fonts", "/etc/chromium.d", "/etc/chromium", "/opt",
                  str(Path(os.path.realpath(exe)).parent)):
        args += ["--ro-bind-try", extra, extra]
    return [*args, "--ro-bind", str(folder), str(folder)]


@functools.lru_cache(maxsize=1)
def _jail_works(bwrap: str) -> bool:
    try:
        return subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def note(root: Path, path: str, say: Callable[..., str]) -> str:
    """What a write to ``path`` adds to its observation: the page (``path`` if it is HTML, else
    index.html), once it has every file it loads, checked; its errors worded by ``say`` (the
    workspace's ``page_errors`` text) on a line of their own, or ``page_ok`` when it threw none;
    ``""`` before the page is whole or without Chromium."""
    page = path if path.lower().endswith((".html", ".htm")) else "index.html"
    if not ready(root, page):
        return ""
    errors = page_errors(root, page)
    if errors is None:  # no Chromium: nothing to tell
        return ""
    if not errors:  # a small model goes on "improving" a page that works; say it does
        return "\n" + say("page_ok", page=page)
    return "\n" + say("page_errors", page=page, errors="\n".join(f"- {e}" for e in errors))
