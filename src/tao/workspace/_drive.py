"""The page driver behind ``Workspace.check_page``, run as its own process (the standard library
and Playwright only; tao is not imported here): ``python _drive.py < request.json``.

The request: ``{"root", "page", "steps": [[verb, arg], ...], "chromium", "step_ms"}``. The folder
``root`` is served on 127.0.0.1 by a server of this process; the page is loaded from it in a
fresh browser context (a new profile, no cookies or storage carried over), and every request
that does not go to that server is aborted - no network, no file outside the folder. The caller
kills this process at its time limit. Printed: one JSON object, ``{"steps": [{"ok", "why",
"seen"}], "errors": ["app.js:12: ReferenceError: ..."], "text": "..."}`` or ``{"fatal": "..."}``.
"""

import functools
import http.server
import json
import re
import sys
import threading
from typing import ClassVar

# beside the route that aborts every request not to the page's server: a dead proxy for all but
# loopback and no name resolved, so what the route does not see (a WebSocket) goes nowhere either
FLAGS = ["--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--mute-audio", "--proxy-server=socks5://127.0.0.1:9",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
FIELDS = ("input:not([type=button]):not([type=submit]):not([type=hidden]):not([type=checkbox])"
          ":not([type=radio]):not([type=reset]), textarea, [contenteditable=true]")
PAGE_TEXT = """() => {
  const body = document.body ? document.body.innerText : '';
  const values = Array.from(document.querySelectorAll('input, textarea, output'),
    e => e.value || '').filter(v => v).join(' | ');
  return values ? body + '\\n[fields: ' + values + ']' : body;
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
        ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

    def log_message(self, format, *args):
        pass


def _where(stack, base):
    """``app.js:12`` from the first frame of a stack that is one of the page's files."""
    for m in re.finditer(re.escape(base) + r"([^\s:)]+):(\d+)(?::\d+)?", stack or ""):
        return f"{m.group(1)}:{m.group(2)}"
    return ""


def _click(page, text, ms):
    for loc in (page.get_by_role("button", name=text, exact=True),
                page.get_by_role("link", name=text, exact=True),
                page.locator(f"input[type=button][value={json.dumps(text)}], "
                             f"input[type=submit][value={json.dumps(text)}]"),
                page.get_by_role("button", name=text),
                page.get_by_text(text, exact=True),
                page.locator(text) if text[:1] in "#." else None):
        try:
            if loc is not None and loc.count():
                loc.first.click(timeout=ms)
                return None
        except Exception as e:  # noqa: BLE001 - a bad selector, an element that cannot be clicked
            return ("no_click", str(e).splitlines()[0][:200])
    return ("no_target", text)


def _type(page, arg, ms):
    target, text = None, arg
    if arg[:1] in "#." and " " in arg:
        target, text = arg.split(" ", 1)
    fields = page.locator(target) if target else page.locator(FIELDS)
    if not fields.count():
        return ("no_field", target or "")
    field = fields.first
    try:
        field.click(timeout=ms)
        field.fill("", timeout=ms)
        field.press_sequentially(text, timeout=ms)
    except Exception as e:  # noqa: BLE001
        return ("no_type", str(e).splitlines()[0][:200])
    return None


def drive(request):
    from playwright.sync_api import sync_playwright

    root, page_name, steps = request["root"], request["page"], request["steps"]
    ms = int(request.get("step_ms", 3000))
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    errors, done = [], []
    try:
        with sync_playwright() as p:
            args = FLAGS + (["--no-sandbox"] if request.get("no_sandbox") else [])
            browser = p.chromium.launch(executable_path=request["chromium"], args=args)
            try:
                context = browser.new_context(viewport={"width": 800, "height": 700})
                context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base)
                              else r.abort("blockedbyclient"))
                page = context.new_page()
                page.set_default_timeout(ms)

                def thrown(e):
                    where = _where(getattr(e, "stack", "") or "", base)
                    line = f"{where}: {e.name}: {e.message}" if where else f"{e.name}: {e.message}"
                    if line not in errors:
                        errors.append(line)

                page.on("pageerror", thrown)
                page.on("dialog", lambda d: (done.append({"ok": True, "why": "dialog",
                                                          "seen": d.message[:200]}), d.dismiss()))
                missing = []
                page.on("response", lambda r: r.status >= 400 and not r.url.endswith(
                    "favicon.ico") and missing.append(r.url.removeprefix(base)))
                try:
                    page.goto(base + page_name, wait_until="load", timeout=10_000)
                except Exception as e:  # noqa: BLE001
                    return {"fatal": str(e).splitlines()[0][:300]}
                page.wait_for_timeout(200)
                for name in missing:
                    errors.append(f"{name}: 404 (not found)")
                for verb, arg in steps:
                    if verb == "click":
                        failed = _click(page, arg, ms)
                    elif verb == "type":
                        failed = _type(page, arg, ms)
                    elif verb == "press":
                        try:
                            page.keyboard.press(arg or "Enter")
                            failed = None
                        except Exception as e:  # noqa: BLE001 - an unknown key name
                            failed = ("bad_key", str(e).splitlines()[0][:200])
                    elif verb == "wait":
                        page.wait_for_timeout(min(int(arg) if arg.isdigit() else 500, 5000))
                        failed = None
                    elif verb == "expect":
                        text = page.evaluate(PAGE_TEXT)
                        failed = None if arg in text or arg.lower() in text.lower() else \
                            ("missing", " ".join(text.split())[:300])
                    elif verb == "read":
                        text = page.locator(arg).first.inner_text(timeout=ms) if arg else \
                            page.evaluate(PAGE_TEXT)
                        done.append({"ok": True, "why": "read", "seen": " ".join(text.split())[:300]})
                        continue
                    else:
                        failed = ("unknown", verb)
                    page.wait_for_timeout(100)
                    done.append({"ok": failed is None, "why": failed[0] if failed else "",
                                 "seen": failed[1] if failed else ""})
                text = page.evaluate(PAGE_TEXT)
                return {"steps": done, "errors": errors, "text": " ".join(text.split())[:600]}
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    try:
        out = drive(json.load(sys.stdin))
    except Exception as e:  # noqa: BLE001 - whatever went wrong is said, not a traceback
        out = {"fatal": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
    print(json.dumps(out, ensure_ascii=False))
