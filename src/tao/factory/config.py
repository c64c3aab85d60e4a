"""``tao.toml``: the options a project always passes, kept beside it.

    # tao.toml - read from the working directory by tao run / code / chat
    model = "openai:deepseek-chat"
    agent = "react-text"
    tools = ["examples/weather.py", "mypackage.tools:search"]
    max_turns = 8
    timeout = 120          # seconds an endpoint may stay silent
    workspace = "site"     # where tao code writes (default: ./workspace)
    mcp = ["npx -y @modelcontextprotocol/server-filesystem .", "https://mcp.example.com/mcp"]

    # the guardrails (tao.guard), named as the flags are
    deny = ["send_email"]
    require_approval = { run_command = "\\b(rm|curl|sudo)\\b", write_file = true }
    untrusted = ["fetch_page"]
    high_risk = ["run_command"]
    audit = "logs/audit.jsonl"   # or false for none (default: audit.jsonl in the data directory)
    max_tokens = 50000
    max_cost = 0.20            # dollars
    max_seconds = 300
    max_tool_calls = 40
    max_repeats = 3

    # a typed result (tao.factory.outputs): a JSON Schema file, an inline schema, or a class
    output_type = "schemas/answer.json"

    # named agents (tao.factory.team): tao run --agent triage builds the chain
    [agents.triage]
    agent = "react"
    handoffs = ["analyst"]
    [agents.analyst]
    agent = "codeact"
    description = "does the arithmetic in Python"
    output_type = "py:myapp.models:Report"

An option given on the command line wins over the file; the guardrails' lists that restrict
(``deny``, ``require_approval``, ``untrusted``, ``high_risk``) add up instead, so a flag never
lifts a restriction the project's file sets. The file is the user's configuration,
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
from typing import Any

from ..errors import TaoError
from .spec import AGENTS

FILENAME = "tao.toml"
#: the guardrails' keys: the same as the flags of tao run / code / chat (tao.guard)
GUARD_KEYS = ("allow", "deny", "require_approval", "untrusted", "high_risk", "audit",
              "max_tokens", "max_cost", "max_seconds", "max_tool_calls", "max_repeats")


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
    allow: list[str] | None = None
    deny: list[str] = field(default_factory=list)
    #: tool name -> True, or a regex that gates only the calls whose string arguments match it
    require_approval: dict[str, bool | str] = field(default_factory=dict)
    untrusted: list[str] = field(default_factory=list)
    high_risk: list[str] = field(default_factory=list)
    #: the audit log's path (relative: to ``base``), ``False`` for none, ``None``: not said
    audit: str | bool | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    max_seconds: float | None = None
    max_tool_calls: int | None = None
    max_repeats: int | None = None
    #: the typed result as written (a schema file, ``py:module:Class``, or a schema table);
    #: ``tao.factory.outputs.output_type`` reads it
    output_type: str | dict[str, Any] | None = None
    #: the named agents, ``[agents.NAME]`` (``tao.factory.team.AgentTable``)
    agents: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def base(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()


def audit_target(flag: str | os.PathLike[str] | None, off: bool, config: Config | None) -> Path | bool:
    """Where the audit log goes, as every command decides it: ``--no-audit`` (False), else
    ``--audit FILE``, else tao.toml's ``audit`` (false: none; a path, from the file's folder),
    else True: ``audit.jsonl`` in the user's data directory."""
    if off:
        return False
    if flag is not None:
        return Path(flag)
    value = getattr(config, "audit", None)
    if value is False:
        return False
    if isinstance(value, str) and config is not None:
        return config.base / Path(value).expanduser()  # "~/logs/a.jsonl" too
    return True


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


#: the keys tao.toml may set, in the order the error for an unknown key lists them
KEYS = ("model", "agent", "tools", "max_turns", "timeout", "workspace", "mcp", *GUARD_KEYS,
        "output_type", "agents")


def unknown_keys(table: dict[str, Any], keys: tuple[str, ...], path: Path, where: str = "") -> None:
    """A key tao does not know is the file's error (a typo would be silently ignored), with the
    nearest known key when there is one."""
    unknown = sorted(set(table) - set(keys))
    if unknown:
        import difflib

        near = [m for k in unknown for m in difflib.get_close_matches(k.replace("-", "_"), keys, 1)]
        raise ConfigError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(where + k for k in map(repr, unknown))}"
                          f"{f' (did you mean {near[0]!r}?)' if len(near) == 1 else ''}; "
                          f"{f'[{where[:-1]}]' if where else 'tao.toml'} may set {', '.join(keys)}")


