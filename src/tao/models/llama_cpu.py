"""Which of llama.cpp's CPU weight layouts are safe here, decided before the weights load.

llama.cpp can move a model's weights into "extra" buffer types that its faster kernels read:
``CPU_REPACK`` (interleaved blocks for AVX2/AVX-512) and, on Xeons with AMX, ``AMX``. A
llama-cpp-python built by pip on such a Xeon compiles AMX in (``GGML_NATIVE``), and its AMX
matrix kernel faults on any batch of two or more tokens with the Q4_K_M weights tao ships
(ggml-org/llama.cpp#20824): every prompt is such a batch, so the process dies at its first run.

The choice rests on what the CPU says (``amx_int8`` in ``/proc/cpuinfo``) and what the build
says (``AMX_INT8 = 1`` in ``llama_print_system_info()``), never on a crash of the user's
process. When both are there, AMX is kept out:

- in the model's worker process (``local_worker``), by refusing the one system call that asks
  the kernel for the AMX tile state (``arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)``) with a
  seccomp filter before llama.cpp starts: llama.cpp then offers no AMX buffer type and keeps
  ``CPU_REPACK``, the fastest layout left (BENCHMARKS.md, "AMX");
- where that filter cannot be had, or in the caller's own process (``TAO_LOCAL_WORKER=0``,
  where a filter would also bind the user's code), with ``use_extra_bufts = false``, which
  drops ``CPU_REPACK`` too.

``TAO_LLAMA_AMX=1`` lets a build whose AMX kernels are fixed use them. Nothing here imports
llama_cpp at module level.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import struct
from collections.abc import Iterator
from dataclasses import dataclass

_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_AUDIT_ARCH_X86_64 = 0xC000003E


@dataclass(frozen=True)
class Layout:
    """How the weights are to be laid out: ``extra_bufts`` is llama.cpp's ``use_extra_bufts``;
    ``reason`` is said in ``LocalModel.stats()``."""

    extra_bufts: bool = True
    reason: str = "llama.cpp's default"


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The first processor's flags from ``/proc/cpuinfo`` (empty where there is none)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read(1 << 20)
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def build_has_amx(system_info: str) -> bool:
    """Whether this llama.cpp build has its AMX kernels in (``AMX_INT8 = 1``)."""
    return "AMX_INT8 = 1" in system_info


def amx_allowed(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("TAO_LLAMA_AMX", "").strip().lower() in ("1", "on", "true", "yes")


def choose(flags: set[str], system_info: str, *, amx_denied: bool,
           env: dict[str, str] | None = None) -> Layout:
    """The layout for a CPU with ``flags`` and a build that reports ``system_info``;
    ``amx_denied``: this process already refuses itself the AMX permission (the worker's
    filter, loaded on the CPU's flags alone: harmless where the build has no AMX)."""
    if not ("amx_int8" in flags and build_has_amx(system_info)):
        return Layout()
    if amx_allowed(env):
        return Layout(reason="AMX on (TAO_LLAMA_AMX=1)")
    if amx_denied:
        return Layout(reason="AMX off, CPU_REPACK kept (llama.cpp#20824)")
    return Layout(extra_bufts=False, reason="extra buffer types off (llama.cpp#20824)")


def amx_filter() -> bytes:
    """A seccomp program: ``arch_prctl(ARCH_REQ_XCOMP_PERM, ...)`` fails with EPERM, every
    other call is allowed (a foreign architecture's calls too: this guards, it confines
    nothing)."""
    def insn(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    ld, jeq, ret = 0x20, 0x15, 0x06
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    return b"".join([
        insn(ld, 0, 0, 4), insn(jeq, 0, 5, _AUDIT_ARCH_X86_64),    # seccomp_data.arch
        insn(ld, 0, 0, 0), insn(jeq, 0, 3, _ARCH_PRCTL),           # seccomp_data.nr
        insn(ld, 0, 0, 16), insn(jeq, 0, 1, _ARCH_REQ_XCOMP_PERM),  # low half of args[0]
        insn(ret, 0, 0, eperm),
        insn(ret, 0, 0, allow),
    ])


def can_deny_amx() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64") and os.name == "posix"


def deny_amx() -> bool:
    """Load ``amx_filter`` into this process (a worker's, never the user's). False where the
    kernel refuses it; the caller then turns the extra buffer types off instead."""
    if not can_deny_amx():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    prog = amx_filter()
    n = len(prog) // 8
    buf = ctypes.create_string_buffer(prog, len(prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(n, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, as seccomp wants unprivileged
        return False
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, MODE_FILTER


def amx_permission_denied() -> bool:
    """Whether asking for the AMX tile state fails with EPERM here (the filter is on)."""
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, 18)
    return rc != 0 and ctypes.get_errno() == 1


@contextlib.contextmanager
def model_params(layout: Layout) -> Iterator[None]:
    """While a ``Llama`` is built inside: its model parameters with ``layout``'s
    ``use_extra_bufts`` (llama-cpp-python 0.3.36 takes no argument for it). Callers hold the
    load lock, so no other load sees the patch."""
    import llama_cpp.llama as llama_module

    if layout.extra_bufts:
        yield
        return
    low = llama_module.llama_cpp
    original = low.llama_model_default_params

    def params() -> object:
        p = original()
        p.use_extra_bufts = False
        return p

    low.llama_model_default_params = params
    try:
        yield
    finally:
        low.llama_model_default_params = original
