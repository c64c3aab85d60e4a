"""A model that keeps making a call whose result it already has is asked for its answer.

Three of the package's 40 calculator problems ran ReAct to its turn limit (issue 26): the 1.5B
computed ``48 - 18``, got 30, was told "this call was made before, with the same result", and
sent it seven more times. A turn whose every call repeats one that worked, with the same result, learns nothing;
after two such turns in a row the next reply must be an answer: the tools stay in the prompt,
but the model door is asked with ``tool_choice="none"`` (the embedded model: a grammar whose
only action is the answer). A failing call is the streak's (``tests/test_loops.py``).
"""

from __future__ import annotations

from tao import ReActAgent, ScriptedModel, calculate, tool, tool_call
from tao.messages import Message


class Recording(ScriptedModel):
    """A scripted model that keeps the keyword arguments of each call."""

    def __init__(self, replies):
        super().__init__(replies)
        self.asked: list[dict] = []

    def stream(self, messages, **kwargs):
        self.asked.append(kwargs)
        return super().stream(messages, **kwargs)


def choices(model: Recording) -> list:
    return [kw.get("tool_choice") for kw in model.asked]


def test_the_same_working_call_a_third_time_makes_the_next_reply_an_answer():
    girls = tool_call("calculate", expression="48 * 3/8")
    boys = tool_call("calculate", expression="48 - 18")
    model = Recording([girls, boys, boys, boys, "男生有 30 名", "unused"])
    result = ReActAgent(model, tools=[calculate]).run("一个班有 48 名学生，其中女生占 3/8，男生有多少名？")
    assert (result.status, result.answer, result.turns) == ("done", "男生有 30 名", 5)
    assert choices(model) == [None, None, None, None, "none"]


def test_a_repeat_that_learns_something_new_is_not_a_loop():
    """A call whose result changed (the world moved on) is news: the count starts again."""
    state = {"n": 0}

    @tool(side_effects=False)
    def queue_length() -> int:
        """How many jobs wait in the queue."""
        state["n"] += 1
        return max(0, 3 - state["n"])

    poll = tool_call("queue_length")
    model = Recording([poll, poll, poll, "the queue is empty"])
    result = ReActAgent(model, tools=[queue_length]).run("Wait until the queue is empty.")
    assert result.answer == "the queue is empty"
    assert choices(model) == [None, None, None, None]


def test_the_same_call_is_said_to_repeat_only_when_its_result_did():
    """The coder ran ``from_roman('MCMXCIV')`` (a traceback), edited the file, ran it again
    (0) and was told "you made this exact call before and got the same result" (2026-12-07).
    Only a result seen before gets the note."""
    state = {"n": 0}

    @tool(side_effects=False)
    def check() -> str:
        """Run the check."""
        state["n"] += 1
        return "Traceback: TypeError" if state["n"] == 1 else "0"

    run = tool_call("check")
    model = Recording([run, run, run, "done"])
    ReActAgent(model, tools=[check]).run("Fix the module.")
    said = [m.content for m in model.calls[3] if m.role == "tool"]
    assert said[0] == "Traceback: TypeError" and said[1] == "0"  # changed: no note
    assert said[2].startswith("0\n(You made this exact call before and got the same result.")


def test_a_turn_with_one_new_call_beside_a_repeat_is_news():
    a, b = tool_call("calculate", expression="2 + 2"), tool_call("calculate", expression="3 + 3")
    c = tool_call("calculate", expression="4 + 4")
    model = Recording([a, a, [a, b], [a, c], a, a, "done"])
    ReActAgent(model, tools=[calculate]).run("Add some numbers.")
    assert choices(model) == [None, None, None, None, None, None, "none"]


def test_the_json_protocol_answers_under_a_grammar_with_final_as_its_only_action():
    from tao.agents.protocols import JsonProtocol

    asked = JsonProtocol.answer_only({"grammar": "root ::= ..."}, ScriptedModel([]))
    assert '\\"final\\"' in asked["grammar"] and '\\"action\\"' in asked["grammar"]
    schema = JsonProtocol.answer_only({"response_format": {}}, ScriptedModel([]))["response_format"]
    assert schema["json_schema"]["schema"]["properties"]["action"]["enum"] == ["final"]


def test_a_model_of_ones_own_without_the_hint_is_asked_as_before():
    """A ``Model`` subclass whose ``stream`` names its keywords and predates ``tool_choice``
    is not sent it (a TypeError would end the run): the loop goes on as it did."""
    from tao.messages import Usage
    from tao.models.base import Model, ModelResponse
    from tao.models.scripted import _as_message

    class Mine(Model):
        name = "mine"

        def __init__(self, replies):
            self.replies = list(replies)

        async def stream(self, messages, *, tools=None, response_format=None, grammar=None,
                         stop=None, max_tokens=None):
            yield ModelResponse(_as_message(self.replies.pop(0)), Usage(), "stop")

    boys = tool_call("calculate", expression="48 - 18")
    result = ReActAgent(Mine([boys, boys, boys, "30"]), tools=[calculate]).run("48 - 18?")
    assert (result.status, result.answer) == ("done", "30")


# -- the model door: what each backend does with tool_choice="none" -----------------------------
# (the embedded model's side is in tests/test_tool_gate.py, beside the gate's answer-only reply)

def test_an_endpoint_is_sent_tool_choice_none_with_its_tools():
    from tao.models.openai import OpenAIModel

    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    params = model.request([Message.user("hi")], tools=[calculate.spec], tool_choice="none")
    assert params["tool_choice"] == "none" and params["tools"]
    assert "tool_choice" not in model.request([Message.user("hi")], tool_choice="none")


# -- CodeAct: the same block run again, with the same output again -------------------------------

class GrammarRecording(Recording):
    supports_grammar = True  # as the embedded model: the grammar of each call is what it may write


BLOCK = "```python\ndef add_tax(price):\n    return round(price * 1.08, 2)\n```"


def test_codeact_running_the_same_block_again_is_asked_for_its_answer_in_plain_text():
    from tao.agents.code_blocks import ANSWER_GRAMMAR, CODE_GRAMMAR
    from tao.agents.codeact import CodeActAgent

    model = GrammarRecording([BLOCK, BLOCK, BLOCK, "add_tax is defined.", "unused"])
    result = CodeActAgent(model, sandbox="subprocess").run("Write add_tax(price): price plus 8 %.")
    assert (result.status, result.answer, result.tool_calls) == ("done", "add_tax is defined.", 3)
    grammars = [kw["grammar"] for kw in model.asked]
    assert grammars == [CODE_GRAMMAR, CODE_GRAMMAR, CODE_GRAMMAR, ANSWER_GRAMMAR]


def test_a_block_whose_output_changes_is_news():
    from tao.agents.code_blocks import CODE_GRAMMAR
    from tao.agents.codeact import CodeActAgent

    count = "```python\ntry:\n    n += 1\nexcept NameError:\n    n = 1\nprint(n)\n```"
    model = GrammarRecording([count, count, count, "```python\nfinal_answer(n)\n```"])
    result = CodeActAgent(model, sandbox="subprocess").run("Count to three.")
    assert result.answer == "3"
    assert [kw["grammar"] for kw in model.asked] == [CODE_GRAMMAR] * 4
