"""The worker process as the host holds it: how it is booted and killed, what one cell's frame
and one execution's result look like, and how a death is explained.

Kept apart from ``host.py`` (the conversation itself) so each reads on its own.
"""

from __future__ import annotations

import ast
import functools
import marshal
import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._io import FrameReader, OutputBuffer, frame
from .base import ExecutionResult, ToolCallRecord
from .confinement import Verdict
from .privileges import kill_uid

if TYPE_CHECKING:
    from .confinement import Confinement

WORKER_SOURCE = (Path(__file__).with_name("_worker.py")).read_text(encoding="utf-8")
# Reads the precompiled worker (one frame of marshalled code) from the control pipe and runs it.
BOOT = ("import marshal,os,sys\n"
        "def _r(n,f=int(sys.argv[1])):\n"
        " b=b''\n"
        " while len(b)<n:\n"
        "  c=os.read(f,n-len(b))\n"
        "  if not c:raise SystemExit(3)\n"
        "  b+=c\n"
        " return b\n"
        "exec(marshal.loads(_r(int.from_bytes(_r(4),'big'))))")


@functools.cache
def _worker_code() -> bytes:
    code = marshal.dumps(compile(WORKER_SOURCE, "<tao-worker>", "exec", dont_inherit=True))
    return len(code).to_bytes(4, "big") + code


START_TIMEOUT_S = 30.0
HOST_COMPILE_MAX = 64 << 10


class _Worker:
    """One worker process and the host ends of its pipes."""

    def __init__(self, proc: subprocess.Popen[bytes], ctl_w: int, ctl_r: int, out_r: int,
                 err_r: int, kill_uid: int | None = None, python: str | None = None):
        self.proc, self.ctl_w, self.ctl_r, self.out_r, self.err_r = proc, ctl_w, ctl_r, out_r, err_r
        self.kill_uid_, self.python = kill_uid, python
        self.frames = FrameReader()
        self.ready = False
        self.info: dict[str, Any] = {}
        self.pending = b""
        self.extra_kill: Any = None

    def terminate(self) -> None:
        """Kill the worker and everything it started, and reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        if self.extra_kill is not None:
            self.extra_kill()
        if self.kill_uid_ is not None and self.python:
            kill_uid(self.kill_uid_, self.python)  # children that left the process group
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close_fds(self) -> None:
        for fd in (self.ctl_w, self.ctl_r, self.out_r, self.err_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def kill(self) -> None:
        self.terminate()
        self.close_fds()


def _release(holder: list[_Worker | None], confinement: Confinement) -> None:
    worker, holder[0] = holder[0], None
    if worker is not None:
        worker.kill()
    confinement.release()  # its cgroup (emptied) and its own workspace, after the worker


def _describe_exit(rc: int | None, cgroup_counts: bool = False) -> str:
    """Why the worker ended. ``cgroup_counts``: the sandbox's cgroup counts out-of-memory kills,
    so a SIGKILL is not blamed on memory here (``confinement`` says so when the counter moved)."""
    if rc is None:
        return "The sandbox worker stopped responding"
    sig = -rc if rc < 0 else rc - 128 if rc > 128 else 0
    if not sig:
        return f"The sandboxed code ended the worker process (exit status {rc})"
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    why = {"SIGKILL": "killed" if cgroup_counts else
           "killed - most likely the memory limit or the system's out-of-memory killer",
           "SIGXCPU": "killed - the CPU time limit was reached",
           "SIGSEGV": "crashed (segmentation fault)", "SIGABRT": "aborted"}.get(name, "killed")
    return f"The sandbox worker was {why} ({name})"


def cell_frame(code: str, cell: int, compile_here: bool) -> bytes:
    """The exec frame. With the host's own interpreter in the sandbox, the host compiles the
    cell (it is only parsed here, never run): the worker then skips its compiler's ~2 ms
    first-use start-up. Large or invalid code is left to the worker (its errors, its limits).
    """
    msg: dict[str, Any] = {"op": "exec", "cell": cell, "code": code}
    if compile_here and len(code) <= HOST_COMPILE_MAX:
        filename = f"<cell-{cell}>"
        try:
            tree = ast.parse(code, filename)
            if any(isinstance(node, ast.Assert) for node in tree.body):
                return frame(msg)  # the worker explains its asserts (``_explain_asserts``)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                expr = ast.Expression(tree.body.pop().value)
                last = compile(expr, filename, "eval", dont_inherit=True)
            msg["body"] = compile(tree, filename, "exec", dont_inherit=True)
            msg["last"] = last
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    return frame(msg)


def build_result(outcome: str, done: dict[str, Any], out: OutputBuffer, err: OutputBuffer,
                 calls: list[ToolCallRecord], timeout: float, restarted: bool,
                 duration: float, kill_output_bytes: int, verdict: Verdict | None = None
                 ) -> ExecutionResult:
    """The observation of one execution, whatever its outcome; ``verdict``: the limits it hit."""
    verdict = verdict or Verdict()
    killed = outcome != "done"
    reason = None
    lost = "the sandbox was restarted, so variables from earlier code blocks are lost"
    if outcome == "timeout":
        reason = f"Execution timed out after {timeout:g} s and was killed; {lost}."
    elif outcome == "overflow":
        reason = (f"The code wrote more than {kill_output_bytes} bytes of output "
                  f"and was killed; {lost}.")
    elif outcome.startswith("died:"):
        reason = f"{verdict.death or outcome[5:]}; {lost}."
    elif killed:
        reason = f"The sandbox worker failed ({outcome}); {lost}."
    return ExecutionResult(
        stdout=out.text(killed), stderr=err.text(killed), error=done.get("error"),
        timed_out=outcome == "timeout", killed_reason=reason, duration_s=duration,
        truncated=out.truncated or err.truncated, final_answer=done.get("final"),
        has_final_answer="final" in done, restarted=restarted, tool_calls=tuple(calls),
        limits_hit=tuple(verdict.keys), notes=tuple(verdict.notes))
