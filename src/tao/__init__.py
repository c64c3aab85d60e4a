"""tao: ReAct, CodeAct and Plan-and-Execute agents that stream typed events.

``import tao`` stays light: openai, llama_cpp, rich and pydantic load only when used.
"""

from .agents.base import Agent, Result
from .agents.codeact import CodeActAgent
from .agents.react import ReActAgent
from .events import Event
from .messages import Message, ToolCall, Usage
from .models.base import Model, ModelResponse, ToolSpec
from .models.scripted import ScriptedModel, tool_call
from .tools.base import Tool, Toolbox, tool
from .tools.context import RunContext
from .tools.calculator import calculate, calculator

__version__ = "0.1.0"

__all__ = [
    "Agent", "Result", "ReActAgent", "Event", "Message", "ToolCall", "Usage", "Model",
    "ModelResponse", "ToolSpec", "ScriptedModel", "tool_call", "Tool", "Toolbox", "tool",
    "RunContext", "Session",
    "calculate", "calculator", "PlanExecuteAgent", "CodeActAgent", "Reflexion", "Vote", "Attempts",
    "Workspace",
    "ApprovalRequest", "Decision", "BudgetExceeded", "matches", "MCPServer", "MemoryStore",
    "instrument", "uninstrument", "AgentSpec", "build_agent",
]

#: Importable from ``tao`` but loaded on first use, so ``import tao`` stays cheap.
_LAZY = {
    "PlanExecuteAgent": "tao.plan.agent",
    "Reflexion": "tao.agents.reflexion",
    "Vote": "tao.agents.vote",
    "Attempts": "tao.agents.attempts",
    "CodeActAgent": "tao.agents.codeact",
    "OpenAIModel": "tao.models.openai",
    "LocalModel": "tao.models.local",
    "resolve_model": "tao.models.resolve",
    "Workspace": "tao.workspace",
    "ApprovalRequest": "tao.guard",  # the guardrails: approve= callbacks get and return these
    "Decision": "tao.guard",
    "BudgetExceeded": "tao.guard",
    "matches": "tao.guard",
    "MCPServer": "tao.mcp",  # mcp costs ~0.7 s to import: only when a server is built
    "MemoryStore": "tao.memory",  # numpy and the embedder load with the first store
    "instrument": "tao.tracing",  # OpenTelemetry for every run; the API loads with the first
    "uninstrument": "tao.tracing",
    "Session": "tao.memory.session",  # a conversation kept across runs (SQLite, PostgreSQL)
    "AgentSpec": "tao.factory",  # the one factory every door builds agents with
    "build_agent": "tao.factory",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tao' has no attribute {name!r}")
