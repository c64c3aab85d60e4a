"""OpenTelemetry for the whole process: ``tao.instrument()`` (or ``TAO_TRACING=1``).

Once on, every agent run gets an ``OtelSink`` (``tao.sinks.otel``) reading its event stream, and
the model door (``guard.run.Run.wrap``) records each model call's times and token usage for it.
Spans go to the *global* tracer provider. When the application set none, tao sets one up from
the standard variables - ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
(or ``OTEL_TRACES_EXPORTER=otlp|console``), ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``
... - and with none of them set, spans are made and dropped: nothing leaves the machine unless
the user says where to send it (openai-agents sends traces to OpenAI by default; we do not).

This module imports no OpenTelemetry at import time (``import tao`` stays cheap); the API loads
with the first traced run, the SDK and the exporter only when tao has to build the provider.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

_ON = False
_PROVIDER: Any = None  # the provider tao built, when it built one
#: the provider ``instrument(provider)`` was given: tao's spans go to it even when the global one
#: was set before by someone else (OpenTelemetry sets the global provider once per process and
#: ignores later calls with a warning; a library's call must not swallow the app's spans)
_GIVEN: Any = None

#: the sink of the outermost traced run in this context: what a sub-agent started by a tool
#: (``AgentTool``), whose events do not pass through its parent's stream, reports to
SINK: ContextVar[Any] = ContextVar("tao_otel_sink", default=None)

#: ``gen_ai.provider.name`` by model class: an OpenAI-compatible server is "openai" unless known
PROVIDERS = {"OpenAIModel": "openai", "LocalModel": "llama_cpp", "ScriptedModel": "tao.scripted"}


def instrument(tracer_provider: Any = None) -> Any:
    """Trace every agent run of this process from now on; returns the tracer provider used.

    ``tracer_provider``: tao's spans go to this one (made the global provider too when none is
    set yet: OpenTelemetry takes the global once per process). Without it, the global
    provider is used when the application set one; else tao builds one from the ``OTEL_*``
    variables, which exports only where they point. Calling it again changes nothing."""
    global _ON, _PROVIDER, _GIVEN
    from opentelemetry import trace

    if tracer_provider is not None:
        _GIVEN = tracer_provider
        if trace.get_tracer_provider() is not tracer_provider and _is_default(
                trace.get_tracer_provider()):
            trace.set_tracer_provider(tracer_provider)
        _ON = True
        return tracer_provider
    elif _PROVIDER is None and _is_default(trace.get_tracer_provider()):
        _PROVIDER = _from_env()
        if _PROVIDER is not None:
            trace.set_tracer_provider(_PROVIDER)
    _ON = True
    return trace.get_tracer_provider()


def uninstrument() -> None:
    """Stop tracing new runs (the provider stays as it is)."""
    global _ON
    _ON = False


def enabled() -> bool:
    """Whether runs are traced: after ``instrument()``, or when ``TAO_TRACING=1`` (which
    instruments on the first run) - and some tracer provider is set, for with none (no
    exporter configured) a span would go nowhere, so none is made: tracing on costs nothing
    until there is somewhere to send it."""
    if not _ON:
        if os.environ.get("TAO_TRACING", "").strip().lower() not in ("1", "true", "yes", "on"):
            return False
        instrument()
    from opentelemetry import trace

    return _GIVEN is not None or not _is_default(trace.get_tracer_provider())


def shutdown() -> None:
    """Flush and stop the provider tao built (the CLI calls it before it exits, so a short run's
    spans are sent, not lost in the batch queue)."""
    if _PROVIDER is not None:
        _PROVIDER.shutdown()


def _is_default(provider: Any) -> bool:
    from opentelemetry import trace

    return isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _from_env() -> Any:
    """A provider exporting where the ``OTEL_*`` variables say, or None when they name no
    exporter (the API's no-op tracer then: spans cost next to nothing and go nowhere)."""
    env = os.environ
    exporters = [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if not exporters and (env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                          or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        exporters = ["otlp"]
    exporters = [e for e in exporters if e != "none"]
    if not exporters:
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as e:
        raise RuntimeError("OTEL_* names an exporter but the OpenTelemetry SDK is not installed: "
                           "pip install 'tao[otel]'") from e
    resource = Resource.create({} if env.get("OTEL_SERVICE_NAME") else {"service.name": "tao"})
    provider = TracerProvider(resource=resource)
    for name in exporters:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                               env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
            if protocol.startswith("grpc"):
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: tao knows otlp, console and none")
    return provider


# -- the model door ------------------------------------------------------------------------------

def traced_model(model: Any, run_id: str) -> Any:
    """``model`` with each call's start, end, response model and usage recorded for run
    ``run_id``'s sink (``guard.run.Run.wrap`` applies it to every agent's model)."""
    from .models.base import ModelResponse
    from .models.wrapped import WrappedModel
    from .sinks.otel import CALLS

    class Traced(WrappedModel):
        async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
            start = time.time_ns()
            async with self.chunks(messages, **kwargs) as chunks:
                async for chunk in chunks:
                    if type(chunk) is ModelResponse:
                        u = chunk.usage
                        CALLS.setdefault(run_id, []).append(
                            (start, time.time_ns(), model.name, provider,
                             u.prompt_tokens if u else 0, u.completion_tokens if u else 0))
                    yield chunk

    traced = Traced(model)
    provider = PROVIDERS.get(type(traced.base).__name__, "tao")
    return traced


# -- the run door --------------------------------------------------------------------------------

async def traced(stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A run's event stream, read by an ``OtelSink`` as it passes. The outermost traced run of
    a context owns the sink; runs nested in it (plan steps, agents used as tools) are traced
    by that sink, from the ``Nested`` events, ``AgentTool``'s report or (an agent a tool
    function runs itself) what it hands the sink directly. ``Agent.stream`` applies it to
    every run while tracing is on."""
    outer = SINK.get()
    if outer is not None:  # a run inside a traced one: its sink sees to it
        async for event in stream:
            outer.direct(event)
            yield event
        return
    from .sinks.otel import OtelSink

    sink = OtelSink(_GIVEN.get_tracer("tao") if _GIVEN is not None else None)
    SINK.set(sink)
    try:
        async for event in stream:
            sink(event)
            yield event
    finally:
        SINK.set(None)
        sink.close()
