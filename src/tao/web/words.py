"""What the server says to the person at the page, in the page's language: the texts are data
(``tao/prompts/web.toml``); ``Refusal`` carries a text's key and values, and the app renders it
in the language the request's ``Accept-Language`` prefers, with the key as ``code`` for the page."""

from __future__ import annotations

from typing import Any

from .. import prompts


class Refusal(Exception):
    """An HTTP error the user reads: ``status``, the text's ``key`` in web.toml, its values."""

    def __init__(self, status: int, key: str, **values: Any):
        self.status, self.key, self.values = status, key, values
        super().__init__(say("en", key, **values))


def say(lang: str, key: str, **values: Any) -> str:
    table = prompts.table("web")
    return prompts.render(table.get(lang, table["en"])[key], **{k: str(v) for k, v in values.items()})


def language(accept: str) -> str:
    """"zh" when the browser's most wanted language is Chinese, else "en"."""
    best, lang = -1.0, "en"
    for part in accept.split(","):
        tag, _, q = part.strip().partition(";q=")
        try:
            weight = float(q) if q else 1.0
        except ValueError:
            continue
        if tag and weight > best:
            best, lang = weight, "zh" if tag.lower().startswith("zh") else "en"
    return lang
