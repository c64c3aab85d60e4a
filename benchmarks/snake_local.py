"""Seed 002's snake demo on the embedded model, judged in a real browser, N times.

    flock /tmp/tao-model.lock python benchmarks/snake_local.py [--runs 5] [--model local]
        [--max-tokens N] [--n-ctx N] [--temperature 0] [--max-turns 15] [--keep DIR] [--json FILE]

Each run is what ``tao code TASK --model SPEC`` runs: the model ``tao.cli.code.for_coding`` gives
(the embedded model with room for a whole file a reply: 2048 tokens, 8192 of context) and the
agent ``tao.cli.code.build_coder`` builds (ReAct, text protocol, on a ``Workspace`` with
run_command in the sandbox), in a fresh folder; then ``snake_check.check_isolated`` on that folder
(headless Chromium: no JavaScript errors, a canvas or grid, an arrow key changes the game). One
table row per run: the verdict, the write_file turns (``--json`` lists their paths), whether the
run ended in Finish, turns, tokens (prompt + completion), seconds of the agent run, the checker's
reason.

Decoding: greedy by default, as ``tao code`` decodes - every run is then the same run (llama.cpp
on the CPU is deterministic), so N greedy runs measure the seconds, not the odds. With
``--temperature``, run i samples with seed i: N different draws, each replayable alone
(``--first-seed``); llama-cpp-python's sampler then runs the grammar over the whole vocabulary
each token, which is far slower than greedy decoding.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import snake_check  # noqa: E402 - beside this file

TASK = ("使用 HTML + CSS + JS 生成一个贪吃蛇小游戏，代码分别放在 index.html、style.css、game.js "
        "三个文件中，要求能用方向键控制，吃到食物会变长。")
FILES = ("index.html", "style.css", "game.js")


@dataclass
class Run:
    """One agent run and its verdict."""

    seed: int
    status: str = ""
    finished: bool = False
    turns: int = 0
    write_turns: int = 0  # turns whose action was write_file
    written: list[str] = field(default_factory=list)  # paths write_file wrote, in order
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    files: dict[str, int] = field(default_factory=dict)  # name -> size in the workspace at the end
    check: snake_check.Check | None = None
    answer: str | None = None
    error: str | None = None

    @property
    def three_files(self) -> bool:
        return all(self.files.get(f) for f in FILES)


def model_for(spec: str, *, max_tokens: int | None = None, n_ctx: int | None = None,
              temperature: float = 0.0):
    """The model ``tao code --model SPEC`` runs (``tao.cli.code.for_coding``: room for a whole
    file a reply), with any limit given here in place of tao code's."""
    from tao.cli.code import for_coding
    from tao.models.resolve import resolve_model

    model = for_coding(resolve_model(spec))
    if max_tokens is not None:
        model.max_tokens = max_tokens
    if n_ctx is not None:
        model.n_ctx = n_ctx
    model.temperature = temperature
    return model


async def _agent_run(agent, task: str, run: Run, log) -> None:
    from tao.events import Action, FinalAnswer, Observation, RunFinished, TokenDelta, TurnStarted

    async for e in agent.stream(task):
        if isinstance(e, TokenDelta):
            log.write(e.text)
        elif isinstance(e, TurnStarted):
            log.write(f"\n\n===== turn {e.turn} =====\n")
        elif isinstance(e, Action) and e.call.name == "write_file":
            run.write_turns += 1
            run.written.append(str(e.call.arguments.get("path")))
        elif isinstance(e, Observation):
            log.write(f"\n----- observation ({'error' if e.is_error else 'ok'}) -----\n{e.content}\n")
        elif isinstance(e, FinalAnswer):
            run.finished = True
        elif isinstance(e, RunFinished):
            r = e.result
            run.status, run.turns, run.answer, run.error = r.status, r.turns, r.answer, r.error
            run.prompt_tokens, run.completion_tokens = r.usage.prompt_tokens, r.usage.completion_tokens
        log.flush()


