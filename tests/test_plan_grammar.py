"""The plan grammar of the embedded model (``tao.plan.grammar``): step N is ``stepN`` and may use
only the steps before it - a self or forward reference cannot be written, where before the 1.5B
wrote them in 2 of the 16 calculator tasks and no correction fixed them. Checked with llama.cpp's
own grammar engine on the model's vocabulary (``grammar_check``), no model decoded."""

from __future__ import annotations

import json

import pytest

from tao.plan.grammar import plan_grammar
from tao.plan.schema import MAX_CONSTRAINED_STEPS, parse_plan
from tao.tools.base import Toolbox
from tao.tools.calculator import calculate, calculator

from grammar_check import accepts

TOOLS = Toolbox([calculate, calculator])
GRAMMAR = plan_grammar(TOOLS)


def plan(*steps: dict) -> str:
    return json.dumps({"steps": list(steps)}, ensure_ascii=False)


def calc(i: int, op: str, a, b, description: str = "算一下") -> dict:
    return {"id": f"step{i}", "description": description, "tool": "calculator",
            "args": {"operation": op, "a": a, "b": b}}


def expr(i: int, expression: str) -> dict:
    return {"id": f"step{i}", "description": "compute", "tool": "calculate",
            "args": {"expression": expression}}


def test_a_plan_that_uses_earlier_steps_is_taken_and_parses():
    reply = plan(calc(1, "multiply", 3, 12, "三本书多少钱"), calc(2, "multiply", 2, 5),
                 calc(3, "add", "$step1", "$step2"), expr(4, "50 - $step3"))
    assert accepts(GRAMMAR, reply)
    parsed = parse_plan(reply, TOOLS, constrained=True)
    assert [s.depends_on for s in parsed.steps] == [(), (), ("step1", "step2"), ("step3",)]
    assert parsed.answer == "$step4"


@pytest.mark.parametrize("reply", [
    plan(calc(1, "multiply", "$step1", 2)),                          # itself
    plan(calc(1, "add", "$step2", 1), calc(2, "add", 1, 2)),         # a later step
    plan(expr(1, "$step1 * 2")),                                     # itself, inside a string
    plan(calc(1, "add", 1, 2), expr(2, "${step3} + 1")),             # a later step, braced
    plan(calc(2, "add", 1, 2)),                                      # numbering starts at step1
    plan(calc(1, "add", 1, 2), calc(3, "add", 1, 2)),                # and has no gaps
    plan(calc(1, "add", 1, 2), expr(2, "$step10 + 1")),              # step1 then a digit: step10
    plan(calc(1, "add", 1, 2), calc(2, "add", "$step1", "$step7")),  # a step that is nowhere
], ids=["self", "forward", "self-in-string", "forward-braced", "starts-at-2", "gap",
        "digit-after-ref", "nowhere"])
def test_a_plan_that_cannot_run_cannot_be_written(reply):
    assert not accepts(GRAMMAR, reply)


def test_a_dollar_that_starts_no_reference_is_still_text():
    assert accepts(GRAMMAR, plan(expr(1, "12 * 3"), calc(2, "add", "$step1", 5,
                                                         "price in US$ and 5$, braced ${step1}")))
    assert accepts(GRAMMAR, plan(expr(1, "100 - 5"), expr(2, "${step1}0 / 2")))  # braces end it


def test_a_replan_continues_the_numbering_and_may_use_finished_steps():
    g = plan_grammar(TOOLS, first=4, finished=["step1", "step2"])
    assert accepts(g, plan(calc(4, "add", "$step1", "$step2"), expr(5, "$step4 * 2")))
    assert not accepts(g, plan(calc(1, "add", 1, 2)))            # ids continue
    assert not accepts(g, plan(calc(4, "add", "$step3", 1)))     # step3 did not finish
    assert not accepts(g, plan(expr(4, "$step5 - 1"), expr(5, "1")))


def test_the_plan_is_bounded():
    steps = [calc(i, "add", i, 1) for i in range(1, MAX_CONSTRAINED_STEPS + 2)]
    assert accepts(GRAMMAR, plan(*steps[:MAX_CONSTRAINED_STEPS]))
    assert not accepts(GRAMMAR, plan(*steps))
    assert not accepts(GRAMMAR, plan())


def test_agent_steps_take_references_in_their_instruction():
    g = plan_grammar(TOOLS, agent_steps=True)
    agent = {"id": "step2", "description": "explain", "instruction": "用中文解释 $step1 的含义"}
    assert accepts(g, plan(expr(1, "6 * 7"), agent))
    assert not accepts(g, plan(expr(1, "6 * 7"), {**agent, "instruction": "explain $step2"}))


def test_a_review_names_a_finished_step_or_goes_on_numbering():
    review = plan_grammar(TOOLS, first=3, finished=["step1", "step2"], review=True)
    assert accepts(review, '{"answer": "$step2"}')
    assert accepts(review, plan(expr(3, "$step1 - 57")))
    assert not accepts(review, '{"answer": "$step3"}')  # not a finished step
    assert not accepts(review, '{"answer": "265"}')  # a number of its own, not a result
    assert not accepts(review, plan(expr(1, "1 + 1")))  # step1 already ran


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_worked_plans_are_what_the_grammar_lets_the_model_write(lang):
    from tao.plan.planner import Planner

    class Embedded:
        name, supports_grammar = "embedded", True

    planner = Planner(Embedded(), TOOLS, print, None, lang=lang)
    example = planner.messages[2].content  # the worked plan, as the planner's own reply
    assert accepts(GRAMMAR, example)
    # more than one step, and the last one uses the results before it (small models copy the
    # example's shape: a one-step example taught one-step plans)
    steps = parse_plan(example, TOOLS, constrained=True).steps
    assert len(steps) >= 3 and steps[-1].depends_on


def test_a_plan_of_twelve_steps_fits_in_what_the_planner_lets_it_take():
    from grammar_check import _vocab

    from tao import ScriptedModel
    from tao.plan.agent import PlanExecuteAgent
    from tao.plan.planner import PLAN_TOKENS

    steps = [calc(1, "multiply", 3, 12, "三本书一共多少钱，按每本的价钱乘以本数")]
    steps += [calc(n, "add", f"$step{n - 1}", n, "把下一笔钱加到前面算出的总数上")
              for n in range(2, MAX_CONSTRAINED_STEPS + 1)]
    reply = plan(*steps)
    _, llm, _ = _vocab()
    tokens = len(llm.tokenize(reply.encode(), add_bos=False, special=False))
    assert accepts(GRAMMAR, reply) and 512 < tokens < PLAN_TOKENS  # the model's default cut it

    caps = []

    class Embedded(ScriptedModel):
        supports_grammar = True

        def stream(self, messages, **kwargs):
            caps.append(kwargs.get("max_tokens"))
            return super().stream(messages, **kwargs)

    result = PlanExecuteAgent(Embedded([reply]), TOOLS, plan_form="json").run("算一下")
    assert result.status == "done" and caps == [PLAN_TOKENS]
