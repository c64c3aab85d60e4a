"""What the workbench's browser tests share: a real uvicorn serving ``tao.web.create_app`` on a
free port, Debian's chromium under Playwright (no browser download), a model that takes its
time, a TCP proxy that cuts an event stream mid-run, and screenshots kept as test artefacts.

Without Playwright or chromium the tests skip, except where ``TAO_REQUIRE_BROWSER=1`` (CI):
there a missing browser fails them, as in test_snake_browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tao.models.base import Chunk, Model

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "web"


def browser_missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install playwright==1.65.2)"
    if not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    for name in ("fastapi", "uvicorn", "sse_starlette"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed (pip install 'tao[web]')"
    return None


def require_browser() -> None:
    problem = browser_missing()
    if problem and os.environ.get("TAO_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TAO_REQUIRE_BROWSER=1 but {problem}", pytrace=False)
    if problem:
        pytest.skip(problem)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def Served(**kwargs: Any) -> Any:  # noqa: N802 - used as the context manager it returns
    """``create_app(**kwargs)`` behind a real uvicorn in a background thread, on 127.0.0.1
    (tests/web_helpers.py's, imported here so that a checkout without the web extra skips)."""
    from web_helpers import Served as Uvicorn

    from tao.web import create_app

    return Uvicorn(create_app(**kwargs))


class Paced(Model):
    """A model that takes its time: ``delay_s`` before each reply, ``chunk_delay_s`` before each
    streamed piece - so a run lasts long enough to be watched, cut and reconnected. It awaits
    (never blocks), as a network model does, so the server keeps serving meanwhile."""

    def __init__(self, inner: Model, delay_s: float = 0.0, chunk_delay_s: float = 0.0):
        self.inner, self.delay_s, self.chunk_delay_s = inner, delay_s, chunk_delay_s
        self.name = inner.name

    async def stream(self, messages: Sequence[Any], **kwargs: Any) -> AsyncIterator[Chunk]:
        await asyncio.sleep(self.delay_s)
        async for chunk in self.inner.stream(messages, **kwargs):
            if isinstance(chunk, str):
                await asyncio.sleep(self.chunk_delay_s)
            yield chunk


class CuttingProxy:
    """A TCP proxy in front of the server that drops the first event stream (``/events``) it
    carries once ``after`` SSE messages have gone through - the network failing mid-run. The
    browser's EventSource reconnects by itself, through the proxy again; that one is left alone.
    ``cuts`` counts the streams dropped, ``last_event_ids`` what each reconnect said it had and
    ``reconnected_at`` when.
    ``rewind``: the reconnect's Last-Event-ID is taken out, so the server sends every event
    again (a proxy that drops the header; a client that must dedupe)."""

    def __init__(self, target_port: int, after: int, rewind: bool = False):
        self.target_port, self.after, self.rewind = target_port, after, rewind
        self.last_event_ids: list[int] = []
        self.reconnected_at: list[float] = []  # Unix time of each reconnect, as events' ts
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cuts = 0
        self.streams = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> CuttingProxy:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._client, "127.0.0.1", self.port), self._loop)
        self._server = started.result(timeout=10)
        return self

    def __exit__(self, *exc: Any) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _shutdown(self) -> None:
        self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        cut_this = asyncio.Event()

        async def upstream() -> None:  # browser -> server; spots the event-stream request
            try:
                while data := await reader.read(65536):
                    if b"/events" in data.split(b"\r\n", 1)[0]:
                        self.streams += 1
                        if self.cuts == 0:
                            cut_this.set()
                        else:
                            said = re.search(rb"(?im)^last-event-id:\s*(\d+)", data)
                            self.last_event_ids.append(int(said.group(1)) if said else 0)
                            self.reconnected_at.append(time.time())
                            if self.rewind:
                                data = re.sub(rb"(?im)^last-event-id:[^\r\n]*\r\n", b"", data)
                    up_w.write(data)
                    await up_w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                up_w.close()

        async def downstream() -> None:  # server -> browser; cut after `after` messages
            seen = 0
            try:
                while data := await up_r.read(65536):
                    if cut_this.is_set() and self.cuts == 0:
                        seen += data.count(b"\nid: ") + data.startswith(b"id: ")
                        if seen >= self.after:
                            self.cuts += 1
                            writer.transport.abort()  # a reset, not a clean end of the stream
                            return
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        await asyncio.gather(upstream(), downstream())


