"""The greedy-first grammar sampler picks exactly the tokens llama-cpp-python's own sampler chain
picks - it only skips asking the grammar about tokens greedy decoding would never take."""

from __future__ import annotations

import types

import pytest

from tao import calculate, calculator
from tao import grammar as grammars
from tao.models.greedy_grammar import GreedyGrammarSampler

pytestmark = pytest.mark.local_model

PROMPTS = [
    "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？",
    "What is (17 * 23) - (144 / 12)? Use a tool.",
    "Say hello in French, then answer without any tool.",
]


def _chat(text: str) -> str:
    return ("<|im_start|>system\nAnswer with one JSON action.<|im_end|>\n"
            f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n")


def test_greedy_first_decodes_the_same_tokens_as_the_sampler_chain():
    from llama_cpp import Llama

    from tao.models.llama_engine import _grammar
    from tao.models.local import LocalModel

    llm = LocalModel().llm
    fast = llm._init_sampler
    chain = types.MethodType(Llama._init_sampler, llm)
    gram = _grammar(grammars.action_grammar([calculator.spec, calculate.spec]))

    def decode(init, prompt):
        llm._init_sampler = init
        llm.reset()
        out = llm.create_completion(prompt=_chat(prompt), max_tokens=48, temperature=0.0, grammar=gram)
        return out["choices"][0]["text"]

    try:
        for prompt in PROMPTS:
            want = decode(chain, prompt)
            got = decode(fast, prompt)
            assert got == want
            assert isinstance(llm.tao_grammar_sampler, GreedyGrammarSampler)
    finally:
        llm._init_sampler = fast
    assert llm.tao_grammar_sampler.steps > 10  # it really decoded through the new sampler


def test_sampling_with_a_temperature_draws_what_the_grammar_allows_and_repeats_by_seed():
    """``tao.Vote``'s sampled runs: grammar-last drawing (``GrammarLastSampler``). Every reply
    parses under the grammar, the same seed gives the same reply, other seeds other replies."""
    import json

    from tao.models.greedy_grammar import GrammarLastSampler
    from tao.models.llama_engine import _grammar
    from tao.models.local import LocalModel, _read_action

    llm = LocalModel("qwen2.5-coder-0.5b").llm  # the same code path, 3x faster than the default
    gram = _grammar(grammars.action_grammar([calculator.spec, calculate.spec]))

    def draw(seed):
        llm.reset()
        out = llm.create_completion(prompt=_chat(PROMPTS[0]), max_tokens=96, temperature=1.0,
                                    grammar=gram, seed=seed)
        assert isinstance(llm.tao_grammar_sampler, GrammarLastSampler)
        return out["choices"][0]["text"], out["choices"][0]["finish_reason"]

    replies = {seed: draw(seed) for seed in (1, 2, 3)}
    for text, finish in replies.values():
        if finish == "stop":  # a whole reply: JSON actions as the grammar says
            assert isinstance(json.loads(text), dict), text  # one object, as the grammar has it
            reply = _read_action(text)
            assert reply.tool_calls or reply.content, text
    assert draw(2) == replies[2]
    assert len({text for text, _ in replies.values()}) > 1
    assert llm.tao_grammar_sampler.steps > 10


def test_penalties_keep_llama_cpps_chain():
    from tao.models.llama_engine import _grammar
    from tao.models.local import LocalModel

    llm = LocalModel().llm
    llm.tao_grammar_sampler = None
    gram = _grammar(grammars.action_grammar([calculate.spec]))
    llm.reset()
    llm.create_completion(prompt=_chat(PROMPTS[1]), max_tokens=8, temperature=0.7, grammar=gram,
                          seed=1, repeat_penalty=1.1)
    assert llm.tao_grammar_sampler is None
