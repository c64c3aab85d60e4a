"""Untrusted content: the output of a tool marked ``untrusted_output`` reaches the model fenced
as data, between markers carrying a nonce drawn once per run, under a note in the system prompt.

The nonce is secret to the run, so a document cannot know it; and should the text hold anything
shaped like a marker (``<<<END`` with any nonce, or the run's nonce itself), it is defused before
fencing, so nothing inside can close the fence and speak as the prompt.

The system prompt's note describes the fence without the nonce: the header line tao writes above
each fence names it, and nothing inside can forge a marker, so the note needs no secret. A nonce
there made every run's prompt differ from its first tokens on - the embedded model's saved
prompt prefix never matched (a new cache file and seconds of prompt evaluation each run of
``tao code``) and greedy runs were not repeatable.
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


def note(lang: str) -> str:
    """The line the system prompt gets when the run has untrusted tools: the same in every run."""
    t = prompts.table("guard")["zh" if lang == "zh" else "en"]
    return t["fence_note"]
