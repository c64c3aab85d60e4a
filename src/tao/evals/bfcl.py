"""BFCL v4 non-live AST: the function-calling benchmark, data and checker from the ``bfcl-eval`` wheel.

Categories: ``simple`` (BFCL's ``simple_python``), ``multiple``, ``parallel``,
``parallel_multiple`` and ``irrelevance`` - 1,240 items; ``bfcl:simple,irrelevance`` picks some.
Items are interleaved across categories so ``--limit 100`` samples each of them.

BFCL scores the *call*, so each item's functions become recording tools: a call is written down
with its arguments exactly as the model sent them (no validation - type checks are the checker's
job) and answered ``"ok"``; nothing runs. Each agent gets one turn (BFCL non-live scores one
response; the plan agent: one plan), and the calls recorded in it go to BFCL's own
``ast_checker`` as ``[{name: arguments}]``. Function names get ``_`` for ``.``, as BFCL's OpenAI
handlers do (``^[a-zA-Z0-9_-]+$`` endpoints, Python identifiers in CodeAct), and the checker is told
so (``underscore_to_dot``).

``irrelevance`` is right only when the agent called nothing, had no reply it could not read and
answered - in text, or (CodeAct) with code that ran cleanly: a parse failure is a failure, never
a correct refusal (gorilla #443).

Install: ``pip install --no-deps bfcl-eval==2026.3.23`` - its own requirements (vllm-free but
with sentence-transformers, faiss, every provider SDK and numpy==1.26.4) are for running the
leaderboard, not for its data and AST checker, which need only the standard library.
"""

from __future__ import annotations

import json
import re
import sys
import types
from importlib import resources
from typing import Any

from ..tools.base import Tool
from .suites import Outcome, Score, Suite, Task

CATEGORIES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
              "parallel_multiple": "parallel_multiple", "irrelevance": "irrelevance"}
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"
#: the model name tao gives BFCL's checker; its config says names have "_" for "."
MODEL_NAME = "tao"


def _package() -> Any:
    try:
        import bfcl_eval
    except ImportError:
        raise ValueError(f"the bfcl suite needs the bfcl-eval wheel: {INSTALL}") from None
    return bfcl_eval


def checker() -> Any:
    """BFCL's ``ast_checker`` function.

    Its module imports ``bfcl_eval.constants.model_config``, the leaderboard's table of models,
    which imports every provider SDK BFCL can call (anthropic, cohere, mistralai, google-genai,
    qwen-agent, ...); the checker reads one field of it, ``underscore_to_dot``. So unless that
    module is already loaded, a stand-in with tao's one entry is registered under its name
    first; the checker itself is BFCL's, unchanged."""
    _package()
    name = "bfcl_eval.constants.model_config"
    config = types.SimpleNamespace(underscore_to_dot=True)
    if name in sys.modules:
        sys.modules[name].MODEL_CONFIG_MAPPING.setdefault(MODEL_NAME, config)
    else:
        stand_in = types.ModuleType(name, "tao's stand-in: the one model config the checker reads")
        stand_in.MODEL_CONFIG_MAPPING = {MODEL_NAME: config}  # type: ignore[attr-defined]
        sys.modules[name] = stand_in
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker


def tool_name(name: str) -> str:
    return re.sub(r"\.", "_", name)


class RecordingTool(Tool):
    """A BFCL function as a tool: the call is recorded, not run (BFCL scores the call itself)."""

    def __init__(self, function: dict[str, Any], calls: list[dict[str, Any]]):
        from ..models.base import ToolSpec

        self.name = tool_name(function["name"])
        self.description = function.get("description", "")
        self._spec = ToolSpec(self.name, self.description, json_schema(function["parameters"]))
        self._calls = calls

    @property
    def spec(self) -> Any:
        return self._spec

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(arguments)  # as sent: BFCL's checker judges the types

    def run(self, **arguments: Any) -> str:
        self._calls.append({self.name: arguments})
        return "ok"


