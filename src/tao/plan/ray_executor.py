"""``PlanExecuteAgent(..., executor="ray")``: the plan's tool steps run as Ray tasks.

The shape: the scheduling stays in the caller, in the same event-driven ``Executor`` the async
executor uses - a step starts when its own dependencies are done, at most ``concurrency`` at once,
each attempt bounded by ``step_timeout``, retried with backoff, a failure skipping its dependents
and triggering re-planning - and only the *work* of a tool step moves: its call is one Ray task
(``ray.remote``) on whatever node Ray picks, awaited as an ``ObjectRef``. So every event
(``StepStarted`` with the resolved arguments, ``StepRetried``, ``StepFinished``...) is emitted by
the caller, in order, in the parent's own stream - the same events as ``executor="async"``, by
construction, not by imitation. (Handing Ray the whole DAG with ``ObjectRef`` arguments would let
Ray order the steps, but then nobody could emit "started"/"retried" as they happen, skip the
dependents of a failure, or re-plan; the dependency values also have to come back for the
``$stepN`` references in strings, the answer template and the re-plan prompt anyway.)

What runs where:

- a tool step's arguments are validated in the caller (an invalid call fails at once, not
  retried, exactly as with the async executor); the call itself runs in a Ray worker: async tools
  under ``asyncio.run`` there, sync ones directly. A timed-out attempt (``step_timeout`` or the
  tool's own ``timeout``) counts as failed and its task is cancelled with
  ``ray.cancel(force=True)``: the worker process is killed (a running sync call ignores Ray's
  gentle cancel - measured: two stuck ``time.sleep(30)`` tasks held both CPUs of a 2-CPU instance
  for 30 s) and Ray starts a fresh one. So is a task whose run is stopped.
- steps run by a sub-agent (``step_agent``, or an agent used as a tool) stay in the caller: they
  are model calls that stream events, and a model (a loaded GGUF file, an HTTP client) is neither
  cheap nor always possible to ship.

**Tools must be picklable** (Ray uses cloudpickle). A ``@tool`` on a module-level function is:
the ``FunctionTool`` is pickled with its function - by reference when the module is importable in
the worker, else by value with its closure and globals. Consequences: a closure's mutable state
(a list, a counter) is *copied* into the worker, so side effects stay in the worker process -
keep state in a file, a database or a Ray actor; a tool holding a lock, a socket or an open file
cannot be shipped - ``PlanExecuteAgent`` checks every tool when it is made and raises
``TypeError`` naming the tool. Results come back pickled too. An MCP server's tools travel as the
server's configuration (``MCPServer.__reduce__``): each worker process opens its own connection
on its first call and keeps it for the tasks that follow.

Ray is not imported by ``import tao`` (nor by ``tao.plan.agent``); only when an agent with
``executor="ray"`` is made. Call ``ray.init(...)`` yourself to choose the cluster; otherwise Ray
starts a local instance on the first step. ``ray_options`` (e.g. ``{"num_cpus": 0.25}`` for tools
that wait on I/O rather than compute) go to ``.options()`` of every tool task: with Ray's default
of one CPU a task, a 2-core machine runs only 2 tool steps at once whatever ``concurrency`` says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..tools.base import (
    FunctionTool,
    InvalidArguments,
    Tool,
    Toolbox,
    ToolResult,
    error_text,
    to_text,
)

INSTALL_HINT = "executor='ray' needs Ray: pip install 'tao-agents[ray]'"


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:  # a user error: say so at once, with the fix
        raise ImportError(INSTALL_HINT) from e
    return ray


def shipped(t: Tool) -> Any:
    """What a worker gets to run ``t``: a ``@tool``'s function itself (0.02 ms to unpickle; the
    whole ``FunctionTool`` with its pydantic model takes 0.65 ms), else the tool's bound ``run``."""
    return t.fn if isinstance(t, FunctionTool) else t.run


def check_tools(toolbox: Toolbox, local: tuple[type, ...] = ()) -> None:
    """Raise ``TypeError`` naming the first tool that cannot be sent to a Ray worker (tools of
    the ``local`` types run in the caller and are not checked)."""
    from ray import cloudpickle

    for t in toolbox:
        if isinstance(t, local):
            continue
        try:
            cloudpickle.dumps(shipped(t))
        except Exception as e:  # noqa: BLE001 - whatever pickling raises, the cause is the tool
            raise TypeError(f"tool {t.name!r} cannot be sent to Ray workers (executor='ray' "
                            f"pickles every tool): {type(e).__name__}: {e}") from None


def _call(run: Any, is_async: bool, kwargs: dict[str, Any]) -> tuple[bool, Any, bool]:
    """In the Ray worker: run the tool. ``(True, value, True)`` or ``(False, error text,
    retryable)`` (see ``ToolResult.retryable``). A tool's ``SystemExit``, ``KeyboardInterrupt``
    and other ``BaseException`` are its failure too, as in ``Toolbox.execute`` (no Ctrl-C of the
    user reaches a worker; stopping a task here is ``ray.cancel(force=True)``, a kill)."""
    try:
        if is_async:
            return True, asyncio.run(run(**kwargs)), True
        return True, run(**kwargs), True
    except Exception as e:  # noqa: BLE001 - a tool's failure is the model's observation
        return False, error_text(e), getattr(e, "retryable", True) is not False
    except BaseException as e:  # noqa: BLE001 - SystemExit would end the worker, not the tool
        return False, error_text(e), True


class RayTools:
    """Runs the tool calls of one agent run as Ray tasks. Each tool is put in Ray's object store
    once (on its first call), not pickled again for every step."""

    def __init__(self, toolbox: Toolbox, options: Mapping[str, Any] | None = None):
        ray = import_ray()
        self.ray = ray
        self.toolbox = toolbox
        remote = ray.remote(_call)
        self.remote = remote.options(**options) if options else remote
        self.refs: dict[str, Any] = {}

    async def execute(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """The call's ``ToolResult``, with the texts ``Toolbox.execute`` writes for the same
        failures (invalid arguments, an exception, the tool's own timeout)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        t = self.toolbox[name]  # the plan was validated: the tool exists
        try:
            kwargs = t.validate(arguments)
        except InvalidArguments as e:
            return ToolResult(f"Error: {e}", True, loop.time() - start, retryable=False)
        if name not in self.refs:
            self.refs[name] = self.ray.put(shipped(t))
        ref = self.remote.remote(self.refs[name], t.is_async(), kwargs)
        try:
            work = asyncio.wrap_future(ref.future())
            ok, value, retryable = await (asyncio.wait_for(work, t.timeout) if t.timeout else work)
        except TimeoutError:
            self._cancel(ref)
            return ToolResult(f"Error: tool {name!r} timed out after {t.timeout} s", True,
                              loop.time() - start)
        except asyncio.CancelledError:  # the step's timeout, or the run was stopped
            self._cancel(ref)
            raise
        except Exception as e:  # noqa: BLE001 - the worker died, the result did not unpickle...
            return ToolResult(f"Error: {type(e).__name__}: {e}", True, loop.time() - start)
        if not ok:
            return ToolResult(value, True, loop.time() - start, retryable=retryable)
        return ToolResult(to_text(value), False, loop.time() - start, value)

    def _cancel(self, ref: Any) -> None:
        try:
            self.ray.cancel(ref, force=True)  # a running sync call ignores the gentle cancel
        except Exception:  # noqa: BLE001 - already finished, or the cluster is gone
            pass
