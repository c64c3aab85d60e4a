"""Budgets of a run: tokens, cost, wall clock, tool calls, the same call over and over.

Counted at the two doors: tokens and cost where a model reply comes back (``Metered``, a model
wrapping the run's model), tool calls where a call is admitted. A spent budget raises
``BudgetExceeded`` at the next door; the loop ends as it does on any error, and the run's
``finish`` turns that into ``status="budget"`` with the reason, the history kept.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..models.base import Model, ModelResponse


class BudgetExceeded(Exception):
    """A budget of the run is spent; ``reason`` says which (``max_tokens=1000: 1040 tokens used``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def load_prices(extra: Mapping[str, Any] | None = None) -> dict[str, tuple[float, float]]:
    """The price table (dollars per million input/output tokens): ``prompts/prices.toml``, then
    the file ``$TAO_PRICES`` names, then ``extra``. A bad entry is the user's error, said now."""
    import tomllib

    from .. import prompts

    table = dict(prompts.table("prices")["prices"])
    path = os.environ.get("TAO_PRICES")
    if path:
        try:
            with open(path, "rb") as f:
                table.update(tomllib.load(f).get("prices", {}))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ValueError(f"TAO_PRICES={path}: cannot read the price table: {e}") from None
    table.update(extra or {})
    out = {}
    for name, pair in table.items():
        try:
            inp, outp = (float(x) for x in pair)
        except (TypeError, ValueError):
            raise ValueError(f"price of {name!r} must be [input, output] dollars per million "
                             f"tokens, not {pair!r}") from None
        out[name] = (inp, outp)
    return out


def price_of(model: str, prices: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
    if model in prices:
        return prices[model]
    keys = [k for k in prices if model.startswith(k)]
    return prices[max(keys, key=len)] if keys else None


class Budget:
    """The limits of one agent's runs; ``None`` is no limit. ``max_repeats``: the same call
    (tool and arguments) may be made this many times; one more ends the run."""

    def __init__(self, max_tokens: int | None = None, max_cost: float | None = None,
                 max_seconds: float | None = None, max_tool_calls: int | None = None,
                 max_repeats: int | None = None, prices: Mapping[str, Any] | None = None):
        for name, value in (("max_tokens", max_tokens), ("max_cost", max_cost),
                            ("max_seconds", max_seconds), ("max_tool_calls", max_tool_calls),
                            ("max_repeats", max_repeats)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be above 0, not {value!r}")
        self.max_tokens, self.max_cost, self.max_seconds = max_tokens, max_cost, max_seconds
        self.max_tool_calls, self.max_repeats = max_tool_calls, max_repeats
        self.prices = load_prices(prices) if max_cost is not None else {}

    @property
    def meters_model(self) -> bool:
        """Whether the model door has a budget to check (a spent tool-call budget too stops
        the next model call, so that a CodeAct run whose code hit it ends there)."""
        return any(v is not None for v in (self.max_tokens, self.max_cost, self.max_seconds,
                                           self.max_tool_calls, self.max_repeats))

    def price(self, model: str) -> tuple[float, float]:
        found = price_of(model, self.prices)
        if found is None:
            raise ValueError(f"max_cost is set but model {model!r} has no price; add it with "
                             f"prices={{{model!r}: [input, output]}} (dollars per million tokens) "
                             "or in the TOML file $TAO_PRICES names")
        return found


class Metered(Model):
    """The run's model, counted: before each call the run checks its budgets; each reply's usage
    (and cost) is added to the run; the wall clock is checked at every chunk."""

    def __init__(self, model: Model, run: Any):
        self.inner, self.run = model, run
        self.name, self.supports_grammar = model.name, model.supports_grammar

    def __getattr__(self, name: str) -> Any:  # what else a loop reads off its model
        return getattr(self.inner, name)

    async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
        run = self.run
        run.check()
        async for chunk in self.inner.stream(messages, **kwargs):
            if type(chunk) is ModelResponse:
                run.spend(self.inner.name, chunk.usage)
            elif run.deadline is not None and time.monotonic() > run.deadline:
                run.check()
            yield chunk
