"""Seed 002's snake demo through ``tao code`` on the default embedded model (the 1.5B), the page
judged in headless Chromium - issue 10's point 6 (benchmarks/snake_local.py does it N times;
BENCHMARKS.md has the numbers).

Slow (one run, 4 turns, 1.5-6 min on 2 cores as the load goes; the model loads at 8,192 tokens of context, as
tao code loads it):
``flock /tmp/tao-model.lock python -m pytest -m local_model tests/test_snake_local.py -s``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import snake_local  # noqa: E402 - benchmarks/ is not a package

MAX_TURNS = 8  # three files and a Finish need 4; tao code's own budget (15) is longer than CI needs


@pytest.mark.local_model
def test_tao_code_writes_a_snake_game_that_plays_in_the_browser(tmp_path, monkeypatch):
    from tao.cli.code import for_coding
    from tao.models.local import LocalModel

    # no saved prompt prefixes from earlier runs: the test is the same run wherever it starts
    monkeypatch.setenv("TAO_KV_CACHE", "0")

    model = for_coding(LocalModel())  # what `tao code TASK` runs: greedy, room for a whole file
    folder = tmp_path / "workspace"
    run = snake_local.one_run(model, seed=0, folder=folder, max_turns=MAX_TURNS, check_timeout_s=120)
    print("\n" + snake_local.row(1, run))  # the benchmark's row, in the test log
    # what every run must do: tao code on the real model ends by itself (an answer or the turn
    # budget, never an error), writes the page into the workspace, and the browser judge gives
    # a verdict (the judge's screenshot and log lie beside the workspace, by design)
    assert run.status in ("done", "max_turns"), (run.status, run.error)
    assert run.write_turns >= 1 and "index.html" in run.files, run.written
    assert (folder / "index.html").is_file()
    assert run.check is not None and run.check.reason
    # what issue 10 asks of the model: three files in >= 3 write_file turns, a Finish, a page
    # whose arrow keys move the game. 5 of 5 runs did it on a quiet machine (2026-12-03,
    # BENCHMARKS.md: "Seed 002's snake task"), and greedy runs now repeat exactly (the system
    # prompt no longer holds the untrusted-content nonce), so a miss here is a real regression
    assert run.write_turns >= 3 and {"index.html", "style.css", "game.js"} <= set(run.files), run.written
    assert run.finished, (run.status, run.answer)
    assert run.check.ok, run.check.reason
