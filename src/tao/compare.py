"""``tao compare TASK``: ReAct, CodeAct and Plan-and-Execute on one task, side by side.

The seed's §7.2 comparison, measured instead of asserted: for each architecture the LLM calls
(turns), what it ran - tool calls (ReAct), code executions (CodeAct), plan steps (Plan-and-
Execute) -, tokens, seconds and the answer::

    rows = compare("小明有 50 元 ...", model)            # one model for every agent, run in turn
    render_table(rows)                                   # a rich table on stdout

``model`` is one ``Model`` used by every agent in turn (an endpoint, the embedded model), or a
mapping ``{"react": m1, "plan": m2, ...}`` / a callable ``name -> Model`` (each agent needs its own
``ScriptedModel`` script). The agents run one after another, never at once, so their seconds
compare. Every agent gets the same ``tools`` (default: the seed's four-operation ``calculator``);
CodeAct adds the seed's helpers ``add subtract multiply divide sum avg`` itself.

An agent may also be an ``AgentSpec`` with a ``name`` - a named agent and its handoffs, as
``tao compare TASK --agents react,triage`` makes one from tao.toml's ``[agents.triage]``
(``tao.factory.team.chain_spec``) - so a chain is measured against a single loop on the same
task: its row counts every agent of the chain (turns, tool calls, tokens), each model it spent.

``CodeActAgent`` is imported when its row runs; where it cannot be imported the row is kept with
``note`` saying why and nothing measured, so the table still shows ReAct against the plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .events import Event, ExecutionFinished, StepStarted
from .factory import ARCHITECTURE, PROTOCOL, UNIT, AgentSpec, build_agent  # noqa: F401
from .models.base import Model

if TYPE_CHECKING:
    from rich.console import Console

    from .agents.base import Agent, Result

#: the agents compared when none are named: one of each architecture
AGENTS = ("react", "codeact", "plan")
@dataclass(slots=True)
class Row:
    """One agent's run of the task. ``actions`` is tool calls (ReAct), code executions (CodeAct)
    or plan steps run (Plan-and-Execute), as ``unit`` says; ``tool_calls`` is ``Result.tool_calls``
    (for the plan: tool executions, retries included). ``note`` is set when the agent could not
    run at all (then nothing else is)."""

    agent: str
    architecture: str
    unit: str
    status: str = "skipped"
    llm_calls: int = 0
    actions: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    answer: str | None = None
    error: str | None = None
    note: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build(name: str, model: Model, tools: Sequence[Any], max_turns: int = 10) -> Agent:
    """The agent ``name`` names (``tao.factory.build_agent``); ``ImportError`` when its module
    cannot be imported (CodeAct)."""
    return build_agent(AgentSpec(name, max_turns, tools), model)


def compare(task: str, model: Model | Mapping[str, Model] | Callable[[str], Model],
            agents: Iterable[str | AgentSpec] = AGENTS, *, tools: Sequence[Any] | None = None,
            max_turns: int = 10, sinks: Mapping[str, Iterable[Callable[[Event], Any]]] | None = None,
            resolve: Callable[[str], Model] | None = None) -> list[Row]:
    """Run each of ``agents`` on ``task``, one after another; one ``Row`` each, in order.
    ``sinks`` (``{"plan": [PlanView()]}``) watch an agent's run. An agent is an architecture's
    name or a named ``AgentSpec`` (its row, its model and its sinks go by that name);
    ``resolve``: the model of a spec's agent that names one of its own."""
    agents = list(agents)
    for agent in agents:  # a typo is the caller's mistake: say so before anything runs
        if isinstance(agent, AgentSpec):
            if agent.name is None:
                raise ValueError("an AgentSpec compared needs a name (AgentSpec(name=...)): it "
                                 "is what its row is called")
        elif agent not in ARCHITECTURE:
            raise ValueError(f"unknown agent {agent!r}; use any of: {', '.join(ARCHITECTURE)}")
    if tools is None:
        from .tools.calculator import calculator

        tools = [calculator]
    rows = []
    for agent in agents:
        name = agent.name or agent.agent if isinstance(agent, AgentSpec) else agent
        row = _row(agent)
        try:
            if isinstance(agent, AgentSpec):
                runner = build_agent(agent, _model_for(model, name), resolve)
            else:
                runner = build(name, _model_for(model, name), tools, max_turns)
        except ImportError as e:
            row.note = f"{row.architecture} is not available: {e}"
            rows.append(row)
            continue
        events: list[Event] = []
        start = time.perf_counter()
        result = runner.run(task, [events.append, *(sinks or {}).get(name, ())])
        _fill(row, result, events, time.perf_counter() - start)
        rows.append(row)
    return rows


