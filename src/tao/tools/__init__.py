from .base import FunctionTool, Tool, Toolbox, ToolResult, tool
from .calculator import calculate, calculator

__all__ = ["Tool", "FunctionTool", "Toolbox", "ToolResult", "tool", "calculator", "calculate",
           "Workspace", "WorkspaceError"]


def __getattr__(name: str):  # the workspace tools load when first named: `import tao` stays cheap
    if name in ("Workspace", "WorkspaceError"):
        from . import workspace

        return getattr(workspace, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
