"""Plans written as straight-line Python (``PlanExecuteAgent(plan_form="code")``): each assignment
is a step the tools run, the names are the edges, and nothing of the code is executed."""

from __future__ import annotations

import pytest

from tao import PlanExecuteAgent, Toolbox, calculate, calculator, tool
from tao.models.scripted import ScriptedModel
from tao.plan import PlanInvalid
from tao.plan.code_form import parse_code_plan

TOOLS = Toolbox([calculate, calculator])

BOOKSHOP = '''Here is the plan:
```python
morning = 18
price = 25
# books sold in the afternoon: three times the morning
afternoon = morning * 3
books = morning + afternoon  # the whole day
takings = books * price
final_answer(f"The shop takes in {takings} dollars")
```'''


def test_each_assignment_is_a_calculate_step_and_names_become_references():
    plan, names = parse_code_plan(BOOKSHOP, TOOLS)
    assert [s.to_dict() for s in plan.steps] == [
        {"id": "step1", "description": "books sold in the afternoon: three times the morning",
         "tool": "calculate", "args": {"expression": "18 * 3"}, "depends_on": []},
        {"id": "step2", "description": "the whole day", "tool": "calculate",
         "args": {"expression": "18 + $step1"}, "depends_on": ["step1"]},
        {"id": "step3", "description": "takings", "tool": "calculate",
         "args": {"expression": "$step2 * 25"}, "depends_on": ["step2"]},
    ]
    assert plan.answer == "The shop takes in $step3 dollars" and plan.answer_given
    assert names == {"morning": "18", "price": "25", "afternoon": "$step1", "books": "$step2",
                     "takings": "$step3"}


def test_steps_that_do_not_use_each_other_have_no_edges():
    plan, _ = parse_code_plan("a = 8 * 5\nb = 4 * 4\nd = a - b\nfinal_answer(d)", TOOLS)
    assert [s.depends_on for s in plan.steps] == [(), (), ("step1", "step2")]
    assert plan.answer == "$step3"


def test_tool_calls_take_positional_and_keyword_arguments_and_results_by_name():
    plan, _ = parse_code_plan('r = calculator("multiply", 8, 5)\n'
                              'd = calculator(operation="subtract", a=r, b=16)', TOOLS)
    assert plan.steps[0].args == {"operation": "multiply", "a": 8, "b": 5}
    assert plan.steps[1].args == {"operation": "subtract", "a": "$step1", "b": 16}
    assert plan.answer == "$step2" and not plan.answer_given  # the last step, to be reviewed


def test_an_expression_inside_a_tool_call_is_a_step_of_its_own_before_it():
    plan, _ = parse_code_plan("x = calculator('add', 2 * 3, 4)", TOOLS)
    assert [(s.id, s.tool, s.args) for s in plan.steps] == [
        ("step1", "calculate", {"expression": "2 * 3"}),
        ("step2", "calculator", {"operation": "add", "a": "$step1", "b": 4})]


def test_with_only_the_four_operation_calculator_arithmetic_becomes_its_operation():
    plan, _ = parse_code_plan("area = 8 * 5", Toolbox([calculator]))
    assert plan.steps[0].tool == "calculator"
    assert plan.steps[0].args == {"operation": "multiply", "a": 8, "b": 5}


def test_chinese_comments_and_names_describe_the_steps():
    plan, _ = parse_code_plan("# 下午卖出的本数\n下午 = 18 * 3\nfinal_answer(f'一共 {下午} 本')", TOOLS)
    assert plan.steps[0].description == "下午卖出的本数"
    assert plan.answer == "一共 $step1 本"


def test_a_replan_uses_finished_results_by_their_names_or_step_ids():
    plan, _ = parse_code_plan("b = books * price\nc = step1 + 1", TOOLS, finished={"step1": 72.0},
                              first=2, names={"books": "$step1", "price": "25", "lost": "$step9"})
    assert [s.args["expression"] for s in plan.steps] == ["$step1 * 25", "$step1 + 1"]
    assert [s.id for s in plan.steps] == ["step2", "step3"]
    assert all(s.depends_on == () for s in plan.steps)  # step1 already ran


