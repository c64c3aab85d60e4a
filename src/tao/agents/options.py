"""What one run is given besides its task: ``agent.run(task, output_type=, deps=, ...)``.

Handed from ``Agent.stream`` to the run's context (``LoopContext``) by the run's id, so the
loops' signature stays ``loop(task, run_id)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..messages import Message


@dataclass(frozen=True, slots=True)
class RunOptions:
    output: Any = None  # the run's ``tao.output.Output`` (None: the text)
    deps: Any = None  # what tools taking a ``tao.RunContext`` find in ``.deps``
    history: tuple[Message, ...] = ()  # the conversation before the task (a session, a handoff)
    depth: int = 0  # handoffs before this run in its chain
    output_type: Any = ...  # as given to this run (``...``: the agent's own), for a handoff's target
    #: the budget meter of the agent that handed over (``guard.budget.Meter``): a handoff's
    #: target spends against it too, so the budgets the chain started with bound the chain
    meter: Any = None
