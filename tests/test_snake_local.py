"""Seed 002's snake demo through the coding agent ``tao code`` builds, on the embedded model, with
the page judged in headless Chromium (benchmarks/snake_local.py does it N times; BENCHMARKS.md).

Slow (one run, up to 6 turns of up to 512 tokens: ~5 min on 2 cores):
``flock /tmp/tao-model.lock python -m pytest -m local_model tests/test_snake_local.py -s``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import snake_local  # noqa: E402 - benchmarks/ is not a package

MAX_TURNS = 6  # three files and a Finish need 4; tao code's own budget (15) is too long for CI


@pytest.mark.local_model
@pytest.mark.xfail(strict=True, reason=(
    "Qwen2.5-Coder-0.5B skips the closing ``` after a file and writes the Observation itself, "
    "copying the worked example; the reply runs to max_tokens, so the block is never closed and "
    "nothing is written (4 turns of tao code, 0 files, measured 2026-12-01). Strict: once the "
    "agent gets there, this fails as XPASS and the mark must go."))
def test_tao_code_writes_the_snake_game_in_three_write_file_turns_and_finishes(local_model, tmp_path):
    # local_model is LocalModel() with its defaults, the model tao code --model local runs
    run = snake_local.one_run(local_model, seed=0, folder=tmp_path / "workspace",
                              max_turns=MAX_TURNS, check_timeout_s=120)
    print("\n" + snake_local.row(1, run))  # the benchmark's row, in the test log
    assert run.write_turns >= 3, run.written
    assert {"index.html", "style.css", "game.js"} <= set(run.files), run.files
    assert run.finished, run.status
