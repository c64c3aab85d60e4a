"""The planner: the model calls of a Plan-and-Execute run, in one conversation.

``plan`` asks for the first plan, ``replan`` for a plan of the remaining work after a failure,
``synthesize`` for the answer when the plan has no answer template. An invalid plan goes back to
the model with the precise problems (``PlanInvalid``), at most ``max_fixes`` times per plan;
then ``PlanFailed`` ends the run. Every call is one turn: ``TurnStarted``, streamed
``TokenDelta``s, ``ModelRetry``; the plan is asked for with ``response_format`` (a JSON schema),
which the embedded model turns into a grammar.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..errors import TaoError
from ..events import Error, Event, ModelRetry, TokenDelta, TurnStarted
from ..messages import Message, Usage
from ..models.base import Model, ModelResponse
from ..tools.base import Toolbox
from .executor import Outcome
from .schema import Plan, PlanInvalid, parse_plan, response_format


class PlanFailed(TaoError):
    """No valid plan within the bound, or a step kept failing after the last re-plan."""


@dataclass(slots=True)
class Tally:
    """What a run has spent: every model call is a turn (sub-agents' included)."""

    turns: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)


class Planner:
    def __init__(self, model: Model, toolbox: Toolbox, emit: Callable[[Event], None], tally: Tally,
                 *, lang: str = "en", agent_steps: bool = False, max_fixes: int = 2,
                 system_prompt: str | None = None):
        self.model = model
        self.toolbox = toolbox
        self.emit = emit
        self.tally = tally
        self.lang = lang
        self.agent_steps = agent_steps
        self.max_fixes = max_fixes
        self.texts = prompts.table("plan")[lang if lang in ("zh", "en") else "en"]
        self.messages = [Message.system(system_prompt or self.system_prompt())]
        self._format: dict[str, Any] | None = None

    def system_prompt(self) -> str:
        lines = [prompts.render(self.texts["tool_line"], signature=t.signature(),
                                description=t.description) for t in self.toolbox]
        examples = prompts.table("plan")["examples"]
        example = next((examples[t.name][self.lang] for t in self.toolbox if t.name in examples), "")
        return prompts.render(prompts.template("plan", self.lang), tools="\n".join(lines) or "(none)",
                              agent_rule=self.texts["agent_rule"] if self.agent_steps else "",
                              example=example.strip()).strip()

    # -- model calls ----------------------------------------------------------------------
    async def call(self, **kwargs: Any) -> Message:
        """One model call on the conversation; its reply is appended to it."""
        self.tally.turns += 1
        turn = self.tally.turns
        self.emit(TurnStarted(turn))
        response = None
        async for chunk in self.model.stream(self.messages, **kwargs):
            if type(chunk) is str:
                self.emit(TokenDelta(chunk, turn))
            elif type(chunk) is ModelResponse:
                response = chunk
            else:
                self.emit(ModelRetry(turn, chunk.attempt, chunk.reason, chunk.delay_s))
        assert response is not None  # Model.stream always ends with one
        self.tally.usage.add(response.usage)
        self.messages.append(response.message)
        return response.message

    async def _ask_plan(self, finished: Mapping[str, Any]) -> Plan:
        if self._format is None:
            self._format = response_format(self.toolbox, self.agent_steps)
        for fix in range(self.max_fixes + 1):
            reply = await self.call(response_format=self._format)
            try:
                return parse_plan(reply.content, self.toolbox, agent_steps=self.agent_steps,
                                  finished=finished)
            except PlanInvalid as e:
                problems = str(e) if str(e).startswith("-") else f"- {e}"
                if fix == self.max_fixes:
                    raise PlanFailed(f"no valid plan after {fix + 1} tries; the last one:\n"
                                     f"{problems}") from None
                self.emit(Error(f"invalid plan:\n{problems}", self.tally.turns, recoverable=True))
                self.messages.append(Message.user(prompts.render(self.texts["invalid"],
                                                                 errors=problems)))
        raise AssertionError("unreachable")  # pragma: no cover

    async def plan(self, task: str) -> Plan:
        self.messages.append(Message.user(task))
        return await self._ask_plan({})

    async def replan(self, task: str, done: Sequence[Outcome], troubles: Sequence[Outcome],
                     finished: Mapping[str, Any]) -> tuple[Plan, str]:
        """A plan for the remaining work. ``done``: every step that finished so far (all plans);
        ``troubles``: the steps that failed or were skipped. Returns the plan and the failure
        it answers (for ``Replanned``)."""
        t = self.texts
        lines = [prompts.render(t["failure_line" if o.status == "failed" else "skipped_line"],
                                id=o.step.id, description=o.step.description, error=o.text,
                                reason=o.text) for o in troubles]
        numbers = [int(i[4:]) for i in [*finished, *(o.step.id for o in troubles)]
                   if i[4:].isdigit()]
        failure = "\n".join(lines)
        self.messages.append(Message.user(prompts.render(
            t["replan"], task=task, finished=self.results(done), failure=failure,
            next_id=f"step{max(numbers, default=0) + 1}")))
        return await self._ask_plan(finished), failure

    async def synthesize(self, task: str, outcomes: Sequence[Outcome]) -> str:
        self.messages.append(Message.user(prompts.render(
            self.texts["synthesize"], results=self.results(outcomes), task=task)))
        return (await self.call()).content.strip()

    def results(self, outcomes: Sequence[Outcome]) -> str:
        lines = [prompts.render(self.texts["result_line"], id=o.step.id,
                                description=o.step.description, result=o.text)
                 for o in outcomes if o.status == "done"]
        return "\n".join(lines) or self.texts["no_results"]
