"""Plan-and-Execute on the real embedded model (Qwen2.5-Coder-0.5B) on the six seed questions.
Slow: run alone, under the shared lock, with
``flock /tmp/tao-model.lock python -m pytest -m local_model tests/test_plan_local.py``."""

from __future__ import annotations

import pytest

from tao import PlanExecuteAgent, calculate, calculator
from tao.evals import is_correct
from tao.events import PlanCreated, StepFinished, TokenDelta


@pytest.mark.local_model
def test_plan_local_model_on_the_six_seed_questions(local_model, seed_questions):
    solved, report = 0, []
    for task in seed_questions:
        task_id = task["id"]
        events = []
        agent = PlanExecuteAgent(local_model, [calculate, calculator])
        result = agent.run(task["question"], sinks=[events.append])
        # the grammar makes every plan parse: a run ends with an answer or with one of the plan
        # failures (no valid plan, or a step that failed through every re-plan), never with a
        # reply that is not JSON
        assert result.status == "done" or result.error.startswith("no valid plan") \
            or " failed after " in result.error, (task_id, result)
        assert "not valid JSON" not in (result.error or ""), (task_id, result.error)
        assert sum(isinstance(e, TokenDelta) for e in events) > result.turns  # it streamed
        plans = [e for e in events if isinstance(e, PlanCreated)]
        if result.status == "done":
            finished = [e for e in events if isinstance(e, StepFinished)]
            assert plans and finished and result.tool_calls >= len(finished)
        ok = is_correct(result.answer, task["answer"])
        solved += ok
        report.append((task_id, ok, result.turns, result.tool_calls, result.answer, result.error))
    # Measured at 5772dca: 2/6 seed questions (4/16 on the whole set; the 1.5B model 12/16, see
    # BENCHMARKS.md). The 0.5B model plans badly; this floor shows the loop works on a real model.
    assert solved >= 1, report
