"""Another try, from a clean slate, when a run's work fails a check made after it.

    from tao import Attempts
    from tao.workspace import Workspace
    ws = Workspace("todo", check_pages=True)
    agent = Attempts(coder, n=3, check=ws.verify, state=ws)
    agent.run("做一个待办清单网页……")   # greedy first; if the checks fail, the files are put
                                      # back as they were and a sampled run starts again

A small model that has gone wrong in a run rarely climbs out of it: the coding agent on the
1.5B model reworked a page for ten turns around a mistake of its first write, and repaired its
tests by pasting pytest's output into them (BENCHMARKS.md, issue 27). Sampling the whole run
again from the start, and keeping the first run whose work passes checks the run did not write
itself, is the cheapest repair that does not depend on the model seeing its own mistake
(the generate-then-filter of AlphaCode and of pass@k with execution feedback).

``check(task, result)`` (sync or async) returns the problems found, as text; empty means the
work passed. ``state`` (optional) is what a run changes - a ``Workspace`` - with ``save()``,
``restore(saved)``: before the first run it is saved, and each later run starts from that;
after the last run the best one's state is put back (fewest problems, the earlier on a tie).
The first run is the agent's own (greedy on the embedded model); the others sample at
``temperature`` with seeds ``seed + i`` (``tao.models.sampling``), as ``Vote``'s do.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from .. import prompts
from ..events import Checked, Event, RunFinished, RunStarted
from ..messages import Usage
from ..models.sampling import Sampling, sampled
from .base import Agent, Result, detect_language
from .inner import InnerRun

Check = Callable[[str, Result], "list[str] | Awaitable[list[str]]"]


class Attempts(Agent):
    """``Attempts(agent, n=3, *, check, state=None, temperature=0.7, seed=1, repair=False)``.

    ``repair=True``: a new attempt does not start over - it keeps the files and is told, after
    the task, the problems the check found (greedy, since its prompt differs)."""

    name = "attempts"
    takes_checklist = False  # its agent writes one, each run

    def __init__(self, agent: Agent, n: int = 3, *, check: Check, state: Any = None,
                 temperature: float = 0.7, seed: int = 1, repair: bool = False,
                 language: str | None = None):
        if not isinstance(agent, Agent):
            raise TypeError(f"Attempts needs an Agent to run, not {agent!r}")
        if n < 1:
            raise ValueError("n (the number of runs) must be at least 1")
        if temperature <= 0 and n > 1:
            raise ValueError("a run again at temperature 0 repeats the first one; give a "
                             "temperature above 0")
        if not callable(check):
            raise TypeError("check must be a function (task, result) -> list of problems")
        if state is not None and not (callable(getattr(state, "save", None))
                                      and callable(getattr(state, "restore", None))):
            raise TypeError("state must have save() and restore(saved) (a Workspace has)")
        self.agent, self.n, self.check, self.state = agent, n, check, state
        self.temperature, self.seed, self.language = temperature, seed, language
        self.repair = repair
        self.model = getattr(agent, "model", None)
        self.toolbox = getattr(agent, "toolbox", None)
        self.name = f"{agent.name}-attempts{n}"

    async def _problems(self, task: str, result: Result) -> tuple[list[str], bool]:
        """The check's problems, and whether it ran: a check that raised (a sandbox gone, a
        browser that crashed) says nothing of the work - it ends the attempts, and what the
        last run made stays as it is."""
        try:
            found = self.check(task, result)
            if inspect.isawaitable(found):
                found = await found
        except Exception as e:  # noqa: BLE001 - said, not raised: the run's work is kept
            return [f"{type(e).__name__}: {e}"], False
        return [str(p) for p in (found or ())], True

    async def loop(self, task: str, run_id: str) -> AsyncIterator[Event]:
        start = time.perf_counter()
        lang = "zh" if (self.language or detect_language(task)) == "zh" else "en"
        t = prompts.table("attempts")[lang]
        yield RunStarted(task, self.name, getattr(self.model, "name", "model"))
        given = self.run_options(run_id)
        first = self.state.save() if self.state is not None else None
        usage, turns, calls = Usage(), 0, 0
        best: tuple[int, Result, Any] | None = None  # (problems, result, saved state)
        asked, chosen = task, None  # the first run: the task, the model's own decoding
        for run in range(self.n):
            if run and self.state is not None and not self.repair:
                self.state.restore(first)
            inner = InnerRun(sampled(self.agent.stream(
                asked, deps=given.deps, output_type=given.output_type, history=given.history),
                chosen), self.agent.name)
            async with aclosing(inner.events()) as events:
                async for event in events:
                    yield event
            last = inner.result
            assert last is not None
            usage.add(last.usage)
            turns, calls = turns + last.turns, calls + last.tool_calls
            problems, ran = await self._problems(task, last)
            if not ran:
                yield Checked(run + 1, self.n, problems, False, prompts.render(
                    t["broken"], run=str(run + 1), runs=str(self.n), error=problems[0]))
                best = (0, last, None)  # nothing known against it: this run's files stay
                break
            if best is None or len(problems) < best[0]:
                saved = self.state.save() if self.state is not None and problems else None
                best = (len(problems), last, saved)
            again = bool(problems) and run + 1 < self.n
            key = "passed" if not problems else "last" if not again else \
                "again_repair" if self.repair else "again"
            listed = "\n".join(f"- {p}" for p in problems[:5])
            if self.repair:
                asked = prompts.render(t["repair"], task=task, problems=listed)
            else:
                chosen = Sampling(self.temperature, self.seed + run)
            yield Checked(run + 1, self.n, problems, again, prompts.render(
                t[key], run=str(run + 1), runs=str(self.n), count=str(len(problems)),
                problems=listed))
            if not problems:
                break
        assert best is not None
        count, result, saved = best
        if count and self.state is not None and saved is not None:
            self.state.restore(saved)  # the best run's files, not the last one's
        yield RunFinished(Result(result.answer, result.status, turns, calls, usage,
                                 time.perf_counter() - start, result.messages, result.error,
                                 result.sandbox, output=result.output))


__all__ = ["Attempts"]
