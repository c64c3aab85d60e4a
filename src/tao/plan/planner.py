"""The planner: the model calls of a Plan-and-Execute run, in one conversation.

``plan`` asks for the first plan, ``replan`` for a plan of the remaining work after a failure,
``review`` (opt-in) whether the results of a plan that ran through answer the task or which steps
are still missing, ``synthesize`` for the answer when the plan has no answer template. An invalid
plan goes back to the model with the precise problems (``PlanInvalid``), at most ``max_fixes``
times per plan;
then ``PlanFailed`` ends the run. Every call is one turn: ``TurnStarted``, streamed
``TokenDelta``s, ``ModelRetry``; the plan is asked for with ``response_format`` (a JSON schema),
which the embedded model turns into a grammar.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..errors import TaoError
from ..events import Error, Event, ModelRetry, TokenDelta, TurnStarted
from ..messages import Message, Usage
from ..models.base import Model, ModelResponse
from ..models.sampling import Sampling, sampling
from ..tools.base import Toolbox
from .executor import Outcome
from .schema import Plan, PlanInvalid, Step, parse_plan, response_format
from .streaming import StepScanner, read_step


#: what a plan under the grammar may take: its 12 steps (``MAX_CONSTRAINED_STEPS``) fit, where the
#: embedded model's 512 cut longer plans mid-string and the fixes were cut the same way
PLAN_TOKENS = 1536


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
                 system_prompt: str | None = None, form: str = "json",
                 draw: Callable[[int], Sampling | None] = lambda seed: None):
        self.model = model
        #: "json" (a JSON object, under a grammar where the model takes one) or "code" (straight-
        #: line Python, ``code_form``)
        self.form = form
        #: code form: the names the run's plans bound so far (name -> ``$stepN`` or a number's
        #: source), for re-plans
        self.bindings: dict[str, str] = {}
        #: how a plan written after a failure is drawn (``LoopContext.repair_draw``)
        self.draw = draw
        self.toolbox = toolbox
        self.emit = emit
        self.tally = tally
        self.lang = lang
        self.agent_steps = agent_steps
        self.max_fixes = max_fixes
        table = prompts.table("plan")
        self.texts = table[lang if lang in ("zh", "en") else "en"]
        if form == "code":
            self.texts = {**self.texts, **table["code"][lang if lang in ("zh", "en") else "en"]}
        #: decoded under a grammar: the schema makes slips impossible (``plan_schema``)
        self.constrained = form == "json" and bool(getattr(model, "supports_grammar", False))
        self.messages = [Message.system(system_prompt)] if system_prompt else \
            [Message.system(self.system_prompt()), *self.example()]
        self._format: dict[str, Any] | None = None
        #: messages that follow the task in the first plan's request (the run's checklist)
        self.notes: list[Message] = []

    def system_prompt(self) -> str:
        lines = [prompts.render(self.texts["tool_line"], signature=t.signature(),
                                description=t.description) for t in self.toolbox]
        name = "plan_code" if self.form == "code" else "plan"
        return prompts.render(prompts.template(name, self.lang), tools="\n".join(lines) or "(none)",
                              agent_rule=self.texts["agent_rule"] if self.agent_steps else "").strip()

    def example(self) -> list[Message]:
        """A worked plan for the first of the agent's tools that has one (``prompts/plan.toml``),
        as a real exchange: small models follow a turn they see far better than an example
        quoted in the system prompt (measured on CodeAct, BENCHMARKS.md)."""
        examples = prompts.table("plan")["code_examples" if self.form == "code" else "examples"]
        lang = self.lang if self.lang in ("zh", "en") else "en"
        ex = next((examples[t.name][lang] for t in self.toolbox if t.name in examples), None)
        if ex is None:
            return []
        plan = ex["plan"]
        if self.constrained:  # show the plan as the grammar lets it be written (``plan_grammar``)
            shown = json.loads(plan)
            for step in shown["steps"]:
                step.pop("depends_on", None)
            plan = json.dumps({"steps": shown["steps"]}, ensure_ascii=False)
        return [Message.user(ex["task"]), Message.assistant(plan)]

    # -- model calls ----------------------------------------------------------------------
    async def call(self, on_text: Callable[[str], None] | None = None,
                   on_retry: Callable[[], None] | None = None, **kwargs: Any) -> Message:
        """One model call on the conversation; its reply is appended to it. ``on_text`` sees
        each streamed piece of text; ``on_retry`` hears that the text so far is void."""
        self.tally.turns += 1
        turn = self.tally.turns
        self.emit(TurnStarted(turn))
        response = None
        async for chunk in self.model.stream(self.messages, **kwargs):
            if type(chunk) is str:
                self.emit(TokenDelta(chunk, turn))
                if on_text is not None:
                    on_text(chunk)
            elif type(chunk) is ModelResponse:
                response = chunk
            else:
                self.emit(ModelRetry(turn, chunk.attempt, chunk.reason, chunk.delay_s))
                if on_retry is not None:
                    on_retry()
        assert response is not None  # Model.stream always ends with one
        self.tally.usage.add(response.usage)
        self.messages.append(response.message)
        return response.message

    @property
    def format(self) -> dict[str, Any]:
        """What the plan is asked for with: the plan's JSON schema. An endpoint that does not
        take it is asked with the next form down by the model itself (``OpenAIModel``: JSON
        mode, then none), said as a retry."""
        if self._format is None:
            self._format = response_format(self.toolbox, self.agent_steps,
                                           constrained=self.constrained)
        return self._format

    async def _call_plan(self, on_text: Callable[[str], None] | None = None,
                         on_retry: Callable[[], None] | None = None, first: int = 1,
                         finished: Iterable[str] = (), review: bool = False) -> Message:
        if self.form == "code":
            return await self.call(on_text, on_retry, max_tokens=PLAN_TOKENS)
        if self.constrained:  # numbered in order, references only backwards (``plan.grammar``)
            from .grammar import plan_grammar

            gbnf = plan_grammar(self.toolbox, self.agent_steps, first=first, finished=finished,
                                review=review)
            return await self.call(on_text, on_retry, grammar=gbnf, max_tokens=PLAN_TOKENS)
        fmt = response_format(self.toolbox, self.agent_steps, review=True) if review else self.format
        return await self.call(on_text, on_retry, response_format=fmt)

    async def _ask_plan(self, finished: Mapping[str, Any], tried: int = 0, first: int = 1,
                        review: bool = False, failed: bool = False) -> Plan:
        """``failed``: the plan answers a failure (a step's, or an invalid plan's): it is drawn
        as ``draw`` says, as every fix of an invalid plan is."""
        for fix in range(tried, self.max_fixes + 1):
            draw = self.draw(self.tally.turns + 1) if failed or fix > tried else None
            with sampling(draw.temperature, draw.seed) if draw else nullcontext():
                reply = await self._call_plan(first=first, finished=finished, review=review)
            try:
                return self.parse(reply.content, finished, first, review)
            except PlanInvalid as e:
                problems = str(e) if str(e).startswith("-") else f"- {e}"
                if fix == self.max_fixes:
                    raise PlanFailed(f"no valid plan after {fix + 1} tries; the last one:\n"
                                     f"{problems}") from None
                self.emit(Error(f"invalid plan:\n{problems}", self.tally.turns, recoverable=True))
                self.messages.append(Message.user(prompts.render(self.texts["invalid"],
                                                                 errors=problems)))
        raise AssertionError("unreachable")  # pragma: no cover

    def parse(self, text: str, finished: Mapping[str, Any], first: int = 1,
              review: bool = False) -> Plan:
        from .code_form import code_of, parse_code_plan

        # each form reads the other's plan too: a model may keep to the form it knows
        code = code_of(text).lstrip() if self.form == "code" or "```python" in text else ""
        if code and not code.startswith(("{", "[")):
            plan, bound = parse_code_plan(text, self.toolbox, finished=finished, first=first,
                                          names=self.bindings, agent_steps=self.agent_steps)
            self.bindings.update(bound)
            return plan
        return parse_plan(text, self.toolbox, agent_steps=self.agent_steps, finished=finished,
                          constrained=self.constrained, review=review)

    async def plan(self, task: str) -> Plan:
        self.messages += [Message.user(task), *self.notes]
        return await self._ask_plan({})

    async def plan_streamed(self, task: str, dispatch: Callable[[Step], None]
                            ) -> tuple[Plan | None, str | None]:
        """Ask for the first plan and ``dispatch`` each step as soon as its JSON object has
        streamed in and checks out against the steps before it. Returns ``(plan, None)``, or
        ``(None, problems)`` when the reply turned out invalid (dispatching stopped there)."""
        if self.form == "code":  # read whole: a line of code is not a step until the next one
            plan = await self.plan(task)
            for step in plan.steps:
                dispatch(step)
            return plan, None
        self.messages += [Message.user(task), *self.notes]
        scanner, sent, problems, seen = StepScanner(), [], None, 0

        def on_text(chunk: str) -> None:
            nonlocal problems, seen
            if problems is not None:
                return
            for text in scanner.feed(chunk):
                try:
                    step = read_step(text, sent[:seen], self.toolbox, agent_steps=self.agent_steps,
                                     constrained=self.constrained)
                except PlanInvalid as e:
                    problems = str(e)
                    return
                if seen < len(sent):  # streamed again after a retry: it must be the same step
                    if step != sent[seen]:
                        problems = (f"after a retry the reply changed: {step.id} differs from the "
                                    f"{sent[seen].id} that already started")
                        return
                else:
                    sent.append(step)
                    dispatch(step)
                seen += 1

        def on_retry() -> None:  # the text so far is void; the steps it started keep running
            nonlocal scanner, seen
            scanner, seen = StepScanner(), 0

        reply = await self._call_plan(on_text, on_retry)
        if problems is None:
            try:
                plan = parse_plan(reply.content, self.toolbox, agent_steps=self.agent_steps,
                                  constrained=self.constrained)
            except PlanInvalid as e:
                problems = str(e)
            else:
                if plan.steps[:len(sent)] == sent:  # the rest had not been seen (odd framing)
                    for step in plan.steps[len(sent):]:
                        dispatch(step)
                    return plan, None
                problems = "- the plan read as a whole differs from its steps as they streamed"
        problems = problems if problems.startswith("-") else f"- {problems}"
        if self.max_fixes == 0:
            raise PlanFailed(f"no valid plan after 1 try:\n{problems}")
        self.emit(Error(f"invalid plan:\n{problems}", self.tally.turns, recoverable=True))
        return None, problems

    async def repair(self, task: str, problems: str, done: Sequence[Outcome],
                     troubles: Sequence[Outcome], finished: Mapping[str, Any]) -> Plan:
        """After a streamed plan turned out invalid: a plan for what did not run yet."""
        if not done and not troubles:
            self.messages.append(Message.user(prompts.render(self.texts["invalid"], errors=problems)))
        else:
            failures = self._trouble_lines(troubles)
            self.messages.append(Message.user(prompts.render(
                self.texts["invalid_streamed"], errors="\n".join([problems, *failures]),
                finished=self.results(done), next_id=self._next_id(finished, troubles))))
        return await self._ask_plan(finished, tried=1, failed=True,
                                    first=int(self._next_id(finished, troubles)[4:]))

    def _trouble_lines(self, troubles: Sequence[Outcome]) -> list[str]:
        return [prompts.render(self.texts["failure_line" if o.status == "failed" else "skipped_line"],
                               id=o.step.id, description=o.step.description, error=o.text,
                               reason=o.text) for o in troubles]

    @staticmethod
    def _next_id(finished: Mapping[str, Any], troubles: Sequence[Outcome]) -> str:
        numbers = [int(i[4:]) for i in [*finished, *(o.step.id for o in troubles)] if i[4:].isdigit()]
        return f"step{max(numbers, default=0) + 1}"

    async def replan(self, task: str, done: Sequence[Outcome], troubles: Sequence[Outcome],
                     finished: Mapping[str, Any]) -> tuple[Plan, str]:
        """A plan for the remaining work. ``done``: every step that finished so far (all plans);
        ``troubles``: the steps that failed or were skipped. Returns the plan and the failure
        it answers (for ``Replanned``)."""
        failure = "\n".join(self._trouble_lines(troubles))
        self.messages.append(Message.user(prompts.render(
            self.texts["replan"], task=task, finished=self.results(done), failure=failure,
            next_id=self._next_id(finished, troubles))))
        return await self._ask_plan(finished, first=int(self._next_id(finished, troubles)[4:]),
                                    failed=True), failure

    async def review(self, task: str, done: Sequence[Outcome], finished: Mapping[str, Any]) -> Plan:
        """After a plan ran through: a plan with no steps whose answer names the result that
        answers the task, or the steps still missing (numbered on, using the results).

        A plan is written before any result is seen, and a small model often stops one step
        short (the trees in the rows counted, the 57 sold not taken off) or answers with an
        intermediate result; ReAct sees each result before its next move. This is the dynamic
        Plan-and-Execute of the seed's closing note and LangGraph's re-planner."""
        next_id = self._next_id(finished, ())
        self.messages.append(Message.user(prompts.render(
            self.texts["review"], task=task, results=self.results(done), next_id=next_id)))
        return await self._ask_plan(finished, first=int(next_id[4:]), review=True)

    async def synthesize(self, task: str, outcomes: Sequence[Outcome], output: Any = None,
                         lang: str = "en") -> str:
        """The answer from the steps' results; with a typed result (``tao.output.Output``) as
        JSON of its schema (the embedded model decodes under it)."""
        text = prompts.render(self.texts["synthesize"], results=self.results(outcomes), task=task)
        self.messages.append(Message.user(text + (output.instructions(lang) if output else "")))
        return await self.answer_again(None, output)

    async def answer_again(self, correction: str | None, output: Any) -> str:
        """The answer once more, after ``correction`` (None: the first time)."""
        if correction is not None:
            self.messages.append(Message.user(correction))
        kwargs = {"response_format": output.response_format()} if output is not None else {}
        return (await self.call(**kwargs)).content.strip()

    def results(self, outcomes: Sequence[Outcome]) -> str:
        lines = [prompts.render(self.texts["result_line"], id=o.step.id,
                                description=o.step.description, result=o.text)
                 for o in outcomes if o.status == "done"]
        return "\n".join(lines) or self.texts["no_results"]
