"""Does a second ``tao run`` process evaluate the fixed prompt prefix again? (issue 9, point 6)

    flock /tmp/tao-model.lock python benchmarks/local_prefix_cache.py [--warm 3] [--model local]
        [--agent react] [--task "..."]

Runs ``tao run TASK`` (default: the seed question about 小明, agent react) in fresh processes:
once with ``TAO_KV_CACHE=0``, once cold with an empty cache directory (a temporary one, so the
user's cache is untouched), then ``--warm`` times with the file the cold run wrote. Per process:
wall time of the whole subprocess (interpreter start to exit), the model load, prompt tokens
llama.cpp evaluated and their seconds, tokens decoded, and two generation speeds - llama.cpp's
decode-only rate, and the reply rate (from each reply's first token to its end, so sampling
under the grammar is in it). ideal = load + decoded tokens / reply rate: what the process could
take if no prompt were evaluated and nothing else cost time; ratio = wall / ideal (target for the
warm rows: <= 1.5). The ratio against the decode-only rate is shown too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"

# ``tao run`` itself (tao.cli.main), and on the way out llama.cpp's counters into a file
RUNNER = r"""
import json, os, sys
from tao.cli import main
sys.argv = ["tao", *sys.argv[1:]]
try:
    main()
finally:
    from tao.models import local_process  # the model's worker: its llama.cpp counters
    with open(os.environ["TAO_BENCH_STATS"], "w") as f:
        json.dump([w.call("stats") for w in local_process._WORKERS.values() if w.proc], f)
"""


def one(args: argparse.Namespace, env: dict[str, str], work: Path, name: str) -> dict:
    stats_path, trace = work / f"{name}.stats.json", work / f"{name}.trace.jsonl"
    cmd = [sys.executable, "-c", RUNNER, "run", args.task, "--agent", args.agent,
           "--trace", str(trace), "--quiet"]
    if args.model:
        cmd += ["--model", args.model]
    start = time.perf_counter()
    done = subprocess.run(cmd, env={**env, "TAO_BENCH_STATS": str(stats_path)},
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"{name}: tao run exited {done.returncode}\n{done.stderr[-2000:]}")
    (stats,) = json.loads(stats_path.read_text())
    answer = ""
    for line in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("type") == "final_answer":
            answer = event.get("text", "")
    return {"name": name, "wall": wall, "answer": answer, **stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=int, default=3, help="warm processes after the cold one")
    ap.add_argument("--model", default="", help="tao run --model (default: tao run's own)")
    ap.add_argument("--agent", default="react")
    ap.add_argument("--task", default=XIAOMING)
    args = ap.parse_args()

    rows = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tao-kv-bench-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "TAO_KV_CACHE"}
        env["TAO_KV_CACHE_DIR"] = str(work / "kv")
        rows.append(one(args, {**env, "TAO_KV_CACHE": "0"}, work, "cache off"))
        rows.append(one(args, env, work, "cold (no file)"))
        sizes = [f.stat().st_size for f in (work / "kv").glob("*.kv")]
        for i in range(args.warm):
            rows.append(one(args, env, work, f"warm {i + 1}"))

    print(f"tao run {args.task!r} --agent {args.agent}" + (f" --model {args.model}" if args.model else ""))
    print(f"cache file: {', '.join(f'{n / 1e6:.1f} MB' for n in sizes) or 'none'}; "
          f"load average (1 min) before: {load_before:.2f}, after: {os.getloadavg()[0]:.2f}\n")
    print("| process | wall s | load s | prompt tokens | prompt s | decoded tokens | decode tok/s "
          "| reply tok/s | ideal s | ratio | ratio (decode rate) | answer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        decode_rate = r["decoded_tokens"] / r["decode_s"] if r["decode_s"] else 0.0
        reply_rate = r["decoded_tokens"] / r["reply_s"] if r["reply_s"] else 0.0
        ideal = r["load_s"] + (r["decoded_tokens"] / reply_rate if reply_rate else 0.0)
        ideal_decode = r["load_s"] + r["decode_s"]
        print(f"| {r['name']} | {r['wall']:.2f} | {r['load_s']:.2f} | {r['prompt_tokens']} | "
              f"{r['prompt_s']:.2f} | {r['decoded_tokens']} | {decode_rate:.1f} | {reply_rate:.1f} | "
              f"{ideal:.2f} | {r['wall'] / ideal:.2f} | {r['wall'] / ideal_decode:.2f} | "
              f"{r['answer'][:30]} |")


if __name__ == "__main__":
    main()
