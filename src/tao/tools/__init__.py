from .base import FunctionTool, Tool, Toolbox, ToolResult, tool
from .calculator import calculate, calculator

__all__ = ["Tool", "FunctionTool", "Toolbox", "ToolResult", "tool", "calculator", "calculate"]
