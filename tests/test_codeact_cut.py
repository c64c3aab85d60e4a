"""A CodeAct reply the token limit cut off runs its whole statements, not a ``SyntaxError``.

The 1.5B, asked to check its function on the docstring's examples, sometimes lists the same
asserts until its 768 tokens run out, mid-string (HumanEval/141: a right function, then one line
written 40 times). Run as it was, the block failed at its last line and the function never ran;
the model then copied the block, and the loop stop ended the run. Now the statement the cut
reached is dropped whole, asserts repeated word for word run once, and the observation says
what was cut.
"""

from __future__ import annotations

from tao import CodeActAgent, ScriptedModel
from tao.agents.code_blocks import cut_block
from tao.models.base import ModelResponse


class Limited(ScriptedModel):
    """A scripted model whose replies listed in ``cut`` end as a model's do at ``max_tokens``."""

    def __init__(self, replies, cut):
        super().__init__(replies)
        self.cut = set(cut)

    async def stream(self, messages, **kwargs):
        n = self._next
        async for chunk in super().stream(messages, **kwargs):
            if type(chunk) is ModelResponse and n in self.cut:
                chunk = ModelResponse(chunk.message, chunk.usage, "length")
            yield chunk


FUNCTION = "def double(n):\n    return n * 2\n\n"
LOOPING = FUNCTION + "assert double(2) == 4\n" + "assert double(3) == 6\n" * 30 + "assert double(4) == \"ei"


def test_a_cut_block_runs_its_whole_statements_and_says_what_was_cut():
    model = Limited([f"```python\n{LOOPING}", "```python\nfinal_answer(double(21))\n```"], cut=[0])
    result = CodeActAgent(model, sandbox="subprocess", helpers=False).run("Write double(n).")
    assert (result.status, result.answer) == ("done", "42")
    seen = model.calls[1][-1].content
    assert "SyntaxError" not in seen
    assert "cut off in line 35 of its last block" in seen
    assert "29 assert lines were word-for-word copies" in seen


def test_a_function_cut_inside_its_body_is_not_run_as_a_shorter_function():
    code = "x = 1\ndef total(items):\n    s = 0\n    for i in items:\n        s += "
    cut = cut_block(code)
    assert (cut.code, cut.line) == ("x = 1", 2)


def test_a_reply_cut_before_any_whole_statement_is_told_and_not_taken_as_the_answer():
    model = Limited(["```python\nprint(\"a very long str", "```python\nfinal_answer(1)\n```"],
                    cut=[0])
    result = CodeActAgent(model, sandbox="subprocess", helpers=False, language="zh").run("写一个程序")
    assert (result.status, result.answer, result.tool_calls) == ("done", "1", 1)
    assert "被截断了，所以什么也没有运行" in model.calls[1][-1].content


def test_a_whole_reply_that_ended_at_its_fence_is_left_as_it_is():
    """Only a reply the model says was cut is trimmed: a complete one that fails fails as written."""
    model = Limited(["```python\nprint('a)\n```", "```python\nfinal_answer(2)\n```"], cut=[])
    result = CodeActAgent(model, sandbox="subprocess", helpers=False).run("Print a.")
    assert result.answer == "2" and "SyntaxError" in model.calls[1][-1].content
