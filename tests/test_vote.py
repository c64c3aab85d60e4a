"""Self-consistency voting: the agent runs several times, the first greedy and the rest sampled,
and the answer most runs reached wins. ``ScriptedModel`` runs that record what sampling each
model call was asked for."""

from __future__ import annotations

import asyncio

import pytest

import tao
from tao import PlanExecuteAgent, ReActAgent, ScriptedModel, Vote, calculate, calculator, tool
from tao.agents.vote import answer_key
from tao.events import Thought
from tao.models import sampling


def answers(*texts):
    """A model whose n-th call answers ``texts[n]`` and records the sampling it was called under."""
    seen = []

    def reply(i):
        def f(messages):
            seen.append(sampling.current())
            return texts[i]
        return f
    return ScriptedModel([reply(i) for i in range(len(texts))]), seen


def run(agent, task="What is 6 * 7?"):
    events = []
    return agent.run(task, [events.append]), events


def test_the_majority_answer_wins_and_the_runs_are_summed():
    model, seen = answers("41", "The answer is 42.", "42", "It is 42")
    result, events = run(Vote(ReActAgent(model), n=5))
    assert result.status == "done"
    assert answer_key(result.answer) == 42.0
    assert result.answer == "The answer is 42."  # the first run that reached the winner
    assert result.turns == 4  # 41, 42, 42 ... 42 again: 3 of 4, one run left cannot change it
    tallies = [e.text for e in events if type(e) is Thought]
    assert tallies[0].startswith("vote 1/5: 41") and "no later run can change that" in tallies[-1]


def test_the_first_run_is_greedy_and_the_others_sample_with_their_own_seed():
    model, seen = answers("1", "2", "3")
    run(Vote(ReActAgent(model), n=3, temperature=0.6, seed=10))
    assert seen[0] is None  # the model's own setting
    assert seen[1:] == [sampling.Sampling(0.6, 10), sampling.Sampling(0.6, 11)]
    assert sampling.current() is None  # nothing leaks into the caller


def test_agreeing_runs_stop_early():
    model, _ = answers("42", "42", "42", "7", "7")
    result, _ = run(Vote(ReActAgent(model), n=5))
    assert (result.answer, result.turns, model.remaining) == ("42", 3, 2)


def test_a_tie_goes_to_the_answer_reached_first():
    model, _ = answers("7", "42", "42", "7")
    result, _ = run(Vote(ReActAgent(model), n=4))
    assert result.answer == "7"


def test_failed_runs_do_not_vote():
    @tool(side_effects=False)
    def lookup(q: str) -> str:
        """Look something up."""
        return "nothing"

    bad = tao.tool_call("nonexistent_tool")
    model = ScriptedModel([bad, bad, "9", "9"])
    result, _ = run(Vote(ReActAgent(model, [lookup], max_turns=2), n=3))
    assert (result.status, result.answer) == ("done", "9")


def test_no_run_finishing_keeps_the_last_ones_status():
    @tool(side_effects=False)
    def lookup(q: str) -> str:
        """Look something up."""
        return "nothing"

    call = tao.tool_call("lookup", q="x")
    model = ScriptedModel([call] * 4)
    result, events = run(Vote(ReActAgent(model, [lookup], max_turns=2), n=2))
    assert result.status == "max_turns" and result.turns == 4
    assert "no answer (max_turns)" in [e.text for e in events if type(e) is Thought][0]


def test_tools_with_side_effects_are_refused_unless_allowed():
    @tool
    def send_mail(to: str) -> str:
        """Send a mail."""
        return "sent"

    with pytest.raises(ValueError, match="send_mail"):
        Vote(ReActAgent(ScriptedModel([]), [send_mail]), n=3)
    Vote(ReActAgent(ScriptedModel([]), [send_mail]), n=3, side_effects=True)  # said: fine
    Vote(ReActAgent(ScriptedModel([]), [calculate, calculator]), n=3)  # pure tools: fine


def test_codeact_votes_with_its_arithmetic_helpers():
    # tao eval --agent codeact --votes 3 was refused: CodeAct carries add ... avg, unmarked
    from tao import CodeActAgent
    from tao.factory import AgentSpec, build_agent

    model, _ = answers("<solution>42</solution>", "<solution>42</solution>")
    agent = build_agent(AgentSpec("codeact", votes=3), model)
    assert isinstance(agent, Vote) and "add" in agent.agent.toolbox
    result, _ = run(agent)
    assert result.answer == "42" and result.status == "done"
    Vote(CodeActAgent(ScriptedModel([]), sandbox="subprocess"), n=3)


