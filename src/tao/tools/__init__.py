from .base import FunctionTool, Tool, Toolbox, ToolResult, tool
from .calculator import calculate, calculator

__all__ = ["Tool", "FunctionTool", "Toolbox", "ToolResult", "tool", "calculator", "calculate"]

# The workspace tools (files and commands in a sandbox) are a room of their own above this one
# and tao.sandbox: tao.workspace.Workspace (also tao.Workspace).
