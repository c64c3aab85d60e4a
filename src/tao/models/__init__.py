"""Models: one protocol (``Model``), three implementations. Heavy ones load lazily."""

from .base import Model, ModelResponse, Retrying, ToolSpec
from .scripted import ScriptedModel, tool_call

__all__ = ["Model", "ModelResponse", "Retrying", "ToolSpec", "ScriptedModel", "tool_call",
           "OpenAIModel", "LocalModel", "resolve_model"]


def __getattr__(name: str):
    if name == "OpenAIModel":
        from .openai import OpenAIModel

        return OpenAIModel
    if name == "LocalModel":
        from .local import LocalModel

        return LocalModel
    if name == "resolve_model":
        from .resolve import resolve_model

        return resolve_model
    raise AttributeError(name)
