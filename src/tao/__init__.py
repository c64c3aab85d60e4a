"""tao: ReAct, CodeAct and Plan-and-Execute agents that stream typed events.

``import tao`` stays light: openai, llama_cpp, rich and pydantic load only when used.
"""

from .agents.base import Agent, Result
from .agents.plan import PlanExecuteAgent
from .agents.react import ReActAgent
from .events import Event
from .messages import Message, ToolCall, Usage
from .models.base import Model, ModelResponse, ToolSpec
from .models.scripted import ScriptedModel, tool_call
from .tools.base import Tool, Toolbox, tool
from .tools.calculator import calculate, calculator

__version__ = "0.1.0"

__all__ = [
    "Agent", "Result", "ReActAgent", "Event", "Message", "ToolCall", "Usage", "Model",
    "ModelResponse", "ToolSpec", "ScriptedModel", "tool_call", "Tool", "Toolbox", "tool",
    "calculate", "calculator", "PlanExecuteAgent",
]  # OpenAIModel, LocalModel and resolve_model are importable too, lazily


def __getattr__(name: str):
    if name in ("OpenAIModel", "LocalModel", "resolve_model"):
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module 'tao' has no attribute {name!r}")
