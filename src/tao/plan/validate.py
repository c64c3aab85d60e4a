"""The checks a plan passes before anything runs, each failure worded for the planner to fix.

- every step has a ``stepN`` id, used once, and not the id of a step that already ran;
- it runs either a known tool (with argument names the tool has) or, when the agent has a step
  agent, an instruction;
- ``depends_on`` names steps of the plan (a *missing* dependency) and, for a tool step, only steps
  whose result it uses (an *extra* one: it would only hold the step back);
- every ``$stepN`` it uses is in its ``depends_on`` (or already ran);
- the dependencies form no cycle (Kahn's algorithm; the cycle found is spelled out);
- a tool's argument does not name a step's result without its ``$`` (``480 - step1.result``, or
  ``step7`` in an expression): the tool would get the words, and fail or compute the wrong thing
  (the 1.5B wrote both, and repeated them through every re-plan that only saw the tool's error);
  nor as ``$1`` while there is a step1 (a number, or step1's result?).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .references import references

#: ``step3`` / ``step3.result`` / ``step3["result"]`` not preceded by ``$`` (or ``${``)
BARE = re.compile(r"(?<![\w${])(step\d+)(?:\.\w+|\[[^\]]*\])?(?![\w}])")
#: ``$3``: step 3's result, or an amount of money (``calculate`` reads ``$40`` as 40)
NUMBERED = re.compile(r"\$(\d+)(?![\d.])")

if TYPE_CHECKING:
    from ..tools.base import Toolbox
    from .schema import Step


def check(steps: Sequence[Step], toolbox: Toolbox, *, agent_steps: bool = False,
          finished: Mapping[str, Any] = {}) -> list[str]:  # noqa: B006 - never modified
    """Every problem of the plan, as sentences; an empty list when it can run."""
    from .schema import STEP_ID

    errors: list[str] = []
    if not steps:  # after a failure, "nothing is left to do" is a fair plan
        return [] if finished else ["the plan has no steps"]
    ids = [s.id for s in steps]
    seen: set[str] = set()
    for s in steps:
        if not STEP_ID.fullmatch(s.id):
            errors.append(f"step id {s.id!r} is not of the form step1, step2, ...")
        if s.id in seen:
            errors.append(f"two steps have the id {s.id}; give each step its own id")
        seen.add(s.id)
        if s.id in finished:
            errors.append(f"{s.id} already ran (its result is available as ${s.id}); give new "
                          f"steps new ids")
    in_plan = set(ids)
    for s in steps:
        errors += _check_runner(s, toolbox, agent_steps)
        used = references(s.args) + references(s.instruction or "")
        for d in s.depends_on:
            if d == s.id:
                errors.append(f"{s.id} depends on itself")
            elif d not in in_plan and d not in finished:
                errors.append(f"{s.id} depends on {d}, which is not a step of the plan")
            elif s.tool is not None and d not in used:
                errors.append(f"{s.id} depends on {d} but its args never use ${d}; remove {d} "
                              f"from its depends_on, or use ${d} where its result is needed")
        for r in used:
            if r == s.id:
                errors.append(f"{s.id} uses its own result ${r}")
            elif r not in in_plan and r not in finished:
                errors.append(f"{s.id} uses ${r}, but there is no step {r}")
            elif r not in s.depends_on and r not in finished:
                errors.append(f"{s.id} uses ${r} but {r} is not in its depends_on; add it")
        if s.tool is not None:
            errors += _bare_names(s, in_plan | set(finished))
    cycle = find_cycle(steps)
    if cycle:
        errors.append("the steps depend on each other in a cycle: " + " → ".join(cycle)
                      + " (each waits for the next); a plan must be a DAG")
    return errors


def _bare_names(s: Step, known: set[str]) -> list[str]:
    """A step's result named without its ``$`` in a string argument, or as ``$N`` beside a stepN.

    Only names of steps that exist are taken: ``$40`` in a plan of five steps is money."""
    errors = []
    for name, value in s.args.items():
        for text in _strings(value):
            for m in BARE.finditer(text):
                if m.group(1) in known:
                    errors.append(f"{s.id}'s {name} writes {m.group(0)!r}, which the tool would "
                                  f"get as it is; write ${m.group(1)} where the result of "
                                  f"{m.group(1)} belongs")
            for m in NUMBERED.finditer(text):
                if f"step{m.group(1)}" in known:
                    errors.append(f"{s.id}'s {name} writes {m.group(0)!r}: write $step"
                                  f"{m.group(1)} for the result of step{m.group(1)}, or "
                                  f"{m.group(1)} for the number")
    return errors


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _strings(v)]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    return []


def _check_runner(s: Step, toolbox: Toolbox, agent_steps: bool) -> list[str]:
    if s.tool is not None and s.instruction is not None:
        return [f"{s.id} has both a tool and an instruction; give it one of them"]
    if s.instruction is not None:
        if not agent_steps:
            return [f"{s.id} has an instruction, but this agent has no step agent; every step "
                    f"must call one of the tools: {', '.join(toolbox.names) or '(none)'}"]
        return [] if s.instruction.strip() else [f"{s.id} has an empty instruction"]
    if s.tool is None:
        what = "a tool with args or an instruction" if agent_steps else "a tool with args"
        return [f"{s.id} has neither; give it {what}"]
    if s.tool not in toolbox:
        return [f"{s.id} uses the unknown tool {s.tool!r}; the tools are: "
                f"{', '.join(toolbox.names) or '(none)'}"]
    params = toolbox[s.tool].spec.parameters
    props = params.get("properties", {})
    errors = []
    if params.get("additionalProperties") is False:
        for name in s.args:
            if name not in props:
                errors.append(f"{s.id}: {s.tool} has no argument {name!r}; its arguments are "
                              f"{', '.join(props) or '(none)'}")
    for name in params.get("required", []):
        if name not in s.args:
            errors.append(f"{s.id}: {s.tool} needs the argument {name!r}")
    return errors


def topological_order(steps: Sequence[Step]) -> list[str] | None:
    """Kahn's algorithm over the steps of the plan (dependencies outside it count as done);
    ``None`` when there is a cycle."""
    order = _kahn(steps)
    return order if len(order) == len({s.id for s in steps}) else None


def _kahn(steps: Sequence[Step]) -> list[str]:
    in_plan = {s.id for s in steps}
    indegree = {s.id: sum(1 for d in set(s.depends_on) if d in in_plan and d != s.id)
                for s in steps}
    dependents: dict[str, list[str]] = {s.id: [] for s in steps}
    for s in steps:
        for d in set(s.depends_on):
            if d in in_plan and d != s.id:
                dependents[d].append(s.id)
    ready = [i for i, n in indegree.items() if n == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for nxt in dependents[node]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    return order


def find_cycle(steps: Sequence[Step]) -> list[str] | None:
    """One dependency cycle as ``[a, b, ..., a]`` (a depends on b ...), or ``None``."""
    done = set(_kahn(steps))
    if len(done) == len({s.id for s in steps}):
        return None
    left = {s.id: [d for d in s.depends_on if d != s.id] for s in steps if s.id not in done}
    left = {i: [d for d in deps if d in left] for i, deps in left.items()}
    # every node left waits on another node left (else Kahn would have freed it): walk until a repeat
    node = next(i for i, deps in left.items() if deps)
    path: list[str] = []
    while node not in path:
        path.append(node)
        node = left[node][0]
    return path[path.index(node):] + [node]
