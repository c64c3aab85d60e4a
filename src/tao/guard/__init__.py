"""Guardrails around the two doors: tool policies (allow/deny, approval rules), human approval,
the audit log, budgets and untrusted content. Built once in ``Toolbox.execute`` and at the
model's stream (``guard.run.Run``, the run context both doors share), never in each loop.

Every agent takes the same keywords::

    ReActAgent(model, tools, deny=["run_command"], approve=callback, audit="audit.jsonl",
               max_tokens=20_000, max_cost=0.05, max_seconds=120, max_tool_calls=30,
               max_repeats=3)

Loaded lazily: ``import tao`` does not import this package.
"""

from __future__ import annotations

from .approval import ApprovalRequest, AutoReject, Decision
from .terminal import TerminalApprover
from .budget import BudgetExceeded
from .policy import Policy, digest, matches

__all__ = ["ApprovalRequest", "AutoReject", "BudgetExceeded", "Decision", "Policy",
           "TerminalApprover", "digest", "matches"]
