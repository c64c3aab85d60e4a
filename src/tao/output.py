"""Typed results: ``output_type=`` turns a run's final answer into a validated Python value.

Any type pydantic can validate works - a pydantic model, a dataclass, a TypedDict, ``list[int]``,
``Literal["yes", "no"]`` - through one ``TypeAdapter``. Its JSON schema is what the model is
asked for: on the embedded model the final answer is decoded under that schema's grammar, so it
always parses; elsewhere the schema goes to the endpoint (``response_format``) and is said in the
prompt. Whatever the route, the answer text is validated here: the JSON may stand alone, sit in a
```` ```json ```` fence or inside prose ("Here it is: {...}"), and a value that fails validation
goes back to the model with pydantic's words, ``output_retries`` times at most.

``Result.answer`` stays the text; ``Result.output`` holds the value.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import prompts
from .errors import TaoError

#: validation failures a run sends back to the model before it ends with status "error"
OUTPUT_RETRIES = 1

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


class OutputError(TaoError):
    """The final answer is not a valid value of the run's ``output_type``; the message is
    written for the model (what was wrong, where)."""


class Output:
    """``Output(type_)``: the schema to ask for and the validation of what came back."""

    def __init__(self, type_: Any):
        from pydantic import TypeAdapter

        self.type = type_
        self.adapter: Any = TypeAdapter(type_)
        self.schema: dict[str, Any] = self.adapter.json_schema()
        self.name = getattr(type_, "__name__", None) or str(type_)
        self._digest: str | None = None

    @classmethod
    def of(cls, type_: Any) -> Output | None:
        """The output of ``type_``; None for ``str`` and None (the answer as it is)."""
        if type_ is None or type_ is str:
            return None
        return type_ if isinstance(type_, Output) else cls(type_)

    def digest(self) -> str:
        """The schema's fingerprint: what a journaled run keeps, so that ``resume`` knows it was
        typed, and as what (``tao.runs``)."""
        if self._digest is None:
            import hashlib

            from .safe_json import dumps

            text = dumps(self.schema, sort_keys=True).encode("utf-8", "surrogatepass")
            self._digest = hashlib.sha256(text).hexdigest()[:16]
        return self._digest

    def response_format(self) -> dict[str, Any]:
        """What an OpenAI-compatible endpoint (and the embedded model) is given for the answer."""
        return {"type": "json_schema", "json_schema": {
            "name": re.sub(r"[^A-Za-z0-9_-]", "_", self.name)[:64] or "output",
            "schema": self.schema}}

    def instructions(self, lang: str) -> str:
        """The system prompt's words for the answer's form."""
        text = prompts.table("output")["zh" if lang == "zh" else "en"]["instructions"]
        return prompts.render(text, schema=json.dumps(self.schema, ensure_ascii=False))

    def correction(self, error: OutputError, lang: str) -> str:
        """What the model reads after an answer that did not validate."""
        text = prompts.table("output")["zh" if lang == "zh" else "en"]["correction"]
        return prompts.render(text, error=str(error))

    # -- validation -----------------------------------------------------------------------------
    def parse(self, text: str) -> Any:
        """The value in an answer's text, or ``OutputError``."""
        from pydantic import ValidationError

        last: Exception | None = None
        for candidate in _candidates(text):
            try:
                return self.adapter.validate_json(candidate)
            except ValidationError as e:
                last = e
        try:  # not JSON: a bare word may still be a Literal, an Enum's value or a number
            return self.adapter.validate_python(text.strip().rstrip("。.!！").strip())
        except ValidationError as e:
            raise OutputError(_words(last or e, "" if last else "the answer is not JSON")) \
                from None

    def validate(self, value: Any) -> Any:
        """A Python value (CodeAct's ``final_answer(obj)``, a plan step's result) as the type."""
        from pydantic import ValidationError

        try:
            return self.adapter.validate_python(value)
        except ValidationError as e:
            if isinstance(value, str):
                return self.parse(value)
            raise OutputError(_words(e, "")) from None

    def dump(self, value: Any) -> Any:
        """The value as JSON data (for the journal, ``--json`` and the web page)."""
        return self.adapter.dump_python(value, mode="json")


