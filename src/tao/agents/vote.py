"""Self-consistency: run an agent several times and answer with what most runs reached.

    from tao import Vote, PlanExecuteAgent
    agent = Vote(PlanExecuteAgent(model, [calculate, calculator]), n=5)
    agent.run("小明有 50 元……")        # greedy first, then sampled runs; the majority answer

Small models are often right on one sample and wrong on the greedy one (Wang et al., 2022,
"Self-Consistency Improves Chain of Thought Reasoning"). The first run is the model's own
(greedy on the embedded model), the others sample at ``temperature`` with seeds ``seed + i``
(``tao.models.sampling``: the model object is untouched, other users of it stay greedy).
Runs stop as soon as no remaining run could change the winner, so agreeing runs cost little.

Every run repeats the agent's tool calls, so ``Vote`` takes only agents whose tools all say
``side_effects=False`` (the calculators do) unless ``side_effects=True`` says repeating them is
fine. Answers are compared by ``key(answer)``: by default the number the answer states when
there is one - its last number not merely repeated from the task, as ``tao eval`` scores numeric
answers - else the text with case and spacing folded. A tie
goes to the answer reached first.

On an endpoint model the first run uses the model's own temperature (the provider's default
when none is set) and the others send ``temperature`` and ``seed``; a model that refuses those
(some reasoning models) fails those runs, which then cast no vote.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from contextlib import aclosing
from typing import Any

from .. import prompts
from ..answers import stated_number
from ..events import Event, RunFinished, RunStarted, Thought
from ..messages import Usage
from ..models.sampling import Sampling, sampled
from .base import Agent, Result, detect_language
from .inner import InnerRun


def _tools(agent: Any) -> Iterator[Any]:
    """Every tool a run of ``agent`` may call: its own, and those of the agents it wraps
    (``Reflexion``, another ``Vote``) or hands steps to (a plan's ``step_agent``)."""
    yield from getattr(agent, "toolbox", None) or ()
    for inner in (getattr(agent, "agent", None), getattr(agent, "step_agent", None)):
        if isinstance(inner, Agent):
            yield from _tools(inner)


def _leader(votes: dict[Hashable, list[Result]]) -> Hashable:
    """The answer with the most votes; of equals, the one reached first (``votes`` keeps that
    order)."""
    return max(votes, key=lambda k: len(votes[k]))


def _decided(votes: dict[Hashable, list[Result]], left: int) -> bool:
    """Whether ``left`` more runs can no longer change the winner: no answer seen can pass the
    leader or tie it from ahead (a tie goes to the answer reached first), and a new answer,
    reached after the leader, gets at most ``left`` votes."""
    order = list(votes)
    leader = _leader(votes)
    lead = len(votes[leader])
    for k in order:
        most = len(votes[k]) + left
        if k != leader and (most > lead or (most == lead and order.index(k) < order.index(leader))):
            return False
    return left <= lead


def answer_key(answer: str | None, question: str | None = None) -> Hashable:
    """What two answers must share to count as the same vote: the number each states (its last
    one not merely repeated from ``question``), else the folded text."""
    number = stated_number(answer, question)
    if number is not None:
        return number
    return re.sub(r"\s+", " ", (answer or "").strip()).casefold().rstrip(".。!！")


class Vote(Agent):
    """``Vote(agent, n=5, *, temperature=0.7, seed=1, key=answer_key, side_effects=False)``."""

    name = "vote"
    takes_checklist = False  # its agent writes one, each run

    def __init__(self, agent: Agent, n: int = 5, *, temperature: float = 0.7, seed: int = 1,
                 key: Callable[[str | None], Hashable] = answer_key, side_effects: bool = False,
                 language: str | None = None):
        if not isinstance(agent, Agent):
            raise TypeError(f"Vote needs an Agent to run, not {agent!r}")
        if n < 1:
            raise ValueError("n (the number of runs) must be at least 1")
        if temperature <= 0 and n > 1:
            raise ValueError("sampled runs need a temperature above 0; greedy runs all agree")
        risky = sorted({t.name for t in _tools(agent) if getattr(t, "side_effects", True)})
        if risky and not side_effects:
            raise ValueError(
                f"Vote runs the agent up to {n} times, and these tools may have side effects: "
                f"{', '.join(risky)}; mark them @tool(side_effects=False) if they have none, or "
                f"pass side_effects=True to repeat them anyway")
        self.agent, self.n, self.temperature, self.seed, self.key = agent, n, temperature, seed, key
        self.language = language
        self.model = getattr(agent, "model", None)
        self.name = f"{agent.name}-vote{n}"

    def _key(self, result: Result, task: str) -> Hashable:
        """A run's vote: with the default key, a typed result is compared as the whole value
        (its JSON), not by the last number in its text; else ``key(answer)``."""
        if result.output is not None and self.key is answer_key:
            from ..result import _as_json
            from ..safe_json import dumps

            return ("typed", dumps(_as_json(result.output), sort_keys=True))
        if self.key is answer_key:
            return answer_key(result.answer, task)
        return self.key(result.answer)

    def _sampling(self, run: int) -> Sampling | None:
        return None if run == 0 else Sampling(self.temperature, self.seed + run - 1)

    async def loop(self, task: str, run_id: str) -> AsyncIterator[Event]:
        start = time.perf_counter()
        lang = "zh" if (self.language or detect_language(task)) == "zh" else "en"
        t = prompts.table("vote")[lang]
        yield RunStarted(task, self.name, getattr(self.model, "name", "model"))
        usage, turns, calls = Usage(), 0, 0
        given = self.run_options(run_id)  # this run's deps, typed output and history go on
        votes: dict[Hashable, list[Result]] = {}  # in the order answers were first reached
        last: Result | None = None
        for run in range(self.n):
            inner = InnerRun(sampled(self.agent.stream(
                task, deps=given.deps, output_type=given.output_type, history=given.history),
                self._sampling(run)), self.agent.name)
            async with aclosing(inner.events()) as events:
                async for event in events:
                    yield event
            last = inner.result
            assert last is not None
            usage.add(last.usage)
            turns, calls = turns + last.turns, calls + last.tool_calls
            if last.ok:
                votes.setdefault(self._key(last, task), []).append(last)
            counted = sum(map(len, votes.values()))
            lead = len(votes[_leader(votes)]) if votes else 0
            said = (last.answer or "").strip()[:80] if last.ok else \
                prompts.render(t["no_answer"], status=last.status)
            yield Thought(prompts.render(t["tally"], run=str(run + 1), runs=str(self.n), answer=said,
                                         standing=prompts.render(t["standing"], votes=str(lead),
                                                                 counted=str(counted))), turns)
            left = self.n - run - 1
            if votes and left and _decided(votes, left):
                yield Thought(prompts.render(t["decided"], answer=(votes[_leader(votes)][0].answer or "")[:80],
                                             votes=str(lead), counted=str(counted)), turns)
                break
        if votes:
            winner = votes[_leader(votes)][0]
            final = Result(winner.answer, "done", turns, calls, usage, time.perf_counter() - start,
                           winner.messages, None, winner.sandbox, output=winner.output)
        else:
            final = Result(last.answer, last.status, turns, calls, usage,
                           time.perf_counter() - start, last.messages, last.error, last.sandbox)
        yield RunFinished(final)