@pytest.mark.parametrize("code, problem", [
    ("for i in range(3):\n    x = i", "line 1: a plan is a list of steps"),
    ("while True:\n    x = 1", "`while` cannot be a step"),
    ("x = y + 1", "line 1: `y` is used before a step computes it"),
    ("x = open('/etc/passwd')", "`open('/etc/passwd')` is neither arithmetic nor a call of one of the tools"),
    ("x = __import__('os').system('rm -rf /')", "is neither arithmetic nor a call"),
    ("x = (1 +", "the plan is not valid Python"),
    ("x = 72\nfinal_answer(x)", "the plan has no steps"),
    ("a, b = 1 * 2, 3 * 4", "assign each step to one name"),
])
def test_what_cannot_be_a_plan_is_refused_with_its_line_and_nothing_runs(code, problem):
    with pytest.raises(PlanInvalid, match=None) as e:
        parse_code_plan(code, TOOLS)
    assert problem in str(e.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(PlanInvalid) as e:
        parse_code_plan("a = b + 1\nc = d * 2\nwhile True:\n    pass", TOOLS)
    assert [line[:8] for line in str(e.value).splitlines()] == ["- line 1", "- line 2", "- line 3"]


def test_the_agent_runs_a_code_plan_through_the_tools_and_fills_the_answer():
    model = ScriptedModel([BOOKSHOP])
    result = PlanExecuteAgent(model, [calculate, calculator], plan_form="code").run(
        "A bookshop sells 18 books in the morning and three times as many in the afternoon. "
        "Each book costs 25 dollars. How many dollars does the shop take in that day?")
    assert result.status == "done"
    assert result.answer == "The shop takes in 1800 dollars"
    assert result.turns == 1 and result.tool_calls == 3
    # the planner was shown the code form and its worked example, not the JSON one
    system, example_task, example_plan = model.calls[0][:3]
    assert "one Python block" in system.content and "```python" in example_plan.content


def test_a_failed_step_is_replanned_with_the_results_it_has_by_name():
    model = ScriptedModel(["```python\nbooks = 18 * 4\nper_box = books / 0\nfinal_answer(per_box)\n```",
                           "```python\nper_box = books / 8\nfinal_answer(per_box)\n```"])
    result = PlanExecuteAgent(model, [calculate], plan_form="code").run("72 books, 8 a box: boxes?")
    assert result.status == "done" and result.answer == "9"
    replan = model.calls[1][-1].content
    assert "division by zero" in replan and "Python block" in replan


def test_an_invalid_code_plan_goes_back_with_its_problems_in_chinese():
    model = ScriptedModel(["```python\nfor i in range(3):\n    x = i\n```",
                           "```python\n面积 = 8 * 5\nfinal_answer(面积)\n```"])
    result = PlanExecuteAgent(model, [calculate], plan_form="code").run("长 8 米宽 5 米的菜地面积是多少？")
    assert result.answer == "40"
    fix = model.calls[1][-1].content
    assert "这个计划无法执行" in fix and "line 1" in fix


def test_a_tool_of_the_users_is_called_like_a_function():
    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"{city}: 21 degrees"

    plan, _ = parse_code_plan('w = weather("Paris")\nfinal_answer(f"Paris today: {w}")',
                              Toolbox([weather]))
    assert plan.steps[0].tool == "weather" and plan.steps[0].args == {"city": "Paris"}


def test_plan_form_is_checked():
    with pytest.raises(ValueError, match="plan_form='yaml'"):
        PlanExecuteAgent(ScriptedModel([]), [calculate], plan_form="yaml")


def test_a_name_given_to_another_name_is_the_same_result_not_a_step():
    plan, _ = parse_code_plan("girls = 48 * 3 / 8\nboys = girls\nfinal_answer(f'{boys} boys')", TOOLS)
    assert len(plan.steps) == 1 and plan.answer == "$step1 boys"


def test_an_ellipsis_in_arithmetic_is_not_a_number():
    with pytest.raises(PlanInvalid, match=r"`\.\.\.` in `1 \+ 2 \+ \.\.\. \+ 50` is not a number"):
        parse_code_plan("total = 1 + 2 + ... + 50", TOOLS)


@pytest.mark.parametrize("form", ["code", "json"])
def test_each_form_reads_a_plan_written_in_the_other(form):
    as_json = ('{"steps": [{"id": "step1", "description": "area", "tool": "calculate", '
               '"args": {"expression": "8 * 5"}, "depends_on": []}], "answer": "$step1"}')
    as_code = "```python\narea = 8 * 5\nfinal_answer(area)\n```"
    for reply in (as_json, f"```json\n{as_json}\n```", as_code):
        result = PlanExecuteAgent(ScriptedModel([reply]), [calculate], plan_form=form).run("8 by 5?")
        assert (result.status, result.answer) == ("done", "40"), reply


def test_the_embedded_model_plans_in_code_by_default_an_endpoint_in_json():
    class Embedded(ScriptedModel):
        supports_grammar = True  # as LocalModel

    assert PlanExecuteAgent(Embedded([]), [calculate]).plan_form == "code"
    assert PlanExecuteAgent(ScriptedModel([]), [calculate]).plan_form == "json"
    assert PlanExecuteAgent(Embedded([]), [calculate], plan_form="json").plan_form == "json"
    grammars = []

    class Recorder(Embedded):
        def stream(self, messages, **kwargs):
            grammars.append(kwargs.get("grammar"))
            return super().stream(messages, **kwargs)

    PlanExecuteAgent(Recorder(["```python\narea = 8 * 5\n```"]), [calculate]).run("8 by 5?")
    assert grammars == [None]  # code is read with ast, not decoded under the plan grammar


def test_an_if_becomes_one_conditional_step_per_name_it_sets():
    code = ("# pencils of both\ntotal = 3 * 18 + 2 + 46\nboxes = total // 18\n"
            "# one more box for what is left\nif total % 18 != 0:\n    boxes += 1\nfinal_answer(boxes)")
    plan, _ = parse_code_plan(code, TOOLS)
    last = plan.steps[-1]
    assert last.args == {"expression": "$step2 + 1 if $step1 % 18 != 0 else $step2"}
    assert last.depends_on == ("step1", "step2") and last.description == "one more box for what is left"
    result = PlanExecuteAgent(ScriptedModel([code]), [calculate], plan_form="code").run("boxes?")
    assert result.answer == "6"  # 102 pencils, 18 a box


def test_elif_nests_and_a_list_of_numbers_is_written_into_the_expression():
    code = ("birds = [50, 0, 120, 120, 20, 20, 90]\naverage = sum(birds) / len(birds)\n"
            "if average > 60:\n    size = 1\nelif average > 40:\n    size = 2\nelse:\n    size = 3\n"
            "final_answer(size)")
    plan, _ = parse_code_plan(code, TOOLS)
    assert [s.args["expression"] for s in plan.steps] == [
        "sum([50, 0, 120, 120, 20, 20, 90]) / len([50, 0, 120, 120, 20, 20, 90])",
        "1 if $step1 > 60 else 2 if $step1 > 40 else 3"]
    assert PlanExecuteAgent(ScriptedModel([code]), [calculate], plan_form="code").run("?").answer == "2"


def test_inside_an_if_only_assignments_stand():
    with pytest.raises(PlanInvalid, match="line 2: inside an `if` only `name = expression`"):
        parse_code_plan("x = 2 * 3\nif x > 1:\n    for i in range(2):\n        x = i", TOOLS)


def test_a_name_whose_step_never_finished_is_not_there_for_the_replan():
    with pytest.raises(PlanInvalid, match="`lost` is used before a step computes it"):
        parse_code_plan("x = lost * 2", TOOLS, finished={"step1": 1}, first=2,
                        names={"lost": "$step2"})


def test_a_plan_nested_too_deeply_is_refused_in_words():
    chain = "x = " + " + ".join(["1"] * 5000)
    with pytest.raises(PlanInvalid, match="nested too deeply"):
        parse_code_plan(chain, TOOLS)


def test_braces_stay_where_text_follows_the_result_directly():
    plan, _ = parse_code_plan('w = 3 * 4\nfinal_answer(f"{w}kg, or {w} kg")', TOOLS)
    assert plan.answer == "${step1}kg, or $step1 kg"


def test_the_sum_of_a_range_is_one_calculate_step():
    plan, _ = parse_code_plan("total = sum(range(1, 51))\nfinal_answer(total)", TOOLS)
    assert plan.steps[0].args == {"expression": "sum(range(1, 51))"}


@pytest.mark.parametrize("code, problem", [
    ("x = calculate('\ud800')", "cannot be read as Python text"),        # broken Unicode
    ("x = calculate('1\x00')", "- the plan is not valid Python (source code string cannot contain null"),
    ("x = weather({city: 1})", "write each key of `{city: 1}` out as text"),
    ("x = calculate.__globals__", "neither arithmetic nor a call of one of the tools"),
    ("x = (y := 3)", "neither arithmetic nor a call"),
    ("x = [i for i in range(3)]", "neither arithmetic nor a call"),
    ("x = 'abc' * 10**9", "`'abc'` in `'abc' * 10 ** 9` is not a number"),
])
def test_hostile_or_broken_plans_are_refused_in_words(code, problem):
    @tool
    def weather(query: dict) -> str:
        """Weather."""
        return ""

    with pytest.raises(PlanInvalid) as e:
        parse_code_plan(code, Toolbox([calculate, weather]))
    assert problem in str(e.value)


def test_with_a_step_agent_the_plan_stays_json_since_code_has_no_instruction_steps():
    class Embedded(ScriptedModel):
        supports_grammar = True

    helper = PlanExecuteAgent(ScriptedModel([]), [calculate])
    assert PlanExecuteAgent(Embedded([]), [calculate], step_agent=helper).plan_form == "json"
    with pytest.raises(ValueError, match="no instruction steps for a step_agent"):
        PlanExecuteAgent(Embedded([]), [calculate], step_agent=helper, plan_form="code")
