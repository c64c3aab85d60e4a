"""The audit log's fast path (issue 25, point 5): a record ``needs_redaction`` says is clean is
written as it is, without ``redact``'s copy - so it must never call clean what ``redact`` would
change; and a string without any of the shapes' hints is not searched for them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tao.guard.audit import AuditLog
from tao.guard.redact import _HINTS, _KEY_SHAPES, needs_redaction, redact
from tao.safe_json import dumps

ENV = ("hunter2-secret-value",)
SECRETS = ["sk-" + "a" * 20, "ghp_" + "b" * 22, "github_pat_" + "c" * 22, "AKIAABCDEFGHIJKLMNOP",
           "xoxb-1234567890ab", "Bearer abcdefgh123", "Basic dXNlcjpwYXNz",
           "https://user:pw@host", ENV[0]]
# pieces to build strings from: secrets whole, their halves (a match across a join), neighbours
# that change what \b and the lookarounds see
PIECES = [*SECRETS, *(s[:len(s) // 2] for s in SECRETS), *(s[len(s) // 2:] for s in SECRETS),
          "", " ", "\n", "x", "_", "-", "@", ":", "/", "好", "sk", "Bearer", "://", "token"]
text = st.lists(st.sampled_from(PIECES), max_size=4).map("".join)
keys = st.sampled_from(["a", "path", "api_key", "password", "max_tokens", "pin", "note", "ts"])
values = st.recursive(st.none() | st.integers() | st.floats(allow_nan=False) | st.booleans() | text,
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(keys, inner, max_size=3), max_leaves=12)


@settings(max_examples=600, deadline=None)
@given(values, st.sampled_from([frozenset(), frozenset({"pin"})]))
def test_what_needs_no_redaction_is_what_redact_leaves_as_it_is(value, secret):
    if not needs_redaction(value, secret, ENV):
        assert dumps(redact(value, secret, ENV)) == dumps(value)


def test_each_shape_and_secret_is_needed_and_redacted():
    for s in SECRETS:
        for record in ({"arguments": {"x": s}}, {"list": ["ok", f"before {s} after"]}):
            assert needs_redaction(record, frozenset(), ENV), s
            assert dumps(redact(record, (), ENV)) != dumps(record)
    assert needs_redaction({"arguments": {"api_key": "1"}})
    assert needs_redaction({"arguments": {"pin": "1234"}}, frozenset({"pin"}))
    assert not needs_redaction({"arguments": {"api_key": ""}, "n": 1, "s": "short"})


def test_every_match_of_a_shape_contains_a_hint():
    for s in SECRETS[:-1]:
        match = _KEY_SHAPES.search(s)
        assert match is not None and _HINTS.search(s), s


def test_a_clean_record_is_written_as_it_is_and_the_callers_record_is_not_changed(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl", fsync=False)
    record = {"kind": "tool.call", "arguments": {"a": 1}, "ts": "2026-12-05T00:00:00+00:00"}
    entry = log.append(record)
    assert record == {"kind": "tool.call", "arguments": {"a": 1},
                      "ts": "2026-12-05T00:00:00+00:00"}  # ts not popped from the caller's dict
    assert entry["ts"] == "2026-12-05T00:00:00+00:00" and entry["arguments"] == {"a": 1}
    assert list(entry)[:3] == ["seq", "ts", "prev"]
    secret = log.append({"kind": "tool.call", "arguments": {"key": "sk-" + "z" * 20}})
    assert secret["arguments"] == {"key": "***"}


def test_an_append_reads_the_tail_again_whenever_someone_else_wrote_since(tmp_path):
    """The log remembers where its last line ended; a line another writer added, a torn tail a
    killed writer left, or a file replaced are found by size and inode, and chained onto."""
    from tao.guard.audit import verify

    path = tmp_path / "audit.jsonl"
    one, two = AuditLog(path, fsync=False), AuditLog(path, fsync=False)
    for i in range(3):
        one.append({"kind": "a", "i": i})
        two.append({"kind": "b", "i": i})
        one.append({"kind": "a", "again": i})
    with open(path, "ab") as f:
        f.write(b'{"seq":10,"ts":"x","prev":"')  # a writer killed mid-line
    one.append({"kind": "after the tear"})
    report = verify(path)
    assert report.ok and report.lines == 11 and not report.torn_tail
    path.rename(tmp_path / "old.jsonl")  # rotated away: a new file, a new chain
    assert one.append({"kind": "new"})["seq"] == 1
    assert verify(path).ok and verify(tmp_path / "old.jsonl").ok
