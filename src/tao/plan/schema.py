"""Plans: their JSON schema, parsing the planner's reply, and checking it before anything runs.

A plan is ``{"steps": [...], "answer": "..."}``. Each step has an ``id`` (``step1``, ``step2``...),
a ``description``, what runs it - a ``tool`` with ``args`` or, when the agent has a step agent, an
``instruction`` - and ``depends_on``. ``$stepN`` in the args (or the instruction) is the result of
step N. ``answer`` is optional: a template such as ``"He has $step4 yuan left"`` that becomes the
final answer with no further model call; a step with ``"final": true`` means ``"answer": "$stepN"``.
Without either, the agent asks the model once more to write the answer from the results.

Forms that models (and the seeds) write are read too: a bare list of steps, ``"tasks"`` or
``"plan"`` for ``"steps"``, numeric ids (``1`` is ``step1``), ``dependencies`` for ``depends_on``,
``arguments`` for ``args``, and the seeds' calculator shape ``{"operation": "multiply",
"operandA": 3, "operandB": "$step1"}``, which is the ``calculator`` tool.

Everything wrong with a plan is reported at once, in words the planner can act on
(``PlanInvalid``); pydantic checks the structure and is imported only when a plan is parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .. import safe_json
from ..tools.base import Toolbox
from .references import references
from .validate import check

STEP_ID = re.compile(r"step\d+")
_LOOSE_ID = re.compile(r"\s*(?:step[\s_-]*)?#?(\d+)\s*", re.IGNORECASE)
_LOOSE_REF = re.compile(r"\s*(?:\$|step|\$step)\s*(\d+)\s*", re.IGNORECASE)
REFERENCE_SCHEMA = {"type": "string", "pattern": "^[$]step[0-9]+$"}


class PlanInvalid(ValueError):
    """The planner's reply is not a usable plan; the message lists every problem found."""


@dataclass(frozen=True, slots=True)
class Step:
    id: str
    description: str = ""
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    instruction: str | None = None
    depends_on: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "description": self.description}
        if self.tool is not None:
            d["tool"], d["args"] = self.tool, self.args
        if self.instruction is not None:
            d["instruction"] = self.instruction
        d["depends_on"] = list(self.depends_on)
        return d


@dataclass(slots=True)
class Plan:
    steps: list[Step]
    answer: str | None = None  # a template with $stepN references; None: a synthesis call
    #: the planner wrote the answer (a template, or a step marked final); False when it was read
    #: off the plan's shape (the one step nothing depends on) or is missing: such a plan is
    #: reviewed once it ran (``PlanExecuteAgent(max_reviews=)``)
    answer_given: bool = True

    def to_dicts(self) -> list[dict[str, Any]]:
        """The DAG as plain JSON data (what ``PlanCreated`` carries)."""
        return [s.to_dict() for s in self.steps]

    def to_json(self) -> str:
        d: dict[str, Any] = {"steps": self.to_dicts()}
        if self.answer is not None:
            d["answer"] = self.answer
        return json.dumps(d, ensure_ascii=False)


# -- the schema the model is asked to follow ------------------------------------------------------

#: The most steps a plan written under a grammar may have.
MAX_CONSTRAINED_STEPS = 12


