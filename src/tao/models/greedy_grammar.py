"""Grammar-constrained greedy decoding that asks the grammar about one token, not the vocabulary.

llama-cpp-python's sampler chain runs the grammar over every candidate (151,936 for Qwen2.5) at
each step before the greedy pick: tens of milliseconds a token on 2 cores, more than the 1.5B
model's own decode. Under greedy decoding the answer is the same if we take the raw argmax and
only ask the grammar whether *that* token is allowed; when it is not (a few tokens a reply:
where the model would leave the format) the grammar filters the whole vocabulary as before and
the argmax of what it allows is taken. llama.cpp's own ``common_sampler`` does the same
("grammar_first = false"). The picks are identical by construction - argmax over the allowed set
equals the raw argmax whenever the raw argmax is allowed - and a test decodes with both.

Used by ``LocalModel`` when sampling is greedy with neutral penalties; with a temperature
``GrammarLastSampler`` does the same for a draw (why the draws keep the grammar's distribution:
its docstring); penalties and the rest keep llama-cpp-python's sampler.
"""

from __future__ import annotations

import ctypes
from typing import Any

_NEG_INF = float("-inf")


class GreedyGrammarSampler:
    """Stands where ``Llama._sampler`` stands: ``sample(ctx, idx)`` returns the token and
    advances the grammar; ``close()`` frees it."""

    def __init__(self, llm: Any, grammar: Any):
        import llama_cpp
        import numpy as np

        self._c = llama_cpp
        self._np = np
        self._n_vocab = llm.n_vocab()
        vocab = llm._model.vocab
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self._grammar:
            raise ValueError("the grammar did not parse")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(
            data=self._one, size=1, selected=-1, sorted=False)
        self._all = (llama_cpp.llama_token_data * self._n_vocab)()
        self._all_np = np.ctypeslib.as_array(self._all)  # a structured view: id, logit, p
        self._all_np["id"] = np.arange(self._n_vocab, dtype=np.int32)
        self.fallbacks = 0
        self.steps = 0

    def _logits(self, ctx: Any, idx: int) -> Any:
        ptr = self._c.llama_get_logits_ith(ctx.ctx, idx)
        return self._np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        c, np = self._c, self._np
        logits = self._logits(ctx, idx)
        token = int(np.argmax(logits))
        self.steps += 1
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(logits[token]), 0.0
        self._one_array.size, self._one_array.selected, self._one_array.sorted = 1, -1, False
        c.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        if self._one[0].logit == _NEG_INF:  # not allowed here: ask about the whole vocabulary
            self.fallbacks += 1
            view = self._all_np
            view["logit"] = logits
            view["p"] = 0.0
            view["id"] = np.arange(self._n_vocab, dtype=np.int32)
            array = c.llama_token_data_array(data=self._all, size=self._n_vocab, selected=-1,
                                             sorted=False)
            c.llama_sampler_apply(self._grammar, ctypes.byref(array))
            token = int(view["id"][int(np.argmax(view["logit"][:array.size]))])
        c.llama_sampler_accept(self._grammar, token)
        return token

    def accept(self, token: int) -> None:  # pragma: no cover - generate() does not call it
        self._c.llama_sampler_accept(self._grammar, token)

    def reset(self) -> None:
        self._c.llama_sampler_reset(self._grammar)

    def close(self) -> None:
        if self._grammar:
            self._c.llama_sampler_free(self._grammar)
            self._grammar = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass



class GrammarLastSampler(GreedyGrammarSampler):
    """Sampling with a temperature, the grammar asked last: llama-cpp-python's own truncation
    and temperature chain (top-k, typical, top-p, min-p, temp, dist) draws a token from the raw
    logits, and only that token goes to the grammar; when the grammar refuses it, the grammar
    filters the vocabulary and the chain draws again from what is left. This is what llama.cpp's
    ``common_sampler`` does (``grammar_first = false``). Without truncation it draws from exactly
    the grammar-constrained distribution: an allowed token t comes first with p(t), and after a
    refusal (probability 1 - Z) with p(t)/Z, together p(t)/Z. With truncation the candidate set
    is cut before rather than after the grammar, a small difference in what can be drawn; every
    token drawn is still one the grammar allows. Same seed, same draws."""

    def __init__(self, llm: Any, grammar: Any, *, seed: int, temp: float, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, typical_p: float = 1.0):
        super().__init__(llm, grammar)
        c = self._c
        self._chain = c.llama_sampler_chain_init(c.llama_sampler_chain_default_params())
        for link in (c.llama_sampler_init_top_k(top_k), c.llama_sampler_init_typical(typical_p, 1),
                     c.llama_sampler_init_top_p(top_p, 1), c.llama_sampler_init_min_p(min_p, 1),
                     c.llama_sampler_init_temp(temp), c.llama_sampler_init_dist(seed & 0xFFFFFFFF)):
            c.llama_sampler_chain_add(self._chain, link)
        self._ids = self._np.arange(self._n_vocab, dtype=self._np.int32)

    def _draw(self, logits: Any, grammar: bool) -> int:
        c = self._c
        view = self._all_np
        view["id"] = self._ids
        view["logit"] = logits
        view["p"] = 0.0
        array = c.llama_token_data_array(data=self._all, size=self._n_vocab, selected=-1,
                                         sorted=False)
        if grammar:
            c.llama_sampler_apply(self._grammar, ctypes.byref(array))
        c.llama_sampler_apply(self._chain, ctypes.byref(array))
        return int(self._all[array.selected].id)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        c = self._c
        logits = self._logits(ctx, idx)
        self.steps += 1
        token = self._draw(logits, grammar=False)
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(logits[token]), 0.0
        self._one_array.size, self._one_array.selected, self._one_array.sorted = 1, -1, False
        c.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        if self._one[0].logit == _NEG_INF:  # refused: draw again from what the grammar allows
            self.fallbacks += 1
            token = self._draw(logits, grammar=True)
        c.llama_sampler_accept(self._grammar, token)
        c.llama_sampler_accept(self._chain, token)
        return token

    def reset(self) -> None:
        super().reset()
        self._c.llama_sampler_reset(self._chain)

    def close(self) -> None:
        super().close()
        if getattr(self, "_chain", None):
            self._c.llama_sampler_free(self._chain)
            self._chain = None


def install(llm: Any) -> None:
    """Route ``llm``'s penalty-free, grammar-constrained sampling through the samplers above:
    greedy through ``GreedyGrammarSampler``, with a temperature through ``GrammarLastSampler``;
    every other setting (penalties, mirostat, logits processors) keeps llama-cpp-python's chain."""
    original = llm._init_sampler

    def init_sampler(**kw: Any) -> Any:
        grammar = kw.get("grammar")
        neutral = (kw.get("repeat_penalty", 1.0) == 1.0 and not kw.get("frequency_penalty")
                   and not kw.get("presence_penalty") and not kw.get("logits_processor")
                   and not kw.get("mirostat_mode"))
        if grammar is not None and neutral and kw.get("temp") == 0.0:
            sampler: Any = GreedyGrammarSampler(llm, grammar)
        elif grammar is not None and neutral and (kw.get("temp") or 0.0) > 0.0:
            sampler = GrammarLastSampler(llm, grammar, seed=llm._seed, **{
                k: kw[k] for k in ("top_k", "top_p", "min_p", "typical_p", "temp") if k in kw})
        else:
            return original(**kw)
        llm.tao_grammar_sampler = sampler
        return sampler

    llm._init_sampler = init_sampler
