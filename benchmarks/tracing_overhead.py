"""What OpenTelemetry tracing costs per turn: the overhead.py workload (instant ScriptedModel,
add(a, b); a 2-turn and a 10-turn ReAct run, per added turn = (10-turn - 2-turn) / 8) with
tracing off, on with no exporter configured (the API's no-op tracer: what ``TAO_TRACING=1`` costs
when no provider is set: no span is made), and on with the SDK (BatchSpanProcessor into an InMemorySpanExporter: span
objects built, queued and handed to an exporter - what a real OTLP export costs in-process, short
of the network). Modes alternate in rounds in one process so that the machine's load falls on
all of them alike; the ratios are the result.

    python benchmarks/tracing_overhead.py [--runs 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import tao
from overhead import bench_with  # the same workload: one definition (benchmarks/ is on sys.path)
from tao import tracing


def measure(on: bool, runs: int) -> tuple[float, float]:
    """Median 2-turn and 10-turn run, in ms."""
    if on:
        tao.instrument()
    else:
        tao.uninstrument()
    t2 = statistics.median(asyncio.run(bench_with(2, runs, None))) * 1000
    t10 = statistics.median(asyncio.run(bench_with(10, runs, None))) * 1000
    return t2, t10


def rounds(modes: dict[str, bool], n: int, runs: int) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    for _ in range(n):
        for mode, on in modes.items():
            out[mode].append(measure(on, runs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    for on in (False, True):
        measure(on, 100)  # warm up: schemas, the OpenTelemetry API
    results = rounds({"off": False, "on, no exporter (no-op tracer)": True}, args.rounds, args.runs)

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 20))  # drop none
    tao.instrument(provider)  # the global provider from now on: the no-op rounds are over
    measure(True, 100)
    sdk = rounds({"off ": False, "on, SDK + batch processor (in-memory exporter)": True},
                 args.rounds, args.runs)
    provider.force_flush()
    results.update(sdk)
    assert tracing._ON and exporter.get_finished_spans(), "the SDK rounds exported no spans"

    def med(mode: str) -> tuple[float, float, float]:
        t2 = statistics.median(r[0] for r in results[mode])
        t10 = statistics.median(r[1] for r in results[mode])
        return t2, t10, (t10 - t2) / 8

    base = {"off": med("off"), "off ": med("off ")}
    print(f"| tracing | 2-turn run (ms) | 10-turn run (ms) | per added turn (ms) | per turn vs off |")
    print("|---|---|---|---|---|")
    for mode in results:
        t2, t10, per = med(mode)
        ref = base["off" if mode in ("off", "on, no exporter (no-op tracer)") else "off "]
        print(f"| {mode.strip()} | {t2:.4f} | {t10:.4f} | {per:.4f} | {per / ref[2]:.2f}x |")
    print(f"\nspans exported in the SDK rounds: {len(exporter.get_finished_spans())}")


if __name__ == "__main__":
    main()
