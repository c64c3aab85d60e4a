"""Open the built site in Chromium and check what a reader would: no page is a 404, the search box
finds pages (English and Chinese), and the language switch leads to the same page in the other
language.

    mkdocs build --strict && python docs/site_check.py [site]

Serves the folder on 127.0.0.1 with the standard library's HTTP server; Debian's Chromium under
Playwright (no browser download). Exit 0 when every check passed; the failures are printed.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

SEARCHES = [("", "sandbox"), ("zh/", "沙箱"), ("zh/", "智能体")]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # the browser moved on mid-response
            pass


def main(site: Path) -> int:
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))
    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    failures: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        console: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        bad_requests: list[str] = []
        page.on("response", lambda r: bad_requests.append(f"{r.status} {r.url}") if r.status >= 400 else None)

        # 1. every page loads, with every stylesheet, script and image it asks for
        for rel in pages:
            url = base + rel.removesuffix("index.html")
            response = page.goto(url)
            if response is None or response.status != 200:
                failures.append(f"{url}: HTTP {response.status if response else 'no response'}")
            if page.title().startswith("404"):
                failures.append(f"{url}: the 404 page")
        failures += [f"a request failed: {r}" for r in sorted(set(bad_requests))]
        print(f"{len(pages)} pages opened")

        # 2. search finds pages, in both languages
        for prefix, query in SEARCHES:
            page.goto(base + prefix)
            page.click("label.md-search__icon, .md-search__input", timeout=5000)
            hits = 0
            for _ in range(180):         # typed before the index is built (slow on a busy machine), a query finds nothing
                page.fill("input.md-search__input", "")
                page.fill("input.md-search__input", query)
                # Material reads the query on keyup (as a person's typing makes it); fill() sends
                # only an input event, which it missed now and then ('Type to start searching')
                page.press("input.md-search__input", "End")
                page.wait_for_timeout(1000)
                hits = page.locator(".md-search-result__item").count()
                if hits:
                    break
            if hits:
                first = page.locator(".md-search-result__item a").first.get_attribute("href")
                print(f"search {query!r} on /{prefix}: {hits} results shown, the first {first.removeprefix(base)}")
            else:
                meta = page.locator(".md-search-result__meta").inner_text()
                failures.append(f"search {query!r} on /{prefix}: no result (the box says {meta!r}; "
                                f"the console: {console[-5:]})")

        # 3. the language switch goes to the same page in the other language, and back
        for start, lang, want in [("tutorials/codeact/", "zh", "zh/tutorials/codeact/"),
                                  ("zh/tutorials/codeact/", "en", "tutorials/codeact/")]:
            page.goto(base + start)
            link = page.locator(f"a.md-select__link[hreflang={lang}]").first
            page.hover(".md-header__option .md-select")
            link.click()
            page.wait_for_load_state()
            got = page.url.removeprefix(base)
            html_lang = page.get_attribute("html", "lang")
            print(f"language switch from /{start} to {lang}: /{got} (html lang={html_lang})")
            if got != want or not (html_lang or "").startswith(lang):
                failures.append(f"language switch from /{start}: landed on /{got}, lang={html_lang}")
        failures += [f"JavaScript error: {e}" for e in errors]
        browser.close()
    server.shutdown()
    for f in failures:
        print("FAIL", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "site")))
