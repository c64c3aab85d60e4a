"""``tao eval --concurrency N``: N tasks at once on one event loop, each with its own agent, the
same scores as one at a time; an interrupted concurrent run resumes; the embedded model (one
llama.cpp context in this process) runs its tasks one after another whatever N says."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from eval_scripts import ANSWERS, question

from tao.evals.runner import Evaluation
from tao.messages import Message, ToolCall, Usage
from tao.models.base import Model, ModelResponse
from tao.models.local import LocalModel

AGENTS = ["react", "react-text"]
_ids = itertools.count(1)


def expected(q: str) -> float:
    """As ``eval_scripts.right_on_even_length``: right when the question has an even length."""
    return float(ANSWERS[q]) + (0 if len(q) % 2 == 0 else 1)


class Sleepy(Model):
    """An endpoint stand-in: each call waits ``delay`` s on the event loop, as a network call
    does, and counts the calls in flight. With tools (ReAct's native protocol) it first asks
    ``calculate`` for the number, then answers what the observation said, so an agent that saw
    another task's history would answer wrong; without (the text protocol) it answers at once.
    ``log`` names a file where each call appends "pid calls-in-flight" (workers, Ray actors);
    with ``processes`` a call waits (up to 30 s) until that many processes have written there,
    so that one worker cannot finish every task before the other has started."""

    name = "sleepy"

    def __init__(self, delay: float = 0.02, log: str | None = None, interrupt_at: int = 0,
                 how: str = "raise", processes: int = 0):
        self.delay, self.log, self.interrupt_at, self.how = delay, log, interrupt_at, how
        self.processes = processes
        self.in_flight = self.max_in_flight = 0
        self.histories: list[list[Message]] = []

    async def stream(self, messages, *, tools=None, **kwargs):
        self.histories.append(list(messages))
        if len(self.histories) == self.interrupt_at:  # a Ctrl-C while others are in flight
            if self.how == "signal":
                signal.raise_signal(signal.SIGINT)
            else:
                raise KeyboardInterrupt
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.log:
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()} {self.in_flight}\n")
        try:
            await asyncio.sleep(self.delay)
            for _ in range(3000 if self.processes else 0):
                if len(in_flight_by_process(self.log)) >= self.processes:
                    break
                await asyncio.sleep(0.01)
        finally:
            self.in_flight -= 1
        answer = expected(question(messages))
        seen = [m.content for m in messages if m.role == "tool"]
        if tools and not seen:
            message = Message.assistant("", [ToolCall(f"c{next(_ids)}", "calculate",
                                                      {"expression": f"{answer:g} * 1"})])
        else:
            message = Message.assistant(f"Final Answer: {seen[-1] if seen else f'{answer:g}'}")
        if message.content:
            yield message.content
        yield ModelResponse(message, Usage(10, 5), "tool_calls" if message.tool_calls else "stop")


def sleepy(log: str) -> Sleepy:
    """A picklable factory for two worker processes or Ray actors."""
    return Sleepy(log=log, processes=2)


class SleepyLocal(LocalModel):
    """The embedded model's class (what the runner recognises) with ``Sleepy``'s answers. No
    ``render``: short-term memory would count its prompts with the (absent) GGUF's tokenizer."""

    render = None

    def __init__(self, path):
        super().__init__(path=path)
        self.stand_in = Sleepy()

    def stream(self, messages, **kwargs):
        return self.stand_in.stream(messages, **kwargs)


def scores(records):
    return sorted((r["agent"], r["task_id"], r["correct"], r["turns"], r["answer"]) for r in records)


@pytest.fixture(scope="module")
def one_at_a_time():
    model = Sleepy()
    records = list(Evaluation("calculator", AGENTS, model, limit=8).run())
    assert model.max_in_flight == 1 and len(records) == 16
    assert 0 < sum(r["correct"] for r in records) < 16
    return scores(records)


def test_n_tasks_run_at_once_each_with_its_own_agent_and_score_as_one_at_a_time(one_at_a_time):
    model = Sleepy()
    ev = Evaluation("calculator", AGENTS, model, limit=8, concurrency=5)
    assert scores(ev.run()) == one_at_a_time
    assert model.max_in_flight == 5
    assert len(model.histories) == 8 * 2 + 8  # ReAct: calculate, then the answer
    for history in model.histories:  # no task saw another's messages
        assert [m.role for m in history if m.role in ("user", "tool")] in (["user"], ["user", "tool"])


def test_more_slots_than_tasks_runs_them_all_at_once(one_at_a_time):
    model = Sleepy()
    assert scores(Evaluation("calculator", AGENTS, model, limit=8, concurrency=100).run()) == one_at_a_time
    assert model.max_in_flight == 16


@pytest.mark.parametrize("how", ["raise", "signal"])
def test_an_interrupted_concurrent_run_keeps_what_finished_and_resumes(tmp_path, one_at_a_time, how):
    out = tmp_path / "run"
    stored = []
    with pytest.raises(KeyboardInterrupt):
        for record in Evaluation("calculator", AGENTS, Sleepy(interrupt_at=12, how=how), limit=8,
                                 out=out, concurrency=4, label="sleepy").run():
            stored.append((record["agent"], record["task_id"]))
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text("utf-8").splitlines()]
    assert [(r["agent"], r["task_id"]) for r in lines] == stored  # each line as its task finished
    assert 0 < len(stored) < 16 and len(set(stored)) == len(stored)

    model = Sleepy()
    again = Evaluation("calculator", AGENTS, model, limit=8, out=out, concurrency=4, label="sleepy")
    assert sorted(again.pending()) == sorted(set(again.pending()))
    assert not set(again.pending()) & set(stored)  # finished tasks are not redone
    assert len(list(again.run())) == 16 - len(stored)
    assert scores(again.records()) == one_at_a_time
    assert len((out / "results.jsonl").read_text("utf-8").splitlines()) == 16