def test_bad_settings_are_clear_errors():
    agent = ReActAgent(ScriptedModel([]))
    with pytest.raises(ValueError, match="at least 1"):
        Vote(agent, n=0)
    with pytest.raises(ValueError, match="temperature"):
        Vote(agent, n=3, temperature=0)
    with pytest.raises(TypeError):
        Vote("react", n=3)


def test_answers_compare_by_their_last_number_else_by_folded_text():
    assert answer_key("他还剩 4 元") == answer_key("4") == answer_key("The answer: 4.0")
    assert answer_key("Paris.") == answer_key("  paris ")
    assert answer_key("巴黎。") == answer_key("巴黎")
    assert answer_key("Paris") != answer_key("London")


def test_plan_steps_started_by_a_sampled_run_sample_too():
    """A plan's steps run as tasks of their own: the setting must reach them (agent steps call
    the model from there)."""
    plan = ('{"steps": [{"id": "step1", "description": "6*7", "tool": "calculate", '
            '"args": {"expression": "6*7"}, "depends_on": []}], "answer": "$step1"}')
    seen = []

    def planner(messages):
        seen.append(sampling.current())
        return plan

    model = ScriptedModel([planner] * 3)
    result, _ = run(Vote(PlanExecuteAgent(model, [calculate]), n=3, seed=5))
    assert answer_key(result.answer) == 42.0
    assert seen == [None, sampling.Sampling(0.7, 5)]


def test_the_sampling_setting_is_per_task():
    async def probe(value):
        if value is None:
            await asyncio.sleep(0.01)
            return sampling.current()
        with sampling.sampling(value):
            await asyncio.sleep(0.02)
            return sampling.current()

    async def main():
        return await asyncio.gather(probe(0.5), probe(None))

    a, b = asyncio.run(main())
    assert a == sampling.Sampling(0.5) and b is None
    with pytest.raises(ValueError):
        with sampling.sampling(-1):
            pass


def test_tao_run_votes_prints_the_tallies_and_the_majority_answer(monkeypatch):
    from typer.testing import CliRunner

    import tao.cli as cli

    model, seen = answers("他还剩 14 元。", "他还剩 4 元。", "还剩 4 元")
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)
    res = CliRunner().invoke(cli.app, ["run", "小明有 50 元……还剩多少钱？", "--votes", "3", "--json"])
    assert res.exit_code == 0, res.output
    import json

    assert json.loads(res.stdout)["answer"] == "他还剩 4 元。"
    assert seen[0] is None and seen[1].temperature > 0



def test_a_run_stops_as_soon_as_no_later_run_can_change_the_winner():
    # one answer of one, one run left: a new answer could only tie, and a tie goes to the first
    model, _ = answers("42", "7")
    assert run(Vote(ReActAgent(model), n=2))[0].turns == 1
    # 42, 7, 7 of five: 7 leads 2 to 1 with two runs left - 42 could still pass it
    model, _ = answers("42", "7", "7", "42", "42")
    result, _ = run(Vote(ReActAgent(model), n=5))
    assert (result.answer, result.turns) == ("42", 5)


def test_tools_of_wrapped_agents_are_checked_too():
    from tao.agents.reflexion import Reflexion

    @tool
    def send_mail(to: str) -> str:
        """Send a mail."""
        return "sent"

    inner = ReActAgent(ScriptedModel([]), [send_mail])
    with pytest.raises(ValueError, match="send_mail"):
        Vote(Reflexion(inner, lambda task, result: True), n=3)
    with pytest.raises(ValueError, match="send_mail"):
        Vote(Vote(inner, n=2, side_effects=True), n=3)


def test_closing_a_vote_early_closes_the_run_inside_at_once():
    closed = []

    class Slow(tao.Agent):
        name = "slow"

        async def loop(self, task, run_id):
            try:
                yield Thought("thinking", 1)
                await asyncio.sleep(10)
            finally:
                closed.append(task)

    async def main():
        events = Vote(Slow(), n=3).stream("t")
        async for event in events:
            if type(event) is Thought:
                break
        await events.aclose()
        return list(closed)

    assert asyncio.run(main()) == ["t"]  # before aclose returned, not at garbage collection


def test_parse_failures_of_every_run_count_in_an_eval():
    from tao.evals.runner import parse_failures

    from tao.messages import ToolCall

    def bad():
        return ToolCall("c1", "calculate", {}, parse_error="arguments are not a JSON object")

    model = ScriptedModel([bad(), "1", bad(), "2", bad(), "3"])  # each run: one bad reply, turn 1
    events = []
    result = Vote(ReActAgent(model, [calculate]), n=3).run("What is 6 * 7?", [events.append])
    assert result.turns == 6 and parse_failures(events) == 3
