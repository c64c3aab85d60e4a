"""``memory=`` on every agent: one object at the model door for short- and long-term memory.

    from tao import ReActAgent
    from tao.memory import Memory, MemoryStore

    memory = Memory(MemoryStore(), user="ana")     # or memory=True: the default store
    ReActAgent(model, tools, memory=memory).run("I prefer answers in Celsius. Weather in Oslo?")
    ReActAgent(model, tools, memory=memory).run("And in Rome?")   # a later run, a later session

A run with memory (``Memory.start``) wraps the agent's model once (``MemoryRun.wrap``) - no
loop knows about it. Each model call of the run then gets, just before the task message:

- the memories recalled for the task when the run started (the best matches, plus the user's
  newest preferences, within ``recall_tokens``), as one system message;
- ``history``, the conversation so far (what ``WithHistory`` does; an agent whose model is a
  ``WithHistory`` for the same task has that history taken over here, so it is fitted too);

and the whole call is fitted to the model's context (``short.Fitter``: oldest turns dropped or
summarised, never the system prompt, the task or the last turns). The agent also gets a
``remember`` tool, and when the run has ended ``finish`` writes what the user said about
themselves (``extract="rules"``, no model call; ``"model"``: one call; ``False``: nothing).
Nothing that the agent sent as instructions is ever stored (``extract.PromptText``), and no
secret: the store keeps an API key, a token or a password as ``***`` (``scrub``).

``memory=None`` (the default) still fits every call to the context the model declares (the
embedded model's ``n_ctx``); ``memory=False`` turns even that off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from .. import prompts
from ..messages import Message, Usage
from ..models.base import Chunk, Model, ModelResponse
from ..models.wrapped import WrappedModel
from .extract import PromptText, from_model, rules
from .scrub import only_secret, scrub
from .short import Counter, Fitter


class Memory:
    """``Memory(store=None, *, history=None, user=None, max_context_tokens=None,
    overflow="drop", keep_last=4, recall=5, recall_tokens=400, min_score=0.25, remember=True,
    extract="rules")``. ``store``: a ``MemoryStore``, a path, ``True`` (the default store in the
    user data directory) or ``None`` (short-term only). ``user`` scopes what is recalled and
    stored (one store, many users: smolagents #703). ``history``: a list of ``Message``s read at
    every call (a chat appends to it)."""

    def __init__(self, store: Any = None, *, history: list[Message] | None = None,
                 user: str | None = None, max_context_tokens: int | None = None,
                 overflow: str = "drop", keep_last: int = 4, recall: int = 5,
                 recall_tokens: int = 400, min_score: float = 0.25, remember: bool = True,
                 extract: str | bool = "rules", fit: bool = True):
        if extract not in ("rules", "model", False, None):
            raise ValueError(f"extract must be 'rules', 'model' or False, not {extract!r}")
        if store is True:
            from .store import MemoryStore

            store = MemoryStore()
        elif isinstance(store, (str, Path)):
            from .store import MemoryStore

            store = MemoryStore(store)
        elif store is not None and not (hasattr(store, "add") and hasattr(store, "search")):
            raise TypeError(f"store must be a MemoryStore, a path, True or None, not {store!r}")
        self.store, self.user = store, user
        self.history = history if history is not None else []
        self.fitter = Fitter(max_context_tokens, overflow, keep_last) if fit else None
        self.recall, self.recall_tokens, self.min_score = recall, recall_tokens, min_score
        self.remember, self.extract = remember, extract or False
        self.prompt_text = PromptText()
        self.lang = "en"
        self._counters: dict[int, tuple[Model, Counter]] = {}

    @property
    def scope(self) -> dict[str, Any]:
        return {"user": self.user} if self.user is not None else {}

    def tools(self) -> list[Any]:
        """The ``remember`` tool, when there is a store to write to."""
        if self.store is None or not self.remember:
            return []
        from ..tools.base import FunctionTool

        def remember(text: str) -> str:
            return self.save([text], self.lang, source="remember_tool")[0]

        t = prompts.table("memory")
        tool = FunctionTool(remember, name="remember", description=t["en"]["remember"])
        self.prompt_text.add(t["en"]["remember"])
        self.prompt_text.add(t["zh"]["remember"])
        return [tool]

    def with_tools(self, toolbox: Any) -> Any:
        """``toolbox`` plus this memory's tools (a tool of the same name given by the user wins)."""
        from ..tools.base import Toolbox

        extra = [t for t in self.tools() if t.name not in toolbox]
        if not extra:
            return toolbox
        for t in toolbox:
            self.prompt_text.add(t.description)
        return Toolbox([*toolbox, *extra])

    def save(self, texts: Sequence[str], lang: str, **metadata: Any) -> list[str]:
        """Store each text as a memory unless it is prompt text; what the model is told."""
        t = prompts.table("memory")[lang]
        kind = metadata.pop("kind", "fact")
        out = []
        for text in texts:
            text = (text or "").strip()
            if not text:
                out.append(prompts.render(t["refused"], why=t["empty"]))
            elif text in self.prompt_text:
                out.append(prompts.render(t["refused"], why=t["prompt_text"]))
            elif only_secret(scrub(text)):
                out.append(prompts.render(t["refused"], why=t["secret"]))
            else:  # what was kept, secrets blanked: the model learns they were not
                item = self.store.add(text, kind=kind, **self.scope, **metadata)
                out.append(prompts.render(t["remembered"], fact=item.text))
        return out

    def recalled(self, task: str) -> str:
        """The memories for ``task`` as prompt lines: the best matches and the newest
        preferences of this user, within ``recall_tokens``."""
        if self.store is None or not self.recall or not task.strip() \
                or not self.store.count(**self.scope):  # nothing yet: the embedder stays unloaded
            return ""
        from .store import compress

        found = self.store.search(task, k=self.recall, min_score=self.min_score, **self.scope)
        newest = self.store.all(kind="preference", **self.scope)[-3:][::-1]
        items = compress([*found, *newest], self.recall_tokens)
        return "\n".join(f"- {i.text}" for i in items)

    def counter(self, model: Model) -> Counter:
        """The token counter for ``model``, kept across runs (its cache and calibration are
        what make counting a long chat cheap)."""
        held = self._counters.get(id(model))
        if held is None or held[0] is not model:
            if len(self._counters) > 8:
                self._counters.clear()
            held = self._counters[id(model)] = (model, Counter(model))
        return held[1]

    def start(self, task: str, lang: str, history: Sequence[Message] = ()) -> MemoryRun:
        """One run's memory; ``history``: this run's conversation before its task (a session's,
        or the one a handoff passes on), after the memory's own."""
        self.lang = "zh" if lang == "zh" else "en"  # what the remember tool answers in
        return MemoryRun(self, task, self.lang, history)


class MemoryRun:
    """One run's memory: what was recalled, the wrapped model, the end-of-run extraction."""

    def __init__(self, memory: Memory, task: str, lang: str, history: Sequence[Message] = ()):
        self.memory, self.task, self.lang = memory, task, lang
        self.history: list[Message] = [*memory.history, *history] if history else memory.history
        notes = memory.recalled(task)
        self.note = prompts.render(prompts.table("memory")[lang]["recalled"], memories=notes) \
            if notes else ""
        self.usage = Usage()

    def wrap(self, model: Model) -> Model:
        """``model`` as this run's calls should reach it: the model itself when there is no
        store, no history and no context to fit (with a store, the wrapper also learns the
        prompt text that must never be stored)."""
        from ..models.history import WithHistory

        if isinstance(model, WithHistory) and model.task == self.task:
            self.history = [*self.history, *model.history]
            model = model.inner
        fitter = self.memory.fitter
        fits = fitter is not None and fitter.budget(model, {}) is not None
        if self.memory.store is None and not self.history and not fits:
            return model
        return Remembering(model, self)

    async def finish(self, result: Any, model: Model | None = None) -> Any:
        """After the run: what the user said about themselves goes to the store."""
        memory = self.memory
        if memory.store is None or not memory.extract:
            return result
        if memory.extract == "model" and model is not None:
            facts, used = await from_model(model, self.task, self.lang)
            result.usage.add(used)
        else:
            facts = rules(self.task)
        for fact in facts:
            kind = "preference" if _preference(fact) else "fact"
            memory.save([fact], self.lang, kind=kind, source="extract")
        return result


def _preference(text: str) -> bool:
    low = text.casefold()
    return any(w in low for w in ("prefer", "like", "love", "hate", "always", "never",
                                  "from now on", "喜欢", "爱", "讨厌", "偏好", "习惯", "以后",
                                  "总是", "始终"))


class Remembering(WrappedModel):
    """The run's model behind its memory (see the module doc). Attributes not its own are the
    wrapped model's (``stats()``, ``llm``, ``n_ctx``)."""

    def __init__(self, model: Model, run: MemoryRun):
        super().__init__(model)
        self.run = run
        self.counter = run.memory.counter(model)

    def assemble(self, messages: Sequence[Message]) -> tuple[list[Message], int, int]:
        """The call's messages with the recalled note and the history before the task; the
        length of the head that stays and the task's index (-1 when the call has no task)."""
        messages = list(messages)
        for m in messages:
            if m.role == "system":
                self.run.memory.prompt_text.add(m.content)
        task = self.run.task
        i = next((j for j, m in enumerate(messages) if m.role == "user" and m.content == task), -1)
        if i < 0:
            head = next((j for j, m in enumerate(messages) if m.role != "system"), len(messages))
            return messages, head, -1
        extra = ([Message.system(self.run.note)] if self.run.note else []) + list(self.run.history)
        head = i + bool(self.run.note)
        return [*messages[:i], *extra, *messages[i:]], head, i + len(extra)

    async def stream(self, messages: Sequence[Message], **kwargs: Any) -> AsyncIterator[Chunk]:
        sent, head, task = self.assemble(messages)
        fitter, used = self.run.memory.fitter, Usage()
        if fitter is not None:
            sent, used = await fitter.fit(self.inner, self.counter, sent, head, task, kwargs)
        async with self.chunks(sent, **kwargs) as chunks:
            async for chunk in chunks:
                if type(chunk) is ModelResponse:
                    self.counter.observe(sent, kwargs.get("tools"), chunk.usage)
                    if used.total_tokens:  # the summary written for this call counts as its cost
                        total = Usage(chunk.usage.prompt_tokens + used.prompt_tokens,
                                      chunk.usage.completion_tokens + used.completion_tokens)
                        chunk = ModelResponse(chunk.message, total, chunk.finish_reason)
                yield chunk


def open_store(path: Any = None) -> Any:
    """The ``MemoryStore`` at ``path`` (default: the user data directory), keyword search only
    when the embedder's package (``tao-agents[memory]``) is not installed."""
    from .store import MemoryStore

    try:
        return MemoryStore(path)
    except ImportError:
        return MemoryStore(path, embedder=False)


def as_memory(value: Any) -> Memory:
    """What ``memory=`` accepts: ``None`` (fit the context only), ``False`` (nothing), ``True``
    (the default store), a path, a ``MemoryStore`` or a ``Memory``."""
    if isinstance(value, Memory):
        return value
    if value is None:
        return Memory()
    if value is False:
        return Memory(fit=False)
    return Memory(value)


__all__ = ["Memory", "MemoryRun", "Remembering", "as_memory", "open_store"]
