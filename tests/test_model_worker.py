"""The embedded model in a process of its own: AMX kept out where it crashes llama.cpp, and a
native crash that takes one run with it, never ``tao run``, ``tao eval`` or ``tao serve``.

The crash tests kill the real worker with SIGSEGV while it answers (slow: ``-m local_model``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tao.models import llama_cpu

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
AMX_BUILD = "CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | "
PLAIN_BUILD = "CPU : SSE3 = 1 | AVX512 = 1 | REPACK = 1 | "


# -- which layout, from what the CPU and the build say --------------------------------------

def test_amx_is_kept_out_only_where_the_cpu_and_the_build_both_have_it():
    amx_cpu = {"avx512f", "amx_tile", "amx_int8", "amx_bf16"}
    worker = dict(amx_denied=True, env={})  # the worker, its filter loaded
    assert llama_cpu.choose(amx_cpu, PLAIN_BUILD, **worker) == llama_cpu.Layout()
    assert llama_cpu.choose({"avx512f"}, AMX_BUILD, **worker) == llama_cpu.Layout()
    kept_out = llama_cpu.choose(amx_cpu, AMX_BUILD, **worker)
    assert kept_out.extra_bufts and "CPU_REPACK kept" in kept_out.reason
    # in the caller's own process no filter is loaded (nor where the kernel refuses it): the
    # extra buffer types go instead
    here = llama_cpu.choose(amx_cpu, AMX_BUILD, amx_denied=False, env={})
    assert not here.extra_bufts and "extra buffer types off" in here.reason
    # a build whose AMX kernels work can be let through
    assert llama_cpu.choose(amx_cpu, AMX_BUILD, amx_denied=False, env={"TAO_LLAMA_AMX": "1"}) \
        == llama_cpu.Layout(reason="AMX on (TAO_LLAMA_AMX=1)")


def test_cpu_flags_are_read_from_cpuinfo():
    cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx512f amx_int8 amx_tile\n"
    assert {"amx_int8", "amx_tile", "fpu"} <= llama_cpu.cpu_flags(cpuinfo)
    assert llama_cpu.cpu_flags("no flags here") == set()


_FILTERED = """
import ctypes, threading
from tao.models import llama_cpu
print(llama_cpu.amx_permission_denied())
print(llama_cpu.deny_amx())
print(llama_cpu.amx_permission_denied())
t = threading.Thread(target=print, args=("threads still start",)); t.start(); t.join()
print(open("/proc/self/status").read().count("Seccomp:\\t2"))
"""


@pytest.mark.skipif(not llama_cpu.can_deny_amx(), reason="the filter is for x86-64 Linux")
def test_the_worker_s_filter_refuses_the_amx_permission_and_nothing_else():
    done = subprocess.run([sys.executable, "-c", _FILTERED], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:5] == ["False", "True", "True", "threads still start", "1"]


def test_extra_buffer_types_are_off_only_while_the_weights_load():
    low = pytest.importorskip("llama_cpp.llama_cpp")  # what llama_cpp.Llama builds them with
    assert low.llama_model_default_params().use_extra_bufts
    with llama_cpu.model_params(llama_cpu.Layout(extra_bufts=False)):
        assert not low.llama_model_default_params().use_extra_bufts
    assert low.llama_model_default_params().use_extra_bufts


# -- the real model (slow) ------------------------------------------------------------------

_TWO_TOKENS = """
import asyncio, sys
from tao.messages import Message
from tao.models.local import LocalModel

model = LocalModel("qwen2.5-coder-0.5b")
if sys.argv[1] == "in-process":
    llm = model.llm
    llm.eval(llm.tokenize("你好，世界".encode())[:2])  # what crashed on AMX: a batch of two
reply = asyncio.run(model.complete([Message.user("1+1=?")], max_tokens=3))
print(model.stats()["layout"], "|", reply.usage.prompt_tokens > 2)
"""


@pytest.mark.local_model
@pytest.mark.parametrize("where", ["worker", "in-process"])
def test_a_prompt_of_many_tokens_evaluates_on_this_cpu(where):
    """On a Xeon with AMX and a llama.cpp built there, main at fb53ea1 died here with SIGSEGV
    (issue 23): any batch of two tokens or more. Everywhere it must answer."""
    env = {**os.environ, "TAO_LOCAL_WORKER": "0" if where == "in-process" else "1"}
    done = subprocess.run([sys.executable, "-c", _TWO_TOKENS, where], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    layout, _, many = done.stdout.strip().rpartition("|")
    assert many.strip() == "True"
    if "amx_int8" in llama_cpu.cpu_flags():
        assert "AMX on" not in layout


@pytest.fixture(scope="module")
def small():
    from tao.models.local import LocalModel

    return LocalModel("qwen2.5-coder-0.5b")


def _kill_on_first_token(model):
    """A sink that sends SIGSEGV to the model's worker while it is decoding a reply."""
    from tao.events import TokenDelta

    killed: list[int] = []

    def sink(event):
        if isinstance(event, TokenDelta) and not killed:
            killed.append(model.engine().pid)
            os.kill(killed[0], signal.SIGSEGV)
    return sink, killed


