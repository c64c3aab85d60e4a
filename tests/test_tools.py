"""Tools: schemas from type hints and docstrings, validation, running, and how results read."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from tao import Tool, ToolCall, Toolbox, tool
from tao.tools.base import MAX_OBSERVATION_CHARS, FunctionTool, to_text


@tool
def search(query: str, limit: int = 5, lang: Literal["en", "zh"] = "en", exact: bool = False) -> list[str]:
    """Search the notes.

    Results come back best first.

    Args:
        query: what to look for
        limit: how many results
        lang: the language of the results
        exact: match the phrase exactly
    """
    return [f"{query} #{i}" for i in range(1, limit + 1)]


@tool
def scale(value: float, factor: float = 2.0) -> float:
    """Multiply a value by a factor.

    :param value: the value to scale
    :param factor: how much to scale it by
    :returns: the scaled value
    """
    return value * factor


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(f"id-{name}", name, arguments)


# -- schema -----------------------------------------------------------------------------------

def test_schema_from_type_hints_and_google_docstring():
    spec = search.spec
    assert spec.name == "search"
    assert spec.description == "Search the notes.\n\nResults come back best first."
    params = spec.parameters
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    assert params["properties"] == {
        "query": {"type": "string", "description": "what to look for"},
        "limit": {"type": "integer", "description": "how many results", "default": 5},
        "lang": {"type": "string", "description": "the language of the results", "enum": ["en", "zh"],
                 "default": "en"},
        "exact": {"type": "boolean", "description": "match the phrase exactly", "default": False},
    }
    assert "title" not in params


def test_schema_from_rest_docstring():
    params = scale.spec.parameters
    assert scale.spec.description == "Multiply a value by a factor."
    assert params["required"] == ["value"]
    assert params["properties"]["value"] == {"type": "number", "description": "the value to scale"}
    assert params["properties"]["factor"] == {"type": "number", "description": "how much to scale it by",
                                              "default": 2.0}


def test_tool_without_docstring_or_hints():
    @tool
    def echo(text):
        return text

    assert echo.description == "echo"
    assert echo.spec.parameters["required"] == ["text"]
    assert "description" not in echo.spec.parameters["properties"]["text"]


def test_signature_shows_types_and_enums():
    assert search.signature() == "search(query: str, limit: int, lang: 'en' | 'zh', exact: bool)"
    assert scale.signature() == "scale(value: float, factor: float)"


def test_tool_options_and_the_function_stays_callable():
    @tool(name="plus", description="Add two integers.", timeout=3)
    def add(a: int, b: int) -> int:
        return a + b

    assert isinstance(add, FunctionTool) and isinstance(add, Tool)
    assert (add.name, add.description, add.timeout) == ("plus", "Add two integers.", 3)
    assert add(1, 2) == 3 and add.__wrapped__(1, 2) == 3
    assert scale(3) == 6


def test_varargs_are_refused_when_the_tool_is_defined():
    with pytest.raises(TypeError, match=r"\*args/\*\*kwargs"):
        @tool
        def anything(*args, **kwargs):
            return args


# -- validation ------------------------------------------------------------------------------

def test_validation_coerces_numeric_strings_like_pydantic_lax_mode():
    # Models often send numbers as strings; pydantic's lax mode accepts "5" for a float.
    assert scale.validate({"value": "5"}) == {"value": 5.0, "factor": 2.0}
    assert search.validate({"query": "x", "limit": "3"}) == {"query": "x", "limit": 3, "lang": "en", "exact": False}


@pytest.mark.parametrize("arguments, expected_lines", [
    ({"value": 1, "scale": 3, "power": 2}, ["- scale: Extra inputs are not permitted (got 3)",
                                            "- power: Extra inputs are not permitted (got 2)"]),
    ({}, ["- value: Field required"]),
    ({"value": "five"}, ["- value: Input should be a valid number, unable to parse string as a number (got 'five')"]),
])
def test_validation_errors_name_the_parameters(arguments, expected_lines):
    with pytest.raises(ValueError) as e:
        scale.validate(arguments)
    message = str(e.value)
    assert message.startswith("invalid arguments for scale(value: float, factor: float):")
    for line in expected_lines:
        assert line in message.splitlines()


def test_enum_and_integer_validation():
    with pytest.raises(ValueError, match=r"- lang: Input should be 'en' or 'zh' \(got 'fr'\)"):
        search.validate({"query": "x", "lang": "fr"})
    with pytest.raises(ValueError, match=r"- limit: .*fractional part"):
        search.validate({"query": "x", "limit": 2.5})


# -- hand-written tools ----------------------------------------------------------------------

class Weather(Tool):
    name = "weather"
    description = "Current weather in a city."

    class Args(BaseModel):
        city: str = Field(description="the city, e.g. 北京")
        unit: Literal["c", "f"] = Field("c", description="temperature unit")

    def run(self, city: str, unit: str = "c") -> dict:
        return {"city": city, "temperature": 21 if unit == "c" else 70, "unit": unit}


class AsyncWeather(Weather):
    name = "weather_async"

    async def run(self, city: str, unit: str = "c") -> dict:
        await asyncio.sleep(0)
        return {"city": city, "sky": "晴"}


async def test_tool_subclass_with_args_model():
    spec = Weather().spec
    assert spec.name == "weather" and spec.description == "Current weather in a city."
    assert spec.parameters["required"] == ["city"]
    assert spec.parameters["properties"]["unit"] == {
        "type": "string", "enum": ["c", "f"], "default": "c", "description": "temperature unit"}
    assert Weather().signature() == "weather(city: str, unit: 'c' | 'f')"

    box = Toolbox([Weather(), AsyncWeather()])
    result = await box.execute(call("weather", city="北京"))
    assert not result.is_error
    assert result.content == '{"city": "北京", "temperature": 21, "unit": "c"}'
    assert result.value == {"city": "北京", "temperature": 21, "unit": "c"}
    result = await box.execute(call("weather_async", city="上海", unit="f"))
    assert result.content == '{"city": "上海", "sky": "晴"}'
    result = await box.execute(call("weather", city="北京", unit="kelvin"))
    assert result.is_error and "- unit: Input should be 'c' or 'f'" in result.content


def test_tool_subclass_without_args_model_is_a_clear_error():
    class Broken(Tool):
        name = "broken"

    with pytest.raises(TypeError, match="has no Args model"):
        Broken().spec


# -- running through a Toolbox ---------------------------------------------------------------

async def test_async_function_tool():
    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        await asyncio.sleep(0.01)
        return f"<html>{url}</html>"

    assert fetch.is_async()
    result = await Toolbox([fetch]).execute(call("fetch", url="http://x"))
    assert (result.content, result.is_error) == ("<html>http://x</html>", False)
    assert result.duration_s >= 0.01


async def test_async_tool_timeout_is_an_observation():
    @tool(timeout=0.05)
    async def hang() -> str:
        """Never answers."""
        await asyncio.sleep(5)
        return "late"

    start = time.perf_counter()
    result = await Toolbox([hang]).execute(call("hang"))
    assert time.perf_counter() - start < 1
    assert result.is_error and result.content == "Error: tool 'hang' timed out after 0.05 s"


async def test_sync_tool_timeout_is_an_observation():
    @tool(timeout=0.05)
    def block() -> str:
        """Blocks a thread."""
        time.sleep(0.3)
        return "late"

    start = time.perf_counter()
    result = await Toolbox([block]).execute(call("block"))
    assert time.perf_counter() - start < 0.25  # the thread is left to finish on its own
    assert result.is_error and "timed out after 0.05 s" in result.content


async def test_a_tools_own_timeout_error_is_reported_as_such():
    @tool
    def connect() -> str:
        """Connect somewhere."""
        raise TimeoutError("connection timed out")

    result = await Toolbox([connect]).execute(call("connect"))
    assert result.is_error and result.content == "Error: TimeoutError: connection timed out"


@pytest.mark.parametrize("the_call, expected", [
    (call("nope", x=1), "Error: unknown tool 'nope'. Available tools: search, scale"),
    (ToolCall("1", "scale", {}, "Expecting value: line 1 column 1"),
     "Error: the arguments for scale(value: float, factor: float) were not valid JSON "
     "(Expecting value: line 1 column 1). Send a JSON object."),
    (call("scale", value=1, extra=2), "Error: invalid arguments for scale(value: float, factor: float):\n"
                                      "- extra: Extra inputs are not permitted (got 2)"),
])
async def test_failures_are_error_results(the_call, expected):
    result = await Toolbox([search, scale]).execute(the_call)
    assert result.is_error and result.content == expected and result.value is None


async def test_exceptions_are_error_results():
    @tool
    def explode(kind: str) -> str:
        """Raise."""
        raise {"key": KeyError, "value": ValueError, "runtime": RuntimeError}[kind]("boom")

    box = Toolbox([explode])
    assert (await box.execute(call("explode", kind="runtime"))).content == "Error: RuntimeError: boom"
    assert (await box.execute(call("explode", kind="value"))).content == "Error: ValueError: boom"
    assert (await box.execute(call("explode", kind="key"))).content == "Error: KeyError: 'boom'"


async def test_execute_all_keeps_call_order():
    @tool
    async def wait(label: str, seconds: float) -> str:
        """Sleep, then return the label."""
        await asyncio.sleep(seconds)
        return label

    calls = [call("wait", label="slow", seconds=0.1), call("wait", label="fast", seconds=0.0),
             call("nope"), call("wait", label="bad")]
    results = await Toolbox([wait]).execute_all(calls)
    assert [r.content for r in results[:2]] == ["slow", "fast"]
    assert [r.is_error for r in results] == [False, False, True, True]


def test_toolbox():
    def plain(x: int) -> int:
        """A plain function becomes a tool."""
        return x

    box = Toolbox([search, plain])
    assert box.names == ["search", "plain"] and len(box) == 2
    assert "plain" in box and "nope" not in box
    assert isinstance(box["plain"], FunctionTool)
    assert [t.name for t in box] == ["search", "plain"]
    assert [s.name for s in box.specs()] == ["search", "plain"]
    with pytest.raises(ValueError, match="two tools are named 'search'"):
        box.add(search)
    with pytest.raises(ValueError, match="two tools are named 'search'"):
        Toolbox([search, tool(name="search")(plain)])
    with pytest.raises(TypeError, match="not a tool"):
        Toolbox([42])


# -- how results read ------------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [
    (36.0, "36"),
    (25.0, "25"),
    (-4.0, "-4"),
    (2.5, "2.5"),
    (0.1 + 0.2, "0.3"),  # float noise is rounded away: a model copies what it reads
    (240 * 0.8 - 20, "172"),
    (1234567890123.5, "1234567890123.5"),
    (float("inf"), "inf"),
    (1 / 3, "0.3333333333333333"),
    (1e20, "1e+20"),
    (42, "42"),
    (True, "True"),
    (None, "None"),
    ("北京", "北京"),
    ({"city": "北京", "temp": 21.5}, '{"city": "北京", "temp": 21.5}'),
    ([1, "二", None], '[1, "二", null]'),
    ({"when": object}, '{"when": "<class \'object\'>"}'),
])
def test_results_read_naturally(value, text):
    assert to_text(value) == text


def test_long_results_are_truncated_with_a_marker():
    assert to_text("x" * MAX_OBSERVATION_CHARS) == "x" * MAX_OBSERVATION_CHARS
    text = to_text("x" * (MAX_OBSERVATION_CHARS + 1234))
    assert text.startswith("x" * MAX_OBSERVATION_CHARS)
    assert text.endswith("\n... [truncated 1234 characters]")
    assert len(to_text(list(range(10_000)))) < MAX_OBSERVATION_CHARS + 100


async def test_results_through_the_toolbox_read_the_same():
    result = await Toolbox([scale]).execute(call("scale", value=18))
    assert (result.content, result.value) == ("36", 36.0)


# -- lazy imports ----------------------------------------------------------------------------

def test_defining_tools_does_not_import_pydantic():
    code = """
