"""Servers that speak the OpenAI API each take a different part of it (no ``stream_options``, no
``content: null``, no ``json_schema``, no native tools), and one model class must serve them all:
what an endpoint refuses is learnt (``endpoint_facts``) and the request asked again with less,
instead of failing the run. Apart from ``openai.py``, whose concern is the transport and the
retries; ``OpenAIModel`` inherits ``StepDown``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .openai_wire import _clip, tools_as_text


class StepDown:
    # the model's (``OpenAIModel``)
    name: str
    base_url: str

    if TYPE_CHECKING:
        def takes(self, fact: str) -> bool: ...

        def _learnt(self, fact: str) -> None: ...

    def _drop_stream_options(self, e: Exception, params: dict[str, Any]) -> bool:
        import openai

        if (isinstance(e, openai.APIStatusError) and e.status_code in (400, 422)
                and "stream_options" in params and "stream_options" in _server_message(e)):
            del params["stream_options"]
            self._learnt("stream_options")
            return True
        return False

    def _wants_text_content(self, e: Exception, params: dict[str, Any]) -> bool:
        """OpenAI takes ``content: null`` beside ``tool_calls``; llama-cpp-python's server
        answers it with a 500 ("Input should be a valid string" at the message's ``content``).
        Learnt once per endpoint: from then on such a reply is sent with ``""``."""
        import openai

        if (isinstance(e, openai.APIStatusError) and e.status_code in (400, 422, 500)
                and "'content'" in _server_message(e, 20_000) and _fill_null_content(params)):
            self._learnt("null_content")
            return True
        return False

    def _step_down_format(self, e: Exception, params: dict[str, Any]) -> str | None:
        """A server that cannot take the request's ``response_format`` says so in its message,
        whatever status it picks: DeepSeek 400 "This response_format type is unavailable now",
        llama-cpp-python's server 500 with a validation error on ``response_format.type``,
        others 422. Retrying the same cannot help: the fact is learnt (``endpoint_facts``), the
        request asks with the next form down (``_fit_format``), and the reason is returned for
        the ``Retrying`` that says so; None for any other failure."""
        import openai

        fmt = params.get("response_format")
        if not (isinstance(e, openai.APIStatusError) and fmt
                and e.status_code in (400, 415, 422, 500, 501)):
            return None
        said = _server_message(e, 20_000)
        if not any(w in said for w in ("response_format", "json_schema", "json_object")):
            return None
        self._learnt(fmt.get("type", ""))
        self._fit_format(params)
        now = params.get("response_format", {}).get("type", "no response_format")
        return (f"the model refused response_format={fmt.get('type')}; asking with {now} "
                f"({self.base_url} answered {e.status_code}: {_server_message(e)})")

    def _step_down_tools(self, e: Exception, params: dict[str, Any]) -> str | None:
        """An endpoint that takes no ``tools`` (vLLM without ``--enable-auto-tool-choice``:
        400 '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser')
        is asked with the tools in the prompt and calls as text, which ``text_calls`` reads:
        the agent's native tool calls go on. Learnt once per endpoint."""
        import openai

        if not (isinstance(e, openai.APIStatusError) and params.get("tools")
                and e.status_code in (400, 422, 500, 501)
                and "tool" in _server_message(e, 20_000).lower()):
            return None
        self._learnt("tools")
        tools_as_text(params)
        return (f"the model takes no native tools; asking with calls as text ({self.base_url} "
                f"answered {e.status_code}: {_server_message(e)})")

    def _fit_format(self, params: dict[str, Any]) -> None:
        """The best structured-output form this endpoint takes, in ``params``: the JSON schema;
        else, beside tools, a ``final_result`` tool whose arguments are the answer
        (``final_tool``); else JSON mode - with "json" in the prompt, which DeepSeek's JSON mode
        requires - else none (the agents' parsers read JSON the prompt asked for: the last
        form)."""
        fmt = params.get("response_format")
        if not fmt or fmt.get("type") not in ("json_schema", "json_object"):
            return
        if fmt["type"] == "json_schema" and not self.takes("json_schema"):
            if params.get("tools") and self.takes("tools"):  # beside tools: one more tool
                from . import final_tool

                final_tool.offer(params, fmt)
                return
            fmt = {"type": "json_object"}
        if fmt["type"] == "json_object" and not self.takes("json_object"):
            del params["response_format"]
            return
        params["response_format"] = fmt
        messages = params["messages"]
        if fmt["type"] == "json_object" and not any(
                "json" in str(m.get("content") or "").lower() for m in messages):
            if messages and messages[0].get("role") == "system":
                messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\nReply in JSON."}
            else:
                messages.insert(0, {"role": "system", "content": "Reply in JSON."})


def _fill_null_content(params: dict[str, Any]) -> bool:
    """``content: null`` of the request's messages made ``""``; whether there was any."""
    found = [m for m in params.get("messages") or () if m.get("content", "") is None]
    for m in found:
        m["content"] = ""
    return bool(found)


def _server_message(e: Any, limit: int = 300) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        msg = body.get("message") or body.get("detail") or body.get("error")
        if msg:
            return _clip(str(msg), limit)
    return _clip(str(getattr(e, "message", "") or e), limit)  # e.g. a proxy's HTML error page
