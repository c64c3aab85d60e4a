"""A seccomp-BPF filter that denies sockets (and a few escape hatches), built without libseccomp.

Why hand-written: the filter is a short deny list, and emitting the BPF directly needs no C
library inside or outside the sandbox; bwrap loads it with ``--seccomp FD``, the subprocess and
Docker workers load the same bytes with ``prctl``. The program:

1. kills the process if the syscall is not from the native architecture (no i386 ``int 0x80``
   ``socketcall`` detour) and denies the x32 ABI range on x86-64;
2. answers ``EPERM`` for ``socket`` (the sandbox has no network: not TCP, not Unix sockets such as
   a Docker socket; ``socketpair`` stays, it reaches nothing), ``io_uring`` (it can open sockets
   behind seccomp's back), namespace and mount calls, ``ptrace``/``process_vm_*``, ``bpf``,
   ``perf_event_open``, keyrings, module loading, ``open_by_handle_at`` and other host-level calls;
3. denies ``clone`` with namespace flags and answers ``ENOSYS`` for ``clone3`` (whose flags BPF
   cannot read), so libc falls back to ``clone``;
4. allows everything else.
"""

from __future__ import annotations

import errno
import functools
import platform
import struct

_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_KILL_PROCESS = 0x80000000
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000

_CLONE_NS_FLAGS = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

# name: (x86_64, aarch64)
_DENIED = {
    "socket": (41, 198),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "unshare": (272, 97), "setns": (308, 268),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "acct": (163, 89), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "syslog": (103, 116),
}
_CLONE = (56, 220)
_CLONE3 = (435, 435)
_ARCHES = {"x86_64": (0, 0xC000003E), "amd64": (0, 0xC000003E),
           "aarch64": (1, 0xC00000B7), "arm64": (1, 0xC00000B7)}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def supported(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in _ARCHES


@functools.cache
def build_filter(machine: str | None = None) -> bytes:
    """The filter as raw ``struct sock_filter`` bytes, ready for bwrap ``--seccomp`` or prctl."""
    machine = (machine or platform.machine()).lower()
    if machine not in _ARCHES:
        raise ValueError(f"no seccomp filter for architecture {machine!r}")
    col, arch = _ARCHES[machine]
    eperm = _ERRNO | errno.EPERM
    prog = [
        _insn(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _insn(_JEQ, 1, 0, arch),
        _insn(_RET, 0, 0, _KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if col == 0:  # x32 syscalls carry bit 30
        prog += [_insn(_JGE, 0, 1, 0x40000000), _insn(_RET, 0, 0, eperm)]
    for numbers in _DENIED.values():
        prog += [_insn(_JEQ, 0, 1, numbers[col]), _insn(_RET, 0, 0, eperm)]
    prog += [_insn(_JEQ, 0, 1, _CLONE3[col]), _insn(_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    prog += [
        _insn(_JEQ, 0, 3, _CLONE[col]),
        _insn(_LD_W_ABS, 0, 0, 16),  # low 32 bits of args[0]: the clone flags
        _insn(_JSET, 0, 1, _CLONE_NS_FLAGS),
        _insn(_RET, 0, 0, eperm),
        _insn(_RET, 0, 0, _ALLOW),
    ]
    return b"".join(prog)
