"""Your own tools from a file or a module: what ``--tools PATH_OR_MODULE[:NAME]`` reads.

    load_tools("examples/weather.py")          # every Tool / Toolbox at the file's top level
    load_tools("examples/weather.py:calculate") # one attribute: a Tool, a Toolbox or a list of tools
    load_tools("mypackage.tools")               # an importable module (the working directory too)

A file is run the way ``python FILE`` would run it: its folder is put on ``sys.path`` so that it
can import the modules beside it, now and when a tool runs later. Anything that goes wrong is
the user's mistake, not the model's, so it is a ``ToolLoadError`` at once, naming the spec and
saying what to fix: a missing file, an import that fails (with the exception and the line it
came from), a module with no tools, a NAME that is missing or not a tool, two tools of one name.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import TaoError
from .base import Tool, Toolbox


class ToolLoadError(TaoError):
    """A ``--tools`` spec that does not give tools; the message says which and why."""


def load_tools(spec: str, *, base: str | os.PathLike[str] | None = None) -> list[Tool]:
    """The tools ``spec`` names. ``base``: the folder a relative path is read from (default: the
    working directory). Each tool's argument schema is built here, so a type hint pydantic cannot
    describe is an error now, not in the middle of a run."""
    target, name = _split(spec)
    base_dir = Path(base) if base is not None else Path.cwd()
    module = _load_file(spec, base_dir / target) if _is_path(target) else _import(spec, target, base_dir)
    if name is None:
        tools = _module_tools(module)
        if not tools and getattr(module, "__file__", None) is None:  # a namespace package
            raise ToolLoadError(f"{spec}: is a directory, not a .py file or a module with tools")
        if not tools:
            raise ToolLoadError(f"{spec}: no tools found; decorate functions with @tool (from tao "
                                f"import tool) or define a Toolbox at the top level")
    else:
        if not hasattr(module, name):
            found = ", ".join(_names(module)) or "none"
            raise ToolLoadError(f"{spec}: {module.__name__ if not _is_path(target) else target} "
                                f"has no attribute {name!r} (tools there: {found})")
        tools = _as_tools(getattr(module, name))
        if tools is None:
            value = getattr(module, name)
            hint = " - decorate it with @tool" if callable(value) else ""
            raise ToolLoadError(f"{spec}: {name!r} is not a tool but {type(value).__name__}{hint}")
    for t in tools:
        try:
            t.spec  # noqa: B018 - builds the argument schema
        except Exception as e:  # noqa: BLE001 - a schema the tool's author must fix
            raise ToolLoadError(f"{spec}: tool {t.name!r} cannot be described to a model: "
                                f"{type(e).__name__}: {e}") from None
    return tools


def load_all(specs: Iterable[str], *, base: str | os.PathLike[str] | None = None) -> list[Tool]:
    """The tools of every spec, in order; the same tool named twice is kept once, two different
    tools with one name are an error (a model could not tell them apart)."""
    tools: list[Tool] = []
    where: dict[str, tuple[Tool, str]] = {}
    for spec in specs:
        for t in load_tools(spec, base=base):
            seen = where.get(t.name)
            if seen is not None:
                if seen[0] is t:
                    continue
                raise ToolLoadError(f"two tools are named {t.name!r} ({seen[1]} and {spec}); "
                                    f"pick one with PATH:NAME")
            where[t.name] = (t, spec)
            tools.append(t)
    return tools


def _split(spec: str) -> tuple[str, str | None]:
    spec = spec.strip()
    if not spec:
        raise ToolLoadError("an empty --tools spec; give a .py file or a module, e.g. "
                            "examples/weather.py or mypackage.tools:search")
    target, sep, name = spec.rpartition(":")
    if not sep or not name.isidentifier() or not target:  # no NAME (or "C:\\..." on Windows)
        return spec, None
    return target, name


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target or target.startswith(".")


def _load_file(spec: str, path: Path) -> ModuleType:
    if not path.is_file():
        what = "is a directory, not a .py file" if path.is_dir() else "no such file"
        raise ToolLoadError(f"{spec}: {what} (looked for {path})")
    path = path.resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    name = f"tao_user_tools.{_identifier(path.stem)}_{digest}"
    if name in sys.modules:  # loaded already in this process (two specs, one file)
        return sys.modules[name]
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ToolLoadError(f"{spec}: {path} cannot be loaded as Python")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up here
    try:
        loader_spec.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[name]
        if isinstance(e, KeyboardInterrupt):
            raise
        raise ToolLoadError(f"{spec}: importing it failed: {_where(e, str(path))}") from None
    return module


def _import(spec: str, target: str, base: Path) -> ModuleType:
    folder = str(base.resolve())
    if folder not in sys.path:  # like `python -m`: modules beside you can be named
        sys.path.insert(0, folder)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name and target.startswith(e.name) and (target == e.name or target[len(e.name)] == "."):
            raise ToolLoadError(f"{spec}: no module named {e.name!r} (give a file by its path, "
                                f"e.g. tools/{target.rpartition('.')[2]}.py)") from None
        raise ToolLoadError(f"{spec}: importing it failed: {_where(e, None)}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - SystemExit at import is a broken module too
        raise ToolLoadError(f"{spec}: importing it failed: {_where(e, None)}") from None


def _where(e: BaseException, path: str | None) -> str:
    """``NameError: name 'x' is not defined (weather.py, line 12: return x)`` - the exception
    and the deepest line of the user's file (or of any file, for a module) it came from."""
    text = traceback.format_exception_only(type(e), e)[-1].strip()
    if isinstance(e, SyntaxError):
        where = f"{Path(e.filename or '?').name}, line {e.lineno}"
        source = (e.text or "").strip()
        return f"{type(e).__name__}: {e.msg} ({where}{f': {source}' if source else ''})"
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if (path is None and "importlib" not in f.filename) or f.filename == path]
    if frames:
        f = frames[-1]
        return f"{text} ({Path(f.filename).name}, line {f.lineno}{f': {f.line}' if f.line else ''})"
    return text


def _identifier(stem: str) -> str:
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    return ident if ident.isidentifier() else f"m_{ident}"


def _public(module: ModuleType) -> list[tuple[str, Any]]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return [(n, getattr(module, n)) for n in names if hasattr(module, n)]


def _module_tools(module: ModuleType) -> list[Tool]:
    tools: list[Tool] = []
    for _, value in _public(module):
        if isinstance(value, (Tool, Toolbox)):
            tools.extend(t for t in _as_tools(value) or () if not any(t is u for u in tools))
    return tools


def _names(module: ModuleType) -> list[str]:
    return [n for n, v in _public(module) if isinstance(v, (Tool, Toolbox))]


def _as_tools(value: Any) -> list[Tool] | None:
    if isinstance(value, Tool):
        return [value]
    if isinstance(value, Toolbox):
        return list(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Tool) for v in value):
        return list(value)
    return None


__all__ = ["ToolLoadError", "load_all", "load_tools"]
