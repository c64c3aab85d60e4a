"""The run's model with the user's API key taken out of everything it says.

An endpoint can echo the key: in an error ("Incorrect API key provided: sk-..."), or in a reply
(a prompt injection asks the model to repeat its configuration). Whatever the model says goes
on to the journal, the events, the trace and the next prompt, so the key is replaced here, at
the model door, before any of them sees it (``***``). Streamed text is held back by one key's
length less one character, so a key split across chunks is caught too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

from .. import safe_json
from ..errors import TaoError
from ..messages import Message
from ..models.base import Model, ModelResponse, Retrying
from ..models.wrapped import WrappedModel

MASK = "***"


class Unkeyed(WrappedModel):
    def __init__(self, model: Model, secrets: Sequence[str]):
        super().__init__(model)
        self.secrets = tuple(s for s in secrets if s)
        self._hold = max((len(s) for s in self.secrets), default=1) - 1

    def clean(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, MASK)
        return text

    async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
        held = ""
        try:
            async with self.chunks(messages, **kwargs) as chunks:
                async for chunk in chunks:
                    if isinstance(chunk, str):
                        held = self.clean(held + chunk)
                        cut = max(len(held) - self._hold, 0)
                        if cut:
                            yield held[:cut]
                            held = held[cut:]
                        continue
                    if held:
                        yield held
                        held = ""
                    if isinstance(chunk, ModelResponse):
                        text = self.clean(safe_json.dumps(chunk.message.to_dict()))
                        chunk = replace(chunk, message=Message.from_dict(safe_json.loads(text)))
                    elif isinstance(chunk, Retrying):
                        chunk = replace(chunk, reason=self.clean(chunk.reason))
                    yield chunk
            if held:
                yield held
        except TaoError as e:  # "the endpoint refused key sk-...": said without the key
            text = self.clean(str(e))
            if text == str(e):
                raise
            try:
                cleaned = type(e)(text)
            except Exception:  # noqa: BLE001 - an error type built otherwise: its base says it
                cleaned = TaoError(text)
            raise cleaned from None
