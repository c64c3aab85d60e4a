"""Code extraction for CodeAct: every way a model fences (or forgets to fence) its Python."""

from __future__ import annotations

import pytest

from tao.agents.code_blocks import CODE_GRAMMAR, extract_code, split_reply


@pytest.mark.parametrize("fence", ["```python", "```py", "```", "```Python", "```python3",
                                   "``` python", "````python"])
def test_fence_spellings(fence):
    closing = "````" if fence.startswith("````") else "```"
    assert extract_code(f"Compute it.\n{fence}\nx = 6 * 7\nprint(x)\n{closing}\nDone.") == [
        "x = 6 * 7\nprint(x)"]


def test_several_blocks_in_order_with_prose_around():
    reply = split_reply("First the area:\n```python\na = 3 * 4\n```\nthen print it\n"
                        "```py\nprint(a)\n```\nThat is all.")
    assert reply.blocks == ["a = 3 * 4", "print(a)"]
    assert reply.prose == "First the area:\nthen print it\nThat is all."
    assert reply.has_code


def test_unclosed_final_fence_is_still_code():
    assert extract_code("Let me see\n```python\nfor i in range(3):\n    print(i)\n") == [
        "for i in range(3):\n    print(i)"]
    assert extract_code("a\n```python\nx = 1\n```\n```python\nprint(x)") == ["x = 1", "print(x)"]


def test_other_languages_are_not_run_and_stay_prose():
    reply = split_reply("Run this:\n```bash\nrm -rf /\n```\nand this\n```json\n{\"a\": 1}\n```")
    assert reply.blocks == []
    assert "rm -rf /" in reply.prose


def test_no_code_is_prose():
    for text in ["The answer is 4.", "他还剩 4 元。", "42", "x = 4", ""]:
        reply = split_reply(text)
        assert reply.blocks == [] and reply.prose == text.strip()


def test_unfenced_python_is_recognised_but_prose_is_not():
    assert extract_code("x = 50 - 3 * 12\nprint(x)") == ["x = 50 - 3 * 12\nprint(x)"]
    assert extract_code("print(50 - 46)") == ["print(50 - 46)"]
    assert extract_code("final_answer(4)") == ["final_answer(4)"]
    assert extract_code("He has 4 yuan left (50 - 36 - 10).") == []
    assert extract_code("max(3, 4)") == []  # an expression is an answer, not a program


def test_indented_fence_inside_a_list_is_dedented():
    text = "1. compute\n   ```python\n   a = 1\n   if a:\n       print(a)\n   ```\n2. done"
    assert extract_code(text) == ["a = 1\nif a:\n    print(a)"]


def test_interactive_session_is_unwrapped():
    text = "```python\n>>> x = 2\n>>> print(x + 1)\n3\n```"
    assert extract_code(text) == ["x = 2\nprint(x + 1)"]


def test_empty_blocks_are_dropped_and_blank_edges_trimmed():
    assert extract_code("```python\n\n```\n```python\n\nprint(1)\n\n```") == ["print(1)"]


def test_backticks_inside_code_do_not_close_the_block():
    assert extract_code("```python\ns = '``'\nprint(s)\n```") == ["s = '``'\nprint(s)"]


def test_code_grammar_is_one_llama_cpp_parses():
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    llama_grammar.LlamaGrammar.from_string(CODE_GRAMMAR, verbose=False)
    assert CODE_GRAMMAR.startswith('root ::= "```python')


# -- the formats real models write (tests/data/codeact_replies.jsonl has real replies of each) --

def test_execute_tags_of_the_codeact_paper_and_mint():
    assert extract_code("<execute>\nprint(6*7)\n</execute>") == ["print(6*7)"]
    assert extract_code("<thought> mod </thought>\n<execute> print(194 % 11) </execute>") == [
        "print(194 % 11)"]
    reply = split_reply("<execute>\ndef f(n):\n    return n * 2\n</execute>\n<thought> now call it"
                        " </thought>\n<execute>\nprint(f(21))\n</execute>")
    assert reply.blocks == ["def f(n):\n    return n * 2", "print(f(21))"]
    assert reply.prose == "now call it" and reply.answer is None
    # cut at the token limit: the rest of the reply is the block
    assert extract_code("<execute>\nfor i in range(3):\n    print(i") == [
        "for i in range(3):\n    print(i"]
    # code on the tag's line keeps the indentation of the lines below it
    assert extract_code("<execute> for i in range(2):\n    print(i)\n</execute>") == [
        "for i in range(2):\n    print(i)"]
    # a fence inside the tag, and OpenMath's <llm-code>
    assert extract_code("<execute>\n```python\nx = 1\nprint(x)\n```\n</execute>") == [
        "x = 1\nprint(x)"]
    assert extract_code("<llm-code>\nprint(2)\n</llm-code>\n<llm-code-output>\n2\n"
                        "</llm-code-output>") == ["print(2)"]


