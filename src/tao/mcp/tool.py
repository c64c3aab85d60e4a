"""``MCPTool``: one tool of an MCP server as a tao ``Tool`` - the server's input schema is its
spec and what its arguments are checked against; its result comes back as a Python value
(structured content when the server gives some, else text)."""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..models.base import ToolSpec
from ..tools.base import InvalidArguments, Tool
from ..tools.text import _shown
from .errors import MCPToolError

if TYPE_CHECKING:
    from .client import MCPServer

_MARKS = ("requires_approval", "high_risk", "untrusted_output", "secret")


class MCPTool(Tool):
    """One tool of an ``MCPServer``: its schema is the server's, its run is a call to it."""

    def __init__(self, server: MCPServer, info: Any):
        self.server = server
        self.remote_name = info.name
        self.name = _identifier(info.name)
        self.description = (info.description or info.title or info.name).strip()
        self.schema = _clean(info.input_schema)
        self.output_schema = info.output_schema
        self.timeout = None  # the server's timeout bounds each call (connection.Connection)
        for key in _MARKS:
            setattr(self, key, server.marks[key])
        self._validator: Any = None

    @property
    def spec(self) -> ToolSpec:  # type: ignore[override]
        return ToolSpec(self.name, self.description, self.schema)

    def prefixed(self) -> MCPTool:
        """This tool under its server's prefix (its name clashed with another tool's)."""
        import copy

        other = copy.copy(self)
        other.name = f"{self.server.server_prefix}_{self.name}"
        return other

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as given, if they fit the server's input schema; else
        ``InvalidArguments`` listing what does not, written for the model."""
        if self._validator is None:
            from jsonschema import exceptions, validators

            try:
                cls = validators.validator_for(self.schema)
                cls.check_schema(self.schema)
                self._validator = cls(self.schema)
            except exceptions.SchemaError:  # the server's schema is broken: let it judge
                self._validator = False
        if self._validator:
            errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
            if errors:
                lines = [f"- {'.'.join(map(str, e.absolute_path)) or 'arguments'}: "
                         f"{_message(e)}" for e in errors[:10]]
                raise InvalidArguments(f"invalid arguments for {self.signature()}:\n"
                                       + "\n".join(lines))
        return dict(arguments)

    def is_async(self) -> bool:
        return True

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Ray worker's copy): the server travels as its configuration
        (``MCPServer.__reduce__``); the checker is made again where it is needed."""
        return {**self.__dict__, "_validator": None}

    async def run(self, **arguments: Any) -> Any:
        return value_of(await self.server.call(self.remote_name, arguments), self.output_schema)

    def __repr__(self) -> str:
        return f"<mcp tool {self.name}>"


def value_of(result: Any, output_schema: Any = None) -> Any:
    """A ``CallToolResult`` as a Python value: its structured content (unwrapped from the
    ``{"result": x}`` the SDK puts a plain return value in), else its text; ``MCPToolError``
    when the server says the call failed."""
    text = "\n".join(_block_text(b) for b in result.content or ())
    if result.is_error:  # the SDK's servers say "Error executing tool NAME: why"; keep the why
        text = re.sub(r"^Error executing tool \S+: ", "", text)
        raise MCPToolError(text or "the server reported an error without a message")
    data = result.structured_content
    if data is None:
        return text
    props = (output_schema or {}).get("properties") or {}
    if isinstance(data, dict) and set(data) == {"result"} and set(props) <= {"result"}:
        return data["result"]
    return data


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind}: {getattr(block, 'mime_type', '?')}, {len(block.data or '') * 3 // 4} bytes]"
    if kind == "resource_link":
        return f"[resource: {block.uri}]"
    if kind == "resource":
        inner = block.resource
        return getattr(inner, "text", None) or f"[resource: {inner.uri}]"
    return f"[{kind or type(block).__name__}]"


def _message(error: Any) -> str:
    if error.validator == "required":
        return error.message.replace("is a required property", "is missing")
    if error.validator == "additionalProperties":
        return error.message
    return f"{error.message.split(' is ', 1)[-1] if ' is ' in error.message else error.message}" \
           f" (got {_shown(error.instance)})"


def _identifier(name: str) -> str:
    """``name`` as a Python identifier (what CodeAct's code calls), unchanged when it is one."""
    if name.isidentifier() and not keyword.iskeyword(name):
        return name
    text = re.sub(r"\W", "_", name) or "tool"
    return f"_{text}" if text[0].isdigit() or keyword.iskeyword(text) else text


def _clean(schema: Any) -> dict[str, Any]:
    """The input schema as the model reads it: the titles the SDK generates dropped."""
    schema = dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
    schema.pop("title", None)
    schema.setdefault("type", "object")
    props = schema.get("properties")
    if isinstance(props, Mapping):
        schema["properties"] = {k: ({x: y for x, y in v.items() if x != "title"}
                                    if isinstance(v, Mapping) else v) for k, v in props.items()}
    else:
        schema["properties"] = {}
    return schema


__all__ = ["MCPTool", "value_of"]
