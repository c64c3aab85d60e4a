"""Hidden judge of the inventory task: the agent never sees this file."""
import subprocess
import sys
from pathlib import Path

import pytest

import inventory


def test_add_count_total():
    inv = inventory.Inventory()
    inv.add("apple", 3)
    inv.add("pear", 2)
    inv.add("apple", 1)
    assert inv.count("apple") == 4
    assert inv.count("plum") == 0
    assert inv.total() == 6


def test_remove():
    inv = inventory.Inventory()
    inv.add("apple", 3)
    inv.remove("apple", 2)
    assert inv.count("apple") == 1
    with pytest.raises(ValueError):
        inv.remove("apple", 5)
    with pytest.raises(ValueError):
        inv.remove("plum", 1)


def test_command_line(tmp_path):
    f = tmp_path / "stock.txt"
    f.write_text("apple 3\npear 2\napple 4\n", encoding="utf-8")
    out = subprocess.run([sys.executable, str(Path(inventory.__file__)), str(f)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "总数：9" in out.stdout.replace(":", "：").replace("： ", "：")
