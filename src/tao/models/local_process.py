"""The caller's side of the embedded model's worker process (``local_worker``).

One worker per GGUF file, context size and thread count in this process, shared by every
``LocalModel`` of that file, as the weights were when they loaded in-process. It is started on
the first call. A worker that dies during a call ends that call with ``ModelCrashed``, which
names the signal; the next call starts a new one. One found dead between calls is replaced
before the call is sent, since nothing of it was lost. Requests go one at a time (llama.cpp's
context takes one), in the order they come.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import LocalModelError, ModelCrashed

log = logging.getLogger(__name__)
_WORKERS: dict[tuple[str, int, int], ModelProcess] = {}
_WORKERS_LOCK = threading.Lock()
_RAISED = {"LocalModelError": LocalModelError, "ValueError": ValueError,
           "RuntimeError": RuntimeError, "MemoryError": MemoryError}
_CAUSES = {signal.SIGSEGV: "a segmentation fault in llama.cpp's native code",
           signal.SIGBUS: "a bus error in llama.cpp's native code",
           signal.SIGILL: "an instruction this CPU does not have, in llama.cpp's native code",
           signal.SIGABRT: "an abort in llama.cpp's native code (a failed check)",
           signal.SIGFPE: "an arithmetic fault in llama.cpp's native code",
           signal.SIGKILL: "killed from outside (out of memory, or by hand)",
           signal.SIGTERM: "terminated from outside"}


def worker(path: str, n_ctx: int, n_threads: int) -> ModelProcess:
    key = (path, n_ctx, n_threads)
    with _WORKERS_LOCK:
        if key not in _WORKERS:
            _WORKERS[key] = ModelProcess(path, n_ctx, n_threads)
        return _WORKERS[key]


@atexit.register
def _close_all() -> None:
    with _WORKERS_LOCK:
        for w in _WORKERS.values():
            w.close()


class ModelProcess:
    """One worker; ``call`` sends a request and waits for its answer. Calls from several threads
    are in flight at once: a reader thread hands each reply to its caller by id, so counting
    tokens or rendering a prompt (answered by the worker at once) never waits for another run's
    generation (answered one after another)."""

    def __init__(self, path: str, n_ctx: int, n_threads: int):
        self.args = [path, str(n_ctx), str(n_threads)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready: dict[str, Any] = {}
        self.starts = 0
        self._lock = threading.Lock()  # the process, its start and the table of waiting calls
        self._write = threading.Lock()
        self._waiting: dict[int, queue.SimpleQueue[dict[str, Any] | ModelCrashed]] = {}
        self._ids = itertools.count(1)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def call(self, op: str, req: dict[str, Any] | None = None,
             on_text: Callable[[str], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> Any:
        replies: queue.SimpleQueue[dict[str, Any] | ModelCrashed] = queue.SimpleQueue()
        with self._lock:
            if self.proc is None:  # never started, or found dead: nothing of this call is lost
                self._start()
            rid = next(self._ids)
            self._waiting[rid] = replies
            proc = self.proc
        try:
            self._send(proc, {**(req or {}), "id": rid, "op": op})
            asked_to_stop = False
            while True:
                msg = replies.get()
                if isinstance(msg, ModelCrashed):
                    raise msg
                if "text" in msg:
                    if on_text is not None:
                        on_text(msg["text"])
                    if cancelled is not None and not asked_to_stop and cancelled():
                        self._send(proc, {"op": "cancel", "id": rid})
                        asked_to_stop = True
                elif "ok" in msg:
                    return msg["ok"]
                elif "error" in msg:
                    raise _RAISED.get(msg.get("type", ""), RuntimeError)(msg["error"])
        finally:
            with self._lock:
                self._waiting.pop(rid, None)

    def close(self) -> None:
        with self._lock:
            proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # type: ignore[union-attr]
            proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    # -- the process ---------------------------------------------------------------------
    def _start(self) -> None:
        """Start the worker and wait for its weights (the caller holds ``_lock``)."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the tao this process runs, for the child
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        tail: collections.deque[str] = collections.deque(maxlen=30)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tao.models.local_worker", *self.args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.starts += 1
        drainer = threading.Thread(target=_drain, args=(proc, tail), name="tao-worker-stderr",
                                   daemon=True)
        drainer.start()
        first = _read(proc)
        if first is None:
            raise _crashed(proc, drainer, tail, "loading the model")
        if "fatal" in first:
            proc.stdin.close()  # type: ignore[union-attr]
            proc.wait()
            raise _RAISED.get(first.get("type", ""), LocalModelError)(first["fatal"])
        self.proc, self.ready = proc, first.get("ready", {})
        threading.Thread(target=self._route, args=(proc, drainer, tail),
                         name="tao-worker-replies", daemon=True).start()
        log.debug("model worker %s ready: %s", proc.pid, self.ready)

    def _route(self, proc: subprocess.Popen[bytes], drainer: threading.Thread,
               tail: collections.deque[str]) -> None:
        """Each reply to the call that waits for it; at the worker's end, ``ModelCrashed`` to
        every call still waiting (a close by this process ends none: nothing waits then)."""
        while (msg := _read(proc)) is not None:
            with self._lock:
                replies = self._waiting.get(msg.get("id"))  # type: ignore[arg-type]
            if replies is not None:
                replies.put(msg)
        with self._lock:
            if self.proc is proc:
                self.proc = None
            waiting = list(self._waiting.items())
        if waiting:
            error = _crashed(proc, drainer, tail, "answering")
            for _, replies in waiting:
                replies.put(error)

    def _send(self, proc: subprocess.Popen[bytes] | None, obj: dict[str, Any]) -> None:
        try:
            with self._write:
                proc.stdin.write(json.dumps(obj).encode() + b"\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):
            pass  # the worker is gone: its reader says why to every call waiting


def _read(proc: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    while True:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            return None
        try:
            return json.loads(line)
        except ValueError:
            log.debug("model worker wrote a line that is not JSON: %r", line[:200])


def _drain(proc: subprocess.Popen[bytes], tail: collections.deque[str]) -> None:
    for raw in proc.stderr:  # type: ignore[union-attr]
        tail.append(raw.decode("utf-8", "replace").rstrip())


def _crashed(proc: subprocess.Popen[bytes], drainer: threading.Thread,
             tail: collections.deque[str], doing: str) -> ModelCrashed:
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    drainer.join(timeout=2)  # its last words, a fault handler's stack among them
    if code < 0:
        sig = signal.Signals(-code)
        cause = f"{sig.name}, {_CAUSES.get(sig, 'a signal')}"
    else:
        cause = f"exit status {code}"
    last = next((line for line in reversed(tail) if line.strip()), "")
    log.warning("model worker %s died (%s); its last lines:\n%s", proc.pid, cause, "\n".join(tail))
    return ModelCrashed(
        f"the embedded model's process (pid {proc.pid}) died while {doing}: {cause}. "
        f"This run ends here; the next model call starts a new process."
        + (f" Its last line: {last[:200]}" if last else ""))