def test_the_embedded_model_runs_its_tasks_one_at_a_time_whatever_the_concurrency(
        tmp_path, one_at_a_time):
    gguf = tmp_path / "stand-in.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: SleepyLocal answers instead
    model = SleepyLocal(gguf)
    assert scores(Evaluation("calculator", AGENTS, model, limit=8, concurrency=8).run()) == one_at_a_time
    assert model.stand_in.max_in_flight == 1

    class NotReentrant(Sleepy):
        concurrent = False  # any model can say so

    other = NotReentrant()
    assert scores(Evaluation("calculator", AGENTS, other, limit=8, concurrency=8).run()) == one_at_a_time
    assert other.max_in_flight == 1


async def test_inside_a_running_event_loop_the_run_goes_on_a_thread(one_at_a_time):
    model = Sleepy()  # as in Jupyter, where a loop already runs
    assert scores(Evaluation("calculator", AGENTS, model, limit=8, concurrency=4).run()) == one_at_a_time
    assert model.max_in_flight == 4


def in_flight_by_process(log) -> Counter:
    """The most calls each process had in flight at once, from a ``Sleepy`` log."""
    peaks: Counter = Counter()
    for line in Path(log).read_text("utf-8").splitlines():
        pid, n = map(int, line.split())
        peaks[pid] = max(peaks[pid], n)
    return peaks


def test_workers_times_concurrency_tasks_in_flight(tmp_path, one_at_a_time):
    log = tmp_path / "calls.log"
    ev = Evaluation("calculator", AGENTS, functools.partial(sleepy, str(log)), limit=8, workers=2,
                    concurrency=3)
    assert scores(ev.run()) == one_at_a_time
    peaks = in_flight_by_process(log)
    assert len(peaks) == 2 and os.getpid() not in peaks
    assert max(peaks.values()) == 3  # each process keeps its 3 slots busy (16 tasks, 2 x 3 slots)


def test_ray_actors_run_concurrency_tasks_each(tmp_path, one_at_a_time):
    ray = pytest.importorskip("ray")
    import eval_scripts
    import test_eval_concurrency

    for module in (eval_scripts, test_eval_concurrency):  # Ray workers do not see tests/
        ray.cloudpickle.register_pickle_by_value(module)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             _node_ip_address="127.0.0.1", object_store_memory=80 * 1024 * 1024)
    try:
        log = tmp_path / "calls.log"
        ev = Evaluation("calculator", AGENTS, functools.partial(sleepy, str(log)), limit=8,
                        workers=2, concurrency=3, executor="ray")
        assert scores(ev.run()) == one_at_a_time
        peaks = in_flight_by_process(log)
        assert len(peaks) == 2 and max(peaks.values()) == 3
    finally:
        ray.shutdown()


def test_concurrency_must_be_at_least_one():
    with pytest.raises(ValueError, match="--concurrency"):
        Evaluation("calculator", AGENTS, Sleepy(), concurrency=0)


def test_a_ctrl_c_hands_on_the_records_that_finished_in_the_same_instant():
    from tao.evals.pool import run_window

    async def task(agent, task_id):  # three finish at once; the fourth is the Ctrl-C
        if task_id == "t4":
            raise KeyboardInterrupt
        return {"agent": agent, "task_id": task_id}

    got = []
    with pytest.raises(KeyboardInterrupt):
        for record in run_window(task, [("react", f"t{i}") for i in range(1, 7)], 4):
            got.append(record["task_id"])
    assert got == ["t1", "t2", "t3"]  # t5 and t6 never started
