"""What is worth remembering from a run, and what must never be (mem0 #2736: stored memories
that were the system prompt or the tool list, which the next run then read back as facts).

Two guards. The extraction reads only what the user wrote - the task, never the system prompt,
the tool list, tool output or the model's reply - so prompt text cannot get in by that road. And
``PromptText`` rejects a candidate (from the extraction, a model or the ``remember`` tool) whose
8-character shingles come mostly from the prompts and tool descriptions the agent sent.

``rules`` (the default extraction) keeps the user's own sentences that state a lasting fact or
preference ("I prefer answers in Celsius", "我叫李雷", "记住我对花生过敏"): no model call, so a
run ends no slower. ``from_model`` asks the model for the same, as a JSON array.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from .. import prompts
from ..messages import Message

_EN = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|usually\s+|always\s+|never\s+)?(?:prefer|like|love|enjoy|hate|"
    r"dislike|don't like|do not like|can't stand|am allergic|'m allergic|am vegetarian|"
    r"'m vegetarian|am vegan|'m vegan|live in|live at|work at|work for|work as|speak)\b"
    r"|\bmy\s+(?:name|favou?rite|birthday|email|time ?zone|city|job|wife|husband|partner|son|"
    r"daughter|kids?|dog|cat|team|company|preference)\b|\bcall me\b|\bremember (?:that|:)|"
    r"\bfrom now on\b|\bplease always\b|\balways (?:answer|reply|use|write)\b|\bi(?:'m| am) (?:a|an)\s",
    re.IGNORECASE)
_ZH = re.compile(
    r"我(?:很|非常|比较|最|一直|平时|更)?(?:喜欢|爱吃|爱喝|讨厌|不喜欢|不爱|偏好|习惯|不吃|不喝|"
    r"对.{1,10}过敏|住在|在.{1,16}(?:工作|上班|上学)|是(?:一名|一个|个))|我叫|我的(?:名字|生日|邮箱|"
    r"爱好|工作|职业|孩子|女儿|儿子|妻子|丈夫|老婆|老公|猫|狗|时区|城市)|记住|以后(?:请|都|回答|用)|"
    r"请(?:总是|一直|始终)")
_QUESTION = re.compile(r"[?？]\s*$|吗\s*$|^(?:what|who|where|when|why|how|which|do|does|did|can|could|"
                       r"is|are|will|would)\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")


def rules(text: str) -> list[str]:
    """The user's sentences in ``text`` that state a fact about them or a standing preference."""
    out = []
    for s in _SENTENCES.split(text or ""):
        s = s.strip(" \t-*•")
        if 4 <= len(s) <= 300 and not _QUESTION.search(s) and (_EN.search(s) or _ZH.search(s)):
            out.append(s)
    return out


async def from_model(model: Any, text: str, lang: str) -> tuple[list[str], Any]:
    """Facts and preferences the model finds in the user's ``text`` (a JSON array), and the
    call's usage. A reply that is not a JSON array of strings gives nothing."""
    t = prompts.table("memory")[lang]
    schema = {"type": "array", "items": {"type": "string"}}
    reply = await model.complete([Message.system(t["extract"]), Message.user(text)],
                                 response_format={"type": "json_schema", "json_schema": {
                                     "name": "facts", "schema": schema}}, max_tokens=256)
    content = reply.message.content.strip()
    start, end = content.find("["), content.rfind("]")
    try:
        facts = json.loads(content[start:end + 1]) if start >= 0 else []
    except ValueError:
        facts = []
    if not isinstance(facts, list):
        facts = []
    return [f.strip() for f in facts if isinstance(f, str) and f.strip()], reply.usage


def _norm(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def _shingles(text: str, n: int = 8) -> set[str]:
    s = _norm(text)
    return {s[i:i + n] for i in range(max(1, len(s) - n + 1))} if s else set()


class PromptText:
    """The text an agent sent as instructions (system prompts, tool descriptions), kept as
    shingles so that a candidate memory copied from it is recognised."""

    def __init__(self, texts: Iterable[str] = ()):
        self._seen: set[int] = set()
        self._shingles: set[str] = set()
        for t in texts:
            self.add(t)

    def add(self, text: str) -> None:
        h = hash(text)
        if text and h not in self._seen:
            self._seen.add(h)
            self._shingles |= _shingles(text)
            if len(self._shingles) > 200_000:  # bound it: the newest prompts matter
                self._shingles, self._seen = _shingles(text), {h}

    def __contains__(self, candidate: str) -> bool:
        grams = _shingles(candidate)
        if not grams or not self._shingles:
            return False
        return len(grams & self._shingles) / len(grams) >= 0.5


__all__ = ["PromptText", "from_model", "rules"]
