"""``tao audit verify FILE`` and ``tao audit show [FILE]``: check the audit log's hash chain,
and read it as a table.

    tao audit verify ~/.local/share/tao/audit.jsonl      # exit 0: every line verifies
    tao audit verify audit.jsonl --strict                 # a torn last line fails too
    tao audit verify audit.jsonl --head 95e1...           # and the line noted then is still there
    tao audit show --last 20                              # the default log, last 20 lines
    tao audit show --run 05502df2                         # one run's lines
    tao audit show audit.jsonl --json                     # the entries as a JSON array

``verify`` exits 0 when no line was edited, removed or reordered, 1 naming the first line that
was, 2 when the file cannot be read. A last line left incomplete by a killed writer is reported
but passes - it is what a crash leaves, and every line before it verifies - unless ``--strict``
says the log must be whole. Messages follow the locale (``LANG=zh_CN.UTF-8``: Chinese).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Annotated, Any

import typer

from .. import safe_json
from .common import app, fail, locale_language

audit_app = typer.Typer(name="audit", no_args_is_help=True,
                        help="The audit log of tool calls and approvals: verify its hash chain, show it.")
app.add_typer(audit_app, name="audit")


def _texts(lang: str) -> dict[str, Any]:
    from ..prompts import table

    return table("audit")["zh" if lang == "zh" else "en"]


def _log_path(file: Path | None) -> Path:
    """FILE, else ``audit`` in ``tao.toml`` when it sets one, else the user data directory."""
    from ..factory.config import ConfigError, load_config
    from ..guard.audit import default_path

    if file is not None:
        return file
    try:
        config = load_config()
    except ConfigError as e:
        raise fail(f"error: {e}", 2) from None
    configured = getattr(config, "audit", None)
    return config.base / configured if configured else default_path()


@audit_app.command("verify")
def verify_command(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The audit log (JSONL) to check.")],
    strict: Annotated[bool, typer.Option(
        "--strict", help="Fail on an incomplete last line too (a writer killed mid-line).")] = False,
    head: Annotated[str | None, typer.Option(
        "--head", metavar="HASH", help="A head an earlier verify printed: the log must still hold "
        "that line (catches lines cut off the end).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check every line's hash, seq and link to the line before; name the first bad line."""
    from ..guard.audit import verify

    lang = locale_language()
    try:
        report = verify(file, head)
    except FileNotFoundError:
        raise fail(_texts(lang)["missing"].replace("{path}", str(file)), 2) from None
    except OSError as e:
        raise fail(f"error: cannot read {file}: {e.strerror or e}", 2) from None
    passed = report.ok and not (strict and report.torn_tail)
    if json_output:
        typer.echo(safe_json.dumps({"ok": passed, "lines": report.lines, "head": report.head,
                                    "bad_line": report.bad_line, "reason": report.reason,
                                    "torn_tail": report.torn_tail, "message": report.message(lang)}))
    elif not report.ok:
        raise fail(report.message(lang), 1)
    else:
        from rich.console import Console
        from rich.text import Text

        style = "bold green" if not report.torn_tail else "bold yellow" if passed else "bold red"
        Console(stderr=not passed).print(Text(report.message(lang), style=style), soft_wrap=True)
    raise typer.Exit(0 if passed else 1)


@audit_app.command("show")
def show_command(
    file: Annotated[Path | None, typer.Argument(
        metavar="[FILE]", show_default=False,
        help="The audit log (default: tao.toml's audit, else the user data directory's).")] = None,
    last: Annotated[int | None, typer.Option("--last", "-n", min=1, help="Only the last N lines.")] = None,
    run: Annotated[str | None, typer.Option(
        "--run", metavar="ID", help="Only the lines of the run whose id starts with ID.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the entries as a JSON array.")] = False,
) -> None:
    """Print the audit log as a table: seq, time, kind, run and what happened."""
    from ..guard.audit import entries, verify

    path = _log_path(file)
    lang = locale_language()
    texts = _texts(lang)
    try:
        total, rows = 0, deque(maxlen=last)
        for entry in entries(path):
            if run is None or str(entry.get("run_id", "")).startswith(run):
                total += 1
                rows.append(entry)
        report = verify(path)
    except FileNotFoundError:
        raise fail(texts["missing"].replace("{path}", str(path)), 2) from None
    except OSError as e:
        raise fail(f"error: cannot read {path}: {e.strerror or e}", 2) from None
    if json_output:
        typer.echo(safe_json.dumps(list(rows), indent=2))
        raise typer.Exit(0)
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console, show = Console(), texts["show"]
    if not total:
        console.print(show["empty"].replace("{path}", str(path)), soft_wrap=True)
    else:
        table = Table(title=show["title"].replace("{path}", str(path)), title_justify="left")
        table.add_column(show["seq"], justify="right", style="dim")
        table.add_column(show["time"], no_wrap=True)
        table.add_column(show["kind"], style="cyan", no_wrap=True)
        table.add_column(show["run"], style="dim", no_wrap=True)
        table.add_column(show["what"], overflow="fold")
        for e in rows:
            table.add_row(str(e.get("seq", "")), _time(e.get("ts")), Text(str(e.get("kind", ""))),
                          Text(str(e.get("run_id", ""))[:12]), Text(summary(e)))
        console.print(table)
        if len(rows) < total:
            console.print(show["shown"].replace("{shown}", str(len(rows))).replace("{total}", str(total)),
                          style="dim")
    style = "green" if report.ok and not report.torn_tail else "yellow" if report.ok else "bold red"
    console.print(Text(report.message(lang), style=style), soft_wrap=True)


#: in their own columns, or hashes and ids nobody reads in a table (``--json`` has them all)
_HIDDEN = frozenset({"seq", "ts", "prev", "hash", "kind", "run_id", "call_id", "digest"})


def summary(entry: dict[str, Any], limit: int = 300) -> str:
    """One cell for an entry: ``tool(arg=value, ...)`` then whatever else it holds, as
    ``key=value`` (the chain's own fields and empty ones left out), cut at ``limit`` characters."""
    rest = {k: v for k, v in entry.items() if k not in _HIDDEN and v is not None}
    parts = []
    if "tool" in rest:
        args = rest.pop("arguments", None)
        shown = ", ".join(f"{k}={safe_json.dumps(v)}" for k, v in args.items()) \
            if isinstance(args, dict) else ("" if args is None else safe_json.dumps(args))
        parts.append(f"{rest.pop('tool')}({shown})")
    parts.extend(f"{k}={v if isinstance(v, str) else safe_json.dumps(v)}" for k, v in rest.items())
    text = " ".join(parts)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _time(ts: Any) -> str:
    """``2026-12-01 18:12:24.591``: the ISO timestamp, shorter."""
    text = str(ts or "")
    return text[:23].replace("T", " ") if len(text) >= 19 else text
