"""CodeAct: the model writes Python, a sandbox runs it, the output is the next observation.

Instead of one tool call per turn the model writes a code block that may call the tools, loop and
branch (seed 000 §2, §5; the CodeAct paper). The code runs in a ``tao.sandbox`` worker - never in
this process - where variables persist from one block to the next like an IPython session and
the agent's tools are functions bridged back to the host. A run ends when the model calls
``final_answer(x)`` in its code (what the prompt asks for: the answer is then computed, not
copied) or replies without code (that text is the answer).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from .. import prompts
from ..events import (
    CodeExecution,
    Error,
    Event,
    ExecutionFinished,
    FinalAnswer,
    ModelRetry,
    RunFinished,
    RunStarted,
    Thought,
    TokenDelta,
    TurnStarted,
)
from ..messages import Message, Usage
from ..models.base import Model, ModelResponse
from ..tools.arithmetic import ARITHMETIC
from ..tools.base import Tool, Toolbox, to_text
from .base import Agent, Result, detect_language
from .code_blocks import CODE_GRAMMAR, split_reply

_LABEL = re.compile(r"^\s*(?:\*\*)?(?:final answer|answer|reply|observation|最终答案|答案|回复|回答|执行结果)(?:\*\*)?\s*[:：]\s*",
                    re.IGNORECASE)


class CodeActAgent(Agent):
    """``CodeActAgent(model, tools=[...], sandbox=None, max_turns=10, system_prompt=None,
    language=None)``.

    One turn is one model call; every Python block of a reply runs in order in the sandbox
    (a block that fails stops the rest of that reply). ``Result.tool_calls`` counts *executions*
    (code blocks run), not the tool calls made from inside them. The seed's helpers ``add
    subtract multiply divide sum avg`` (``tao.tools.arithmetic``) are added to ``tools`` unless
    ``helpers=False`` or a tool of the same name is given.

    ``sandbox``: by default each run gets a fresh ``get_sandbox(tools=...)`` (bwrap where it
    works, ``$TAO_SANDBOX`` to choose) and closes it at the end; a sandbox passed in is reused -
    its variables outlive the run - gets this agent's tools, and is left open for its owner.
    ``timeout``: seconds one block may run (default: the sandbox's limit). ``system_prompt``
    replaces the prompt and its one-shot example (``prompts/codeact.*``).
    """

    name = "codeact"

    def __init__(self, model: Model, tools: Iterable[Tool | Callable[..., Any]] = (), *,
                 sandbox: Any = None, max_turns: int = 10, system_prompt: str | None = None,
                 language: str | None = None, helpers: bool = True, timeout: float | None = None):
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.model = model
        self.toolbox = Toolbox(tools) if not isinstance(tools, Toolbox) else tools
        if helpers:
            self.toolbox = Toolbox([*self.toolbox, *(t for t in ARITHMETIC
                                                     if t.name not in self.toolbox)])
        self.sandbox = sandbox
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self.language = language
        self.timeout = timeout

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

    async def stream(self, task: str) -> AsyncIterator[Event]:
        start = time.perf_counter()
        lang = self.language or detect_language(task)
        texts = prompts.table("codeact")[lang]
        messages = [Message.system(self.system_prompt), Message.user(task)] if self.system_prompt \
            else [Message.system(self.prompt(lang)), *self.example(lang), Message.user(task)]
        sandbox, own = self.sandbox, self.sandbox is None
        if own:
            from ..sandbox import get_sandbox

            sandbox = get_sandbox(tools=self.toolbox)  # a backend that cannot run raises here
        else:
            sandbox.set_tools(self.toolbox)
        usage, executions, turn = Usage(), 0, 0
        answer, status, error = None, "max_turns", None
        kwargs = self.model_kwargs()
        yield RunStarted(task, self.name, self.model.name)
        try:
            if own:
                await sandbox.__aenter__()  # the worker boots while the model writes
            while turn < self.max_turns:
                turn += 1
                yield TurnStarted(turn)
                response = None
                async for chunk in self.model.stream(messages, **kwargs):
                    if type(chunk) is str:
                        yield TokenDelta(chunk, turn)
                    elif type(chunk) is ModelResponse:
                        response = chunk
                    else:
                        yield ModelRetry(turn, chunk.attempt, chunk.reason, chunk.delay_s)
                usage.add(response.usage)
                text = response.message.content
                reply = split_reply(text)
                messages.append(Message.assistant(text))
                if not reply.has_code:
                    if reply.prose:
                        answer, status = _LABEL.sub("", reply.prose).strip(), "done"
                        yield FinalAnswer(answer, turn)
                        break
                    messages.append(Message.user(texts["empty"]))
                    yield Error(texts["empty"], turn, recoverable=True)
                    continue
                if reply.prose:
                    yield Thought(reply.prose, turn)
                outputs = []
                for i, code in enumerate(reply.blocks, 1):
                    yield CodeExecution(code, turn, i)
                    res = await sandbox.execute(code, self.timeout)
                    executions += 1
                    outputs.append(res.to_observation())
                    yield ExecutionFinished(res.stdout, res.error, turn, res.duration_s,
                                            res.stderr, res.killed_reason, outputs[-1])
                    if res.has_final_answer:
                        answer, status = to_text(res.final_answer), "done"
                        break
                    if not res.ok and i < len(reply.blocks):
                        outputs.append(prompts.render(texts["skipped"],
                                                      count=str(len(reply.blocks) - i)))
                        break
                if answer is not None:
                    yield FinalAnswer(answer, turn)
                    break
                content = "\n".join(o for o in outputs if o != "[no output]") or outputs[0]
                if res.ok:
                    content += texts["unanswered"]
                messages.append(Message.user(prompts.render(texts["observation"], content=content)))
        except Exception as e:  # noqa: BLE001 - the run ends with status "error", history kept
            status, error = "error", f"{type(e).__name__}: {e}"
            yield Error(error, turn)
        finally:
            if own:
                await sandbox.close()
        result = Result(answer, status, turn, executions, usage, time.perf_counter() - start,
                        messages, error)
        yield RunFinished(result)
