"""Who may use the workbench, and as which user: one ASGI layer in front of every route.

- **Token**: with ``token=`` set, every ``/api/`` request carries it as ``Authorization: Bearer
  T`` or in the ``tao_token`` cookie, else 401. ``GET /?token=T`` sets the cookie and redirects
  to ``/``, so the token leaves the address bar and the browser's history. Compared in constant
  time.
- **No token**: only local Host names are answered (``127.0.0.1``, ``localhost``, ``::1``): a
  web page elsewhere cannot reach the server through DNS rebinding.
- **Session**: a request without a ``tao_session`` cookie gets a new random one (HttpOnly;
  SameSite=Lax: another site's page cannot send it with a POST or a fetch, while a link to the
  page from elsewhere still opens the user's own session instead of replacing it). It names
  the user; runs belong to it.

- **Origin**: a POST whose ``Origin`` is another site is refused (403): another site's page cannot
  start, cancel or approve anything, with or without the user's cookies.

A pure ASGI layer rather than ``BaseHTTPMiddleware``: SSE responses stream through untouched.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import cookie_parser

from .sessions import new_id
from .words import language, say

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver")
_SESSION = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


def _cookie(name: str, value: str) -> tuple[bytes, bytes]:
    return (b"set-cookie", f"{name}={value}; Path=/; HttpOnly; SameSite=Lax".encode())


class Gate:
    def __init__(self, app: Any, token: str | None = None):
        self.app, self.token = app, token

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
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(headers):
            return await _plain(send, 403, say(language(headers.get("accept-language", "")),
                                               "cross_site"))
        sid = cookies.get("tao_session", "")
        if not _SESSION.match(sid):
            sid = new_id()
            extra.append(_cookie("tao_session", sid))
        scope.setdefault("state", {})["tao_session"] = sid

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start" and extra:
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, sending)

    def _ok(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), (self.token or "").encode())


def _same_origin(headers: dict[str, str]) -> bool:
    """A request a browser sends from another site's page carries that site as ``Origin``: such
    a POST (a run, a cancel, an approval) is refused, whatever cookies came with it."""
    origin = headers.get("origin")
    if origin is None:  # not a browser's cross-site request (curl, httpx, a same-origin form)
        return True
    return origin.split("://", 1)[-1].rstrip("/") == headers.get("host", "")


async def _plain(send: Any, status: int, body: str,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = headers or [(b"content-type", b"text/plain; charset=utf-8")]
    if not any(k == b"content-type" for k, _ in head):
        head = [*head, (b"content-type", b"text/plain; charset=utf-8")]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body.encode()})
