"""Plans on their own: $stepN references, reading the planner's reply, the checks, the schema."""

from __future__ import annotations

import json
import re

import pytest

from tao import Toolbox, calculate, calculator, tool
from tao.plan import Plan, PlanInvalid, Step, parse_plan, plan_schema, references, resolve
from tao.plan.validate import check, find_cycle, topological_order

TOOLS = Toolbox([calculator, calculate])


# -- references -------------------------------------------------------------------------------

RESULTS = {"step1": 36.0, "step2": 10, "step10": [1, 2, 3], "step11": {"city": "北京"}, "step3": "text"}


@pytest.mark.parametrize("value, expected", [
    ("$step1", 36.0),                        # a whole argument keeps its type...
    ("$step10", [1, 2, 3]),                  # ...a list stays a list...
    ("${step11}", {"city": "北京"}),          # ...a dict a dict
    (" $step2 ", 10),
    ("$step1 yuan", "36 yuan"),              # inside a string: the value as a model reads it
    ("$step10 and $step1", "[1, 2, 3] and 36"),  # $step10 is never $step1 followed by 0
    ("$step1$step10", "36[1, 2, 3]"),
    ("${step1}0", "360"),                    # braces end a reference
    ("a=$step1, b=$step2, again $step1", "a=36, b=10, again 36"),
    ("costs $5 or $ step1 or $stepX", "costs $5 or $ step1 or $stepX"),  # not references
    ({"a": "$step1", "b": ["$step2", {"c": "x $step3"}]}, {"a": 36.0, "b": [10, {"c": "x text"}]}),
    ((1, "$step2"), (1, 10)),
    (42, 42), (None, None), (True, True),
])
def test_references_are_resolved_in_nested_structures_and_strings(value, expected):
    assert resolve(value, RESULTS) == expected


def test_resolving_does_not_modify_the_arguments():
    args = {"a": "$step1", "b": ["$step2"]}
    snapshot = json.dumps(args)
    resolve(args, RESULTS)
    assert json.dumps(args) == snapshot


def test_references_are_found_everywhere_in_order_once():
    args = {"x": "$step10 + $step1", "y": [{"z": "${step2}"}, "$step1"], "w": 3}
    assert references(args) == ["step10", "step1", "step2"]
    assert references("no $ref here, $5") == []


def test_a_missing_result_is_a_key_error():
    with pytest.raises(KeyError):
        resolve("$step9", RESULTS)


# -- reading the reply ------------------------------------------------------------------------

CANONICAL = {"steps": [
    {"id": "step1", "description": "books", "tool": "calculator",
     "args": {"operation": "multiply", "a": 3, "b": 12}, "depends_on": []},
    {"id": "step2", "description": "left", "tool": "calculator",
     "args": {"operation": "subtract", "a": 50, "b": "$step1"}, "depends_on": ["step1"]},
], "answer": "$step2 yuan"}
EXPECTED = Plan([Step("step1", "books", "calculator", {"operation": "multiply", "a": 3, "b": 12}),
                 Step("step2", "left", "calculator", {"operation": "subtract", "a": 50, "b": "$step1"},
                      None, ("step1",))], "$step2 yuan")


def fenced(text):
    return f"Here is the plan:\n```json\n{text}\n```\nIt runs step1 first."


@pytest.mark.parametrize("reply", [
    json.dumps(CANONICAL),
    fenced(json.dumps(CANONICAL, indent=2)),
    "Plan: " + json.dumps(CANONICAL) + " -- done",
    json.dumps({"tasks": CANONICAL["steps"], "answer": "$step2 yuan"}),
    json.dumps({"plan": [dict(s, id=int(s["id"][4:]), depends_on=[int(d[4:]) for d in s["depends_on"]])
                         for s in CANONICAL["steps"]], "answer": "$step2 yuan"}),
    json.dumps({"steps": [dict(CANONICAL["steps"][0], id="Step 1"),
                          {**{k: v for k, v in CANONICAL["steps"][1].items() if k != "depends_on"},
                           "dependencies": "step1", "arguments": CANONICAL["steps"][1]["args"]}],
                "answer": "$step2 yuan"}),
    json.dumps({"steps": [  # the seeds' shape, with a final step instead of an answer template
        {"id": 1, "description": "books", "operation": "multiply", "operandA": 3, "operandB": 12},
        {"id": 2, "description": "left", "operation": "subtract", "operandA": 50, "operandB": "$1",
         "depends_on": [1]}], "answer": "$step2 yuan"}),
])
def test_plans_are_read_in_the_forms_models_write(reply):
    assert parse_plan(reply, TOOLS) == EXPECTED


def test_a_final_step_is_the_answer():
    steps = [dict(s) for s in CANONICAL["steps"]]
    steps[1]["final"] = True
    plan = parse_plan(json.dumps({"steps": steps}), TOOLS)
    assert plan.answer == "$step2"
    steps[0]["final"] = True
    with pytest.raises(PlanInvalid, match="only one step can be final, but step1, step2 are marked final"):
        parse_plan(json.dumps({"steps": steps}), TOOLS)


