"""``tao eval``: agents measured on benchmarks others use - BFCL, HumanEval - and on word problems.

    tao eval bfcl --agent react --limit 200      # BFCL v4 non-live AST, scored by BFCL's checker
    tao eval humaneval --agent codeact           # the model's code and the tests run in tao.sandbox
    tao eval tasks.jsonl --agent react,codeact   # any {"question", "answer"} JSONL (GSM8K, one's own)

The suites (``suites``, ``bfcl``, ``humaneval``), the runner (``runner``: one process, worker
processes or Ray actors; resumable), the report (``report``) and the command (``cli``) are
submodules, imported when used: ``import tao.evals`` stays as cheap as the numeric scoring below,
which benchmarks and tests import directly.

Numeric answers (calculator tasks, GSM8K) are scored by the last number in the reply.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..answers import stated_number


def is_correct(answer: str | None, expected: str | float, tol: float = 1e-6,
               question: str | None = None) -> bool:
    """Whether the number ``answer`` states (``tao.answers.stated_number``: its last number not
    merely repeated from ``question``) is ``expected``."""
    got = stated_number(answer, question)
    return got is not None and abs(got - float(expected)) <= tol * max(1.0, abs(float(expected)))


def load_tasks(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
