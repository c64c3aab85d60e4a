"""Prompt templates live here as data files (``<name>.<lang>.md`` and ``*.toml``), not in code."""

from __future__ import annotations

import tomllib
from functools import cache


@cache
def template(name: str, lang: str) -> str:
    """The text of ``prompts/<name>.<lang>.md`` (falls back to English)."""
    from importlib.resources import files

    root = files(__name__)
    path = root / f"{name}.{lang}.md"
    if not path.is_file():
        path = root / f"{name}.en.md"
    return path.read_text(encoding="utf-8").strip()


@cache
def table(name: str) -> dict:
    """The parsed ``prompts/<name>.toml``."""
    from importlib.resources import files

    return tomllib.loads((files(__name__) / f"{name}.toml").read_text(encoding="utf-8"))


def render(text: str, **values: str) -> str:
    """Fill ``{placeholders}`` without tripping over the JSON braces prompts are full of."""
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text
