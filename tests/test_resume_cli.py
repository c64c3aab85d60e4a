"""``tao run --journal``, killed with SIGKILL mid-run; ``tao runs`` lists it; ``tao resume``
continues it against the same real OpenAI-compatible server on 127.0.0.1 without asking the
model again what the journal holds; ``tao replay`` shows a recorded trace again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

try:
    from openai_server import OpenAIServer, Reply
except ImportError:  # tests/ became a package
    from .openai_server import OpenAIServer, Reply

MULTIPLY = Reply("", tool_calls=[("call_1", "calculator",
                                  '{"operation": "multiply", "a": 15, "b": 27}')])


def tao(*args, env, check=True):
    proc = subprocess.run([sys.executable, "-m", "tao", *args], capture_output=True, text=True,
                          env=env, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"tao {args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def env(tmp_path):
    with OpenAIServer() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TAO_"))}
        env.update(TAO_BASE_URL=server.url, TAO_MODEL="m", TAO_API_KEY="x",
                   TAO_DATA_DIR=str(tmp_path / "data"))
        yield env, server


def test_a_run_killed_after_its_first_reply_resumes_without_asking_the_model_again(env, tmp_path):
    env, server = env
    journal = tmp_path / "runs.db"
    server.push(MULTIPLY)
    # writes: the run's row, the model's reply (killed here, before the tool ran)
    killed = tao("run", "What is 15 * 27?", "--journal", str(journal), "--json",
                 env={**env, "TAO_TEST_KILL_AT": "2"}, check=False)
    assert killed.returncode == -9
    assert len(server.requests) == 1

    (run,) = json.loads(tao("runs", "--json", "--journal", str(journal), env=env).stdout)
    assert run["status"] == "running" and run["task"] == "What is 15 * 27?"

    server.push(Reply("15 * 27 = 405"))
    resumed = tao("resume", run["run_id"][:8], "--journal", str(journal), env=env)
    assert json.loads(resumed.stdout)["answer"] == "15 * 27 = 405"
    assert len(server.requests) == 2  # the first reply came from the journal
    (run,) = json.loads(tao("runs", "--json", "--journal", str(journal), env=env).stdout)
    assert run["status"] == "done"
    listed = tao("runs", "--journal", str(journal), env=env).stdout
    assert run["run_id"][:12] in listed and "done" in listed


def test_resume_of_a_run_that_is_not_there_says_so(env, tmp_path):
    env, _ = env
    missing = tao("resume", "abc", "--journal", str(tmp_path / "none.db"), env=env, check=False)
    assert missing.returncode == 2 and "no run journal" in missing.stderr


def test_replay_shows_a_recorded_trace_again(env, tmp_path):
    env, server = env
    trace = tmp_path / "run.jsonl"
    server.push(MULTIPLY, Reply("15 * 27 = 405"))
    tao("run", "What is 15 * 27?", "--trace", str(trace), "--json", env=env)
    shown = tao("replay", str(trace), env={**env, "COLUMNS": "100"}).stdout
    assert "calculator" in shown and "405" in shown


def test_a_run_killed_on_one_machine_is_resumed_by_tao_resume_from_postgresql(env, tmp_path,
                                                                             pg_url):
    """``--journal postgresql://...``: the killed run is in the database, not in a file of the
    machine that ran it; ``tao resume`` run from another folder and data directory (another
    machine, as far as tao can tell) continues it."""
    env, server = env
    server.push(MULTIPLY)
    killed = tao("run", "What is 15 * 27?", "--journal", pg_url, "--json",
                 env={**env, "TAO_TEST_KILL_AT": "2"}, check=False)
    assert killed.returncode == -9
    elsewhere = {**env, "TAO_DATA_DIR": str(tmp_path / "another-machine")}
    (run,) = [r for r in json.loads(tao("runs", "--json", "--journal", pg_url,
                                        env=elsewhere).stdout) if r["task"] == "What is 15 * 27?"]
    assert run["status"] == "running"
    server.push(Reply("15 * 27 = 405"))
    resumed = tao("resume", run["run_id"][:8], "--journal", pg_url, env=elsewhere)
    assert json.loads(resumed.stdout)["answer"] == "15 * 27 = 405"
    assert len(server.requests) == 2  # the first reply came from the journal in PostgreSQL
