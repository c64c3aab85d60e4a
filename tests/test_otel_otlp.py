"""``tao run`` with TAO_TRACING=1 and the standard OTEL_EXPORTER_OTLP_ENDPOINT, as a real process,
exporting OTLP/HTTP to a receiver on 127.0.0.1: the spans arrive, named and parented as in the
in-memory tests, with the run's token counts; without an endpoint nothing is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest)

SCRIPTED = Path(__file__).parent / "mcp_servers" / "scripted_tao.py"
SCRIPT = [{"tool": "calculator", "args": {"operation": "multiply", "a": 15, "b": 27}},
          "15 × 27 = 405"]


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces, protobuf, decoded into spans."""

    def __init__(self):
        self.spans, self.requests = [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, self.headers["Content-Type"]))
                req = ExportTraceServiceRequest.FromString(body)
                for rs in req.resource_spans:
                    attrs = {a.key: a.value.string_value for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        outer.spans.extend((attrs, s) for s in ss.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()
                self.wfile.write(b"")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


#: ``python -c MOVED_DEFAULT scripted_tao.py ...``: that tao, with the OTLP/HTTP exporter's
#: built-in endpoint (http://localhost:4318, which a collector of the developer's own may hold)
#: moved to ``$TEST_OTLP_DEFAULT``; an endpoint in the OTEL_* variables still wins, as it does
#: over the real default.
MOVED_DEFAULT = """\
import os, runpy, sys
from opentelemetry.exporter.otlp.proto.http import trace_exporter

built_in = trace_exporter.OTLPSpanExporter.__init__

def moved(self, endpoint=None, *args, **kwargs):
    if endpoint is None and not (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                                 or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        endpoint = os.environ["TEST_OTLP_DEFAULT"] + "/v1/traces"
    built_in(self, endpoint, *args, **kwargs)

trace_exporter.OTLPSpanExporter.__init__ = moved
sys.argv.pop(0)
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def tao_run(tmp_path, env, *flags, default=None):
    """``tao run`` in a process of its own, with ``env`` for the OTEL_* variables; ``default``:
    the URL the exporter's built-in endpoint is moved to (see ``MOVED_DEFAULT``)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TAO_TRACING"))}
    moved = ["-c", MOVED_DEFAULT] if default else []
    env = {**env, "TEST_OTLP_DEFAULT": default} if default else env
    out = subprocess.run([sys.executable, *moved, str(SCRIPTED), str(script), "run",
                          "15 乘以 27 是多少？", "--json", "--no-audit", *flags],
                         capture_output=True, text=True, timeout=120, env={**clean, **env})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("how", ["TAO_TRACING=1", "--otel"])
def test_tao_run_exports_its_spans_over_otlp_http(tmp_path, receiver, how):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "tao-test"}
    result = tao_run(tmp_path, {**env, "TAO_TRACING": "1"} if how == "TAO_TRACING=1" else env,
                     *([how] if how == "--otel" else []))
    assert result["answer"] == "15 × 27 = 405"

    assert receiver.requests and all(r == ("/v1/traces", "application/x-protobuf")
                                     for r in receiver.requests)
    spans = {s.name: s for _, s in receiver.spans}
    assert sorted(s.name for _, s in receiver.spans) == [
        "chat scripted", "chat scripted", "execute_tool calculator", "invoke_agent react"]
    assert {res["service.name"] for res, _ in receiver.spans} == {"tao-test"}
    root = spans["invoke_agent react"]
    assert root.parent_span_id == b""
    assert all(s.parent_span_id == root.span_id for _, s in receiver.spans if s is not root)

    def attr(span, key):
        v = next(a.value for a in span.attributes if a.key == key)
        return v.int_value if v.HasField("int_value") else v.string_value

    chats = [s for _, s in receiver.spans if s.name == "chat scripted"]
    assert sum(attr(c, "gen_ai.usage.input_tokens") for c in chats) \
        == result["usage"]["prompt_tokens"]
    assert sum(attr(c, "gen_ai.usage.output_tokens") for c in chats) \
        == result["usage"]["completion_tokens"]
    assert attr(spans["execute_tool calculator"], "gen_ai.tool.name") == "calculator"


def test_without_an_otlp_endpoint_nothing_is_sent(tmp_path, receiver):
    """Tracing on with no exporter named sends nothing where an OTLP exporter sends by default,
    and neither does an endpoint with tracing off. The receiver, on a free port, stands in for
    that default: port 4318 itself may be taken, and a test that skips then proves nothing."""
    tao_run(tmp_path, {"TAO_TRACING": "1"}, default=receiver.url)
    tao_run(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}, default=receiver.url)
    assert receiver.requests == []
    tao_run(tmp_path, {"TAO_TRACING": "1", "OTEL_TRACES_EXPORTER": "otlp"},  # said: sent
            default=receiver.url)
    assert [p for p, _ in receiver.requests] == ["/v1/traces"]
