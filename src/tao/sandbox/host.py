"""``WorkerSandbox``: the host side all backends share - one persistent worker, spoken to by pipes.

A backend only says how the worker process is launched (``_launch``) and what the worker must do
to itself before running user code (``_init_config``: drop the uid, rlimits, seccomp). Everything
else lives here: the framing, the tool bridge, capped output, the wall clock, and recovery - when
the worker is killed (timeout, output flood) or dies (memory, CPU, a crash), the next ``execute``
starts a fresh one and says so with ``restarted=True``. The sandbox as a whole is held by a
cgroup (``cgroups.py``: memory and process caps, counters of what hit them) and its workspace is a
size-capped tmpfs (``workspace.py``) where the machine allows; ``describe()`` says what is in force.

The I/O uses ``loop.add_reader`` on raw non-blocking fds, registered only while a conversation is
running, so a sandbox is not tied to the event loop that created it (``asyncio.run`` twice works).
"""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
import sysconfig
import time
import weakref
from pathlib import Path
from typing import Any

from ._io import OutputBuffer, ProtocolError, drain, frame
from ._process import (
    BOOT,
    START_TIMEOUT_S,
    WORKER_SOURCE,
    _describe_exit,
    _release,
    _Worker,
    _worker_code,
    build_result,
    cell_frame,
)
from .base import ExecutionResult, Limits, SandboxError, ToolCallRecord
from .bridge import ToolBridge, ToolCallError
from .confinement import NPROC_SLACK, Confinement
from .privileges import sandbox_uid

__all__ = ["WORKER_SOURCE", "WorkerSandbox", "_Worker", "frame"]
_EOF, _OVERFLOW = object(), object()


