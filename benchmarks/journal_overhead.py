"""What the run journal costs per turn: the overhead.py workload (instant ScriptedModel, add(a, b);
a 2-turn and a 10-turn ReAct run, per added turn = (10-turn - 2-turn) / 8) with the journal off,
on with fsync (``journal=PATH``, the default: SQLite WAL, each tool start fsynced before the tool
runs - one fsync a turn - the other records committed without), and batched
(``journal_fsync=False``: no fsync of its own, durable against a killed process, synced at WAL
checkpoints). A turn writes three records (the model's reply, the tool's start and its result),
each committed before the run goes on. Modes alternate in rounds in one process so the machine's load falls on all alike;
the ratios are the result. The journal lives on the disk ``--dir`` names (default: a temporary
folder in the working directory, not /tmp, which may be memory).

    python benchmarks/journal_overhead.py [--runs 200] [--rounds 5] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from overhead import bench_with  # the same workload: one definition (benchmarks/ is on sys.path)
from tao.runs import Journal


def measure(journal: Journal | None, runs: int) -> tuple[float, float]:
    """Median 2-turn and 10-turn run, in ms."""
    t2 = statistics.median(asyncio.run(bench_with(2, runs, journal))) * 1000
    t10 = statistics.median(asyncio.run(bench_with(10, runs, journal))) * 1000
    return t2, t10


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir or Path.cwd(), prefix="journal-bench-") as d:
        modes = {"off": None,
                 "journal, fsync at each tool start": Journal(Path(d) / "full.db", fsync=True).check(),
                 "journal, batched (no fsync per record)": Journal(Path(d) / "batch.db",
                                                                   fsync=False).check()}
        for journal in modes.values():
            measure(journal, 20)  # warm up: schemas, the SQLite files
        results: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for mode, journal in modes.items():
                results[mode].append(measure(journal, args.runs))
        for journal in modes.values():
            if journal is not None:
                journal.close()

    def med(mode: str) -> tuple[float, float, float]:
        t2 = statistics.median(r[0] for r in results[mode])
        t10 = statistics.median(r[1] for r in results[mode])
        return t2, t10, (t10 - t2) / 8

    base = med("off")
    print(f"{'mode':<42} {'2-turn ms':>10} {'10-turn ms':>11} {'per turn ms':>12} {'x off':>7}")
    for mode in modes:
        t2, t10, turn = med(mode)
        print(f"{mode:<42} {t2:>10.3f} {t10:>11.3f} {turn:>12.3f} {turn / base[2]:>7.2f}")


if __name__ == "__main__":
    main()
