"""The event vocabulary: the one contract between agents and whatever shows or stores a run.

Agents emit these and never print. Console, JSONL trace, web and OpenTelemetry sinks all read
the same stream. Events are small frozen dataclasses; ``to_dict``/``event_from_dict`` round-trip
them through JSON so a trace file can be replayed into any sink.

Every event an agent emits is addressable: ``run_id`` (the run), ``seq`` (1, 2, ... in the order
the run emitted them) and ``ts`` (Unix time). That one numbering is what the trace, the journal,
the audit log, OpenTelemetry spans and the web page's ``Last-Event-ID`` share. They are stamped
once, where the run's stream leaves the agent (``agents.base``), not by each loop; an event built
by hand, or read from a trace written before they existed, has them as None. They take no part
in ``==``: two runs that did the same thing emitted equal events.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from .messages import ToolCall
from .result import Result


@dataclass(frozen=True, slots=True)
class Event:
    kind: ClassVar[str] = "event"
    run_id: str | None = field(default=None, kw_only=True, compare=False, repr=False)
    seq: int | None = field(default=None, kw_only=True, compare=False, repr=False)
    ts: float | None = field(default=None, kw_only=True, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.kind}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in _STAMP:  # unstamped: the dict it always was
                continue
            d[f.name] = v.to_dict() if hasattr(v, "to_dict") else v
        return d


_STAMP = ("run_id", "seq", "ts")

def stamp(event: Event, run_id: str, seq: int, ts: float) -> Event:
    """``event`` numbered as event ``seq`` of run ``run_id``. A fresh event is stamped in
    place (no copy per event); one stamped already (a sub-agent's event an outer agent passes
    on as its own) is copied, so the sub-agent's numbering stays as it was."""
    if event.seq is not None:
        event = replace(event)
    object.__setattr__(event, "run_id", run_id)
    object.__setattr__(event, "seq", seq)
    object.__setattr__(event, "ts", ts)
    return event


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    """A run begins. ``sandbox`` names what runs the model's code (CodeAct: the backend and what
    it confines, e.g. bwrap's namespaces); None for agents that run no code, and in traces
    written before it existed."""

    kind: ClassVar[str] = "run_started"
    task: str
    agent: str
    model: str
    sandbox: str | None = None


@dataclass(frozen=True, slots=True)
class TurnStarted(Event):
    kind: ClassVar[str] = "turn_started"
    turn: int


@dataclass(frozen=True, slots=True)
class TokenDelta(Event):
    """A piece of model output as it streams."""

    kind: ClassVar[str] = "token"
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class ModelRetry(Event):
    """The model call failed transiently and is retried; text streamed so far in this turn is void."""

    kind: ClassVar[str] = "model_retry"
    turn: int
    attempt: int
    reason: str
    delay_s: float


@dataclass(frozen=True, slots=True)
class Thought(Event):
    kind: ClassVar[str] = "thought"
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class Action(Event):
    """A tool call the agent is about to run."""

    kind: ClassVar[str] = "action"
    call: ToolCall
    turn: int


@dataclass(frozen=True, slots=True)
class Observation(Event):
    """What a tool call returned (or why it failed) - exactly what the model will read."""

    kind: ClassVar[str] = "observation"
    call_id: str
    name: str
    content: str
    is_error: bool
    turn: int
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class FinalAnswer(Event):
    kind: ClassVar[str] = "final_answer"
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class Error(Event):
    """Something went wrong. ``recoverable`` errors (a reply that did not parse) were fed back to
    the model and the run goes on; the others end the run with status "error"."""

    kind: ClassVar[str] = "error"
    message: str
    turn: int
    recoverable: bool = False


@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    result: Result

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.kind}
        if self.seq is not None:
            d.update(run_id=self.run_id, seq=self.seq, ts=self.ts)
        d["result"] = self.result.to_dict(with_messages=True)
        return d


@dataclass(frozen=True, slots=True)
class ApprovalRequested(Event):
    """A gated call waits for a human (or ``approve=``) before anything of it is shown or run.
    ``digest`` is the SHA-256 of tool + arguments the decision is bound to."""

    kind: ClassVar[str] = "approval_requested"
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    digest: str


@dataclass(frozen=True, slots=True)
class ApprovalDecided(Event):
    """``verdict``: "approved", "rejected" (``reason`` goes to the model) or "edited" (the call
    runs with ``arguments``); ``by``: "terminal", "callback" or "auto"."""

    kind: ClassVar[str] = "approval_decided"
    call_id: str
    tool: str
    verdict: str
    reason: str
    arguments: dict[str, Any] | None
    digest: str
    by: str


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (RunStarted, TurnStarted, TokenDelta, ModelRetry, Thought, Action, Observation,
                FinalAnswer, Error, RunFinished, ApprovalRequested, ApprovalDecided)
}


def event_from_dict(d: dict[str, Any]) -> Event:
    """Rebuild an event from ``Event.to_dict()`` output (a JSONL trace line)."""
    d = dict(d)
    cls = EVENT_TYPES[d.pop("type")]
    if cls is Action:
        c = d["call"]
        d["call"] = ToolCall(c["id"], c["name"], c.get("arguments") or {}, c.get("parse_error"))
    elif cls is RunFinished:
        d["result"] = Result.from_dict(d["result"])
    return cls(**d)


