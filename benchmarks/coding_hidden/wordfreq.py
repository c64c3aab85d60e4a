"""Hidden judge of the wordfreq task: the agent never sees this file."""
import subprocess
import sys
from pathlib import Path

import wordfreq


def test_counts_most_common_first():
    assert wordfreq.top_words("b a b c b a", 2) == [("b", 3), ("a", 2)]


def test_lower_case_and_punctuation():
    got = wordfreq.top_words("Hello, world! hello. World? HELLO", 2)
    assert [tuple(x) for x in got] == [("hello", 3), ("world", 2)]


def test_ties_alphabetical():
    assert [tuple(x) for x in wordfreq.top_words("pear apple fig", 3)] == [
        ("apple", 1), ("fig", 1), ("pear", 1)]


def test_command_line(tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("the cat and the dog and the bird\n", encoding="utf-8")
    module = Path(wordfreq.__file__)
    out = subprocess.run([sys.executable, str(module), str(f), "2"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = [ln.strip() for ln in out.stdout.strip().splitlines()]
    assert lines == ["the: 3", "and: 2"]
