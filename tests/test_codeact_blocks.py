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