import sys
import tao
from tao import tool

@tool
def add(a: float, b: float) -> float:
    '''Add two numbers.

    Args:
        a: the first number
        b: the second number
    '''
    return a + b

assert add(1, 2) == 3 and add.name == "add" and add.description == "Add two numbers."
assert tao.calculator.name == "calculator"
assert "pydantic" not in sys.modules, "pydantic imported before a schema was needed"
assert add.spec.parameters["required"] == ["a", "b"]
assert "pydantic" in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_spec_is_built_once():
    assert search.spec is search.spec
    assert json.loads(json.dumps(search.spec.parameters)) == search.spec.parameters


async def test_a_result_says_whether_trying_again_can_help():
    class Refused(ValueError):
        retryable = False

    @tool
    def flaky(kind: str) -> str:
        """Fails in the way asked for.

        Args:
            kind: refused or down
        """
        raise Refused("never with these arguments") if kind == "refused" else ConnectionError("down")

    box = Toolbox([flaky])
    refused = await box.execute(ToolCall("1", "flaky", {"kind": "refused"}))
    down = await box.execute(ToolCall("2", "flaky", {"kind": "down"}))
    invalid = await box.execute(ToolCall("3", "flaky", {"kind": 3}))
    unknown = await box.execute(ToolCall("4", "nope", {}))
    assert refused.is_error and not refused.retryable and "Refused: never" in refused.content
    assert down.is_error and down.retryable
    assert not invalid.retryable and not unknown.retryable
