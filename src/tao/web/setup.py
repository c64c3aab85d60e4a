"""From a ``POST /api/runs`` body to an agent: an ``AgentSpec`` for the one factory the commands
use too (``tao.factory``; ``tao.models.resolve``, the ``Workspace``), so a run in the page is the
run ``tao run`` / ``tao code`` would make - plus the page as approver and the server's journal.

Every run gets its own model instance, tools and (for a coding run, or when the ``workspace``
tool is picked) its own fresh folder: nothing is shared between runs, let alone between users.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..factory import AGENTS as NAMES
from ..factory import CODER, AgentSpec, build_agent
from .words import Refusal, say

AGENTS = (*NAMES, CODER)
#: the embedded models ``tao.models.resolve`` knows ("local" is its default, the 1.5B), with the
#: key of each one's label in prompts/web.toml
LOCAL = {"local": "model_local", "local-0.5b": "model_local_05b"}
#: the tool sets that are part of the package, in the order their tools are given to a run
BUILT_IN = ("calculators", "weather")
#: the longest task taken, in characters: a long document belongs in a workspace file
MAX_TASK = 200_000


class ModelChoice(BaseModel):
    name: str = "local"
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    model: str | None = None


class RunRequest(BaseModel):
    """What the page sends to start a run (``agent`` is ignored by ``/api/compare``)."""

    agent: str = "react"
    model: ModelChoice = Field(default_factory=ModelChoice)
    tools: list[str] = Field(default_factory=lambda: ["calculators"])
    task: str
    max_turns: int = Field(default=10, ge=1, le=100)
    approve: list[str] = Field(default_factory=list)
    #: a typed result: a JSON Schema object (never a class or a file from the page: importing
    #: a module or reading a path the request names would run or show the server's code)
    output_schema: dict[str, Any] | None = None
    #: a ``tao.Session`` the run continues and is appended to, by name - this browser
    #: session's own (``sessions.Server.conversation``), as ``tao run --session NAME``
    session: str | None = Field(default=None, min_length=1, max_length=100)
    #: the model first writes what a user will check (``Agent.checklist``), shown in the page
    checklist: bool = False


@dataclass
class Built:
    agent: Any
    model_name: str
    secrets: tuple[str, ...]
    workspace: Path | None = None
    #: the run's typed result (``tao.output.SchemaOutput``), given to the run, not the agent,
    #: so that whichever agent of a chain answers, the answer is typed
    output: Any = None
    conversation: Any = None  # the run's ``tao.Session`` (``sessions.Server.conversation``)
    closers: list[Callable[[], Any]] = field(default_factory=list)
    #: what the run does in a thread before it starts: the embedded model's weights load there,
    #: not on the event loop that streams every other user's run
    warm: Callable[[], Any] | None = None


def tool_set(name: str) -> list[Any]:
    """The tools of a built-in set: the seed's calculators, or seed 001's weather demo (part of
    the package, so an installed wheel offers it too)."""
    if name == "calculators":
        from ..tools.calculator import calculate, calculator

        return [calculate, calculator]
    from ..tools.demo_weather import calculate, get_weather, search_web

    return [get_weather, search_web, calculate]


#: what the workspace set (and every coding run) gives; a test holds it to ``Workspace``'s own
WORKSPACE_TOOLS = ("write_file", "append_file", "read_file", "list_dir", "edit_file",
                   "run_command")


def mcp_specs() -> list[str]:
    """The MCP servers ``./tao.toml`` names (none when there is no such file or it is broken:
    the page must still open; ``tao run`` reports the file's error)."""
    from ..factory.config import ConfigError, load_config

    try:
        return list(load_config().mcp)
    except (ConfigError, OSError):
        return []


def named_agents() -> dict[str, Any]:
    """The ``[agents.NAME]`` tables of ``./tao.toml`` (``tao.factory.team``); none when the file
    is missing or broken (the page still opens; ``tao run`` reports the file's error)."""
    from ..factory.config import ConfigError, load_config

    try:
        return dict(load_config().agents)
    except (ConfigError, OSError):
        return {}


def options(lang: str, extra: dict[str, Any]) -> dict[str, Any]:
    models: list[dict[str, Any]] = [{"name": n, "label": say(lang, key)} for n, key in LOCAL.items()]
    models.append({"name": "openai", "label": say(lang, "model_openai"),
                   "needs": ["base_url", "api_key", "model"]})
    models += [{"name": n, "label": n} for n in extra]
    # each set's tool names, for the page's "needs approval" boxes (an MCP server's are known
    # only once it runs: the page asks for those by name)
    tools = [*({"name": n, "tools": [t.name for t in tool_set(n)]} for n in BUILT_IN),
             {"name": "workspace", "tools": list(WORKSPACE_TOOLS)},
             *({"name": f"mcp:{s}"} for s in mcp_specs())]
    # tao.toml's named agents, each with its architecture and whom it may hand over to
    named = [{"name": t.name, "agent": t.agent, "handoffs": list(t.handoffs),
              "description": t.description or ""} for t in named_agents().values()]
    return {"agents": [*AGENTS, *(n["name"] for n in named)], "named": named, "models": models,
            "tools": tools, "lang": lang}


def _model(choice: ModelChoice, agent: str, extra: dict[str, Callable[..., Any]]) -> Any:
    if choice.name in extra:
        factory = extra[choice.name]
        takes = bool(inspect.signature(factory).parameters)  # a factory(agent): one script each
        return factory(agent) if takes else factory()
    if choice.name in LOCAL:
        from ..models.resolve import resolve_model

        return resolve_model(choice.name)
    if choice.name == "openai":
        missing = [k for k in ("api_key", "model") if not getattr(choice, k)]
        if missing:  # never the server's own key from its environment, unasked
            raise Refusal(400, "openai_needs", missing=", ".join(missing))
        if choice.base_url and not re.match(r"^https?://", choice.base_url):
            raise Refusal(400, "base_url")
        from ..models.openai import OpenAIModel

        return OpenAIModel(choice.model, base_url=choice.base_url or None, api_key=choice.api_key)
    names = [*LOCAL, "openai", *extra]
    raise Refusal(400, "unknown_model", model=repr(choice.name), models=", ".join(names))


def _tools(names: list[str]) -> tuple[list[Any], bool, list[str]]:
    """The tools picked, whether a workspace was picked, and the MCP servers to open. The
    built-in sets overlap in one name, ``calculate`` (the weather demo brings the seed's own):
    picked together, the first set's tool is kept - both compute the same arithmetic, and a
    user who ticks two boxes wants a run, not "two tools are named 'calculate'"."""
    known = set(mcp_specs())
    for name in names:
        if name not in (*BUILT_IN, "workspace") and not (name.startswith("mcp:")
                                                       and name[4:] in known):
            raise Refusal(400, "unknown_tool", tool=repr(name))
    tools: list[Any] = []
    for name in BUILT_IN:
        if name in names:
            have = {t.name for t in tools}
            tools += [t for t in tool_set(name) if t.name not in have]
    servers = [n[4:] for n in dict.fromkeys(names) if n.startswith("mcp:")]
    return tools, "workspace" in names, servers


def _clash(sets: list[tuple[str, list[str]]]) -> None:
    """Tools of different sets that share a name (an MCP server's ``calculate`` beside the
    calculators'): which one would run is not for tao to guess, so the form says which to drop."""
    seen: dict[str, str] = {}
    for where, names in sets:
        for n in names:
            if n in seen and seen[n] != where:
                raise Refusal(400, "tool_clash", tool=repr(n), first=seen[n], second=where)
            seen.setdefault(n, where)


def _open_mcp(specs: list[str]) -> list[Any]:
    """tao.toml's servers, opened as ``tao run --mcp`` opens them (commands in its folder)."""
    from ..factory.config import load_config
    from ..factory.servers import open_servers

    return open_servers(specs, load_config().base)


async def build(req: RunRequest, agent: str, *, run_id: str, extra: dict[str, Any],
                workspace_root: Path, journal: Any, approver: Any, audit: Any = None) -> Built:
    """The agent for one run. ``Refusal`` (and ``TaoError``) for what cannot be built."""
    from ..lang import detect_language

    tables = named_agents()
    if agent not in AGENTS and agent not in tables:
        raise Refusal(400, "unknown_agent", agent=repr(agent),
                      agents=", ".join([*AGENTS, *tables]))
    check_task(req.task)
    typed = _schema(req.output_schema)
    secrets = (req.model.api_key,) if req.model.api_key else ()
    model = _model(req.model, agent, extra)
    if secrets:
        from .unkeyed import Unkeyed

        model = Unkeyed(model, secrets)
    tools, wants_ws, specs = _tools(req.tools)
    built = Built(None, getattr(model, "name", req.model.name), secrets, output=typed)
    if req.model.name in LOCAL:
        built.warm = model.warm
    guard: dict[str, Any] = {"approve": approver, "journal": journal}
    if audit is not None:  # as tao run does: every tool call, approval, run start and end
        guard["audit"] = audit  # the key is never in a record: masked where it comes in
    if req.approve:
        guard["require_approval"] = list(req.approve)
    ws = None
    try:
        servers = await asyncio.to_thread(_open_mcp, specs) if specs else []
        built.closers += [lambda s=s: asyncio.to_thread(s.close) for s in servers]  # it joins
        if agent == "code" or wants_ws:
            ws = _workspace(workspace_root / run_id, detect_language(req.task))
            built.workspace = ws.root
            built.closers.append(ws.close)
        given = {id(t) for t in tools}
        _clash([*((n, [t.name for t in tool_set(n) if id(t) in given]) for n in BUILT_IN),
                *((f"mcp:{spec}", [t.name for t in srv]) for spec, srv in zip(specs, servers)),
                *([("workspace", list(WORKSPACE_TOOLS))] if ws is not None else [])])
        if agent == CODER:
            for t in [*tools, *(t for s in servers for t in s)]:
                ws.add(t)
            spec = AgentSpec(CODER, req.max_turns, guard=guard, workspace=ws,
                             checklist=req.checklist)
        elif agent in tables:  # tao.toml's agent and its handoffs, all on the page's model
            from ..factory.config import load_config
            from ..factory.team import chain_spec

            everything = [*tools, *servers, *([ws] if ws is not None else [])]
            spec = chain_spec(tables, agent, tools=everything or None, guard=guard,
                              max_turns=req.max_turns, base=load_config().base)
            if req.checklist:  # the agent the user speaks to writes it
                spec = replace(spec, checklist=True)
        else:
            everything = [*tools, *servers, *([ws] if ws is not None else [])]
            spec = AgentSpec(agent, req.max_turns, everything or None, guard,
                             checklist=req.checklist)
        built.agent = build_agent(spec, model)
        have = {t.name for a in chain(built.agent) for t in a.toolbox}
        unknown = [n for n in req.approve if n not in have]
        if unknown:  # a misspelt name would leave the call it meant ungated
            raise Refusal(400, "approve_unknown", tools=", ".join(unknown),
                          have=", ".join(sorted(have)))
    except BaseException:
        await close(built)
        raise
    return built


def chain(agent: Any) -> list[Any]:
    """``agent`` and every agent it may hand over to, each once."""
    found: dict[int, Any] = {}
    todo = [agent]
    while todo:
        a = todo.pop()
        if id(a) not in found:
            found[id(a)] = a
            todo += [h.agent for h in getattr(a, "handoffs", {}).values()]
    return list(found.values())


def _schema(schema: dict[str, Any] | None) -> Any:
    """The run's ``output_schema`` as ``output_type=`` takes it; a bad one is refused now."""
    if not schema:
        return None
    from ..output import SchemaOutput

    try:
        return SchemaOutput(schema)
    except ValueError as e:
        raise Refusal(400, "bad_schema", error=str(e)) from None


def check_task(task: str) -> None:
    """A task the run, the journal and every log can hold, said before anything is built."""
    if not task.strip():
        raise Refusal(400, "empty_task")
    if len(task) > MAX_TASK:
        raise Refusal(400, "task_too_long", n=len(task), limit=MAX_TASK)
    try:
        task.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal(400, "not_unicode") from None


def _workspace(root: Path, language: str) -> Any:
    """The run's own folder; run_command in the sandbox where there is one, else files only."""
    from ..errors import TaoError
    from ..workspace import Workspace

    try:
        return Workspace(root, language=language)
    except (TaoError, ValueError):  # no sandbox on this machine: the file tools still work
        return Workspace(root, language=language, sandbox=False)


async def close(built: Built) -> None:
    for closer in built.closers:
        try:
            done = closer()
            if inspect.isawaitable(done):
                await done
        except Exception:  # noqa: BLE001 - closing one must not keep the others open
            pass
