"""The web workbench (``tao serve``): pick an agent, a model and tools, type a task and watch
the run's events live in the browser; approve gated calls, cancel, replay and compare.

    from tao.web import create_app
    app = create_app(token="s3cret", models={"scripted": lambda: ScriptedModel([...])})

Loaded only when asked for: ``import tao`` imports neither this package nor FastAPI.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module 'tao.web' has no attribute {name!r}")


__all__ = ["create_app"]
