"""Property-based tests (hypothesis) of the OpenAI wire's edges: whatever arguments text a server
sends, ``parse_arguments`` returns a dict or a reason and never raises; whatever text a model, a
tool or a command line put into the messages, the next request body can be encoded; however an
event stream is cut into pieces on its way, its lines are read as the SDK reads them."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tao import Message, ToolCall
from tao.models.openai import parse_arguments, wire_messages
from tao.models.openai_http import _Lines

# any code point, lone surrogates included (st.text() leaves them out by default)
ANY_CHAR = st.characters(exclude_categories=())
ANY_TEXT = st.text(ANY_CHAR, max_size=60)

# pieces that JSON parsers trip on, glued together at random
JSONISH = st.lists(st.one_of(
    st.sampled_from(['{', '}', '[', ']', '"', ':', ',', '\\', '\\u', '\\udcff', '\\ud800',
                     '\\ud83d\\ude00', 'NaN', 'Infinity', '-Infinity', '1e999', 'true', 'null',
                     '"a"', '"a": ', '0', '-', '.5', '1' * 4400, ' ', '\n']),
    ANY_TEXT,
), max_size=40).map("".join)


def nest(depth: int, opener: str, inner: str) -> str:
    closer = {"[": "]", "{": "}"}[opener]
    pair = '"k": ' if opener == "{" else ""
    return (opener + pair) * depth + inner + closer * depth


def check(raw: str) -> None:
    arguments, error = parse_arguments(raw)
    assert isinstance(arguments, dict)
    assert error is None or (isinstance(error, str) and arguments == {} and len(error) < 400)


@settings(max_examples=400, deadline=None)
@given(JSONISH)
def test_parse_arguments_never_raises_on_jsonish_text(raw):
    check(raw)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 20_000), st.sampled_from(["[", "{"]), st.sampled_from(["1", "", '"x"', "[", "\\udcff"]),
       st.booleans())
def test_parse_arguments_never_raises_on_deep_nesting(depth, opener, inner, wrapped):
    raw = nest(depth, opener, inner)
    check('{"a": ' + raw + "}" if wrapped else raw)


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT, ANY_TEXT, JSONISH, st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=3))
def test_the_next_request_can_always_be_encoded(task, reply, raw_arguments, extra):
    arguments, error = parse_arguments(raw_arguments)
    messages = [
        Message.system("be brief"),
        Message.user(task),
        Message.assistant(reply, [ToolCall("call_1", "echo", {**arguments, **extra}, error)]),
        Message.tool(reply + task, "call_1", "echo"),
    ]
    body = json.dumps({"messages": wire_messages(messages)}, ensure_ascii=False, allow_nan=True)
    body.encode("utf-8")  # what httpx does with the body: a lone surrogate would fail here
    sent = json.loads(body)["messages"]
    assert sent[1]["content"] == "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in task)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"data: ", b"{}", b"\r", b"\n", b"\r\n", b":", b"x", b"\xc3\xa9"]),
                max_size=30).map(b"".join), st.lists(st.integers(0, 40), max_size=5))
def test_stream_lines_split_as_the_sdk_splits_them(stream, cuts):
    """aiohttp hands the body over in pieces cut anywhere (a CRLF may be cut in two): the lines
    that come out are the lines the SDK's own decoder finds in the whole stream."""
    from openai._streaming import _SSELineDecoder

    sdk, lines, at, ours = _SSELineDecoder(), _Lines(), 0, []
    expected = [*sdk.feed(stream), *sdk.finish()]
    for end in [*sorted(min(c, len(stream)) for c in cuts), len(stream)]:
        if stream[at:end]:  # aiohttp gives no empty pieces
            ours += lines.feed(stream[at:end])
        at = max(at, end)
    assert ours + ([lines.rest] if lines.rest else []) == expected
