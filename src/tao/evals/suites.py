"""What ``tao eval SUITE`` runs: a suite is tasks, the tools an agent gets for each, and a score.

``get_suite(spec)`` reads the command's argument: ``calculator`` (the package's own word
problems, zh and en), ``bfcl`` or ``bfcl:simple,irrelevance`` (``tao.evals.bfcl``), ``humaneval``
(``tao.evals.humaneval``), or the path of a JSONL file whose lines have ``question`` and
``answer`` (GSM8K's numeric ``answer`` works as it is; ``id`` is used when there is one).

A suite sees a finished run as an ``Outcome`` - the ``Result``, every event, and whatever its
tools recorded - and says whether it was right (``Score``). Suites are rebuilt from their spec in
each worker process or Ray actor, so a spec string is all that travels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import is_correct

if TYPE_CHECKING:
    from ..agents.base import Result
    from ..events import Event

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True, slots=True)
class Task:
    """One item: ``prompt`` is what the agent is asked; ``data`` is the suite's own (the expected
    answer, BFCL's functions and ground truth, HumanEval's tests) and is never shown to it."""

    id: str
    prompt: str
    data: dict[str, Any] = field(default_factory=dict)
    category: str | None = None


@dataclass(slots=True)
class Outcome:
    result: Result
    events: list[Event]
    calls: list[dict[str, Any]]  # what recording tools saw, in order: [{name: arguments}]


@dataclass(frozen=True, slots=True)
class Score:
    correct: bool
    expected: str | None = None
    detail: str | None = None  # why not, in a few words (BFCL's error type, the failed assert)


class Suite:
    """Base: ``name``, ``tasks()``, ``prompt(task, agent)``, ``tools(task)`` and ``score``.

    ``max_turns`` (None: the command's ``--max-turns``) and ``helpers`` (CodeAct's arithmetic
    helpers next to the suite's tools) are fixed by suites that need them; ``score_blocks``
    by a suite whose ``score`` runs code (it is then called on a thread, so that the tasks
    running beside it go on)."""

    name = "suite"
    max_turns: int | None = None
    helpers = True
    score_blocks = False
    votable = False  # answers that ``tao.Vote`` can compare (``--votes``)

    def tasks(self) -> list[Task]:  # pragma: no cover - abstract
        raise NotImplementedError

    def prompt(self, task: Task, agent: str) -> str:
        """What ``agent`` is asked: the task's prompt, unless the suite words it per agent."""
        return task.prompt

    def tools(self, task: Task, calls: list[dict[str, Any]]) -> list[Any]:
        return []

    def score(self, task: Task, outcome: Outcome) -> Score:  # pragma: no cover - abstract
        raise NotImplementedError


class NumericSuite(Suite):
    """Word problems with one numeric answer, given ``tao run``'s calculators; the number a
    finished run's answer states - its last one not merely repeated from the question - must
    equal ``answer`` (``tao.evals.is_correct``)."""

    votable = True

    def __init__(self, path: str | Path, name: str | None = None):
        self.path = Path(path)
        self.name = name or str(self.path)

    def tasks(self) -> list[Task]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as e:
            raise ValueError(f"cannot read {self.path}: {e.strerror or e}") from None
        tasks, seen = [], set()
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{self.path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(item, dict) or "question" not in item or "answer" not in item:
                raise ValueError(f'{self.path}:{n}: a line needs "question" and "answer"')
            try:
                float(str(item["answer"]).replace(",", ""))
            except ValueError:
                raise ValueError(f"{self.path}:{n}: answer {item['answer']!r} is not a number") from None
            task_id = str(item.get("id", f"line-{n}"))
            if task_id in seen:
                raise ValueError(f"{self.path}:{n}: id {task_id!r} appears twice")
            seen.add(task_id)
            tasks.append(Task(task_id, str(item["question"]),
                              {"answer": str(item["answer"]).replace(",", "")}))
        if not tasks:
            raise ValueError(f"{self.path} holds no tasks")
        return tasks

    def tools(self, task: Task, calls: list[dict[str, Any]]) -> list[Any]:
        from ..tools.calculator import calculate, calculator

        return [calculate, calculator]

    def score(self, task: Task, outcome: Outcome) -> Score:
        expected = task.data["answer"]
        result = outcome.result
        if not result.ok:
            return Score(False, expected, result.error or f"no answer ({result.status})")
        ok = is_correct(result.answer, expected, question=task.prompt)
        return Score(ok, expected, None if ok else "wrong number")


SUITES = ("calculator", "bfcl", "humaneval")


def get_suite(spec: str) -> Suite:
    """The suite ``spec`` names (see the module docstring); ``ValueError`` saying what exists."""
    name, _, arg = spec.partition(":")
    if name == "calculator" and not arg:
        return NumericSuite(DATA / "calculator.jsonl", "calculator")
    if name == "bfcl":
        from .bfcl import BfclSuite

        return BfclSuite(arg.split(",") if arg else None)
    if name == "humaneval" and not arg:
        from .humaneval import HumanEvalSuite

        return HumanEvalSuite()
    path = Path(spec)
    if path.suffix == ".jsonl" or path.exists():
        if not path.is_file():
            raise ValueError(f"no such file: {spec}")
        return NumericSuite(path.resolve())
    raise ValueError(f"unknown suite {spec!r}; use one of {', '.join(SUITES)}, or a .jsonl file "
                     'with "question" and "answer" on each line')
