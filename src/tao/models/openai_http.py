"""How one streamed chat-completions request reaches the endpoint: one event loop's ``Endpoint``.

At 100 requests in flight on one core, the SDK's request layer (its options model, httpx's request
and client, the aiohttp adapter under them, three chained generators reading the stream) cost
about 1 ms of CPU a request and aiohttp itself 0.3 ms (benchmarks/eval_concurrency.py), which
held ``tao eval --concurrency 100`` at 1.4-1.6 x the ideal wall time. So, with aiohttp installed,
the POST and its event stream go through an aiohttp session of the loop's own, and the SDK still
decides everything that is not per request: the URL and the headers (taken from the SDK client
once: key, user agent, OPENAI_ORG_ID / OPENAI_PROJECT_ID, platform), the timeouts, the SSE
decoder, and what a failure is - the SDK's own status errors made from the answer,
``APITimeoutError`` / ``APIConnectionError`` caused by aiohttp's exception, ``APIError`` for an
error event - so that ``OpenAIModel`` classifies and retries them as before. Without aiohttp,
the SDK sends the request over httpx2 as it does by itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

PATH = "/chat/completions"


def use_aiohttp() -> bool:
    """Whether aiohttp is there to take the fast path (a pinned dependency; the SDK over httpx2
    when it is missing)."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


