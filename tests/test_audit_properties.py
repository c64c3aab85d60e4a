"""Any one change to a written audit log is found at the line it touched (hypothesis): a byte
changed anywhere, a line removed, two lines swapped."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tao.guard.audit import AuditLog, verify

LINES = 8
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def fresh_log(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("log") / "audit.jsonl"
    log = AuditLog(path, fsync=False)
    for i in range(LINES):
        log.append({"kind": "tool.call", "tool": "write_file", "arguments": {"path": f"f{i}.txt", "text": "好" * i}})
    return path.read_bytes()


def line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


@SETTINGS
@given(st.data())
def test_a_changed_byte_is_found_on_its_line(tmp_path_factory, data):
    original = fresh_log(tmp_path_factory)
    at = data.draw(st.integers(0, len(original) - 1))
    new = data.draw(st.integers(0, 255).filter(lambda b: b != original[at]))
    path = tmp_path_factory.mktemp("t") / "audit.jsonl"
    path.write_bytes(original[:at] + bytes([new]) + original[at + 1:])

    report = verify(path)
    if at == len(original) - 1:  # the last newline gone: what a killed writer leaves
        assert report.ok and report.torn_tail and report.lines == LINES - 1
    else:
        assert not report.ok and report.bad_line == line_of(original, at), (at, report)


@SETTINGS
@given(st.data())
def test_a_removed_or_swapped_line_is_found(tmp_path_factory, data):
    lines = fresh_log(tmp_path_factory).splitlines(keepends=True)
    i = data.draw(st.integers(0, LINES - 2))
    if data.draw(st.booleans()):
        del lines[i]
    else:
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    path = tmp_path_factory.mktemp("t") / "audit.jsonl"
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert (report.ok, report.bad_line) == (False, i + 1)