@pytest.mark.local_model
def test_a_crash_in_the_model_ends_that_run_with_its_cause_and_the_next_run_works(small):
    from tao.cli import build_agent

    sink, killed = _kill_on_first_token(small)
    hit = build_agent("react", small).run(XIAOMING, sinks=[sink])
    assert killed and hit.status == "error"
    assert hit.error.startswith("ModelCrashed: the embedded model's process")
    assert "SIGSEGV" in hit.error and "segmentation fault" in hit.error
    assert hit.messages[1].content == XIAOMING  # the history is kept
    after = build_agent("react", small).run(XIAOMING)
    assert after.status == "done" and small.engine().pid != killed[0]


@pytest.mark.local_model
def test_tokens_are_counted_while_another_run_s_reply_decodes(small):
    """``tao serve`` fits each run's call to the context by counting tokens on its event loop:
    that count must not wait for a reply another run is decoding (the worker answers counts
    at once; replies are routed to their callers by id)."""
    import threading

    from tao.messages import Message

    started, finished = threading.Event(), threading.Event()

    def long_reply():
        import asyncio

        async def go():
            async for chunk in small.stream([Message.user("Count from 1 to 200, comma separated.")],
                                            max_tokens=200):
                started.set()
        asyncio.run(go())
        finished.set()

    thread = threading.Thread(target=long_reply)
    thread.start()
    assert started.wait(120)
    assert small.count_tokens("小明有 50 元") > 0
    assert small.render([Message.user("hi")]).endswith("<|im_start|>assistant\n")
    answered_during = not finished.is_set()
    thread.join()
    assert answered_during


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _kill_worker_of(proc: subprocess.Popen, timeout: float = 120) -> int:
    """SIGSEGV to ``proc``'s model worker as soon as it exists: inside the first model call,
    which waits for the worker's weights (a later moment could fall after the first task)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for child in _children(proc.pid):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"tao.models.local_worker" in cmdline:
                os.kill(child, signal.SIGSEGV)
                return child
        time.sleep(0.05)
    raise AssertionError("no model worker appeared")


@pytest.mark.local_model
def test_tao_run_says_what_crashed_instead_of_dying(tmp_path):
    proc = subprocess.Popen(["tao", "run", "--model", "local-0.5b", XIAOMING],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"})
    _kill_worker_of(proc)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, (out, err)  # a run that failed, not a signal (-11 / 139)
    said = " ".join((out + err).split())
    assert "ModelCrashed" in said and "SIGSEGV" in said and "segmentation fault" in said
    assert "Traceback" not in err


@pytest.mark.local_model
def test_tao_eval_records_the_crashed_task_with_its_reason_and_goes_on(tmp_path):
    out = tmp_path / "eval"
    proc = subprocess.Popen(["tao", "eval", "calculator", "-a", "react", "-m", "local-0.5b",
                             "--limit", "2", "--out", str(out), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _kill_worker_of(proc)
    stdout, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    first, second = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert first["status"] == "error" and not first["correct"]
    assert first["error"].startswith("ModelCrashed") and "SIGSEGV" in first["error"]
    assert second["status"] in ("done", "max_turns") and second["error"] is None
    assert json.loads(stdout)["agents"][0]["tasks"] == 2


@pytest.mark.local_model
def test_tao_serve_ends_the_hit_run_with_its_cause_and_serves_the_next(tmp_path, small):
    from web_helpers import Served, sse, start

    from tao.web import create_app

    app = create_app(journal=tmp_path / "runs.db", workspace_root=tmp_path / "ws")
    with Served(app) as served, served.client() as one, served.client() as other:
        one.get("/"), other.get("/")
        run_id = start(one, model={"name": "local-0.5b"}, task=XIAOMING)
        assert sse(one, run_id, until="token")  # the model is answering
        os.kill(small.engine().pid, signal.SIGSEGV)  # the server's: one worker per model file
        *events, end = sse(one, run_id)
        assert end["data"] == {"status": "error"}
        finished = events[-1]["data"]["result"]
        assert finished["error"].startswith("ModelCrashed") and "SIGSEGV" in finished["error"]
        # another session's run, on the same server, after the crash
        again = start(other, model={"name": "local-0.5b"}, task=XIAOMING)
        assert sse(other, again)[-1]["data"] == {"status": "done"}
        # and the hit run goes on from its journal, on a new worker
        assert one.post(f"/api/runs/{run_id}/resume").status_code == 201
        assert sse(one, run_id)[-1]["data"] == {"status": "done"}


def test_a_model_file_that_cannot_load_is_said_as_such_not_as_a_crash():
    from tao.errors import ModelCrashed
    from tao.models.local_process import ModelProcess

    worker = ModelProcess("/nonexistent.gguf", 512, 1)
    with pytest.raises(ValueError, match="nonexistent.gguf") as caught:
        worker.call("stats")
    assert worker.proc is None and not isinstance(caught.value, ModelCrashed)
