"""What ``tao code`` shows: the model's reply as it is written, and the files it leaves.

Seed 002 §6: a coding agent's turn is a whole file, and a console that waits for the turn to end
freezes for seconds, so every token is printed the moment it arrives, raw (the reply *is* the
Thought and the Action). Then each turn's Observation ("文件 index.html 写入成功（1234 字符）"),
and at the end the run's summary and every file in the workspace with its size - also after a
Ctrl-C, when they are what is left. A turn that streamed no text (native tool calls) shows its
Thought and Action in short instead: a file's content is counted, not dumped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..events import (Action, ApprovalDecided, Checked, Checklist, Error, Event, FinalAnswer,
                      ModelRetry, Observation, RunFinished, RunStarted, Thought, TokenDelta,
                      TurnStarted)

TEXTS = {
    "zh": {"task": "任务：", "workspace": "工作区：", "turn": "第 {n} 轮", "answer": "最终答案：",
           "files": "{root} 中的文件（{n} 个）：", "no_files": "{root} 中还没有文件",
           "more": "……还有 {n} 个文件", "bytes": "{n} 字节", "chars": "{n} 字符",
           "interrupted": "已中断：已写入的文件保留在 {root}",
           "summary": "{status}：{turns} 轮，{calls} 次工具调用，tokens {p}+{c}，{s:.1f} 秒",
           "done": "完成", "max_turns": "未完成（已达轮数上限）", "error": "出错",
           "retry": "重试（第 {n} 次，{s:.1f} 秒后）：{why}", "approved": "{tool}：已批准（{by}）",
           "rejected": "{tool}：已拒绝（{by}）", "edited": "{tool}：参数已修改（{by}），实际执行：",
           "budget": "未完成（预算用完）", "checklist": "检查清单：",
           "writing_checklist": "正在写检查清单……"},
    "en": {"task": "Task: ", "workspace": "Workspace: ", "turn": "Turn {n}", "answer": "Final Answer: ",
           "files": "Files in {root} ({n}):", "no_files": "No files in {root} yet",
           "more": "... {n} more files", "bytes": "{n} bytes", "chars": "{n} characters",
           "interrupted": "Interrupted: the files written so far are kept in {root}",
           "summary": "{status}: {turns} turns, {calls} tool calls, tokens {p}+{c}, {s:.1f} s",
           "done": "done", "max_turns": "stopped: turn limit reached", "error": "error",
           "retry": "retrying (attempt {n}, in {s:.1f} s): {why}", "approved": "{tool}: approved ({by})",
           "rejected": "{tool}: rejected ({by})", "edited": "{tool}: edited ({by}), runs with ",
           "budget": "stopped: budget spent", "checklist": "Checklist:",
           "writing_checklist": "writing the checklist..."},
}
_STYLE = {"done": "bold green", "max_turns": "bold yellow", "budget": "bold yellow",
          "error": "bold red"}
MAX_LISTED = 50


class CodeView:
    """A sink for ``tao code``: ``CodeView(root, language, console=None)``; ``files()`` prints
    the workspace's files (the run's end does it too)."""

    def __init__(self, root: str | os.PathLike[str], language: str = "en", console: Any = None):
        from rich.console import Console

        self.root = Path(root)
        self.console = console if console is not None else Console()
        self.t = TEXTS.get(language, TEXTS["en"])
        self._streamed = False  # this turn's text is on screen already
        self._open_line = False  # the cursor is after streamed text, not at a line start
        self._calls: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        kind = type(event)
        if kind is TokenDelta and event.turn == 0:  # the checklist: shown whole when written
            if not self._streamed:
                self._line((self.t["writing_checklist"], "dim"))
                self._streamed = True
            return
        if kind is TokenDelta:
            self.console.print(event.text, end="", markup=False, highlight=False, soft_wrap=True)
            self._streamed = True
            self._open_line = not event.text.endswith("\n")
            return
        self._end_line()
        if kind is RunStarted:
            self._line((self.t["task"], "bold"), event.task, (f"  ({event.agent} · {event.model})", "dim"))
            self._line((self.t["workspace"], "bold"), str(self.root))
        elif kind is Checklist and event.items:
            self._line((self.t["checklist"], "bold"))
            for n, item in enumerate(event.items, 1):
                self._line((f"  {n}. ", "bold"), item)
        elif kind is TurnStarted:
            from rich.text import Text

            self._streamed = False
            if event.turn > 1:
                self.console.print()
            self.console.rule(Text(self.t["turn"].format(n=event.turn), style="bold"),
                              align="left", style="dim")
        elif kind is ModelRetry:
            if event.turn:  # what streamed is dropped: the retry streams anew (the checklist:
                self._streamed = False  # its one "writing" line stays)
            self._line((self.t["retry"].format(n=event.attempt, s=event.delay_s, why=event.reason), "dim"))
        elif kind is Checked:  # an attempt's project checked after its run (--attempts)
            self.console.print()
            self._line((event.text, "bold green" if not event.problems else "bold yellow"))
        elif kind is Thought and not self._streamed:
            self._line(("Thought: ", "bold cyan"), event.text)
        elif kind is Action:
            self._calls[event.call.id] = event.call
            if not self._streamed:
                self._line(("Action: ", "bold magenta"), self._short(event.call))
        elif kind is ApprovalDecided:  # the question itself is the approver's (on stderr)
            self._decided(event)
        elif kind is Observation:
            style = "bold red" if event.is_error else "bold green"
            self._line(("Observation: ", style), (event.content, "red" if event.is_error else ""))
        elif kind is FinalAnswer:
            self._line((self.t["answer"], "bold green"), (event.text, "bold"))
        elif kind is Error:
            label, style = ("Warning: ", "yellow") if event.recoverable else ("Error: ", "red")
            self._line((label, f"bold {style}"), (event.message, style))
        elif kind is RunFinished:
            r = event.result
            self._line((self.t["summary"].format(
                status=self.t.get(r.status, r.status), turns=r.turns, calls=r.tool_calls,
                p=f"{r.usage.mark}{r.usage.prompt_tokens}", c=r.usage.completion_tokens, s=r.duration_s),
                _STYLE.get(r.status, "bold")))
            self.files()

    def close(self) -> None:
        self._end_line()

    def interrupted(self) -> None:
        """After a Ctrl-C: say so, and show what was written."""
        self._end_line()
        self._line((self.t["interrupted"].format(root=self.root), "bold yellow"))
        self.files()

    def files(self) -> None:
        found = list_files(self.root)
        if not found:
            self._line((self.t["no_files"].format(root=self.root), "dim"))
            return
        self._line((self.t["files"].format(root=self.root, n=len(found)), "bold"))
        from rich.cells import cell_len  # a CJK name is two columns a character

        shown = found[:MAX_LISTED]
        width = max(cell_len(p) for p, _ in shown)
        digits = max(len(f"{n:,}") for _, n in shown)
        for path, size in shown:
            pad = " " * (width - cell_len(path))
            self._line(f"  {path}{pad}  ", (self.t["bytes"].format(n=f"{size:>{digits},}"), "dim"))
        if len(found) > MAX_LISTED:
            self._line((f"  {self.t['more'].format(n=len(found) - MAX_LISTED)}", "dim"))

    # -- helpers ---------------------------------------------------------------------------------
    def _decided(self, e: Any) -> None:
        """What was decided, in the user's language: the streamed Action shows the arguments the
        model wrote, so an edit says what runs instead."""
        text = self.t[e.verdict if e.verdict in ("approved", "edited") else "rejected"]
        text = text.format(tool=e.tool, by=e.by)
        if e.verdict == "edited":
            import json

            self._line((text, "bold yellow"), json.dumps(e.arguments, ensure_ascii=False, default=str))
        elif e.verdict == "approved":
            self._line((text, "bold green"))
        else:
            self._line((text, "bold red"), (f"：{e.reason}" if self.t is TEXTS["zh"] else
                                             f": {e.reason}") if e.reason else "")
    def _end_line(self) -> None:
        if self._open_line:
            self.console.print()
            self._open_line = False

    def _line(self, *parts: Any) -> None:
        from rich.text import Text

        self.console.print(Text.assemble(*parts), highlight=False, soft_wrap=True)

    def _short(self, call: Any) -> str:
        """``write_file(path="index.html", content=<1234 characters>)``: long text counted."""
        args = []
        for key, value in call.arguments.items():
            if isinstance(value, str) and (len(value) > 80 or "\n" in value):
                args.append(f"{key}=<{self.t['chars'].format(n=len(value))}>")
            else:
                args.append(f"{key}={value!r}")
        return f"{call.name}({', '.join(args)})"


def list_files(root: Path) -> list[tuple[str, int]]:
    """Every file under ``root`` (links not followed), as (relative path, bytes), sorted."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in names:
            path = Path(folder, name)
            try:
                size = path.lstat().st_size
            except OSError:
                continue
            found.append((path.relative_to(root).as_posix(), size))
    return sorted(found)