def json_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """BFCL's parameter types ("dict", "float", "tuple", "any") as JSON Schema, by BFCL's own
    table (``GORILLA_TO_OPENAPI``); floats keep BFCL's note, as its OpenAI handlers send it."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    def cast(schema: dict[str, Any]) -> dict[str, Any]:
        out = dict(schema)
        kind = out.get("type", "string")
        out["type"] = GORILLA_TO_OPENAPI.get(kind, "string")
        if kind == "float":
            out["description"] = out.get("description", "") + " This is a float type value."
        if "properties" in out:
            out["properties"] = {k: cast(v) for k, v in out["properties"].items()}
        if isinstance(out.get("items"), dict):
            out["items"] = cast(out["items"])
        return out

    schema = cast({**parameters, "type": "dict"})
    schema.setdefault("properties", {})
    return schema


class BfclSuite(Suite):
    name = "bfcl"
    max_turns = 1
    helpers = False  # CodeAct sees BFCL's functions only

    def __init__(self, categories: list[str] | None = None):
        chosen = [c.strip() for c in categories or CATEGORIES if c.strip()]
        unknown = [c for c in chosen if c not in CATEGORIES and c not in CATEGORIES.values()]
        if unknown:
            raise ValueError(f"unknown BFCL categories {', '.join(unknown)}; use any of "
                             f"{', '.join(CATEGORIES)}")
        self.categories = [CATEGORIES.get(c, c) for c in chosen]
        if categories:
            self.name = "bfcl:" + ",".join(chosen)

    def tasks(self) -> list[Task]:
        data = resources.files(_package()) / "data"
        from bfcl_eval.constants.category_mapping import VERSION_PREFIX

        per_category = []
        for category in self.categories:
            questions = _read(data / f"{VERSION_PREFIX}_{category}.json")
            answers = {} if category == "irrelevance" else {
                a["id"]: a["ground_truth"]
                for a in _read(data / "possible_answer" / f"{VERSION_PREFIX}_{category}.json")}
            per_category.append([_task(q, category, answers.get(q["id"])) for q in questions])
        interleaved = []
        for i in range(max(map(len, per_category))):
            interleaved += [items[i] for items in per_category if i < len(items)]
        return interleaved

    def tools(self, task: Task, calls: list[dict[str, Any]]) -> list[Any]:
        return [RecordingTool(f, calls) for f in task.data["function"]]

    def score(self, task: Task, outcome: Outcome) -> Score:
        from .runner import parse_failures  # one definition of a parse failure

        from ..events import Action

        result, names = outcome.result, {tool_name(f["name"]) for f in task.data["function"]}
        actions = [e.call for e in outcome.events if type(e) is Action]
        # a call of a function the item does not have is a call all the same (a wrong one)
        calls = outcome.calls + [{c.name: c.arguments} for c in actions
                                 if c.name not in names and not c.parse_error]
        if task.category == "irrelevance":
            called = calls or actions
            if parse_failures(outcome.events):
                return Score(False, "no call", "parse failure")
            if called:
                return Score(False, "no call", "called a function")
            if not _answered(outcome):
                return Score(False, "no call", result.error or f"no answer ({result.status})")
            return Score(True, "no call")
        expected = json.dumps(task.data["ground_truth"], ensure_ascii=False)
        if not calls:
            why = "parse failure" if parse_failures(outcome.events) else "no call"
            return Score(False, expected, why)
        from bfcl_eval.constants.enums import Language

        verdict = checker()(task.data["function"], calls, task.data["ground_truth"],
                            Language.PYTHON, task.category, MODEL_NAME)
        return Score(bool(verdict["valid"]), expected, None if verdict["valid"]
                     else f"{verdict.get('error_type')}: {_first(verdict.get('error'))}")


def _answered(outcome: Outcome) -> bool:
    """A text answer, or (CodeAct, whose one turn is code) code that ran cleanly without calling
    the item's functions: what BFCL's irrelevance asks for. Code that failed - a NameError from
    calling a function the item lacks, say - is no clean answer."""
    from ..events import ExecutionFinished

    if outcome.result.ok and (outcome.result.answer or "").strip():
        return True
    runs = [e for e in outcome.events if type(e) is ExecutionFinished]
    return bool(runs) and not any(e.error or e.killed_reason for e in runs)


def _task(item: dict[str, Any], category: str, ground_truth: Any) -> Task:
    turns = item["question"]
    if len(turns) != 1 or [m["role"] for m in turns[0]] != ["user"]:
        raise ValueError(f"BFCL item {item['id']} is not one user question")
    return Task(item["id"], turns[0][0]["content"],
                {"function": item["function"], "ground_truth": ground_truth}, category)


def _read(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _first(errors: Any) -> str:
    if isinstance(errors, list) and errors:
        return str(errors[0])[:200]
    return str(errors)[:200]
