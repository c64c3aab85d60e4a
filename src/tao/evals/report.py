"""What a run measured, per agent: on the terminal (rich), as JSON, in ``report.md`` and ``scores.svg``.

Per agent: score (tasks solved / tasks run), parse-failure rate (replies that needed a corrective
observation over all replies, ``runner.parse_failures``), and per task the mean turns (model
calls), tool calls (``Result.tool_calls``: code blocks run for CodeAct, tool executions for the
plan), tokens and seconds; per category where the suite has them (BFCL).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from ..compare import ARCHITECTURE
from ..safe_json import escape_surrogates


def summarize(records: Sequence[dict[str, Any]], agents: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for agent in agents:
        mine = [r for r in records if r["agent"] == agent]
        n = len(mine)
        turns = sum(r["turns"] for r in mine)
        categories: dict[str, list[int]] = {}
        for r in mine:
            if r.get("category"):
                tally = categories.setdefault(r["category"], [0, 0])
                tally[0] += bool(r["correct"])
                tally[1] += 1
        rows.append({
            "agent": agent, "tasks": n, "solved": sum(bool(r["correct"]) for r in mine),
            "score": _mean([bool(r["correct"]) for r in mine]),
            "parse_failure_rate": sum(r["parse_failures"] for r in mine) / turns if turns else 0.0,
            "parse_failures": sum(r["parse_failures"] for r in mine), "replies": turns,
            "mean_turns": _mean([r["turns"] for r in mine]),
            "mean_tool_calls": _mean([r["tool_calls"] for r in mine]),
            "mean_tokens": _mean([r["prompt_tokens"] + r["completion_tokens"] for r in mine]),
            "seconds_per_task": _mean([r["seconds"] for r in mine]),
            "categories": {c: {"solved": s, "tasks": t} for c, (s, t) in sorted(categories.items())},
        })
    return rows


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


HEADERS = ("Agent", "Score", "Parse failures", "Turns", "Tool calls", "Tokens", "s / task")


def cells(row: dict[str, Any]) -> list[str]:
    return [ARCHITECTURE.get(row["agent"], row["agent"]),
            f"{row['solved']}/{row['tasks']} ({100 * row['score']:.1f} %)",
            f"{100 * row['parse_failure_rate']:.1f} % ({row['parse_failures']}/{row['replies']})",
            f"{row['mean_turns']:.2f}", f"{row['mean_tool_calls']:.2f}", f"{row['mean_tokens']:.0f}",
            f"{row['seconds_per_task']:.2f}"]


def render(rows: Sequence[dict[str, Any]], console: Any = None, title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console if console is not None else Console()
    table = Table(title=title, title_justify="left")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i == 0 else "right", style="bold" if i == 0 else None)
    for row in rows:
        table.add_row(*cells(row))
    console.print(table)
    categories = sorted({c for row in rows for c in row["categories"]})
    if categories:
        by = Table(title="By category", title_justify="left")
        by.add_column("Agent", style="bold")
        for c in categories:
            by.add_column(c, justify="right")
        for row in rows:
            by.add_row(ARCHITECTURE.get(row["agent"], row["agent"]),
                       *(_fraction(row["categories"].get(c)) for c in categories))
        console.print(by)


def _fraction(tally: dict[str, int] | None) -> str:
    return "-" if not tally else f"{tally['solved']}/{tally['tasks']}"


def markdown(rows: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]],
             meta: dict[str, Any], command: str | None = None) -> str:
    lines = [f"# tao eval {meta.get('suite', '')}", ""]
    for key in ("model", "started", "machine"):
        if meta.get(key):
            lines.append(f"- {key}: {meta[key]}")
    if command:
        lines.append(f"- command: `{command}`")
    lines += ["", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    categories = sorted({c for row in rows for c in row["categories"]})
    if categories:
        lines += ["", "## By category", "", "| Agent | " + " | ".join(categories) + " |",
                  "|" + "---|" * (len(categories) + 1)]
        lines += [f"| {ARCHITECTURE.get(row['agent'], row['agent'])} | "
                  + " | ".join(_fraction(row["categories"].get(c)) for c in categories) + " |"
                  for row in rows]
    lines += ["", "Score: tasks solved. Parse failures: replies that needed a corrective "
              "observation, over all replies. Turns, tool calls (CodeAct: code blocks run), "
              "tokens and seconds: means per task.", "", "## Not solved", "",
              "What the model wrote for each: transcripts.jsonl (a line per task).", ""]
    failed = [r for r in records if not r["correct"]]
    for r in failed[:200]:
        why = (r.get("detail") or r.get("error") or r["status"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"- {r['agent']} {r['task_id']}: {why[:160]}")
    if len(failed) > 200:
        lines.append(f"- ... and {len(failed) - 200} more (results.jsonl has them all)")
    return "\n".join(lines) + "\n"


def svg(rows: Sequence[dict[str, Any]], title: str) -> str:
    """A horizontal bar chart of score per agent, 0-100 %."""
    label_w, bar_w, bar_h, gap, top = 190, 420, 26, 12, 44
    height = top + len(rows) * (bar_h + gap) + 24
    width = label_w + bar_w + 90
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="14">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="26" font-size="16" font-weight="bold">{escape(title)}</text>']
    for i, row in enumerate(rows):
        y = top + i * (bar_h + gap)
        w = round(bar_w * row["score"], 1)
        name = escape(ARCHITECTURE.get(row["agent"], row["agent"]))
        out += [f'<text x="10" y="{y + 18}">{name}</text>',
                f'<rect x="{label_w}" y="{y}" width="{bar_w}" height="{bar_h}" fill="#eeeeee"/>',
                f'<rect x="{label_w}" y="{y}" width="{w}" height="{bar_h}" fill="#3b7dd8"/>',
                f'<text x="{label_w + bar_w + 8}" y="{y + 18}">{100 * row["score"]:.1f} %</text>']
    axis_y = top + len(rows) * (bar_h + gap)
    for pct in (0, 50, 100):
        x = label_w + bar_w * pct / 100
        out.append(f'<text x="{x}" y="{axis_y + 12}" font-size="11" text-anchor="middle">{pct} %</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(out: str | Path, rows: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]],
          meta: dict[str, Any], command: str | None = None) -> list[Path]:
    """``report.md`` and ``scores.svg`` in ``out``; returns their paths."""
    out = Path(out)
    paths = [out / "report.md", out / "scores.svg"]
    # an answer may hold a lone surrogate (half an emoji a model wrote as a JSON escape)
    paths[0].write_text(escape_surrogates(markdown(rows, records, meta, command)),
                        encoding="utf-8")
    paths[1].write_text(svg(rows, f"tao eval {meta.get('suite', '')}: score per agent"),
                        encoding="utf-8")
    return paths
