"""Continuing a run from its journal, at the two doors: ``Journaled`` wraps the run's model (a
journaled response is served, a new one journaled - written behind - as the loop gets it) and
``door_*`` are what ``Toolbox.execute`` asks before and after a call. A resumed run is the same
run again - same id, same task - whose model calls and tool calls the journal answers for as far
as the crashed run got; from there on it runs live.

A call whose start was journaled but not its result (the run died while it ran) is:
re-run, when its tool has no side effects (``@tool(side_effects=False)``); re-run with the same
idempotency key the first attempt had (``tao.runs.idempotency_key()``), when the tool says it
honours one (``@tool(idempotent=True)``); else a question for the run's approver (``approve=``
or the terminal; with neither, it is not run and the model is told).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from typing import Any

from ..messages import Message, Usage
from ..models.base import Model, ModelResponse
from ..models.wrapped import WrappedModel
from ..safe_json import dumps, plain
from .journal import Journal, Pending, RunJournal, model_key


def open_journal(value: Any, fsync: bool = True) -> Journal | None:
    """An agent's ``journal=``: a path, ``True`` for the default file, a ``Journal``, or
    None/False for none. ``TAO_JOURNAL`` (a path, or 1 for the default) turns it on for
    agents that did not say."""
    if value is None:
        env = os.environ.get("TAO_JOURNAL", "")
        value = None if env in ("", "0") else (True if env == "1" else env)
    if value is None or value is False:
        return None
    if isinstance(value, Journal):
        return value
    if value is True:
        return Journal(None, fsync=fsync).check()
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"journal= takes a path, True or a Journal, not {value!r}")
    return Journal(value, fsync=fsync).check()


class ModelKeys:
    """``model_key(messages)`` for the calls of one run, each hashing only what is new: the
    SHA-256 of the conversation so far is kept (``hashlib``'s state, before the closing
    bracket) with the messages it covers, and a call whose messages start with those same
    messages - the same objects, or equal ones - goes on from it. A loop's conversation only
    grows, so each call hashes the messages added since the last one, and a run of n turns
    hashes O(n) messages, not O(n²). The key is byte for byte ``model_key``'s (journals written
    before still resume): ``model_key`` hashes the JSON text ``[m1, m2, ...]`` of the messages'
    ``to_dict()`` (sorted keys, ``safe_json.dumps``), which is ``[``, each message's own JSON
    text joined by ``, ``, then ``]``. A message ``safe_json`` would write differently inside
    the list than alone (nested within one level of ``MAX_DEPTH``, or not JSON-able: then the
    whole list is written tamed) sends that call to ``model_key`` itself.

    A few conversations are kept (the last ``keep``): Reflexion's next attempt and Vote's samples
    go on from where theirs was. ``hashed``: messages serialized so far (what the tests count)."""

    def __init__(self, keep: int = 8):
        self.keep = keep
        self.hashed = 0
        self._chains: list[tuple[list[Any], Any]] = []  # (messages covered, sha256 before "]")
        #: the last reply and its piece, made when it was journaled: not serialized again when
        #: the next call sends it (a message is never changed once in the conversation)
        self.known: tuple[Any, bytes | None] = (None, None)

    def __call__(self, messages: Any) -> str:
        msgs = messages if type(messages) is list else list(messages)
        n, best, at = len(msgs), None, -1
        for i, (covered, _) in enumerate(self._chains):
            k = len(covered)
            if k <= n and (best is None or k > len(best[0])) and (
                    k == 0 or msgs[k - 1] is covered[-1] or msgs[k - 1] == covered[-1]) \
                    and msgs[:k] == covered:  # C-speed: identity first, then equality
                best, at = self._chains[i], i
        if best is not None and len(best[0]) == n:
            digest = best[1].copy()
        else:
            if best is None:
                digest, k = hashlib.sha256(b"["), 0
            else:
                digest, k = best[1].copy(), len(best[0])
            for i in range(k, n):
                m = msgs[i]
                piece = self.known[1] if m is self.known[0] else _piece(m)
                if piece is None:  # safe_json writes the whole list another way: ask it
                    self.hashed += n
                    return model_key(msgs)
                if i:
                    digest.update(b", ")
                digest.update(piece)
            self.hashed += n - k
            if at >= 0 and k > 0:
                del self._chains[at]  # the longer conversation takes the shorter one's place
            self._chains.insert(0, (msgs[:], digest))
            del self._chains[self.keep:]
            digest = digest.copy()
        digest.update(b"]")
        return digest.hexdigest()[:32]


def _piece(message: Any) -> bytes | None:
    """One message's JSON text as ``model_key`` writes it inside the list, or None where
    ``safe_json.dumps`` would write the list another way (see ``ModelKeys``)."""
    text = _text(message)
    return None if text is None else text.encode("utf-8", "surrogatepass")


def _text(message: Any) -> str | None:
    return plain(message.to_dict(), sort_keys=True, room=1)  # one level deeper in the list


class Journaled(WrappedModel):
    """The run's model with its journal: each response is journaled as the loop reads it;
    on a resumed run, a call the journal answered already is served from it, not made."""

    def __init__(self, model: Model, journal: RunJournal):
        super().__init__(model)
        self.journal = journal
        self.keys = ModelKeys()  # model_key(messages), hashing only what each call added

    async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
        key = self.keys(messages)
        done = self.journal.replayed_model(key)
        if done is not None:
            message = Message.from_dict(done["message"])
            if message.content:
                yield message.content
            yield ModelResponse(message, Usage.from_dict(done.get("usage") or {}),
                                done.get("finish_reason"))
            return
        stream = self.inner.stream(messages, **kwargs).__aiter__()  # self.chunks, inlined
        try:
            async for chunk in stream:
                if type(chunk) is ModelResponse:
                    self._record(key, chunk)
                yield chunk
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _record(self, key: str, response: ModelResponse) -> None:
        """The reply, journaled; its message's JSON kept for the next call's key."""
        text = _text(response.message)
        self.keys.known = (response.message,
                           None if text is None else text.encode("utf-8", "surrogatepass"))
        if text is None:
            self.journal.record_model(key, {"message": response.message.to_dict(),
                                            "usage": response.usage.to_dict(),
                                            "finish_reason": response.finish_reason})
            return
        self.journal.record_model(key, '{"message": ' + text + ', "usage": '
                                  + dumps(response.usage.to_dict()) + ', "finish_reason": '
                                  + dumps(response.finish_reason) + "}")


# -- the tool door (``Toolbox.execute`` and the guard's ``Run.verdict``) -------------------------
def verdict(journal: RunJournal, call: Any, tool: Any) -> str | None:
    """"run" for a call the journal has the result of (decided and approved the first time:
    not asked again), "ask" for one that may have had its effect, None for the policy to say."""
    state = journal.peek(call.name, call.arguments)
    if state == "done":
        return "run"
    if state == "started" and tool is not None and getattr(tool, "side_effects", True) \
            and not getattr(tool, "idempotent", False):
        return "ask"
    return None


def door_replayed(journal: RunJournal, call: Any, run: Any) -> Any:
    """The journaled ``ToolResult`` of ``call``, or None: it must run."""
    done = journal.replayed_tool(call.name, call.arguments)
    if done is None:
        return None
    from ..tools.base import ToolResult

    if done.get("tainted"):  # what it read was untrusted: the resumed run is tainted as before
        r = run
        while r is not None:
            r.tainted, r = True, r.parent
    return ToolResult(done["content"], done["is_error"], done.get("duration_s", 0.0),
                      done.get("value"), done.get("retryable", True))


def door_started(journal: RunJournal, call: Any, tool: Any = None) -> Pending:
    """The call's start, committed before the tool runs when it has side effects (an
    idempotent one too: its key is only kept if its start is); written behind when not."""
    return journal.started(call.name, call.arguments, getattr(tool, "side_effects", True))


def door_finished(journal: RunJournal, pending: Pending, result: Any, run: Any) -> None:
    journal.finished(pending, result, bool(getattr(run, "tainted", False)))


def task_of(journal: Journal, run_id: str) -> tuple[str, dict[str, Any]]:
    """The full id and the run's row (task, agent, status...) for ``resume``."""
    row = journal.find(run_id)
    return row["run_id"], row
