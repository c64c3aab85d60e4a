"""Short-term memory: each model call's messages fitted to the model's context window.

A chat that goes on, or a run whose observations pile up, would one day send more tokens than the
model can read (the embedded model then fails the call; an API model answers 400). ``Fitter``
drops - or with ``overflow="summarize"`` has the model summarise - the oldest turns before that
happens. What is never dropped: the head (system prompt, worked example, recalled memories), the
task, and the last ``keep_last`` messages before and after it (the turns the next answer is about).

Counting: with the embedded model (anything with ``render`` and ``n_ctx``: ``LocalModel``) the
prompt is counted exactly, rendered through its chat template with the tool section and tokenized
by llama's own tokenizer. Other models get an estimate - one token for every 4 ASCII characters,
one for every other character (a CJK character is one or two tokens in the common BPE
vocabularies) plus 5 a message for the role markers - scaled after each call by the provider's
own ``usage.prompt_tokens`` for what was sent, so the estimate converges on the provider's count.

A cut, once made, is kept while the conversation still starts the same way (a summary is written
once, not at every call), and it goes a quarter of the budget further than needed, so the next
few turns fit without cutting again.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .. import prompts
from ..lang import detect_language
from ..messages import Message, Usage, estimate_tokens

PER_MESSAGE = 5  # role markers a chat template adds around a message
DEFAULT_REPLY = 1024  # tokens kept free for the reply when the call does not say max_tokens
SLACK = 0.25  # a new cut leaves this share of the budget free


def estimate(text: str) -> int:
    """The documented estimate for a model whose tokenizer tao cannot run (see the module doc)."""
    return estimate_tokens(text)


class Counter:
    """Tokens of messages and prompts for one model (see the module doc)."""

    def __init__(self, model: Any):
        self.model = model
        self.local = callable(getattr(model, "render", None)) and bool(getattr(model, "n_ctx", 0))
        self.scale = 1.0
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._fixed: dict[tuple[str, ...], int] = {}
        self._ratio: dict[tuple[str, ...], float] = {}

    def text(self, s: str) -> int:
        n = self._cache.get(s)
        if n is None:
            n = self.model.count_tokens(s) if self.local else estimate(s)
            self._cache[s] = n
            if len(self._cache) > 4096:
                self._cache.popitem(last=False)
        return n

    def message(self, m: Message) -> int:
        n = self.text(m.content) + PER_MESSAGE
        for c in m.tool_calls:
            n += self.text(c.name) + self.text(json.dumps(c.arguments, ensure_ascii=False))
        return n if self.local else round(n * self.scale)

    def _raw(self, messages: Sequence[Message], tools: Any) -> int:
        n = sum(self.message(m) for m in messages)
        for t in tools or ():
            n += self.text(t.name + t.description + json.dumps(t.parameters, ensure_ascii=False))
        return n

    def prompt(self, messages: Sequence[Message], tools: Any = None) -> int:
        """The whole prompt: exact for the embedded model, else the calibrated estimate."""
        if self.local:
            text = self.model.render(messages, tools)
            return self.model.count_tokens(text, special=True)
        return self._raw(messages, tools)

    def approx(self, messages: Sequence[Message], tools: Any = None) -> int:
        """Without rendering the prompt: cached per-message counts scaled by what the last
        exact count found (the chat template and the JSON form of replies add a share of
        their own), plus (embedded model) the tool section."""
        if not self.local:
            return self._raw(messages, tools)
        fixed, ratio = self._calibration(tools)
        return fixed + round(sum(self.message(m) for m in messages) * ratio)

    def _calibration(self, tools: Any) -> tuple[int, float]:
        key = tuple(t.name for t in tools or ())
        if key not in self._fixed:
            self._fixed[key] = self.prompt([Message.system("")], tools) - PER_MESSAGE
        return self._fixed[key], self._ratio.get(key, 1.0)

    def exact(self, messages: Sequence[Message], tools: Any = None) -> int:
        """``prompt``, and for the embedded model the estimate calibrated against it."""
        n = self.prompt(messages, tools)
        if self.local:
            fixed, _ = self._calibration(tools)
            raw = sum(self.message(m) for m in messages)
            key = tuple(t.name for t in tools or ())
            self._ratio[key] = max(1.0, (n - fixed) / raw) if raw else 1.0
        return n

    def fits(self, messages: Sequence[Message], tools: Any, budget: int) -> bool:
        """Whether the prompt fits ``budget``: the estimate decides when it is under half the
        budget or clearly over it; otherwise (or before any exact count) it is counted."""
        if self.local and tuple(t.name for t in tools or ()) not in self._ratio:
            return self.exact(messages, tools) <= budget
        n = self.approx(messages, tools)
        if n <= budget // 2 or n > budget + 16 + budget // 20:
            return n <= budget
        return self.exact(messages, tools) <= budget

    def observe(self, messages: Sequence[Message], tools: Any, usage: Usage | None) -> None:
        """Calibrate the estimate with what the provider counted for ``messages``."""
        if self.local or usage is None or not usage.prompt_tokens:
            return
        raw = self._raw(messages, tools) / self.scale
        if raw > 0:
            self.scale = min(3.0, max(0.5, usage.prompt_tokens / raw))


def _key(messages: Sequence[Message]) -> str:
    h = hashlib.sha1()
    for m in messages:
        h.update(f"{m.role}\0{m.content}\0{[c.to_dict() for c in m.tool_calls]}\1".encode(
            "utf-8", "surrogatepass"))
    return h.hexdigest()


def _units(messages: list[Message], start: int, stop: int) -> list[tuple[int, int]]:
    """``messages[start:stop]`` cut into droppable units: a message with what answers it (the
    tool results of an assistant's calls; the answer to a user's question), so that no tool
    result is left without the call it answers."""
    if start >= stop:
        return []
    lead = messages[start].role
    units, begin = [], start
    for i in range(start + 1, stop):
        if messages[i].role == lead:
            units.append((begin, i))
            begin = i
    units.append((begin, stop))
    return units


class Fitter:
    """``Fitter(max_context_tokens=None, overflow="drop"|"summarize", keep_last=4)``: see the
    module doc. One ``Fitter`` may serve many runs (a chat): it keeps its last cut."""

    def __init__(self, max_context_tokens: int | None = None, overflow: str = "drop",
                 keep_last: int = 4):
        if overflow not in ("drop", "summarize"):
            raise ValueError(f"overflow must be 'drop' or 'summarize', not {overflow!r}")
        if max_context_tokens is not None and max_context_tokens < 256:
            raise ValueError(f"max_context_tokens={max_context_tokens} leaves no room for a prompt")
        if keep_last < 0:
            raise ValueError("keep_last must be 0 or more")
        self.window, self.overflow, self.keep_last = max_context_tokens, overflow, keep_last
        self._dropped: list[str] = []  # keys of the units the last cut dropped, oldest first
        self._summaries: OrderedDict[str, str] = OrderedDict()
        self.cuts = 0  # how many times a cut was made (for tests and benchmarks)

    def budget(self, model: Any, kwargs: dict[str, Any]) -> int | None:
        """Prompt tokens a call may send: the window less the room its reply needs."""
        window = self.window or getattr(model, "n_ctx", None)
        if not window:
            return None
        reply = kwargs.get("max_tokens") or getattr(model, "max_tokens", None) \
            or min(DEFAULT_REPLY, window // 4)
        return max(window - reply, window // 4)

    async def fit(self, model: Any, counter: Counter, messages: list[Message], head: int,
                  task: int, kwargs: dict[str, Any]) -> tuple[list[Message], Usage]:
        """``messages`` fitted to the budget, and the usage of any summary written for it.
        ``messages[:head]`` and ``messages[task]`` stay; ``task`` may be -1 (no task message:
        everything after the head is one run)."""
        budget = self.budget(model, kwargs)
        usage = Usage()
        tools = kwargs.get("tools")
        if budget is None or counter.fits(messages, tools, budget):
            return messages, usage
        k = self.keep_last
        if task >= 0:
            units = _units(messages, head, max(head, task - k)) + \
                _units(messages, task + 1, max(task + 1, len(messages) - k))
        else:
            units = _units(messages, head, max(head, len(messages) - k))
        keys = [_key(messages[a:b]) for a, b in units]
        n = 0  # the last cut still applies as far as the conversation starts the same way
        while n < len(self._dropped) and n < len(keys) and keys[n] == self._dropped[n]:
            n += 1
        cut = n if n == len(self._dropped) else 0
        sizes = [sum(counter.message(m) for m in messages[a:b]) for a, b in units]
        low = int(budget * (1 - SLACK))
        total = counter.approx(self._apply(messages, units, cut, ""), tools)
        if total > budget:
            while cut < len(units) and total > low:
                total -= sizes[cut]
                cut += 1
        while True:
            summary = ""
            if cut and self.overflow == "summarize":
                summary, used = await self._summary(model, messages, units, keys, cut)
                usage.add(used)
            fitted = self._apply(messages, units, cut, summary)
            if counter.exact(fitted, tools) <= budget or cut >= len(units):
                break
            cut += 1
        if cut != len(self._dropped) or keys[:cut] != self._dropped:
            self.cuts += 1
        self._dropped = keys[:cut]
        moved = task - sum(b - a for a, b in units[:cut] if b <= task) \
            + bool(summary and units[0][0] <= task)
        return _shorten(fitted, counter, budget, tools, head, moved if task >= 0 else -1), usage

    def _apply(self, messages: list[Message], units: list[tuple[int, int]], cut: int,
               summary: str) -> list[Message]:
        gone = {i for a, b in units[:cut] for i in range(a, b)}
        kept = [m for i, m in enumerate(messages) if i not in gone]
        if summary:
            first = units[0][0]
            kept.insert(first, Message.system(summary))
        return kept

    async def _summary(self, model: Any, messages: list[Message], units: list[tuple[int, int]],
                       keys: list[str], cut: int) -> tuple[str, Usage]:
        """The summary of the first ``cut`` units: from the cache, or the summary of a shorter
        cut plus the units after it, written by the model."""
        key = "|".join(keys[:cut])
        if key in self._summaries:
            return self._summaries[key], Usage()
        before, done = "", 0
        for j in range(cut - 1, 0, -1):
            k = "|".join(keys[:j])
            if k in self._summaries:
                before, done = self._summaries[k], j
                break
        lang = detect_language(" ".join(m.content for m in messages[units[0][0]:units[cut - 1][1]]))
        t = prompts.table("memory")[lang]
        lines = [before] if before else []
        for a, b in units[done:cut]:
            lines += [f"{m.role}: {m.content}" for m in messages[a:b] if m.content]
        asked = [Message.system(t["summarize"]), Message.user("\n".join(lines))]
        reply = await model.complete(asked, max_tokens=256)
        text = prompts.render(t["summary"], summary=reply.message.content.strip())
        self._summaries[key] = text
        if len(self._summaries) > 32:
            self._summaries.popitem(last=False)
        return text, reply.usage


def _shorten(messages: list[Message], counter: Counter, budget: int, tools: Any, head: int,
             task: int) -> list[Message]:
    """Last resort when even the kept turns are too long (one huge observation): the longest
    message after the head, the task excepted, keeps its beginning and end around a marker."""
    for _ in range(12):
        over = counter.exact(messages, tools) - budget
        if over <= 0:
            return messages
        candidates = [i for i in range(head, len(messages))
                      if i != task and len(messages[i].content) > 200]
        if not candidates:
            return messages
        i = max(candidates, key=lambda j: len(messages[j].content))
        text = messages[i].content
        keep = max(100, len(text) // 2 - over * 2)
        m = messages[i]
        cut = text[: keep // 2] + "\n…[…]…\n" + text[-keep // 2:]
        messages = [*messages[:i], Message(m.role, cut, m.tool_calls, m.tool_call_id, m.name),
                    *messages[i + 1:]]
    return messages


__all__ = ["Counter", "Fitter", "estimate"]
