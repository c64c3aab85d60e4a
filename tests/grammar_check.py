"""llama.cpp's own grammar engine, driven without a model: does a GBNF grammar parse, and does it
take a given reply whole?

``LlamaGrammar.from_string`` only stores the text - llama.cpp parses a grammar when decoding
starts, so a broken one would show up mid-run. Here the grammar sampler is built on the embedded
model's vocabulary alone (``vocab_only``: no weights, nothing decoded, well under a second) and
fed a reply's tokens one by one, as it would judge the model's own: a token it rejects gets
probability zero. At the end, end-of-text must be allowed, so the reply is complete, not a prefix.
"""

from __future__ import annotations

import ctypes
import math
from functools import cache

import pytest


@cache
def _vocab():
    llama_cpp = pytest.importorskip("llama_cpp")
    from tao.errors import LocalModelError
    from tao.models.gguf_store import ensure_gguf

    try:
        path = ensure_gguf("qwen2.5-coder-0.5b")
    except LocalModelError as e:
        pytest.skip(f"the embedded model's packages are not installed: {e}")
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    return llama_cpp, llm, llama_cpp.llama_model_get_vocab(llm._model.model)


def sampler(gbnf: str):
    """The grammar sampler for ``gbnf``; the test fails when llama.cpp cannot parse it."""
    llama_cpp, _, vocab = _vocab()
    smpl = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    assert smpl, "llama.cpp could not parse the grammar (its message is on stderr)"
    return smpl


def accepts(gbnf: str, reply: str) -> bool:
    """Whether decoding under ``gbnf`` can produce exactly ``reply`` and then stop."""
    llama_cpp, llm, _ = _vocab()
    smpl = sampler(gbnf)
    try:
        eos = llm.token_eos()
        for token in [*llm.tokenize(reply.encode(), add_bos=False, special=False), eos]:
            data = (llama_cpp.llama_token_data * 1)()
            data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
            candidates = llama_cpp.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
            llama_cpp.llama_sampler_apply(smpl, ctypes.byref(candidates))
            if math.isinf(data[0].logit):
                return False
            if token != eos:
                llama_cpp.llama_sampler_accept(smpl, token)
        return True
    finally:
        llama_cpp.llama_sampler_free(smpl)
