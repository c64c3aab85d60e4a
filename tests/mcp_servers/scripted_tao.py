"""The ``tao`` command on a ``ScriptedModel``, for tests that need tao as a real process (an MCP
server, or a second tao as its client): ``python scripted_tao.py SCRIPT.json ARGS...`` runs
``tao ARGS...`` with every model replaced by one replaying SCRIPT.json, a list of replies, each
a text or ``{"tool": NAME, "args": {...}}``."""

import json
import sys

import tao.cli as cli
from tao import ScriptedModel, tool_call


def replies(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [r if isinstance(r, str) else tool_call(r["tool"], **r.get("args", {}))
                for r in json.load(f)]


script = sys.argv.pop(1)
cli.resolve_model = lambda spec, **k: ScriptedModel(replies(script))
sys.argv[0] = "tao"
cli.main()
