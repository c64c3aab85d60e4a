"""The ``tao`` command: ``tao run TASK`` shows the agent's Thought/Action/Observation chain live.

    tao run "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
    tao run "What is 15 * 27?" --agent react-text --model openai:gpt-4o-mini --trace run.jsonl
    tao run "..." --json          # the Result as JSON on stdout, nothing else
    tao run - < task.txt          # a long task from stdin (or --task-file task.txt), UTF-8
    tao run "..." --timeout 120   # a slow endpoint: wait up to 120 s for each token

Exit status: 0 when the agent answered, 1 when it did not (turn limit or error, e.g. an endpoint
that timed out or broke off mid-answer), 2 for usage errors (bad options, no task or an empty one,
a task file that is missing or not UTF-8, an unknown model, a model that cannot be built or
loaded: missing key, bad checksum, a key the endpoint refuses, a URL that does not answer the
OpenAI protocol), 130 when interrupted.

One module per command (``run``, ``code``, ``chat``, ``compare``); what they share is in ``common``. ``build_agent``,
``run_task`` and ``resolve_model`` are attributes of this package, and the commands look them up
here when they run, so the command's behaviour can be reused and tested with a ``ScriptedModel``
by patching ``tao.cli.resolve_model``.
"""

from __future__ import annotations

import sys

import typer

from .. import __version__
from ..models.resolve import resolve_model
from .common import AgentKind, app, read_task
from .run import build_agent, run_command, run_task
from .code import code_command
from .chat import chat_command
from .compare import compare_command
from . import audit as _audit  # noqa: F401 - registers tao audit verify/show
from . import mcp as _mcp  # noqa: F401 - registers tao mcp serve
from . import index as _index  # noqa: F401 - registers tao index DIR
from . import runs as _runs  # noqa: F401 - registers tao runs, tao resume, tao replay
from . import serve as _serve  # noqa: F401 - registers tao serve (FastAPI loads when it runs)
from . import worker as _worker  # noqa: F401 - registers tao worker (DBOS loads when it runs)
from ..evals.cli import eval_command  # tao eval lives in its own room

app.command("eval")(eval_command)


@app.command("version")
def version_command() -> None:
    """Print tao's version."""
    typer.echo(f"tao {__version__}")


def main() -> None:
    """Console-script entry point (``tao``). Text the terminal cannot encode (a lone surrogate a
    model wrote, a non-UTF-8 locale) is printed as a backslash escape instead of ending the run."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    app(prog_name="tao")


__all__ = ["AgentKind", "app", "build_agent", "chat_command", "code_command", "compare_command", "eval_command", "main",
           "read_task", "resolve_model", "run_command", "run_task", "version_command"]
