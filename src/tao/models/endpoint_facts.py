"""What an OpenAI-compatible endpoint does not take, learnt from how it answered and remembered.

Servers differ behind the one API: llama-cpp-python's answers a ``json_schema`` response_format
with HTTP 500 and ``content: null`` beside tool calls with another 500; DeepSeek refuses
``json_schema`` with a 400; some refuse ``stream_options``. ``OpenAIModel`` reads each refusal
from the server's message (not its status alone), asks again without the part refused, and
writes the fact here, so it is paid once per endpoint: later calls, runs and processes start
without it. Facts are keyed by base URL and model, kept in this process and in
``<tao cache>/endpoints.json`` (``$TAO_ENDPOINT_FACTS`` moves it; a damaged file is ignored
and rewritten).

The facts: ``json_schema``, ``json_object`` (response formats), ``tools`` (native tool calls),
``stream`` (answers as an event stream), ``stream_options`` (usage in the stream) and ``null_content`` (``content: null`` beside tool
calls); each False once refused.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from .gguf_store import cache_dir

_LOCK = threading.Lock()
_KNOWN: dict[str, dict[str, bool]] | None = None
SAID = {"json_schema": "no json_schema", "json_object": "no JSON mode", "tools": "tools as text",
        "stream": "answers whole, not streamed",
        "stream_options": "no usage in the stream", "null_content": "no null content"}


def _path() -> Path:
    return Path(os.environ.get("TAO_ENDPOINT_FACTS") or cache_dir() / "endpoints.json")


def forget() -> None:
    """Read the file again on next use (tests point ``$TAO_ENDPOINT_FACTS`` elsewhere)."""
    global _KNOWN
    with _LOCK:
        _KNOWN = None


def _all() -> dict[str, dict[str, bool]]:
    global _KNOWN
    if _KNOWN is None:
        try:
            loaded = json.loads(_path().read_text(encoding="utf-8"))
            _KNOWN = {k: {f: bool(v) for f, v in d.items()} for k, d in loaded.items()
                      if isinstance(d, dict)}
        except (OSError, ValueError, AttributeError):
            _KNOWN = {}
    return _KNOWN


def key(base_url: str, model: str) -> str:
    return f"{base_url.rstrip('/')}|{model}"


def facts(base_url: str, model: str) -> dict[str, bool]:
    with _LOCK:
        return dict(_all().get(key(base_url, model), {}))


def takes(base_url: str, model: str, fact: str) -> bool:
    """False once the endpoint refused ``fact``; True while it has not."""
    return facts(base_url, model).get(fact, True)


def refused(base_url: str, model: str, fact: str) -> None:
    with _LOCK:
        known = _all().setdefault(key(base_url, model), {})
        if known.get(fact) is False:
            return
        known[fact] = False
        path = _path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(_all(), indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # kept in this process: the next one learns it again, nothing worse


def said(base_url: str, model: str) -> str:
    """What the run's header says of the endpoint: "" while it refused nothing."""
    return ", ".join(SAID[f] for f, ok in sorted(facts(base_url, model).items())
                     if not ok and f in SAID)
