"""An approval rule that raises (``tao.guard.policy``): a rule that cannot be evaluated fails
closed. The call is asked about - never run unasked - and the request names the rule and its
error, so whoever approves is not told the arguments matched a rule that never answered."""

from __future__ import annotations

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.events import ApprovalRequested, Observation
from tao.guard import Decision
from tao.guard.policy import Policy


def over_100(args):
    """A user's rule written for numbers: ``"lots"`` makes it raise ValueError."""
    return float(args["amount"]) > 100


def pay_tool(ran: list, **marks):
    @tool(**marks)
    def pay(amount: str, to: str) -> str:
        """Pay someone.

        Args:
            amount: how much
            to: whom
        """
        ran.append((amount, to))
        return f"paid {amount} to {to}"

    return pay


def test_a_rule_that_raises_asks_and_says_which_rule_failed_and_how():
    ran: list = []
    asked: list = []

    def approve(request):
        asked.append(request)
        return Decision.reject("not without a number")

    model = ScriptedModel([tool_call("pay", amount="lots", to="mallory"), "done"])
    events: list = []
    agent = ReActAgent(model, [pay_tool(ran, requires_approval=over_100)], approve=approve)
    result = agent.run("pay mallory", sinks=[events.append])
    assert ran == [] and result.ok  # asked, refused: never run
    [request] = asked
    assert request.reason == ("the approval rule over_100 could not be evaluated (ValueError: "
                              "could not convert string to float: 'lots'); a rule that cannot be "
                              "evaluated asks")
    [shown] = [e for e in events if type(e) is ApprovalRequested]
    assert shown.reason == request.reason  # what the console shows the user
    [obs] = [e for e in events if type(e) is Observation]
    assert obs.is_error and "not without a number" in obs.content


def test_the_agent_s_rule_by_tool_name_fails_closed_too_and_without_an_approver_nothing_runs():
    ran: list = []  # pytest's stdin is not a terminal: no one can approve, so it is rejected
    model = ScriptedModel([tool_call("pay", amount="lots", to="mallory"), "done"])
    result = ReActAgent(model, [pay_tool(ran)], require_approval={"pay": over_100}).run("pay")
    assert ran == [] and result.ok
    assert "stdin is not a terminal" in model.calls[1][-1].content  # what the model read


def test_the_policy_s_word_on_a_rule_that_raises_is_ask_in_both_languages():
    verdict, why = Policy(require_approval={"pay": over_100}).check(
        "pay", None, {"amount": "lots"}, tainted=False)
    assert (verdict, why) == ("ask", "why_error")
    assert why.values == {"rule": "over_100",
                          "error": "ValueError: could not convert string to float: 'lots'"}
    # a rule that answers is read as before: it matches, or the call runs
    assert Policy(require_approval={"pay": over_100}).check(
        "pay", None, {"amount": "500"}, False) == ("ask", "why_match")
    assert Policy(require_approval={"pay": over_100}).check(
        "pay", None, {"amount": "5"}, False) == ("run", "")
    from tao import prompts

    zh = prompts.render(prompts.table("guard")["zh"][why], **why.values)
    assert zh.startswith("需要批准的规则 over_100 无法判断（ValueError:")
