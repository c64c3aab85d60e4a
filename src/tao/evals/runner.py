"""Running a suite: every (task, agent) pair once, in this process, in worker processes or on Ray.

    ev = Evaluation("calculator", ["react", "codeact"], "local", out="runs/calc", workers=2)
    for record in ev.run():          # one dict per finished task, already written to out/
        ...
    ev.records()                     # everything in out/ for these tasks and agents, in order

Each worker - this process, each of ``workers`` processes (spawned: a fresh interpreter, no
inherited model or threads), or each of ``workers`` Ray actors with ``executor="ray"`` - builds
the model once and runs ``concurrency`` tasks at once (default 1) as tasks of one event loop,
each with an agent of its own: an endpoint model spends a task's time waiting on the network,
so 100 tasks in flight take about as long as one. ``workers`` x ``concurrency`` tasks are in
flight in all; each worker takes the next pending task as one of its slots frees up. A model
that runs in this process and answers one call at a time - the embedded ``LocalModel`` (one
llama.cpp context), or a model whose class sets ``concurrent = False`` - runs its worker's
tasks one after another whatever ``concurrency`` says: interleaved, they would gain nothing on
one context and would evict each other's cached prompt; ``workers`` gives parallel copies.
``model`` is a ``--model`` spec (``resolve_model``), a ``Model`` (shared by the tasks in this
process), or a picklable callable returning a ``Model`` (tests pass a function that builds a
``ScriptedModel``).

With ``out``, each record is appended to ``out/results.jsonl`` as its task finishes, by this
process alone (worker processes send their records back), and the run's messages to
``out/transcripts.jsonl`` - a failed task can be read afterwards, not only counted; a new
``Evaluation`` on the same ``out`` skips the pairs found there (a line cut off by a crash is
dropped and its task runs again). A Ctrl-C keeps every record that finished; tasks in flight are
cancelled and run again on resume. ``out/run.json`` names the suite and model so a resume cannot
mix two runs. An agent may be a ``[agents.NAME]`` of tao.toml (``Team``): that agent and its
handoffs, built per task with the suite's tools, as ``tao run --agent NAME`` builds it.
A user's mistake - a model that cannot load, no sandbox - stops the run
(``EvalAborted``) without recording the task, instead of scoring every task a failure."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    tool, invalid arguments): that is a wrong call, read correctly. The runs inside one
    (``tao.Vote``'s, each numbering its turns from 1) count apart."""
    from ..events import Action, Error, Nested, RunStarted

    bad, run = set(), 0
    for event in events:
        where = ""
        if type(event) is RunStarted:
            run += 1
        if type(event) is Nested:
            where, event = event.step_id, event.event
        if (type(event) is Error and event.recoverable) or (
                type(event) is Action and event.call.parse_error):
            bad.add((run, where, event.turn))
    return len(bad)


@dataclass(frozen=True, slots=True)
class Team:
    """tao.toml's named agents (``Config.agents``: ``tao.factory.team.AgentTable``) and the
    folder their files are read from - plain data, so it travels to worker processes and Ray
    actors, where each task's chain is built with that task's tools."""

    tables: Mapping[str, Any] = field(default_factory=dict)
    base: Path = Path(".")

    def architecture(self, name: str) -> str:
        """What the suite words its prompt for: the named agent's own architecture."""
        table = self.tables.get(name)
        return str(table.agent) if table is not None else name

    def spec(self, name: str, tools: list[Any], max_turns: int, helpers: bool) -> Any:
        """Agent ``name`` and its handoffs, every one with the suite's ``tools`` where its table
        names none, and CodeAct's helpers only where the suite wants them."""
        from ..factory.team import chain_spec

        def fitted(spec: Any) -> Any:
            return replace(spec, helpers=helpers, handoffs=[
                h if isinstance(h, str) else fitted(h) for h in spec.handoffs])

        return fitted(chain_spec(self.tables, name, tools=tools, guard={}, max_turns=max_turns,
                                 base=self.base))


