"""A keyword an agent does not take is an error that names the agent and the keyword it most
likely meant (``make_guard``: the agent's own parameters and the guard's keywords), not the
guard's bare ``Guard.__init__() got an unexpected keyword argument``."""

from __future__ import annotations

import pytest

from tao import ReActAgent, ScriptedModel
from tao.agents.base import make_guard
from tao.agents.codeact import CodeActAgent
from tao.agents.reflexion import Reflexion
from tao.plan.agent import PlanExecuteAgent


def test_a_misspelt_agent_keyword_names_the_agent_and_the_closest_keyword():
    with pytest.raises(TypeError) as caught:
        make_guard({"max_turn": 5}, ReActAgent)
    message = str(caught.value)
    assert message.startswith("ReActAgent() got an unexpected keyword argument 'max_turn'")
    assert "did you mean 'max_turns'?" in message and "Guard" not in message


def test_a_misspelt_guard_keyword_gets_the_guard_keyword():
    with pytest.raises(TypeError, match=r"CodeActAgent\(\).*'max_token'.*did you mean "
                                        r"'max_tokens'\?"):
        make_guard({"max_token": 100}, CodeActAgent)
    with pytest.raises(TypeError, match=r"did you mean 'require_approval'\?"):
        make_guard({"require_aproval": ["x"]}, PlanExecuteAgent)


def test_several_unknown_keywords_each_get_theirs_and_one_far_from_all_lists_them():
    with pytest.raises(TypeError) as caught:
        make_guard({"protocl": "text", "max_turn": 3}, ReActAgent)
    assert "unexpected keyword arguments 'protocl', 'max_turn'" in str(caught.value)
    assert "'protocol' for 'protocl'" in str(caught.value)
    assert "'max_turns' for 'max_turn'" in str(caught.value)
    with pytest.raises(TypeError) as caught:
        make_guard({"zzzz": 1}, ReActAgent)
    listed = str(caught.value)
    assert "it takes model, tools, protocol, max_turns" in listed
    assert "the guard's allow, deny" in listed and "max_tokens" in listed


def test_without_the_agent_the_guard_keywords_alone_and_bad_values_stay_the_guards_errors():
    with pytest.raises(TypeError, match=r"^Guard\(\) got an unexpected keyword argument 'max_toknes'; "
                                        r"did you mean 'max_tokens'\?$"):
        make_guard({"max_toknes": 5})
    with pytest.raises(TypeError, match="approve= takes a callback"):  # a bad value, said as before
        make_guard({"approve": 3}, ReActAgent)
    assert make_guard({"max_tokens": 5}, ReActAgent).budget.max_tokens == 5


def test_reflexion_a_keyword_it_does_not_take():
    agent = ReActAgent(ScriptedModel(["42"]))
    with pytest.raises(TypeError, match=r"^Reflexion\(\) got an unexpected keyword argument "
                                        r"'max_trial'; did you mean 'max_trials'\?$"):
        Reflexion(agent, lambda task, result: True, max_trial=3)


@pytest.mark.parametrize("make, said", [
    (lambda model: ReActAgent(model, max_turn=5),
     "ReActAgent() got an unexpected keyword argument 'max_turn'; did you mean 'max_turns'?"),
    (lambda model: CodeActAgent(model, max_turn=5),
     "CodeActAgent() got an unexpected keyword argument 'max_turn'; did you mean 'max_turns'?"),
    (lambda model: PlanExecuteAgent(model, max_replan=1),
     ("PlanExecuteAgent() got an unexpected keyword argument 'max_replan'; did you mean "
      "'max_replans'?")),
], ids=["react", "codeact", "plan"])
def test_each_agent_names_itself_and_suggests_its_own_keyword(make, said):
    with pytest.raises(TypeError) as caught:
        make(ScriptedModel(["42"]))
    assert str(caught.value) == said
