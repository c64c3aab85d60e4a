"""OpenAIModel: any OpenAI-compatible chat-completions endpoint (OpenAI, DeepSeek, vLLM, Ollama,
llama.cpp server, ...), streamed, with native tool calls and tao's own retry policy.

With ``openai_wire`` (the JSON both ways), ``openai_stream`` (one streamed attempt),
``openai_http`` (how a request travels: aiohttp, else the SDK over httpx2) and
``openai_step_down`` (a request asked again with what its endpoint refused left out), this is the
only place that knows the OpenAI wire format: tao ``Message``/``ToolCall``/``ToolSpec``
go out as chat-completions JSON and the streamed ``chat.completion.chunk``s come back as text
deltas and one ``ModelResponse``. The ``openai`` package is imported when a model is built, never
by ``import tao``.

Retries are ours, not the SDK's (the client is built with ``max_retries=0``), so that each retry
is visible to the agent as a ``Retrying`` chunk - which also voids the text streamed so far in
the call, since the whole request starts again. Retried: 408, 409, 429, 5xx, connection errors,
a stream that stops before the model finished (connection dropped mid-way, or a body that ends
without any ``finish_reason``) or turns to garbage mid-way (bytes that are not UTF-8, a ``data:``
line that is not JSON). ``Retry-After`` / ``retry-after-ms`` are honoured. Not retried, raised at
once as ``ModelConfigError``: 401/403 (key), 404 (model or URL), other 4xx (a request the server
will never accept), 429 ``insufficient_quota``, and an answer that is not an OpenAI event stream
from the start (an HTML page, binary data: the base URL points somewhere else).

``timeout`` is how long the endpoint may stay silent - before the first byte of the answer (a big
model reading a long prompt) and between two chunks of it - not a limit on a long answer that keeps
streaming; connecting gets ``min(timeout, 10)`` s. A timed-out attempt is tried again only
``timeout_retries`` times (default once: a server that said nothing for a minute rarely answers the
next second), so a dead endpoint fails after at most ``(1 + timeout_retries) * timeout`` seconds
plus one backoff: about 2 minutes by default (it was 5: one silent minute per attempt).

Strings go out UTF-8-safe: a lone surrogate (``"\\udcff"``, which JSON escapes and undecodable
command-line bytes produce) is sent as U+FFFD, since httpx cannot encode it and the whole request
would fail. Nothing else is changed.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..errors import ModelConfigError, ModelError
from ..messages import Message
from .base import DEFAULT_TIMEOUT_S, Chunk, Model, Retrying, ToolSpec
from .openai_http import Endpoint, use_aiohttp
from .openai_step_down import StepDown, _fill_null_content, _server_message
from .openai_stream import _Incomplete, _NotAChunk, _Turn
# The wire format lives in openai_wire; its public names stay importable from here.
from .openai_wire import (DEEPSEEK_BASE_URL, DEEPSEEK_MODEL, DEFAULT_MODEL,  # noqa: F401
                          MAX_ARGUMENT_DEPTH, NO_KEY, OPENAI_BASE_URL, _clip, parse_arguments,
                          resolve_settings, tools_as_text, wire_messages, wire_safe,
                          wire_tools)

RETRY_AFTER_MAX_S = 60.0
RETRY_STATUSES = frozenset({408, 409, 429})
CONNECT_TIMEOUT_MAX_S = 10.0


def _is_timeout(e: Exception) -> bool:
    """Whether ``e`` is a timeout: an ``APITimeoutError`` that a ``TimeoutError`` caused (aiohttp's
    and httpx2's timeouts are; the SDK's aiohttp adapter also calls a refused connection a
    connect timeout, and that is a connection error, retried as such)."""
    import openai

    return isinstance(e, openai.APITimeoutError) and any(
        isinstance(x, TimeoutError) for x in _causes(e))


def _causes(e: BaseException) -> list[BaseException]:
    """What caused ``e``, nearest first (``__cause__``, else ``__context__``)."""
    out: list[BaseException] = []
    cause = e.__cause__ or e.__context__
    while cause is not None and cause not in out:
        out.append(cause)
        cause = cause.__cause__ or cause.__context__
    return out


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:g} s"


class OpenAIModel(StepDown, Model):
    """A chat model behind an OpenAI-compatible endpoint.

    ``OpenAIModel()`` reads TAO_* / OPENAI_* / DEEPSEEK_* from the environment (see
    ``resolve_settings``); ``OpenAIModel("qwen2.5", base_url="http://localhost:8000/v1")`` talks
    to a local server. ``grammar=`` is ignored: the OpenAI API has no GBNF constraint (vLLM users
    can send ``extra_body={"guided_grammar": ...}``); the agents' tolerant parsers cover the rest.
    ``extra_body`` is merged into every request (e.g. ``{"top_k": 20}`` for vLLM).
    ``timeout`` (seconds of silence, or an ``httpx.Timeout`` passed to the SDK as it is) and
    ``timeout_retries`` bound a dead endpoint as the module docstring says.
    """

    supports_grammar = False

    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: Any = DEFAULT_TIMEOUT_S,
                 max_retries: int = 4, timeout_retries: int = 1,
                 backoff_base: float = 0.5, backoff_max: float = 30.0,
                 temperature: float | None = None, extra_body: dict[str, Any] | None = None):
        import openai  # noqa: F401 - lazily, and early: a missing package shows up here

        self.name, self.base_url, self._api_key = resolve_settings(model, base_url, api_key)
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            if not timeout > 0:  # also NaN
                raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
            timeout = float(timeout)
        elif not hasattr(timeout, "read"):
            raise ValueError(f"timeout must be seconds or an httpx.Timeout, not {timeout!r}")
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.timeout_retries = max(0, min(timeout_retries, self.max_retries))
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body else None
        self._sleep = asyncio.sleep  # tests replace it
        self._clients: dict[asyncio.AbstractEventLoop, tuple[Any, Any]] = {}  # (client, closer)

    @classmethod
    def from_env(cls, **kwargs: Any) -> OpenAIModel:
        """Everything from the environment; keyword arguments override."""
        return cls(**kwargs)

    def __repr__(self) -> str:
        return f"OpenAIModel({self.name!r}, base_url={self.base_url!r})"

    # -- client ---------------------------------------------------------------------------
    async def client(self) -> Any:
        """The ``Endpoint`` of the running event loop (``openai_http``: the SDK client, and the
        aiohttp session the requests go through), made on first use in it (``Agent.run``
        starts a new loop per run, and pooled connections must not cross loops), and closed
        when that loop shuts down: ``asyncio.run`` closes the async generators still open,
        ``_closed_with_loop`` among them, so a run leaves no connections (nor aiohttp's
        "Unclosed client session") behind."""
        loop = asyncio.get_running_loop()
        held = self._clients.get(loop)
        if held is None:
            for closed in [x for x in self._clients if x.is_closed()]:
                del self._clients[closed]  # loops closed without closing their async generators
            client = Endpoint(self._api_key or NO_KEY, self.base_url, self._timeouts(),
                              aiohttp=use_aiohttp())
            closer = self._closed_with_loop(loop, client)
            self._clients[loop] = held = (client, closer)
            await closer.asend(None)
        return held[0]

    async def _closed_with_loop(self, loop: asyncio.AbstractEventLoop,
                                client: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self._clients.get(loop, (None,))[0] is client:
                del self._clients[loop]
            await client.close()

    def _timeouts(self) -> Any:
        if not isinstance(self.timeout, float):
            return self.timeout  # the caller's own httpx.Timeout
        from openai import Timeout  # httpx's, re-exported by the SDK

        return Timeout(self.timeout, connect=min(self.timeout, CONNECT_TIMEOUT_MAX_S))

    def _silence_s(self) -> Any:
        return self.timeout if isinstance(self.timeout, float) else self.timeout.read

    async def aclose(self) -> None:
        """Close the client of the running event loop now (its loop's end would)."""
        held = self._clients.get(asyncio.get_running_loop())
        if held is not None:
            await held[1].aclose()

    # -- request --------------------------------------------------------------------------
    def request(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None,
                response_format: dict[str, Any] | None = None, stop: Sequence[str] | None = None,
                max_tokens: int | None = None, tool_choice: str | None = None) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one call."""
        from . import endpoint_facts as known

        params: dict[str, Any] = {"model": self.name, "messages": wire_messages(messages),
                                  "stream": True}
        if known.takes(self.base_url, self.name, "stream_options"):
            params["stream_options"] = {"include_usage": True}
        if tools:
            params["tools"] = wire_tools(tools)
            if tool_choice is not None:
                params["tool_choice"] = tool_choice
        if response_format is not None:
            params["response_format"] = response_format
        if stop:
            params["stop"] = list(stop)
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        from . import sampling

        run = sampling.current()  # a voting run's own draw (``tao.models.sampling``)
        if run is not None:
            params["temperature"] = run.temperature
            if run.seed is not None:
                params["seed"] = run.seed
        elif self.temperature is not None:
            params["temperature"] = self.temperature
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        if not known.takes(self.base_url, self.name, "null_content"):
            _fill_null_content(params)
        if tools and not known.takes(self.base_url, self.name, "tools"):
            tools_as_text(params)
        self._fit_format(params)
        return params

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        response_format: dict[str, Any] | None = None,
        grammar: str | None = None,  # no GBNF in the OpenAI API: ignored (see class docstring)
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        tool_choice: str | None = None,
    ) -> AsyncIterator[Chunk]:
        params = self.request(messages, tools=tools, response_format=response_format, stop=stop,
                              max_tokens=max_tokens, tool_choice=tool_choice)
        client = await self.client()
        attempt = timeouts = 0
        while True:
            turn, stream = _Turn(), None
            try:
                stream = await client.open(_body(params), turn)
                async for chunk in stream:
                    text = turn.feed(chunk)
                    if text:
                        yield text
                if turn.finish_reason is None:
                    raise _Incomplete()
            except Exception as e:  # noqa: BLE001 - classified below; unknown ones re-raised
                if self._drop_stream_options(e, params):
                    continue  # the server does not know stream_options: ask again without it
                if self._wants_text_content(e, params):
                    continue  # the server wants "" where a tool-calling reply has no text
                stepped = (self._step_down_format(e, params)  # whatever status carries it
                           or self._step_down_tools(e, params))
                if stepped is not None:
                    yield Retrying(attempt + 1, stepped, 0.0)  # what streamed is dropped
                    continue
                failure = self._classify(e, turn)  # raises what retrying cannot fix
                if failure is None:
                    raise
                reason, delay = failure
                timeouts += _is_timeout(e)
                if attempt >= self.max_retries or timeouts > self.timeout_retries:
                    tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
                    raise ModelError(f"model {self.name!r} at {self.base_url} failed after "
                                     f"{tries}; last error: {reason}") from e
            else:
                if turn.whole:
                    self._learnt("stream")  # said in the header: nothing streams from it
                names = [t.name for t in tools or ()]
                if tools and response_format is not None and response_format.get(
                        "type") == "json_schema" and not self.takes("json_schema"):
                    # the typed answer may come as a call of its tool
                    from . import final_tool

                    yield final_tool.answer(turn.response(params, [*names, final_tool.NAME]),
                                            response_format)
                    return
                yield turn.response(params, names)
                return
            finally:
                if stream is not None:
                    await stream.close()
            attempt += 1
            if delay is None:
                cap = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
                delay = random.uniform(0, cap)
            yield Retrying(attempt, reason, delay)
            await self._sleep(delay)

    # -- what the endpoint takes (asking with less: ``openai_step_down``) -----------------
    def takes(self, fact: str) -> bool:
        """Whether this endpoint has not refused ``fact`` (``endpoint_facts``)."""
        from . import endpoint_facts

        return endpoint_facts.takes(self.base_url, self.name, fact)

    def limits(self) -> str:
        """What this endpoint was found not to take, for the run's header ("" if nothing)."""
        from . import endpoint_facts

        return endpoint_facts.said(self.base_url, self.name)

    def _learnt(self, fact: str) -> None:
        from . import endpoint_facts

        endpoint_facts.refused(self.base_url, self.name, fact)

    # -- errors ---------------------------------------------------------------------------
    def _classify(self, e: Exception, turn: _Turn) -> tuple[str, float | None] | None:
        """``(reason, Retry-After delay or None)`` for a retryable failure; raises
        ModelConfigError for what retrying cannot fix; None for what is not an API error."""
        import openai

        where = f"{self.base_url} (model {self.name!r})"
        if isinstance(e, (_Incomplete, UnicodeDecodeError, json.JSONDecodeError, _NotAChunk)):
            what = turn.garbage(e)
            if what is not None and not turn.chunks:  # nothing valid came: not this protocol
                raise ModelConfigError(
                    f"{self.base_url}/chat/completions did not answer with an OpenAI event "
                    f"stream: {what}; check TAO_BASE_URL (an OpenAI-compatible base URL usually "
                    f"ends in /v1) and that the server speaks the chat-completions API") from None
            if what is not None:
                return f"invalid event stream after {turn.chunks} chunks: {what}", None
            return f"stream ended before the model finished ({turn.chunks} chunks, no finish_reason)", None
        if _is_timeout(e):
            cause = e.__cause__ or e.__context__
            if "Connect" in type(cause).__name__:
                return f"timed out: could not connect within {_seconds(self._timeouts().connect)}", None
            return (f"timed out: no data for {_seconds(self._silence_s())} (raise the limit with "
                    f"--timeout or OpenAIModel(timeout=...))"), None
        if isinstance(e, openai.APIConnectionError):
            causes = _causes(e)
            if isinstance(e, openai.APITimeoutError):  # not a timeout: the transport's own error
                causes = causes[1:]
            cause = causes[0] if causes else None
            detail = f"{type(cause).__name__}: {cause}" if cause else str(e)
            if turn.chunks:
                return f"connection lost mid-stream after {turn.chunks} chunks ({detail})", None
            return f"connection error ({detail})", None
        if isinstance(e, openai.APIStatusError):
            status, message = e.status_code, _server_message(e)
            if status in RETRY_STATUSES or status >= 500:
                if status == 429 and e.code == "insufficient_quota":
                    raise ModelConfigError(f"{where}: the account has no quota left (429 "
                                           f"insufficient_quota): {message}") from None
                return f"HTTP {status}: {message}", _retry_after(e.response.headers)
            if status in (401, 403):
                raise ModelConfigError(
                    f"{self.base_url} refused the API key ({status}) for model {self.name!r}: "
                    f"{message}; set TAO_API_KEY (or OPENAI_API_KEY / DEEPSEEK_API_KEY) to a key "
                    f"this endpoint accepts, or pass api_key=...") from None
            if status == 404:
                raise ModelConfigError(
                    f"not found (404) at {self.base_url}/chat/completions: model {self.name!r} or "
                    f"the URL does not exist: {message}; check TAO_MODEL and TAO_BASE_URL (an "
                    f"OpenAI-compatible base URL usually ends in /v1)") from None
            if 400 <= status < 500:
                raise ModelConfigError(f"{where} rejected the request ({status}): {message}") from None
            raise ModelError(f"{where} answered HTTP {status}: {message}") from None
        if isinstance(e, openai.APIError):  # an error event inside the stream
            return f"error in stream: {e.message}", None
        return None


def _body(params: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of ``params``: ``extra_body`` merged in, as the SDK does."""
    if not params.get("extra_body"):
        return params
    body = {k: v for k, v in params.items() if k != "extra_body"}
    body.update(params["extra_body"])
    return body


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return min(max(float(value) / 1000, 0.0), RETRY_AFTER_MAX_S)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)
