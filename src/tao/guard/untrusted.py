"""Untrusted content: the output of a tool marked ``untrusted_output`` reaches the model fenced
as data, between markers carrying a nonce drawn once per run, under a note the prompt repeats.

The nonce is secret to the run, so a document cannot know it; and should the text hold anything
shaped like a marker (``<<<END`` with any nonce, or the run's nonce itself), it is defused before
fencing, so nothing inside can close the fence and speak as the prompt.
"""

from __future__ import annotations

import re
import secrets

from .. import prompts

_MARKER = re.compile(r"<<<\s*(DATA|END)\b", re.IGNORECASE)


def nonce() -> str:
    return secrets.token_hex(6)


def defuse(text: str, tag: str) -> str:
    """``text`` with every marker-like ``<<<DATA``/``<<<END`` and the nonce itself broken up."""
    text = _MARKER.sub(lambda m: "<\u200b<<" + m.group(1), text)
    return text.replace(tag, tag[:3] + "\u200b" + tag[3:])


def fence(text: str, tool: str, tag: str, lang: str) -> str:
    t = prompts.table("guard")["zh" if lang == "zh" else "en"]
    head = prompts.render(t["fence_head"], tool=tool, nonce=tag)
    return f"{head}\n<<<DATA {tag}>>>\n{defuse(text, tag)}\n<<<END {tag}>>>"


def note(tag: str, lang: str) -> str:
    """The line the system prompt gets when the run has untrusted tools."""
    t = prompts.table("guard")["zh" if lang == "zh" else "en"]
    return prompts.render(t["fence_note"], nonce=tag)