def test_solution_is_the_answer_without_its_tags_only_when_no_code_is_beside_it():
    reply = split_reply("The answer is <solution> 42 </solution>.")
    assert reply.blocks == [] and reply.solution == "42" and reply.answer == "42"
    assert reply.prose == "The answer is ."
    assert split_reply("<solution>\nThe answer is 4.\n</solution>").answer == "The answer is 4."
    assert split_reply("The answer is <solution> 4").answer == "4"  # cut before the closing tag
    # what the 0.5B model writes after the reminder to call final_answer()
    assert split_reply("<final_answer>170</final_answer>").answer == "170"
    # code and a solution in one reply: the code runs first, the solution has not seen its output
    both = split_reply("<execute> print(3 * 4) </execute>\n<solution> 12 </solution>")
    assert both.blocks == ["print(3 * 4)"] and both.solution == "12" and both.answer is None
    # a tag quoted in backticks is a mention, not a tag
    assert split_reply("Use the `<solution>` tag.").answer == "Use the `<solution>` tag."


def test_fences_written_on_one_line_or_after_prose():
    assert split_reply("```python x = 5\nprint(x)\n```").blocks == ["x = 5\nprint(x)"]
    assert extract_code("```print(1)```") == ["print(1)"]
    assert extract_code("Run ```python print(2)``` now") == ["print(2)"]
    reply = split_reply("Let me compute: ```python\nx = 6 * 7\nprint(x)\n```\nDone.")
    assert reply.blocks == ["x = 6 * 7\nprint(x)"] and reply.prose == "Let me compute:\nDone."
    # closed at the end of the last line (what the grammar-held model writes), or with text after
    assert extract_code("```python\nx = 1\nfinal_answer(x)```") == ["x = 1\nfinal_answer(x)"]
    assert extract_code("Thought: add\nCode:\n```py\nprint(1 + 1)\n```<end_code>") == [
        "print(1 + 1)"]
    # a fence opened where the last one should have closed
    assert extract_code("```python\nx = 1\n```python\nprint(x)\n```") == ["x = 1", "print(x)"]
    # info strings that are not code
    assert extract_code('```python title="a.py"\nprint(3)\n```') == ["print(3)"]
    assert extract_code("```{.python}\nprint(3)\n```") == ["print(3)"]


def test_a_reply_is_an_answer_only_without_any_code_marker():
    for text, answer in [("The answer is 4.", "The answer is 4."),
                         ("Final Answer: 42", "42"), ("Assistant:\nAnswer: 7", "7"),
                         ("他还剩 4 元。", "他还剩 4 元。"), ("x = 4", "x = 4")]:
        assert split_reply(text).answer == answer, text
    for text, problem in [
        ("```bash\nls\n```", ("language", "bash")),
        ("```python\n```", ("empty", "```python")),
        ("<execute>\n</execute>", ("empty", "<execute>")),
        ("<solution> </solution>", ("empty", "<solution>")),
        ("The answer is:\n```\n16\n```", ("not_code", "```")),  # output written out, not code
        ("```42```", ("not_code", "```42```")),
        ("Let me compute it:\nprint(6 * 7", ("loose", "print(6 * 7")),
        ("<thought> I should add them. </thought>", ("tag", "<thought>")),
    ]:
        reply = split_reply(text)
        assert (reply.blocks, reply.answer, reply.problem) == ([], None, problem), text
    assert split_reply("").answer is None and split_reply("").problem is None


# -- inputs that must never raise ---------------------------------------------------------------

def test_deep_and_long_input_never_raises():
    chain = "+".join(["1"] * 3000)  # ast.parse raises RecursionError on this
    assert split_reply(chain).answer == chain  # a bare expression is an answer
    assert extract_code(f"x = {chain}\nprint(x)") == []  # too deep to tell: not run unmarked
    assert extract_code(f"```python\nx = {chain}\nprint(x)\n```") == [f"x = {chain}\nprint(x)"]
    nested = "[" * 5000 + "]" * 5000
    assert split_reply(nested).answer == nested
    assert split_reply(f"```{nested}```").problem == ("not_code", f"```{nested[:40]}```")
    assert extract_code(f"<execute>print({nested})</execute>") == [f"print({nested})"]


def test_huge_and_pathological_replies_stay_linear():
    import time

    for text in ["`" * 1_000_000, "``` " * 250_000, "a```" * 250_000, "<execute " * 100_000,
                 ("```python\n" + "print(1)\n" * 200_000 + "```"), "x" * 2_000_000]:
        start = time.perf_counter()
        split_reply(text)
        assert time.perf_counter() - start < 5, text[:20]


def test_lone_surrogates_are_text():
    reply = split_reply("The answer is \udcff.")
    assert reply.answer == "The answer is \udcff."
    assert extract_code("```python\nprint('\udcff')\n```") == ["print('\udcff')"]
    assert extract_code("x = '\ud800'\nprint(x)") == []  # cannot be encoded: not bare code
    assert split_reply("<solution> \udcff </solution>").answer == "\udcff"


def test_split_reply_never_raises_on_any_text():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    pieces = st.sampled_from(["```", "```python", "```py x = 1", "<execute>", "</execute>",
                              "<solution>", "</solution>", "<thought>", "print(", ")", "\n",
                              "x = 1", ">>> ", "[", "]", "`", " ", "\udcff", "答案：", "4"])

    @hypothesis.settings(max_examples=200, deadline=None)
    @hypothesis.given(st.lists(st.one_of(pieces, st.text(max_size=8)), max_size=40))
    def check(parts):
        reply = split_reply("".join(parts))
        assert all(isinstance(b, str) and b.strip() for b in reply.blocks)
        assert reply.answer is None or not reply.blocks

    check()
