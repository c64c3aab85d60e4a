"""The run journal in PostgreSQL (issue 29, point 1): ``journal="postgresql://..."``,
``--journal URL`` and ``TAO_JOURNAL=URL`` keep the same records as the SQLite file, so any
machine that reaches the server lists a run, and resumes one that another machine's process
left when it was SIGKILLed - every side effect still paid once. Against a real PostgreSQL
(pgserver, from the test extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

psycopg = pytest.importorskip("psycopg")

import resume_scripts
from test_resume_kill import counters, killer, server  # noqa: F401

from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.runs import Journal
from tao.runs.journal import JournalError


def database(pg_url: str, name: str) -> str:
    """A fresh database on the test server: the URL of ``name``."""
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}"')
        db.execute(f'CREATE DATABASE "{name}"')
    head, _, query = pg_url.partition("?")
    return head.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")


def test_a_run_journaled_in_postgresql_is_read_back_from_another_connection(pg_url):
    url = database(pg_url, "listed")
    agent = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=40, b=2), "42"]),
                       [calculator], journal=url)
    result = agent.run("40 + 2?")
    elsewhere = Journal(url)  # what another machine opens
    [run] = elsewhere.runs()
    assert (run["status"], run["task"], run["agent"]) == ("done", "40 + 2?", "react")
    kinds = [r["kind"] for r in elsewhere.records(run["run_id"])]
    assert kinds == ["model", "tool.start", "tool.result", "model"]
    assert result.answer == "42" and elsewhere.find(run["run_id"][:8])["run_id"] == run["run_id"]
    # the journal serves the run again: no model is asked
    again = ReActAgent(ScriptedModel([]), [calculator], journal=url).resume(run["run_id"])
    assert again.answer == "42" and again.status == "done"


def test_tao_runs_lists_a_postgresql_journal(pg_url):
    url = database(pg_url, "cli")
    ReActAgent(ScriptedModel(["hi"]), journal=url).run("say hi")
    out = subprocess.run([sys.executable, "-m", "tao", "runs", "--journal", url, "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    [run] = json.loads(out.stdout)
    assert run["task"] == "say hi" and run["status"] == "done"
    env = {**os.environ, "TAO_JOURNAL": url}
    out = subprocess.run([sys.executable, "-m", "tao", "runs", "--json"], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0 and json.loads(out.stdout)[0]["run_id"] == run["run_id"]


def test_a_server_that_cannot_be_reached_is_a_clear_error_without_the_password():
    bad = "postgresql://tao:s3cret@127.0.0.1:1/none?connect_timeout=2"
    with pytest.raises(JournalError, match="cannot open the run journal at postgresql://tao:\\*\\*\\*@") \
            as caught:
        Journal(bad).check()
    assert "s3cret" not in str(caught.value)
    out = subprocess.run([sys.executable, "-m", "tao", "runs", "--journal", bad],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2 and "cannot open the run journal" in out.stderr
    assert "s3cret" not in out.stderr


def test_killed_at_each_journal_boundary_and_resumed_from_postgresql(server, pg_url, tmp_path):  # noqa: F811
    """The 5-tool run SIGKILLed right after each of its journal writes, in a process of its
    own (another machine, as far as the journal knows), then resumed here: the answer is the
    uninterrupted run's and each payment was made once."""
    clean_fx, clean_url = tmp_path / "clean", database(pg_url, "clean")
    clean_fx.mkdir()
    answer = resume_scripts.go("react", clean_url, str(clean_fx))
    clean = counters(clean_fx)
    assert set(clean.values()) == {1} and len(clean) == 4
    [run] = Journal(clean_url).runs()
    writes = len(Journal(clean_url).records(run["run_id"])) + 2  # + the run's row, its end
    kill = killer(server)
    for k in range(1, writes + 1):
        url, effects = database(pg_url, f"kill{k}"), tmp_path / f"fx{k}"
        effects.mkdir()
        assert kill("react", url, effects, k), f"not killed after write {k}"
        got = resume_scripts.go("react", url, str(effects))
        assert got == answer, f"killed after write {k}: {got!r}"
        assert counters(effects) == clean, f"killed after write {k}"
        [run] = Journal(url).runs()
        assert run["status"] == "done"