class WorkerSandbox:
    """Base of the process-based backends. Construct it, ``await execute(code)``, ``await close()``
    (or ``async with``). ``workspace``: a host folder mounted writable (default: a fresh one,
    size-capped where tao may mount a tmpfs, deleted on close)."""

    kind = "worker"
    #: How much of the host the code sees, for ``describe()`` (the subprocess backend sees it all).
    exposure = ""
    #: Whether tao holds the sandbox in a cgroup of its own (Docker's daemon makes its own).
    uses_cgroup = True

    def __init__(self, *, tools: Any = None, limits: Limits | None = None,
                 workspace: str | os.PathLike[str] | None = None):
        self.limits = limits or Limits()
        self._bridge = ToolBridge(tools)
        self._tools_dirty = False
        self.uid = sandbox_uid()
        self._confinement = Confinement(workspace, self.limits, self.uid, self.uses_cgroup)
        self.workspace: Path = self._confinement.workspace.path
        #: The sandbox's own cgroup (``None``: none, ``describe()`` says why).
        self.cgroup = self._confinement.cgroup
        #: The workspace's size cap in force (``None``: not capped, ``describe()`` says why).
        self.workspace_bytes = self._confinement.workspace.capacity
        self._holder: list[_Worker | None] = [None]
        self._finalizer = weakref.finalize(self, _release, self._holder, self._confinement)
        self._lost = False
        self._cell = 0
        self._busy = False
        self._closed = False

    # -- public ---------------------------------------------------------------------------
    @property
    def tool_names(self) -> list[str]:
        return self._bridge.names

    def describe(self) -> str:
        """The backend and the confinement actually in force, in one line, e.g.
        ``bwrap · cgroup v1: memory 1 GiB, 64 processes for the whole sandbox · workspace tmpfs
        512 MiB``; a limit that could not be had is named with why."""
        head = self.kind + (f" ({self.exposure})" if self.exposure else "")
        return " · ".join([head, *self._confinement.describe()])

    def set_tools(self, tools: Any) -> None:
        """Replace the host tools the sandboxed code can call (takes effect at the next execute)."""
        self._bridge = ToolBridge(tools)
        self._tools_dirty = True

    async def start(self) -> None:
        """Start the worker now and wait until it is ready (``execute`` does this by itself; call
        it to take the start-up cost before the first execution)."""
        self._check_open()
        if self._busy:
            raise RuntimeError("this sandbox is already executing code (one execute at a time)")
        self._busy = True
        try:
            if self._holder[0] is None:
                self._spawn()
            worker = self._holder[0]
            assert worker is not None
            if not worker.ready:
                payload, worker.pending = worker.pending, b""
                outcome, *_ = await self._converse(worker, payload, "ready", START_TIMEOUT_S)
                if outcome != "ready":
                    raise SandboxError(f"the {self.kind} sandbox did not become ready ({outcome})")
        finally:
            self._busy = False

    async def execute(self, code: str, timeout: float | None = None) -> ExecutionResult:
        """Run ``code`` in the persistent worker; never raises for what the code does."""
        self._check_open()
        if self._busy:
            raise RuntimeError("this sandbox is already executing code (one execute at a time)")
        self._busy = True
        started = time.perf_counter()
        try:
            restarted, self._lost = self._lost, False
            if self._holder[0] is None:
                self._spawn()
            worker = self._holder[0]
            assert worker is not None
            self._cell += 1
            payload = worker.pending
            worker.pending = b""
            if self._tools_dirty:
                payload += frame({"op": "tools", "tools": self._bridge.specs()})
                self._tools_dirty = False
            payload += cell_frame(code, self._cell, self._precompiled())
            timeout = self.limits.timeout_s if timeout is None else timeout
            outcome, done, out, err, calls = await self._converse(worker, payload, "done", timeout)
            verdict = self._confinement.judge(outcome, done.get("error"), err.text(),
                                              self._tmpfs_bytes())
            return build_result(outcome, done, out, err, calls, timeout, restarted,
                                time.perf_counter() - started, self.limits.kill_output_bytes,
                                verdict)
        finally:
            self._busy = False

    async def close(self) -> None:
        """Kill the worker and everything it started; delete the workspace if tao made it."""
        self._closed = True
        self._finalizer()

    async def __aenter__(self) -> WorkerSandbox:
        self._check_open()
        if self._holder[0] is None:
            self._spawn()  # boots in the background; the first execute finds it (nearly) ready
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- backend hooks --------------------------------------------------------------------
    def python(self) -> str:
        """The interpreter that runs the worker."""
        return sys.executable

    def _launch(self, worker_argv: list[str], pass_fds: tuple[int, ...], stdout: int,
                stderr: int) -> subprocess.Popen[bytes]:
        """Start ``worker_argv`` (``python -I -S -c ... IN OUT``) confined, with ``pass_fds``."""
        raise NotImplementedError

    def _precompiled(self) -> bool:
        """Whether the worker runs this very interpreter, so it can take marshalled code."""
        return os.path.realpath(self.python()) == os.path.realpath(sys.executable)

    def _init_config(self) -> dict[str, Any]:
        """What the worker does to itself before user code: backends add uid, seccomp, ..."""
        return {"rlimits": self._rlimits(), "tools": self._bridge.specs(),
                "sys_path": self._site_paths()}

    def _rlimits(self, other_tasks: int = 0) -> dict[str, tuple[int, int]]:
        # with a cgroup, pids.max must bite before RLIMIT_NPROC: only the cgroup counts refusals
        return self.limits.rlimits(other_tasks, nproc_slack=NPROC_SLACK if self.cgroup else 0,
                                   whole_cap=self.cgroup is not None)

    def _tmpfs_bytes(self) -> int | None:
        """The size of the sandbox's private /tmp and /dev/shm, where it has its own."""
        return None

    def _site_paths(self) -> list[str]:
        """The host interpreter's site-packages (read-only), when the sandbox runs that one."""
        if os.path.realpath(self.python()) != os.path.realpath(sys.executable):
            return []
        paths = sysconfig.get_paths()
        return list(dict.fromkeys(p for p in (paths["purelib"], paths["platlib"]) if p))

    def _new_worker(self, proc: subprocess.Popen[bytes], fds: tuple[int, int, int, int]) -> _Worker:
        return _Worker(proc, *fds)

    # -- internals ------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")

    def _spawn(self) -> None:
        try:
            # the worker joins the cgroup through these before it reads any user code
            joins = tuple(self.cgroup.open_procs()) if self.cgroup is not None else ()
        except OSError as e:
            raise SandboxError(f"cannot open the {self.kind} sandbox's cgroup: {e}") from e
        ctl_in_r, ctl_in_w = os.pipe2(os.O_CLOEXEC)
        ctl_out_r, ctl_out_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        child = (ctl_in_r, ctl_out_w, out_w, err_w, *joins)
        fast = self._precompiled()
        argv = [self.python(), "-I", "-S", "-c", BOOT if fast else WORKER_SOURCE, str(ctl_in_r),
                str(ctl_out_w)]
        try:
            proc = self._launch(argv, (ctl_in_r, ctl_out_w, *joins), out_w, err_w)
        except OSError as e:
            for fd in child + (ctl_in_w, ctl_out_r, out_r, err_r):
                os.close(fd)
            raise SandboxError(f"cannot start the {self.kind} sandbox: {e}") from e
        for fd in child:
            os.close(fd)
        for fd in (ctl_in_w, ctl_out_r, out_r, err_r):
            os.set_blocking(fd, False)
        worker = self._new_worker(proc, (ctl_in_w, ctl_out_r, out_r, err_r))
        if self.cgroup is not None:
            worker.extra_kill = self.cgroup.kill_all
        init = {"op": "init", **self._init_config(), "cgroup_fds": list(joins)}
        self._install(worker, (_worker_code() if fast else b"") + frame(init))

    def _install(self, worker: _Worker, pending: bytes) -> None:
        """Make ``worker`` current and hand it what it needs to boot right away (as much as the
        pipe takes now; the rest goes with the next conversation)."""
        try:
            pending = pending[os.write(worker.ctl_w, pending):]
        except (BlockingIOError, BrokenPipeError):
            pass
        worker.pending = pending
        self._holder[0] = worker

    async def _converse(self, worker: _Worker, payload: bytes, until: str, timeout: float
                        ) -> tuple[str, dict[str, Any], OutputBuffer, OutputBuffer,
                                   list[ToolCallRecord]]:
        """Send ``payload`` and serve the worker (tool calls) until it answers ``until``, dies,
        floods its output or runs out of time. Output is read all along so the worker never
        blocks on a full pipe."""
        loop = asyncio.get_running_loop()
        cap, kill_at = self.limits.max_output_bytes, self.limits.kill_output_bytes
        out, err = OutputBuffer(cap), OutputBuffer(cap)
        events: collections.deque[Any] = collections.deque()
        waiter: list[asyncio.Future[None] | None] = [None]
        calls: list[ToolCallRecord] = []

        def wake() -> None:
            if waiter[0] is not None and not waiter[0].done():
                waiter[0].set_result(None)

        def on_ctl() -> None:
            try:
                data = os.read(worker.ctl_r, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(worker.ctl_r)
                events.append(_EOF)
            else:
                try:
                    events.extend(worker.frames.feed(data))
                except ProtocolError as e:
                    loop.remove_reader(worker.ctl_r)
                    events.append(e)
            wake()

        def on_output(fd: int, buf: OutputBuffer) -> None:
            if not drain(fd, buf, kill_at):
                loop.remove_reader(fd)
            if buf.total > kill_at:
                loop.remove_reader(fd)
                events.append(_OVERFLOW)
                wake()

        loop.add_reader(worker.ctl_r, on_ctl)
        loop.add_reader(worker.out_r, on_output, worker.out_r, out)
        loop.add_reader(worker.err_r, on_output, worker.err_r, err)
        outcome, answer = "", {}
        try:
            # The clock of the code starts when the worker is ready; starting has its own.
            async with asyncio.timeout(timeout if worker.ready else START_TIMEOUT_S) as deadline:
                if payload:
                    await self._write(worker, payload)
                while not outcome:
                    while not events:
                        waiter[0] = loop.create_future()
                        check = loop.call_later(0.5, wake)  # a death without EOF (docker)
                        try:
                            await waiter[0]
                        finally:
                            check.cancel()
                        if not events and worker.proc.poll() is not None:
                            events.append(_EOF)
                    ev = events.popleft()
                    if ev is _EOF or ev is _OVERFLOW or isinstance(ev, ProtocolError):
                        outcome = ("died" if ev is _EOF else "overflow" if ev is _OVERFLOW
                                   else f"protocol error: {ev}")
                    elif ev.get("op") == "ready":
                        if ev.get("error"):
                            outcome = f"start error: {ev['error']}"
                        elif self.cgroup is not None and not self.cgroup.members():
                            outcome = "start error: the worker is not in the sandbox's cgroup"
                        else:
                            worker.ready, worker.info = True, ev
                            outcome = "ready" if until == "ready" else ""
                            deadline.reschedule(loop.time() + timeout)
                    elif ev.get("op") == "call":  # the code waits on the host: its clock stops
                        left = (deadline.when() or loop.time()) - loop.time()
                        deadline.reschedule(None)
                        ran = await self._serve_call(worker, ev, calls)
                        deadline.reschedule(loop.time() + left - ran)  # the tool's run counts
                    elif ev.get("op") == "done":
                        outcome, answer = "done", ev
        except TimeoutError:
            if not deadline.expired():
                raise
            outcome = "timeout"
        except BrokenPipeError:
            outcome = "died"
        except BaseException:  # cancelled mid-conversation: the worker's state is unknown
            self._holder[0] = None
            worker.kill()
            self._lost = True
            raise
        finally:
            for fd in (worker.ctl_r, worker.out_r, worker.err_r):
                loop.remove_reader(fd)
        if outcome in ("done", "ready"):
            drain(worker.out_r, out, kill_at)
            drain(worker.err_r, err, kill_at)
            return outcome, answer, out, err, calls
        if outcome == "died":  # let it finish dying to learn why
            try:
                worker.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            outcome = "died:" + _describe_exit(worker.proc.returncode, self.cgroup is not None)
        self._holder[0] = None
        worker.terminate()
        drain(worker.out_r, out, kill_at)
        drain(worker.err_r, err, kill_at)
        worker.close_fds()
        if not worker.ready:  # it never started: that is a setup problem, not an observation
            detail = (err.text() + out.text()).strip() or outcome
            raise SandboxError(f"the {self.kind} sandbox failed to start: {detail}")
        self._lost = True
        if not self._closed:
            try:
                self._spawn()  # the replacement boots while the caller reads this result
            except SandboxError:
                pass  # the next execute tries again and says why
        return outcome, answer, out, err, calls

    async def _write(self, worker: _Worker, data: bytes) -> None:
        view = memoryview(data)
        loop = asyncio.get_running_loop()
        while view:
            try:
                view = view[os.write(worker.ctl_w, view):]
            except BlockingIOError:
                fut = loop.create_future()
                loop.add_writer(worker.ctl_w, _set_done, fut)
                try:
                    await fut
                finally:
                    loop.remove_writer(worker.ctl_w)

    async def _serve_call(self, worker: _Worker, msg: dict[str, Any],
                          calls: list[ToolCallRecord]) -> float:
        """Serve one tool call of the code; the seconds the tool itself ran come back, for the
        code's clock: what the call waited at the tool door - a person deciding an approval -
        is not the code's time."""
        started = time.perf_counter()
        name, args, kwargs = msg.get("name"), msg.get("args"), msg.get("kwargs")
        reply: dict[str, Any]
        try:
            if not (isinstance(name, str) and isinstance(args, list) and isinstance(kwargs, dict)):
                raise ToolCallError("malformed tool call")
            reply = {"op": "result", "value": await self._bridge.call(name, args, kwargs)}
        except ToolCallError as e:
            reply = {"op": "result", "error": str(e) or "tool failed"}
        except Exception as e:  # noqa: BLE001 - a bridge failure is still the code's observation
            reply = {"op": "result", "error": f"{type(e).__name__}: {e}"}
        elapsed = time.perf_counter() - started
        calls.append(ToolCallRecord(str(name), tuple(args or ()), dict(kwargs or {}),
                                    reply.get("error"), elapsed))
        await self._write(worker, frame(reply))
        ran = getattr(self._bridge, "ran_s", None)
        return elapsed if ran is None else min(ran, elapsed)


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
