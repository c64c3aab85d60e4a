"""``resolve_model(spec)``: a model from a short string (the CLI's ``--model``)."""

from __future__ import annotations

import os

from .base import Model

SPECS = ("auto", "local", "local-0.5b", "local-1.5b", "openai", "openai:NAME")
_LOCAL = {"local": "qwen2.5-coder-1.5b", "local-1.5b": "qwen2.5-coder-1.5b",
          "local-0.5b": "qwen2.5-coder-0.5b"}  # "local" is gguf_store.DEFAULT_LOCAL (a test checks)
_ENDPOINT_VARS = ("TAO_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "TAO_BASE_URL")


def resolve_model(spec: str = "auto", *, timeout: float | None = None) -> Model:
    """``"local"`` (or ``"local-1.5b"``): the embedded Qwen2.5-Coder-1.5B; ``"local-0.5b"``: the faster
    0.5B one;
    ``"openai"`` / ``"openai:NAME"``: an OpenAI-compatible endpoint (key, URL and default model
    from TAO_* / OPENAI_* / DEEPSEEK_* variables); ``"auto"``: the endpoint when any of
    TAO_API_KEY, OPENAI_API_KEY, DEEPSEEK_API_KEY or TAO_BASE_URL is set, else the local model.

    ``timeout`` (seconds an endpoint may stay silent; ``None``: the model's default) applies to
    endpoints only: the embedded model runs in this process and cannot hang on a network.

    Unknown specs raise ``ValueError``; a model that cannot be built raises ``TaoError``.
    """
    s = (spec or "auto").strip()
    if s == "auto":
        s = "openai" if any(os.environ.get(v) for v in _ENDPOINT_VARS) else "local"
    if s in _LOCAL:
        from .local import LocalModel

        return LocalModel(_LOCAL[s])
    if s == "openai" or s.startswith("openai:"):
        from .openai import OpenAIModel

        name = s.partition(":")[2].strip()
        options = {} if timeout is None else {"timeout": timeout}
        return OpenAIModel(name or None, **options)
    raise ValueError(f"unknown model {spec!r}; use one of: {', '.join(SPECS)}")