def test_plan_to_json_reads_back():
    assert parse_plan(EXPECTED.to_json(), TOOLS) == EXPECTED


def invalid(plan, **kwargs) -> str:
    with pytest.raises(PlanInvalid) as e:
        parse_plan(plan if isinstance(plan, str) else json.dumps(plan), TOOLS, **kwargs)
    return str(e.value)


def calc(n, a, b, *deps, operation="add"):
    return {"id": f"step{n}", "description": "", "tool": "calculator",
            "args": {"operation": operation, "a": a, "b": b}, "depends_on": [f"step{d}" for d in deps]}


@pytest.mark.parametrize("plan, message", [
    ("", "the reply is not valid JSON (Expecting value at character 0"),
    ('{"steps": [', "the reply is not valid JSON"),
    ("42", "expected a JSON object {\"steps\": [...]}, got int"),
    ({"answer": "x"}, "- steps: Field required"),
    ({"steps": "step1"}, "- steps: Input should be a valid list (got 'step1')"),
    ({"steps": [{"id": "step1", "tool": "calculator", "args": [1, 2]}]},
     "- steps[0].args: Input should be a valid dictionary"),
    ({"steps": []}, "- the plan has no steps"),
    ({"steps": [calc(1, 1, 2), calc(1, 2, 3)]}, "- two steps have the id step1"),
    ({"steps": [dict(calc(1, 1, 2), id="first")]}, "step id 'first' is not of the form step1, step2"),
    ({"steps": [{"id": "step1", "description": "?"}]}, "step1 has neither; give it a tool with args"),
    ({"steps": [dict(calc(1, 1, 2), instruction="x")]}, "step1 has both a tool and an instruction"),
    ({"steps": [dict(calc(1, 1, 2), tool="calc")]},
     "step1 uses the unknown tool 'calc'; the tools are: calculator, calculate"),
    ({"steps": [{"id": "step1", "tool": "calculator", "args": {"operation": "add", "a": 1}}]},
     "step1: calculator needs the argument 'b'"),
    ({"steps": [calc(1, 1, 2, 1)]}, "step1 depends on itself"),
    ({"steps": [calc(1, "$step1", 2)]}, "step1 uses its own result $step1"),
    ({"steps": [calc(1, "$step4", 2)]}, "step1 uses $step4, but there is no step step4"),
    ({"steps": [calc(1, 1, 2), calc(2, 1, 2, 1)]},
     "step2 depends on step1 but its args never use $step1; remove step1 from its depends_on"),
    ({"steps": [calc(1, 1, 2), calc(2, "x $step1", 2)]},
     "step2 uses $step1 but step1 is not in its depends_on; add it"),
    ({"steps": [calc(1, "$step2", 2, 2), calc(2, "$step1", 2, 1)]},
     "the steps depend on each other in a cycle: step1 → step2 → step1 (each waits for the next)"),
    ({"steps": [calc(1, 1, 2)], "answer": "$step1 and $step7"},
     "the answer uses $step7, which is not a step of the plan"),
])
def test_each_problem_is_named_precisely(plan, message):
    assert message in invalid(plan)


def test_every_problem_is_listed_at_once():
    text = invalid({"steps": [dict(calc(1, "$step2", 2), tool="calc"), calc(2, 1, 2, 9)]})
    lines = text.splitlines()
    assert len(lines) == 3 and all(line.startswith("- ") for line in lines)
    assert "unknown tool 'calc'" in lines[0] and "not in its depends_on" in lines[1]
    assert "depends on step9, which is not a step of the plan" in lines[2]


def test_a_replan_may_use_finished_steps_but_not_reuse_their_ids():
    finished = {"step1": 36.0}
    plan = parse_plan(json.dumps({"steps": [calc(2, "$step1", 10)], "answer": "$step2"}), TOOLS,
                      finished=finished)
    assert plan.steps[0].args["a"] == "$step1" and plan.steps[0].depends_on == ()
    assert "step1 already ran (its result is available as $step1)" in invalid(
        {"steps": [calc(1, 1, 2)]}, finished=finished)


def test_under_a_grammar_dependencies_are_read_off_the_references():
    def bare(n, a, b):  # a step as the constrained schema has it: no depends_on
        step = calc(n, a, b)
        del step["depends_on"]
        return step

    steps = [bare(1, 3, 12), bare(2, 2, 5), bare(3, "$step1", "$step2"), bare(4, 50, "$step3")]
    plan = parse_plan(json.dumps({"steps": steps}), TOOLS, constrained=True)
    assert [s.depends_on for s in plan.steps] == [(), (), ("step1", "step2"), ("step3",)]
    # a result of an earlier plan needs no dependency; a step that is nowhere is still reported
    replan = parse_plan(json.dumps({"steps": [bare(5, "$step4", 1)]}), TOOLS,
                        finished={"step4": 4}, constrained=True)
    assert replan.steps[0].depends_on == ()
    with pytest.raises(PlanInvalid, match=r"step2 uses \$step7, but there is no step step7"):
        parse_plan(json.dumps({"steps": [bare(1, 1, 2), bare(2, "$step7", 1)]}), TOOLS,
                   constrained=True)
    with pytest.raises(PlanInvalid, match="step1 uses its own result"):
        parse_plan(json.dumps({"steps": [bare(1, "$step1", 2)]}), TOOLS, constrained=True)
    # and without inference, the same plan is missing its dependencies
    with pytest.raises(PlanInvalid, match="not in its depends_on"):
        parse_plan(json.dumps({"steps": steps}), TOOLS)


