"""Record the embedded model's own CodeAct replies for ``codeact_replies.jsonl`` (not a test).

    python tests/data/record_local_replies.py OUT.jsonl [MINUTES] [--tags]

GSM8K questions from the shared data folder go to the real 0.5B ``LocalModel()`` twice: through
``CodeActAgent`` (held by ``CODE_GRAMMAR``, every reply of the run) and once on the same first-turn
messages without the grammar (the free format the model writes, with the stop sequences an API
model gets). With ``--tags`` the model instead gets a system prompt in the CodeAct paper's format
(``<thought>``, ``<execute>``, ``<solution>``, one worked example) and no grammar, through
``CodeActAgent``. Every raw
reply is written as it comes, with the question id and the mode.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from tao.agents.codeact import CodeActAgent
from tao.messages import Message
from tao.models.local import LocalModel

DATA = Path("/work/shared/data/gsm8k/train_sample_200.jsonl")
TAGS_PROMPT = (
    "You solve the task with an interactive Python environment. At each turn, first think step by "
    "step inside <thought> </thought>. Then either run Python code inside <execute> </execute> "
    "(its output comes back to you), or give the final answer inside <solution> </solution>, "
    "for example: The answer is <solution> 42 </solution>.\n\n"
    "Example.\nTask: A field is 40 m long and 25 m wide. A post stands every 5 m along its edge. "
    "How many posts are there?\nAssistant:\n<thought> The posts stand along the perimeter. "
    "</thought>\n<execute>\nperimeter = 2 * (40 + 25)\nprint(perimeter / 5)\n</execute>\n"
    "Observation:\n26.0\nAssistant:\nThe answer is <solution> 26 </solution>.")


class _NoGrammar:
    """Stands for a model without grammars: what ``CodeActAgent.model_kwargs`` sends one."""

    supports_grammar = False


def tags(out: str, minutes: float) -> None:
    """The CodeAct paper's tag format, no grammar: what the model writes when asked for it."""
    model = LocalModel()
    model.supports_grammar = False  # the agent then sends stop sequences, as to an API model
    deadline = time.monotonic() + minutes * 60
    questions = [json.loads(line) for line in DATA.read_text("utf-8").splitlines() if line.strip()]
    with open(out, "a", encoding="utf-8") as f:
        for task in questions[-5::-1]:  # from the other end: not the questions of the other modes
            if time.monotonic() > deadline:
                break
            t = time.monotonic()
            agent = CodeActAgent(model, system_prompt=TAGS_PROMPT, max_turns=3)
            result = agent.run(task["question"])
            replies = [m.content for m in result.messages if m.role == "assistant"]
            for turn, reply in enumerate(replies, 1):
                f.write(json.dumps({"id": task["id"], "mode": "tags", "turn": turn, "reply": reply,
                                    "seconds": round((time.monotonic() - t) / len(replies), 1)},
                                   ensure_ascii=False) + "\n")
            f.flush()


def main(out: str, minutes: float = 25.0) -> None:
    model = LocalModel()
    deadline = time.monotonic() + minutes * 60
    questions = [json.loads(line) for line in DATA.read_text("utf-8").splitlines() if line.strip()]
    with open(out, "a", encoding="utf-8") as f:
        def write(task: dict, mode: str, turn: int, reply: str, seconds: float) -> None:
            f.write(json.dumps({"id": task["id"], "mode": mode, "turn": turn, "reply": reply,
                                "seconds": round(seconds, 1)}, ensure_ascii=False) + "\n")
            f.flush()

        for task in questions:
            if time.monotonic() > deadline:
                break
            agent = CodeActAgent(model, max_turns=3)
            lang = "en"
            messages = [Message.system(agent.prompt(lang)), *agent.example(lang),
                        Message.user(task["question"])]
            t = time.monotonic()
            stop = CodeActAgent(_NoGrammar(), max_turns=1).model_kwargs()["stop"]
            free = asyncio.run(model.complete(messages, stop=stop))
            write(task, "free", 1, free.message.content, time.monotonic() - t)
            t = time.monotonic()
            result = agent.run(task["question"])
            # the first assistant message is the worked example
            replies = [m.content for m in result.messages if m.role == "assistant"][1:]
            for turn, reply in enumerate(replies, 1):
                write(task, "grammar", turn, reply, (time.monotonic() - t) / max(1, len(replies)))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--tags"]
    (tags if "--tags" in sys.argv else main)(args[0], float(args[1]) if len(args) > 1 else 25.0)
