"""The embedded model's own process: ``python -m tao.models.local_worker GGUF N_CTX N_THREADS``.

llama.cpp is native code, and a fault in it (a SIGSEGV in a kernel, an abort on a failed assert)
ends the process it runs in. Run here, it ends this worker: the run that was waiting gets a
clear ``ModelCrashed`` (``local_process``), and the caller - ``tao run``, the workbench with its
other sessions, an evaluation with its next task - goes on.

Before llama.cpp starts, a CPU with AMX gets the seccomp filter of ``llama_cpu`` (AMX kept out,
CPU_REPACK kept). Then the weights load and one line says so.

Protocol, one JSON object a line. In, on stdin: ``{"id", "op", ...}`` with op ``generate``,
``render``, ``count``, ``stats``, ``seed`` or ``cancel``; ``count`` and ``render`` are answered at
once, the others one after another. Out, on the stdout the process was started
with: first ``{"ready": {...}}`` (or ``{"fatal": "..."}``), then for each request its text
pieces ``{"id", "text"}`` and one ``{"id", "ok": value}`` or ``{"id", "error", "type"}``.
File descriptor 1 itself is pointed at stderr, so native code that prints cannot corrupt the
stream; stdin's end (the caller gone) ends the worker.
"""

from __future__ import annotations

import faulthandler
import json
import os
import queue
import sys
import threading
from typing import Any

#: answered as they come, beside a generation: they read the vocabulary and the chat template,
#: never the context (``tao serve`` counts a run's tokens while another run's reply decodes)
AT_ONCE = ("count", "render")


def main(argv: list[str]) -> int:
    path, n_ctx, n_threads = argv[0], int(argv[1]), int(argv[2])
    out = os.fdopen(os.dup(1), "w", encoding="ascii", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    faulthandler.enable()  # a native fault leaves its Python stack on stderr for the caller
    lock = threading.Lock()

    def send(obj: dict[str, Any]) -> None:
        line = json.dumps(obj)  # ASCII: a lone surrogate in model text cannot break the line
        with lock:
            out.write(line + "\n")

    from . import llama_cpu

    denied = ("amx_int8" in llama_cpu.cpu_flags() and not llama_cpu.amx_allowed()
              and llama_cpu.deny_amx())
    from . import llama_engine

    try:
        llm = llama_engine.load(path, n_ctx, n_threads, amx_denied=denied)
    except Exception as e:  # noqa: BLE001 - said to the caller, which raises it
        send({"fatal": f"{type(e).__name__}: {e}", "type": type(e).__name__})
        return 1
    send({"ready": {"pid": os.getpid(), "load_s": llm.tao_load_s,
                    "layout": llm.tao_layout.reason}})
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    cancelled: set[int] = set()

    def read() -> None:
        for raw in sys.stdin.buffer:
            try:
                req = json.loads(raw)
            except ValueError:
                continue
            if req.get("op") == "cancel":
                cancelled.add(req.get("id"))
            elif req.get("op") in AT_ONCE:  # the vocabulary only: no need to wait for a reply
                answer(req)
            else:
                requests.put(req)
        requests.put(None)

    def answer(req: dict[str, Any]) -> None:
        rid = req.get("id")
        try:
            value = llama_engine.handle(llm, req.get("op", ""), req,
                                        lambda text: send({"id": rid, "text": text}),
                                        lambda: rid in cancelled)
            send({"id": rid, "ok": value})
        except Exception as e:  # noqa: BLE001 - the request's error, the worker goes on
            send({"id": rid, "error": str(e), "type": type(e).__name__})
        cancelled.discard(rid)

    threading.Thread(target=read, name="tao-worker-stdin", daemon=True).start()
    while (req := requests.get()) is not None:
        answer(req)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
