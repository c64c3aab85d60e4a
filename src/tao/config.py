"""``tao.toml``: the options a project always passes, kept beside it.

    # tao.toml - read from the working directory by tao run / code / chat
    model = "openai:deepseek-chat"
    agent = "react-text"
    tools = ["examples/weather.py", "mypackage.tools:search"]
    max_turns = 8
    timeout = 120          # seconds an endpoint may stay silent
    workspace = "site"     # where tao code writes (default: ./workspace)
    mcp = ["npx -y @modelcontextprotocol/server-filesystem .", "https://mcp.example.com/mcp"]

An option given on the command line wins over the file. The file is the user's configuration,
so a mistake in it - TOML that does not parse, a key tao does not know (a typo would otherwise be
silently ignored), a value of the wrong type - is a ``ConfigError`` naming the file, and the line
where TOML says so, before any model is built.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import TaoError

FILENAME = "tao.toml"
AGENTS = ("react", "react-text", "react-json", "codeact", "plan")


class ConfigError(TaoError):
    """``tao.toml`` cannot be used as it is; the message names the file and what to fix."""


@dataclass(slots=True)
class Config:
    """What ``tao.toml`` sets; ``None`` / empty where it says nothing. ``path`` is the file read
    (``None`` when there is none); relative paths in ``tools`` and ``workspace`` are read from its
    folder, ``base``."""

    model: str | None = None
    agent: str | None = None
    tools: list[str] = field(default_factory=list)
    max_turns: int | None = None
    timeout: float | None = None
    workspace: str | None = None
    mcp: list[str] = field(default_factory=list)
    path: Path | None = None

    @property
    def base(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()


def load_config(folder: str | os.PathLike[str] | None = None) -> Config:
    """``tao.toml`` in ``folder`` (default: the working directory), or an empty ``Config``."""
    path = Path(folder if folder is not None else Path.cwd()) / FILENAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        table = tomllib.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:  # its message ends "(at line 3, column 7)"
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    return _read(table, path)


def _read(table: dict, path: Path) -> Config:
    config = Config(path=path)
    unknown = sorted(set(table) - {"model", "agent", "tools", "max_turns", "timeout", "workspace",
                                      "mcp"})
    if unknown:
        raise ConfigError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown))}; tao.toml may set model, agent, "
                          f"tools, max_turns, timeout, workspace, mcp")

    def bad(key: str, wanted: str) -> ConfigError:
        return ConfigError(f"{path}: {key} must be {wanted}, not {table[key]!r}")

    for key in ("model", "workspace"):
        if key in table:
            if not isinstance(table[key], str) or not table[key].strip():
                raise bad(key, "a non-empty string")
            setattr(config, key, table[key].strip())
    if "agent" in table:
        if table["agent"] not in AGENTS:
            raise bad("agent", "one of " + ", ".join(AGENTS))
        config.agent = table["agent"]
    if "tools" in table:
        tools = table["tools"]
        tools = [tools] if isinstance(tools, str) else tools
        if not isinstance(tools, list) or not all(isinstance(t, str) and t.strip() for t in tools):
            raise bad("tools", 'a list of files or modules, e.g. ["examples/weather.py"]')
        config.tools = [t.strip() for t in tools]
    if "max_turns" in table:
        n = table["max_turns"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise bad("max_turns", "a whole number of at least 1")
        config.max_turns = n
    if "timeout" in table:
        t = table["timeout"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (t > 0 and math.isfinite(t)):
            raise bad("timeout", "a number of seconds above 0")
        config.timeout = float(t)
    if "mcp" in table:
        config.mcp = _mcp(table["mcp"], path)
    return config


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)")


def _mcp(servers, path: Path) -> list[str]:
    """MCP servers: each a command line that starts one (spoken over stdio) or an http(s) URL.
    Checked here so that a quote left open or an ``htp://`` typo is the file's error at once,
    not a server that fails to start in the middle of a run."""
    servers = [servers] if isinstance(servers, str) else servers
    wanted = 'a list of servers, each a command line or an http(s) URL, e.g. ["uvx mcp-server-git"]'
    if not isinstance(servers, list) or not all(isinstance(s, str) and s.strip() for s in servers):
        raise ConfigError(f"{path}: mcp must be {wanted}, not {servers!r}")
    out = []
    for server in (s.strip() for s in servers):
        url = _SCHEME.match(server)
        if url:
            if url.group(1).lower() not in ("http", "https") or not url.group(2):
                raise ConfigError(f"{path}: mcp server "
                                  f"{server!r} is neither an http(s) URL nor a command line")
        else:
            try:
                shlex.split(server)
            except ValueError as e:  # "No closing quotation"
                raise ConfigError(f"{path}: mcp server "
                                  f"{server!r} is not a command line: {e}") from None
        out.append(server)
    return out


__all__ = ["Config", "ConfigError", "FILENAME", "load_config"]
