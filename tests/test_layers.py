"""The rooms of src/tao form layers (DESIGN.md): a room imports only rooms below it - imports
inside functions included - so there is no circle between rooms and nothing below the CLI
imports it. import-linter reads every import; the contract is in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["importlinter"]["contracts"][0]


def test_every_room_of_tao_has_its_place_in_the_layers():
    named = {m.strip().removeprefix("tao.") for layer in contract()["layers"]
             for m in layer.split("|")}
    rooms = {p.stem if p.is_file() else p.name for p in (ROOT / "src" / "tao").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert rooms - named == set(), "a room with no layer would escape the check: add it"


def test_no_room_imports_a_room_above_it():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout
