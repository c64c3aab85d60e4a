"""ConsoleSink: the Thought/Action/Observation chain in a terminal, tokens streaming live.

``agent.run(task, sinks=[ConsoleSink()])``. While a turn streams, its partial text shows in a
transient live view; when the turn's Thought / Action / Final Answer arrive the live view goes and
the tidy chain is printed, so the user sees tokens appear and then the structured steps. On a
console that is not a terminal (a file, a pipe, a test's ``StringIO``) only the chain is printed.

rich is imported when a ConsoleSink is made, never by ``import tao``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..lang import detect_language
from ..events import (Action, ApprovalDecided, ApprovalRequested, Checklist, CodeExecution, Error, Event,
                      ExecutionFinished, FinalAnswer, ModelRetry, Observation, RunFinished,
                      RunStarted, Thought, TokenDelta, TurnStarted, HandedOff)

if TYPE_CHECKING:
    from rich.console import Console

_TEXTS: dict[str, dict[str, str]] = {
    "zh": {
        "task": "任务：", "turn": "第 {n} 轮",
        "done": "完成", "max_turns": "未完成（已达轮数上限）", "error": "出错",
        "budget": "未完成（预算用完）", "ask": "需要批准：", "approved": "已批准",
        "rejected": "已拒绝", "edited": "已修改参数：",
        "summary": "{status}：{turns} 轮，{calls} 次{calls_word}{tokens}，{seconds:.2f} 秒",
        "tokens": "，tokens {p}+{c}",
        "handed": "{source} 把对话交给 {target}", "handed_done": "已转交 {target}",
        "output": "输出（{name}）：", "checklist": "检查清单：",
    },
    "en": {
        "task": "Task: ", "turn": "Turn {n}",
        "done": "done", "max_turns": "stopped: turn limit reached", "error": "error",
        "budget": "stopped: budget spent", "ask": "Approval needed: ", "approved": "approved",
        "rejected": "rejected", "edited": "edited, runs with: ",
        "summary": "{status}: {turns} {turns_word}, {calls} {calls_word}{tokens}, {seconds:.2f} s",
        "tokens": ", tokens {p}+{c}",
        "handed": "{source} hands the conversation to {target}", "handed_done": "handed to {target}",
        "output": "Output ({name}):", "checklist": "Checklist:",
    },
}
_STATUS_STYLE = {"done": "bold green", "max_turns": "bold yellow", "budget": "bold yellow",
                 "error": "bold red"}


class ConsoleSink:
    """Renders an event stream with rich.

    ``console``: a ``rich.console.Console`` (default: a new one on stdout). ``show_tokens``: put
    token usage in the closing line. ``quiet``: print only the final answer - or, with
    ``typed`` (the name of the run's ``output_type``), only its validated value, as JSON: what a script
    reading ``tao run -q --output-type ...`` parses. A typed run's value is shown after the
    closing line too (``Output (Person):``), pretty, since the answer's text may wrap it in
    prose or a fence.
    """

    #: live view refreshes per second while tokens stream
    refresh_per_second = 12

    def __init__(self, console: Console | None = None, *, show_tokens: bool = True,
                 quiet: bool = False, endpoint: str = "", typed: str | None = None):
        from rich.console import Console

        self.console = console if console is not None else Console()
        #: what the model's endpoint was found not to take, said in the header
        self.endpoint = endpoint
        self.show_tokens = show_tokens
        self.quiet, self.typed = quiet, typed
        self.language = "en"
        self._partial = ""
        self._live: Any = None
        self._codeact = False

    # -- the sink -----------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        kind = type(event)
        if kind is TokenDelta:
            self._stream(event.text)
            return
        if kind is ModelRetry:
            self._partial = ""
            self._end_live()
            if not self.quiet:
                self._line((f"retrying in {event.delay_s:.1f} s (attempt {event.attempt}): "
                            f"{event.reason}", "dim"))
            return
        self._end_live()
        if kind is RunStarted:
            self.language = detect_language(event.task)
            # CodeAct (whatever its name: a handoff's "analyst") runs code in a sandbox; its
            # Result.tool_calls counts executions
            self._codeact = event.sandbox is not None or event.agent == "codeact"
        if self.quiet:
            if kind is FinalAnswer and not self.typed:
                self.console.print(event.text, markup=False, highlight=False, soft_wrap=True)
            elif kind is RunFinished and self.typed and event.result.output is not None \
                    and not event.result.handoff:
                from .. import safe_json

                self.console.print(safe_json.dumps(event.result.to_dict()["output"], indent=2),
                                   markup=False, highlight=False, soft_wrap=True)
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(self, event)

    def close(self) -> None:
        """End a live view left open (a run that was interrupted mid-turn)."""
        self._end_live()

    def __enter__(self) -> ConsoleSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- streaming ----------------------------------------------------------------------------

    def _stream(self, text: str) -> None:
        self._partial += text
        if self.quiet or not (self.console.is_terminal and not self.console.is_dumb_terminal):
            return  # nothing to animate: the chain that follows says it all
        if self._live is None:
            from rich.live import Live

            self._live = Live(self._partial_view(), console=self.console, transient=True,
                              refresh_per_second=self.refresh_per_second,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        else:
            self._live.update(self._partial_view())

    def _partial_view(self) -> Any:
        from rich.text import Text

        keep = max(3, self.console.height - 4)
        lines = self._partial.splitlines()[-keep:]
        return Text("\n".join(lines), style="dim")

    def _end_live(self) -> None:
        self._partial = ""
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    # -- the chain ----------------------------------------------------------------------------

    def _line(self, *parts: Any) -> None:
        from rich.text import Text

        self.console.print(Text.assemble(*parts), highlight=False)

    @property
    def _texts(self) -> dict[str, str]:
        return _TEXTS.get(self.language, _TEXTS["en"])

    def _run_started(self, e: RunStarted) -> None:
        where = f" · {e.sandbox}" if e.sandbox else ""  # what confines the code it runs
        where += f" · {self.endpoint}" if self.endpoint else ""
        self._line((self._texts["task"], "bold"), e.task,
                   (f"  ({e.agent} · {e.model}{where})", "dim"))

    def _turn_started(self, e: TurnStarted) -> None:
        from rich.text import Text

        self.console.rule(Text(self._texts["turn"].format(n=e.turn), style="bold"), align="left",
                          style="dim")

    def _checklist(self, e: Checklist) -> None:
        if not e.items:  # the reply listed nothing
            return
        self._line((self._texts["checklist"], "bold"))
        for n, item in enumerate(e.items, 1):
            self._line((f"  {n}. ", "bold"), item)

    def _thought(self, e: Thought) -> None:
        self._line(("Thought: ", "bold cyan"), e.text)

    def _action(self, e: Action) -> None:
        self._line(("Action: ", "bold magenta"), e.call.name)
        args = json.dumps(e.call.arguments, ensure_ascii=False, default=str)
        extra = (f"  ({e.call.parse_error})", "yellow") if e.call.parse_error else ""
        self._line(("Action Input: ", "bold magenta"), args, extra)

    def _observation(self, e: Observation) -> None:
        if e.is_error:
            self._line(("Observation: ", "bold red"), (e.content, "red"))
        else:
            self._line(("Observation: ", "bold green"), e.content)

    def _code(self, e: CodeExecution) -> None:
        from rich.syntax import Syntax

        self._line(("Code:", "bold magenta"))
        self.console.print(Syntax(e.code, "python", theme="ansi_dark", line_numbers=True,
                                  word_wrap=True, background_color="default"))

    def _execution(self, e: ExecutionFinished) -> None:
        failed = e.error is not None or e.killed_reason is not None
        label = ("Output: ", "bold red" if failed else "bold green")
        self._line(label, (f"({e.duration_s * 1000:.0f} ms)", "dim"))
        self._line((e.observation or e.stdout, "red" if failed else ""))

    def _approval_requested(self, e: ApprovalRequested) -> None:
        args = json.dumps(e.arguments, ensure_ascii=False, default=str)
        self._line((self._texts["ask"], "bold yellow"), f"{e.tool} {args}", (f"  ({e.reason})", "dim"))

    def _approval_decided(self, e: ApprovalDecided) -> None:
        t = self._texts
        if e.verdict == "edited":
            args = json.dumps(e.arguments, ensure_ascii=False, default=str)
            self._line((f"{e.tool}: ", "bold yellow"), (t["edited"], "yellow"), args)
        elif e.verdict == "approved":
            self._line((f"{e.tool}: ", "bold green"), (t["approved"], "green"), (f" ({e.by})", "dim"))
        else:
            why = f": {e.reason}" if e.reason else ""
            self._line((f"{e.tool}: ", "bold red"), (t["rejected"] + why, "red"), (f" ({e.by})", "dim"))

    def _final_answer(self, e: FinalAnswer) -> None:
        self._line(("Final Answer: ", "bold green"), (e.text, "bold"))

    def _error(self, e: Error) -> None:
        if e.recoverable:
            self._line(("Warning: ", "bold yellow"), (e.message, "yellow"))
        else:
            self._line(("Error: ", "bold red"), (e.message, "red"))

    def _handed_off(self, e: HandedOff) -> None:
        why = f" ({e.reason})" if e.reason else ""
        self._line(("→ ", "bold magenta"),
                   (self._texts["handed"].format(source=e.source, target=e.target), "magenta"),
                   (why, "dim"))

    def _run_finished(self, e: RunFinished) -> None:
        r, t = e.result, self._texts
        tokens = ""
        if self.show_tokens:
            tokens = t["tokens"].format(p=f"{r.usage.mark}{r.usage.prompt_tokens}",
                                        c=r.usage.completion_tokens)
        line = t["summary"].format(
            status=t["handed_done"].format(target=r.handoff) if r.handoff else
            t.get(r.status, r.status), turns=r.turns, calls=r.tool_calls, tokens=tokens,
            seconds=r.duration_s, turns_word="turn" if r.turns == 1 else "turns",
            calls_word=self._calls_word(r.tool_calls),
        )
        self._line((line, _STATUS_STYLE.get(r.status, "bold")))
        if r.output is not None and not r.handoff:
            from rich.json import JSON

            from .. import safe_json

            kind = type(r.output)  # a schema's value is JSON data: no class to name
            name = self.typed or ("JSON" if kind.__module__ == "builtins" else kind.__name__)
            self._line((t["output"].format(name=name), "bold"))
            self.console.print(JSON(safe_json.dumps(r.to_dict()["output"]), ensure_ascii=False))

    def _calls_word(self, n: int) -> str:
        if self.language == "zh":
            return "代码执行" if self._codeact else "工具调用"
        word = "execution" if self._codeact else "tool call"
        return word if n == 1 else word + "s"

    _handlers = {
        RunStarted: _run_started, TurnStarted: _turn_started, Thought: _thought, Action: _action,
        Observation: _observation, FinalAnswer: _final_answer, Error: _error,
        RunFinished: _run_finished, CodeExecution: _code, ExecutionFinished: _execution,
        ApprovalRequested: _approval_requested, ApprovalDecided: _approval_decided,
        HandedOff: _handed_off, Checklist: _checklist,
    }
