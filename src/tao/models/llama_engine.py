"""The embedded model's llama.cpp side: load a GGUF, evaluate prompts, decode under a grammar.

It runs where the weights live - by default in the model's worker process (``local_worker``),
so that a crash in native code ends that process and not the user's; with
``TAO_LOCAL_WORKER=0`` in the caller's own process. Both run the same functions here, so the
tokens are the same either way.

A prompt's fixed prefix (everything before the task: system prompt, tool list, worked example) is
always evaluated on its own, then the rest; its KV state is kept (``kv_cache``: in memory and in
the cache directory) and restored instead of evaluated again, in this process or the next. The
split is the same with or without a saved state, because llama.cpp's logits depend on how a
prompt is cut into batches: greedy replies do not change with the cache (tested).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import LocalModelError
from . import kv_cache, llama_cpu

log = logging.getLogger(__name__)
_LOADED: dict[tuple, Any] = {}
_LOAD_LOCK = threading.Lock()


@atexit.register
def _close_models() -> None:
    """Free the weights before the interpreter tears down llama_cpp's module globals (otherwise
    ``Llama.__del__`` runs late and prints an ignored TypeError at exit)."""
    while _LOADED:
        _, llm = _LOADED.popitem()
        close = getattr(llm, "close", None)
        if close is not None:
            close()


def load(path: str, n_ctx: int, n_threads: int, *, amx_denied: bool = False) -> Any:
    """The ``Llama`` for ``path``, loaded once per process. ``amx_denied``: this process already
    refuses the AMX permission (the worker's seccomp filter), so the extra buffer types stay."""
    key = (path, n_ctx, n_threads)
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                import llama_cpp
                from llama_cpp import Llama
            except ImportError as e:  # pragma: no cover - a dependency of tao-agents
                raise LocalModelError("llama-cpp-python is not installed: pip install tao-agents") from e
            info = llama_cpp.llama_print_system_info().decode(errors="replace")
            layout = llama_cpu.choose(llama_cpu.cpu_flags(), info, amx_denied=amx_denied)
            start = time.perf_counter()
            with llama_cpu.model_params(layout):
                llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, verbose=False,
                            seed=0)
            llm.tao_load_s = time.perf_counter() - start
            llm.tao_layout = layout
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise LocalModelError(f"{path} has no chat template in its metadata")
            eos = llm._model.token_get_text(llm.token_eos())
            bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
            llm.tao_formatter = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos)
            llm.tao_lock = threading.Lock()  # one generation at a time per loaded model
            if os.environ.get("TAO_GRAMMAR_SAMPLER", "greedy-first") != "chain":
                from .greedy_grammar import install

                install(llm)  # same tokens, ~50x less grammar work per token (see the module)
            identity = (f"{kv_cache.model_identity(Path(path))}|n_ctx={n_ctx}|"
                        f"n_batch={llm.n_batch}|llama_cpp={llama_cpp.__version__}")
            llm.tao_prefixes = kv_cache.PrefixCache(
                identity, kv_cache.default_dir() if kv_cache.enabled() else None)
            llm.tao_primed = None  # the prefix whose saved or fresh KV heads the context
            llm.tao_last = None  # the previous call's prompt tokens (a run's next turn extends them)
            llm.tao_reply_s = 0.0
            _LOADED[key] = llm
        return _LOADED[key]


