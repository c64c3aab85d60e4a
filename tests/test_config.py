"""``tao.toml`` read by ``tao.factory.config.load_config``: what each key gives, and a mistake in the file
as a ``ConfigError`` naming the file (the CLI's side of it is in test_cli_tools.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tao.factory.config import ConfigError, load_config


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


def test_guard_keys_become_the_agent_s_guardrails(tmp_path, monkeypatch):
    """What tao run / code / chat hand the agent (``cli.common.guard_options``) from the file."""
    from tao.cli.code import build_coder
    from tao.cli.common import guard_options
    from tao.guard import Policy

    write(tmp_path, 'deny = "fetch, send_email"\nuntrusted = ["fetch"]\nhigh_risk = ["deploy"]\n'
                    'require_approval = { run_command = "\\\\bgit push\\\\b", deploy = true, '
                    'lint = false }\nmax_cost = 0.5\nmax_seconds = 60\naudit = "a/log.jsonl"\n')
    config = load_config(tmp_path)
    options = guard_options(config=config, deny=["rm_tree"], max_seconds=30)
    assert options["deny"] == ["fetch", "send_email", "rm_tree"]
    assert options["max_cost"] == 0.5 and options["max_seconds"] == 30  # the flag wins
    assert options["audit"] == tmp_path / "a" / "log.jsonl"
    policy = Policy(require_approval=options["require_approval"])
    assert policy.check("run_command", None, {"command": "git push origin"}, False)[0] == "ask"
    assert policy.check("run_command", None, {"command": "git status"}, False)[0] == "run"
    assert policy.check("deploy", None, {}, False)[0] == "ask"
    assert policy.check("lint", None, {}, False)[0] == "run"
    assert guard_options(config=config, no_audit=True).get("audit") is None
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config.audit = "~/tao-audit.jsonl"
    assert guard_options(config=config)["audit"] == Path.home() / "tao-audit.jsonl"

    # tao code's own rule (rm, curl, sudo) still holds beside the file's
    coder = build_coder(object(), [], **{k: v for k, v in options.items() if k != "audit"})
    rule = coder.guard.policy.require["run_command"]
    assert rule({"command": "git push"}) and rule({"command": "rm -rf src"})
    assert not rule({"command": "git status"})
