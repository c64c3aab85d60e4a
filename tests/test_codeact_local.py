"""CodeAct on the real embedded model (Qwen2.5-Coder-0.5B) and a real sandbox, on the six seed
questions. Slow: run alone, under the shared lock, with
``flock /tmp/tao-model.lock python -m pytest -m local_model tests/test_codeact_local.py``."""

from __future__ import annotations

import pytest

from tao import calculate, calculator
from tao.agents.codeact import CodeActAgent
from tao.evals import is_correct
from tao.events import CodeExecution, ExecutionFinished, TokenDelta


@pytest.mark.local_model
def test_codeact_local_model_on_the_six_seed_questions(local_model, seed_questions):
    solved, report = 0, []
    for task in seed_questions:
        task_id = task["id"]
        events = []
        agent = CodeActAgent(local_model, [calculate, calculator], max_turns=5)
        result = agent.run(task["question"], sinks=[events.append])
        assert result.status in ("done", "max_turns"), (task_id, result)
        assert sum(isinstance(e, TokenDelta) for e in events) > result.turns  # it streamed
        codes = [e for e in events if isinstance(e, CodeExecution)]
        runs = [e for e in events if isinstance(e, ExecutionFinished)]
        # the grammar makes every reply a code block, and every block ran in the sandbox
        assert codes and len(codes) == len(runs) == result.tool_calls, (task_id, events)
        ok = is_correct(result.answer, task["answer"])
        solved += ok
        report.append((task_id, ok, result.turns, result.tool_calls, result.answer))
    # Measured with the code-only grammar and final_answer() (2026-11-30): 5/6 seed questions
    # (seed-2-en stops after the division), 11/16 on the whole set; the 1.5B model 15/16.
    # Accuracy is the benchmark's business; this floor shows the loop works on a real model.
    assert solved >= 4, report
