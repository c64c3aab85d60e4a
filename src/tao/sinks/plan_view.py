"""PlanView: a Plan-and-Execute run in the terminal - the DAG, and its progress as it runs.

``agent.run(task, sinks=[PlanView()])``. When ``PlanCreated`` arrives the plan is drawn: one line
per step with what runs it (a tool call with its arguments, or the step agent with its
instruction) and what it depends on. Each ``Step*`` event then changes that step's mark::

    ○ pending   ◐ running   ✔ done   ✘ failed   ⊘ skipped   ↻ retried (attempt n)

with its duration and result (or error); a ``Replanned`` adds the new plan under its reason, and a
sub-agent's events (``Nested``) appear indented under the step it runs. On a terminal the view is
one live tree redrawn in place (running steps' clocks tick); elsewhere (a pipe, a file, a test's
``Console(file=io.StringIO())``) the plan is printed once and every change is one line after it,
so a log reads top to bottom. The run's answer and a summary line close it. While the model
writes (the plan, a re-plan, the synthesis) the live view counts the characters streamed so far.

PlanView reads the whole stream (task, answer, errors, summary), so it replaces ``ConsoleSink``
for plan runs rather than sitting beside it (rich allows one live display per console).
rich is imported when a PlanView is made, never by ``import tao``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events import (ApprovalDecided, ApprovalRequested, Checklist, Error, Event, FinalAnswer, Nested,
                      PlanCreated, Replanned, RunFinished, RunStarted, StepFailed, StepFinished,
                      StepRetried, StepSkipped, StepStarted, TokenDelta, TurnStarted)
from .plan_lines import MARKS, NESTED_SHOWN, WIDTH, _cut, approval_line, nested_line, runs

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["MARKS", "NESTED_SHOWN", "PlanView", "WIDTH", "approval_line", "nested_line", "runs"]


@dataclass(slots=True)
class _Step:
    info: dict[str, Any]
    status: str = "pending"
    attempt: int = 0
    started: float | None = None
    duration: float | None = None
    detail: str = ""  # the result, the error, why it was skipped
    nested: list[tuple[int, str]] = field(default_factory=list)  # (depth, line)


class PlanView:
    """``PlanView(console=None, *, live=None)``: ``console`` is a ``rich.console.Console``
    (default: stdout); ``live`` forces the in-place view on or off (default: on exactly when the
    console is an interactive terminal)."""

    refresh_per_second = 4

    def __init__(self, console: Console | None = None, *, live: bool | None = None):
        from rich.console import Console

        self.console = console if console is not None else Console()
        if live is None:
            live = self.console.is_terminal and not self.console.is_dumb_terminal
        self.live = live
        self.steps: dict[str, _Step] = {}
        self.plans: list[tuple[str, list[str]]] = []  # (title, step ids) per plan
        self.answer: str | None = None
        self.writing: int | None = None  # characters the model has streamed in this call
        self.asking: dict[str, ApprovalRequested] = {}  # calls waiting for a decision
        self._lock = threading.RLock()
        self._live: Any = None
        self._held = 0  # > 0 while the terminal approver asks (see pause)
        self._later: list[tuple[Event, Any]] = []  # what came while held, shown after
        self._restart = False  # the live view was stopped by pause: start it again on resume

    # -- the sink -----------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        with self._lock:
            line = self._apply(event)
            if self._held:
                self._later.append((event, line))
                return
        self._show(event, line)

    def _show(self, event: Event, line: Any) -> None:
        kind = type(event)
        if self.live:
            if kind in (FinalAnswer, Error, RunFinished) and not getattr(event, "recoverable", False):
                self._stop()
            elif kind in (TurnStarted, PlanCreated, Replanned, StepStarted) and self._live is None:
                self._start()
            elif self._live is not None:
                self._live.refresh()
        if kind in (PlanCreated, Replanned) and not self.live:
            self.console.print(self._plan_view(self.plans[-1]))
        elif line is not None and (kind is ApprovalDecided or not self.live or self._live is None):
            self.console.print(line, highlight=False)  # a decision: a line above the live tree

    def pause(self) -> None:
        """Stand still while the terminal approver asks (``tao.sinks.screen.SCREEN``, from the
        approver's thread): the live tree is stopped - its last picture stays above the question
        - and what the run does meanwhile is kept for ``resume``."""
        with self._lock:
            self._held += 1
            live, self._live = self._live, None
            self._restart = self._restart or live is not None
        if live is not None:  # outside our lock: Live's refresh thread takes it to draw
            live.stop()

    def resume(self) -> None:
        """The question is answered: the live tree is drawn again below it, with what came."""
        with self._lock:
            self._held -= 1
            if self._held:
                return
            later, self._later = self._later, []
            restart, self._restart = self._restart, False
        if restart:
            self._start()
        for event, line in later:
            self._show(event, line)

    def close(self) -> None:
        """Stop the live view (a run that was interrupted)."""
        self._stop()

    def __enter__(self) -> PlanView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __rich__(self) -> Any:
        """The whole view now: every plan with its steps' marks (what the live display draws)."""
        from rich.console import Group
        from rich.text import Text

        with self._lock:
            parts = [self._plan_view(p, nested_max=NESTED_SHOWN) for p in self.plans]
            parts += [Text(approval_line(r), "bold yellow") for r in self.asking.values()]
            if self.writing is not None:
                parts.append(Text(f"✎ the model is writing… {self.writing} characters", "dim"))
            return Group(*parts)

    # -- state ------------------------------------------------------------------------------

    def _apply(self, event: Event) -> Any:
        """Update the state; return the line a log (non-live view) prints for this event."""
        from rich.text import Text

        kind = type(event)
        if kind is TokenDelta:
            self.writing = (self.writing or 0) + len(event.text)
            return None
        if kind is TurnStarted:
            self.writing = 0
            return None
        if kind in (PlanCreated, Replanned, FinalAnswer, Error):
            self.writing = None
        if kind is ApprovalRequested:
            self.asking[event.call_id] = event
            return Text(approval_line(event), "bold yellow")
        if kind is ApprovalDecided:
            self.asking.pop(event.call_id, None)
            style = {"approved": "green", "edited": "yellow"}.get(event.verdict, "red")
            return Text(approval_line(event), style)
        if kind is Checklist:  # before the plan (``Agent.checklist``): a block above it
            self.writing = None
            items = [f"\n  {n}. {item}" for n, item in enumerate(event.items, 1)]
            return Text.assemble(("Checklist:", "bold"), *items) if items else None
        if kind is RunStarted:
            return Text.assemble(("Task: ", "bold"), event.task,
                                 (f"  ({event.agent} · {event.model})", "dim"))
        if kind in (PlanCreated, Replanned):
            ids = []
            for info in event.steps:
                ids.append(info["id"])
                if info["id"] in self.steps:  # streamed: it started before the plan was complete
                    self.steps[info["id"]].info = info
                else:
                    self.steps[info["id"]] = _Step(info)
            if kind is PlanCreated:
                title = f"Plan · {len(ids)} steps"
                if event.answer:
                    title += f" · answer: {event.answer}"
                # steps of a streamed reply that broke off part-way ran all the same: keep them
                streamed = [i for i in self.steps if i not in ids]
                self.plans.append((title, streamed + ids))
            else:
                title = (f"Re-plan {event.replan} · {len(ids)} steps · "
                         f"because {_cut(event.reason, 80)}")
                self.plans.append((title, ids))
            return None
        if kind is Nested:
            top = event.step_id.split("/")[0]
            line = nested_line(event.event)
            if line is None or top not in self.steps:
                return None
            inner = event.step_id.split("/", 1)[1] + " " if "/" in event.step_id else ""
            self.steps[top].nested.append((event.depth, inner + line))
            return Text("    " * event.depth + f"{event.step_id} │ {line}", style="dim")
        if kind in (StepStarted, StepFinished, StepRetried, StepFailed, StepSkipped):
            return self._step_event(event)
        if kind is FinalAnswer:
            self.answer = event.text
            return Text.assemble(("Final Answer: ", "bold green"), (event.text, "bold"))
        if kind is Error:
            if event.recoverable:
                return Text.assemble(("Warning: ", "bold yellow"), event.message)
            return Text.assemble(("Error: ", "bold red"), event.message)
        if kind is RunFinished:
            r = event.result
            counts = {s: sum(1 for st in self.steps.values() if st.status == s) for s in MARKS}
            steps = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
            line = (f"{r.status}: {r.turns} LLM call{'s' * (r.turns != 1)}, {r.tool_calls} tool "
                    f"call{'s' * (r.tool_calls != 1)}, {steps or 'no steps'}, tokens "
                    f"{r.usage.mark}{r.usage.prompt_tokens}+{r.usage.completion_tokens}, {r.duration_s:.2f} s")
            return Text(line, style="bold green" if r.status == "done" else "bold red")
        return None

    def _step_event(self, event: Any) -> Any:

        st = self.steps.get(event.step_id)
        if st is None:  # a streamed plan's step: it starts before PlanCreated
            info = {"id": event.step_id, "description": getattr(event, "description", ""),
                    "tool": getattr(event, "tool", None), "depends_on": []}
            if info["tool"] is not None:
                info["args"] = getattr(event, "args", {})
            else:
                info["instruction"] = (getattr(event, "args", None) or {}).get("instruction", "")
            st = self.steps[event.step_id] = _Step(info)
        kind = type(event)
        if kind is StepStarted:
            st.status, st.attempt, st.started = "running", event.attempt, time.perf_counter()
            extra = f" (attempt {event.attempt})" if event.attempt > 1 else ""
            shown = ({**st.info, "args": event.args} if event.tool is not None
                     else {**st.info, "instruction": event.args.get("instruction", "")})
            return self._log_line(st, f"started{extra}: {runs(shown)}")
        if kind is StepFinished:
            st.status, st.duration, st.detail = "done", event.duration_s, event.result
            return self._log_line(st, f"{event.duration_s:.2f} s → {_cut(event.result)}")
        if kind is StepRetried:
            st.status, st.detail = "retrying", event.error
            return self._log_line(st, f"attempt {event.attempt} failed: {_cut(event.error)}; "
                                      f"retry in {event.delay_s:.2f} s")
        if kind is StepFailed:
            st.status, st.detail = "failed", event.error
            if st.started is not None:
                st.duration = time.perf_counter() - st.started
            return self._log_line(st, f"failed after {event.attempts} attempt(s): {_cut(event.error)}")
        st.status, st.detail = "skipped", event.reason
        return self._log_line(st, f"skipped: {_cut(event.reason)}")

    def _log_line(self, st: _Step, text: str) -> Any:
        from rich.text import Text

        mark, style = MARKS[st.status]
        return Text.assemble((f"{mark} ", style), (st.info["id"], "bold"), " ", text)

    # -- drawing ----------------------------------------------------------------------------

    def _plan_view(self, plan: tuple[str, list[str]], nested_max: int | None = None) -> Any:
        from rich.tree import Tree

        title, ids = plan
        tree = Tree(self._text(title, "bold"), guide_style="dim")
        for sid in ids:
            st = self.steps[sid]
            node = tree.add(self._step_label(st))
            shown = st.nested if nested_max is None else st.nested[-nested_max:]
            if len(shown) < len(st.nested):
                node.add(f"[dim]… {len(st.nested) - len(shown)} earlier[/dim]")
            for depth, line in shown:
                node.add(self._text("  " * (depth - 1) + line, "dim"))
        return tree

    def _step_label(self, st: _Step) -> Any:
        from rich.text import Text

        mark, style = MARKS[st.status]
        info = st.info
        label = Text.assemble((f"{mark} ", style), (info["id"], "bold"))
        if info.get("description"):
            label.append(f"  {_cut(info['description'], 60)}")
        label.append(f"  {runs(info)}", "cyan")
        if info.get("depends_on"):
            label.append(f"  ← {', '.join(info['depends_on'])}", "magenta")
        if st.status == "running" and st.started is not None:
            label.append(f"  {time.perf_counter() - st.started:.1f} s…", "yellow")
        elif st.duration is not None:
            label.append(f"  {st.duration:.2f} s", "dim")
        if st.attempt > 1 or st.status == "retrying":
            label.append(f"  ↻ attempt {st.attempt}", "yellow")
        if st.detail:
            arrow = "→ " if st.status == "done" else ""
            label.append(f"  {arrow}{_cut(st.detail, 60)}",
                         {"done": "green", "failed": "red", "retrying": "yellow"}.get(st.status, "dim"))
        return label

    @staticmethod
    def _text(text: str, style: str) -> Any:
        from rich.text import Text

        return Text(text, style=style)

    # -- the live display -------------------------------------------------------------------

    def _start(self) -> None:
        from rich.live import Live

        from .screen import SCREEN

        with self._lock:  # resume (the approver's thread) and the run may both get here
            if self._live is not None or self._held:
                return
            live = self._live = Live(self, console=self.console,
                                     refresh_per_second=self.refresh_per_second, transient=False,
                                     redirect_stdout=False, redirect_stderr=False)
        SCREEN.add(self)
        live.start()

    def _stop(self) -> None:
        with self._lock:
            live, self._live = self._live, None
            self._restart = False
        if live is not None:
            live.stop()  # leaves the final picture on screen
            from .screen import SCREEN

            SCREEN.discard(self)
