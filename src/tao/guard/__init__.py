"""Guardrails around the tool door: policies (allow/deny, approval), the audit log, budgets and
untrusted content. Built once in ``Toolbox.execute`` and ``Model.stream``, never in each loop."""
