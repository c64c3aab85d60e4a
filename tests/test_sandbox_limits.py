"""Limits of the sandbox *as a whole*, with real hostile code in the real sandboxes: forked memory
hogs under one memory cap, a fork storm under one process cap, a disk filler under the workspace
cap. The cap holds (read from the cgroup's own counters), the host stays usable, the observation
says which limit was hit, and the sandbox's next execution works.

They need what the machine must give for such caps - a cgroup of the sandbox's own (root, or a
delegated cgroup v2 subtree) and a tmpfs workspace (root) - and skip without it, saying what is
missing; with ``TAO_REQUIRE_SANDBOX=...,limits`` (CI) they fail instead.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tao.sandbox import Limits, cgroups, get_sandbox
from tao.sandbox import confinement as confinement_module
from tao.sandbox.cgroups import CgroupUnavailable, Counters, Parent, SandboxCgroup

from sandbox_backends import backend_params, ensure_backend, ensure_limits

MiB = 1 << 20


@pytest.fixture(params=backend_params(("bwrap", "subprocess")))
def kind(request: pytest.FixtureRequest) -> str:
    ensure_backend(request.param)
    return request.param


async def _capped(kind: str, **limits):
    box = get_sandbox(kind, limits=Limits(**limits))
    try:
        ensure_limits(box)
    except BaseException:
        await box.close()
        raise
    return box


def _mount_of(path: Path) -> tuple[str, str] | None:
    """(fstype, options) of the mount whose mount point is ``path``."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if left.split()[4] == str(path):
            fstype, _, options = right.split()
            return fstype, options
    return None


HOGS = """\
import os, struct, time
hold_r, hold_w = os.pipe()    # every child holds its memory until the parent closes hold_w
ready_r, ready_w = os.pipe()  # a child writes its pid once its 600 MB are touched
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(hold_w)
        hog = b'x' * (600 << 20)
        os.write(ready_w, struct.pack('i', os.getpid()))
        os.read(hold_r, 1)
        os._exit(0)
    children.append(pid)
os.close(hold_r); os.close(ready_w)
os.set_blocking(ready_r, False)
ready, dead, deadline = set(), {}, time.monotonic() + 30
while set(children) - ready - set(dead) and time.monotonic() < deadline:
    try:
        ready |= {n for (n,) in struct.iter_unpack('i', os.read(ready_r, 64))}
    except BlockingIOError:
        pass
    for p in set(children) - set(dead):
        done, status = os.waitpid(p, os.WNOHANG)
        if done:
            dead[p] = os.waitstatus_to_exitcode(status)
    time.sleep(0.05)
os.close(hold_w)              # the survivors held 600 MB each at the same time; now they may go
print([dead[p] if p in dead else os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in children])
"""


async def test_forked_memory_hogs_share_one_memory_cap(kind: str) -> None:
    box = await _capped(kind, memory_bytes=1 << 30)
    try:
        r = await box.execute(HOGS, timeout=60)
        codes = ast.literal_eval(r.stdout)  # the exit codes the worker saw for its 4 children
        assert codes.count(-signal.SIGKILL) == 3, r  # held together, 2 x 600 MB cannot fit in 1 GiB
        assert box.cgroup.peak_bytes() <= 1 << 30  # the kernel's own high-water mark
        assert r.limits_hit == ("memory",) and r.killed_reason is None, r
        obs = r.to_observation()
        assert "memory limit of 1 GiB (all its processes and tmpfs files together) was reached" \
            in obs and "killed 3 of its processes" in obs, obs
        again = await box.execute("print('still here')")
        assert again.stdout == "still here\n" and again.limits_hit == ()
    finally:
        await box.close()


async def test_the_worker_killed_at_the_memory_cap_is_named_and_restarted(kind: str) -> None:
    """Files in the tmpfs workspace are memory too: 496 MiB of them plus 600 MB in the worker
    do not fit in 1 GiB. The worker itself is the one killed, and the reason says why."""
    box = await _capped(kind, memory_bytes=1 << 30, workspace_bytes=512 * MiB)
    try:
        r = await box.execute("for i in range(8):  # files of at most max_file_bytes each\n"
                              "    open(f'data{i}.bin', 'wb').write(b'd' * (62 << 20))\n"
                              "held = b'x' * (600 << 20)", timeout=60)
        assert r.killed_reason.startswith("The sandbox worker was killed by the out-of-memory "
                                          "killer: the sandbox's memory limit of 1 GiB"), r
        assert "memory" in r.limits_hit
        assert box.cgroup.peak_bytes() <= 1 << 30
        again = await box.execute("import os\n"
                                  "sum(os.path.getsize(f'data{i}.bin') for i in range(8)) >> 20")
        assert again.restarted and again.stdout == "496\n", again  # the files outlived the worker
    finally:
        await box.close()


