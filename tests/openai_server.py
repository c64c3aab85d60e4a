"""A small, real OpenAI-compatible chat-completions server for tests.

It listens on 127.0.0.1 (a free port) in a background thread and answers each request with the
next scripted response, in order::

    with OpenAIServer() as server:
        server.push(Error(429, headers={"Retry-After": "0"}), Reply("Hello!"))
        model = OpenAIModel("m", base_url=server.url, api_key="x")
        ...
        assert server.requests[1]["body"]["messages"][0]["role"] == "system"

Responses:

* ``Reply(text, tool_calls=[("call_1", "add", '{"a": 1}')])`` - a normal answer. Streamed as SSE
  ``chat.completion.chunk`` events (text in ``chunk_size`` pieces, tool-call arguments in
  ``args_chunk_size`` pieces, a usage chunk when the request asked for one, then ``[DONE]``) over
  ``Transfer-Encoding: chunked``, like api.openai.com; as one ``chat.completion`` JSON object when
  the request does not stream.
* ``Error(status, message, headers={...})`` - an error status with an OpenAI-style JSON body.
* ``Reply(..., delay_s=0.5)`` waits before answering (a stalled server, for timeouts);
  ``chunk_delay_s=0.1`` waits before each text chunk (a slow model that keeps talking).
* ``Cut(text)`` - a stream that sends the first chunks of ``text`` and then drops the connection
  without ``[DONE]`` and without the final empty HTTP chunk. ``Cut(text, clean=True)`` ends the
  body properly (terminating chunk sent) but still without a finish_reason or ``[DONE]``: a
  server that gave up half-way. ``Cut(text, error_event="overloaded")`` sends an in-stream
  error event (``data: {"error": {...}}``) as the OpenAI API does when it fails mid-stream.
* ``Hang()`` - reads the request and answers nothing (a dead endpoint that accepted the
  connection); ``Hang(after_chunks=2)`` sends the headers and the first chunks of ``text``, then
  falls silent. Either way it lets go after ``seconds`` or when the server stops.
* ``Raw(body, content_type)`` - 200 with these bytes as the body (an HTML page, binary data);
  ``Raw(body, text="Hi")`` streams ``text`` as valid chunks first and then the bytes (a stream
  that turns to garbage mid-way, e.g. a truncated ``data:`` line).

Every request is recorded in ``requests`` (path, lower-cased headers, parsed JSON body, arrival time). When
the script runs out the server answers 418 with a message saying so, which the client reports as
a configuration error - a test never hangs on an unscripted request.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, arguments)
    chunk_size: int = 4
    args_chunk_size: int = 5
    usage: tuple[int, int] | None = (11, 7)  # (prompt_tokens, completion_tokens); None: no usage
    finish_reason: str | None = None  # default: "tool_calls" when there are calls, else "stop"
    delay_s: float = 0.0  # wait this long before answering (to provoke client timeouts)
    chunk_delay_s: float = 0.0  # and this long before each text chunk (a slow, steady stream)


@dataclass
class Error:
    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    code: str | None = None
    type: str = "server_error"


@dataclass
class Cut:
    text: str = "partial answer that never ends"
    chunk_size: int = 4
    after_chunks: int = 2  # content chunks sent before the drop
    clean: bool = False  # True: end the HTTP body properly, just without finish_reason/[DONE]
    error_event: str | None = None  # send `data: {"error": {"message": ...}}` before ending


@dataclass
class Hang:
    after_chunks: int = 0  # 0: not even the headers
    text: str = "partial answer"
    chunk_size: int = 4
    seconds: float = 60.0  # lets go after this long (the client should have given up long before)


@dataclass
class Raw:
    body: bytes
    content_type: str = "text/event-stream; charset=utf-8"
    text: str = ""  # streamed as valid chunks before body (an event stream that goes bad)
    chunk_size: int = 4


Response = Reply | Error | Cut | Hang | Raw


def _pieces(s: str, n: int) -> list[str]:
    n = max(1, n)
    return [s[i : i + n] for i in range(0, len(s), n)] or []


class OpenAIServer:
    """Scripted OpenAI-compatible server; use as a context manager or call start()/stop()."""

    model = "scripted-model"

    def __init__(self, responses: list[Response] | None = None):
        self.responses: deque[Response] = deque(responses or [])
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # lets hanging handlers go
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- script ---------------------------------------------------------------------------
    def push(self, *responses: Response) -> OpenAIServer:
        with self._lock:
            self.responses.extend(responses)
        return self

    def _next(self) -> Response | None:
        with self._lock:
            return self.responses.popleft() if self.responses else None

    def reset(self) -> None:
        """Forget the script and the recorded requests (to share one server between tests)."""
        with self._lock:
            self.responses.clear()
            self.requests.clear()

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAIServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked transfer encoding and keep-alive, like the real API
    owner: OpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep tests quiet
        pass

    # -- helpers --------------------------------------------------------------------------
    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, obj: Any) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self._chunk(f"data: {payload}\n\n".encode())

    def _start_stream(self, close: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        if close:  # say so: a client that pooled the connection would race the server's close,
            # and on a loaded machine its retry went out on the dying socket (one retry too many)
            self.send_header("Connection", "close")
        self.end_headers()

    # -- requests -------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": self.owner.model, "object": "model", "created": 0, "owned_by": "tests"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802
        try:
            self._post()
        except OSError:  # the client went away (a timeout test): nothing to answer
            self.close_connection = True

    def _post(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode(errors="replace")}
        with self.owner._lock:
            self.owner.requests.append({"path": self.path,
                                        "headers": {k.lower(): v for k, v in self.headers.items()},
                                        "body": body, "time": time.monotonic()})
        response = self.owner._next()
        if response is None:
            self._send_json(418, {"error": {"message": "openai_server: no scripted response left",
                                            "type": "invalid_request_error"}})
            return
        if isinstance(response, Error):
            err = {"message": response.message, "type": response.type, "param": None,
                   "code": response.code}
            self._send_json(response.status, {"error": err}, response.headers)
            return
        if isinstance(response, Reply) and response.delay_s:
            time.sleep(response.delay_s)
        model = body.get("model") or self.owner.model
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if isinstance(response, Hang):
            self._hang(response, model)
        elif isinstance(response, Raw):
            self._raw(response, model)
        elif isinstance(response, Cut):
            self._cut(response, model)
        elif body.get("stream"):
            self._stream(response, model, include_usage)
        else:
            self._complete(response, model)

    def _base(self, model: str) -> dict[str, Any]:
        return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "system_fingerprint": "fp_test"}

    def _delta(self, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**self._base(model), "choices": [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def _stream(self, r: Reply, model: str, include_usage: bool) -> None:
        self._start_stream()
        self._event(self._delta(model, {"role": "assistant", "content": ""}))
        for piece in _pieces(r.text, r.chunk_size):
            time.sleep(r.chunk_delay_s)
            self._event(self._delta(model, {"content": piece}))
        for index, (call_id, name, arguments) in enumerate(r.tool_calls):
            self._event(self._delta(model, {"tool_calls": [{
                "index": index, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}))
            for piece in _pieces(arguments, r.args_chunk_size):
                self._event(self._delta(model, {"tool_calls": [{
                    "index": index, "function": {"arguments": piece}}]}))
        finish = r.finish_reason or ("tool_calls" if r.tool_calls else "stop")
        self._event(self._delta(model, {}, finish))
        if include_usage and r.usage is not None:
            p, c = r.usage
            self._event({**self._base(model), "choices": [], "usage": {
                "prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}})
        self._event("[DONE]")
        self._chunk(b"")  # the terminating zero-length chunk

    def _cut(self, r: Cut, model: str) -> None:
        self._start_stream(close=True)
        self._event(self._delta(model, {"role": "assistant", "content": ""}))
        for piece in _pieces(r.text, r.chunk_size)[: r.after_chunks]:
            self._event(self._delta(model, {"content": piece}))
        if r.error_event is not None:
            self._event({"error": {"message": r.error_event, "type": "server_error",
                                   "param": None, "code": None}})
        if r.clean or r.error_event is not None:
            self._chunk(b"")
        self.close_connection = True  # drop the socket when the handler returns

    def _hang(self, r: Hang, model: str) -> None:
        if r.after_chunks:
            self._start_stream(close=True)
            self._event(self._delta(model, {"role": "assistant", "content": ""}))
            for piece in _pieces(r.text, r.chunk_size)[: r.after_chunks]:
                self._event(self._delta(model, {"content": piece}))
        self.owner._stopping.wait(r.seconds)
        self.close_connection = True

    def _raw(self, r: Raw, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", r.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        if r.text:
            self._event(self._delta(model, {"role": "assistant", "content": ""}))
            for piece in _pieces(r.text, r.chunk_size):
                self._event(self._delta(model, {"content": piece}))
        if r.body:
            self._chunk(r.body)
        self._chunk(b"")
        self.close_connection = True

    def _complete(self, r: Reply, model: str) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": r.text or None}
        if r.tool_calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in r.tool_calls]
        obj: dict[str, Any] = {
            **self._base(model), "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": r.finish_reason or ("tool_calls" if r.tool_calls else "stop")}],
        }
        if r.usage is not None:
            p, c = r.usage
            obj["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        self._send_json(200, obj)
