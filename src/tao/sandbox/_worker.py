"""The sandbox worker: a small persistent Python REPL that runs *inside* the sandbox.

It runs as ``python -I -S -c <code> IN_FD OUT_FD`` (or ``--fifos DIR`` for Docker), where <code> is
this source, or - when the sandbox runs the host's own interpreter - a tiny loader that reads this
module precompiled (``marshal``) from the control pipe: compiling it costs ~10 ms on a slow machine,
a third of the cold-start budget. So it must be self-contained and use only the standard library
(tao itself is not visible in the sandbox), and it imports only builtin modules up front (``json``
alone costs ~15 ms here): the host sends ``marshal`` frames (the host is trusted), the worker
answers in JSON it writes itself (the host parses that untrusted side with ``json``).

Frames are a 4-byte big-endian length and a payload. Host -> worker: ``init``, ``exec``, ``tools``,
``result`` (a tool's return value). Worker -> host: ``ready``, ``call`` (a tool call), ``done``.
User code's stdout/stderr are the real fds 1 and 2, pipes the host reads with a size cap, so output
written by child processes or ``os.write`` is captured too and nothing is held in worker memory.
"""

import _thread
import builtins
import marshal
import os
import sys

_G = globals()
_PID = os.getpid()
_MAX_ERROR = 20000


# -- framing --------------------------------------------------------------------------------------
def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv():
    n = int.from_bytes(_read_exact(_IN, 4), "big")
    return marshal.loads(_read_exact(_IN, n))


def _send(msg):
    _send_bytes(_json(msg).encode("utf-8", "surrogatepass"))


def _send_bytes(data):
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(_OUT, data):]


_ESC = {i: "\\u%04x" % i for i in range(32)}
_ESC.update({34: '\\"', 92: "\\\\"})  # lone surrogates pass as such: the host reads "surrogatepass"


def _json(o):
    """JSON for the plain values a tool call or an answer may carry; TypeError for anything else."""
    if o is None or o is True or o is False:
        return {None: "null", True: "true", False: "false"}[o]
    if isinstance(o, str):
        return '"' + o.translate(_ESC) + '"'
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        if o - o == 0:
            return float.__repr__(o)
        return "NaN" if o != o else "Infinity" if o > 0 else "-Infinity"
    if isinstance(o, (list, tuple)):
        return "[" + ",".join(map(_json, o)) + "]"
    if isinstance(o, dict):
        items = []
        for k, v in o.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError("dict keys must be str, not %s" % type(k).__name__)
            items.append(_json(k if isinstance(k, str) else _json(k)) + ":" + _json(v))
        return "{" + ",".join(items) + "}"
    raise TypeError("a %s is not JSON-serialisable" % type(o).__name__)


# -- the names user code sees ---------------------------------------------------------------------
class ToolError(Exception):
    """Raised inside sandboxed code when a host tool fails; the message is the tool's error."""


class _FinalAnswer(BaseException):
    """Unwinds user code after ``final_answer(x)``; BaseException so ``except Exception`` in the
    user's code does not swallow it (and if something does, the answer is still recorded)."""


_final = []
_CALL_LOCK = _thread.allocate_lock()


def final_answer(answer):
    """Give the final answer and stop this code block."""
    _final[:] = [answer]
    raise _FinalAnswer


def _call_tool(name, args, kwargs):
    if os.getpid() != _PID:
        raise ToolError("tools can only be called from the sandbox's main process")
    try:
        data = _json({"op": "call", "name": name, "args": args, "kwargs": kwargs})
        data = data.encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError) as e:
        raise TypeError("arguments of %s() must be JSON-serialisable (numbers, strings, lists, "
                        "dicts): %s" % (name, e)) from None
    with _CALL_LOCK:  # threads in user code take turns: one call, one reply
        _send_bytes(data)
        reply = _recv()
    if reply.get("error") is not None:
        raise ToolError(reply["error"])
    return reply.get("value")


def _make_tool(name, doc):
    def tool(*args, **kwargs):
        return _call_tool(name, args, kwargs)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = doc
    return tool


_NS = {"__name__": "__main__", "__builtins__": builtins, "final_answer": final_answer,
       "ToolError": ToolError}
_TOOLS = {}
_CELLS = {}


def _set_tools(tools):
    for name, stub in list(_TOOLS.items()):
        if _NS.get(name) is stub:  # leave a name alone if the user's code rebound it
            del _NS[name]
    _TOOLS.clear()
    for name, doc in tools:
        _NS[name] = _TOOLS[name] = _make_tool(name, doc)


