"""Secrets never enter long-term memory: what the audit log blanks (``tao.guard.redact``: keys
by their shape, ``sk-...``, ``ghp_...``, ``Bearer ...``, the values of secret environment
variables, values under keys that name a secret) is blanked before a memory is written, and
again when one is read (a store written before this rule was in place may hold one).

A memory is prose, not a dict, so two more shapes are read here: a secret-named key assigned
in the text (``password=hunter2``, ``api_key: abc123``, ``"token": "..."``), and a password
told in a sentence (``my password is hunter2``, ``PIN is 4821``, ``密码是 hunter2``,
``口令：abc123``). Only a value in ASCII is taken for a password in prose (passwords are; a
Chinese phrase after 密码是 is most likely where it is, not what it is), and only after a
password word, so "the token is refreshed hourly" stays as it is. What is left is still a
memory ("the staging password is ***"); a memory that was nothing but the secret is refused
by the ``remember`` tool (:func:`only_secret`).
"""

from __future__ import annotations

import re
from typing import Any

#: ``key=value`` / ``key: value`` / ``"key": "value"``: the key is a secret's by is_secret_key
_ASSIGNED = re.compile(
    r"(?P<key>[A-Za-z_][\w.\-]{0,40})[\"']?\s*[:=]\s*(?P<q>[\"']?)"
    r"(?P<value>[!-~]+?)(?=(?P=q)(?:[\s,;}\])]|$)|[\s,;}\])]|[.。，；](?:\s|$)|$)")
_END = r"(?=[\s,;，。；、！？!?)）\"'”’]|[.](?:\s|$)|$)"
#: a password told in a sentence, English or Chinese
_TOLD = re.compile(
    r"(?:\b(?:password|passwd|passphrase|passcode|pwd|pin(?:\s+code)?)\s+(?P<en>is|was|are)\s+"
    r"|(?:密码|口令|密钥|令牌|验证码|通行码|\bPIN\s*码)\s*(?:是|为|[:：=])?\s*)"
    r"[\"'“‘]?(?P<value>[!-~]{3,}?)" + _END, re.IGNORECASE)
#: "my password was changed": a lowercase word after "is" is what the password is, not it
_PLAIN_WORD = re.compile(r"[a-z]{1,13}")


def scrub(text: str) -> str:
    """``text`` with every secret replaced by ``***`` (see the module doc)."""
    from ..guard.redact import REDACTED, env_secrets, is_secret_key, redact

    def assigned(m: re.Match) -> str:
        cut = m.start("value") - m.start()
        if m["value"] == REDACTED:
            return m[0]
        if not is_secret_key(m["key"]):  # "note: password=abc": the value may hold one
            return m[0][:cut] + _ASSIGNED.sub(assigned, m["value"])
        return m[0][:cut] + REDACTED

    def told(m: re.Match) -> str:
        value = m["value"]
        if value == REDACTED or (m["en"] and _PLAIN_WORD.fullmatch(value)):
            return m[0]
        return m[0][:m.start("value") - m.start()] + REDACTED

    return _TOLD.sub(told, _ASSIGNED.sub(assigned, redact(text, env=env_secrets())))


def scrub_value(value: Any) -> Any:
    """Metadata with its secrets blanked: values under secret-named keys, secrets in strings."""
    from ..guard.redact import env_secrets, redact

    return _strings(redact(value, env=env_secrets()))


def _strings(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v) for v in value]
    return value


def only_secret(text: str) -> bool:
    """Whether nothing but secrets is left of ``text`` (``"***"``): not worth keeping."""
    from ..guard.redact import REDACTED

    return REDACTED in text and not re.sub(r"[\W_]+", "", text.replace(REDACTED, ""))