class Endpoint:
    """One event loop's way to the endpoint: the SDK client and, with aiohttp, a session whose
    pooled connections belong to this loop (made and closed by ``OpenAIModel.client``)."""

    def __init__(self, api_key: str, base_url: str, timeout: Any, aiohttp: bool):
        import openai
        from openai._models import FinalRequestOptions

        self.sdk = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout,
                                      max_retries=0, http_client=_httpx_client())
        self.session = None
        if aiohttp:
            import aiohttp as aio
            from openai._constants import DEFAULT_CONNECTION_LIMITS
            from yarl import URL

            options = FinalRequestOptions.construct(method="post", url=PATH,
                                                    security={"bearer_auth": True})
            self.url = str(self.sdk._prepare_url(PATH))
            self._url = URL(self.url)  # parsed once, not on each request
            limits = DEFAULT_CONNECTION_LIMITS  # the SDK's: 1,000 connections, 5 s keep-alive
            connector = aio.TCPConnector(limit=limits.max_connections or 0,
                                         keepalive_timeout=limits.keepalive_expiry,
                                         ssl=ssl_context())
            timeouts = aio.ClientTimeout(total=None, sock_connect=timeout.connect,
                                         sock_read=timeout.read, connect=timeout.pool)
            self.session = aio.ClientSession(
                connector=connector, headers=dict(self.sdk._build_headers(options)),
                timeout=timeouts, **_env_proxy(self._url))

    def is_closed(self) -> bool:
        return self.sdk.is_closed() and (self.session is None or self.session.closed)

    async def close(self) -> None:
        await self.sdk.close()
        if self.session is not None:
            await self.session.close()

    async def open(self, body: dict[str, Any], turn: Any) -> Any:
        """POST ``body``; the stream of its chunks as JSON objects (``async for``, then
        ``close()``), its first bytes kept in ``turn``. Raises the SDK's errors."""
        if self.session is None:
            stream = await _sdk_post(self.sdk, body)
            kind = stream.response.headers.get("content-type", "")
            turn.record(kind)
            if _is_json(kind):  # a server that answers whole, not as an event stream
                content = await stream.response.aread()
                await stream.close()
                return _Whole(content, turn)
            _keep_bytes(stream.response, turn)
            return stream
        try:
            response = await self.session.post(self._url, data=_dumps(body))
        except _failures() as e:
            raise self._failure(e) from e
        if response.status >= 400:
            try:
                content = await response.read()
            except _failures() as e:
                raise self._failure(e) from e
            finally:
                response.close()
            raise self.sdk._make_status_error_from_response(self._httpx_response(response, content))
        kind = response.headers.get("content-type", "")
        turn.record(kind)
        if _is_json(kind):  # a server that answers whole, not as an event stream
            try:
                content = await response.read()
            except _failures() as e:
                raise self._failure(e) from e
            finally:
                response.release()
            return _Whole(content, turn)
        return _Events(self, response, turn)

    def _failure(self, e: BaseException) -> Exception:
        import openai

        if isinstance(e, asyncio.TimeoutError):  # aiohttp's connect and read timeouts among them
            return openai.APITimeoutError(request=self._request())
        return openai.APIConnectionError(request=self._request())

    def _request(self) -> Any:
        import httpx2

        return httpx2.Request("POST", self.url)

    def _httpx_response(self, response: Any, content: bytes) -> Any:
        """The answer as the SDK reads one: aiohttp has already decoded the body."""
        import httpx2

        headers = [(k, v) for k, v in response.headers.items()
                   if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx2.Response(response.status, headers=headers, content=content,
                               request=self._request())


class _Events:
    """The chunks of one streamed answer, read as the SDK reads them: lines split at CR, LF or
    CRLF, each decoded as UTF-8 and given to the SDK's SSE decoder; ``[DONE]`` ends it (what is
    left of the body read, so that the connection is reused), a ``data:`` object with an
    ``error`` is the SDK's ``APIError``. One generator over ``readany()``: the SDK's chain of
    three (bytes, lines, events) cost about 80 us a response at 100 in flight."""

    def __init__(self, endpoint: Endpoint, response: Any, turn: Any):
        self.endpoint, self.response, self.turn = endpoint, response, turn
        self._chunks = self._read()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks

    async def _read(self) -> AsyncIterator[Any]:
        import openai
        from openai._streaming import SSEDecoder

        decoder, lines, read = SSEDecoder(), _Lines(), self.response.content.readany
        try:
            while part := await read():
                self.turn.keep(part)
                for line in lines.feed(part):
                    sse = decoder.decode(line.decode("utf-8"))
                    if sse is None:
                        continue
                    if sse.data.startswith("[DONE]"):
                        await self._drain()
                        return
                    data = json.loads(sse.data)
                    if isinstance(data, dict) and data.get("error"):
                        error = data["error"]
                        message = error.get("message") if isinstance(error, dict) else None
                        raise openai.APIError(message if isinstance(message, str) and message
                                              else "An error occurred during streaming",
                                              request=self.endpoint._request(), body=error)
                    yield data
            if lines.rest:  # a last line without its line end: the SDK reads it too
                decoder.decode(lines.rest.decode("utf-8"))
        except _failures() as e:
            raise self.endpoint._failure(e) from e

    async def _drain(self) -> None:
        """Read the end of the body (the last empty chunk, usually there already), for at most
        0.1 s like the SDK; a failure here does not undo a finished answer."""
        if self.response.content.is_eof():
            return
        try:
            async with asyncio.timeout(0.1):
                await self.response.read()
        except _failures():
            pass

    async def close(self) -> None:
        await self._chunks.aclose()  # now, not by the loop's finalizer (a wake-up per request)
        self.response.release()  # back to the pool when the body was read, else closed


def _is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "application/json"


class _Whole:
    """A whole ``chat.completion`` where a stream was asked for (a server that does not
    stream): read as the one chunk it amounts to - the message as a delta, its finish reason
    and usage - so ``_Turn`` reads it like any stream. A body that is not such an object is
    no chunk at all, for ``_Turn`` to say what came instead (not an event stream: check the URL)."""

    def __init__(self, content: bytes, turn: Any):
        turn.keep(content)
        turn.whole = True
        self._chunks = self._read(content)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks

    async def _read(self, content: bytes) -> AsyncIterator[Any]:
        try:
            data = json.loads(content)
        except ValueError:
            return
        choices = data.get("choices") if isinstance(data, dict) else None
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and isinstance(choices[0].get("message"), dict)):
            return
        message, delta = choices[0]["message"], {}
        if message.get("content"):
            delta["content"] = message["content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(message["tool_calls"])
                                   if isinstance(c, dict)]
        yield {"choices": [{"index": 0, "delta": delta,
                            "finish_reason": choices[0].get("finish_reason") or "stop"}],
               **({"usage": data["usage"]} if isinstance(data.get("usage"), dict) else {})}

    async def close(self) -> None:
        await self._chunks.aclose()


