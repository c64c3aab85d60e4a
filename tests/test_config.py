"""``tao.toml`` read by ``tao.config.load_config``: what each key gives, and a mistake in the file
as a ``ConfigError`` naming the file (the CLI's side of it is in test_cli_tools.py)."""

from __future__ import annotations

import pytest

from tao.config import ConfigError, load_config


def write(folder, text: str):
    (folder / "tao.toml").write_text(text, encoding="utf-8")
    return folder


def test_mcp_servers_are_command_lines_or_http_urls(tmp_path):
    write(tmp_path, 'mcp = ["npx -y @modelcontextprotocol/server-filesystem \'my docs\'", '
                    '" https://mcp.example.com/mcp "]\n')
    assert load_config(tmp_path).mcp == ["npx -y @modelcontextprotocol/server-filesystem 'my docs'",
                                         "https://mcp.example.com/mcp"]
    write(tmp_path, 'mcp = "uvx mcp-server-git"\n')
    assert load_config(tmp_path).mcp == ["uvx mcp-server-git"]
    (tmp_path / "empty").mkdir()
    assert load_config(tmp_path / "empty").mcp == []  # no tao.toml: no servers


@pytest.mark.parametrize("text, message", [
    ("mcp = [1]\n", "mcp must be a list of servers, each a command line or an http(s) URL"),
    ('mcp = [""]\n', "mcp must be a list of servers"),
    ('mcp = ["ftp://files.example.com/mcp"]\n', "mcp server 'ftp://files.example.com/mcp' is neither"),
    ('mcp = ["https://"]\n', "mcp server 'https://' is neither an http(s) URL nor a command line"),
    ('mcp = ["uvx \'mcp-server-git"]\n', "is not a command line: No closing quotation"),
])
def test_a_bad_mcp_entry_names_the_file(tmp_path, text, message):
    write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    assert message in str(e.value) and str(tmp_path / "tao.toml") in str(e.value)
