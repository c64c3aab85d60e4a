"""``tao code`` and ``tao chat`` take ``--journal`` as ``tao run`` does, and ``tao resume``
continues their runs: ``tao code`` again as it was started (its options, its folder, tao.toml
applying again), a ``tao chat`` answer again with the conversation, agent and model it had. The
model is a ScriptedModel (``tao.cli.resolve_model`` patched); a "crash" is a KeyboardInterrupt
raised by the model, which leaves the run "running" in the journal, as kill -9 would."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

import tao.cli as cli
from tao import ScriptedModel
from tao.runs.journal import Journal

runner = CliRunner()


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("TAO_JOURNAL", raising=False)
    return tmp_path


@pytest.fixture
def models(monkeypatch):
    """``models[spec] = model`` is what ``--model spec`` (or ``/model spec``) resolves to; the
    specs resolved are kept in ``models["resolved"]``."""
    table: dict = {"resolved": []}

    def resolve(spec="auto", timeout=None):
        table["resolved"].append(spec)
        if spec not in table:
            raise ValueError(f"unknown model {spec!r}")
        return table[spec]

    monkeypatch.setattr(cli, "resolve_model", resolve)
    return table


def crash(messages):
    raise KeyboardInterrupt  # the process dies while the model is asked


def write(path: str, content: str) -> str:
    return f"Thought: write {path}\nAction: write_file【{path}】\n```\n{content}\n```"


def echo(messages):
    return "seen: " + " | ".join(m.content for m in messages[1:])


def test_tao_code_journals_its_run_and_tao_resume_continues_it_where_it_ran(
        models, workdir, monkeypatch):
    project, elsewhere = workdir / "project", workdir / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    (project / "tao.toml").write_text('workspace = "site"\n')
    journal = workdir / "runs.db"
    monkeypatch.chdir(project)
    models["auto"] = ScriptedModel([write("a.txt", "A"), crash])
    res = runner.invoke(cli.app, ["code", "Write a.txt and b.txt", "--sandbox", "none",
                                  "--journal", str(journal)])
    assert res.exit_code == 130, res.output
    assert (project / "site" / "a.txt").read_text() == "A"
    [run] = Journal(journal).runs()
    assert (run["status"], run["task"]) == ("running", "Write a.txt and b.txt")
    # the options given, not the defaults: tao.toml's workspace holds again on resume
    assert run["meta"]["argv"] == ["code", "--sandbox", "none"]
    assert run["meta"]["cwd"] == str(project)

    monkeypatch.chdir(elsewhere)  # resumed from another folder: it runs where it ran
    model = ScriptedModel([write("b.txt", "B"), "Thought: done\nAction: Finish【wrote both】"])
    models["auto"] = model
    res = runner.invoke(cli.app, ["resume", run["run_id"][:8], "--journal", str(journal)])
    assert res.exit_code == 0, res.output
    assert len(model.calls) == 2  # the first reply and its write came from the journal
    assert "a.txt" in model.calls[0][-1].content  # the served observation, in the history
    assert (project / "site" / "b.txt").read_text() == "B"
    assert (project / "site" / "a.txt").read_text() == "A"
    assert not (elsewhere / "site").exists() and os.getcwd() == str(elsewhere)
    [run] = Journal(journal).runs()
    assert run["status"] == "done"


def test_tao_chat_journals_each_answer_and_tao_resume_answers_it_again_with_the_conversation(
        models, workdir):
    journal = workdir / "runs.db"
    models["auto"] = ScriptedModel(["Paris."])
    models["openai:other"] = ScriptedModel([crash])
    typed = "Capital of France?\n/model openai:other\nWhich city did I ask about?\n/exit\n"
    res = runner.invoke(cli.app, ["chat", "--journal", str(journal), "--max-turns", "4"],
                        input=typed)
    assert res.exit_code == 0, res.output
    assert "Stopped." in res.stdout
    second, first = Journal(journal).runs()  # newest first
    assert (first["task"], first["status"]) == ("Capital of France?", "done")
    assert (second["task"], second["status"]) == ("Which city did I ask about?", "running")
    assert second["meta"]["argv"] == ["chat", "--max-turns", "4"]
    assert (second["meta"]["agent"], second["meta"]["model"]) == ("react", "openai:other")
    assert [m["content"] for m in second["meta"]["history"]] == ["Capital of France?", "Paris."]

    listed = runner.invoke(cli.app, ["runs", "--journal", str(journal)])
    assert listed.exit_code == 0 and second["run_id"][:12] in listed.stdout

    models["resolved"].clear()
    models["openai:other"] = model = ScriptedModel([echo])
    res = runner.invoke(cli.app, ["resume", second["run_id"][:8], "--journal", str(journal)])
    assert res.exit_code == 0, res.output
    assert models["resolved"] == ["openai:other"]  # the model the answer was asked of
    assert [m.content for m in model.calls[0][1:]] == ["Capital of France?", "Paris.",
                                                       "Which city did I ask about?"]
    assert "seen: Capital of France? | Paris. | Which city did I ask about?" in \
        " ".join(res.stdout.split())
    assert "What should the agent do?" not in res.stdout  # one answer, then it ends
    statuses = {r["run_id"]: r["status"] for r in Journal(journal).runs()}
    assert statuses == {first["run_id"]: "done", second["run_id"]: "done"}


def test_resume_refuses_runs_it_cannot_start_again_and_chat_needs_the_journal(models, workdir):
    from tao import ReActAgent

    journal = workdir / "runs.db"
    ReActAgent(ScriptedModel(["42"]), journal=journal).run("What is 6 * 7?")  # from Python
    [run] = Journal(journal).runs()
    res = runner.invoke(cli.app, ["resume", run["run_id"], "--journal", str(journal)])
    assert res.exit_code == 2
    assert "not started by `tao run`, `tao code` or `tao chat`" in " ".join(res.stderr.split())

    models["auto"] = ScriptedModel([])
    res = runner.invoke(cli.app, ["chat", "--resume-run", run["run_id"]])
    assert res.exit_code == 2 and "--resume-run needs the journal" in res.stderr
    res = runner.invoke(cli.app, ["chat", "--resume-run", run["run_id"], "--journal", str(journal)])
    assert res.exit_code == 2 and "is not an answer of tao chat" in res.stderr
    assert "--journal" in runner.invoke(cli.app, ["code", "--help"]).stdout
    assert "--journal" in runner.invoke(cli.app, ["chat", "--help"]).stdout
