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
from typing import Any, NoReturn

from ..messages import Usage
from ..models.base import Model, ModelResponse
from ..models.wrapped import WrappedModel


class BudgetExceeded(Exception):
    """A budget of the run is spent; ``reason`` says which (``max_tokens=1000: 1040 tokens used``)."""

    retryable = False  # a plan step it stopped is not tried again: the next door ends the run

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


class Meter:
    """What one run has spent against its ``Budget``, and its parent run's ``Meter`` (a
    sub-agent's spending counts there too). A spent budget sets ``stopped`` (the reason) and
    raises ``BudgetExceeded`` at the next door; ``texts`` words the reasons (prompts/guard.toml)."""

    def __init__(self, budget: Budget, texts: Mapping[str, str], run_id: str,
                 parent: Meter | None = None):
        self.budget, self.texts, self.run_id, self.parent = budget, texts, run_id, parent
        #: whether the model door has anything to check (here or above)
        self.meters = budget.meters_model or bool(parent and parent.meters)
        self.start = time.monotonic()
        self.deadline = self.start + budget.max_seconds if budget.max_seconds else None
        self.usage, self.cost, self.calls = Usage(), 0.0, 0
        self.stopped: str | None = None
        self.repeats: dict[str, int] = {}
        #: the calls counted, by (model replies so far, call id): once per call, though a turn
        #: admits it twice and a plan step retries it - but a call id a model sends again in a
        #: later reply (a script's ``[tool_call(...)] * 10``, a server that numbers per turn) is
        #: a new call
        self._counted: set[tuple[int, str]] = set()
        self.replies = 0

    def check_prices(self, model: str) -> None:
        meter: Meter | None = self
        while meter is not None:
            if meter.budget.max_cost is not None:
                meter.budget.price(model)
            meter = meter.parent

    def check(self) -> None:
        """Raise ``BudgetExceeded`` when a budget (here or a parent's) is spent."""
        if self.stopped:
            raise BudgetExceeded(self.stopped)
        if self.parent is not None:
            try:
                self.parent.check()
            except BudgetExceeded as e:
                self.stopped = e.reason
                raise
        b = self.budget
        if self.deadline is not None and time.monotonic() > self.deadline:
            self._stop("b_max_seconds", b.max_seconds, f"{time.monotonic() - self.start:.1f}")

    def remaining(self) -> float | None:
        """Seconds until the nearest ``max_seconds`` (here or a parent's) runs out; ``None``:
        no wall-clock budget. What the doors wait on: a model that goes silent or a tool that
        runs on is stopped there, not when it is done."""
        left = None if self.deadline is None else self.deadline - time.monotonic()
        above = self.parent.remaining() if self.parent is not None else None
        return above if left is None else left if above is None else min(left, above)

    async def within(self, awaitable: Any) -> Any:
        """``await awaitable`` stopped at the wall-clock budget: ``BudgetExceeded`` then."""
        import asyncio

        left = self.remaining()
        if left is None:
            return await awaitable
        try:
            async with asyncio.timeout(max(left, 0)) as clock:
                return await awaitable
        except TimeoutError:
            if not clock.expired():  # the awaitable's own timeout, not the budget
                raise
        self._deadline_passed()

    def _deadline_passed(self) -> None:
        """The nearest deadline (this run's or a parent's) has passed: that run and those
        under it are stopped with its reason."""
        chain, meter = [], self
        while meter is not None:
            chain.append(meter)
            meter = meter.parent
        first = min((m for m in chain if m.deadline is not None), key=lambda m: m.deadline)
        reason = first.stopped or first._reason("b_max_seconds", first.budget.max_seconds,
                                                f"{time.monotonic() - first.start:.1f}")
        for m in chain[:chain.index(first) + 1]:
            m.stopped = m.stopped or reason
        raise BudgetExceeded(self.stopped)

    def spend(self, model: str, usage: Usage) -> None:
        """A model reply's usage; a budget it overspends stops the run at the next door."""
        if self.parent is not None:
            self.parent.spend(model, usage)
        self.replies += 1
        self.usage.add(usage)
        b = self.budget
        if b.max_cost is not None:
            inp, out = b.price(model)
            self.cost += (usage.prompt_tokens * inp + usage.completion_tokens * out) / 1e6
            if self.cost > b.max_cost and not self.stopped:
                self.stopped = self._reason("b_max_cost", b.max_cost, f"${self.cost:.6f}")
        if b.max_tokens is not None and self.usage.total_tokens > b.max_tokens and not self.stopped:
            self.stopped = self._reason("b_max_tokens", b.max_tokens, self.usage.total_tokens)

    def count(self, call: Any) -> None:
        """One tool call (once per call id): the call budget and the same-call count."""
        key = (self.replies, call.id)
        if key in self._counted:
            return
        self._counted.add(key)
        if self.parent is not None:  # a sub-agent's calls count against the parent's budgets
            from dataclasses import replace

            try:
                self.parent.count(replace(call, id=f"{self.run_id}/{self.replies}/{call.id}"))
            except BudgetExceeded as e:  # this run ends with the parent's reason, as "budget"
                self.stopped = self.stopped or e.reason
                raise
        self.check()
        b = self.budget
        self.calls += 1
        if b.max_tool_calls is not None and self.calls > b.max_tool_calls:
            self._stop("b_max_tool_calls", b.max_tool_calls, self.calls)
        if b.max_repeats is not None:
            from .policy import digest

            d = digest(call.name, call.arguments)
            n = self.repeats[d] = self.repeats.get(d, 0) + 1
            if n > b.max_repeats:
                self._stop("b_max_repeats", b.max_repeats, n, call.name)

    def halt(self, reason: str) -> NoReturn:
        """Stop the run now for ``reason`` (a rule of the loop, not a number spent here)."""
        self.stopped = reason
        raise BudgetExceeded(reason)

    def _reason(self, key: str, limit: Any, used: Any, tool: str = "") -> str:
        from .. import prompts

        return prompts.render(self.texts[key], limit=str(limit), used=str(used), tool=tool)

    def _stop(self, key: str, limit: Any, used: Any, tool: str = "") -> None:
        self.stopped = self._reason(key, limit, used, tool)
        raise BudgetExceeded(self.stopped)


class Metered(WrappedModel):
    """The run's model, counted: before each call the run's budgets are checked; each reply's
    usage (and cost) is added to its ``Meter``; the wall clock is checked at every chunk."""

    def __init__(self, model: Model, run: Meter):
        super().__init__(model)
        self.run = run

    async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
        run = self.run
        run.check()
        timed = run.remaining() is not None
        async with self.chunks(messages, **kwargs) as chunks:
            while True:
                try:  # a model silent past the wall-clock budget is stopped there
                    chunk = await (run.within(anext(chunks)) if timed else anext(chunks))
                except StopAsyncIteration:
                    return
                if type(chunk) is ModelResponse:
                    run.spend(self.inner.name, chunk.usage)
                yield chunk