@lru_cache(maxsize=64)
def _grammar(gbnf: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(gbnf, verbose=False)


def render(llm: Any, wire: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    """The chat template over ``wire``; ``tools`` fills its tools section (the native format)."""
    return llm.tao_formatter(messages=wire, tools=tools).prompt


def count(llm: Any, text: str, special: bool = False) -> int:
    return len(llm.tokenize(text.encode(), add_bos=False, special=special)) if text else 0


def generate(llm: Any, wire: list[dict[str, str]], *, max_tokens: int, temperature: float,
             stop: Sequence[str] = (), grammar: str | None = None,
             response_format: dict[str, Any] | None = None, seed: int | None = None,
             emit: Callable[[str], None], cancelled: Callable[[], bool] = lambda: False,
             tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Decode one reply to the chat ``wire`` (role/content dicts in the template's terms),
    handing each piece of text to ``emit``; stops early when ``cancelled()``. Returns the
    token counts and llama.cpp's finish reason."""
    tokens, cuts = prompt_tokens(llm, wire, tools)
    if grammar is None and response_format:
        grammar = _response_format_grammar(response_format)
    params: dict[str, Any] = dict(prompt=tokens, max_tokens=max_tokens, temperature=temperature,
                                  stop=[*stop, "<|im_end|>"], stream=True,
                                  grammar=_grammar(grammar) if grammar else None)
    if seed is not None:
        params["seed"] = seed
    finish, pieces = None, []
    with llm.tao_lock:
        _prime(llm, tokens, cuts)
        llm.tao_last = None  # until this call ends well
        first = None
        for chunk in llm.create_completion(**params):
            first = first or time.perf_counter()
            if cancelled():
                break
            choice = chunk["choices"][0]
            finish = choice.get("finish_reason") or finish
            if choice["text"]:
                pieces.append(choice["text"])
                emit(choice["text"])
        llm.tao_last = tokens
        if first is not None:
            llm.tao_reply_s += time.perf_counter() - first
    return {"prompt_tokens": len(tokens), "completion_tokens": count(llm, "".join(pieces)),
            "finish": finish}


def first_token(llm: Any, wire: list[dict[str, Any]], texts: Sequence[str],
                tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """How likely the reply to ``wire`` is to start with each of ``texts`` (each one's first
    token): the prompt is evaluated as ``generate`` would, and left in the context, so a
    ``generate`` on the same prompt right after evaluates nothing again."""
    import llama_cpp
    import numpy as np

    tokens, cuts = prompt_tokens(llm, wire, tools)
    if len(tokens) >= llm.n_ctx():
        raise LocalModelError(f"prompt of {len(tokens)} tokens exceeds n_ctx {llm.n_ctx()}")
    with llm.tao_lock:
        _prime(llm, tokens, cuts)
        llm.tao_last = None
        held = min(_common(llm.input_ids[:llm.n_tokens], tokens), len(tokens) - 1)
        llm.n_tokens = held
        llm.eval(tokens[held:])
        row = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)  # the last token's
        logits = np.ctypeslib.as_array(row, shape=(llm.n_vocab(),)).astype(np.float64)
        llm.tao_last = tokens
    top = float(logits.max())
    probs = np.exp(logits - top)
    probs /= probs.sum()
    ids = {t: _tokenize_text(llm, t)[0] for t in texts}
    return {"p": {t: float(probs[i]) for t, i in ids.items()}, "prompt_tokens": len(tokens)}


def _tokenize_text(llm: Any, text: str) -> list[int]:
    return llm.tokenize(text.encode(), add_bos=False, special=True)


def prompt_tokens(llm: Any, wire: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
                  ) -> tuple[list[int], list[int]]:
    """The prompt's tokens and the lengths of its prefixes that end where a user message
    starts: one of them is the fixed prefix before the task (which one, ``_prime`` asks
    the cache). A prefix is the common head of its own tokens and the prompt's, so a BPE
    merge across the cut cannot make it differ from what the prompt holds."""
    tokens = _tokenize(llm, render(llm, wire, tools))
    cuts: list[int] = []
    for j in range(1, len(wire)):
        if wire[j]["role"] == "user":
            try:
                head = _tokenize(llm, render(llm, wire[:j], tools))
            except Exception:  # noqa: BLE001 - a template that wants the whole chat
                continue
            cut = _common(head, tokens)
            if 0 < cut < len(tokens) and (not cuts or cut > cuts[-1]):
                cuts.append(cut)
    return tokens, cuts


def stats(llm: Any) -> dict[str, Any]:
    import llama_cpp

    perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return {"load_s": llm.tao_load_s, "prompt_tokens": perf.n_p_eval,
            "prompt_s": perf.t_p_eval_ms / 1000, "decoded_tokens": perf.n_eval,
            "decode_s": perf.t_eval_ms / 1000, "reply_s": llm.tao_reply_s,
            "prefix_hits": llm.tao_prefixes.hits, "prefix_misses": llm.tao_prefixes.misses,
            "layout": llm.tao_layout.reason}


def _tokenize(llm: Any, text: str) -> list[int]:
    """As ``create_completion`` tokenizes a text prompt, so passing tokens changes nothing."""
    tokens = llm.tokenize(text.encode(), add_bos=False, special=True)
    bos = llm.token_bos()
    return [bos, *tokens] if bos >= 0 and llm._model.add_bos_token() else tokens


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _prime(llm: Any, tokens: list[int], cuts: list[int]) -> None:
    """Leave in the context only a head of ``tokens`` that a fresh process would hold here too,
    so what is decoded next cannot depend on what this process ran before (llama.cpp's numbers
    shift with the batch cut). That is all of the previous prompt when this call is the next
    turn of the same chat; else the fixed prefix - the longest cut the cache has, else the
    last one (the task's start) - restored, or evaluated on its own and saved; else nothing.
    ``Llama.generate`` then reuses the head and evaluates the rest."""
    held = _common(llm.input_ids[:llm.n_tokens], tokens)
    if llm.tao_last is not None and held >= len(llm.tao_last):
        return
    store = llm.tao_prefixes
    cut = next((c for c in reversed(cuts) if store.has(tokens[:c])), cuts[-1] if cuts else 0)
    if cut == 0 or len(tokens) >= llm.n_ctx():  # nothing fixed; or too long, as generate says
        llm.tao_primed = None
        llm.reset()
        return
    prefix = tokens[:cut]
    if llm.tao_primed == prefix and held >= cut:
        llm.n_tokens = cut  # the chat that came before shares this prefix: drop the rest only
        return
    llm.tao_primed = None
    snap = store.get(prefix)
    if snap is not None:
        try:
            _restore(llm, snap)
            llm.tao_primed = prefix
            return
        except (RuntimeError, ValueError) as e:  # a state this build cannot take: evaluate
            log.debug("kv cache: restoring %d tokens failed (%s); evaluating them", cut, e)
    llm.reset()
    llm.eval(prefix)
    llm.tao_primed = prefix
    try:
        store.put(prefix, _state(llm))
    except RuntimeError as e:  # not saved: the next process evaluates it again, nothing worse
        log.debug("kv cache: cannot take the state of %d tokens: %s", cut, e)


def _state(llm: Any) -> bytes:
    """The context's state as ``Llama.save_state`` takes it, without the copy of its score buffer
    (n_batch x vocab floats, 311 MB for Qwen, never read with ``logits_all=False``): 0.85 s saved
    on a cold prefix, and 0.7 s on a restore through ``load_state``, which writes it back."""
    import ctypes

    import llama_cpp

    size = llama_cpp.llama_state_get_size(llm._ctx.ctx)
    buf = (ctypes.c_uint8 * size)()
    n = llama_cpp.llama_state_get_data(llm._ctx.ctx, buf, size)
    if not 0 < n <= size:
        raise RuntimeError(f"llama_state_get_data copied {n} of {size} bytes")
    return ctypes.string_at(buf, n)


def _restore(llm: Any, snap: kv_cache.Snapshot) -> None:
    """What ``Llama.load_state`` does, less the score buffer: the state back into the context,
    the prefix into ``input_ids``, and a flag so ``generate`` decodes before it samples."""
    import ctypes

    import llama_cpp

    n, size = int(snap.tokens.size), len(snap.state)
    if n >= llm.input_ids.shape[0]:
        raise ValueError(f"{n} prefix tokens do not fit n_ctx {llm.input_ids.shape[0]}")
    llm.reset()
    buf = (ctypes.c_uint8 * size).from_buffer_copy(snap.state)
    if llama_cpp.llama_state_set_data(llm._ctx.ctx, buf, size) != size:
        llm._ctx.kv_cache_clear()
        raise RuntimeError("llama_state_set_data refused the saved state")
    llm.input_ids[:n] = snap.tokens
    llm.n_tokens = n
    llm._requires_eval = True


def _response_format_grammar(response_format: dict[str, Any]) -> str | None:
    from .. import grammar as grammars

    if response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema", {})
        return grammars.json_schema_grammar(spec.get("schema", spec))
    if response_format.get("type") == "json_object":
        from llama_cpp.llama_grammar import JSON_GBNF

        return JSON_GBNF
    return None




def handle(llm: Any, op: str, req: dict[str, Any], emit: Callable[[str], None],
           cancelled: Callable[[], bool]) -> Any:
    """One request, as the worker process and the in-process engine both answer it."""
    if op == "generate":
        return generate(llm, req["wire"], max_tokens=req["max_tokens"],
                        temperature=req["temperature"], stop=req.get("stop") or (),
                        grammar=req.get("grammar"), response_format=req.get("response_format"),
                        seed=req.get("seed"), emit=emit, cancelled=cancelled,
                        tools=req.get("tools"))
    if op == "first_token":
        return first_token(llm, req["wire"], req["texts"], req.get("tools"))
    if op == "render":
        return render(llm, req["wire"], req.get("tools"))
    if op == "count":
        return count(llm, req["text"], bool(req.get("special")))
    if op == "stats":
        return stats(llm)
    if op == "seed":
        return llm.set_seed(int(req["seed"]))
    raise ValueError(f"unknown request {op!r}")
