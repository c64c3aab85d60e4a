"""Plan-and-Execute: the agent (``agent.PlanExecuteAgent``) and its parts, one room above the
other loops, whose agents its steps may run.

- ``schema``: the plan's JSON schema, reading the planner's reply (``parse_plan``)
- ``validate``: the checks a plan passes before it runs (tools, dependencies, references, cycles)
- ``references``: ``$stepN`` references, found and resolved
- ``executor``: the event-driven parallel executor with retries and timeouts
- ``planner``: the model calls: plan, fix, re-plan, synthesize
- ``agent_tool``: ``agent_as_tool`` - any agent as a tool of another
"""

from .agent_tool import AgentTool, agent_as_tool
from .references import references, resolve
from .schema import Plan, PlanInvalid, Step, parse_plan, plan_schema

__all__ = ["AgentTool", "agent_as_tool", "references", "resolve", "Plan", "PlanInvalid", "Step",
           "parse_plan", "plan_schema"]
