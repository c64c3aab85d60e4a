"""A CodeAct block that failed is repaired without the failed code in sight.

Shown its own failed block, the 1.5B copies it - word for word, sampled or not (HumanEval/140:
the same thirty lines three times, then the loop stop). The reply after a failure is shown the
conversation up to the last turn whose code worked, with the error; the run's messages keep
everything, and a turn whose code worked is shown in full as before.
"""

from __future__ import annotations

from tao import CodeActAgent, ScriptedModel


def test_the_repair_sees_the_error_not_the_failed_code():
    broken = "```python\ntotal = 21\nprint(totl * 2)\n```"

    def repair(messages):
        assert not any("total = 21" in m.content for m in messages)  # the failed block: not shown
        assert "NameError: name 'totl' is not defined" in messages[-1].content
        assert messages[-1].content.startswith("Double 21")  # beside the task it failed on
        return "```python\nfinal_answer(total * 2)\n```"

    model = ScriptedModel([broken, repair])
    result = CodeActAgent(model, sandbox="subprocess", helpers=False).run("Double 21")
    assert (result.status, result.answer) == ("done", "42")
    assert any("totl * 2" in m.content for m in result.messages)  # the record keeps it


def test_code_that_worked_stays_in_sight_after_a_later_failure():
    def repair(messages):
        shown = [m.content for m in messages]
        assert any("prices = [12, 30]" in c for c in shown)  # worked: still there
        assert not any(m.role == "assistant" and "sum(price)" in m.content
                       for m in messages)  # failed: not shown (its traceback quotes the line)
        assert "（你上一次写的代码运行失败了" in shown[-1]
        return "```python\nfinal_answer(sum(prices))\n```"

    model = ScriptedModel(["```python\nprices = [12, 30]\nprint(prices)\n```",
                           "```python\nprint(sum(price))\n```", repair])
    agent = CodeActAgent(model, sandbox="subprocess", helpers=False, language="zh")
    result = agent.run("两件东西分别 12 元和 30 元，一共多少钱？")
    assert (result.status, result.answer) == ("done", "42")


def test_show_failed_keeps_the_failed_block_in_sight():
    """For a model that edits better than it rewrites: the repair sees its block as before."""
    def repair(messages):
        assert messages[-2].role == "assistant" and "total = 21" in messages[-2].content
        assert messages[-1].content.startswith("Observation:") and "NameError" in messages[-1].content
        return "```python\nfinal_answer(total * 2)\n```"

    model = ScriptedModel(["```python\ntotal = 21\nprint(totl * 2)\n```", repair])
    agent = CodeActAgent(model, sandbox="subprocess", helpers=False, show_failed=True)
    assert agent.run("Double 21").answer == "42"
