"""Streamed plans (LLMCompiler): a step is dispatched as soon as its JSON object is complete.

``StepScanner`` reads the planner's reply as it streams and hands out the text of each step
object the moment its closing brace arrives - inside ``{"steps": [...]}`` (or ``"tasks"`` /
``"plan"``, or a bare list), strings and escapes respected. ``read_step`` checks the new step
against the steps before it: a streamed step may only depend on earlier steps, which also rules
out cycles, so a step that passes can run at once - before the rest of the plan has arrived.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import safe_json
from ..tools.base import Toolbox
from .schema import PlanInvalid, Step, _normalise, _plan_model, infer_dependencies
from .validate import check

STEP_KEYS = ("steps", "tasks", "plan")


class StepScanner:
    """Incremental scanner: ``feed(chunk)`` returns the step objects completed by that chunk."""

    def __init__(self) -> None:
        self.buf = ""
        self.pos = 0
        self.stack: list[str] = []
        self.in_string = False
        self.escaped = False
        self.string_start = 0
        self.last_string = ""
        self.steps_depth: int | None = None  # depth of the steps array's items; -1 once closed
        self.item_start: int | None = None

    def feed(self, chunk: str) -> list[str]:
        out = []
        self.buf += chunk
        buf, stack = self.buf, self.stack
        while self.pos < len(buf):
            c = buf[self.pos]
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == '"':
                    self.in_string = False
                    self.last_string = buf[self.string_start + 1:self.pos]
            elif c == '"':
                self.in_string, self.string_start = True, self.pos
            elif c in "{[":
                if c == "[" and self.steps_depth is None and (
                        not stack or (stack == ["{"] and self.last_string in STEP_KEYS)):
                    self.steps_depth = len(stack) + 1
                if c == "{" and len(stack) == self.steps_depth:
                    self.item_start = self.pos
                stack.append(c)
            elif c in "}]" and stack:
                stack.pop()
                if c == "}" and len(stack) == self.steps_depth and self.item_start is not None:
                    out.append(buf[self.item_start:self.pos + 1])
                    self.item_start = None
                elif c == "]" and self.steps_depth is not None and len(stack) < self.steps_depth:
                    self.steps_depth = -1  # the steps array is closed
            self.pos += 1
        return out


def read_step(text: str, before: Sequence[Step], toolbox: Toolbox, *, agent_steps: bool = False,
              finished: Mapping[str, Any] | None = None, constrained: bool = False) -> Step:
    """The step in ``text`` if it can run after ``before`` (the steps streamed so far), else
    ``PlanInvalid`` saying why. ``constrained``: as in ``parse_plan``."""
    from pydantic import ValidationError

    try:
        raw = safe_json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanInvalid(f"step {len(before) + 1} is not valid JSON ({e.msg})") from None
    try:
        model = _plan_model().model_validate(_normalise({"steps": [raw]})).steps[0]
    except ValidationError as e:
        lines = [f"- step {len(before) + 1}.{'.'.join(str(p) for p in err['loc'][2:])}: {err['msg']}"
                 for err in e.errors()]
        raise PlanInvalid("\n".join(lines)) from None
    step = Step(model.id, model.description, model.tool, model.args, model.instruction,
                tuple(model.depends_on))
    if constrained:
        (step,) = infer_dependencies([step], {s.id for s in before} | {step.id})
    errors = check([*before, step], toolbox, agent_steps=agent_steps, finished=finished or {})
    if errors:
        raise PlanInvalid("\n".join(f"- {e}" for e in errors))
    return step
