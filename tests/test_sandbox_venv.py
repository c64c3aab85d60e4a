"""bwrap from a virtual environment under /tmp or /dev/shm (a common layout on CI runners).

The sandbox's private tmpfs /tmp used to be mounted over the interpreter prefix bound just before
it: bwrap failed with "execvp ...: No such file or directory" and get_sandbox() quietly handed out
the subprocess backend instead. Here a real venv is built in each place and real code runs in the
bwrap sandbox from it; /tmp inside must still be the sandbox's own, size-capped, and the venv in
it read-only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox_backends import REQUIRED, ensure_backend, skip_mark

INSIDE = """\
import asyncio, json, os, sys
from tao.sandbox import Limits, backend_problem, get_sandbox

CODE = '''
import json, os, sys
st = os.statvfs('/tmp')
try:
    open(sys.executable + '-planted', 'w')
    venv_writable = True
except OSError:
    venv_writable = False
open('/tmp/written-inside', 'w').write('x')
print(json.dumps({"executable": sys.executable, "tmp": sorted(os.listdir('/tmp')),
                  "tmp_bytes": st.f_blocks * st.f_frsize, "venv_writable": venv_writable,
                  "sum": sum(range(10))}))
'''

async def main():
    box = get_sandbox(limits=Limits(tmpfs_bytes=16 << 20))
    try:
        r = await box.execute(CODE)
    finally:
        await box.close()
    print(json.dumps({"problem": backend_problem("bwrap"), "kind": box.kind,
                      "stdout": r.stdout, "error": r.error}))

asyncio.run(main())
"""

PLACES = [pytest.param(base, id=base, marks=[m for m in [skip_mark("bwrap")] if m])
          for base in ("/tmp", "/dev/shm")]


@pytest.mark.parametrize("base", PLACES)
def test_bwrap_runs_code_from_a_venv_under(base: str) -> None:
    if not os.path.isdir(base) and "bwrap" not in REQUIRED:
        pytest.skip(f"no {base} here")
    ensure_backend("bwrap")
    where = Path(tempfile.mkdtemp(prefix="tao-venv-test-", dir=base))
    try:
        venv = where / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                        str(venv)], check=True, timeout=120)
        marker = Path(base) / f"host-only-{where.name}"
        marker.write_text("the host's own")
        # tao (and what it imports) as this interpreter has it, whatever its install layout
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        written = f"written-inside-{where.name}"
        run = subprocess.run([str(venv / "bin" / "python"), "-c",
                              INSIDE.replace("written-inside", written)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        outer = json.loads(run.stdout)
        assert outer["problem"] is None and outer["kind"] == "bwrap", outer
        assert outer["error"] is None, outer["error"]
        inner = json.loads(outer["stdout"])
        assert inner["executable"] == str(venv / "bin" / "python") and inner["sum"] == 45
        assert inner["venv_writable"] is False
        assert inner["tmp_bytes"] == 16 << 20  # the sandbox's own tmpfs, capped
        # the host's /tmp is not visible (its marker neither): only what the sandbox wrote, and
        # the mount point of the venv's folder when it lives under /tmp
        assert inner["tmp"] == sorted([written] + ([where.name] if base == "/tmp" else [])), inner
        assert not (Path("/tmp") / written).exists()  # nothing reached the host's /tmp
        marker.unlink()
    finally:
        shutil.rmtree(where, ignore_errors=True)