class _Lines:
    """The lines in pieces of bytes, split at CR, LF or CRLF as the SDK's ``_SSELineDecoder``
    splits them (a CRLF cut between two pieces is one line end), with ``bytes.splitlines``."""

    def __init__(self) -> None:
        self.rest = b""  # the start of a line whose end has not come yet
        self._cr = False  # the last piece ended in CR: an LF first in the next belongs to it

    def feed(self, part: bytes) -> list[bytes]:
        if self._cr and part[:1] == b"\n":
            part = part[1:]
        lines = (self.rest + part).splitlines(keepends=True)
        self.rest = lines.pop() if lines and lines[-1][-1:] not in (b"\n", b"\r") else b""
        self._cr = bool(lines) and lines[-1][-1:] == b"\r" and not self.rest
        return [line.rstrip(b"\r\n") for line in lines]


def _env_proxy(url: Any) -> dict[str, Any]:
    """HTTPS_PROXY / HTTP_PROXY / NO_PROXY for ``url``, as aiohttp's ``trust_env`` reads them,
    read once: ``trust_env`` reads them again on a thread for each request."""
    from aiohttp.helpers import get_env_proxy_for_url

    try:
        proxy, auth = get_env_proxy_for_url(url)
    except LookupError:  # no proxy for this URL
        return {}
    return {"proxy": proxy, "proxy_auth": auth}


def _failures() -> tuple[type[BaseException], ...]:
    import aiohttp

    return (aiohttp.ClientError, OSError, asyncio.TimeoutError)


def _dumps(body: dict[str, Any]) -> bytes:
    """The body as the SDK encodes it (``openapi_dumps``: compact, UTF-8, no NaN)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def _sdk_post(client: Any, body: dict[str, Any]) -> Any:
    """``client.chat.completions.create(**body)`` without the SDK's walk of the arguments over
    its typed parameter classes (``OpenAIModel.request`` builds the wire JSON already): the same
    POST, headers, auth, timeouts and event stream, the chunks as the JSON objects they are
    (``AsyncStream[object]``), not pydantic ``ChatCompletionChunk``s."""
    from openai import AsyncStream
    from openai.types.chat import ChatCompletion

    return await client.post(PATH, body=body, cast_to=ChatCompletion, stream=True,
                             stream_cls=AsyncStream[object],
                             options={"security": {"bearer_auth": True}})


def _keep_bytes(response: Any, turn: Any) -> None:
    """Show ``turn`` every byte of the body as the SDK reads it: the SDK decodes the stream from
    ``response.aiter_bytes()``, so wrapping that one method reads nothing ahead of it."""
    inner = response.aiter_bytes

    async def aiter_bytes(*args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
        async for part in inner(*args, **kwargs):
            turn.keep(part)
            yield part

    response.aiter_bytes = aiter_bytes


def _httpx_client() -> Any:
    """The SDK's own httpx2 client (its defaults, the shared SSL context). With the aiohttp fast
    path it sends nothing; it is what the SDK needs to exist."""
    import openai

    return openai.DefaultAsyncHttpxClient(verify=ssl_context())


_SSL_CONTEXT: Any = None


def ssl_context() -> Any:
    """The SSL context the SDK would build (system trust store, SSL_CERT_FILE/DIR honoured),
    built once per process: loading the CA bundle costs ~70 ms, and every new event loop
    (each ``Agent.run``) needs a new client."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        import httpx2

        _SSL_CONTEXT = httpx2.create_ssl_context()
    return _SSL_CONTEXT
