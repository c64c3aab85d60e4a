"""A typed result through a tool call: the second rung of an endpoint's structured output.

An agent's ``output_type`` goes to an OpenAI-compatible endpoint as a ``json_schema``
response_format. Some servers refuse that beside tools (llama-cpp-python's server answers 500,
DeepSeek 400), yet call tools well: there the schema becomes the parameters of one more tool,
``final_result``, and a call of it is read back as the answer - its arguments as JSON text,
which the run's context validates like any answer (pydantic-ai's ``ToolOutput``). A schema that
is not an object is wrapped as ``{"value": ...}``, since tool arguments are objects. The model
may still answer in text: JSON there is read as prompted output, the last rung.
"""

from __future__ import annotations

from typing import Any

from ..messages import Message
from ..safe_json import dumps
from .base import ModelResponse

NAME = "final_result"


def _wrapped(schema: dict[str, Any]) -> bool:
    return schema.get("type") != "object"


def offer(params: dict[str, Any], response_format: dict[str, Any]) -> None:
    """``params`` asking for the answer as a call of ``final_result`` instead of
    ``response_format`` (a ``json_schema`` one)."""
    schema = dict((response_format.get("json_schema") or {}).get("schema") or {})
    if _wrapped(schema):
        defs = schema.pop("$defs", None)
        schema = {"type": "object", "properties": {"value": schema}, "required": ["value"],
                  **({"$defs": defs} if defs else {})}
    params.pop("response_format", None)
    tool = {"type": "function", "function": {
        "name": NAME, "parameters": schema,
        "description": "Give your final answer by calling this tool: its arguments are the "
                       "answer. Call it once, when you have everything, instead of replying "
                       "in text."}}
    params["tools"] = [t for t in params.get("tools") or () if t["function"]["name"] != NAME] \
        + [tool]


def answer(response: ModelResponse, response_format: dict[str, Any] | None) -> ModelResponse:
    """A reply that called ``final_result``: the call's arguments as the answer's text (any
    other call of the same reply is dropped: the answer ends the run). Else as it came."""
    calls = response.message.tool_calls or []
    final = next((c for c in calls if c.name == NAME), None)
    if final is None:
        return response
    schema = ((response_format or {}).get("json_schema") or {}).get("schema") or {}
    value = final.arguments  # {} when they were not JSON: the validation names what is missing
    if _wrapped(schema):
        value = value.get("value", value)
    text = dumps(value)
    return ModelResponse(Message.assistant(text), response.usage, "stop")