STORM = """\
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


async def test_a_fork_storm_stops_at_the_process_cap_and_the_host_still_spawns(kind: str) -> None:
    box = await _capped(kind, max_processes=32)
    current = Path(box.cgroup.pids_dir, "pids.current")
    seen: list[int] = []
    spawned: list[int] = []

    async def watch_and_spawn() -> None:
        while True:
            seen.append(int(current.read_text()))
            proc = await asyncio.create_subprocess_exec("true")  # the host forks meanwhile
            spawned.append(await proc.wait())
            await asyncio.sleep(0.02)

    try:
        await box.start()
        watcher = asyncio.ensure_future(watch_and_spawn())
        try:
            r = await box.execute(STORM, timeout=2)
        finally:
            watcher.cancel()
        assert r.timed_out and "processes" in r.limits_hit, r
        assert max(seen) <= 32 and len(spawned) >= 5 and set(spawned) == {0}, (seen, spawned)
        assert "process limit (32 processes and threads together) was reached" in \
            r.to_observation()
        assert subprocess.run(["true"], timeout=10).returncode == 0  # and right after
        assert box.cgroup.members() == [] or len(box.cgroup.members()) == 1  # the storm is gone
        again = await box.execute("print('calm')")
        assert again.restarted and again.stdout == "calm\n" and again.limits_hit == ()
    finally:
        await box.close()


FILLER = """\
with open('fill.bin', 'wb') as f:
    while True:
        f.write(b'z' * (1 << 20))
"""


async def test_a_disk_filler_stops_at_the_workspace_cap(kind: str) -> None:
    box = await _capped(kind, workspace_bytes=32 * MiB)
    try:
        fstype, options = _mount_of(box.workspace)  # a tmpfs of its own: the host's disk is
        assert fstype == "tmpfs" and "size=32768k" in options  # never written
        r = await box.execute(FILLER)
        assert r.error.splitlines()[-1] == "OSError: [Errno 28] No space left on device", r
        assert r.limits_hit == ("workspace",)
        assert "The workspace is full: its limit of 32 MiB was reached" in r.to_observation()
        assert (box.workspace / "fill.bin").stat().st_size <= 32 * MiB  # the host reads it
        r = await box.execute("import os\nos.remove('fill.bin')\n"
                              "open('note.txt', 'w').write('room again')")
        assert r.ok and r.limits_hit == (), r
        assert (box.workspace / "note.txt").read_text() == "room again"
    finally:
        await box.close()


async def test_workspace_files_survive_a_timeout_restart(kind: str) -> None:
    box = await _capped(kind)
    try:
        await box.execute("open('result.txt', 'w').write('written before the timeout')")
        r = await box.execute("import time; time.sleep(30)", timeout=0.5)
        assert r.timed_out and r.limits_hit == ("timeout",)
        assert (box.workspace / "result.txt").read_text() == "written before the timeout"
        again = await box.execute("print(open('result.txt').read())")
        assert again.restarted and again.stdout == "written before the timeout\n"
    finally:
        await box.close()


async def test_cgroups_and_workspace_mount_are_gone_after_close_and_after_a_lost_sandbox(
        kind: str) -> None:
    box = await _capped(kind)
    dirs, ws = box.cgroup.dirs, box.workspace
    await box.execute("import subprocess\n"
                      "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                      "import time; time.sleep(30)", timeout=0.5)
    await box.close()
    assert not any(os.path.exists(d) for d in dirs) and not ws.exists()
    assert _mount_of(ws) is None

    box = await _capped(kind)
    dirs, ws = box.cgroup.dirs, box.workspace
    await box.execute("x = 1")
    del box  # never closed: the finalizer cleans up
    gc.collect()
    assert not any(os.path.exists(d) for d in dirs) and not ws.exists()


async def test_per_process_limits_are_named(kind: str) -> None:
    box = await _capped(kind, max_file_bytes=4 * MiB, max_open_files=64, tmpfs_bytes=8 * MiB)
    try:
        r = await box.execute("x = bytearray(8 << 30)")
        assert r.limits_hit == ("address_space",)
        # an eighth below the whole-sandbox cap, so that one process's MemoryError comes first
        assert "One process may use at most 896 MiB of address space" in r.to_observation()
        grow = "a = []\nwhile True:\n    a.append(bytearray(64 << 20))"
        r = await box.execute(grow, timeout=30)  # never the cgroup's OOM killer, never a stall
        assert r.limits_hit == ("address_space",) and not r.timed_out, r
        assert r.killed_reason is None and "MemoryError" in r.error, r
        r = await box.execute("open('big.bin', 'wb').write(b'0' * (8 << 20))")
        assert r.limits_hit == ("file_size",) and "at most 4 MiB" in r.to_observation()
        r = await box.execute("files = [open('/dev/null') for _ in range(100)]")
        assert r.limits_hit == ("open_files",) and "at most 64 files" in r.to_observation()
        if kind == "bwrap":  # its own /tmp, capped at tmpfs_bytes
            r = await box.execute("for i in range(10):\n"
                                  "    open(f'/tmp/{i}', 'wb').write(b'0' * (3 << 20))",
                                  timeout=30)
            assert r.limits_hit == ("tmpfs",), r
            assert "/tmp or /dev/shm is full: each holds at most 8 MiB" in r.to_observation()
    finally:
        await box.close()


async def test_without_a_cgroup_the_sandbox_says_so_and_keeps_its_rlimits(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no cgroup can be had (not root, no delegation), the per-process limits remain and
    describe() says that the whole-sandbox cap is missing and why - never pretends."""
    def unavailable():
        raise CgroupUnavailable("cgroup v1 not writable: needs root")

    monkeypatch.setattr(confinement_module, "cgroup_setup", unavailable)
    async with get_sandbox(kind, limits=Limits(max_processes=16)) as box:
        assert box.cgroup is None
        text = box.describe()
        assert " · no whole-sandbox cap (cgroup v1 not writable: needs root): per process " \
               "only, 1 GiB address space, 16 processes · workspace " in text, text
        r = await box.execute("import os, time\nn = 0\ntry:\n    while True:\n"
                              "        if os.fork() == 0:\n            time.sleep(30)\n"
                              "            os._exit(0)\n        n += 1\nexcept OSError:\n"
                              "    print('refused after', n)\n    raise")
        if os.geteuid() == 0 or kind == "bwrap":  # RLIMIT_NPROC counts the sandbox's own uid
            assert int(r.stdout.split()[-1]) < 16, r
            assert r.limits_hit == ("process_rlimit",), r


