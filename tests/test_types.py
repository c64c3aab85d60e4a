"""The doors, the run context and the factory type-check under mypy --strict (the files are
listed in pyproject.toml's [tool.mypy]): a door's signature that drifts from what its callers
pass fails here, not in a user's run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_doors_the_run_context_and_the_factory_type_check_strictly():
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert out.stdout.startswith("Success")
