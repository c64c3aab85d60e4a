"""The coding agent's workspace: files and commands in one folder (``tools``), the paths that may
be touched there (``safe_path``), the sandboxed commands (``commands``) and the page check
(``page``). A room above ``tao.tools`` and ``tao.sandbox``: these are tools that need a sandbox,
so neither of those rooms has to import the other's."""

from .tools import Workspace, WorkspaceError

__all__ = ["Workspace", "WorkspaceError"]
