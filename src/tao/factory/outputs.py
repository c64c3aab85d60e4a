"""A typed result said without writing Python: what tao.toml's ``output_type``, ``tao run
--output-type`` and the workbench's schema box give, turned into what ``output_type=`` takes.

    output_type = "schemas/person.json"          # a JSON Schema file (relative: to tao.toml)
    output_type = "py:myapp.models:Person"        # a pydantic model, dataclass or TypedDict
    output_type = { type = "object", properties = { name = { type = "string" } } }  # inline
    tao run --output-type '{"type": "array", "items": {"type": "integer"}}' ...

A Python class is validated by pydantic as in the Python API (the value is an instance); a JSON
Schema by ``tao.output.SchemaOutput`` (the value is the JSON data). Either way the model is asked
for the schema, and the embedded model decodes the answer under its grammar.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: what the message for a value that is none of these lists
FORMS = ('a JSON Schema file (e.g. "person.json"), an inline JSON Schema object, or '
         '"py:module:Class" (a pydantic model, dataclass or TypedDict)')


def output_type(value: Any, base: Path | None = None) -> Any:
    """The ``output_type=`` ``value`` says; ``ValueError`` saying what to fix. ``base``: where a
    relative schema file is read from (tao.toml's folder; default: the working directory)."""
    from ..output import SchemaOutput

    if isinstance(value, dict):
        return SchemaOutput(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"output_type must be {FORMS}, not {value!r}")
    text = value.strip()
    if text.startswith("py:"):
        return _python(text[3:], base)
    if text.startswith("{"):
        try:
            schema = json.loads(text)
        except ValueError as e:
            raise ValueError(f"output_type {text[:60]!r}... is not JSON: {e}") from None
        return SchemaOutput(schema)
    path = Path(text).expanduser()
    path = path if path.is_absolute() else (base or Path.cwd()) / path
    try:
        data = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"output_type: no schema file {path} (it takes {FORMS})") from None
    except OSError as e:
        raise ValueError(f"output_type: cannot read {path}: {e.strerror or e}") from None
    try:
        schema = json.loads(data)
    except ValueError as e:
        raise ValueError(f"output_type: {path} is not JSON: {e}") from None
    try:
        return SchemaOutput(schema, None if isinstance(schema, dict) and schema.get("title")
                            else path.stem)
    except ValueError as e:
        raise ValueError(f"output_type: {path}: {e}") from None


def _python(ref: str, base: Path | None) -> Any:
    """``module:Class`` (``module.Class`` too), imported as ``--tools`` imports a module (the
    modules beside tao.toml, or the working directory, can be named); checked by
    ``tao.output.Output`` so a class pydantic cannot validate is said now, before any model
    is paid."""
    import importlib
    import sys

    from ..output import Output

    module, _, attr = ref.partition(":") if ":" in ref else ref.rpartition(".")
    if not module or not attr:
        raise ValueError(f"output_type 'py:{ref}' must name a module and a class: "
                         "py:module:Class")
    folder = str((base or Path.cwd()).resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
    except ImportError as e:
        raise ValueError(f"output_type 'py:{ref}': cannot import {module}: {e}") from None
    except AttributeError:
        raise ValueError(f"output_type 'py:{ref}': {module} has no {attr}") from None
    try:
        Output(found)
    except Exception as e:  # noqa: BLE001 - pydantic's own error for a type it cannot validate
        raise ValueError(f"output_type 'py:{ref}' is not a type pydantic can validate: "
                         f"{type(e).__name__}: {e}") from None
    return found


__all__ = ["FORMS", "output_type"]
