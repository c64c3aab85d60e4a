"""Running a suite: every (task, agent) pair once, in this process, in worker processes or on Ray.

    ev = Evaluation("calculator", ["react", "codeact"], "local", out="runs/calc", workers=2)
    for record in ev.run():          # one dict per finished task, already written to out/
        ...
    ev.records()                     # everything in out/ for these tasks and agents, in order

Each worker - this process, each of ``workers`` processes (spawned: a fresh interpreter, no
inherited model or threads), or each of ``workers`` Ray actors with ``executor="ray"`` - builds
the model once and runs its share of the tasks one after another. ``model`` is a ``--model``
spec (``resolve_model``) or a picklable callable returning a ``Model`` (tests pass a function
that builds a ``ScriptedModel``).

With ``out``, each record is appended to ``out/results.jsonl`` as it finishes; a new
``Evaluation`` on the same ``out`` skips the pairs found there (a line cut off by a crash is
dropped and its task runs again). ``out/run.json`` names the suite and model so a resume cannot
mix two runs. A user's mistake - a model that cannot load, no sandbox - stops the run
(``EvalAborted``) without recording the task, instead of scoring every task a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import TaoError
from .suites import Outcome, Suite, Task, get_suite

EXECUTORS = ("local", "ray")
#: errors that are the user's setup, not the model's answer (see ``tao run``'s exit status 2)
_SETUP_ERRORS = {"LocalModelError", "ModelConfigError", "SandboxError", "SandboxUnavailable"}


class EvalAborted(TaoError):
    """The evaluation cannot go on (the model does not load, no sandbox works): nothing to score."""


def parse_failures(events: Sequence[Any]) -> int:
    """Replies that needed a corrective observation: a recoverable ``Error`` (text that did not
    parse, an empty reply, an invalid plan) or a native tool call whose arguments were not JSON.
    Counted once per reply (turn), sub-agents' replies included (``Nested``). Not counted: a
    transient model error (``ModelRetry``), nor a well-formed call the tool refused (unknown
    tool, invalid arguments): that is a wrong call, read correctly."""
    from ..events import Action, Error, Nested

    bad = set()
    for event in events:
        where = ""
        if type(event) is Nested:
            where, event = event.step_id, event.event
        if (type(event) is Error and event.recoverable) or (
                type(event) is Action and event.call.parse_error):
            bad.add((where, event.turn))
    return len(bad)


def make_agent(name: str, model: Any, tools: list[Any], max_turns: int, helpers: bool = True) -> Any:
    """``tao.compare.build``'s agent; CodeAct without its arithmetic helpers where the suite's
    own functions are the point (BFCL, HumanEval)."""
    if name == "codeact" and not helpers:
        from ..agents.codeact import CodeActAgent

        return CodeActAgent(model, tools, max_turns=max_turns, helpers=False)
    from ..compare import build

    return build(name, model, tools, max_turns)


def run_task(suite: Suite, agent: str, task: Task, model: Any, max_turns: int = 10) -> dict[str, Any]:
    """One agent on one task, scored: the record ``results.jsonl`` keeps."""
    calls: list[dict[str, Any]] = []
    runner = make_agent(agent, model, suite.tools(task, calls), suite.max_turns or max_turns,
                        suite.helpers)
    events: list[Any] = []
    start = time.perf_counter()
    try:
        result = runner.run(suite.prompt(task, agent), [events.append])
    except TaoError as e:  # raised before the run began (CodeAct: no sandbox backend works)
        raise EvalAborted(f"{type(e).__name__}: {e}") from None
    seconds = time.perf_counter() - start
    if result.error and result.error.split(":", 1)[0] in _SETUP_ERRORS:
        raise EvalAborted(result.error)
    score = suite.score(task, Outcome(result, events, calls))
    return {"task_id": task.id, "agent": agent, "category": task.category,
            "correct": score.correct, "answer": result.answer, "expected": score.expected,
            "detail": score.detail, "status": result.status, "error": result.error,
            "turns": result.turns, "parse_failures": parse_failures(events),
            "tool_calls": result.tool_calls, "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens, "seconds": round(seconds, 4)}


class Worker:
    """One model, one suite, tasks one after another: the unit every executor runs."""

    def __init__(self, suite: str, model: Any, max_turns: int = 10):
        self.suite = get_suite(suite)
        self.tasks = {t.id: t for t in self.suite.tasks()}
        self.model = _build_model(model)
        self.max_turns = max_turns

    def run(self, agent: str, task_id: str) -> dict[str, Any]:
        return run_task(self.suite, agent, self.tasks[task_id], self.model, self.max_turns)


def _build_model(model: Any) -> Any:
    from ..models.base import Model

    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        from ..models.resolve import resolve_model

        return resolve_model(model)
    return model()


_worker: Worker | None = None  # in a worker process: its one Worker


def _init_process(suite: str, model: Any, max_turns: int) -> None:
    global _worker
    _worker = Worker(suite, model, max_turns)


def _run_in_process(agent: str, task_id: str) -> dict[str, Any]:
    assert _worker is not None
    return _worker.run(agent, task_id)


class Evaluation:
    """``agents`` on the first ``limit`` tasks of ``suite`` (see the module docstring).
    ``label`` names the model in ``out/run.json`` (default: the spec, or the model's name)."""

    def __init__(self, suite: str, agents: Sequence[str], model: str | Callable[[], Any] = "auto", *,
                 limit: int | None = None, workers: int = 1, executor: str = "local",
                 out: str | Path | None = None, max_turns: int = 10, label: str | None = None):
        from ..compare import ARCHITECTURE

        self.agents = list(dict.fromkeys(agents))
        for name in self.agents:
            if name not in ARCHITECTURE:
                raise ValueError(f"unknown agent {name!r}; use any of: {', '.join(ARCHITECTURE)}")
        if not self.agents:
            raise ValueError("no agent given")
        if workers < 1 or (limit is not None and limit < 1) or max_turns < 1:
            raise ValueError("--workers, --limit and --max-turns must be at least 1")
        if executor not in EXECUTORS:
            raise ValueError(f"unknown executor {executor!r}; use {' or '.join(EXECUTORS)}")
        self.suite = get_suite(suite)
        self.spec = str(getattr(self.suite, "path", suite))
        self.tasks = self.suite.tasks()[:limit]
        self.model, self.workers, self.executor, self.max_turns = model, workers, executor, max_turns
        if label is None:  # what run.json calls the model: a resume must use the same one
            label = model if isinstance(model, str) else getattr(
                model, "__qualname__", getattr(model, "name", type(model).__name__))
        from .store import Store

        self.store = Store(out, {"suite": self.spec, "model": label})

    @property
    def total(self) -> int:
        return len(self.tasks) * len(self.agents)

    def pending(self) -> list[tuple[str, str]]:
        """(agent, task id) pairs not yet in ``out``, task by task so agents stay side by side."""
        return [(a, t.id) for t in self.tasks for a in self.agents if (a, t.id) not in self.store]

    def records(self) -> list[dict[str, Any]]:
        return [self.store[(a, t.id)] for a in self.agents for t in self.tasks
                if (a, t.id) in self.store]

    def run(self) -> Iterator[dict[str, Any]]:
        """Run what is pending; yield each record once it is stored."""
        pending = self.pending()
        if not pending:
            return
        init = (self.spec, self.model, self.max_turns)
        workers = min(self.workers, len(pending))
        if self.executor == "ray":
            from .ray_pool import ray_records

            records = ray_records(Worker, init, pending, workers)
        elif workers > 1:
            records = self._process_records(init, pending, workers)
        else:
            worker = Worker(*init)
            records = (worker.run(*item) for item in pending)
        for record in records:
            self.store.add(record)
            yield record

    @staticmethod
    def _process_records(init: tuple[Any, ...], pending: list[tuple[str, str]],
                         workers: int) -> Iterator[dict[str, Any]]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"),
                                   initializer=_init_process, initargs=init)
        try:
            futures = [pool.submit(_run_in_process, *item) for item in pending]
            for future in as_completed(futures):
                yield future.result()
        except BrokenProcessPool as e:  # its traceback went to stderr from the worker
            raise EvalAborted(f"a worker process could not start or died ({e})") from None
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