def make_agent(name: str, model: Any, tools: list[Any], max_turns: int, helpers: bool = True,
               votes: int = 1, team: Team | None = None) -> Any:
    """The agent ``tao.factory`` builds; CodeAct without its arithmetic helpers where the
    suite's own functions are the point (BFCL, HumanEval); with ``votes`` > 1 inside
    ``tao.Vote``. A ``team``'s named agent is its chain (an agent of it that names a model of
    its own gets it from ``resolve_model``)."""
    from ..factory import AgentSpec, build_agent

    if team is not None and name in team.tables:
        from ..models.resolve import resolve_model

        spec = team.spec(name, tools, max_turns, helpers)
        return build_agent(replace(spec, votes=votes), model, resolve_model)
    return build_agent(AgentSpec(name, max_turns, tools, votes=votes, helpers=helpers), model)


async def arun_task(suite: Suite, agent: str, task: Task, model: Any,
                    max_turns: int = 10, votes: int = 1,
                    team: Team | None = None) -> dict[str, Any]:
    """One agent on one task, scored: the record ``results.jsonl`` keeps. The agent and the
    task's tools are built here, so tasks running at once share nothing but the model."""
    calls: list[dict[str, Any]] = []
    runner = make_agent(agent, model, suite.tools(task, calls), suite.max_turns or max_turns,
                        suite.helpers, votes, team)
    asked = suite.prompt(task, team.architecture(agent) if team is not None else agent)
    events: list[Any] = []
    start = time.perf_counter()
    try:
        result = await runner.arun(asked, [events.append])
    except TaoError as e:  # raised before the run began (CodeAct: no sandbox backend works)
        raise EvalAborted(f"{type(e).__name__}: {e}") from None
    seconds = time.perf_counter() - start
    if result.error and result.error.split(":", 1)[0] in _SETUP_ERRORS:
        raise EvalAborted(result.error)
    outcome = Outcome(result, events, calls)
    if suite.score_blocks:  # HumanEval's tests: on a thread, not holding up the other tasks
        import asyncio

        score = await asyncio.to_thread(suite.score, task, outcome)
    else:  # a number compared, BFCL's checker: a thread hop would cost more than the score
        score = suite.score(task, outcome)
    return {"task_id": task.id, "agent": agent, "category": task.category,
            "correct": score.correct, "answer": result.answer, "expected": score.expected,
            "detail": score.detail, "status": result.status, "error": result.error,
            "turns": result.turns, "parse_failures": parse_failures(events),
            "tool_calls": result.tool_calls, "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens, "seconds": round(seconds, 4),
            # what the model read and wrote: ``Store`` files it apart (``transcripts.jsonl``)
            "messages": [m.to_dict() for m in result.messages]}


def run_task(suite: Suite, agent: str, task: Task, model: Any, max_turns: int = 10,
             votes: int = 1, team: Team | None = None) -> dict[str, Any]:
    """``arun_task`` for synchronous code; inside a running event loop (Jupyter) on a thread."""
    import asyncio

    coro = arun_task(suite, agent, task, model, max_turns, votes, team)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def one_at_a_time(model: Any) -> bool:
    """Whether ``model`` must answer one call at a time: the embedded ``LocalModel`` (one
    llama.cpp context in this process, not reentrant), or a model whose class sets
    ``concurrent = False``. Such a model's tasks run one after another whatever
    ``concurrency`` says (see the module docstring)."""
    if getattr(model, "concurrent", True) is False:
        return True
    local = sys.modules.get("tao.models.local")  # a LocalModel exists only if it was imported
    return local is not None and isinstance(model, local.LocalModel)


class Worker:
    """One model, one suite: the unit every executor runs. ``run`` is one task (a Ray actor
    gets several calls at once on its event loop); ``run_many`` keeps ``concurrency`` going."""

    def __init__(self, suite: str, model: Any, max_turns: int = 10, votes: int = 1,
                 team: Team | None = None):
        self.suite = get_suite(suite)
        self.votes, self.team = votes, team
        self.tasks = {t.id: t for t in self.suite.tasks()}
        self.model = _build_model(model)
        self.max_turns = max_turns
        self.serial = one_at_a_time(self.model)
        self._lock: tuple[Any, Any] | None = None  # (event loop, asyncio.Lock) for a serial model

    async def run(self, agent: str, task_id: str) -> dict[str, Any]:
        if not self.serial:
            return await arun_task(self.suite, agent, self.tasks[task_id], self.model,
                                   self.max_turns, self.votes, self.team)
        import asyncio

        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            return await arun_task(self.suite, agent, self.tasks[task_id], self.model,
                                   self.max_turns, self.votes, self.team)

    def run_many(self, items: Iterable[tuple[str, str]], concurrency: int = 1) -> Iterator[dict[str, Any]]:
        """The records of ``items`` ((agent, task id) pairs) as their tasks finish, up to
        ``concurrency`` at once on one event loop, one at a time for a serial model
        (``pool.run_window``: on an error or Ctrl-C what finished is handed on first)."""
        from .pool import run_window

        return run_window(self.run, items, 1 if self.serial else concurrency)