def one_run(model, seed: int, folder: Path, max_turns: int, check_timeout_s: float) -> Run:
    """The agent in ``folder`` (fresh), then the browser check; the run's stream goes to
    ``folder/../<name>.log``."""
    from tao.cli.code import build_coder
    from tao.lang import detect_language
    from tao.workspace import Workspace

    run = Run(seed)
    if getattr(model, "temperature", 0) > 0:  # a LocalModel sampling: this run's own draw
        model.set_seed(seed)
    ws = Workspace(folder, language=detect_language(TASK), check_pages=True)  # as tao code's
    agent = build_coder(model, ws, max_turns)
    log_path = folder.parent / f"{folder.name}.log"
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as log:
        async def go() -> None:
            try:
                await _agent_run(agent, TASK, run, log)
            finally:
                await ws.close()

        asyncio.run(go())
    run.seconds = time.perf_counter() - start
    run.files = {p.relative_to(folder).as_posix(): p.stat().st_size
                 for p in sorted(folder.rglob("*")) if p.is_file()}
    try:
        run.check = snake_check.check_isolated(folder, timeout_s=check_timeout_s,
                                               screenshot=folder.parent / f"{folder.name}.png")
    except snake_check.BrowserMissing as e:  # the checker itself broke: say so in the row
        run.check = snake_check.Check(False, f"checker failed: {e}")
    return run


def row(i: int, r: Run) -> str:
    files = ", ".join(f"{k} {v}" for k, v in r.files.items()) or "none"
    reason = (r.check.reason if r.check else "not checked").replace("|", "/")
    grows = {True: "yes", False: "no"}.get(r.check.grows if r.check else None, "?")
    return (f"| {i} | {'yes' if r.check and r.check.ok else 'no'} | {grows} | {r.write_turns} | "
            f"{'yes' if r.finished else 'no'} | {r.turns} | {r.prompt_tokens}+{r.completion_tokens} | "
            f"{r.seconds:.0f} | {files} | {reason[:160]} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--model", default="local", choices=("local", "local-0.5b", "local-1.5b"),
                    help="as tao code --model (local: the default embedded model, the 1.5B)")
    ap.add_argument("--max-tokens", type=int, help="per reply (default: tao code's, 2048)")
    ap.add_argument("--n-ctx", type=int, help="context (default: tao code's, 8192)")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy, as tao code decodes")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--max-turns", type=int, default=15, help="tao code's default")
    ap.add_argument("--budget", type=float, default=0, help="start no run after this many seconds (0: none)")
    ap.add_argument("--keep", help="keep each run's folder, stream log and screenshot here")
    ap.add_argument("--json", help="append one JSON line per run to this file")
    args = ap.parse_args(argv)
    model = model_for(args.model, max_tokens=args.max_tokens, n_ctx=args.n_ctx,
                      temperature=args.temperature)
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="snake-local-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"model {model.name}, max_tokens {model.max_tokens}, n_ctx {model.n_ctx}, temperature "
          f"{args.temperature}, max_turns {args.max_turns}; runs in {out}", flush=True)
    print("| run | ok | grows | write_file turns | Finish | turns | tokens (prompt+completion) | seconds | "
          "files (bytes) | checker |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    runs: list[Run] = []
    began = time.perf_counter()
    for i in range(1, args.runs + 1):
        if args.budget and time.perf_counter() - began > args.budget:
            print(f"(budget of {args.budget:.0f} s spent: {len(runs)} of {args.runs} runs)")
            break
        folder = out / f"run{i}"
        if folder.exists():
            shutil.rmtree(folder)
        r = one_run(model, args.first_seed + i - 1, folder, args.max_turns, 120)
        runs.append(r)
        print(row(i, r), flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps({"run": i, "seed": r.seed, "ok": bool(r.check and r.check.ok),
                                    "write_turns": r.write_turns, "written": r.written,
                                    "finished": r.finished, "status": r.status, "turns": r.turns,
                                    "prompt_tokens": r.prompt_tokens,
                                    "completion_tokens": r.completion_tokens,
                                    "seconds": round(r.seconds, 1), "files": r.files,
                                    "reason": r.check.reason if r.check else None,
                                    "grows": r.check.grows if r.check else None,
                                    "growth": r.check.growth if r.check else None,
                                    "error": r.error}, ensure_ascii=False) + "\n")
    ok = sum(bool(r.check and r.check.ok) for r in runs)
    grows = sum(bool(r.check and r.check.ok and r.check.grows) for r in runs)
    three = sum(r.three_files and r.write_turns >= 3 and r.finished for r in runs)
    print(f"\nworks in the browser: {ok}/{len(runs)} (and the snake grows on eating: {grows}); "
          f"three files in >= 3 write_file turns and "
          f"Finish: {three}/{len(runs)}; mean {sum(r.seconds for r in runs) / max(len(runs), 1):.0f} s a run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
