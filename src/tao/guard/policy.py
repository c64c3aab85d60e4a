"""Which calls may run: allow/deny lists, approval rules, high-risk tools after untrusted content.

A rule is the tool's own (``@tool(requires_approval=..., high_risk=..., untrusted_output=...)``)
or the agent's (``require_approval=``, ``high_risk=``, ``untrusted=`` by tool name), so the tools
a user did not write (the workspace's ``run_command``) can be gated too. A predicate that raises
asks for approval: a rule that cannot be evaluated fails closed. The request then names the rule
and its error (``why_error``), so whoever approves is not told the arguments matched.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..safe_json import dumps

Rule = bool | Callable[[dict[str, Any]], bool]


class Why(str):
    """A reason ``Policy.check`` gives: a key of ``prompts/guard.toml``, with the ``values`` its
    text is filled with (``why_error``: the rule that raised, and what it raised)."""

    values: dict[str, str]

    def __new__(cls, key: str, **values: str) -> Why:
        why = super().__new__(cls, key)
        why.values = values
        return why


def digest(name: str, arguments: Any) -> str:
    """SHA-256 of the tool name and its arguments in canonical JSON: what an approval is bound
    to, so a decision shown one call can never let a different one run."""
    text = name + "\x00" + dumps(arguments, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def matches(pattern: str, *params: str) -> Callable[[dict[str, Any]], bool]:
    """A ``requires_approval`` predicate: true when ``pattern`` (a regex) is found in any of
    ``params`` (all string arguments when none are named), e.g.
    ``matches(r"\\b(rm|curl|sudo)\\b", "command")``."""
    rx = re.compile(pattern)

    def predicate(args: dict[str, Any]) -> bool:
        values = [args.get(p) for p in params] if params else list(args.values())
        return any(isinstance(v, str) and rx.search(v) for v in values)

    predicate.__name__ = f"matches({pattern!r})"
    return predicate


def any_of(*rules: Rule) -> Rule:
    """One approval rule that asks when any of ``rules`` does (``True`` if one is ``True``):
    how a user's rule adds to a built-in one without lifting it."""
    rules = tuple(r for r in rules if r is not False)
    if any(r is True for r in rules) or not rules:
        return bool(rules)
    if len(rules) == 1:
        return rules[0]

    def predicate(args: dict[str, Any]) -> bool:
        return any(r(args) for r in rules)

    predicate.__name__ = " | ".join(getattr(r, "__name__", "rule") for r in rules)
    return predicate


def _names(value: Iterable[str] | str | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset(n.strip() for n in value.split(",") if n.strip())
    return frozenset(value)


class Policy:
    """``allow``: the only tools that may run (None: all); ``deny``: tools that never run;
    ``require_approval``: tool names, or ``{name: True | predicate}``; ``high_risk``: tools that
    need approval once untrusted content was read in the run; ``untrusted``: tools whose output
    is untrusted (``"*"``: all)."""

    def __init__(self, allow: Iterable[str] | str | None = None, deny: Iterable[str] | str = (),
                 require_approval: Iterable[str] | Mapping[str, Rule] | str = (),
                 high_risk: Iterable[str] | str = (), untrusted: Iterable[str] | str = ()):
        self.allow = _names(allow)
        self.deny = _names(deny) or frozenset()
        if isinstance(require_approval, Mapping):
            self.require: dict[str, Rule] = dict(require_approval)
        else:
            self.require = dict.fromkeys(_names(require_approval) or (), True)
        for name, rule in self.require.items():
            if not (isinstance(rule, bool) or callable(rule)):
                raise TypeError(f"require_approval[{name!r}] must be True/False or a predicate")
        self.high_risk = _names(high_risk) or frozenset()
        self.untrusted = _names(untrusted) or frozenset()

    @property
    def active(self) -> bool:
        return bool(self.allow is not None or self.deny or self.require or self.high_risk)

    def check(self, name: str, tool: Any, arguments: dict[str, Any], tainted: bool
              ) -> tuple[str, str]:
        """``("run", "")``, ``("not_allowed" | "denied", "")`` or ``("ask", why)``, where ``why``
        keys ``prompts/guard.toml`` (a ``Why`` carries the values its text is filled with)."""
        if name in self.deny:
            return "denied", ""
        if self.allow is not None and name not in self.allow:
            return "not_allowed", ""
        rule = self.require.get(name, getattr(tool, "requires_approval", False))
        if rule is True:
            return "ask", "why_rule"
        if callable(rule):
            try:
                if rule(dict(arguments)):
                    return "ask", "why_match"
            except Exception as e:  # noqa: BLE001 - a rule that cannot be evaluated fails closed
                return "ask", Why("why_error", rule=getattr(rule, "__name__", repr(rule)),
                                  error=f"{type(e).__name__}: {e}")
        if tainted and (name in self.high_risk or getattr(tool, "high_risk", False)):
            return "ask", "why_tainted"
        return "run", ""

    def check_names(self, tools: Iterable[str]) -> None:
        """A name here that is no tool of the run but nearly one (``run_comand`` beside
        ``run_command``) is a typo that would leave that tool ungated: a ``ValueError`` before
        the run starts. A name far from every tool (``send_email`` in a project's tao.toml, run
        with the calculators) is someone else's and passes."""
        import difflib

        tools = set(tools)
        for key, names in (("allow", self.allow or ()), ("deny", self.deny),
                           ("require_approval", self.require), ("high_risk", self.high_risk),
                           ("untrusted", self.untrusted)):
            for name in names:
                if name == "*" or name in tools:
                    continue
                near = difflib.get_close_matches(name, tools, 1, 0.85)
                if near:
                    raise ValueError(f"{key} names {name!r}, which is no tool of this run; did you "
                                     f"mean {near[0]!r}? (tools: {', '.join(sorted(tools))})")

    def is_untrusted(self, name: str, tool: Any, arguments: dict[str, Any] | None = None) -> bool:
        """Whether this call's output is untrusted (``arguments=None``: whether any call's may
        be). ``untrusted="*"``: every tool's output is (the strict reading: fence it all). A
        tool's predicate that raises says yes: fail closed."""
        if name in self.untrusted or "*" in self.untrusted:
            return True
        rule = getattr(tool, "untrusted_output", False)
        if not callable(rule):
            return bool(rule)
        if arguments is None:
            return True
        try:
            return bool(rule(dict(arguments)))
        except Exception:  # noqa: BLE001
            return True