def plan_schema(toolbox: Toolbox, agent_steps: bool = False, *,
                constrained: bool = False, review: bool = False) -> dict[str, Any]:
    """The JSON schema of a plan for these tools, for ``response_format`` (and, on the embedded
    model, a grammar). Each tool's arguments keep their own schema but also accept a reference.

    ``constrained``: the plan is decoded under a grammar (the embedded model), where a small
    model's slips can be made impossible rather than reported:

    - the steps are bounded (asked to fix a plan, the 0.5B model once repeated steps until
      ``max_tokens`` cut the JSON);
    - ``depends_on`` is not written but read off the references (``parse_plan(constrained=
      True)``): it has exactly one valid value, and the 0.5B model failed validation on it in
      3 of 16 tasks;
    - there is no answer template: the answer is the result of the step nothing depends on
      (or, when there are several, one synthesis call). Small models wrote numbers of their
      own into templates ("32" for 15 + 27), arithmetic ("$50 - $75 = $25"), and copied the
      worked example's story ("图书馆现在有 42 本书" for 15 + 27).

    ``review``: the reply to a review (``Planner.review``), where ``{"answer": "$step3"}`` alone
    (no steps) says the results answer the task."""
    ids = {"type": "string", "pattern": "^step[0-9]+$"}
    common = {"id": ids, "description": {"type": "string"}}
    deps = {} if constrained else \
        {"depends_on": {"type": "array", "items": ids}, "final": {"type": "boolean"}}
    need = ["depends_on"] if not constrained else []
    variants = []
    for t in toolbox:
        params = json.loads(json.dumps(t.spec.parameters))
        params["properties"] = {k: {"anyOf": [v, REFERENCE_SCHEMA]}
                                for k, v in params.get("properties", {}).items()}
        variants.append({"type": "object", "additionalProperties": False,
                         "properties": {**common, "tool": {"const": t.name}, "args": params, **deps},
                         "required": ["id", "description", "tool", "args", *need]})
    if agent_steps:
        variants.append({"type": "object", "additionalProperties": False,
                         "properties": {**common, "instruction": {"type": "string"}, **deps},
                         "required": ["id", "description", "instruction", *need]})
    step = variants[0] if len(variants) == 1 else {"anyOf": variants}
    steps = {"type": "array", "minItems": 1, "items": step}
    if constrained:
        steps["maxItems"] = MAX_CONSTRAINED_STEPS
    plan = {"type": "object", "additionalProperties": False, "required": ["steps"],
            "properties": {"steps": steps} if constrained and not review
            else {"steps": steps, "answer": {"type": "string"}}}
    if review:  # the answer alone: nothing is left to do
        plan["required"] = []
        steps.pop("minItems")
    return plan


def response_format(toolbox: Toolbox, agent_steps: bool = False, *,
                    constrained: bool = False, review: bool = False) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {
        "name": "plan", "schema": plan_schema(toolbox, agent_steps, constrained=constrained,
                                              review=review)}}


def infer_dependencies(steps: list[Step], in_plan: set[str]) -> list[Step]:
    """Each step depending on exactly the steps of ``in_plan`` whose results it uses (results of
    steps that ran before need no dependency; a reference to a step that is nowhere is left for
    ``check`` to report)."""
    out = []
    for s in steps:
        used = references(s.args) + references(s.instruction or "")
        out.append(Step(s.id, s.description, s.tool, s.args, s.instruction,
                        tuple(r for r in used if r in in_plan and r != s.id)))
    return out


# -- reading the reply ----------------------------------------------------------------------------

def load_json(text: str) -> Any:
    """The JSON value in a reply, tolerating code fences and prose around one object or list."""
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fence:
        body = fence.group(1).strip()
    try:
        return safe_json.loads(body)  # deep nesting, huge numbers: a JSONDecodeError too
    except json.JSONDecodeError as first:
        starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
        if starts:
            try:
                value, _ = safe_json.raw_decode(body, min(starts))
                return value
            except json.JSONDecodeError:
                pass
        clip = body if len(body) <= 200 else body[:200] + "..."
        raise PlanInvalid(f"the reply is not valid JSON ({first.msg} at character {first.pos} "
                          f"of {clip!r})") from None