# -- Plan-and-Execute ----------------------------------------------------------------------------
# A plan is a DAG of steps. ``steps`` below is that DAG as plain JSON data: one dict per step with
# "id", "description", "tool" + "args" (or "instruction" for a step run by the step agent) and
# "depends_on". Step events name the step by its id ("step3"); ``attempt`` counts from 1.


@dataclass(frozen=True, slots=True)
class PlanCreated(Event):
    """The planner's first valid plan. ``answer`` is the plan's answer template ("$step4"), or
    None when the answer will be written by one more model call from the results."""

    kind: ClassVar[str] = "plan_created"
    steps: list[dict[str, Any]]
    turn: int
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class StepStarted(Event):
    """A step starts: ``tool`` with its arguments, references already resolved, or (``tool`` is
    None) the step agent with ``args == {"instruction": ...}``."""

    kind: ClassVar[str] = "step_started"
    step_id: str
    description: str
    tool: str | None
    args: dict[str, Any]
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class StepFinished(Event):
    kind: ClassVar[str] = "step_finished"
    step_id: str
    result: str
    attempt: int = 1
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class StepRetried(Event):
    """Attempt ``attempt`` of the step failed; it runs again after ``delay_s``."""

    kind: ClassVar[str] = "step_retried"
    step_id: str
    attempt: int
    error: str
    delay_s: float


@dataclass(frozen=True, slots=True)
class StepFailed(Event):
    """The step failed for good (after ``attempts`` tries); its dependents are skipped."""

    kind: ClassVar[str] = "step_failed"
    step_id: str
    error: str
    attempts: int


@dataclass(frozen=True, slots=True)
class StepSkipped(Event):
    kind: ClassVar[str] = "step_skipped"
    step_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Replanned(Event):
    """A step failed, so the planner was asked again: ``steps`` is the plan for the remaining
    work (it may use the results of steps that finished as ``$stepN``)."""

    kind: ClassVar[str] = "replanned"
    replan: int
    reason: str
    steps: list[dict[str, Any]]
    turn: int
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Nested(Event):
    """An event of a sub-agent that runs step ``step_id`` (a step agent, or an agent used as a
    tool). Nesting is flat: a sub-sub-agent's event is one ``Nested`` with ``depth`` 2 and the
    path of step ids, e.g. ``"step2/step1"``."""

    kind: ClassVar[str] = "nested"
    step_id: str
    depth: int
    event: Event

    def __post_init__(self) -> None:  # read back from a trace: the inner event is a dict
        if isinstance(self.event, dict):
            object.__setattr__(self, "event", event_from_dict(self.event))


EVENT_TYPES.update({cls.kind: cls for cls in (PlanCreated, StepStarted, StepFinished, StepRetried,
                                              StepFailed, StepSkipped, Replanned, Nested)})


# -- CodeAct ---------------------------------------------------------------------------------------
# One code block of a reply is one execution in the run's sandbox: ``CodeExecution`` before it
# runs, ``ExecutionFinished`` after. ``observation`` is exactly what the model reads about it.


@dataclass(frozen=True, slots=True)
class CodeExecution(Event):
    """A code block the agent is about to run (``index`` counts the blocks of one reply from 1)."""

    kind: ClassVar[str] = "code"
    code: str
    turn: int
    index: int = 1


@dataclass(frozen=True, slots=True)
class ExecutionFinished(Event):
    """What running a code block gave: its stdout, the trimmed traceback (``error``) or why the
    worker was killed (``killed_reason``), and the observation text built from them."""

    kind: ClassVar[str] = "execution"
    stdout: str
    error: str | None
    turn: int
    duration_s: float = 0.0
    stderr: str = ""
    killed_reason: str | None = None
    observation: str = ""


EVENT_TYPES.update({cls.kind: cls for cls in (CodeExecution, ExecutionFinished)})


@dataclass(frozen=True, slots=True)
class HandedOff(Event):
    """The agent that spoke so far hands the conversation to another (``handoffs=``): its run
    ends here (in place of its ``RunFinished``), the other's begins (its own ``RunStarted``),
    and the other's answer ends the run (one ``RunFinished`` for the chain).
    ``depth``: handoffs so far in this chain (bounded: ``tao.handoffs.MAX_HANDOFFS``)."""

    kind: ClassVar[str] = "handed_off"
    source: str
    target: str
    reason: str = ""
    depth: int = 1


EVENT_TYPES[HandedOff.kind] = HandedOff


@dataclass(frozen=True, slots=True)
class Checklist(Event):
    """What a user of the result will check, written by the model before its first turn
    (``Agent.checklist``): one behaviour an item - what the user does, what they should see.
    The run is then asked to check each before it answers."""

    kind: ClassVar[str] = "checklist"
    items: list[str]
    turn: int = 0


EVENT_TYPES[Checklist.kind] = Checklist


@dataclass(frozen=True, slots=True)
class Checked(Event):
    """A run's work checked after it ended, by checks the run did not write (``tao.Attempts``:
    the coder's project against ``Workspace.verify``): ``problems`` found (none: it passed);
    ``again``: whether another attempt starts, from the state before the first."""

    kind: ClassVar[str] = "checked"
    attempt: int
    attempts: int
    problems: list[str]
    again: bool = False
    text: str = ""  # the same, worded for a person in the task's language


EVENT_TYPES[Checked.kind] = Checked
