"""``build_agent(spec, model)``: the one place an agent is made, for every door (the CLI, the web
workbench, ``tao eval``, ``tao compare``, ``tao mcp serve``), so they cannot disagree on tools,
guardrails, memory or the coder's set-up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .spec import CODER, PROTOCOL, AgentSpec

#: commands the coding agent's run_command asks before running
DANGEROUS = r"\b(rm|rmdir|curl|wget|sudo|su|chmod|chown|dd|mkfs|shutdown|reboot)\b"


def build_agent(spec: AgentSpec, model: Any,
                resolve: Callable[[str], Any] | None = None) -> Any:
    """The agent ``spec`` says, on ``model``. ``ImportError`` when the agent's module cannot be
    imported (CodeAct's sandbox side), ``ValueError`` for a spec no agent takes.

    A spec with ``handoffs`` gives the whole chain: each agent of the tree is built once (a
    target named twice, or by name, is the same agent), then each gets its transfer tools - so
    a chain that comes back to an agent already built is a loop the agents bound
    (``MAX_HANDOFFS``), not a recursion here. An agent whose spec names a ``model`` gets
    ``resolve(model)`` (once per name); the others share ``model``."""
    return _Chain(model, resolve).root(spec)


class _Chain:
    """The agents of one tree of specs, by name, and the handoffs still to link."""

    def __init__(self, model: Any, resolve: Callable[[str], Any] | None):
        self.model, self.resolve = model, resolve
        self.models: dict[str, Any] = {}
        self.named: dict[str, Any] = {}
        self.links: list[tuple[Any, AgentSpec]] = []

    def root(self, spec: AgentSpec) -> Any:
        agent = self.one(spec)
        for source, own in self.links:
            names = [h if isinstance(h, str) else _name(h) for h in own.handoffs]
            unknown = [n for n in names if n not in self.named]
            if unknown:
                raise ValueError(f"{_name(own)!r} hands off to {unknown[0]!r}, but no agent "
                                 f"here is called that (known: {', '.join(self.named)})")
            source.named(None, [self.named[n] for n in names])
        return agent

    def one(self, spec: AgentSpec) -> Any:
        name = _name(spec)
        if name in self.named:
            raise ValueError(f"two agents are called {name!r}: give them different names")
        agent = _single(spec, self.model_of(spec))
        if spec.name is not None or spec.handoffs:
            self.named[name] = agent
        for h in spec.handoffs:
            if isinstance(h, AgentSpec):
                if h.name is None:
                    raise ValueError("an agent handed to needs a name (AgentSpec(name=...)): it "
                                     "is what its transfer_to_<name> tool is called")
                if h.name not in self.named:
                    self.one(h)
        if spec.handoffs:
            self.links.append((agent, spec))
        return agent

    def model_of(self, spec: AgentSpec) -> Any:
        if spec.model is None or self.resolve is None:
            return self.model
        if spec.model not in self.models:
            self.models[spec.model] = self.resolve(spec.model)
        return self.models[spec.model]


def _name(spec: AgentSpec) -> str:
    return spec.name or spec.agent


def _single(spec: AgentSpec, model: Any) -> Any:
    """One agent of the tree, without its handoffs (linked once every agent exists)."""
    options = dict(spec.guard)  # the guardrails' keywords, and memory=: every agent takes them
    if spec.memory is not None:
        options["memory"] = spec.memory
    if spec.output_type is not None:
        options["output_type"] = spec.output_type
        options["output_retries"] = spec.output_retries
    if spec.name is not None:
        options["name"] = spec.name
    if spec.agent == CODER:
        agent = _coder(model, spec.workspace, spec.max_turns or 15, options)
    else:
        tools = list(spec.tools) if spec.tools is not None else _calculators()
        agent = _loop(spec, model, tools, options)
    if spec.description:
        agent.description = spec.description  # what the transfer tool to it says
    if spec.checklist:
        agent.checklist()
    if spec.votes > 1:
        from ..agents.vote import Vote

        agent = Vote(agent, n=spec.votes)
    if spec.attempts > 1:
        from ..agents.attempts import Attempts

        agent = Attempts(agent, n=spec.attempts, check=spec.workspace.verify,
                         state=spec.workspace)
    return agent


def _loop(spec: AgentSpec, model: Any, tools: list[Any], options: dict[str, Any]) -> Any:
    turns = spec.max_turns or 10
    if spec.agent in PROTOCOL:
        from ..agents.react import ReActAgent

        return ReActAgent(model, tools, protocol=PROTOCOL[spec.agent], max_turns=turns,
                          **options)
    if spec.agent == "codeact":
        try:
            from ..agents.codeact import CodeActAgent
        except Exception as e:  # noqa: BLE001 - missing, or half-written: say which
            raise ImportError(f"tao.agents.codeact cannot be imported ({type(e).__name__}: {e})") from e
        return CodeActAgent(model, tools, max_turns=turns, helpers=spec.helpers, **options)
    from ..plan.agent import PlanExecuteAgent

    return PlanExecuteAgent(model, tools, **options)


def _calculators() -> list[Any]:
    from ..tools.calculator import calculate, calculator

    return [calculate, calculator]


def _coder(model: Any, workspace: Any, max_turns: int, options: dict[str, Any]) -> Any:
    """The coding agent on ``workspace`` (a ``Workspace`` toolbox): ReAct, text protocol. A
    ``run_command`` matching ``DANGEROUS`` needs approval, and so does what
    ``require_approval`` adds. A Finish without a file or folder the task names by path gets
    one reminder (``Workspace.files_check``); one with Python files never run, or pages never
    tried, one to run them, with the run's checklist where it wrote one
    (``Workspace.unrun_check``); one without the command the task shows run
    (``Workspace.commands_check``), and one where it printed other than the task says
    (``Workspace.outputs_check``); one with functions no run called, one more
    (``Workspace.uncalled_check``); one with functions the task names that no file defines
    (``Workspace.named_check``)."""
    from ..agents.react import ReActAgent
    from ..guard.policy import any_of, matches

    names = options.pop("require_approval", None) or ()
    rules: dict[str, Any] = {"run_command": matches(DANGEROUS, "command")}
    for name, rule in (names if isinstance(names, dict) else dict.fromkeys(names, True)).items():
        rules[name] = any_of(rules.get(name, False), rule)  # a rule given adds to the built-in
    agent = ReActAgent(model, workspace, protocol="text", max_turns=max_turns,
                       system_prompt=coder_prompt(workspace), require_approval=rules, **options)
    if hasattr(workspace, "unrun_check"):
        agent.answer_check(workspace.files_check)
        agent.answer_check(workspace.unrun_check)
        agent.answer_check(workspace.commands_check)
        agent.answer_check(workspace.outputs_check)
        agent.answer_check(workspace.named_check)
        agent.answer_check(workspace.uncalled_check)
    return agent


def coder_prompt(workspace: Any) -> str:
    """Seed 002's protocol prompt for ``workspace``'s tools, then tao code's rules for writing a
    project (``prompts/code.toml``), in the workspace's language."""
    from .. import prompts
    from ..agents.protocols import TextProtocol
    from ..tools.base import Toolbox

    lang = getattr(workspace, "language", "en")
    tools = workspace if isinstance(workspace, Toolbox) else Toolbox(list(workspace))
    rules: str = prompts.table("code")[lang]["rules"]
    return TextProtocol().system_prompt(lang, tools) + "\n\n" + rules.rstrip()
