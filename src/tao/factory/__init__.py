"""The one factory: a typed ``AgentSpec`` in, an agent out. tao.toml (``config``), the CLI's flags,
the web form, ``tao eval``, ``tao compare`` and ``tao mcp serve`` all make a spec; only
``build_agent`` makes agents. A room above the loops and below every door that uses it.

    from tao.factory import AgentSpec, build_agent
    agent = build_agent(AgentSpec("codeact", max_turns=8, guard={"deny": ["shell"]}), model)
"""

from .build import DANGEROUS, build_agent, coder_prompt
from .spec import AGENTS, ARCHITECTURE, CODER, PROTOCOL, UNIT, AgentSpec

__all__ = ["AGENTS", "ARCHITECTURE", "CODER", "DANGEROUS", "PROTOCOL", "UNIT", "AgentSpec",
           "build_agent", "coder_prompt"]
