"""The audit log's fsync thread: an event loop must not wait milliseconds for an fsync, so the
lines written on one (and ``fsync="batch"`` lines) are fsync'd here, by one thread per file in a
process, one fsync for every line written before it. Apart from ``AuditLog`` because this is
threads, conditions and process hooks (``atexit``, fork), not the chain; the log reaches it
through ``_syncer``.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .audit_file import _fsync_dir, _open

if TYPE_CHECKING:
    from .audit import AuditLog

#: ``fsync=`` as the log reads it: never, by its syncer in batches, each line
_NONE, _BATCH, _RECORD = 0, 1, 2
_MODES = {False: _NONE, None: _NONE, "batch": _BATCH, True: _RECORD, "record": _RECORD}
#: seconds a syncer's thread waits for more lines before it ends (the next one starts it again)
_IDLE_S = 5.0
#: seconds a ``"batch"`` syncer lets lines gather before one fsync covers them
_BATCH_S = 0.002


def _running_loop() -> Any:
    asyncio = sys.modules.get("asyncio")  # no asyncio imported: no loop can be running
    return asyncio.events._get_running_loop() if asyncio is not None else None


class _Hold:
    """An event loop's claim on a syncer: its task waits until ``target`` lines are fsync'd,
    and blocks the loop's shutdown (``asyncio.run``'s end cancels it) until they are."""

    __slots__ = ("target", "task")

    def __init__(self, target: int):
        self.target, self.task = target, None


class _Syncer:
    """The one thread of this process that fsyncs a file's lines written on event loops (and
    by ``"batch"`` logs): an fsync covers every line written before it, so lines written while
    one runs share the next. ``queued``/``synced`` count the lines asked for and done (fsync'd
    or failed); a ticket is the count at a line's ``put``."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()
        self.more = threading.Condition(self.lock)  # the thread waits here for lines
        self.done = threading.Condition(self.lock)  # callers wait here for theirs
        self.queue: list[tuple[AuditLog, bool]] = []  # (its log, the file was new)
        self.queued = self.synced = 0
        self.running = False
        self.urgent = False  # someone waits, or a line wants its own fsync: no gathering
        self.waiters: list[tuple[Any, Any]] = []  # (loop, future) woken after each fsync
        self.holds: dict[Any, _Hold] = {}  # event loop -> its hold

    def put(self, log: AuditLog, first: bool) -> int:
        with self.lock:
            self.queue.append((log, first))
            self.queued += 1
            ticket = self.queued
            if log._mode == _RECORD:
                self.urgent = True
            if not self.running:
                self.running = True
                threading.Thread(target=self._run, name="tao-audit-sync", daemon=True).start()
            elif self.urgent or len(self.queue) == 1:
                self.more.notify()
        return ticket

    def wait(self, ticket: int) -> None:
        """Block until the line of ``ticket`` (and every one before it) is done."""
        with self.lock:
            if self.synced < ticket:
                self.urgent = True
                self.more.notify()
            while self.synced < ticket:
                self.done.wait()

    def drain(self) -> None:
        self.wait(self.queued)

    async def until(self, loop: Any, ticket: int, urgent: bool = True) -> None:
        """Wait on ``loop`` until ``ticket`` is done, without blocking it (``urgent``: and
        have the syncer fsync now rather than let more lines gather)."""
        while self.synced < ticket:
            future = loop.create_future()
            with self.lock:
                if self.synced >= ticket:
                    break
                self.waiters.append((loop, future))
                if urgent and not self.urgent:
                    self.urgent = True
                    self.more.notify()
            await future

    def hold(self, loop: Any, ticket: int) -> None:
        """Keep ``loop`` from ending (``asyncio.run``) before ``ticket`` is fsync'd."""
        held = self.holds.get(loop)
        if held is not None:
            held.target = ticket
            return
        held = self.holds[loop] = _Hold(ticket)
        held.task = loop.create_task(self._held(loop, held))

    async def _held(self, loop: Any, held: _Hold) -> None:
        import asyncio

        try:
            while self.synced < held.target:
                await self.until(loop, held.target, urgent=False)
        except asyncio.CancelledError:  # the loop is closing: its lines' fsync first
            self.wait(held.target)
            raise
        finally:
            if self.holds.get(loop) is held:
                del self.holds[loop]

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.queue:
                    self.more.wait(_IDLE_S)
                if not self.queue:
                    self.running = False
                    return
                if not self.urgent:
                    self.more.wait(_BATCH_S)  # let the lines of the next moments share it
                batch, self.queue, self.urgent = self.queue, [], False
            error: BaseException | None = None
            try:
                with _open(self.path) as fd:  # any descriptor of the file: fsync is per file
                    os.fsync(fd)
                if any(first for _, first in batch):
                    _fsync_dir(Path(self.path).parent)
            except BaseException as e:  # noqa: BLE001 - the thread must go on; the logs learn it
                error = e
            if error is not None:
                failed: dict[AuditLog, int] = {}
                for log, _ in batch:
                    failed[log] = failed.get(log, 0) + 1
                for log, count in failed.items():
                    log._failed(error, count)
            with self.lock:
                self.synced += len(batch)
                self.done.notify_all()
                waiters, self.waiters = self.waiters, []
            for loop, future in waiters:
                try:
                    loop.call_soon_threadsafe(_wake, future)
                except RuntimeError:  # that loop is closed: nobody waits there any more
                    pass


def _wake(future: Any) -> None:
    if not future.done():
        future.set_result(None)


_SYNCERS: dict[str, _Syncer] = {}
_SYNCERS_LOCK = threading.Lock()


def _syncer(path: str) -> _Syncer:
    syncer = _SYNCERS.get(path)
    if syncer is None:
        with _SYNCERS_LOCK:
            syncer = _SYNCERS.setdefault(path, _Syncer(path))
    return syncer


@atexit.register
def _drain_all() -> None:
    """At the interpreter's exit: every line asked to be fsync'd is (failures were logged)."""
    for syncer in list(_SYNCERS.values()):
        syncer.drain()


def _forget_syncers() -> None:
    """In a forked child: the parent's syncers (threads, queues, locks) are not this process's."""
    global _SYNCERS_LOCK
    _SYNCERS.clear()
    _SYNCERS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_syncers)