# -- running code ---------------------------------------------------------------------------------
def _compile(src, filename):
    """Compile a cell; if its last statement is an expression, compile that separately so its
    value can be shown like in IPython (``x`` on the last line prints ``x``'s repr)."""
    import _ast

    tree = compile(src, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    _explain_asserts(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = compile(_ast.Expression(tree.body.pop().value), filename, "eval", dont_inherit=True)
    return compile(tree, filename, "exec", dont_inherit=True), last


_OPS = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=", "Is": "is",
        "IsNot": "is not", "In": "in", "NotIn": "not in"}


def _explain_asserts(tree):
    """A top-level ``assert a == b`` with no message gets one saying what both sides were
    (``AssertionError: assert 3 == 4``), as pytest says: code testing a function on examples
    learns what the function returned, not only that it was wrong. Each side is evaluated once,
    into a name the message reads."""
    import _ast

    for node in tree.body:
        test = node.test if isinstance(node, _ast.Assert) else None
        if node.__class__ is not _ast.Assert or node.msg is not None or test.__class__ is not \
                _ast.Compare or len(test.ops) != 1 or type(test.ops[0]).__name__ not in _OPS:
            continue
        names = []
        for i, side in enumerate((test.left, test.comparators[0])):
            name = _ast.Name("_tao_assert_%d" % i, _ast.Store())
            names.append(_ast.Name(name.id, _ast.Load()))
            walrus = _ast.NamedExpr(name, side)
            if i == 0:
                test.left = walrus
            else:
                test.comparators[0] = walrus
        text = "assert %.200r " + _OPS[type(test.ops[0]).__name__] + " %.200r"
        node.msg = _ast.BinOp(_ast.Constant(text), _ast.Mod(), _ast.Tuple(names, _ast.Load()))
        for new in (node.msg, node.msg.left, node.msg.op, node.msg.right, *names, test.left,
                    test.left.target, test.comparators[0], test.comparators[0].target):
            for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                setattr(new, attr, getattr(node, attr))


def _run(msg):
    cell, src = msg["cell"], msg["code"]
    filename = "<cell-%d>" % cell
    _CELLS[filename] = src
    del _final[:]
    error = None
    try:
        if "body" in msg:  # compiled by the host (same interpreter): no parser start-up here
            body, last = msg["body"], msg.get("last")
        else:
            body, last = _compile(src, filename)
        exec(body, _NS)
        if last is not None:
            value = eval(last, _NS)
            if value is not None:
                _NS["_"] = value
                sys.stdout.write(repr(value) + "\n")
    except _FinalAnswer:
        pass
    except BaseException as e:  # noqa: BLE001 - whatever the code raised is the observation
        error = e if not _final else None
    if os.getpid() != _PID:  # a forked child fell through the user's code: it must not serve
        os._exit(0)
    done = {"op": "done", "cell": cell, "error": _format(error) if error else None}
    if _final:
        try:
            _json(_final[0])
            done["final"] = _final[0]
        except (TypeError, ValueError, RecursionError):
            done["final"] = repr(_final[0])
    return done


def _format(exc):
    """The traceback trimmed to what the user wrote: worker frames dropped, library frames
    between the user's frames collapsed, the innermost frame kept (that is where it was raised)."""
    try:
        import linecache
        import traceback

        for name, src in _CELLS.items():
            linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        frames = [(f, n) for f, n in traceback.walk_tb(exc.__traceback__) if f.f_globals is not _G]
        kept, skipped = [], 0
        for i, (f, n) in enumerate(frames):
            if f.f_code.co_filename.startswith("<cell-") or i == len(frames) - 1:
                if skipped:
                    kept.append(None)
                kept.append((f, n))
                skipped = 0
            else:
                skipped += 1
        lines = []
        if kept:
            lines.append("Traceback (most recent call last):\n")
            for item in kept:
                if item is None:
                    lines.append("  ... (library frames omitted)\n")
                else:
                    lines.extend(traceback.StackSummary.extract([item]).format())
        lines.extend(traceback.format_exception_only(type(exc), exc))
        text = "".join(lines)
    except BaseException as e:  # noqa: BLE001 - never lose the error because formatting failed
        text = "%s: %s (traceback unavailable: %r)" % (type(exc).__name__, exc, e)
    return text if len(text) <= _MAX_ERROR else text[:_MAX_ERROR] + "\n[... traceback truncated]"


# -- start ----------------------------------------------------------------------------------------
def _confine(cfg):
    """Join the sandbox's cgroup, drop privileges and apply limits before any user code runs."""
    for fd in cfg.get("cgroup_fds", ()):  # cgroup.procs opened by the host: "0" is this process
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
    if cfg.get("uid") is not None:  # bwrap started as root: become the sandbox's own uid
        _drop_to(cfg["uid"], cfg["gid"])
    import resource

    for name, (soft, hard) in cfg.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if cfg.get("seccomp") or cfg.get("pdeathsig"):
        _prctl(cfg)
    os.umask(0o022)
    if cfg.get("cwd"):
        os.chdir(cfg["cwd"])
    for path in cfg.get("sys_path", ()):
        sys.path.append(path)


def _libc():
    """``prctl``/``capset`` through ``_ctypes``, the C core of ctypes: the ctypes package costs
    ~4 ms to import on a slow machine, its core ~0.8 (a cold start has 30 in all)."""
    import _ctypes

    libc = _ctypes.dlopen(None)
    return _ctypes, lambda name, *args: _ctypes.call_function(_ctypes.dlsym(libc, name), args)


def _drop_to(uid, gid):
    """What ``setpriv --reuid --regid --clear-groups --inh-caps=-all --bounding-set=-all`` does,
    in-process (its exec costs ~3 ms): empty the bounding set (bwrap left us CAP_SETPCAP for
    that), switch every uid/gid (which clears the permitted, effective and ambient sets), clear the
    inheritable set, become dumpable again (a uid change makes the process's /proc files root's).
    Then verify, and refuse to run anything if a bit is left."""
    _, call = _libc()
    cap = 0
    while cap < 64 and call("prctl", 24, cap, 0, 0, 0) == 0:  # PR_CAPBSET_DROP until EINVAL
        cap += 1
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header = (0x20080522).to_bytes(4, sys.byteorder) + bytes(4)  # _LINUX_CAPABILITY_VERSION_3
    call("capset", header, bytes(24))
    call("prctl", 4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    with open("/proc/self/status") as f:
        caps = [line.split()[1] for line in f if line.startswith("Cap")]
    if any(int(c, 16) for c in caps) or os.getresuid() != (uid, uid, uid):
        raise PermissionError("could not drop privileges: %s" % caps)


def _prctl(cfg):
    """Die with the host (subprocess backend) and load the seccomp filter (where bwrap does not)."""
    _ctypes, call = _libc()
    if cfg.get("pdeathsig"):
        call("prctl", 1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        if os.getppid() != cfg["host_pid"]:
            os._exit(1)
    bpf = cfg.get("seccomp")
    if bpf:
        class Byte(_ctypes._SimpleCData):
            _type_ = "B"

        program = (Byte * len(bpf)).from_buffer_copy(bpf)
        fprog = ((len(bpf) // 8).to_bytes(2, sys.byteorder) + bytes(6)  # struct sock_fprog
                 + _ctypes.addressof(program).to_bytes(8, sys.byteorder))
        if call("prctl", 38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError("PR_SET_NO_NEW_PRIVS failed")
        if call("prctl", 22, 2, fprog, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
            raise OSError("loading the seccomp filter failed")
        with open("/proc/self/status") as f:
            if "Seccomp:\t2" not in f.read():
                raise OSError("the seccomp filter is not in force")


def _open_channels(argv):
    """fds 3/4 style (bwrap, subprocess) or named pipes in a mounted folder (Docker)."""
    if argv[0] == "--fifos":
        d = argv[1]
        fin = os.open(d + "/in", os.O_RDONLY)
        fout = os.open(d + "/out", os.O_WRONLY)
        for name, fd in (("stdout", 1), ("stderr", 2)):
            w = os.open(d + "/" + name, os.O_WRONLY)
            os.dup2(w, fd)
            os.close(w)
        return fin, fout
    return int(argv[0]), int(argv[1])


def _main(argv):
    global _IN, _OUT
    _IN, _OUT = _open_channels(argv)
    os.set_inheritable(_IN, False)
    os.set_inheritable(_OUT, False)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)  # input() must not read the protocol
    os.close(null)
    import io

    for name, fd in (("stdout", 1), ("stderr", 2)):  # unbuffered: output survives a kill
        setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                                            errors="backslashreplace", write_through=True))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    os.register_at_fork(after_in_child=_in_child)
    try:
        cfg = _recv()
        _confine(cfg)
        _set_tools(cfg.get("tools", ()))
    except BaseException as e:  # noqa: BLE001 - the host turns this into a clear start error
        _send({"op": "ready", "error": "%s: %s" % (type(e).__name__, e)})
        return
    _send({"op": "ready", "pid": _PID, "uid": os.getuid(), "python": sys.version.split()[0]})
    while True:
        try:
            msg = _recv()
        except EOFError:
            return
        op = msg.get("op")
        if op == "exec":
            _send(_run(msg))
        elif op == "tools":
            _set_tools(msg["tools"])
        elif op == "exit":
            return


def _in_child():
    # A child of user code must never speak the protocol: close the channel in it.
    for fd in (_IN, _OUT):
        try:
            os.close(fd)
        except OSError:
            pass


if __name__ == "__main__":
    _main(sys.argv[1:])
