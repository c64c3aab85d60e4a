"""What ``run_command`` sends into the sandbox's worker (its source text, not this module: tao is
not importable in there, so this file uses the standard library only).

The command's output goes through pipes held by the worker rather than straight to the sandbox's
own capped streams, because those keep only the first 64 KiB - and the end of a long test run is
where its failures are. The worker keeps the head and the tail of each stream (bounded memory,
however much is written) and fits both streams into one observation's budget. Whatever the
command left running is killed with its process group when the shell exits or times out.
"""

import os
import selectors
import signal
import subprocess
import sys
import time

_PYTEST = '#!/bin/sh\nexec python3 -m pytest "$@"\n'
_EXEC = '#!/bin/sh\nexec %s "$@"\n'


def tao_sh(command, timeout, budget):
    # the worker's own folder is the workspace root (/workspace in bwrap and docker); as root the
    # subprocess backend's uid could not even enter it by its host path (a mode-700 parent)
    proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env={**os.environ, "PATH": _path()})
    kept = {}  # fd -> [head, tail, total bytes]
    sel = selectors.DefaultSelector()
    for pipe in (proc.stdout, proc.stderr):
        kept[pipe.fileno()] = [b"", b"", 0]
        sel.register(pipe, selectors.EVENT_READ)
    deadline, timed_out, grace = time.monotonic() + timeout, False, None
    while sel.get_map():
        now = time.monotonic()
        if grace is None and (proc.poll() is not None or now >= deadline):
            timed_out = proc.returncode is None
            _kill(proc)  # the shell is done: what it started in the background goes too
            grace = now + 1.0  # a setsid escapee may hold a pipe: stop reading soon
        if grace is not None and now >= grace:
            break
        for key, _ in sel.select(0.05):
            data = os.read(key.fd, 1 << 16)
            if not data:
                sel.unregister(key.fileobj)
                continue
            k = kept[key.fd]
            room = max(budget - len(k[0]), 0)
            k[0] += data[:room]
            k[1] = (k[1] + data[room:])[-budget:]
            k[2] += len(data)
    _kill(proc)
    code = proc.wait()
    out, err = kept[proc.stdout.fileno()], kept[proc.stderr.fileno()]
    err_share = min(err[2], max(budget // 3, budget - out[2]))
    streams = [_fit(out, budget - err_share), _fit(err, err_share)]
    final_answer([code, timed_out, *streams])  # noqa: F821 - the worker defines it


def _path():
    """PATH for the command: ``python``, ``python3`` and ``pytest`` are the worker's own
    interpreter (the one tao runs on, with its packages: pytest among them), whatever the
    system calls its Pythons - a coder's first check is ``python app.py`` or ``pytest``. The
    names live in a folder of this uid's under /tmp (the sandbox's private tmpfs; the host's
    with the subprocess backend, so they are written afresh each time). They are scripts that
    exec the interpreter by its own path, not links to it: run through a link elsewhere, a
    venv's python does not find its ``pyvenv.cfg`` and starts as the base Python, without the
    venv's packages - no pytest in a fresh ``python -m venv`` install."""
    here = os.path.dirname(sys.executable)
    shim = f"/tmp/.tao-bin-{os.getuid()}"
    exe = "'" + sys.executable.replace("'", "'\\''") + "'"
    try:
        os.makedirs(shim, mode=0o700, exist_ok=True)
        if os.lstat(shim).st_uid != os.getuid():  # someone else's: not ours to trust
            raise OSError("foreign")
        for name, text in (("python", _EXEC % exe), ("python3", _EXEC % exe), ("pytest", _PYTEST)):
            tmp = os.path.join(shim, f".{name}.{os.getpid()}")
            with open(tmp, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o700)
            os.replace(tmp, os.path.join(shim, name))  # a link left by an older tao goes too
    except OSError:
        shim = ""
    return ":".join(p for p in (shim, here, os.environ.get("PATH", "")) if p)


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _fit(kept, share):
    """[head, tail, bytes left out between them] within ``share`` bytes."""
    head, tail, total = kept
    if total <= share:
        return [(head + tail).decode("utf-8", "replace"), "", 0]
    first = share // 3
    whole_tail = (head[first:] + tail)[-(share - first):] if share > first else b""
    return [head[:first].decode("utf-8", "replace"), whole_tail.decode("utf-8", "replace"),
            total - first - len(whole_tail)]
