"""Who the sandboxed code runs as, and how everything it started is killed.

As root, sandboxed code must not stay root: capabilities aside, the kernel ignores RLIMIT_NPROC for
real uid 0 (a fork bomb would not be stopped), and root reads every file. Each sandbox therefore
gets a fresh, otherwise unused uid/gid (no passwd entry needed). Because that uid owns nothing but
the sandbox's processes, "kill everything of this uid" (``kill(-1)`` sent *as* that uid) finds
children that escaped the process group with ``setsid`` - the subprocess backend needs that;
bwrap's pid namespace does it by itself. Not root: the code runs as the invoking user (bwrap maps
it into a user namespace, where RLIMIT_NPROC counts only the sandbox's processes).
"""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from pathlib import Path

UID_BASE = 1_500_000_000
UID_SPAN = 500_000_000


def sandbox_uid() -> int | None:
    """A fresh unprivileged uid (used as the gid too) when tao runs as root, else ``None``.
    ``TAO_SANDBOX_UID`` fixes it (e.g. to a uid your policy knows)."""
    if os.geteuid() != 0:
        return None
    fixed = os.environ.get("TAO_SANDBOX_UID")
    if fixed:
        return int(fixed)
    return UID_BASE + secrets.randbelow(UID_SPAN)


def usable_by_others(path: str | os.PathLike[str]) -> bool:
    """Whether a uid with no special rights can reach and run ``path`` (every directory above it
    searchable by 'other', the file itself readable and executable)."""
    p = Path(os.path.realpath(path))
    try:
        for parent in reversed(p.parents):
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(p).st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IROTH and mode & stat.S_IXOTH)


def kill_uid(uid: int, python: str) -> None:
    """SIGKILL every process of ``uid`` (sent as that uid, so nothing else can be hit). Only a
    process of that uid (or root) can create another, so if none is left now, none will be."""
    if not pids_of_uid(uid):
        return
    try:
        subprocess.run([python, "-I", "-S", "-c", "import os; os.kill(-1, 9)"], user=uid,
                       group=uid, extra_groups=[], env={}, cwd="/", timeout=10,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        pass


def _status_of_uid(uid: int) -> dict[int, int]:
    """{pid: thread count} of the processes whose real uid is ``uid``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except (OSError, ValueError):
            continue
        if int(fields.get("Uid", "-1 ").split()[0]) == uid:
            found[int(entry)] = int(fields.get("Threads", "1").strip() or 1)
    return found


def pids_of_uid(uid: int) -> list[int]:
    """Processes whose real uid is ``uid`` (tests use it to prove nothing was left behind)."""
    return sorted(_status_of_uid(uid))


def tasks_of_uid(uid: int) -> int:
    """Threads of ``uid`` now: what RLIMIT_NPROC counts."""
    return sum(_status_of_uid(uid).values())


def prepare_workspace(path: Path, uid: int | None) -> None:
    """Give the workspace to the sandbox's uid (only the folder itself: files already in it keep
    their owner, so the sandbox can read but not overwrite them)."""
    if uid is not None:
        os.chown(path, uid, uid)
        os.chmod(path, 0o700)
