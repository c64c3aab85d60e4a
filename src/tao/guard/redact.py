"""What never reaches the audit log: values under keys that name a secret, values of secret
environment variables, strings shaped like keys. Applied to a record before it is serialized, so
a secret is not in the file's bytes at all - not merely hidden by ``tao audit show``.

Redacted: values under keys ``is_secret_key`` accepts (``api_key``, ``authorization``,
``token``, ``password``, ``secret``, ``cookie``, ``credentials``...) or the caller names
(``secret=``; a tool's ``secret=("pin",)``), at any depth; wherever they occur in a string, the
values of environment variables whose names say secret (``OPENAI_API_KEY``...; read when the
``AuditLog`` is made) and keys by their shape: ``sk-...``, GitHub ``ghp_...``/``github_pat_...``,
AWS ``AKIA...``, Slack ``xox.-...``, what follows ``Bearer `` or ``Basic ``, the
``user:password`` of a URL. A value the shapes do not know, under a key that does not say
secret, is written as it is: mark such arguments ``secret=``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

REDACTED = "***"

_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "secret", "token", "authorization",
                           "auth", "cookie", "credential", "credentials", "apikey", "pwd"})
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"),
                           ("secret", "key"), ("session", "id"), ("client", "secret")})
_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{16,}"              # OpenAI, Anthropic (sk-ant-...), DeepSeek, ...
    r"|\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bAKIA[0-9A-Z]{16}\b|\bxox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|(?<=Bearer )[A-Za-z0-9._~+/\-]{8,}=*|(?<=Basic )[A-Za-z0-9+/]{8,}=*"
    r"|(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")  # https://user:password@host
#: what every one of ``_KEY_SHAPES`` contains: a string without any is not searched (the shapes'
#: lookbehinds make the search cost ~0.1 us per character; this one is a fraction of that)
_HINTS = re.compile(r"sk-|gh[pousr]_|github_pat_|AKIA|xox[abprs]-|Bearer |Basic |://")


@lru_cache(maxsize=4096)  # the same few keys on every call
def is_secret_key(name: str) -> bool:
    """Whether a key names a secret: ``api_key``, ``OPENAI_API_KEY``, ``x-api-key``, ``apiKey``,
    ``Authorization``, ``github_token``, ``client_secret``, ``password``... but not
    ``max_tokens`` or ``prompt_tokens`` (words are compared whole, so counts stay readable)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in zip(words, words[1:]))


_PLACES = ("_SOCK", "_FILE", "_PATH", "_DIR", "_HOME", "_URL")


def env_secrets() -> tuple[str, ...]:
    """Values of environment variables whose names say secret, longest first: 8 characters or
    more (so that ``TOKEN=1`` does not blank every ``1``), and not a place (``SSH_AUTH_SOCK``,
    ``..._CREDENTIALS_FILE``: blanking a path would blank every mention of it). Read again only
    when the environment changed size or a secret-named variable changed (every run asks)."""
    names = tuple(k for k in os.environ if is_secret_key(k))
    key = (len(os.environ), tuple(os.environ.get(k) for k in names))
    if _ENV[0] != key:
        values = {os.environ[k] for k in names
                  if len(os.environ[k]) >= 8 and not k.upper().endswith(_PLACES)}
        _ENV[:] = [key, tuple(sorted(values, key=len, reverse=True))]
    return _ENV[1]


_ENV: list[Any] = [None, ()]


def redact(value: Any, secret: Iterable[str] = (), env: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with secrets replaced by ``"***"`` (see the module docstring).
    ``secret`` holds extra key names (compared exactly), ``env`` literal values to blank."""
    return _redact(value, frozenset(secret), tuple(env), 0)


def _redact(value: Any, secret: frozenset[str], env: tuple[str, ...], depth: int) -> Any:
    if isinstance(value, str):
        for s in env:
            if s in value:
                value = value.replace(s, REDACTED)
        if len(value) > 6 and _HINTS.search(value):  # no shape is shorter, or lacks a hint
            return _KEY_SHAPES.sub(REDACTED, value)
        return value
    if depth > 100:  # deeper than safe_json writes anyway
        return value
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and (k in secret or is_secret_key(k))
                and value[k] not in (None, "") else _redact(value[k], secret, env, depth + 1)
                for k in value}
    if isinstance(value, (list, tuple)):
        return [_redact(v, secret, env, depth + 1) for v in value]
    return value


def needs_redaction(value: Any, secret: frozenset[str] = frozenset(),
                    env: tuple[str, ...] = ()) -> bool:
    """Whether ``redact(value, secret, env)`` would change anything: a key naming a secret (with
    a value), or a string holding an ``env`` value or a key's shape. One walk that copies
    nothing, then one search over the strings joined by NULs - a match inside one string is a
    match in the joined text (NUL is no word character, so ``\\b`` holds at the joins, and the
    lookarounds need characters of that string); one across a join only costs the full walk."""
    strings: list[str] = []
    if _secret_key_in(value, secret, strings, 0):
        return True
    if not strings:
        return False
    text = strings[0] if len(strings) == 1 else "\0".join(strings)
    return any(s in text for s in env) or (
        _HINTS.search(text) is not None and _KEY_SHAPES.search(text) is not None)


def _secret_key_in(value: Any, secret: frozenset[str], strings: list[str], depth: int) -> bool:
    """``_redact``'s walk without the copy: True at a secret key with a value; the strings it
    would scan collected in ``strings``."""
    if isinstance(value, str):
        strings.append(value)
        return False
    if depth > 100:
        return False
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and (k in secret or is_secret_key(k)) and v not in (None, ""):
                return True
            t = type(v)
            if t is str:
                strings.append(v)
            elif t not in _SCALARS and _secret_key_in(v, secret, strings, depth + 1):
                return True
    elif isinstance(value, (list, tuple)):
        for v in value:
            t = type(v)
            if t is str:
                strings.append(v)
            elif t not in _SCALARS and _secret_key_in(v, secret, strings, depth + 1):
                return True
    return False


_SCALARS = frozenset({int, float, bool, type(None)})

__all__ = ["REDACTED", "env_secrets", "is_secret_key", "needs_redaction", "redact"]