def test_describe_names_the_confinement_in_force(kind: str) -> None:
    box = get_sandbox(kind)
    try:
        text = box.describe()
        assert text.startswith(kind)
        if box.cgroup is not None:
            assert f"cgroup v{box.cgroup.version}: memory 1 GiB, 64 processes for the whole " \
                   "sandbox" in text
        if box.workspace_bytes is not None:
            assert text.endswith("workspace tmpfs 512 MiB")
        else:
            assert text.endswith("workspace not size-capped: needs root")
    finally:
        asyncio.run(box.close())


def test_cgroup_v2_files_on_a_stand_in_tree(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The cgroup v2 path, which this (v1) machine cannot run for real: the controllers it
    enables, the files it writes, the counters it reads. A plain folder stands in for cgroupfs."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("cpu\n")
    monkeypatch.setattr(cgroups, "_mounts", lambda: (("cgroup2", "/", str(root), frozenset()),))
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": "/"})
    parent = cgroups._v2_parent()
    assert parent == Parent(2, str(root), str(root))
    assert (root / "cgroup.subtree_control").read_text() == "+memory +pids"
    cg = SandboxCgroup(parent, 256 * MiB, 16)
    d = Path(cg.memory_dir)
    assert d.parent == root and d.name.startswith(f"tao-{os.getpid()}-")
    assert (d / "memory.max").read_text() == str(256 * MiB)
    assert (d / "memory.swap.max").read_text() == "0" and (d / "pids.max").read_text() == "16"
    assert cg.describe() == "cgroup v2: memory 256 MiB, 16 processes for the whole sandbox"
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
    (d / "pids.events").write_text("max 5\n")
    (d / "memory.peak").write_text("1234\n")
    assert cg.new_events() == Counters(oom_kills=2, forks_refused=5)
    assert cg.new_events() == Counters(0, 0)  # per execution: only what is new
    assert cg.peak_bytes() == 1234
    (root / "cgroup.controllers").write_text("cpu io\n")
    with pytest.raises(CgroupUnavailable, match="no memory/pids controllers"):
        cgroups._v2_parent()
