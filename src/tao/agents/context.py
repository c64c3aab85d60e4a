"""One run's context, made once per run by ``LoopContext(agent, task, lang, toolbox, run_id)``: the guard's run state (policy,
approval, budgets, journal, audit), the memory's, and the two doors wrapped by them - the model
door (``model``) and the tool door (``door``). It also holds the turn-level steps every loop
shares, so a loop says only what is its own: one model turn becomes events; one set of tool calls
becomes approvals, then Actions, then results; the run's end becomes its ``RunFinished``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..events import Action, Checklist, Event, ModelRetry, Observation, RunFinished, TokenDelta
from ..messages import Message, ToolCall, Usage
from ..models.base import Model, ModelResponse
from ..models.sampling import Sampling, current, sampled
from ..output import OUTPUT_RETRIES, Output, OutputError
from ..result import Result, Status
from ..tools.base import Toolbox, ToolDoor, ToolResult
from ..tools.context import RunView
from .checks import CHECKLIST_TOKENS, Answering, checklist_items
from .streak import STALE_TURNS, Streak, call_key

if TYPE_CHECKING:  # the guard's and memory's run state: loaded when a run starts
    from ..guard.run import Run
    from ..memory.inject import MemoryRun


class LoopContext:
    """Made by the loop as its run starts; the loop then reads ``model``
    and ``door`` (the guarded doors), ``guard`` (for what is its own: fencing, the system note),
    ``usage`` and, after each ``model_turn``, ``response``."""

    def __init__(self, agent: Any, task: str, lang: str, toolbox: Toolbox, run_id: str):
        self.started = time.perf_counter()
        self.agent_model: Model = agent.model
        options = agent.run_options(run_id)  # output_type, deps, history, handoff depth
        typed = options.output
        self.guard: Run = agent.guard.start(
            task, agent.name, agent.model.name, lang, toolbox, run_id,
            {"output_type": typed.name, "output_schema": typed.digest()} if typed else None,
            options.meter)
        self.agent, self.run_id, self.deps, self.depth = agent, run_id, options.deps, options.depth
        self.memory: MemoryRun = agent.memory.start(task, lang, options.history)
        self.model: Model = self.guard.wrap(self.memory.wrap(agent.model))
        self.toolbox = toolbox
        self.usage = Usage()
        #: the run as its tools see it (``tao.RunContext``: deps, id, usage, retries)
        self.view = RunView(self.deps, run_id, self.usage)
        self.door: Toolbox = toolbox.bind(self.guard).with_run(self.view)
        self.response: ModelResponse | None = None
        self.results: list[ToolResult] = []
        self.streak = Streak(lang)  # the same failing action again: told, then stopped
        self.known: dict[str, str] = {}  # each working call's last result, by its key
        #: turns in a row whose every call was made before and gave the same result again
        self.stale = 0
        self.failed = False  # whether an action of the last turn failed (``repairing``)
        self.lang = lang
        #: the run's typed result (``tao.output``): its schema, and what validated
        self.output: Output | None = options.output
        #: the handoff the model asked for (``tao.agents.handoffs``) and its reason
        self.handoff: tuple[Any, str] | None = None
        self.retries_left: int = getattr(agent, "output_retries", OUTPUT_RETRIES)
        self.value: Any = None
        #: the agent's answer checks (``Agent.answer_check``) that have not spoken yet
        self.checks_left: list[Any] = list(getattr(agent, "answer_checks", ()))
        self.task = task
        self.replies: list[str] = []  # what the model wrote, turn by turn: what checks read
        self.checklist: list[str] = []  # the run's checklist (``Agent.checklist``), once written

    async def opening(self, messages: list[Message]) -> AsyncIterator[Event]:
        """Before the first turn: the agent's checklist (``Agent.checklist``), if it asks for
        one - a model call of its own through the model door (no tools; its tokens are turn
        0's), then a ``Checklist`` event (its items; none when the reply had none). The items
        go in a message of their own right after the task, the last user message of
        ``messages``: the task stays the task memory looks for (history goes before it)."""
        asks = getattr(self.agent, "checklist_prompts", None)
        if not asks:
            return
        from .. import prompts

        texts = prompts.table("checklist")[self.lang if self.lang in ("zh", "en") else "en"]
        ask = asks.get(self.lang) or next(iter(asks.values()))
        async for event in self.model_turn(self.model.stream(
                [Message.system(ask), Message.user(self.task)], max_tokens=CHECKLIST_TOKENS), 0):
            yield event
        assert self.response is not None
        self.replies.pop()  # a list of behaviours, not work the answer checks should read
        self.checklist = checklist_items(self.response.message.content)
        yield Checklist(list(self.checklist))  # also when empty: sinks know the call ended
        if self.checklist:
            at = max((i for i, m in enumerate(messages) if m.role == "user"),
                     default=len(messages) - 1)
            items = "\n".join(f"{n}. {item}" for n, item in enumerate(self.checklist, 1))
            messages.insert(at + 1, Message.user(texts["added"].format(items=items).strip()))

    async def model_turn(self, chunks: AsyncIterator[Any], turn: int) -> AsyncIterator[Event]:
        """One model call as events (text as it streams, retries said); its reply is
        ``self.response`` afterwards and its usage is counted."""
        self.response = None
        draw = self.repairing(turn)  # None on most turns: the stream is read as it comes
        async for chunk in chunks if draw is None else sampled(chunks, draw):
            if type(chunk) is str:
                yield TokenDelta(chunk, turn)
            elif type(chunk) is ModelResponse:
                self.response = chunk
                self.replies.append(chunk.message.content + "".join(
                    f"\n{c.name} {c.arguments}" for c in chunk.message.tool_calls))
            else:
                yield ModelRetry(turn, chunk.attempt, chunk.reason, chunk.delay_s)
        assert self.response is not None, "a model stream ends with its ModelResponse"
        self.usage.add(self.response.usage)

    async def tool_turn(self, calls: Sequence[ToolCall], turn: int) -> AsyncIterator[Event]:
        """The calls of one turn: the approvals they need, asked together before any Action;
        then an ``Action`` each (as it will run: an edit shown); then all of them through the
        tool door. Their results are ``self.results`` afterwards, in order. A call that
        failed the same way twice in a row and is sent again is not run: the run stops."""
        streak = self.streak
        if streak.count >= streak.limit:  # only after two identical failures in a row
            for call in calls:
                if streak.blocked(call_key(call.name, call.arguments)):
                    tool = self.toolbox[call.name] if call.name in self.toolbox else None
                    self.guard.stuck(call, tool, streak.reason(streak.what_call(call.name)))
        if self.guard.active:  # approvals can only be needed then: no generator otherwise
            async for event in self.guard.gate(calls, self.toolbox):
                yield event
        for call in calls:
            yield Action(self.guard.shown(call), turn)
        self.results = results = await self.door.execute_all(calls)
        done = []
        for i, (call, res) in enumerate(zip(calls, results)):
            if self.agent.handoffs:
                res = results[i] = self.noticed(call, res)
            key = call_key(call.name, call.arguments)
            done.append((key, res.is_error, res.content))
            if not res.is_error:
                if streak.count and (key == streak.key
                                     or self._changes(call) and streak.changed(key)):
                    streak.count = 0  # it worked this time, or something new changed since
            elif note := streak.settle(key, True, streak.what_call(call.name)):
                results[i] = replace(res, content=res.content + note)
        self.learnt(done)

    def learnt(self, done: Sequence[tuple[str, bool, str]]) -> None:
        """Counts the turns in a row that learnt nothing (``answer_now``): ``done`` is each
        action of a turn - its key (``call_key``, ``code_key``), whether it failed, its result -
        and the turn learnt nothing when every one worked before with the same result again."""
        news = not done
        self.failed = any(failed for _, failed, _ in done)
        for key, failed, content in done:
            news = news or failed or self.known.get(key) != content
            if not failed:
                self.known[key] = content
        self.stale = 0 if news else self.stale + 1

    def repairing(self, turn: int) -> Sampling | None:
        """How the reply after a failed action is drawn (``repair_draw``), or None: the last
        turn's actions worked, or it had none."""
        return self.repair_draw(turn) if self.failed else None

    def repair_draw(self, seed: int) -> Sampling | None:
        """A repair's draw: the agent's ``repair_temperature``, seeded (so a run repeats), where
        the model is greedy and nothing else set the sampling (``Vote``'s runs); else None,
        the model's own. A greedy model shown its error tends to write the same code, call or
        plan again - the failure it just read changes too little of its prompt - and the loop
        stop then ends the run (issue 26)."""
        temperature = getattr(self.agent, "repair_temperature", None)
        if not temperature or current() is not None \
                or getattr(self.agent_model, "temperature", None) != 0:
            return None
        return Sampling(float(temperature), seed=seed)

    @property
    def answer_now(self) -> bool:
        """Whether the next reply must answer instead of calling (the protocol's
        ``answer_only``): the model made calls whose results it already had, told so, and then
        did it again - a small model does that to the turn limit (issue 26: ``48 - 18`` sent
        nine times, the answer 30 in hand from the first). Finished with what it has."""
        return self.stale >= STALE_TURNS

    def _changes(self, call: ToolCall) -> bool:
        """Whether ``call`` (which worked) may have changed what the failing action acts on -
        a file written, a command run: the same action sent after it is a new try, not a loop.
        Tools that say ``side_effects=False`` (a calculator, a page tried) do not."""
        tool = self.toolbox[call.name] if call.name in self.toolbox else None
        return bool(getattr(tool, "side_effects", False))

    @property
    def ended(self) -> bool:
        """Whether the run is over though its loop did not end it: a handoff was made (the
        loop stops after the turn; its result names the target)."""
        return self.handoff is not None

    def noticed(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """A handoff's transfer call is taken (the first of the run), or refused once the
        chain has made ``MAX_HANDOFFS``."""
        from .handoffs import MAX_HANDOFFS

        handoff = self.agent.handoffs.get(call.name)
        if handoff is None or result.is_error:
            return result
        if self.depth >= MAX_HANDOFFS:
            return ToolResult(f"Error: {MAX_HANDOFFS} handoffs were made already; answer the "
                              "user yourself.", True, retryable=False)
        if self.handoff is None:
            self.handoff = (handoff, str(call.arguments.get("reason", "")))
        return result

    def output_note(self) -> str:
        """What the system prompt adds for a typed result ("" without one)."""
        return self.output.instructions(self.lang) if self.output is not None else ""

    def checked(self, answer: str, value: Any = None, has_value: bool = False) -> str | None:
        """The final answer against the run's ``output_type``: None when it holds (the value is
        ``self.value``), else the correction to send back to the model. ``value``: the object
        the code gave (CodeAct's ``final_answer(obj)``). Raises ``OutputError`` once
        ``output_retries`` corrections have been sent. Then the agent's answer checks
        (``Agent.answer_check``): each may send one reminder a run; after it, the answer stands."""
        if self.output is None:
            return self._reminder(answer)
        try:
            self.value = (self.output.validate(value) if has_value else
                          self.output.parse(answer))
            return self._reminder(answer)
        except OutputError as e:
            if self.retries_left <= 0:
                raise
            self.retries_left -= 1
            return self.output.correction(e, self.lang)

    def _reminder(self, answer: str) -> str | None:
        answering = Answering(answer, self.task, self.lang, tuple(self.replies),
                              tuple(self.checklist))
        for check in list(self.checks_left):
            note = check(answering)
            if note:
                self.checks_left.remove(check)
                return str(note)
        return None

    def code_door(self) -> Reported:
        """The tool door as model-written code reaches it (CodeAct's sandbox bridge): each
        call the code makes is an ``Action`` and an ``Observation`` of this run, as a call of
        a ReAct turn is, so sinks show it and tracing gives it a span."""
        return Reported(self.door, self.guard.emit,
                        self.noticed if self.agent.handoffs else None)

    async def finish(self, answer: str | None, status: Status, turns: int, actions: int,
                     messages: list[Message], error: str | None = None,
                     sandbox: str | None = None) -> RunFinished:
        """The run's ``RunFinished``: memory keeps what it keeps, the guard closes the run
        (audit, journal status)."""
        result = Result(answer, status, turns, actions, self.usage,
                        time.perf_counter() - self.started, messages, error, sandbox,
                        self.value if status == "done" else None)
        if self.handoff is not None and status == "done":  # the target runs next (stream)
            handoff, reason = self.handoff
            result.handoff = handoff.agent.name
            self.agent.__dict__.setdefault("_handed", {})[self.run_id] = (
                handoff, reason, messages, self.guard.meter)
        return RunFinished(self.guard.finish(await self.memory.finish(result, self.agent_model)))


class Reported(Toolbox):
    """A run's tool door whose calls are reported as events as they happen (``emit``: the run's
    outbox, pumped while the code runs). ``turn`` is the turn the calls belong to. A call is
    shown as it runs (after its approval, edits applied); a refused one with its refusal."""

    def __init__(self, door: Toolbox, emit: Callable[[Event], None],
                 noticed: Callable[[ToolCall, ToolResult], ToolResult] | None = None):
        self.__dict__.update(door.__dict__)  # the same tools, behind the same run
        self.emit, self.turn, self.noticed = emit, 0, noticed
        self._shown: set[str] = set()

    async def execute(self, call: ToolCall, *, in_thread: bool = False,
                      run: ToolDoor | None = None) -> ToolResult:
        result = await super().execute(call, in_thread=in_thread, run=run)
        if self.noticed is not None:  # a handoff the code asked for
            result = self.noticed(call, result)
        if call.id not in self._shown:  # refused before it ran
            self.emit(Action(call, self.turn))
        self._shown.discard(call.id)
        self.emit(Observation(call.id, call.name, result.content, result.is_error, self.turn,
                              result.duration_s))
        return result

    async def _execute(self, call: ToolCall, in_thread: bool) -> ToolResult:
        self._shown.add(call.id)
        self.emit(Action(call, self.turn))
        return await super()._execute(call, in_thread)