def _build_model(model: Any) -> Any:
    from ..models.base import Model

    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        from ..models.resolve import resolve_model

        return resolve_model(model)
    return model()


class Evaluation:
    """``agents`` on ``limit`` tasks of ``suite`` after the first ``offset``, ``concurrency`` at
    once in each of ``workers`` (see the module docstring). ``label`` names the model in
    ``out/run.json`` (default: the spec, or the model's name); ``team``: tao.toml's named
    agents, which ``agents`` may name besides the architectures."""

    def __init__(self, suite: str, agents: Sequence[str], model: str | Callable[[], Any] = "auto", *,
                 limit: int | None = None, offset: int = 0, workers: int = 1,
                 executor: str = "local",
                 out: str | Path | None = None, max_turns: int = 10, label: str | None = None,
                 concurrency: int = 1, votes: int = 1, team: Team | None = None):
        from ..factory import ARCHITECTURE

        self.agents = list(dict.fromkeys(agents))
        self.team = team
        named = dict(team.tables) if team is not None else {}
        for name in self.agents:
            if name not in ARCHITECTURE and name not in named:
                raise ValueError(f"unknown agent {name!r}; use any of: {', '.join(ARCHITECTURE)}"
                                 f", or an [agents.NAME] of tao.toml ({', '.join(named) or 'none'})")
            if votes > 1 and name in named and named[name].handoffs:
                raise ValueError(f"{name} hands off to other agents: a chain cannot vote (--votes)")
        if not self.agents:
            raise ValueError("no agent given")
        if workers < 1 or concurrency < 1 or (limit is not None and limit < 1) or max_turns < 1:
            raise ValueError("--workers, --concurrency, --limit and --max-turns must be at least 1")
        if offset < 0:
            raise ValueError("--offset must be 0 or more")
        if executor not in EXECUTORS:
            raise ValueError(f"unknown executor {executor!r}; use {' or '.join(EXECUTORS)}")
        self.suite = get_suite(suite)
        if votes < 1:
            raise ValueError("--votes must be at least 1")
        if votes > 1 and not self.suite.votable:
            raise ValueError(f"--votes needs answers to compare; {self.suite.name} scores "
                             f"{'tool calls' if self.suite.name.startswith('bfcl') else 'code'}")
        self.votes = votes
        self.spec = str(getattr(self.suite, "path", suite))
        every = self.suite.tasks()
        if offset >= len(every):
            raise ValueError(f"--offset {offset} skips every task: {self.suite.name} has {len(every)}")
        # --offset splits a long suite into runs that can share one --out (HumanEval's 164 tasks
        # in slices of an evening each); tasks keep their ids, so a slice never reruns another's
        self.tasks = every[offset:][:limit]
        self.model, self.workers, self.executor, self.max_turns = model, workers, executor, max_turns
        self.concurrency = concurrency
        if label is None:  # what run.json calls the model: a resume must use the same one
            label = model if isinstance(model, str) else getattr(
                model, "__qualname__", getattr(model, "name", type(model).__name__))
        from .store import Store

        meta = {"suite": self.spec, "model": label, **({"votes": votes} if votes > 1 else {})}
        self.store = Store(out, meta)  # a resume must run the same suite, model and votes

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
        """Run what is pending; yield each record once it is stored (in the order tasks finish)."""
        pending = self.pending()
        if not pending:
            return
        init = (self.spec, self.model, self.max_turns, self.votes, self.team)
        workers = min(self.workers, len(pending))
        if self.executor == "ray":
            from .ray_pool import ray_records

            records = ray_records(Worker, init, pending, workers, self.concurrency)
        elif workers > 1:
            from .pool import process_records

            records = process_records(init, pending, workers, self.concurrency)
        else:
            records = Worker(*init).run_many(pending, self.concurrency)
        for record in records:
            self.store.add(record)
            yield record
