"""The escape suite: code that tries to get out of the sandbox, on every backend that works here.

Every case runs in a fresh sandbox while the host holds a fake ``OPENAI_API_KEY``, a decoy process
(started with that key in its environment), canary files in the host's home and temp folders and a
TCP listener on 127.0.0.1. Each case asserts a clear observation of containment (most print
``BLOCKED <error>``; resource cases check how the worker was stopped), and after each one the host
must be unaffected: key unchanged and never seen in any output, decoy alive, canaries intact, no
connection on the listener, the sandbox still answering, and - once closed - no process of the
sandbox's uid left.

The subprocess backend sees the host filesystem; the cases it cannot contain are marked
``xfail(strict=True)`` with the reason (documented exposure, not hidden: if one starts passing, the
suite says so). Without root it has no uid of its own, so the suite skips it there.
"""

from __future__ import annotations

import asyncio
import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import pytest

from tao.sandbox import KINDS, ExecutionResult, Limits, get_sandbox
from tao.sandbox.privileges import pids_of_uid

from sandbox_backends import ensure_backend, skip_mark

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-test-secret-" + secrets.token_hex(8)
RAND = secrets.token_hex(6)
FS_EXPOSED = "subprocess backend: the host filesystem is visible (documented)"


@dataclass
class Case:
    id: str
    body: str  # runs inside try/except; prints ESCAPED if it gets through, BLOCKED <error> if not
    check: Callable[[ExecutionResult, Host], None] | None = None  # replaces the BLOCKED check
    exposed: dict[str, str] = field(default_factory=dict)  # backend -> why it cannot be contained
    timeout: float = 10.0
    limits: Limits | None = None
    raw: bool = False  # body is the whole program (no try/except wrapper)


@dataclass
class Host:
    decoy: subprocess.Popen[bytes]
    listener: socket.socket
    unix_listener: socket.socket
    home_canary: Path
    canary_dir: Path
    values: dict[str, str]
    cleanup: list[Path] = field(default_factory=list)


# Errors that mean the *test's* code is broken, not that the sandbox stopped it.
_BROKEN_TEST = ("NameError", "SyntaxError", "AttributeError", "TypeError", "ImportError",
                "ModuleNotFoundError", "IndentationError", "UnboundLocalError")


def _blocked(r: ExecutionResult, host: Host) -> None:
    assert "BLOCKED" in r.stdout and "ESCAPED" not in r.stdout, r
    error_type = r.stdout.split("BLOCKED", 1)[1].split()[0]
    assert error_type not in _BROKEN_TEST, f"the case itself is broken: {r.stdout}"


def _alive_after(marker: str) -> Callable[[ExecutionResult, Host], None]:
    def check(r: ExecutionResult, host: Host) -> None:
        assert marker in r.stdout, r

    return check


def _killed(reason: str, *, timed_out: bool = False) -> Callable[[ExecutionResult, Host], None]:
    def check(r: ExecutionResult, host: Host) -> None:
        assert r.killed_reason and reason in r.killed_reason, r
        assert r.timed_out == timed_out, r

    return check


def _absent(path: str, *, private_ok: bool = False) -> Callable[[ExecutionResult, Host], None]:
    """The host never sees the file. ``private_ok``: the sandbox may write its own private copy
    (bwrap's /tmp and /dev are its own), as long as the host's stays untouched."""
    def check(r: ExecutionResult, host: Host) -> None:
        if not private_ok:
            _blocked(r, host)
        assert not Path(Template(path).substitute(host.values)).exists()

    return check


LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def _syscall(expr: str) -> str:
    """A libc call that returns -1 on failure, turned into an exception."""
    return (f"{LIBC}if {expr} == -1:\n"
            "    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))")