def _loose_id(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"step{value}"
    if isinstance(value, str) and (m := _LOOSE_ID.fullmatch(value)):
        return f"step{m.group(1)}"
    return value


def _operand(value: Any) -> Any:
    if isinstance(value, str) and (m := _LOOSE_REF.fullmatch(value)):
        return f"$step{m.group(1)}"
    return value


def _normalise_step(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    d = dict(raw)
    for alias in ("dependencies", "deps", "dependsOn"):
        if alias in d and "depends_on" not in d:
            d["depends_on"] = d.pop(alias)
    if "arguments" in d and "args" not in d:
        d["args"] = d.pop("arguments")
    if "tool_name" in d and "tool" not in d:
        d["tool"] = d.pop("tool_name")
    if "operation" in d and "tool" not in d:  # the seeds' calculator shape
        d["tool"] = "calculator"
        d["args"] = {"operation": d.pop("operation"), "a": _operand(d.pop("operandA", None)),
                     "b": _operand(d.pop("operandB", None))}
    if "id" in d:
        d["id"] = _loose_id(d["id"])
    deps = d.get("depends_on")
    if isinstance(deps, (str, int)) and not isinstance(deps, bool):
        deps = [deps]
    if isinstance(deps, list):
        d["depends_on"] = [_loose_id(x) for x in deps]
    elif deps is None:
        d["depends_on"] = []
    return d


def _normalise(value: Any) -> Any:
    if isinstance(value, list):
        value = {"steps": value}
    if isinstance(value, dict):
        value = dict(value)
        for alias in ("tasks", "plan"):
            if alias in value and "steps" not in value:
                value["steps"] = value.pop(alias)
        if isinstance(value.get("steps"), list):
            value["steps"] = [_normalise_step(s) for s in value["steps"]]
    return value


@cache
def _plan_model() -> Any:
    from pydantic import BaseModel, ConfigDict, Field

    class StepModel(BaseModel):
        model_config = ConfigDict(extra="ignore")
        id: str
        description: str = ""
        tool: str | None = None
        args: dict[str, Any] = Field(default_factory=dict)
        instruction: str | None = None
        depends_on: list[str] = Field(default_factory=list)
        final: bool = False

    class PlanModel(BaseModel):
        model_config = ConfigDict(extra="ignore")
        steps: list[StepModel]
        answer: str | None = None

    return PlanModel


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the plan"


def parse_plan(text: str, toolbox: Toolbox, *, agent_steps: bool = False,
               finished: Mapping[str, Any] | None = None, constrained: bool = False,
               review: bool = False) -> Plan:
    """The plan in a planner's reply, checked against the tools; ``PlanInvalid`` lists what is
    wrong. ``finished`` holds the results of steps run before (a re-plan may use them).
    ``constrained``: written under a grammar - ``depends_on`` is read off the references and the
    answer is the one step nothing depends on (see ``plan_schema``). ``review``: a reply to a
    review, where ``{"answer": "$step3"}`` alone is a plan with no steps left."""
    from pydantic import ValidationError

    value = _normalise(load_json(text))
    if not isinstance(value, dict):
        raise PlanInvalid(f'expected a JSON object {{"steps": [...]}}, got {type(value).__name__}')
    if review and "steps" not in value and finished:
        value["steps"] = []
    try:
        model = _plan_model().model_validate(value)
    except ValidationError as e:
        lines = [f"- {_where(err['loc'])}: {err['msg']}"
                 + ("" if err["type"] == "missing" else f" (got {err.get('input')!r})")
                 for err in e.errors()]
        raise PlanInvalid("the plan does not have the required shape:\n" + "\n".join(lines)) from None
    steps = [Step(s.id, s.description, s.tool, s.args, s.instruction, tuple(s.depends_on))
             for s in model.steps]
    if constrained:
        steps = infer_dependencies(steps, {s.id for s in steps} - set(finished or {}))
    answer = model.answer
    given = answer is not None or any(s.final for s in model.steps)
    if constrained and not given:
        sinks = [s.id for s in steps if not any(s.id in t.depends_on for t in steps)]
        answer = f"${sinks[0]}" if len(sinks) == 1 else None
    finals = [s.id for s in model.steps if s.final]
    errors = []
    if len(finals) > 1:
        errors.append(f"only one step can be final, but {', '.join(finals)} are marked final")
    elif finals and answer is None:
        answer = f"${finals[0]}"
    errors += check(steps, toolbox, agent_steps=agent_steps, finished=finished or {})
    if answer is not None:
        known = {s.id for s in steps} | set(finished or {})
        errors += [f"the answer uses ${r}, which is not a step of the plan"
                   for r in references(answer) if r not in known]
    if errors:
        raise PlanInvalid("\n".join(f"- {e}" for e in errors))
    return Plan(steps, answer, given)
