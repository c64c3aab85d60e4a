"""The coding agent of ``tao code`` (seed 002): ReAct with the text protocol on a ``Workspace``,
which first turns the task into a short checklist of behaviours (issue 27).

Before the first turn one model call, through the run's model door (journaled, metered, traced
like any other), asks for the 3-5 things the finished work must do, each as a user or a test
would check it. They are a ``Checklist`` event (the console and the workbench show it) and are
added to the task, so the turns that follow - writing, then the checks the workspace asks for
before Finish (``Workspace.before_finish``) - have them in front of them. A reply with no list
in it adds nothing; the run goes on as before.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from .. import prompts
from ..agents.react import ReActAgent
from ..events import Checklist, Event, TokenDelta
from ..messages import Message

MAX_ITEMS, MAX_CHARS, CHECKLIST_TOKENS = 6, 160, 256
_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)、]|\[[ xX]?\])\s*(.+?)\s*$")


def checklist_items(reply: str) -> list[str]:
    """The items of a reply: its lines that start like a list item (``-``, ``*``, ``1.``,
    ``[ ]``), at most ``MAX_ITEMS``, each cut to ``MAX_CHARS``."""
    items = []
    for line in reply.splitlines():
        m = _ITEM.match(line)
        if m and len(m.group(1)) > 2:
            items.append(m.group(1).strip("*` ")[:MAX_CHARS])
    return items[:MAX_ITEMS]


class Coder(ReActAgent):
    """``ReActAgent`` whose run starts with the checklist (``checklist=False``: without it)."""

    def __init__(self, *args: Any, checklist: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.checklist = checklist

    async def prelude(self, run: Any, messages: list[Message]) -> AsyncIterator[Event]:
        if not self.checklist:
            return
        texts = prompts.table("code")[run.lang]
        task = messages[-1].content
        ask = [Message.system(texts["checklist_system"].strip()),
               Message.user(prompts.render(texts["checklist_ask"].strip(), task=task))]
        async for event in run.model_turn(run.model.stream(ask, max_tokens=CHECKLIST_TOKENS), 0):
            if type(event) is not TokenDelta:  # the list is shown whole, as its event
                yield event
        items = checklist_items(run.response.message.content if run.response else "")
        if not items:
            return
        note = prompts.render(texts["checklist_note"].strip(),
                              items="\n".join(f"- {i}" for i in items))
        messages[-1] = Message.user(f"{task}\n\n{note}")
        yield Checklist(items, 0)