def test_instruction_steps_only_with_a_step_agent():
    plan = {"steps": [calc(1, 1, 2), {"id": "step2", "description": "judge", "instruction": "is $step1 big?",
                                      "depends_on": ["step1"]}]}
    assert "step2 has an instruction, but this agent has no step agent" in invalid(plan)
    parsed = parse_plan(json.dumps(plan), TOOLS, agent_steps=True)
    assert parsed.steps[1].instruction == "is $step1 big?" and parsed.steps[1].tool is None
    plan["steps"][1]["depends_on"] = []  # an agent step's references must be dependencies too
    assert "step2 uses $step1 but step1 is not in its depends_on" in invalid(plan, agent_steps=True)


def test_kahn_order_and_the_cycle_found():
    steps = [Step("step1", depends_on=("step3",)), Step("step2", depends_on=("step1",)),
             Step("step3", depends_on=("step2",)), Step("step4")]
    assert topological_order(steps) is None
    assert find_cycle(steps) == ["step1", "step3", "step2", "step1"]
    dag = [Step("step3", depends_on=("step1", "step2")), Step("step1"), Step("step2", depends_on=("step1",))]
    order = topological_order(dag)
    assert order.index("step1") < order.index("step2") < order.index("step3")
    assert find_cycle(dag) is None
    assert check([], TOOLS) == ["the plan has no steps"]


# -- the schema the model is given ------------------------------------------------------------

def test_the_schema_offers_each_tool_with_references_allowed():
    schema = plan_schema(TOOLS)
    variants = schema["properties"]["steps"]["items"]["anyOf"]
    assert [v["properties"]["tool"] for v in variants] == [{"const": "calculator"}, {"const": "calculate"}]
    a = variants[0]["properties"]["args"]["properties"]["a"]["anyOf"]
    assert a[0] == {"type": "number", "description": "the first number"}
    assert a[1] == {"type": "string", "pattern": "^[$]step[0-9]+$"}
    assert "instruction" not in json.dumps(schema)
    with_agent = plan_schema(TOOLS, agent_steps=True)["properties"]["steps"]["items"]["anyOf"]
    assert with_agent[-1]["required"] == ["id", "description", "instruction", "depends_on"]
    one_tool = plan_schema(Toolbox([calculator]))["properties"]["steps"]["items"]
    assert one_tool["properties"]["tool"] == {"const": "calculator"}


def test_the_schema_becomes_a_grammar_llama_cpp_can_parse():
    # llama.cpp parses a grammar only when decoding starts, and answers an escape it does not
    # know with a crash (the reference pattern, written with an escaped dollar, once produced
    # the GBNF escape backslash-dollar). So check every escape in the grammar is one it knows.
    pytest.importorskip("llama_cpp")
    from tao.grammar import json_schema_grammar

    gbnf = json_schema_grammar(plan_schema(TOOLS, agent_steps=True))
    assert "calculator" in gbnf and "instruction" in gbnf and "root ::=" in gbnf
    escapes = set(re.findall(r"\\(.)", gbnf))
    assert escapes <= set("xuUtrn\\\"[]"), escapes


def test_under_a_grammar_the_answer_is_the_step_nothing_depends_on():
    schema = plan_schema(TOOLS, constrained=True)
    assert "answer" not in schema["properties"] and "final" not in json.dumps(schema)
    assert plan_schema(TOOLS)["properties"]["answer"] == {"type": "string"}  # API models: a template
    one_sink = [calc(1, 3, 12), calc(2, 2, 5), calc(3, "$step1", "$step2"), calc(4, 50, "$step3")]
    for step in one_sink:
        del step["depends_on"]
    assert parse_plan(json.dumps({"steps": one_sink}), TOOLS, constrained=True).answer == "$step4"
    two_sinks = one_sink[:2]  # nothing joins them: the synthesis call writes the answer
    assert parse_plan(json.dumps({"steps": two_sinks}), TOOLS, constrained=True).answer is None


def test_under_a_grammar_steps_are_bounded_and_described_before_they_act():
    pytest.importorskip("llama_cpp")
    from tao.grammar import json_schema_grammar

    assert "maxItems" not in json.dumps(plan_schema(TOOLS))  # API models get no cap
    from tao.plan.schema import MAX_CONSTRAINED_STEPS

    gbnf = json_schema_grammar(plan_schema(Toolbox([calculator]), constrained=True))
    steps = next(line for line in gbnf.splitlines() if line.startswith("steps ::="))
    assert steps.count("steps-item") == MAX_CONSTRAINED_STEPS
    item = next(line for line in gbnf.splitlines() if line.startswith("steps-item ::="))
    assert item.index("description") < item.index("tool") < item.index("args")
