"""``tao audit verify`` and ``tao audit show``, through typer's CliRunner: exit codes, the first
bad line named, the table, Chinese when the locale is Chinese."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tao import cli
from tao.guard.audit import AuditLog

runner = CliRunner()


@pytest.fixture
def english(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("COLUMNS", "200")  # one table row a line


@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=False)
    log.append({"kind": "run_start", "run_id": "r-7f3a", "task": "What is 15 * 27?"})
    log.append({"kind": "tool_call", "run_id": "r-7f3a", "tool": "calculator",
                "arguments": {"expression": "15*27"}, "is_error": False})
    log.append({"kind": "approval", "run_id": "r-7f3a", "tool": "run_command",
                "arguments": {"command": "rm -rf build"}, "decision": "reject", "reason": "not now"})
    log.append({"kind": "run_end", "run_id": "r-7f3a", "status": "done"})
    return path


def test_verify_a_clean_log_exits_0(log_file, english):
    res = runner.invoke(cli.app, ["audit", "verify", str(log_file)])
    assert res.exit_code == 0, res.output
    assert "4 lines verify" in res.output


def test_verify_names_the_first_edited_line_and_exits_1(log_file, english):
    lines = log_file.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"15*27", b"15*28")
    log_file.write_bytes(b"".join(lines))
    res = runner.invoke(cli.app, ["audit", "verify", str(log_file)])
    assert res.exit_code == 1
    assert "line 2 is bad" in res.output and "edited" in res.output


def test_verify_speaks_chinese_in_a_chinese_locale(log_file, monkeypatch):
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    lines = log_file.read_bytes().splitlines(keepends=True)
    del lines[1]
    log_file.write_bytes(b"".join(lines))
    res = runner.invoke(cli.app, ["audit", "verify", str(log_file)])
    assert res.exit_code == 1
    assert "第 2 行有问题" in res.output and "序号是 3，这里应该是 2" in res.output


def test_a_torn_last_line_passes_unless_strict(log_file, english):
    log_file.write_bytes(log_file.read_bytes()[:-30])
    res = runner.invoke(cli.app, ["audit", "verify", str(log_file)])
    assert res.exit_code == 0 and "3 lines verify" in res.output and "incomplete" in res.output
    strict = runner.invoke(cli.app, ["audit", "verify", str(log_file), "--strict"])
    assert strict.exit_code == 1 and "incomplete" in strict.output
    report = json.loads(runner.invoke(cli.app, ["audit", "verify", str(log_file), "--json", "--strict"]).stdout)
    assert (report["ok"], report["lines"], report["torn_tail"]) == (False, 3, True)


def test_verify_a_missing_file_is_a_usage_error(tmp_path, english):
    res = runner.invoke(cli.app, ["audit", "verify", str(tmp_path / "nope.jsonl")])
    assert res.exit_code == 2 and "no such file" in res.output


def test_show_prints_the_table_and_the_verdict(log_file, english):
    res = runner.invoke(cli.app, ["audit", "show", str(log_file)])
    assert res.exit_code == 0, res.output
    out = res.output
    for text in ("run_start", "tool_call", "calculator", "15*27", "decision=reject", "status=done",
                 "r-7f3a", "4 lines verify"):
        assert text in out


def test_show_last_and_json(log_file, english):
    res = runner.invoke(cli.app, ["audit", "show", str(log_file), "--last", "2", "--json"])
    assert res.exit_code == 0
    shown = json.loads(res.stdout)
    assert [e["seq"] for e in shown] == [3, 4] and shown[0]["decision"] == "reject"
    table = runner.invoke(cli.app, ["audit", "show", str(log_file), "-n", "1"])
    assert "2 of 4" not in table.output and "1 of 4 lines" in table.output
    assert "run_start" not in table.output


def test_show_defaults_to_the_user_data_directory(tmp_path, monkeypatch, english):
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    missing = runner.invoke(cli.app, ["audit", "show"])
    assert missing.exit_code == 2 and str(tmp_path / "audit.jsonl") in missing.output
    AuditLog().append({"kind": "run_start", "task": "小明有 50 元"})
    res = runner.invoke(cli.app, ["audit", "show"])
    assert res.exit_code == 0 and "小明有 50 元" in res.output


def test_show_in_chinese(log_file, monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    for var in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    res = runner.invoke(cli.app, ["audit", "show", str(log_file)])
    assert "审计日志" in res.output and "类型" in res.output and "4 行全部校验通过" in res.output


def test_the_audit_module_keeps_rich_and_typer_out_of_import_tao():
    code = ("import sys, tao, tao.guard.audit; "
            "assert not {'rich', 'typer'} & set(sys.modules), sorted({'rich', 'typer'} & set(sys.modules))")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_verify_head_catches_a_cut_off_end(log_file, english):
    head = json.loads(runner.invoke(cli.app, ["audit", "verify", str(log_file), "--json"]).stdout)["head"]
    log_file.write_bytes(b"".join(log_file.read_bytes().splitlines(keepends=True)[:2]))
    assert runner.invoke(cli.app, ["audit", "verify", str(log_file)]).exit_code == 0
    res = runner.invoke(cli.app, ["audit", "verify", str(log_file), "--head", head])
    assert res.exit_code == 1 and "line 3 is bad" in res.output and head in res.output


def test_show_one_run(log_file, english):
    AuditLog(log_file).append({"kind": "run_start", "run_id": "r-other", "task": "another task"})
    res = runner.invoke(cli.app, ["audit", "show", str(log_file), "--run", "r-7f", "--json"])
    assert [e["seq"] for e in json.loads(res.stdout)] == [1, 2, 3, 4]
    res = runner.invoke(cli.app, ["audit", "show", str(log_file), "--run", "r-oth"])
    assert "another task" in res.output and "15*27" not in res.output
