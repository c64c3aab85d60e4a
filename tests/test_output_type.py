"""Typed results (issue 28, point 1): ``output_type=`` gives ``Result.output``, a validated value.

Every agent takes it, and every run may override it: ``agent.run(task, output_type=...)``.
``Result.answer`` stays the text. An answer that does not validate goes back to the model with
pydantic's words, ``output_retries`` times; then the run ends with status "error".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool_call
from tao.events import Error
from tao.plan.agent import PlanExecuteAgent


class Person(BaseModel):
    name: str
    age: int


def test_a_json_reply_becomes_the_typed_output():
    agent = ReActAgent(ScriptedModel(['{"name": "Ann", "age": 3}']), output_type=Person)
    result = agent.run("Ann is three years old.")
    assert result.output == Person(name="Ann", age=3)
    assert result.answer == '{"name": "Ann", "age": 3}'
    assert result.to_dict()["output"] == {"name": "Ann", "age": 3}


def test_json_inside_prose_or_a_fence_is_accepted():
    for reply in ('Here it is: {"name": "Ann", "age": 3}. Anything else?',
                  'Sure.\n```json\n{"name": "Ann", "age": 3}\n```'):
        result = ReActAgent(ScriptedModel([reply]), output_type=Person).run("Ann is 3")
        assert result.output == Person(name="Ann", age=3)


def test_an_invalid_answer_goes_back_to_the_model_once_by_default():
    model = ScriptedModel(['{"name": "Ann", "age": "three"}', '{"name": "Ann", "age": 3}'])
    events: list = []
    result = ReActAgent(model, output_type=Person).run("Ann is 3", sinks=[events.append])
    assert result.status == "done" and result.output.age == 3 and result.turns == 2
    told = [e.message for e in events if type(e) is Error]
    assert len(told) == 1 and "age" in told[0] and "valid integer" in told[0]


def test_when_the_retries_are_spent_the_run_ends_with_the_validation_error():
    model = ScriptedModel(["three", "still three", "3?"])
    result = ReActAgent(model, output_type=list[int], output_retries=1).run("numbers?")
    assert result.status == "error" and result.output is None
    assert result.error.startswith("OutputError:") and result.turns == 2


def test_zero_retries_means_the_first_answer_must_hold():
    result = ReActAgent(ScriptedModel(["nope"]), output_type=int, output_retries=0).run("n?")
    assert result.status == "error" and result.turns == 1


def test_each_run_may_ask_for_its_own_type():
    agent = ReActAgent(ScriptedModel(["yes", "[1, 2]", "plain text"] * 2))
    assert agent.run("?", output_type=Literal["yes", "no"]).output == "yes"
    assert agent.run("?", output_type=list[int]).output == [1, 2]
    plain = agent.run("?")  # the agent's own: none
    assert plain.answer == "plain text" and plain.output is None


@dataclass
class Point:
    x: int
    y: int


class Box(TypedDict):
    width: float
    height: float


@pytest.mark.parametrize(("type_", "reply", "value"), [
    (Point, '{"x": 1, "y": 2}', Point(1, 2)),
    (Box, '{"width": 2, "height": 0.5}', {"width": 2.0, "height": 0.5}),
    (list[int], "[3, 1, 2]", [3, 1, 2]),
    (Literal["red", "green"], "green", "green"),
    (int, "42", 42),
])
def test_dataclasses_typeddicts_and_plain_types(type_, reply, value):
    assert ReActAgent(ScriptedModel([reply]), output_type=type_).run("?").output == value


def test_a_type_pydantic_cannot_validate_is_an_error_when_the_agent_is_made():
    with pytest.raises(Exception, match="schema"):
        ReActAgent(ScriptedModel(["x"]), output_type=object())


def test_the_schema_is_in_the_system_prompt():
    result = ReActAgent(ScriptedModel(['{"name": "A", "age": 1}']), output_type=Person).run("?")
    system = result.messages[0].content
    assert '"age"' in system and "JSON schema" in system


def test_after_a_tool_call_the_answer_is_typed_too():
    model = ScriptedModel([tool_call("calculator", operation="add", a=40, b=2), '{"total": 42}'])

    class Total(BaseModel):
        total: int

    result = ReActAgent(model, [calculator], output_type=Total).run("40 + 2")
    assert result.output == Total(total=42) and result.tool_calls == 1


# -- CodeAct: final_answer(obj) is validated -----------------------------------------------------

def test_codeact_final_answer_of_a_dict_becomes_the_model():
    code = '```python\nfinal_answer({"name": "Ann", "age": 1 + 2})\n```'
    result = CodeActAgent(ScriptedModel([code]), output_type=Person).run("Ann is 3")
    assert result.output == Person(name="Ann", age=3)


def test_codeact_is_told_when_its_final_answer_is_of_another_shape():
    script = ['```python\nfinal_answer({"name": "Ann"})\n```',
              '```python\nfinal_answer({"name": "Ann", "age": 3})\n```']
    result = CodeActAgent(ScriptedModel(script), output_type=Person).run("Ann is 3")
    assert result.status == "done" and result.turns == 2
    told = [m.content for m in result.messages if m.role == "user"][-1]
    assert "age" in told and "Field required" in told


# -- Plan-and-Execute: the final answer is typed ---------------------------------------------------

PLAN = ('{"steps": [{"id": "step1", "description": "add", "tool": "calculator", '
        '"args": {"operation": "add", "a": 1, "b": 2}}], "answer": "$step1"}')


def test_a_plan_answer_template_is_validated_as_it_is():
    result = PlanExecuteAgent(ScriptedModel([PLAN]), [calculator], output_type=int).run("1 + 2")
    assert result.output == 3 and result.turns == 1


def test_a_plan_writes_the_typed_answer_when_its_template_is_not_of_the_type():
    class Sum(BaseModel):
        total: int

    model = ScriptedModel([PLAN, '{"total": "three"}', '{"total": 3}'])
    result = PlanExecuteAgent(model, [calculator], output_type=Sum).run("1 + 2")
    assert result.status == "done" and result.output == Sum(total=3) and result.turns == 3


# -- the embedded model decodes the answer under the schema's grammar -----------------------------

def test_the_action_grammar_makes_the_final_answer_a_value_of_the_schema():
    pytest.importorskip("llama_cpp")
    from tao.grammar import action_grammar
    from tao.output import Output

    plain = action_grammar(calculator_specs())
    typed = action_grammar(calculator_specs(), answer_schema=Output(Person).schema)
    assert '\\"age\\"' in typed and '\\"age\\"' not in plain


def test_a_typed_final_answer_of_the_embedded_model_reads_as_json_text():
    from tao.models.local import _read_action

    message = _read_action('{"thought": "done", "final_answer": {"name": "Ann", "age": 3}}')
    assert message.content == '{"name": "Ann", "age": 3}' and not message.tool_calls


def calculator_specs():
    from tao import Toolbox

    return Toolbox([calculator]).specs()


def test_a_typed_run_resumed_from_its_journal_gives_the_same_value(tmp_path):
    journal = str(tmp_path / "runs.db")
    first = ReActAgent(ScriptedModel(['{"name": "Ann", "age": 3}']), output_type=Person,
                       journal=journal).run("Ann is 3")
    from tao.runs import Journal

    run_id = Journal(journal).runs()[0]["run_id"]
    again = ReActAgent(ScriptedModel([]), output_type=Person, journal=journal).resume(run_id)
    assert again.status == "done" and again.output == first.output == Person(name="Ann", age=3)


def test_a_run_typed_on_its_own_is_resumed_with_the_same_type(tmp_path):
    from tao.runs import Journal

    journal = str(tmp_path / "runs.db")
    ReActAgent(ScriptedModel(['{"name": "Ann", "age": 3}']), journal=journal).run(
        "Ann is 3", output_type=Person)
    [row] = Journal(journal).runs()
    assert row["meta"]["output_type"] == "Person"  # the journal keeps what the run was typed as
    agent = ReActAgent(ScriptedModel([]), journal=journal)
    with pytest.raises(ValueError, match="ran with output_type Person"):
        agent.resume(row["run_id"])  # as text it would ask the model again, not replay
    again = agent.resume(row["run_id"], output_type=Person)
    assert again.output == Person(name="Ann", age=3) and again.status == "done"
    plain = ReActAgent(ScriptedModel(["Ann, 3"]), journal=journal)
    plain.run("Who is 3?")
    with pytest.raises(ValueError, match="ran without an output_type"):
        plain.resume(Journal(journal).runs()[0]["run_id"], output_type=Person)


def test_vote_and_reflexion_give_the_typed_output_of_the_run_they_chose():
    from tao import Reflexion, Vote

    replies = ['{"name": "Ann", "age": 3}', '{"name": "Bo", "age": 3}', '{"name": "Ann", "age": 3}']
    voted = Vote(ReActAgent(ScriptedModel(replies), output_type=Person), n=3).run("?")
    # the whole value is the vote, not the last number in its text (3 in all three)
    assert voted.output == Person(name="Ann", age=3)
    split = Vote(ReActAgent(ScriptedModel(replies[:2] + replies[1:2])), n=3).run(
        "?", output_type=Person)
    assert split.output == Person(name="Bo", age=3)  # this run's own type goes to every run
    # the first trial, the reflection on it, the second trial
    tried = Reflexion(ReActAgent(ScriptedModel([replies[0], "Bo, not Ann.", replies[1]])),
                      evaluator=lambda task, result: result.output.name == "Bo").run(
        "?", output_type=Person)
    assert tried.output == Person(name="Bo", age=3) and tried.status == "done"


@pytest.mark.parametrize(("reply", "value"), [("negative", "negative"), ("no", "no"),
                                              ("neutral.", "neutral")])
def test_a_bare_word_is_a_literal(reply, value):
    kind = Literal["positive", "negative", "neutral", "yes", "no"]
    assert ReActAgent(ScriptedModel([reply]), output_type=kind).run("?").output == value


def test_a_number_with_a_full_stop_is_a_number():
    assert ReActAgent(ScriptedModel(["21。"]), output_type=int).run("?").output == 21


@pytest.mark.parametrize("schema, words", [
    ({"$ref": "https://example.com/person.json"}, "only refs to a part of the schema"),
    ({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
     "only refs to a part of the schema"),
    ({"type": "nonsense"}, "not a valid JSON Schema"),
])
def test_a_json_schema_from_outside_is_refused_with_words_before_any_run(schema, words):
    from tao.output import SchemaOutput

    with pytest.raises(ValueError, match=words):
        SchemaOutput(schema)
    deep: dict = {"type": "string"}
    for _ in range(3000):  # deeper than Python's recursion limit: still words, not a crash
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(ValueError, match="nested more than 32 levels"):
        SchemaOutput(deep)
