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

    # what the records say, less the chain's own digests and clock: a sha256 in hex or a
    # timestamp's microseconds can hold "4321" by chance (seen once in CI, 2026-12-07)
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    data = json.dumps([{k: v for k, v in r.items() if k not in ("hash", "prev", "ts")}
                       for r in records]).encode()
    for leaked in (b"4321", b"abc-123-xyz", b"eyJhbGciOi", b"sk-proj-AAAA", b"live-key-1234567890", b"778899"):
        assert leaked not in data
    assert b"ann" in data and b"mfa" in data  # the records themselves are there
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


def write_log(path, n: int = 6) -> AuditLog:
    log = AuditLog(path, fsync=False)
    for i in range(n):
        log.append({"kind": "tool_call", "tool": "add", "arguments": {"a": i, "b": 1}})
    return log


def rewrite(path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(x + b"\n" for x in lines))


def test_an_edited_line_is_named(tmp_path):
    path = tmp_path / "audit.jsonl"
    write_log(path)
    lines = lines_of(path)
    lines[3] = lines[3].replace(b'"a":3', b'"a":4')  # line 4 now says the model added 4
    rewrite(path, lines)

    report = verify(path)
    assert (report.ok, report.bad_line, report.reason, report.lines) == (False, 4, "edited", 3)
    assert "line 4 is bad" in report.message() and "edited" in report.message()
    assert "第 4 行" in report.message("zh")


def test_an_edit_with_a_recomputed_own_hash_breaks_the_next_lines_prev(tmp_path):
    from tao.guard.audit import _seal

    path = tmp_path / "audit.jsonl"
    write_log(path)
    lines = lines_of(path)
    entry = json.loads(lines[2])
    del entry["hash"]
    entry["arguments"]["a"] = 99
    lines[2] = _seal(entry)[0]  # a careful forger: line 3 is self-consistent again
    rewrite(path, lines)

    report = verify(path)
    assert (report.bad_line, report.reason, report.detail) == (4, "prev", {"before": 3})
    assert "line 3 was rewritten" in report.message()


def test_the_last_line_edited_is_found_too(tmp_path):
    path = tmp_path / "audit.jsonl"
    write_log(path)
    lines = lines_of(path)
    lines[-1] = lines[-1].replace(b'"tool":"add"', b'"tool":"sub"')
    rewrite(path, lines)
    assert (verify(path).bad_line, verify(path).reason) == (6, "edited")


@pytest.mark.parametrize("removed", [0, 2, 4])
def test_a_removed_line_is_named(tmp_path, removed):
    path = tmp_path / "audit.jsonl"
    write_log(path)
    lines = lines_of(path)
    del lines[removed]
    rewrite(path, lines)

    report = verify(path)
    assert (report.bad_line, report.reason) == (removed + 1, "seq")
    assert report.detail == {"seq": removed + 2, "expected": removed + 1}
    assert f"seq {removed + 2} where {removed + 1} belongs" in report.message()


def test_reordered_lines_are_named(tmp_path):
    path = tmp_path / "audit.jsonl"
    write_log(path)
    lines = lines_of(path)
    lines[1], lines[2] = lines[2], lines[1]
    rewrite(path, lines)
    assert (verify(path).bad_line, verify(path).reason, verify(path).lines) == (2, "seq", 1)


def test_lines_renumbered_after_a_removal_still_break_the_chain(tmp_path):
    from tao.guard.audit import _seal

    path = tmp_path / "audit.jsonl"
    write_log(path)
    lines = lines_of(path)
    del lines[2]
    for i in range(2, len(lines)):  # the forger renumbers and reseals, but cannot fix prev
        entry = json.loads(lines[i])
        del entry["hash"]
        entry["seq"] = i + 1
        lines[i] = _seal(entry)[0]
    rewrite(path, lines)
    assert (verify(path).bad_line, verify(path).reason) == (3, "prev")


