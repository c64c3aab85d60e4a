"""The lines a plan view writes: what runs a step, a sub-agent's event, an approval. Plain text
(no rich), so the log view, the live tree and tests share one wording."""

from __future__ import annotations

import json
from typing import Any

from ..events import (Action, ApprovalDecided, ApprovalRequested, CodeExecution, Error, Event,
                      ExecutionFinished, FinalAnswer, Observation, PlanCreated, Replanned,
                      RunStarted, StepFailed, StepFinished, StepSkipped, Thought)

MARKS = {"pending": ("○", "dim"), "running": ("◐", "bold yellow"), "retrying": ("↻", "yellow"),
         "done": ("✔", "bold green"), "failed": ("✘", "bold red"), "skipped": ("⊘", "dim")}
WIDTH = 100  # characters of a result, an argument list or a nested line shown
NESTED_SHOWN = 8  # nested lines kept under a step in the live view (the log shows all)


def _cut(text: Any, width: int = WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def runs(step: dict[str, Any]) -> str:
    """What runs a step: ``calculator(operation="add", a=$step1, b=$step2)`` or ``agent: ...``."""
    if step.get("tool") is None:
        return f"agent: {_cut(step.get('instruction') or '', WIDTH)}"
    args = ", ".join(f"{k}={_arg(v)}" for k, v in (step.get("args") or {}).items())
    return f"{step['tool']}({_cut(args)})"


def _arg(value: Any) -> str:
    """An argument as a step line shows it: ``$step1`` bare, anything else as JSON."""
    if isinstance(value, str) and value.startswith("$"):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def nested_line(event: Event) -> str | None:
    """One line for a sub-agent's event, or None for the ones not worth a line (tokens...)."""
    kind = type(event)
    if kind is RunStarted:
        return f"▶ {event.agent}: {_cut(event.task, 60)}"
    if kind is Thought:
        return f"Thought: {_cut(event.text)}"
    if kind is Action:
        args = json.dumps(event.call.arguments, ensure_ascii=False, default=str)
        return f"Action: {event.call.name} {_cut(args)}"
    if kind is Observation:
        return f"Observation{' (error)' if event.is_error else ''}: {_cut(event.content)}"
    if kind is CodeExecution:
        return f"Code: {_cut(event.code)}"
    if kind is ExecutionFinished:
        return f"Output: {_cut(event.observation or event.stdout or event.error or '')}"
    if kind is FinalAnswer:
        return f"Final Answer: {_cut(event.text)}"
    if kind in (ApprovalRequested, ApprovalDecided):
        return approval_line(event)
    if kind is Error:
        return f"{'Warning' if event.recoverable else 'Error'}: {_cut(event.message)}"
    if kind is PlanCreated:
        return f"plan: {len(event.steps)} steps"
    if kind is Replanned:
        return f"re-plan {event.replan}: {len(event.steps)} steps"
    if kind in (StepFinished, StepFailed, StepSkipped):
        mark = {StepFinished: "✔", StepFailed: "✘", StepSkipped: "⊘"}[kind]
        detail = getattr(event, "result", None) or getattr(event, "error", None) or event.reason
        return f"{mark} {event.step_id} → {_cut(detail, 60)}"
    return None


def approval_line(event: ApprovalRequested | ApprovalDecided) -> str:
    """``? approval: calculator {...} (why)`` while it waits; then what was decided."""
    if type(event) is ApprovalRequested:
        return f"? approval: {event.tool} {_cut(_args(event.arguments))}  ({event.reason})"
    if event.verdict == "edited":
        return f"✎ {event.tool}: edited ({event.by}), runs with {_cut(_args(event.arguments))}"
    if event.verdict == "approved":
        return f"✔ {event.tool}: approved ({event.by})"
    return f"✘ {event.tool}: rejected ({event.by}){f': {_cut(event.reason)}' if event.reason else ''}"


def _args(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, default=str)
