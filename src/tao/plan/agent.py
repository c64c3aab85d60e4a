"""Plan-and-Execute: plan the task as a DAG of steps, run them in parallel, re-plan on failure.

The loop: the planner's model call returns a plan (validated; an invalid one goes back with its
problems); the executor runs each step the moment its own dependencies are done; a step that
fails after its retries skips its dependents and, once the rest has run, the planner is asked for
a plan of the remaining work (at most ``max_replans`` times). With ``max_reviews``, a plan that
ran through without an answer of its own is shown its results: the planner names the one that
answers the task, or adds the steps still missing. The answer is the plan's answer template (or
the result the review named) filled with results - no further model call - or, when there is
none, one short synthesis call. The parts live in ``tao.plan``.

Accounting: ``Result.turns`` is the number of model (LLM) calls of the run, sub-agents' included:
the seed 小明 task is 1 (the plan, whose answer is ``$step4``). ``Result.tool_calls`` counts tool
executions, retries and sub-agents' calls included.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..agents.base import Agent, detect_language, make_guard, make_memory
from ..agents.context import LoopContext
from ..events import (
    Error,
    Event,
    FinalAnswer,
    Nested,
    PlanCreated,
    Replanned,
    RunFinished,
    RunStarted,
)
from ..messages import Message, ToolCall
from ..models.base import Model
from ..tools.base import Tool, Toolbox, to_text
from ..tools.context import RunView
from .agent_tool import AgentTool, answer_of, nest
from .executor import Attempt, Executor, Outcome
from .planner import PlanFailed, Planner, Tally
from .references import references, resolve
from .schema import Plan, Step

_END = object()
@dataclass(slots=True)
class _Run:
    """The state of one run (an agent may run several tasks at once)."""

    task: str
    lang: str
    emit: Callable[[Event], None]
    tally: Tally
    pool: ThreadPoolExecutor
    guard: Any  # the run's tao.guard Run
    remote: Any = None  # executor="ray": the RayTools that run the tool calls
    tools: Any = None  # the agent's toolbox in this run (``Toolbox.with_run``)
    context: Any = None  # the run's ``LoopContext``
    steps: dict[str, Step] = field(default_factory=dict)  # every step of every plan
    results: dict[str, Any] = field(default_factory=dict)  # values of the finished steps
    done: list[Outcome] = field(default_factory=list)


class PlanExecuteAgent(Agent):
    """``PlanExecuteAgent(model, tools, step_agent=None, max_replans=2, max_retries=3,
    concurrency=8, executor="async")``.

    ``step_agent``: an ``Agent`` (or a factory returning one per step) that runs the steps the
    planner gives an ``instruction`` instead of a tool call; it gets the instruction and the
    results of the step's dependencies, and its events appear in this agent's stream as
    ``Nested``. Without it every step must call a tool. ``max_fixes``: how many times an invalid
    plan goes back to the planner. ``max_reviews``: how many times a plan that ran through without
    an answer of its own is shown its results and asked which one answers the task, or which
    steps are missing (0: the step nothing depends on is the answer, or one synthesis call;
    measured in BENCHMARKS.md). ``step_timeout`` (seconds) bounds each attempt of a step;
    ``retry_backoff`` is the first retry's delay (doubling after).

    ``plan_form``: how the planner writes the plan - ``"json"`` (an object, decoded under a
    grammar on the embedded model) or ``"code"`` (straight-line Python, each assignment a step
    the tools run, ``tao.plan.code_form``); None: code on the embedded model, where it was
    measured (BENCHMARKS.md), JSON on an endpoint or with a ``step_agent`` (a code plan has no
    instruction steps). Either form's planner reads the other's plan.

    ``executor="ray"`` runs the tool steps as Ray tasks with the same scheduling and events
    (``tao.plan.ray_executor``: tools must be picklable; ``ray_options`` go to each task's
    ``.options()``); ``executor="async"`` runs them in this process.

    ``stream_plan=True`` (LLMCompiler): each step starts as soon as its JSON object has streamed
    in and checks out against the steps before it (a streamed step may only depend on earlier
    ones), so the first tools run while the plan is still being written; ``PlanCreated`` then
    comes after those ``StepStarted``. If the reply turns out invalid part-way, the steps that
    ran are kept and the planner is asked for the rest. A plan written as code is read whole
    first (a line of it is not a step until the lines it uses are read).

    ``memory``: ``tao.memory.inject.Memory`` (each call fitted to the context by default).
    ``guard``: the guardrails' keywords (``allow= deny= approve= audit= max_tokens=``..., see
    ``tao.guard``): a tool step is admitted before its ``StepStarted``; a refused one fails
    without retries, so the planner hears why.
    """

    name = "plan"

    def __init__(self, model: Model, tools: Iterable[Tool | Callable[..., Any]] = (), *,
                 step_agent: Agent | Callable[[], Agent] | None = None, max_replans: int = 2,
                 max_retries: int = 3, concurrency: int = 8, executor: str = "async",
                 max_fixes: int = 2, max_reviews: int = 0, plan_form: str | None = None,
                 step_timeout: float | None = None,
                 retry_backoff: float = 0.5, stream_plan: bool = False,
                 language: str | None = None, system_prompt: str | None = None,
                 ray_options: dict[str, Any] | None = None, memory: Any = None,
                 output_type: Any = None, output_retries: int = 1, name: str | None = None,
                 handoffs: Iterable[Any] | None = None, **guard: Any):
        if executor not in ("async", "ray"):
            raise ValueError(f"executor={executor!r} is not available; use 'async' or 'ray'")
        for value, what in ((max_replans, "max_replans"), (max_retries, "max_retries"),
                            (max_fixes, "max_fixes"), (max_reviews, "max_reviews")):
            if value < 0:
                raise ValueError(f"{what} must be 0 or more")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if plan_form not in (None, "json", "code"):
            raise ValueError(f"plan_form={plan_form!r} is not a form of plan; use 'json' or 'code'")
        if plan_form == "code" and step_agent is not None:
            raise ValueError("a plan written as code has no instruction steps for a step_agent; "
                             "use plan_form='json' with step_agent=")
        if step_agent is not None and not (isinstance(step_agent, Agent) or callable(step_agent)):
            raise TypeError(f"step_agent must be an Agent or a factory of agents, not {step_agent!r}")
        self.model = model
        self.memory = make_memory(memory)  # tao.memory.Memory: recall, remember, context fitting
        self.toolbox = self.memory.with_tools(tools if isinstance(tools, Toolbox) else Toolbox(tools))
        if executor == "ray":  # lazy: only a Ray agent imports ray; unpicklable tools fail now
            from .ray_executor import check_tools, import_ray

            import_ray()
            check_tools(self.toolbox, local=(AgentTool,))
        self.ray_options = dict(ray_options or {})
        self.step_agent = step_agent
        self.max_replans, self.max_retries, self.max_fixes = max_replans, max_retries, max_fixes
        self.max_reviews = max_reviews
        #: None: straight-line code for the embedded model (measured there), JSON elsewhere and
        #: wherever a step agent takes instruction steps (a JSON plan's "instruction")
        self.plan_form = plan_form or ("code" if getattr(model, "supports_grammar", False)
                                       and step_agent is None else "json")
        self.concurrency = concurrency
        self.executor = executor
        self.step_timeout = step_timeout
        self.retry_backoff = retry_backoff
        self.stream_plan = stream_plan
        self.language = language
        self.system_prompt = system_prompt
        self.guard = make_guard(guard, type(self))
        self.typed(output_type, output_retries)
        self.named(name, handoffs)

    async def loop(self, task: str, run_id: str) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        runner = asyncio.ensure_future(self._run(task, run_id, queue.put_nowait))
        runner.add_done_callback(lambda _: queue.put_nowait(_END))
        try:
            while (event := await queue.get()) is not _END:
                yield event
            runner.result()  # a bug in the loop itself surfaces here
        finally:
            if not runner.done():  # the consumer stopped early: stop the run
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    async def _run(self, task: str, run_id: str, emit: Callable[[Event], None]) -> None:
        lang = self.language or detect_language(task)
        lang = lang if lang in ("zh", "en") else "en"
        context = LoopContext(self, task, lang, self.toolbox, run_id)  # guard and memory, started
        guard = context.guard
        guard.emit = emit
        guard.enter()  # this task's own context: step agents run under this run's guard
        run = _Run(task, lang, emit, Tally(), _pool(self.concurrency), guard)
        # the steps' tools see the run (tao.RunContext): its deps, id and the usage so far
        run.tools = self.toolbox.with_run(RunView(context.deps, run_id, run.tally.usage))
        run.context = context
        if self.executor == "ray":
            from .ray_executor import RayTools

            run.remote = RayTools(self.toolbox, self.ray_options)
        planner = Planner(context.model, self.toolbox, emit, run.tally, lang=run.lang,
                          agent_steps=self.step_agent is not None, max_fixes=self.max_fixes,
                          system_prompt=self.system_prompt, form=self.plan_form,
                          draw=context.repair_draw)
        executor = Executor(lambda step, payload, attempt: self._run_step(run, step, payload),
                            emit, concurrency=self.concurrency, max_retries=self.max_retries,
                            backoff=self.retry_backoff, timeout=self.step_timeout,
                            gate=(lambda step, args: self._gate(run, step, args)) if guard.active else None)
        answer, status, error = None, "error", None
        emit(RunStarted(task, self.name, self.model.name))
        try:
            opened = [Message.user(task)]
            async for event in context.opening(opened):  # a checklist, where one is asked for
                emit(event)
            run.tally.usage.add(context.usage)  # the checklist's call (nothing without one)
            planner.notes = opened[1:]  # the planner plans with it; the step agents do not
            plan, outcomes = await self._first_plan(planner, executor, run)
            emit(PlanCreated(plan.to_dicts(), run.tally.turns, plan.answer))
            template, replans, reviews = plan.answer, 0, 0
            while True:
                if outcomes is None:
                    run.steps.update((s.id, s) for s in plan.steps)
                    outcomes = await executor.run(plan.steps, run.results)
                run.done += [o for o in outcomes.values() if o.status == "done"]
                if context.ended:  # a step handed over: the target answers
                    break
                troubles = [o for o in outcomes.values() if o.status != "done"]
                if not troubles:
                    if plan.answer_given or reviews >= self.max_reviews or not run.done:
                        break
                    reviews += 1  # do the results answer the task, or is a step missing?
                    plan = await planner.review(task, run.done, run.results)
                    if not plan.steps:
                        template = plan.answer
                        break
                    reason, template = prompts.table("plan")[lang]["reviewed"], plan.answer
                else:
                    failed = next(o for o in troubles if o.status == "failed")
                    if replans >= self.max_replans:
                        left = f" (no re-plans left: {replans} made)" if replans else ""
                        raise PlanFailed(f"{failed.step.id} failed after {failed.attempts} "
                                         f"attempt(s): {failed.text}{left}")
                    replans += 1
                    plan, reason = await planner.replan(task, run.done, troubles, run.results)
                emit(Replanned(replans + reviews, reason, plan.to_dicts(), run.tally.turns,
                               plan.answer))
                outcomes = None
                template = plan.answer if plan.answer is not None else template
            answer = None if context.ended else _templated(context, template, run.results)
            if answer is None and not context.ended:  # no template, or not of the type asked
                answer = await planner.synthesize(task, run.done, context.output, lang)
                while (fix := context.checked(answer)) is not None:
                    answer = await planner.answer_again(fix, context.output)
            status = "done"
            if answer is not None:
                emit(FinalAnswer(answer, run.tally.turns))
        except Exception as e:  # noqa: BLE001 - the run ends with status "error", history kept
            error = str(e) if isinstance(e, PlanFailed) else f"{type(e).__name__}: {e}"
            emit(Error(error, run.tally.turns))
        t = run.tally
        context.usage = t.usage  # the planner's calls and the step agents' runs
        emit(await context.finish(answer, status, t.turns, t.tool_calls, planner.messages, error))

    async def _first_plan(self, planner: Planner, executor: Executor,
                          run: _Run) -> tuple[Plan, dict[str, Outcome] | None]:
        """The first plan; when streamed, its steps already ran and their outcomes come too."""
        if not self.stream_plan:
            return await planner.plan(run.task), None
        execution = executor.start(run.results)

        def dispatch(step: Step) -> None:
            run.steps[step.id] = step
            execution.add(step)

        try:
            plan, problems = await planner.plan_streamed(run.task, dispatch)
        except BaseException:
            await execution.cancel()
            raise
        outcomes = await execution.finish()
        if plan is not None:
            return plan, outcomes
        # the reply went wrong part-way: what ran is kept, the rest is planned again
        done = [o for o in outcomes.values() if o.status == "done"]
        run.done += done
        troubles = [o for o in outcomes.values() if o.status != "done"]
        return await planner.repair(run.task, problems, done, troubles, run.results), None

    # -- running one step -----------------------------------------------------------------
    async def _gate(self, run: _Run, step: Step, args: Any) -> Any:
        """A tool step's args as the guard admits them, or the ``Attempt`` refusing it."""
        admitted = await run.guard.vet(ToolCall(step.id, step.tool, args), self.toolbox[step.tool])
        if isinstance(admitted, ToolCall):
            return admitted.arguments
        return Attempt(False, admitted.content, retry=False)

    async def _run_step(self, run: _Run, step: Step, payload: Any) -> Attempt:
        if step.tool is None:
            return await self._run_agent_step(run, step, payload)
        tool = self.toolbox[step.tool]
        run.tally.tool_calls += 1
        door = run.guard if run.guard.active else None
        call = ToolCall(f"{step.id}", step.tool, payload)
        if isinstance(tool, AgentTool):  # its events, not one result: admitted here
            if door is not None:
                admitted = await door.admit(call, tool)  # what the gate decided
                if not isinstance(admitted, ToolCall):
                    return Attempt(False, admitted.content, retry=False)
                call = admitted
            try:
                task = tool.validate(call.arguments)["task"]
            except ValueError as e:
                return Attempt(False, f"Error: {e}", retry=False)
            return await self._nested(run, step.id, tool.stream(task, step.id, run.context.deps),
                                      tool.name)
        if run.remote is not None and getattr(tool, "context_param", None) is None:
            # a Ray task, through the same tool door as a local call (a tool that takes the
            # run's RunContext runs here: its deps stay in this process)
            def remote(c: ToolCall, _thread: bool) -> Any:
                return run.remote.execute(c.name, c.arguments)

            res = await (door.call_tool(call, tool, remote) if door is not None
                         else remote(call, False))
        elif tool.is_async():
            res = await run.tools.execute(call, run=door)
        else:  # our own pool: as many threads as steps may run at once
            loop = asyncio.get_running_loop()
            step_call = loop.run_in_executor(run.pool, _execute_sync, run.tools, call, door)
            res = await (door.meter.within(step_call) if door is not None else step_call)
        if self.handoffs:  # a step that hands over ends the plan after this round
            res = run.context.noticed(call, res)
        return Attempt(not res.is_error, res.content, res.value, retry=res.retryable)

    async def _run_agent_step(self, run: _Run, step: Step, instruction: str) -> Attempt:
        texts = prompts.table("plan")[run.lang]
        task = prompts.render(texts["step_task"], instruction=instruction, task=run.task,
                              description=step.description)
        if step.depends_on:
            lines = [prompts.render(texts["result_line"], id=d, description=run.steps[d].description,
                                    result=to_text(run.results[d])) for d in step.depends_on]
            task += "\n" + prompts.render(texts["step_context"], results="\n".join(lines))
        agent = self.step_agent if isinstance(self.step_agent, Agent) else self.step_agent()
        stream = (nest(step.id, e) async for e in agent.stream(task, deps=run.context.deps))
        return await self._nested(run, step.id, stream, agent.name)

    async def _nested(self, run: _Run, step_id: str, events: AsyncIterator[Nested],
                      name: str) -> Attempt:
        """Forward a sub-agent's (already nested) events; its spending counts as ours."""
        result = None
        async for event in events:
            run.emit(event)
            if event.depth == 1 and type(event.event) is RunFinished:
                result = event.event.result
        if result is not None:
            run.tally.turns += result.turns
            run.tally.tool_calls += result.tool_calls
            run.tally.usage.add(result.usage)
        try:
            answer = answer_of(result, name)
        except RuntimeError as e:
            return Attempt(False, f"Error: {e}")
        return Attempt(True, answer, answer)


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _templated(context: LoopContext, template: Any, results: dict[str, Any]) -> str | None:
    """The plan's own answer (``"$step3 km"``) when all it refers to ran - and, for a typed
    result, when its value is of the type (``context.value`` then holds it); else None."""
    if template is None or not all(r in results for r in references(template)):
        return None
    value = resolve(template, results)
    if context.output is not None:
        from ..output import OutputError

        try:
            context.value = context.output.validate(value)
        except OutputError:
            return None
    return to_text(value)


def _pool(size: int) -> ThreadPoolExecutor:
    """The threads sync tools run in: one pool per concurrency, shared by every run and kept
    (threads start lazily and are reused: starting 48 threads costs a fan-out ~70 ms on 2 cores)."""
    with _POOLS_LOCK:
        if size not in _POOLS:
            _POOLS[size] = ThreadPoolExecutor(size, f"tao-plan-{size}")
        return _POOLS[size]


def _execute_sync(toolbox: Toolbox, call: ToolCall, door: Any = None) -> Any:
    """Run a sync tool's call in a pool thread with the Toolbox's own validation and error
    handling. Without a tool timeout the Toolbox runs a sync tool inline and never awaits, so the
    coroutine is driven to its end by one ``send`` (20 µs; ``asyncio.run`` costs 0.4 ms a call)."""
    coro = toolbox.execute(call, run=door)  # the gate decided already: it does not suspend
    if toolbox[call.name].timeout is not None:  # wait_for + to_thread inside: needs a loop
        return asyncio.run(coro)
    try:
        coro.send(None)
    except StopIteration as finished:
        return finished.value
    coro.close()
    raise RuntimeError("Toolbox.execute suspended on an inline sync call")


__all__ = ["PlanExecuteAgent", "Plan", "Step"]
