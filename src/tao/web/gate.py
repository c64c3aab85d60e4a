"""Who may use the workbench, and as which user: one ASGI layer in front of every route.

- **Token**: with ``token=`` set, every ``/api/`` request carries it as ``Authorization: Bearer
  T`` or in the ``tao_token`` cookie, else 401. ``GET /?token=T`` sets the cookie and redirects
  to ``/``, so the token leaves the address bar and the browser's history. Compared in constant
  time.
- **No token**: only local Host names are answered (``127.0.0.1``, ``localhost``, ``::1``): a
  web page elsewhere cannot reach the server through DNS rebinding.
- **Session**: the server alone issues session ids: a random part and its HMAC under the
  server's key (``session_key``, kept beside the journal, so a restarted server still knows its
  users). A request whose ``tao_session`` cookie is missing or was not issued here gets a fresh
  id - a value chosen by someone else (planted from another port of 127.0.0.1, where cookies
  ignore ports) is never adopted. The cookie is HttpOnly and SameSite=Strict. A navigation
  from another site carries no Strict cookie, so none is issued on it (``Sec-Fetch-Site:
  cross-site``): it would replace the user's own; the page's first same-site request gets it.
- **Body**: a body over ``max_body`` bytes is answered 413 before the app reads any of it; a JSON
  body holding text that is not Unicode (a lone surrogate, ``"\\ud800"``) gets 400, before it
  can reach a run, the journal or a log that would fail on it.

- **Origin**: a POST whose ``Origin`` is another site is refused (403): another site's page cannot
  start, cancel or approve anything, with or without the user's cookies.

A pure ASGI layer rather than ``BaseHTTPMiddleware``: SSE responses stream through untouched.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import cookie_parser

from .words import language, say

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver")
_SESSION = re.compile(r"^([A-Za-z0-9_-]{32})\.([A-Za-z0-9_-]{22})$")
#: the largest request body read (a task of 200,000 Chinese characters is 600 kB of UTF-8)
MAX_BODY = 1 << 20


def _cookie(name: str, value: str) -> tuple[bytes, bytes]:
    return (b"set-cookie", f"{name}={value}; Path=/; HttpOnly; SameSite=Strict".encode())


def session_key(folder: Path) -> bytes:
    """The server's key for session ids, made once (mode 0600) in ``folder``; or
    ``$TAO_WEB_SESSION_KEY`` (32 characters or more), which several servers behind one
    balancer share, so a page's session holds on whichever answers."""
    shared = os.environ.get("TAO_WEB_SESSION_KEY", "")
    if shared:
        if len(shared) < 32:
            raise ValueError("TAO_WEB_SESSION_KEY must be 32 characters or more")
        return shared.encode()
    path = Path(folder).expanduser() / "web-session.key"
    try:
        key = path.read_bytes()
        if len(key) >= 32:
            return key
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def _mac(key: bytes, part: str) -> str:
    digest = hmac.new(key, part.encode(), hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def issue(key: bytes) -> str:
    part = secrets.token_urlsafe(24)
    return f"{part}.{_mac(key, part)}"


def issued(key: bytes, sid: str) -> bool:
    m = _SESSION.match(sid)
    return bool(m) and hmac.compare_digest(m.group(2), _mac(key, m.group(1)))


class Gate:
    def __init__(self, app: Any, token: str | None = None, key: bytes | None = None,
                 max_body: int = MAX_BODY):
        self.app, self.token, self.max_body = app, token, max_body
        self.key = key or secrets.token_bytes(32)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        # leniently, as browsers write them: localhost's cookies come from every port's app
        # (a notebook, a dev server), and one odd cookie must not cost the user the session
        cookies = cookie_parser(headers.get("cookie", ""))
        path: str = scope["path"]
        extra: list[tuple[bytes, bytes]] = []
        if self.token is None:
            host = headers.get("host", "").rsplit(":", 1)[0] if not headers.get(
                "host", "").endswith("]") else headers.get("host", "")
            if host not in LOCAL_HOSTS:
                return await _plain(send, 400, say(language(headers.get("accept-language", "")),
                                                   "local_only"))
        else:
            if path == "/":
                given = parse_qs(scope.get("query_string", b"").decode()).get("token", [""])[0]
                if given and self._ok(given):
                    return await _plain(send, 303, "", [(b"location", b"/"),
                                                        _cookie("tao_token", self.token)])
            if path.startswith("/api/"):
                auth = headers.get("authorization", "")
                given = auth[7:].strip() if auth.lower().startswith("bearer ") else \
                    cookies.get("tao_token", "")
                if not self._ok(given):
                    text = say(language(headers.get("accept-language", "")), "token_needed")
                    body = json.dumps({"detail": text, "code": "token_needed"}, ensure_ascii=False)
                    return await _plain(send, 401, body, [(b"content-type", b"application/json"),
                                                          (b"www-authenticate", b"Bearer")])
        lang = language(headers.get("accept-language", ""))
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(headers):
            return await _plain(send, 403, say(lang, "cross_site"))
        if scope["method"] not in ("GET", "HEAD"):
            body = await self._body(headers, receive)
            if isinstance(body, int):
                return await _refuse(send, body, say(lang, "body_too_big", limit=self.max_body)
                                     if body == 413 else say(lang, "not_unicode"),
                                     "body_too_big" if body == 413 else "not_unicode")
            receive = _replay(body, receive)
        sid = cookies.get("tao_session", "")
        if not issued(self.key, sid):
            sid = issue(self.key)
            if headers.get("sec-fetch-site") != "cross-site":
                extra.append(_cookie("tao_session", sid))
        scope.setdefault("state", {})["tao_session"] = sid

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start" and extra:
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, sending)

    async def _body(self, headers: dict[str, str], receive: Any) -> bytes | int:
        """The whole body, or the status refusing it: 413 over ``max_body`` (said by
        Content-Length, or counted as it streams in), 400 for JSON with a lone surrogate."""
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            return 413
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return 413
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if b"\\u" in body and "json" in headers.get("content-type", ""):
            try:
                json.dumps(json.loads(body), ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                return 400
            except (ValueError, RecursionError):  # not JSON: the route says so, as before
                pass
        return body

    def _ok(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), (self.token or "").encode())


def _same_origin(headers: dict[str, str]) -> bool:
    """A request a browser sends from another site's page carries that site as ``Origin``: such
    a POST (a run, a cancel, an approval) is refused, whatever cookies came with it."""
    origin = headers.get("origin")
    if origin is None:  # not a browser's cross-site request (curl, httpx, a same-origin form)
        return True
    return origin.split("://", 1)[-1].rstrip("/") == headers.get("host", "")


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives the app the body read already, then the server's own (which
    says when the client goes away)."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _refuse(send: Any, status: int, text: str, code: str) -> None:
    body = json.dumps({"detail": text, "code": code}, ensure_ascii=False)
    await _plain(send, status, body, [(b"content-type", b"application/json")])


async def _plain(send: Any, status: int, body: str,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = headers or [(b"content-type", b"text/plain; charset=utf-8")]
    if not any(k == b"content-type" for k, _ in head):
        head = [*head, (b"content-type", b"text/plain; charset=utf-8")]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body.encode()})
