"""The embedded model's speed by weight layout, and what its worker process costs (issue 23).

Part 1 - layouts. Each candidate loads the model in a fresh process (``--one LAYOUT``), evaluates a
prompt of about 600 tokens as one batch (no saved prefix) and decodes 64 tokens greedily, without
a grammar, ``--rounds`` times; llama.cpp's own counters give prompt-eval and decode tokens per
second. Candidates:

- ``default``: llama.cpp's choice - the extra buffer types (AMX where built in and the CPU has
  it, else CPU_REPACK);
- ``amx-denied``: tao's worker on an AMX CPU: the seccomp filter refuses the AMX permission, so
  CPU_REPACK is all that is left (on a CPU without AMX the filter changes nothing);
- ``no-extra-bufts``: ``use_extra_bufts = false``, tao's choice in the caller's own process.

Part 2 - the worker. The same agent run (ReAct, the seed question, the prefix cache warm)
through ``LocalModel`` in this process (``TAO_LOCAL_WORKER=0``) and through its worker,
alternated in rounds: seconds a run, and the time from the request to the first token and per
token after it. Also the start of a worker (a new process, imports, weights) against a load in
this process.

    python benchmarks/local_layouts.py [--model local] [--rounds 3] [--processes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PROMPT_REPEAT = "The quick brown fox jumps over the lazy dog; 小明有 50 元，买了 3 本书。 "


def one(layout: str, name: str, rounds: int) -> dict:
    """In this (fresh) process: load with ``layout`` and measure."""
    from tao.models import llama_cpu
    from tao.models.gguf_store import ensure_gguf

    if layout == "amx-denied":
        assert llama_cpu.deny_amx(), "the kernel refused the seccomp filter"
    import llama_cpp
    from llama_cpp import Llama

    path = str(ensure_gguf(name))
    start = time.perf_counter()
    with llama_cpu.model_params(llama_cpu.Layout(extra_bufts=layout != "no-extra-bufts")):
        llm = Llama(model_path=path, n_ctx=4096, n_threads=os.cpu_count() or 2, verbose=False,
                    seed=0)
    load_s = time.perf_counter() - start
    prompt = llm.tokenize((PROMPT_REPEAT * 30).encode())[:600]
    pp, tg = [], []
    for _ in range(rounds):
        llm.reset()
        llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
        llm.create_completion(prompt, max_tokens=64, temperature=0.0)
        perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
        pp.append(perf.n_p_eval / (perf.t_p_eval_ms / 1000))
        tg.append(perf.n_eval / (perf.t_eval_ms / 1000))
    return {"layout": layout, "load_s": load_s, "prompt_tps": statistics.median(pp),
            "decode_tps": statistics.median(tg), "n_prompt": len(prompt)}


def layouts(spec: str, rounds: int, processes: int) -> None:
    import llama_cpp

    from tao.models import llama_cpu

    info = llama_cpp.llama_print_system_info().decode()
    print(f"CPU has AMX: {'amx_int8' in llama_cpu.cpu_flags()}; build: {info.strip()}\n")
    found: dict[str, list[dict]] = {"default": [], "amx-denied": [], "no-extra-bufts": []}
    for _ in range(processes):  # candidates alternated, a fresh process each: noise spreads
        for layout in found:
            done = subprocess.run([sys.executable, __file__, "--one", layout, "--model", spec,
                                   "--rounds", str(rounds)], capture_output=True, text=True)
            if done.returncode == 0:
                found[layout].append(json.loads(done.stdout.strip().splitlines()[-1]))
            else:
                found[layout].append({"died": done.returncode})
    print("| layout | load (s) | prompt eval (tok/s) | decode (tok/s) | processes |")
    print("|---|---|---|---|---|")
    for layout, rows in found.items():
        ok = [r for r in rows if "died" not in r]
        if len(ok) < len(rows):
            print(f"| {layout} | died: {[r['died'] for r in rows if 'died' in r]} | | | |")
            continue
        med = {k: statistics.median(r[k] for r in ok) for k in ("load_s", "prompt_tps",
                                                                 "decode_tps")}
        print(f"| {layout} | {med['load_s']:.2f} | {med['prompt_tps']:.1f} | "
              f"{med['decode_tps']:.1f} | {len(ok)} |")


_RUN = """
import json, os, sys, time
from tao.cli import build_agent
from tao.events import TokenDelta
from tao.models.local import LocalModel

start = time.perf_counter()
model = LocalModel(sys.argv[1])
model.warm()
ready_s = time.perf_counter() - start
rows = []
for _ in range(int(sys.argv[2])):
    times = []
    t0 = time.perf_counter()
    result = build_agent("react", model).run(sys.argv[3], sinks=[
        lambda e: times.append(time.perf_counter()) if isinstance(e, TokenDelta) else None])
    rows.append({"run_s": time.perf_counter() - t0, "tokens": len(times),
                 "first_s": times[0] - t0, "answer": result.answer})
print(json.dumps({"ready_s": ready_s, "runs": rows}))
"""


def worker_cost(name: str, rounds: int) -> None:
    task = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
    spec = {"local": "qwen2.5-coder-1.5b", "local-1.5b": "qwen2.5-coder-1.5b",
            "local-0.5b": "qwen2.5-coder-0.5b"}[name]
    found: dict[str, list] = {"in-process": [], "worker": []}
    ready: dict[str, list] = {"in-process": [], "worker": []}
    for _ in range(rounds):
        for mode in found:
            env = {**os.environ, "TAO_LOCAL_WORKER": "0" if mode == "in-process" else "1"}
            done = subprocess.run([sys.executable, "-c", _RUN, spec, "3", task], env=env,
                                  capture_output=True, text=True, check=True)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            ready[mode].append(r["ready_s"])
            found[mode] += r["runs"][1:]  # the first run of a process fills the prefix cache
    print("\n| where the weights run | model ready (s) | run (s) | tokens streamed | "
          "run time / tokens |")
    print("|---|---|---|---|---|")
    for mode, runs in found.items():
        med = statistics.median(r["run_s"] for r in runs)
        tokens = statistics.median(r["tokens"] for r in runs)
        print(f"| {mode} | {statistics.median(ready[mode]):.2f} | {med:.3f} | {tokens:.0f} | "
              f"{med / tokens * 1000:.2f} ms |")
    answers = {r["answer"] for runs in found.values() for r in runs}
    print(f"\nanswers: {sorted(answers)} (the same tokens either way: one answer expected)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="local", choices=["local", "local-1.5b", "local-0.5b"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--processes", type=int, default=3, help="fresh processes per layout")
    ap.add_argument("--part", choices=["layouts", "worker", "both"], default="both")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    name = {"local": "qwen2.5-coder-1.5b", "local-1.5b": "qwen2.5-coder-1.5b",
            "local-0.5b": "qwen2.5-coder-0.5b"}[args.model]
    if args.one:
        print(json.dumps(one(args.one, name, args.rounds)))
        return
    if args.part in ("layouts", "both"):
        layouts(args.model, args.rounds, args.processes)
    if args.part in ("worker", "both"):
        worker_cost(args.model, args.rounds)


if __name__ == "__main__":
    main()