def screenshot(page: Any, name: str) -> Path:
    """Keep what the page looked like: ``tests/artifacts/web/NAME.png`` (CI uploads the folder)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def chain(page: Any, root: str = "#run") -> list[str]:
    """The kinds of the run's top-level chain, in DOM order (tokens and turn headers left out)."""
    return page.eval_on_selector_all(
        f"{root} .chain > li[data-kind]",
        "els => els.map(e => e.dataset.kind).filter(k => !['tokens', 'turn_started'].includes(k))")


def seqs(page: Any, root: str = "#run") -> list[int]:
    """The seq of every event element drawn for the run (token pieces included), in DOM order."""
    return page.eval_on_selector_all(f"{root} [data-seq]", "els => els.map(e => +e.dataset.seq)")


# -- fixtures and page helpers (the test modules import them) ------------------------------

WEATHER_TASK = "北京今天适合跑步吗？"
WEATHER_RUN = [  # seed 001's text protocol, one lookup and the answer
    'Thought: 需要查询北京实时天气才能判断\nAction: get_weather\nAction Input: {"city": "北京"}',
    "Thought: 北京晴，19°C，风力不大，适合户外运动\nFinal Answer: 今天北京适合跑步。",
]


@pytest.fixture(scope="module")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def workbench(browser, tmp_path):
    """``workbench(models=..., **create_app_kwargs)``: a real server (its journal in tmp_path)
    and a page on it in a fresh browser context (its own cookies: a new user). ``proxy`` puts a
    ``CuttingProxy(**proxy)`` between them. Any JavaScript error on the page fails the test.
    Closed in order: the pages, then the servers."""
    errors = []
    with contextlib.ExitStack() as stack:
        def open_(locale: str = "zh-CN", proxy: dict | None = None, path: str = "/", **kwargs):
            kwargs.setdefault("journal", tmp_path / "runs.db")
            served = stack.enter_context(Served(**kwargs))
            url = served.url
            if proxy is not None:
                served.proxy = stack.enter_context(CuttingProxy(served.port, **proxy))
                url = served.proxy.url
            ctx = browser.new_context(locale=locale, viewport={"width": 1400, "height": 900})
            stack.callback(ctx.close)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + path)
            page.wait_for_selector("body[data-ready='1']", timeout=15000)
            return served, page

        yield open_
    assert errors == []


def fill_run(page, *, agent, model, task, tools=("calculators",), approve=(), max_turns=None):
    page.select_option("select[name=agent]", agent)
    page.select_option("select[name=model]", model)
    for box in page.query_selector_all("input[name=tools]"):
        box.set_checked(box.get_attribute("value") in tools)
    typed = []
    for name in approve:  # a box for each tool the picked sets list; the field for the rest
        box = page.query_selector(f"input[name=approve][value='{name}']")
        if box is not None and box.is_visible():
            box.check()
        else:
            typed.append(name)
    if typed:
        page.fill("input[name=approve_text]", ",".join(typed))
    if max_turns is not None:
        page.fill("input[name=max_turns]", str(max_turns))
    page.fill("textarea[name=task]", task)


def finished(page, root="#run", timeout=30000):
    page.wait_for_selector(f"{root}[data-status]:not([data-status='running'])", state="attached",
                           timeout=timeout)
    return page.get_attribute(root, "data-status")


def text_of(page, selector):
    return [e.inner_text() for e in page.query_selector_all(selector)]


def replay_of(page, run_id):
    return page.evaluate("id => fetch(`/api/runs/${id}/replay`).then(r => r.json())", run_id)["events"]
