"""The event-driven executor: a step starts the moment its own dependencies are done.

Modelled on LLMCompiler's ``task_fetching_unit.py``: one ``asyncio.Event`` and one task per step.
Each task waits for the events of its own dependencies - not for a whole "level" of the DAG - then
for a slot (at most ``concurrency`` steps run at once), resolves its ``$stepN`` references and
runs. A failed attempt is retried with exponential backoff (the slot is given back while it
waits) unless retrying cannot help; a step that fails for good has all its dependents skipped,
while the independent steps carry on. What to do about the failure (re-planning) is the agent's
business: ``run`` returns every step's ``Outcome``.

How a step is run - a tool call, a sub-agent - is the ``run_step`` callable handed in.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..events import Event, StepFailed, StepFinished, StepRetried, StepSkipped, StepStarted
from .references import resolve
from .schema import Step


@dataclass(slots=True)
class Attempt:
    """What one try of a step gave: a value, or an error ``text``. ``retry=False`` says trying
    again cannot help (the arguments are invalid), so the step fails at once."""

    ok: bool
    text: str
    value: Any = None
    retry: bool = True


@dataclass(slots=True)
class Outcome:
    step: Step
    status: Literal["done", "failed", "skipped"]
    text: str = ""  # the result as the model reads it, or the error, or why it was skipped
    value: Any = None
    attempts: int = 0
    duration_s: float = 0.0


RunStep = Callable[[Step, Any, int], Awaitable[Attempt]]
Gate = Callable[[Step, Any], Awaitable[Any]]
"""``run_step(step, payload, attempt)``: payload is the resolved args of a tool step, or the
resolved instruction of a step-agent step."""


class Executor:
    """``Executor(run_step, emit, concurrency=8, max_retries=3, backoff=0.5, timeout=None)``.

    ``timeout`` bounds each attempt (seconds); a timed-out attempt counts as failed and is
    retried. Backoff before retry n is ``backoff * 2**(n-1)`` (capped at ``backoff_max``) with
    ±20 % jitter. ``gate(step, args)``: for a tool step, before ``StepStarted`` - the args to
    run (maybe edited) or the ``Attempt`` that refuses it (the guard's policy and approval).
    """

    def __init__(self, run_step: RunStep, emit: Callable[[Event], None], *, concurrency: int = 8,
                 max_retries: int = 3, backoff: float = 0.5, backoff_max: float = 8.0,
                 timeout: float | None = None, gate: Gate | None = None):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.run_step = run_step
        self.emit = emit
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.gate = gate
        self.sleep = asyncio.sleep

    async def run(self, steps: Sequence[Step], results: dict[str, Any]) -> dict[str, Outcome]:
        """Run ``steps``; ``results`` holds the values of steps that finished before (a re-plan's
        plan may use them) and receives each step's value as it finishes."""
        execution = self.start(results)
        for step in steps:
            execution.add(step)
        return await execution.finish()

    def start(self, results: dict[str, Any]) -> Execution:
        """An execution that takes steps one by one (``add``), as a streamed plan arrives."""
        return Execution(self, results)

    async def attempts(self, step: Step, results: Mapping[str, Any],
                       slots: asyncio.Semaphore) -> Outcome:
        attempt = 0
        while True:
            attempt += 1
            async with slots:
                start = time.perf_counter()
                res = await self._try(step, results, attempt)
                elapsed = time.perf_counter() - start
            if res.ok:
                self.emit(StepFinished(step.id, res.text, attempt, elapsed))
                return Outcome(step, "done", res.text, res.value, attempt, elapsed)
            if not res.retry or attempt > self.max_retries:
                self.emit(StepFailed(step.id, res.text, attempt))
                return Outcome(step, "failed", res.text, None, attempt, elapsed)
            delay = self.delay(attempt)
            self.emit(StepRetried(step.id, attempt, res.text, delay))
            if delay > 0:
                await self.sleep(delay)

    async def _try(self, step: Step, results: Mapping[str, Any], attempt: int) -> Attempt:
        try:
            if step.tool is not None:
                payload: Any = resolve(step.args, results)
                shown = payload
            else:
                payload = resolve(step.instruction or "", results)
                shown = {"instruction": payload}
        except KeyError as e:  # the validator rules this out; never crash the run on it
            return Attempt(False, f"Error: {step.id} uses ${e.args[0]}, which has no result", retry=False)
        if self.gate is not None and step.tool is not None:  # decided before it is shown
            payload = shown = await self.gate(step, payload)
            if isinstance(payload, Attempt):
                return payload
        self.emit(StepStarted(step.id, step.description, step.tool, shown, attempt))
        try:
            work = self.run_step(step, payload, attempt)
            return await (asyncio.wait_for(work, self.timeout) if self.timeout else work)
        except TimeoutError:
            return Attempt(False, f"Error: step {step.id} timed out after {self.timeout:g} s")
        except Exception as e:  # noqa: BLE001 - a step's failure is an outcome, never a crash
            return Attempt(False, f"Error: {type(e).__name__}: {e}",  # a spent budget: no retry
                           retry=getattr(e, "retryable", True) is not False)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retrying after failed attempt ``attempt``."""
        if self.backoff <= 0:
            return 0.0
        base = min(self.backoff_max, self.backoff * 2 ** (attempt - 1))
        return base * random.uniform(0.8, 1.2)


class Execution:
    """Steps being run: ``add`` starts a step's task at once (it waits for its dependencies
    among the steps added so far); ``finish`` waits for all and returns the outcomes in the order
    added. A dependency that was never added counts as done (a result from an earlier plan)."""

    def __init__(self, executor: Executor, results: dict[str, Any]):
        self.executor = executor
        self.results = results
        self.steps: list[Step] = []
        self.done: dict[str, asyncio.Event] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.slots = asyncio.Semaphore(executor.concurrency)

    def add(self, step: Step) -> None:
        self.steps.append(step)
        self.done[step.id] = asyncio.Event()
        self.tasks.append(asyncio.ensure_future(self._one(step)))

    async def finish(self) -> dict[str, Outcome]:
        try:
            await asyncio.gather(*self.tasks)
        finally:  # cancelled, or a bug in one task: stop the others too
            for task in self.tasks:
                task.cancel()
        return {s.id: self.outcomes[s.id] for s in self.steps}

    async def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _one(self, step: Step) -> None:
        try:
            for dep in step.depends_on:
                if dep in self.done:
                    await self.done[dep].wait()
            outcomes = self.outcomes
            if any(d in self.done and d not in outcomes for d in step.depends_on):
                return  # a dependency raised (a spent budget): the run is ending, not this step
            blocked = [d for d in step.depends_on if d in outcomes and outcomes[d].status != "done"]
            if blocked:
                dep = outcomes[blocked[0]]
                why = f"{dep.step.id} {dep.status}" + (f": {dep.text}" if dep.status == "failed" else "")
                outcomes[step.id] = Outcome(step, "skipped", why)
                self.executor.emit(StepSkipped(step.id, why))
                return
            outcome = await self.executor.attempts(step, self.results, self.slots)
            if outcome.status == "done":
                self.results[step.id] = outcome.value
            outcomes[step.id] = outcome
        finally:
            self.done[step.id].set()