def _read(table: dict[str, Any], path: Path, where: str = "") -> Config:
    """``table`` checked key by key; ``where``: the table it is (``agents.triage.``), for the
    messages, when it is an agent's table (``tao.factory.team``), which reads only some keys."""
    config = Config(path=path)
    if not where:
        unknown_keys(table, KEYS, path)

    def bad(key: str, wanted: str) -> ConfigError:
        return ConfigError(f"{path}: {where}{key} must be {wanted}, not {table[key]!r}")

    for key in ("model", "workspace"):
        if key in table:
            if not isinstance(table[key], str) or not table[key].strip():
                raise bad(key, "a non-empty string")
            setattr(config, key, table[key].strip())
    named = table.get("agents") if not where else None
    if "agent" in table:
        if table["agent"] not in AGENTS and not (isinstance(named, dict)
                                                 and table["agent"] in named):
            raise bad("agent", "one of " + ", ".join([*AGENTS, *(named or ())]))
        config.agent = table["agent"]
    if "tools" in table:
        tools = table["tools"]
        tools = [tools] if isinstance(tools, str) else tools
        if not isinstance(tools, list) or not all(isinstance(t, str) and t.strip() for t in tools):
            raise bad("tools", 'a list of files or modules, e.g. ["examples/weather.py"]')
        config.tools = [t.strip() for t in tools]
    for key in ("max_turns", "max_tokens", "max_tool_calls", "max_repeats"):
        if key in table:
            n = table[key]
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise bad(key, "a whole number of at least 1")
            setattr(config, key, n)
    for key, what in (("timeout", "seconds"), ("max_seconds", "seconds"), ("max_cost", "dollars")):
        if key in table:
            t = table[key]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not (t > 0 and math.isfinite(t)):
                raise bad(key, f"a number of {what} above 0")
            setattr(config, key, float(t))
    for key in ("allow", "deny", "untrusted", "high_risk"):
        if key in table:
            if not _is_names(table[key]):
                raise bad(key, 'a list of tool names, e.g. ["run_command"]')
            setattr(config, key, _tool_names(table[key]))
    if "require_approval" in table:
        config.require_approval = _approval(table["require_approval"], path)
    if "audit" in table:
        a = table["audit"]
        if a is not False and (not isinstance(a, str) or not a.strip()):
            raise bad("audit", "the audit log's path, or false for none")
        config.audit = a if a is False else a.strip()
    if "mcp" in table:
        config.mcp = _mcp(table["mcp"], path)
    if "output_type" in table:
        config.output_type = _output_type(table["output_type"], path, where)
    if "agents" in table and not where:
        from .team import read_agents

        config.agents = read_agents(table["agents"], path)
    return config


def _output_type(value: Any, path: Path, where: str) -> str | dict[str, Any]:
    """Checked now (a schema file that is missing or not JSON, a class that cannot be imported:
    the file's error, before any model is built), kept as written."""
    from .outputs import output_type

    try:
        output_type(value, path.parent)
    except ValueError as e:
        raise ConfigError(f"{path}: {where}{e}") from None
    return value  # type: ignore[no-any-return]


def _is_names(value: Any) -> bool:
    value = [value] if isinstance(value, str) else value
    return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)


def _tool_names(value: Any) -> list[str]:
    """``["a", "b"]`` or ``"a, b"`` (as the flags take them): the names, stripped."""
    value = [value] if isinstance(value, str) else value
    return [n.strip() for v in value for n in v.split(",") if n.strip()]


def _approval(value: Any, path: Path) -> dict[str, bool | str]:
    """``require_approval``: tool names (each call asks), or a table of name = true | "regex"
    (only the calls whose string arguments match the regex ask: ``run_command = "\\brm\\b"``).
    A regex that does not compile is the file's error now, not a rule that never matches."""
    if _is_names(value):
        return dict.fromkeys(_tool_names(value), True)
    wanted = ('a list of tool names, or a table of name = true | "regex", '
              'e.g. { run_command = "\\b(rm|curl|sudo)\\b" }')
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: require_approval must be {wanted}, not {value!r}")
    rules: dict[str, bool | str] = {}
    for name, rule in value.items():
        if isinstance(rule, str):
            try:
                re.compile(rule)
            except re.error as e:
                raise ConfigError(f"{path}: require_approval.{name}: {rule!r} is not a regular "
                                  f"expression: {e}") from None
        elif not isinstance(rule, bool):
            raise ConfigError(f"{path}: require_approval.{name} must be true, false or a regex, "
                              f"not {rule!r}")
        rules[name] = rule
    return rules


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)")


def _mcp(servers: Any, path: Path) -> list[str]:
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