def _row(agent: str | AgentSpec) -> Row:
    """The empty row of ``agent``: a named spec's says its name, architecture and the agents
    it may hand to ("triage: ReAct -> analyst, planner"), counted in its first agent's unit."""
    if not isinstance(agent, AgentSpec):
        return Row(agent, ARCHITECTURE[agent], UNIT[agent])
    targets = [h if isinstance(h, str) else h.name or h.agent for h in agent.handoffs]
    handed = f" -> {', '.join(targets)}" if targets else ""
    kind = ARCHITECTURE.get(agent.agent, agent.agent)
    return Row(agent.name or agent.agent, f"{agent.name}: {kind}{handed}", UNIT[agent.agent])


def _model_for(model: Any, name: str) -> Model:
    if isinstance(model, Model):
        return model
    if isinstance(model, Mapping):
        if name not in model:
            raise ValueError(f"no model given for {name!r} (models given for: {', '.join(model)})")
        return model[name]
    if callable(model):
        return model(name)
    raise TypeError(f"model must be a Model, a mapping of agent name to Model, or a callable; "
                    f"not {model!r}")


def _fill(row: Row, result: Result, events: list[Event], seconds: float) -> None:
    row.status, row.llm_calls, row.tool_calls = result.status, result.turns, result.tool_calls
    row.prompt_tokens = result.usage.prompt_tokens
    row.completion_tokens = result.usage.completion_tokens
    row.seconds, row.answer, row.error = seconds, result.answer, result.error
    if row.unit == "steps":  # the plan's own steps, each counted once (retries are not steps)
        row.actions = len({e.step_id for e in events if type(e) is StepStarted})
    elif row.unit == "executions":  # top-level code blocks run (nested ones are sub-agents')
        row.actions = sum(1 for e in events if type(e) is ExecutionFinished) or result.tool_calls
    else:
        row.actions = result.tool_calls


def render_table(rows: Sequence[Row], console: Console | None = None, *,
                 title: str | None = None) -> None:
    """Print the rows side by side as a rich table (the seed's §7.2), then the notes."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console if console is not None else Console()
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("Architecture", style="bold")
    table.add_column("LLM calls (turns)", justify="right")
    table.add_column("Tool calls / executions / steps", justify="right")
    table.add_column("Tokens (prompt+completion)", justify="right")
    table.add_column("Seconds", justify="right")
    table.add_column("Answer")
    notes = []
    for row in rows:
        if row.note:
            notes.append(row.note)
            table.add_row(row.architecture, "-", "-", "-", "-", Text("not run (see below)", "dim"))
            continue
        if row.status == "done":
            answer = Text(row.answer or "", style="green")
        else:
            answer = Text(f"{row.status}: {row.error or 'no answer'}", style="red")
        unit = row.unit[:-1] if row.actions == 1 else row.unit  # 1 execution, 4 steps
        table.add_row(row.architecture, str(row.llm_calls), f"{row.actions} {unit}",
                      f"{row.tokens} ({row.prompt_tokens}+{row.completion_tokens})",
                      f"{row.seconds:.2f}", answer)
    console.print(table)
    for note in notes:
        console.print(Text(f"note: {note}", style="yellow"), soft_wrap=True)


__all__ = ["AGENTS", "Row", "build", "compare", "render_table"]
