"""Named agents in tao.toml, and the chain of handoffs they make.

    [agents.triage]
    agent = "react"                 # the architecture (tao run --agent's names)
    handoffs = ["analyst", "planner"]
    [agents.analyst]
    agent = "codeact"
    description = "does the arithmetic in Python"   # what triage's transfer_to_analyst says
    output_type = "schemas/report.json"
    max_turns = 6
    deny = ["shell"]                # its own guardrails, added to the run's
    [agents.planner]
    agent = "plan"
    model = "openai:deepseek-chat"  # a model of its own (else the run's)

``tao run --agent triage`` (and the workbench's agent list, and ``agent = "triage"`` at the top
of the file) builds triage with its handoffs through the one factory (``chain_spec`` makes the
``AgentSpec`` tree, ``build_agent`` the agents). What each agent of the chain gets:

- **tools**: its table's ``tools``, else the run's (``--tools``, the file's ``tools``, the
  calculators); its transfer tools always (an ``allow`` list that names tools lets them too:
  restricting tools is not forbidding the handoffs the same file declares);
- **guardrails**: the run's restrictions (``deny``, ``require_approval``, ``untrusted``,
  ``high_risk``), the approver, the audit log and the journal hold for every agent, with its
  table's own added;
- **budgets**: the run's (flags, the file's top level) are the chain's - the agent the run
  starts with holds them and every agent it hands to spends against them (``--max-cost 0.20``
  is the run's cost, whoever speaks); a table's own budgets bound that agent's part too.
  ``max_turns`` is each agent's own loop (its table's, else the run's), and a chain ends after
  ``MAX_HANDOFFS`` handoffs, so a run makes at most (handoffs + 1) x max_turns turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import GUARD_KEYS, ConfigError, _read, unknown_keys
from .spec import AGENTS, AgentSpec

#: the keys an ``[agents.NAME]`` table may set
TABLE_KEYS = ("agent", "model", "tools", "max_turns", "output_type", "description", "handoffs",
              *(k for k in GUARD_KEYS if k != "audit"))
BUDGETS = ("max_tokens", "max_cost", "max_seconds", "max_tool_calls", "max_repeats")
RESTRICTIONS = ("deny", "untrusted", "high_risk")


@dataclass(slots=True)
class AgentTable:
    """One ``[agents.NAME]``: ``agent`` the architecture; ``tools`` None: the run's;
    ``guard``: its own guardrail keywords (``tao.guard``), as tao.toml's top level names them."""

    name: str
    agent: str = "react"
    model: str | None = None
    tools: list[str] | None = None
    max_turns: int | None = None
    output_type: str | dict[str, Any] | None = None
    description: str | None = None
    handoffs: list[str] = field(default_factory=list)
    guard: dict[str, Any] = field(default_factory=dict)


def read_agents(value: Any, path: Path) -> dict[str, AgentTable]:
    """The ``[agents]`` tables, each checked as the top level is, and every handoff naming one."""
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(f"{path}: agents must be tables, e.g. [agents.triage] with "
                          f"agent = \"react\", not {value!r}")
    tables: dict[str, AgentTable] = {}
    for name, table in value.items():
        where = f"agents.{name}."
        if not name.strip() or name in AGENTS:
            raise ConfigError(f"{path}: [agents.{name}]: an agent's name must not be empty nor "
                              f"one of the architectures ({', '.join(AGENTS)})")
        unknown_keys(table, TABLE_KEYS, path, where)
        own = _read({k: v for k, v in table.items() if k not in ("description", "handoffs")},
                    path, where)
        found = AgentTable(name, own.agent or "react", own.model,
                           own.tools if "tools" in table else None, own.max_turns,
                           own.output_type)
        if "description" in table:
            if not isinstance(table["description"], str):
                raise ConfigError(f"{path}: {where}description must be text, not "
                                  f"{table['description']!r}")
            found.description = table["description"].strip() or None
        handoffs = table.get("handoffs", [])
        handoffs = [handoffs] if isinstance(handoffs, str) else handoffs
        if not isinstance(handoffs, list) or not all(isinstance(h, str) for h in handoffs):
            raise ConfigError(f"{path}: {where}handoffs must be a list of agent names, e.g. "
                              f"[\"analyst\"], not {handoffs!r}")
        found.handoffs = list(dict.fromkeys(h.strip() for h in handoffs))
        found.guard = {k: getattr(own, k) for k in (*BUDGETS, "allow") if getattr(own, k) is not None}
        found.guard.update({k: getattr(own, k) for k in RESTRICTIONS if getattr(own, k)})
        if own.require_approval:
            found.guard["require_approval"] = own.require_approval
        tables[name] = found
    for found in tables.values():
        for target in found.handoffs:
            if target not in tables:
                raise ConfigError(f"{path}: agents.{found.name}.handoffs names {target!r}, but "
                                  f"there is no [agents.{target}] (there are: "
                                  f"{', '.join(tables)})")
    return tables


def chain_spec(tables: Mapping[str, AgentTable], name: str, *, tools: Sequence[Any] | None,
               guard: Mapping[str, Any], max_turns: int | None, base: Path,
               output_type: Any = None, memory: Any = None) -> AgentSpec:
    """The ``AgentSpec`` tree of agent ``name`` and every agent it may hand to: the run's
    ``tools``, ``guard`` (``guard_options``' keywords, with the approver and the journal),
    ``max_turns`` and ``output_type`` where a table says none; see the module's docs for what
    each agent gets. ``ValueError`` for a table whose tools cannot be loaded."""
    from ..tools.loader import ToolLoadError, load_all
    from .outputs import output_type as typed

    shared = {k: v for k, v in guard.items() if k not in BUDGETS}
    placed: set[str] = set()

    def spec(table: AgentTable, first: bool) -> AgentSpec:
        placed.add(table.name)
        own: dict[str, Any] = dict(shared)
        if first:
            own.update({k: v for k, v in guard.items() if k in BUDGETS})
        for key, value in table.guard.items():
            if key in RESTRICTIONS:
                own[key] = list(dict.fromkeys([*own.get(key, ()), *value]))
            elif key == "require_approval":
                own[key] = _approvals(own.get(key), value)
            elif key not in own or key == "allow":
                own[key] = value
        if own.get("allow") is not None:  # the handoffs the file declares stay allowed
            own["allow"] = [*own["allow"], *(f"transfer_to_{h}" for h in table.handoffs)]
        try:
            loaded = load_all(table.tools, base=base) if table.tools is not None else tools
        except ToolLoadError as e:
            raise ValueError(f"agents.{table.name}.tools: {e}") from None
        handoffs = [h if h in placed else spec(tables[h], False) for h in table.handoffs]
        out = typed(table.output_type, base) if table.output_type is not None else output_type
        return AgentSpec(table.agent, table.max_turns or max_turns, loaded, own, memory,
                         name=table.name, model=table.model, description=table.description,
                         output_type=out, handoffs=handoffs)

    if name not in tables:
        raise ValueError(f"no agent {name!r} in tao.toml (there are: {', '.join(tables)})")
    return spec(tables[name], True)


def _approvals(run: Any, table: Mapping[str, bool | str]) -> dict[str, Any]:
    """The run's ``require_approval`` (a list of names, or name -> rule) with a table's added."""
    from ..guard.policy import matches

    rules: dict[str, Any] = dict.fromkeys(run, True) if isinstance(run, list) else dict(run or {})
    for name, rule in table.items():
        if rule is not False:
            rules[name] = True if rule is True else matches(rule)
    return rules


__all__ = ["AgentTable", "chain_spec", "read_agents"]
