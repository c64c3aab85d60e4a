"""Reflexion: try, check, reflect on the failure, try again with the lesson - and keep it.

    from tao import Reflexion, ReActAgent
    from tao.agents.reflexion import unit_tests

    def evaluator(task, result):                    # True / False, or (passed, feedback)
        return result.answer == "42", "the answer must be the number alone"

    r = Reflexion(ReActAgent(model, tools), evaluator, max_trials=3, memory=MemoryStore())
    result = r.run("What is 6 * 7?")

Each trial runs ``agent`` on the task (its events stream out as they come, less its
``RunFinished``); the evaluator judges the result - a check function, ``unit_tests`` (unit
tests run in ``tao.sandbox``), or ``model_judge`` (a model asked for a verdict). After a failure
the model writes a short self-reflection from the attempt and the evaluator's feedback (shown as
a ``Thought``); the next trial's task carries the last ``keep`` reflections. Reflections go to
long-term memory (``kind="lesson"``, as "task → reflection", with whether a later trial then
passed), and the lessons closest to a new task are given to its first trial.

The ``Result``: the last trial's answer and messages, the turns, tool calls and usage of every
trial and reflection summed; status "done" when a trial passed, else "error" with the last
feedback ("budget" when a budget ended it).

A Reflexion run is a run of its own with the trials as its sub-runs (``tao.guard``): its guard is
the one its keywords say (``max_tokens=``, ``journal=``...), else the agent's. The reflections
go through its model door (``Run.wrap``) - budgets count them, the journal keeps them, tracing
sees them - and its budgets hold for all the trials together; a journaled Reflexion run resumes
as a whole (trials and reflections served from the journal).
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from .. import prompts
from ..events import Error, Event, RunFinished, RunStarted, Thought
from ..messages import Message, Usage
from .base import Agent, Result, detect_language, make_guard
from .inner import InnerRun


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    feedback: str = ""


def _verdict(value: Any) -> Verdict:
    if isinstance(value, Verdict):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Verdict(bool(value[0]), str(value[1] or ""))
    if isinstance(value, bool):
        return Verdict(value)
    raise TypeError(f"an evaluator returns a bool, (passed, feedback) or a Verdict, not {value!r}")


class Reflexion(Agent):
    """``Reflexion(agent, evaluator, max_trials=3, *, memory=None, model=None, keep=3,
    lessons=3)``. ``evaluator(task, result)``: a bool, ``(passed, feedback)`` or ``Verdict``
    (sync or async). ``memory``: where lessons go - a ``MemoryStore``, a path, ``True`` (the
    default store); by default the agent's own memory store, if it has one. ``model`` writes
    the reflections (default: the agent's model). ``keep``: reflections carried to a retry;
    ``lessons``: stored lessons given to a first trial. ``guard``: the guardrails' keywords
    (``max_tokens= journal= audit=`` ..., see ``tao.guard``) for the whole run, trials and
    reflections; without any, the agent's own guard."""

    name = "reflexion"
    takes_checklist = False  # its agent writes one, each run

    def __init__(self, agent: Agent, evaluator: Callable[..., Any], max_trials: int = 3, *,
                 memory: Any = None, model: Any = None, keep: int = 3, lessons: int = 3,
                 min_score: float = 0.35, language: str | None = None, **guard: Any):
        if not isinstance(agent, Agent):
            raise TypeError(f"Reflexion needs an Agent to run, not {agent!r}")
        if not callable(evaluator):
            raise TypeError(f"evaluator must be callable (task, result), not {evaluator!r}")
        if max_trials < 1:
            raise ValueError("max_trials must be at least 1")
        self.agent, self.evaluator, self.max_trials = agent, evaluator, max_trials
        self.model = model if model is not None else getattr(agent, "model", None)
        if self.model is None:
            raise ValueError("Reflexion needs model= to write reflections with")
        if memory is None:
            memory = getattr(getattr(agent, "memory", None), "store", None)
        elif memory is True or isinstance(memory, str) or hasattr(memory, "__fspath__"):
            from ..memory.inject import open_store

            memory = open_store(None if memory is True else memory)
        elif hasattr(memory, "store") and not hasattr(memory, "search"):  # a tao Memory
            memory = memory.store
        self.store = memory
        self.keep, self.lessons, self.min_score, self.language = keep, lessons, min_score, language
        self.name = f"reflexion-{agent.name}"
        own = getattr(agent, "guard", None)
        self.guard = make_guard(guard, type(self)) if guard or own is None else own

    def recall(self, task: str) -> list[str]:
        """Stored lessons for tasks like ``task``, best first."""
        if self.store is None or not self.lessons or not self.store.count(kind="lesson"):
            return []
        hits = self.store.search(task, k=self.lessons, min_score=self.min_score, kind="lesson")
        return [h.text for h in hits]

    async def loop(self, task: str, run_id: str) -> AsyncIterator[Event]:
        start = time.perf_counter()
        lang = self.language or detect_language(task)
        lang = "zh" if lang == "zh" else "en"
        t = prompts.table("memory")[lang]
        run = self.guard.start(task, self.name, self.model.name, lang, (), run_id)
        model = run.wrap(self.model)  # the model door: budgets, the journal, tracing see it
        yield RunStarted(task, self.name, self.model.name)
        usage, turns, calls = Usage(), 0, 0
        recalled, reflections = self.recall(task), []
        given = self.run_options(run_id)  # this run's deps, typed output and history go on
        result, verdict = None, Verdict(False)
        for trial in range(1, self.max_trials + 1):
            carried = [*recalled, *reflections[-self.keep:]] if self.keep else recalled
            block = prompts.render(t["lessons"], lessons="\n".join(f"- {x}" for x in carried)) \
                if carried else ""
            if block and hasattr(getattr(self.agent, "memory", None), "prompt_text"):
                self.agent.memory.prompt_text.add(block)  # the agent's memory never keeps it
            attempt = task + block
            inner = InnerRun(_child_of(run, self.agent.stream(
                attempt, deps=given.deps, output_type=given.output_type, history=given.history)),
                self.agent.name)
            async with aclosing(inner.events()) as events:
                async for event in events:
                    yield event
            result = inner.result
            assert result is not None
            usage.add(result.usage)
            turns, calls = turns + result.turns, calls + result.tool_calls
            if _spent(run):  # a budget of the whole run: no verdict, no reflection, no retry
                break
            try:
                verdict = _verdict(await _maybe(self.evaluator(task, result)))
            except Exception as e:  # noqa: BLE001 - the evaluator's bug: a failed check, said
                verdict = Verdict(False, f"the evaluator failed: {type(e).__name__}: {e}")
            if verdict.passed:
                break
            yield Error(f"trial {trial}/{self.max_trials}: {verdict.feedback or 'rejected'}",
                        turns, recoverable=trial < self.max_trials)
            if trial == self.max_trials:
                break
            try:
                reply = await model.complete([
                    Message.system(t["reflect"]),
                    Message.user(prompts.render(t["attempt"], task=task, answer=_attempt(result),
                                                feedback=verdict.feedback or "-"))], max_tokens=200)
            except Exception as e:  # noqa: BLE001 - a spent budget, a model that failed: the end
                yield Error(f"{type(e).__name__}: {e}", turns)
                break
            usage.add(reply.usage)
            turns += 1
            reflection = " ".join(reply.message.content.split())[:600]
            if reflection:
                reflections.append(reflection)
                yield Thought(reflection, turns)
        self._store(task, reflections, verdict.passed)
        error = None if verdict.passed else (verdict.feedback or "rejected by the evaluator")
        final = Result(result.answer, "done" if verdict.passed else "error", turns, calls, usage,
                       time.perf_counter() - start, result.messages, error, result.sandbox,
                       output=result.output)
        yield RunFinished(run.finish(final))  # status "budget" when a budget ended it

    def _store(self, task: str, reflections: list[str], passed: bool) -> None:
        if self.store is None:
            return
        brief = " ".join(task.split())[:200]  # the text names its task: found for similar ones
        for r in reflections:
            self.store.add(f"{brief} → {r}", kind="lesson", task=task[:300],
                           outcome="passed" if passed else "failed")


async def _child_of(run: Any, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """A trial's events, every step of it taken with ``run`` as the current run
    (``guard.run.CURRENT``), so the runs it starts (the trial's own, a ``Vote``'s) are sub-runs
    of ``run``; set around each step only, so nothing of it reaches the consumer."""
    from ..guard.run import CURRENT

    try:
        while True:
            token = CURRENT.set(run)
            try:
                event = await anext(events, None)
            finally:
                CURRENT.reset(token)
            if event is None:
                return
            yield event
    finally:
        await events.aclose()  # type: ignore[attr-defined]


def _spent(run: Any) -> bool:
    try:
        run.check()
    except Exception:  # noqa: BLE001 - BudgetExceeded; run.finish says which
        return True
    return False


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _attempt(result: Result) -> str:
    """What the reflection reads of an attempt: its answer, else its last message."""
    if result.answer:
        return result.answer[:2000]
    last = next((m.content for m in reversed(result.messages) if m.content), "")
    return f"(no answer; status {result.status}) {last[:1500]}"


# -- evaluators -----------------------------------------------------------------------------
_CODE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def code_of(result: Result, entry_point: str | None = None) -> str | None:
    """The last Python code of a run (a block in an assistant message or in the answer) that
    defines ``entry_point``, or the last code at all."""
    texts = [m.content for m in result.messages if m.role == "assistant"] + [result.answer or ""]
    blocks = [b for text in texts for b in _CODE.findall(text)]
    if result.answer and not blocks and "def " in result.answer:
        blocks = [result.answer]
    if entry_point:
        defines = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", re.M)
        blocks = [b for b in blocks if defines.search(b)]
    return blocks[-1] if blocks else None


def unit_tests(tests: str, entry_point: str | None = None, *, setup: str = "",
               sandbox: str | None = None, timeout: float = 15.0) -> Callable[[str, Result], Any]:
    """An evaluator that runs ``setup``, the run's code and then ``tests`` (Python: asserts) in
    a fresh ``tao.sandbox``; the feedback is the failing line of the traceback. ``setup`` is
    what the task gave the code (imports, a HumanEval prompt's ``from typing import List``):
    without it a correct function that leans on it fails with a NameError."""
    import secrets

    async def evaluate(task: str, result: Result) -> Verdict:
        from ..sandbox import get_sandbox

        code = code_of(result, entry_point)
        if code is None:
            what = entry_point or "a function"
            return Verdict(False, f"no Python code defining {what} was given")
        marker = f"tests-passed-{secrets.token_hex(6)}"
        program = (f"final_answer = lambda *a, **k: None\n{setup}\n{code}\n\n{tests}\n"
                   f"print({marker!r})\n")
        async with get_sandbox(sandbox) as box:
            res = await box.execute(program, timeout)
        if res.ok and marker in res.stdout:
            return Verdict(True)
        if res.killed_reason:
            return Verdict(False, res.killed_reason)
        lines = [ln for ln in (res.error or "").strip().splitlines() if ln.strip()]
        return Verdict(False, "\n".join(lines[-3:])[:400] or "the tests did not run to the end")

    return evaluate


#: the judge's reason comes before its verdict, so a small model reasons first; a model that
#: honours ``response_format`` (the embedded one, by grammar) cannot answer anything else
VERDICT = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {
    "type": "object", "properties": {"feedback": {"type": "string"},
                                     "correct": {"type": "boolean"}},
    "required": ["feedback", "correct"], "additionalProperties": False}}}


def model_judge(model: Any) -> Callable[[str, Result], Any]:
    """An evaluator that asks ``model`` whether the answer solves the task (a JSON verdict)."""
    import json

    async def evaluate(task: str, result: Result) -> Verdict:
        t = prompts.table("memory")["zh" if detect_language(task) == "zh" else "en"]
        reply = await model.complete([Message.system(t["judge"]), Message.user(prompts.render(
            t["judged"], task=task, answer=result.answer or "-"))], max_tokens=200,
            response_format=VERDICT)
        text = reply.message.content
        try:
            data = json.loads(text[text.find("{"):text.rfind("}") + 1])
            return Verdict(bool(data.get("correct")), str(data.get("feedback") or ""))
        except (ValueError, AttributeError):
            return Verdict(False, f"the judge's reply was not a verdict: {text[:200]}")

    return evaluate


__all__ = ["Reflexion", "Verdict", "code_of", "model_judge", "unit_tests"]