def test_a_line_cut_short_in_the_middle_is_tampering(tmp_path):
    path = tmp_path / "audit.jsonl"
    write_log(path)
    lines = lines_of(path)
    lines[2] = lines[2][:40]  # a half line with more lines after it
    rewrite(path, lines)
    report = verify(path)
    assert (report.ok, report.bad_line, report.reason) == (False, 3, "not_json")


def test_a_torn_last_line_is_reported_and_every_earlier_line_verifies(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = write_log(path)
    whole = path.read_bytes()
    path.write_bytes(whole[:-50])  # the last write stopped 50 bytes short of its newline

    report = verify(path)
    assert report.ok and report.torn_tail and report.lines == 5
    assert report.torn_bytes == len(lines_of(path)[-1])
    assert "incomplete" in report.message() and "不完整" in report.message("zh")

    entry = log.append({"kind": "run_end", "status": "done"})  # the next writer goes on
    kinds = [json.loads(x)["kind"] for x in lines_of(path)]
    assert kinds[5:] == ["audit.torn_tail", "run_end"] and entry["seq"] == 7
    torn = json.loads(lines_of(path)[5])
    assert torn["bytes"] == report.torn_bytes
    after = verify(path)
    assert after.ok and not after.torn_tail and after.lines == 7


def test_a_first_line_torn_before_its_newline(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"seq":1,"ts":"2026')
    assert verify(path).torn_tail and verify(path).lines == 0
    AuditLog(path).append({"kind": "run_start"})
    assert verify(path).lines == 2 and verify(path).ok


def test_appending_after_tampering_does_not_hide_it(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = write_log(path, 3)
    lines = lines_of(path)
    lines[-1] = b"garbage"
    rewrite(path, lines)
    log.append({"kind": "run_end"})
    assert (verify(path).bad_line, verify(path).reason) == (3, "not_json")


def test_an_empty_log_verifies(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"")
    assert verify(path).ok and verify(path).lines == 0 and verify(path).head == GENESIS
    with pytest.raises(FileNotFoundError):
        verify(tmp_path / "missing.jsonl")


def test_default_location_is_the_user_data_directory(tmp_path, monkeypatch):
    from tao.guard.audit import default_path

    monkeypatch.delenv("TAO_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "tao" / "audit.jsonl"
    AuditLog().append({"kind": "run_start"})  # the folder is made on first write
    assert verify(default_path()).lines == 1
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "d"))
    assert default_path() == tmp_path / "d" / "audit.jsonl"


def test_lines_cut_off_the_end_are_caught_by_a_head_noted_earlier(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = write_log(path, 4)
    noted = verify(path).head  # e.g. printed by `tao audit verify` and kept elsewhere
    log.append({"kind": "run_end"})
    assert verify(path, head=noted).ok  # the log grew: the noted line is still in it

    lines = lines_of(path)
    rewrite(path, lines[:3])  # the last two lines removed: the chain alone cannot tell
    assert verify(path).ok
    report = verify(path, head=noted)
    assert (report.ok, report.reason, report.bad_line) == (False, "head", 4)
    assert noted in report.message() and "removed" in report.message()
    assert verify(path, head=json.loads(lines[1])["hash"]).ok  # a line's own hash works too


def test_credentials_inside_commands_and_urls_are_blanked(tmp_path, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock")
    path = tmp_path / "audit.jsonl"
    entry = AuditLog(path).append({"kind": "tool_call", "tool": "run_command", "arguments": {
        "command": "git clone https://ann:hunter2hunter2@example.com/r.git && "
                   "curl -H 'Authorization: Basic YW5uOmh1bnRlcjI=' -H 'x: Bearer abc.def.ghi' "
                   "https://example.com/ -d AKIAABCDEFGHIJKLMNOP ls /tmp/ssh-agent.sock"}})
    command = entry["arguments"]["command"]
    for secret in ("hunter2", "YW5uOmh1bnRlcjI", "abc.def.ghi", "AKIAABCDEFGHIJKLMNOP"):
        assert secret not in command and secret.encode() not in path.read_bytes()
    assert "https://***@example.com/r.git" in command
    assert "/tmp/ssh-agent.sock" in command  # a socket's path is not a secret
