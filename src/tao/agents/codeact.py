"""CodeAct: the model writes Python, a sandbox runs it, the output is the next observation.

Instead of one tool call per turn the model writes a code block that may call the tools, loop and
branch (seed 000 §2, §5; the CodeAct paper). The code runs in a ``tao.sandbox`` worker - never in
this process - where variables persist from one block to the next like an IPython session and
the agent's tools are functions bridged back to the host. A run ends when the model calls
``final_answer(x)`` in its code (what the prompt asks for: the answer is then computed, not
copied), gives a ``<solution>`` with no code beside it, or replies with no code marker at all
(that text is the answer). A reply with a marker but nothing runnable in it (```bash, an empty
``<execute>``, code outside any block) is told the exact format and the loop goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from typing import Any

from .. import prompts
from ..events import (CodeExecution, Error, Event, ExecutionFinished, FinalAnswer, RunStarted,
                      Thought, TurnStarted)
from ..messages import Message
from ..models.base import Model
from ..tools.arithmetic import ARITHMETIC
from ..tools.base import Tool, Toolbox, to_text
from .base import Agent, detect_language, make_guard, make_memory
from .code_blocks import ANSWER_GRAMMAR, CODE_GRAMMAR, Reply, cut_block, split_reply
from .context import Reported, LoopContext
from .streak import code_key


class CodeActAgent(Agent):
    """``CodeActAgent(model, tools=[...], sandbox=None, max_turns=10, system_prompt=None,
    language=None)``.

    One turn is one model call; every Python block of a reply runs in order in the sandbox
    (a block that fails stops the rest of that reply). ``Result.tool_calls`` counts *executions*
    (code blocks run), not the tool calls made from inside them. The seed's helpers ``add
    subtract multiply divide sum avg`` (``tao.tools.arithmetic``) are added to ``tools`` unless
    ``helpers=False`` or a tool of the same name is given.

    ``sandbox``: by default each run gets a fresh ``get_sandbox(tools=...)`` (bwrap where it
    works, ``$TAO_SANDBOX`` to choose) and closes it at the end; a backend name (``"bwrap"``,
    ``"subprocess"``, ``"docker"``) does the same with that backend. A sandbox that cannot run
    here ends the run at once with status "error" saying why. A sandbox object passed in is
    reused - its variables outlive the run - gets this agent's tools, and is left open for its
    owner. ``RunStarted.sandbox`` and ``Result.sandbox`` name the backend that ran the code.
    ``timeout``: seconds one block may run (default: the sandbox's limit). ``system_prompt``
    replaces the prompt and its one-shot example (``prompts/codeact.*``). ``memory``:
    ``tao.memory.inject.Memory`` (each call fitted to the context by default). ``guard``: the
    guardrails' keywords (``allow= deny= approve= audit= max_tokens=``..., see ``tao.guard``);
    they hold for every tool call the code makes through the bridge. ``show_failed``: the reply
    after a failed block is shown that block too, not only its error (by default it is shown the
    conversation up to the last turn whose code worked, and the error: a small model shown its
    failed code copies it; a large one may rather edit it).
    """

    name = "codeact"
    #: a failed block's repair is sampled (``Agent.repair_temperature``), and shown without it
    repair_temperature: float | None = 0.7

    def __init__(self, model: Model, tools: Iterable[Tool | Callable[..., Any]] = (), *,
                 sandbox: Any = None, max_turns: int = 10, system_prompt: str | None = None,
                 language: str | None = None, helpers: bool = True, timeout: float | None = None,
                 memory: Any = None, output_type: Any = None, output_retries: int = 1,
                 name: str | None = None, handoffs: Iterable[Any] | None = None,
                 show_failed: bool = False, **guard: Any):
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.model = model
        self.toolbox = Toolbox(tools) if not isinstance(tools, Toolbox) else tools
        if helpers:
            self.toolbox = Toolbox([*self.toolbox, *(t for t in ARITHMETIC
                                                     if t.name not in self.toolbox)])
        self.memory = make_memory(memory)  # tao.memory.Memory: recall, remember, context fitting
        self.toolbox = self.memory.with_tools(self.toolbox)
        if isinstance(sandbox, str):
            from ..sandbox import KINDS

            if sandbox not in KINDS:
                raise ValueError(f"unknown sandbox {sandbox!r}; choose one of {', '.join(KINDS)}")
        self.sandbox = sandbox
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self.language = language
        self.timeout = timeout
        self.show_failed = show_failed
        self.guard = make_guard(guard, type(self))
        self.typed(output_type, output_retries)
        self.named(name, handoffs)

    def prompt(self, lang: str) -> str:
        """The system prompt: the callable functions with their signatures and docstrings."""
        funcs = "\n".join(f"{t.signature()}\n    " + t.description.replace("\n", "\n    ")
                          for t in self.toolbox)
        return prompts.render(prompts.template("codeact", lang), functions=funcs)

    @staticmethod
    def example(lang: str) -> list[Message]:
        """The one-shot example as a real exchange: small models follow a worked turn far better
        than the same example quoted inside the system prompt."""
        ex = prompts.table("codeact")["example"][lang]
        return [Message.user(ex["question"]), Message.assistant(ex["reply"])]

    def model_kwargs(self) -> dict[str, Any]:
        """The embedded model is held by ``CODE_GRAMMAR`` to one block that ends at its closing
        fence (so it cannot invent the output); an API model writes freely and is stopped
        before an invented observation."""
        if self.model.supports_grammar:  # the grammar ends the reply; no stop sequence needed
            return {"grammar": CODE_GRAMMAR, "max_tokens": 768}
        return {"stop": ["\nObservation:", "\n执行结果："]}

    def answer_kwargs(self) -> dict[str, Any]:
        """A turn whose reply must be the answer (``LoopContext.answer_now``): the embedded
        model writes plain text, no block; an API model is left to the observation's nudge."""
        if self.model.supports_grammar:
            return {"grammar": ANSWER_GRAMMAR, "max_tokens": 256}
        return self.model_kwargs()

    async def loop(self, task: str, run_id: str) -> AsyncIterator[Event]:
        from ..sandbox import SandboxError  # here, not at import: `import tao` stays cheap

        lang = self.language or detect_language(task)
        texts = prompts.table("codeact")[lang]
        run = LoopContext(self, task, lang, self.toolbox, run_id)
        messages = [Message.system(self.system_prompt), Message.user(task)] if self.system_prompt \
            else [Message.system(self.prompt(lang) + run.guard.system_note() + run.output_note()),
                  *self.example(lang),
                  Message.user(task)]
        own = self.sandbox is None or isinstance(self.sandbox, str)
        turn, answer, status, error = 0, None, "max_turns", None
        try:
            door = run.code_door()  # the code's tool calls: Actions and Observations too
            sandbox = self._sandbox(door)
        except SandboxError as e:  # the backend cannot run here: the run ends before any turn
            error = f"{type(e).__name__}: {e}"
            error += "" if "TAO_SANDBOX" in error else texts["choose_sandbox"]
            yield RunStarted(task, self.name, self.model.name)
            yield Error(error, 0)
            yield await run.finish(None, "error", 0, 0, messages, error)
            return
        blocks = Blocks(self, run, sandbox, texts, door)
        yield RunStarted(task, self.name, self.model.name, described := describe_sandbox(sandbox))
        try:
            if own:
                await sandbox.__aenter__()  # the worker boots while the model writes
            async for event in run.opening(messages):  # a checklist, where one is asked for
                yield event
            worked = len(messages)  # the conversation up to the last turn whose code worked
            repair = False  # whether the last turn's code failed: the next is shown without it
            while turn < self.max_turns:
                turn += 1
                yield TurnStarted(turn)
                asked = self.answer_kwargs() if run.answer_now else self.model_kwargs()
                shown = _without_failed(messages, worked, texts) if repair else messages
                repair = False
                async for event in run.model_turn(run.model.stream(shown, **asked), turn):
                    yield event
                text = run.response.message.content
                reply = split_reply(text)
                messages.append(Message.assistant(text))
                blocks.cut = None
                if run.response.finish_reason == "length" and reply.has_code:
                    reply, blocks.cut = _uncut(reply, texts)
                    if not reply.has_code:  # not one whole statement: nothing can run
                        messages.append(Message.user(note := blocks.cut))
                        yield Error(note, turn, recoverable=True)
                        continue
                if not reply.has_code:
                    if reply.answer is not None and (fix := run.checked(reply.answer)):
                        messages.append(Message.user(fix))  # not the type asked for
                        yield Error(fix, turn, recoverable=True)
                        continue
                    if reply.answer is not None:
                        answer, status = reply.answer, "done"
                        yield FinalAnswer(answer, turn)
                        break
                    messages.append(Message.user(note := _correction(reply, texts)))
                    yield Error(note, turn, recoverable=True)
                    continue
                if reply.prose:
                    yield Thought(reply.prose, turn)
                async for event in blocks.run(reply, turn):  # each block, its output, the answer
                    yield event
                if blocks.answer is not None and (fix := run.checked(blocks.answer, blocks.value, True)):
                    blocks.outputs.append(fix)  # final_answer(obj) of another type: said
                    blocks.answer = None
                if blocks.answer is not None:
                    answer, status = blocks.answer, "done"
                    yield FinalAnswer(answer, turn)
                    break
                messages.append(Message.user(blocks.observation(reply)))
                repair = run.failed and not self.show_failed
                worked = worked if run.failed else len(messages)
                if run.ended:  # the code handed over: the target's answer ends the run
                    status = "done"
                    break
        except Exception as e:  # noqa: BLE001 - the run ends with status "error", history kept
            status, error = "error", f"{type(e).__name__}: {e}"
            yield Error(error, turn)
        finally:
            if own:
                await sandbox.close()
        yield await run.finish(answer, status, turn, blocks.executions, messages, error, described)

    def _sandbox(self, tools: Toolbox) -> Any:
        """The run's sandbox, with ``tools`` (this agent's, behind the run's guard): a fresh one
        of the chosen backend, or the one passed in. Raises ``SandboxUnavailable`` when the
        backend cannot run here."""
        if self.sandbox is not None and not isinstance(self.sandbox, str):
            self.sandbox.set_tools(tools)
            return self.sandbox
        from ..sandbox import get_sandbox

        return get_sandbox(self.sandbox, tools=tools)


def _without_failed(messages: list[Message], worked: int, texts: dict[str, str]) -> list[Message]:
    """What the model is shown after a block failed: the conversation up to the last turn whose
    code worked, and the error - not the failed code. Shown its failed block, a small model
    copies it, word for word even when sampled (HumanEval/140: the same 30 lines three times,
    then the loop stop); asked again without it, it writes the code another way. The run's
    messages keep everything."""
    error = texts["failed"].format(observation=messages[-1].content)
    last = messages[worked - 1]
    return [*messages[:worked - 1], Message.user(last.content + error)] if last.role == "user" \
        else [*messages[:worked], Message.user(error.strip())]


def _uncut(reply: Reply, texts: dict[str, str]) -> tuple[Reply, str]:
    """A reply the token limit cut: its last block less the statement the cut reached (and asserts
    repeated word for word, a small model's way of running out of tokens), and what to say."""
    cut = cut_block(reply.blocks[-1])
    blocks = [*reply.blocks[:-1], cut.code] if cut.code.strip() else reply.blocks[:-1]
    if not blocks:
        return replace(reply, blocks=[]), texts["cut_nothing"]
    note = prompts.render(texts["cut"], line=str(cut.line))
    if cut.repeats:
        note += prompts.render(texts["cut_repeats"], count=str(cut.repeats))
    return replace(reply, blocks=blocks), note


def describe_sandbox(sandbox: Any) -> str:
    """What confines the code: the sandbox's own ``describe()`` (its kind and what it shields),
    else its ``kind``."""
    describe = getattr(sandbox, "describe", None)
    if callable(describe):
        return str(describe())
    return str(getattr(sandbox, "kind", None) or type(sandbox).__name__)


class Blocks:
    """One reply's code blocks, run in order in the sandbox: each block's tool calls go through
    the tool door (their approvals arrive as events while the block runs), its output is fenced
    when the code read untrusted content, noted in the journal, and the rest are skipped after
    an error. ``answer`` is set when a block called ``final_answer``."""

    def __init__(self, agent: CodeActAgent, run: LoopContext, sandbox: Any, texts: dict[str, str],
                 door: Reported):
        self.agent, self.ctx, self.sandbox, self.texts, self.door = agent, run, sandbox, texts, door
        self.executions, self.answer, self.value = 0, None, None
        self.outputs: list[str] = []
        self.last: Any = None
        self.cut: str | None = None  # what the token limit took off this reply (``_uncut``)

    async def run(self, reply: Reply, turn: int) -> AsyncIterator[Event]:
        guard, self.outputs = self.ctx.guard, []
        self.door.turn = turn
        streak, done = self.ctx.streak, []
        try:
            for i, code in enumerate(reply.blocks, 1):
                if streak.blocked(key := code_key(code)):  # failed twice in a row as it is: stop
                    guard.stuck(None, None, streak.reason(streak.what_code()))
                yield CodeExecution(code, turn, i)
                pump = guard.pump(self.sandbox.execute(code, self.agent.timeout), timed=True,
                                  events=bool(self.door.names))
                async for event in pump:  # approvals of the code's tool calls, as they come
                    yield event
                res = self.last = pump.value
                self.executions += 1
                note = streak.settle(key, not res.ok, streak.what_code())  # twice: it is said
                self.outputs.append(guard.fenced(res.to_observation(), "python") + note)
                done.append((key, not res.ok, self.outputs[-1]))
                yield ExecutionFinished(res.stdout, res.error, turn, res.duration_s, res.stderr,
                                        res.killed_reason, self.outputs[-1])
                if guard.journal is not None:  # the block and what it gave, before the next
                    guard.journal.note("code", {"turn": turn, "index": i, "code": code,
                                                "ok": res.ok, "observation": self.outputs[-1]})
                if res.has_final_answer:
                    self.answer, self.value = to_text(res.final_answer), res.final_answer
                    return
                if not res.ok and i < len(reply.blocks):
                    self.outputs.append(prompts.render(self.texts["skipped"],
                                                       count=str(len(reply.blocks) - i)))
                    return
        finally:  # a reply that only re-ran blocks, with the same output again, is counted
            self.ctx.learnt(done)

    def observation(self, reply: Reply) -> str:
        """What the model reads after the blocks: their outputs, and a nudge toward an answer."""
        content = "\n".join(o for o in self.outputs if o != "[no output]") or self.outputs[0]
        if self.cut:  # the token limit cut the last block: what did not run
            content += self.cut
        if reply.solution:  # written before the output existed: not an answer yet
            content += self.texts["early_solution"]
        elif self.last.ok:
            content += self.texts["unanswered"]
        return prompts.render(self.texts["observation"], content=content)


def _correction(reply: Reply, texts: dict[str, str]) -> str:
    """What the model is told about a reply that had nothing to run and no answer: what was
    wrong with it, and the exact format expected."""
    if reply.problem is None:
        return texts["empty"]
    kind, what = reply.problem
    return prompts.render(texts["no_code"], problem=prompts.render(texts["problem_" + kind],
                                                                   what=what))
