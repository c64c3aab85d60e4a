"""Many tasks at once: a window of tasks on one event loop, and worker processes sharing a queue.

``run_window(start, items, width)`` keeps ``width`` coroutines ``start(agent, task_id)`` running
as tasks of one event loop and yields each record as it finishes, starting the next item in its
place - a pending item costs nothing until it runs. It is a plain generator (the caller stores
each record between two steps of the loop, so there is one writer and no lock), driven by an
``asyncio.Runner`` whose SIGINT handling turns the first Ctrl-C into a clean stop.

``process_records`` spawns ``workers`` processes that each take items from one shared queue as
their slots free up and send records back on another; only the calling process writes them.
"""

from __future__ import annotations

from collections import deque
from contextlib import contextmanager
from collections.abc import Awaitable, Callable, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runner import Worker

Record = dict[str, Any]


def run_window(start: Callable[[str, str], Awaitable[Record]], items: Iterable[tuple[str, str]],
               width: int) -> Iterator[Record]:
    """The records of ``items`` as their tasks finish, ``width`` at once. On an error or Ctrl-C
    the records that already finished are yielded first, then it is raised; tasks still running
    are cancelled (``Runner.close``)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # this thread runs an event loop (Jupyter): a second one cannot run in it
        yield from _in_thread(run_window(start, items, width))
        return
    window = _Window(start, items, width)
    with asyncio.Runner() as runner, _gc_frozen():
        try:
            while records := runner.run(window.next()):
                yield from records
        except GeneratorExit:
            raise
        except BaseException:
            _flush(runner.get_loop())
            yield from window.leftover()
            raise


@contextmanager
def _gc_frozen() -> Iterator[None]:
    """What exists when the run starts (modules, the model, the suite) is left out of the cyclic
    garbage collector's passes until it ends (``gc.freeze``): a full pass over it stopped every
    task in flight for 40-200 ms on a loaded 2-core machine, once or twice in 1,000 tasks."""
    import gc

    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _flush(loop: Any) -> None:
    """Run the callbacks that a ``KeyboardInterrupt`` cut off in the middle of a loop iteration.
    One of them may be the finished ``run_until_complete``'s ``loop.stop()``, which would stop
    the loop again under ``Runner.close`` ("Event loop stopped before Future completed"); the
    others hand on tasks that finished in that instant."""
    loop.stop()  # stop() before run_forever(): one iteration of what is ready, then return
    loop.run_forever()


class _Window:
    """``next()`` starts items into the free slots, then returns the records finished by then,
    at least one (none when every item is done); a task's error is raised there. Several at a
    time, because each ``Runner.run`` costs about 60 us (it sets the SIGINT handler again): at
    100 tasks in flight one run per record was a tenth of the loop's CPU."""

    def __init__(self, start: Callable[[str, str], Awaitable[Record]],
                 items: Iterable[tuple[str, str]], width: int):
        self.start, self.items, self.width = start, iter(items), width
        self.running: set[Any] = set()
        self.finished: deque[Any] = deque()
        self.wake: Any = None  # an asyncio.Event, made on the loop that uses it

    def _done(self, task: Any) -> None:
        self.running.discard(task)
        self.finished.append(task)
        self.wake.set()

    async def next(self) -> list[Record]:
        import asyncio

        if self.wake is None:
            self.wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        for item in islice(self.items, max(0, self.width - len(self.running))):
            task = loop.create_task(self.start(*item))
            task.add_done_callback(self._done)
            self.running.add(task)
        while not self.finished:
            if not self.running:
                return []
            self.wake.clear()
            await self.wake.wait()
        records: list[Record] = []
        while self.finished:
            task = self.finished[0]
            if records and (task.cancelled() or task.exception() is not None):
                break  # what finished before it is handed on first; its error on the next call
            records.append(self.finished.popleft().result())
        return records

    def leftover(self) -> Iterator[Record]:
        """Records of tasks that finished but were not handed on: the run is stopping. A task
        can be done with its callback not yet run when the loop stopped, so both are looked at."""
        for task in [*self.finished, *(t for t in self.running if t.done())]:
            if not task.cancelled() and task.exception() is None:
                yield task.result()
        self.finished.clear()


def _in_thread(records: Iterator[Record]) -> Iterator[Record]:
    """``records`` driven on a thread of its own and handed over one by one; when the consumer
    stops, the thread closes ``records`` at its next record (its running tasks are cancelled)."""
    import queue
    import threading

    handoff: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue()
    stop = threading.Event()

    def drive() -> None:
        try:
            for record in records:
                handoff.put((record, None))
                if stop.is_set():
                    break
            records.close()
        except BaseException as e:  # noqa: BLE001 - re-raised in the consumer's thread
            handoff.put((None, e))
            return
        handoff.put((None, None))

    threading.Thread(target=drive, name="tao-eval", daemon=True).start()
    try:
        while True:
            record, error = handoff.get()
            if error is not None:
                raise error
            if record is None:
                return
            yield record
    finally:
        stop.set()


# -- worker processes -----------------------------------------------------------------------
_worker: Worker | None = None  # in a worker process: its one Worker and the shared queues
_queues: tuple[Any, Any, Any] | None = None


def _init_process(suite: str, model: Any, max_turns: int, votes: int, team: Any, todo: Any,
                  done: Any, stop: Any) -> None:
    global _worker, _queues
    from .runner import Worker

    _queues = (todo, done, stop)
    _worker = Worker(suite, model, max_turns, votes, team)


def _serve(concurrency: int) -> None:
    """A worker process's share: the next pending item from the shared queue whenever one of
    its ``concurrency`` slots frees up (a faster worker takes more), each record sent back as
    soon as it finishes."""
    assert _worker is not None and _queues is not None
    todo, done, stop = _queues

    def items() -> Iterator[tuple[str, str]]:
        while not stop.is_set() and (item := todo.get()) is not None:
            yield item

    try:
        for record in _worker.run_many(items(), concurrency):
            done.put(record)
    finally:
        if stop.is_set():  # the run stopped: nobody reads what is left; do not wait on it at exit
            done.cancel_join_thread()


def process_records(init: tuple[Any, ...], pending: list[tuple[str, str]], workers: int,
                    concurrency: int) -> Iterator[Record]:
    """The records of ``pending`` from ``workers`` spawned processes, in the order they finish."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from .runner import EvalAborted

    ctx = multiprocessing.get_context("spawn")
    todo, done, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    for item in [*pending, *[None] * workers]:  # one None a worker: no more items
        todo.put(item)
    todo.cancel_join_thread()  # items left when the run stops are dropped, not waited on at exit
    pool = ProcessPoolExecutor(workers, ctx, initializer=_init_process,
                               initargs=(*init, todo, done, stop))
    try:
        shares = [pool.submit(_serve, concurrency) for _ in range(workers)]
        for _ in pending:
            yield _next_record(done, shares)
    except BrokenProcessPool as e:  # its traceback went to stderr from the worker
        raise EvalAborted(f"a worker process could not start or died ({e})") from None
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


def _next_record(done: Any, shares: list[Any], patience_s: float = 30.0) -> Record:
    """The next record a worker process sent back; a worker's error (or death) is raised here."""
    import queue

    from .runner import EvalAborted

    waited = 0.0
    while True:
        try:
            return done.get(timeout=0.2)
        except queue.Empty:
            for share in shares:
                if share.done():
                    share.result()  # raises what the worker raised
            waited = waited + 0.2 if all(s.done() for s in shares) else 0.0
            if waited > patience_s:  # every worker ended cleanly, so this cannot happen
                raise EvalAborted("the worker processes finished but a record never came back")