CASES = [
    # -- reading host files -----------------------------------------------------------------------
    Case("read-etc-shadow", "print(open('/etc/shadow').read()[:20])"),
    Case("read-home-canary", "print(open('$HOME_CANARY').read())"),
    Case("list-home", "if '$HOME_CANARY_NAME' not in os.listdir('$HOME'):\n"
                      "    raise LookupError('canary not visible')"),
    Case("read-project-checkout", "print(open('$REPO/pyproject.toml').read()[:40])",
         exposed={"subprocess": FS_EXPOSED}),
    Case("list-project-checkout", "print(os.listdir('$REPO'))", exposed={"subprocess": FS_EXPOSED}),
    Case("read-host-etc", "print(open('/etc/passwd').read()[:20])",
         exposed={"subprocess": FS_EXPOSED}),
    Case("read-host-cmdline", "print(open('/proc/$HOST_PID/cmdline', 'rb').read())",
         exposed={"subprocess": FS_EXPOSED + " (/proc/<pid>/cmdline is world-readable)"}),
    Case("read-host-environ", "print(open('/proc/$HOST_PID/environ', 'rb').read())"),
    Case("read-decoy-environ", "print(open('/proc/$DECOY_PID/environ', 'rb').read())"),
    Case("scan-proc-environ", "import glob\nhits = []\n"
                              "for p in glob.glob('/proc/[0-9]*/environ'):\n"
                              "    try:\n        data = open(p, 'rb').read()\n"
                              "    except OSError:\n        continue\n"
                              "    if b'OPENAI' in data:\n        hits.append(p)\n"
                              "if not hits:\n    raise LookupError('no environ holds the key')"),
    Case("proc-root-of-decoy", "print(os.listdir('/proc/$DECOY_PID/root/etc'))"),
    Case("proc-fds-of-host", "print(os.listdir('/proc/$HOST_PID/fd'))"),
    Case("proc-mem-of-host", "open('/proc/$HOST_PID/mem', 'rb').read(1)"),
    Case("inherited-host-fds",  # only stdin/out/err and the two protocol pipes may be open
         "own, extra = {0, 1, 2, int(sys.argv[1]), int(sys.argv[2])}, []\n"
         "for fd in map(int, os.listdir('/proc/self/fd')):\n"
         "    try:\n        extra.append((fd, os.readlink(f'/proc/self/fd/{fd}')))\n"
         "    except OSError:\n        pass  # the listing's own fd, closed by now\n"
         "extra = [e for e in extra if e[0] not in own]\n"
         "if not extra:\n    raise LookupError('no host fds')\nprint(extra)"),
    # -- writing outside the workspace ------------------------------------------------------------
    Case("write-etc", "open('/etc/tao-escape-$RAND', 'w').write('x')",
         check=_absent("/etc/tao-escape-$RAND")),
    Case("write-project-checkout", "open('$REPO/tao-escape-$RAND', 'w').write('x')",
         check=_absent("$REPO/tao-escape-$RAND")),
    Case("plant-sitecustomize", "open('$SITE/sitecustomize_tao_$RAND.py', 'w').write('x')",
         check=_absent("$SITE/sitecustomize_tao_$RAND.py")),
    Case("write-usr", "open('/usr/lib/tao-escape-$RAND', 'w').write('x')",
         check=_absent("/usr/lib/tao-escape-$RAND")),
    Case("write-host-tmp", "open('/tmp/tao-escape-$RAND', 'w').write('x')",
         check=_absent("/tmp/tao-escape-$RAND", private_ok=True),
         exposed={"subprocess": FS_EXPOSED + " (/tmp is world-writable)"}),
    Case("write-dev-shm", "open('/dev/shm/tao-escape-$RAND', 'w').write('x')",
         check=_absent("/dev/shm/tao-escape-$RAND", private_ok=True),
         exposed={"subprocess": FS_EXPOSED + " (/dev/shm is world-writable)"}),
    Case("chmod-interpreter", "os.chmod('$PYTHON', 0o777)"),
    Case("file-size-limit", "open('big', 'wb').write(b'0' * (4 << 20))",
         limits=Limits(max_file_bytes=1 << 20)),
    # -- symlinks and hard links ------------------------------------------------------------------
    Case("symlink-to-shadow", "os.symlink('/etc/shadow', 'shadow')\nprint(open('shadow').read())"),
    Case("symlink-to-home-canary", "os.symlink('$HOME_CANARY', 'c')\nprint(open('c').read())"),
    Case("symlink-to-checkout", "os.symlink('$REPO', 'repo')\nprint(os.listdir('repo'))",
         exposed={"subprocess": FS_EXPOSED}),
    Case("symlinks-left-for-host-cleanup",
         "os.symlink('$CANARY_DIR', 'evil_dir')\nos.symlink('$CANARY_DIR/file', 'evil_file')\n"
         "print('PLANTED')", raw=True, check=_alive_after("PLANTED")),
    Case("hardlink-shadow", "os.link('/etc/shadow', 'hard')\nprint(open('hard').read())"),
    # -- processes and signals --------------------------------------------------------------------
    Case("kill-decoy", "os.kill($DECOY_PID, signal.SIGKILL)"),
    Case("signal-host", "os.kill($HOST_PID, 0)"),
    Case("killpg-decoy", "os.killpg(os.getpgid($DECOY_PID), signal.SIGKILL)"),
    Case("kill-everything", "import signal\ntry:\n    os.kill(-1, signal.SIGKILL)\n"
                            "except OSError:\n    pass\nprint('SURVIVED')", raw=True,
         check=_alive_after("SURVIVED")),
    Case("ptrace-host", _syscall("libc.ptrace(16, $HOST_PID, 0, 0)")),
    Case("process-vm-readv", _syscall("libc.syscall(310, $HOST_PID, 0, 0, 0, 0, 0)")),
    Case("setuid-root", "os.setuid(0)"),
    Case("capabilities",
         "caps = [l for l in open('/proc/self/status') if l.startswith('CapEff')]\n"
         "if int(caps[0].split()[1], 16) == 0:\n    raise PermissionError('no caps')"),
    Case("unshare-userns", _syscall("libc.unshare(0x10000000)")),
    Case("unshare-binary", "r = subprocess.run(['unshare', '-r', 'id'], capture_output=True)\n"
                           "if r.returncode:\n    raise OSError(r.stderr.decode())"),
    Case("mount-tmpfs", _syscall("libc.mount(b'none', b'/workspace', b'tmpfs', 0, None)")),
    Case("chroot", "os.chroot('/tmp')"),
    Case("open-by-handle", _syscall("libc.syscall(304, 0, 0, 0)")),
    Case("import-os-system-shadow",
         "if os.system('cat /etc/shadow > leaked 2>/dev/null') or not open('leaked').read():\n"
         "    raise PermissionError('cat failed')"),
    # -- network ----------------------------------------------------------------------------------
    Case("tcp-connect-host", "socket.create_connection(('127.0.0.1', $PORT), timeout=2)"),
    Case("tcp-socket-via-ctypes", _syscall("libc.socket(2, 1, 0)")),
    Case("udp-send", "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', "
                     "('127.0.0.1', $PORT))"),
    Case("unix-socket-host", "s = socket.socket(socket.AF_UNIX)\ns.connect('$UNIX_SOCK')"),
    Case("child-process-socket",
         "r = subprocess.run([sys.executable, '-c', 'import socket; socket.create_connection("
         "(\"127.0.0.1\", $PORT), 2)'], capture_output=True)\n"
         "if r.returncode:\n    raise OSError(r.stderr.decode().splitlines()[-1])"),
    Case("dns-lookup", "socket.getaddrinfo('pypi.org', 443)"),
    Case("io-uring", _syscall("libc.syscall(425, 8, ctypes.create_string_buffer(120))")),
    # -- introspection ----------------------------------------------------------------------------
    Case("format-globals-leak", "def f():\n    pass\nprint('{0.__globals__}'.format(f))\n"
                                "import sys\nprint(sorted(sys.modules))", raw=True,
         check=lambda r, h: (_alive_after("final_answer")(r, h),
                             _no_host_objects(r))),
    # -- environment ------------------------------------------------------------------------------
    Case("env-os-environ", "print(sorted(os.environ))", raw=True,
         check=lambda r, h: _env_keys_only(r)),
    Case("env-proc-self", "print(open('/proc/self/environ', 'rb').read())", raw=True,
         check=lambda r, h: _env_keys_only(r)),
    Case("env-child-process",
         "print(subprocess.run(['env'], capture_output=True, text=True).stdout)",
         raw=True, check=lambda r, h: _env_keys_only(r)),
    # -- resources --------------------------------------------------------------------------------
    Case("fork-bomb-bounded",
         "import time\nn = 0\ntry:\n    for _ in range(100000):\n        if os.fork() == 0:\n"
         "            time.sleep(60)\n            os._exit(0)\n        n += 1\n"
         "except OSError as e:\n    print('REFUSED after', n, type(e).__name__)", raw=True,
         check=lambda r, h: _refused_within(r, 32), limits=Limits(max_processes=32)),
    Case("fork-bomb", "import os\nwhile True:\n    try:\n        os.fork()\n"
                      "    except OSError:\n        pass", raw=True, timeout=2,
         check=_killed("timed out", timed_out=True), limits=Limits(max_processes=32)),
    Case("thread-bomb", "import threading, time\nwhile True:\n"
                        "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()",
         limits=Limits(max_processes=32)),
    Case("memory-bomb", "x = bytearray(64 << 30)"),
    Case("memory-bomb-gradual", "def grow():\n    a = []\n    while True:\n"
                                "        a.append(bytearray(64 << 20))\ngrow()"),
    Case("memory-bomb-in-child",
         "r = subprocess.run([sys.executable, '-c', 'x = bytearray(64 << 30)'],\n"
         "                   capture_output=True)\n"
         "if r.returncode:\n    raise MemoryError(r.stderr.decode().splitlines()[-1])"),
    Case("infinite-loop", "while True:\n    pass", raw=True, timeout=1,
         check=_killed("timed out after 1 s", timed_out=True)),
    Case("sleep-past-timeout", "import time\ntime.sleep(60)", raw=True, timeout=1,
         check=_killed("timed out after 1 s", timed_out=True)),
    Case("detached-child", "import subprocess\n"
                           "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                           "print('DETACHED')", raw=True, check=_alive_after("DETACHED")),
    Case("print-gigabytes", "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(4096):\n"
                            "    sys.stdout.write(chunk)", raw=True,
         check=_killed("bytes of output")),
    Case("print-gigabytes-from-child", "import os\nos.system('yes')", raw=True,
         check=_killed("bytes of output")),
    Case("cpu-limit", "while True:\n    pass", raw=True, timeout=30,
         check=_killed("CPU time limit"), limits=Limits(cpu_s=1)),
    Case("open-files", "fs = [open('/dev/null') for _ in range(100000)]"),
    Case("recursion", "def f():\n    return f()\nf()"),
    Case("kill-own-worker", "import os\nos.kill(os.getpid(), 9)", raw=True,
         check=_killed("SIGKILL")),
    Case("protocol-garbage", "import os, sys\nos.write(int(sys.argv[2]), b'\\x7f\\xff\\xff\\xff')",
         raw=True, check=_killed("protocol")),
]


def _refused_within(r: ExecutionResult, max_processes: int) -> None:
    """The process cap really applies: the cgroup's pids.max where the sandbox has one, else
    RLIMIT_NPROC (as root only the uid drop makes that one count)."""
    assert "REFUSED after" in r.stdout, r
    assert int(r.stdout.split("REFUSED after")[1].split()[0]) < max_processes, r


def _no_host_objects(r: ExecutionResult) -> None:
    for marker in ("pytest", "tao.sandbox", "WorkerSandbox", "OPENAI", "test_sandbox_escape"):
        assert marker not in r.stdout, marker


def _env_keys_only(r: ExecutionResult) -> None:
    assert "OPENAI" not in r.stdout and SECRET not in r.stdout, r
    assert "PATH" in r.stdout  # it did print the environment


def _params():
    for kind in KINDS:
        unavailable = skip_mark(kind)  # None for a backend TAO_REQUIRE_SANDBOX lists: it fails
        for case in CASES:
            marks = []
            if unavailable:
                marks.append(unavailable)
            elif kind == "subprocess" and os.geteuid() != 0:
                marks.append(pytest.mark.skip(reason="subprocess backend without root has no "
                                                     "uid of its own"))
            elif kind in case.exposed:
                marks.append(pytest.mark.xfail(strict=True, reason=case.exposed[kind]))
            yield pytest.param(kind, case, id=f"{kind}-{case.id}", marks=marks)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    decoy = subprocess.Popen(["sleep", "300"], env={"OPENAI_API_KEY": SECRET, "PATH": "/usr/bin"},
                             start_new_session=True)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    unix_listener = socket.socket(socket.AF_UNIX)
    unix_path = tmp_path / "host.sock"
    unix_listener.bind(str(unix_path))
    unix_listener.listen()
    unix_listener.setblocking(False)
    home_canary = Path.home() / f".tao-escape-canary-{RAND}"
    home_canary.write_text("CANARY")
    home_canary.chmod(0o600)
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    (canary_dir / "file").write_text("CANARY")
    values = {"HOST_PID": str(os.getpid()), "DECOY_PID": str(decoy.pid), "REPO": str(REPO),
              "PORT": str(listener.getsockname()[1]), "UNIX_SOCK": str(unix_path),
              "HOME": str(Path.home()), "HOME_CANARY": str(home_canary),
              "HOME_CANARY_NAME": home_canary.name, "CANARY_DIR": str(canary_dir),
              "RAND": RAND, "SITE": sysconfig.get_paths()["purelib"],
              "PYTHON": os.path.realpath(sys.executable)}
    h = Host(decoy, listener, unix_listener, home_canary, canary_dir, values)
    yield h
    decoy.kill()
    decoy.wait()
    listener.close()
    unix_listener.close()
    home_canary.unlink()
    for name in ("/tmp/tao-escape-", "/dev/shm/tao-escape-"):
        Path(name + RAND).unlink(missing_ok=True)


def _program(case: Case, values: dict[str, str]) -> str:
    body = Template(case.body).substitute(values)
    imports = "import os, signal, socket, subprocess, sys\n"
    if case.raw:
        return imports + body
    inner = "\n".join("    " + line for line in body.splitlines())
    return (f"{imports}try:\n{inner}\n    print('ESCAPED')\n"
            "except BaseException as e:\n    print('BLOCKED', type(e).__name__, e)")


async def _assert_host_unaffected(box, host: Host, r: ExecutionResult, rss_before: int) -> None:
    everything = r.stdout + r.stderr + (r.error or "") + (r.killed_reason or "")
    assert SECRET not in everything
    assert os.environ["OPENAI_API_KEY"] == SECRET
    assert host.decoy.poll() is None, "the decoy process was killed"
    assert host.home_canary.read_text() == "CANARY"
    assert (host.canary_dir / "file").read_text() == "CANARY"
    for listener in (host.listener, host.unix_listener):
        with pytest.raises(BlockingIOError):
            listener.accept()
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before  # KiB
    assert grew < 200_000, f"host memory grew by {grew} KiB"
    again = await box.execute("print(6 * 7)")
    assert again.stdout == "42\n", again
    uid = box.uid
    await box.close()
    if uid is not None:
        deadline = time.monotonic() + 5
        while pids_of_uid(uid) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert pids_of_uid(uid) == [], "sandbox processes outlived close()"
    assert (host.canary_dir / "file").read_text() == "CANARY"  # workspace cleanup kept it


@pytest.mark.parametrize(("kind", "case"), list(_params()))
async def test_escape_is_contained(kind: str, case: Case, host: Host) -> None:
    ensure_backend(kind)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    box = get_sandbox(kind, limits=case.limits)
    try:
        r = await box.execute(_program(case, host.values), timeout=case.timeout)
        await _assert_host_unaffected(box, host, r, rss_before)
    finally:
        await box.close()
    (case.check or _blocked)(r, host)


def test_the_suite_is_big_enough() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert signal.SIGKILL  # the cases use it by name inside the sandbox
