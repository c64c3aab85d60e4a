"""What an agent is made from, said once: the agent names and ``AgentSpec``, the typed spec that
tao.toml, the CLI's flags, the web form, ``tao eval``, ``tao compare`` and ``tao mcp serve`` all
fill in and ``tao.factory.build_agent`` turns into an agent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: every agent name a user may type, with what it is
ARCHITECTURE = {"react": "ReAct", "react-text": "ReAct (text protocol)",
                "react-json": "ReAct (JSON decisions)", "codeact": "CodeAct",
                "plan": "Plan-and-Execute"}
AGENTS = tuple(ARCHITECTURE)
#: the coding agent (``tao code``, the web's "code"): ReAct with the text protocol on a workspace
CODER = "code"
#: the ReAct protocol each ReAct agent name speaks
PROTOCOL: dict[str, Literal["tools", "text", "json"]] = {
    "react": "tools", "react-text": "text", "react-json": "json"}
#: what one action of each agent is, for tables that count them
UNIT = {"react": "tool calls", "react-text": "tool calls", "react-json": "tool calls",
        "codeact": "executions", "plan": "steps", CODER: "tool calls"}


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One agent to build. ``tools``: None gives the built-in calculators (the coder: the
    workspace's tools only); ``guard``: the guardrail keywords of ``tao.guard.Guard`` (``deny=``,
    ``require_approval=``, ``audit=``, ``journal=``...); ``memory``: the agent's ``memory=``;
    ``votes`` > 1: inside ``tao.Vote``; ``attempts`` > 1 (the coder): inside ``tao.Attempts``,
    run again from the files as they were while ``Workspace.verify`` finds problems;
    ``helpers``: CodeAct's arithmetic helpers (off where a benchmark's own functions are the
    point); ``workspace``: the coder's ``Workspace``;
    ``checklist``: before its first turn the model writes the behaviours a user will check,
    shown and then checked (``Agent.checklist``; off by default: on the coder it did not raise
    the share of projects that work, BENCHMARKS.md).

    ``model``: a model of its own for this agent (tao.toml's ``[agents.NAME] model``), resolved
    by the door that builds it (``build_agent(..., resolve=)``), else the run's model;
    ``name``: what the agent is called in events and in a handoff's ``transfer_to_<name>``;
    ``description``: what that transfer tool tells the model about it; ``output_type``: its typed
    result (a Python type, or ``tao.output.SchemaOutput`` for a JSON Schema; see
    ``factory.outputs``); ``handoffs``: the agents it may hand the conversation to, each a spec,
    or the ``name`` of a spec elsewhere in this tree - how a chain that may come back (triage ->
    billing -> triage) is said without a spec that contains itself."""

    agent: str = "react"
    max_turns: int | None = None  # None: 10, the coder 15
    tools: Sequence[Any] | None = None
    guard: Mapping[str, Any] = field(default_factory=dict)
    memory: Any = None
    votes: int = 1
    attempts: int = 1  # the coder: runs again from the start while its work fails the checks
    helpers: bool = True
    workspace: Any = None
    name: str | None = None
    model: str | None = None  # this agent's own model ("openai:NAME"), where the door resolves one
    description: str | None = None
    output_type: Any = None
    output_retries: int = 1
    handoffs: Sequence[AgentSpec | str] = ()
    checklist: bool = False  # the model first writes what a user will check (Agent.checklist)

    def __post_init__(self) -> None:
        name = getattr(self.agent, "value", self.agent)  # a CLI enum member is its value
        object.__setattr__(self, "agent", name)
        if name not in AGENTS and name != CODER:
            raise ValueError(f"unknown agent {name!r}; use any of: {', '.join(AGENTS)}")
        if name == CODER and self.workspace is None:
            raise ValueError("the coding agent needs a workspace (AgentSpec(workspace=...))")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"max_turns must be 1 or more, not {self.max_turns}")
        if self.votes < 1:
            raise ValueError(f"votes must be 1 or more, not {self.votes}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be 1 or more, not {self.attempts}")
        if self.attempts > 1 and name != CODER:  # what would say an answer failed?
            raise ValueError("attempts > 1 is for the coding agent, whose work the workspace "
                             "checks; for answers use votes")
        if self.attempts > 1 and self.guard.get("journal") is not None:
            raise ValueError("a journaled run resumes one run; attempts > 1 starts new ones: "
                             "use one or the other")
        if self.name is not None and not self.name.strip():
            raise ValueError("an agent's name must not be empty")
        if self.checklist and self.votes > 1:  # one checklist per sampled run: n extra calls
            raise ValueError("an agent that votes (votes > 1) cannot write a checklist")
        if self.handoffs and self.votes > 1:  # Vote runs it n times: which chain's answer?
            raise ValueError("an agent with handoffs cannot vote (votes > 1)")
        object.__setattr__(self, "handoffs", tuple(self.handoffs))
