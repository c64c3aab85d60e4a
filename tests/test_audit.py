"""The audit log: every line chained to the one before it, secrets never written, and an edit,
a removal, a reordering or a torn last line named by ``tao.guard.audit.verify``."""

from __future__ import annotations

import json

import pytest

from tao.guard.audit import GENESIS, AuditLog, is_secret_key, verify


def lines_of(path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_appended_lines_chain_and_verify(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    first = log.append({"kind": "run_start", "run_id": "r1", "task": "小明有 50 元"})
    second = log.append({"kind": "tool_call", "run_id": "r1", "tool": "add", "arguments": {"a": 1, "b": 2}})

    assert (first["seq"], first["prev"]) == (1, GENESIS)
    assert second["seq"] == 2 and second["ts"]
    raw = lines_of(path)
    assert [json.loads(x) for x in raw] == [first, second]  # what append returns is what it wrote
    report = verify(path)
    assert report.ok and report.lines == 2 and not report.torn_tail
    assert "2 lines verify" in report.message() and "2 行全部校验通过" in report.message("zh")


def test_records_it_would_misnumber_are_refused(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    with pytest.raises(ValueError, match="seq"):
        log.append({"kind": "x", "seq": 7})
    with pytest.raises(ValueError, match="dict"):
        log.append(["not", "a", "dict"])
    assert not (tmp_path / "a.jsonl").exists() or verify(tmp_path / "a.jsonl").lines == 0


def test_api_keys_and_marked_secrets_never_reach_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "live-key-1234567890")
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, secret={"pin"})
    entry = log.append({"kind": "tool_call", "tool": "login", "max_tokens": 512,
                        "arguments": {"user": "ann", "pin": "4321", "api_key": "abc-123-xyz",
                                      "headers": {"Authorization": "Bearer eyJhbGciOi.x.y"},
                                      "note": "use sk-proj-AAAABBBBCCCCDDDDEEEE1234 then live-key-1234567890"}})
    log.append({"kind": "tool_call", "tool": "mfa", "arguments": {"otp": "778899"}}, secret={"otp"})

    data = path.read_bytes()
    for leaked in (b"4321", b"abc-123-xyz", b"eyJhbGciOi", b"sk-proj-AAAA", b"live-key-1234567890", b"778899"):
        assert leaked not in data
    args = entry["arguments"]
    assert args["pin"] == args["api_key"] == args["headers"]["Authorization"] == "***"
    assert args["note"] == "use *** then ***" and args["user"] == "ann"
    assert entry["max_tokens"] == 512  # a count is not a secret
    assert verify(path).ok


@pytest.mark.parametrize("key", ["api_key", "OPENAI_API_KEY", "x-api-key", "apiKey", "Authorization",
                                 "github_token", "client_secret", "password", "db_passwd", "secret"])
def test_secret_key_names(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "prompt_tokens", "key", "keyword", "path", "author"])
def test_ordinary_key_names(key):
    assert not is_secret_key(key)