#: a schema a user typed (the workbench's box, a file) is data from outside: bounded before use
MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES = 32, 2000


def _bounded(schema: dict[str, Any]) -> None:
    """Refuse, with words, a schema nested deeper or larger than any output needs (the checker,
    pydantic and the grammar all recurse over it), or one that points outside itself: a
    ``$ref`` that is not ``#/...`` would make the checker fetch or fail at the run's end."""
    todo: list[tuple[Any, int]] = [(schema, 1)]
    nodes = 0
    while todo:
        node, depth = todo.pop()
        nodes += 1
        if depth > MAX_SCHEMA_DEPTH:
            raise ValueError(f"the JSON Schema is nested more than {MAX_SCHEMA_DEPTH} levels deep")
        if nodes > MAX_SCHEMA_NODES:
            raise ValueError(f"the JSON Schema has more than {MAX_SCHEMA_NODES} parts")
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#/"):
                raise ValueError(f"the JSON Schema's $ref {ref[:80]!r} is not followed: only "
                                 "refs to a part of the schema (#/$defs/NAME) are")
            todo += [(v, depth + 1) for v in node.values()]
        elif isinstance(node, list):
            todo += [(v, depth + 1) for v in node]


class SchemaOutput(Output):
    """``SchemaOutput(schema, name)``: a typed result given as a JSON Schema, not a Python type
    - what a user reaches without writing Python (tao.toml's ``output_type``, ``tao run
    --output-type schema.json``, the workbench's schema box). The schema goes to the model as a
    type's would (the embedded model's grammar, an endpoint's ``response_format``); the value is
    the JSON data itself, checked by ``jsonschema`` (which comes with the MCP SDK tao depends
    on), so a schema pydantic could not turn into a class is still enforced as written."""

    def __init__(self, schema: dict[str, Any], name: str | None = None):
        from jsonschema import Draft202012Validator, SchemaError

        if not isinstance(schema, dict):
            raise ValueError(f"a JSON Schema is an object, not {type(schema).__name__}")
        _bounded(schema)
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as e:
            raise ValueError(f"not a valid JSON Schema: {e.message}") from None
        self.type = None
        self.adapter = None
        self.schema = schema
        self.name = name or str(schema.get("title") or "output")
        self._digest = None
        self._validator = Draft202012Validator(schema)

    def parse(self, text: str) -> Any:
        last = "the answer is not JSON"
        for candidate in _candidates(text):
            try:
                value = json.loads(candidate)
            except ValueError:
                continue
            problem = self._problem(value)
            if problem is None:
                return value
            last = problem
        raise OutputError(last)

    def validate(self, value: Any) -> Any:
        if isinstance(value, str) and self._problem(value) is not None:
            return self.parse(value)
        problem = self._problem(value)
        if problem is not None:
            raise OutputError(problem)
        return value

    def dump(self, value: Any) -> Any:
        return value

    def _problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` in words a model can act on, or None."""
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        return "; ".join(f"{'.'.join(map(str, e.absolute_path)) or 'the value'}: {e.message}"
                         for e in errors[:8])


def _candidates(text: str) -> list[str]:
    """Where the JSON may be: the whole text, each fenced block, then the widest ``{...}`` and
    ``[...]`` spans (a model that adds a sentence around it)."""
    text = text.strip()
    found = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for open_, close in ("{}", "[]"):
        i, j = text.find(open_), text.rfind(close)
        if 0 <= i < j:
            found.append(text[i:j + 1])
    return [c for c in dict.fromkeys(found) if c and c[0] in '{["-0123456789tfn']


def _words(error: Any, lead: str) -> str:
    """pydantic's errors as a few lines a model can act on."""
    lines = [lead] if lead else []
    for e in error.errors(include_url=False)[:8]:
        where = ".".join(str(p) for p in e.get("loc", ())) or "the value"
        lines.append(f"{where}: {e.get('msg', 'invalid')}")
    return "; ".join(lines)
