"""OpenTelemetry spans (GenAI conventions) from real runs on ScriptedModel, caught by the SDK's
InMemorySpanExporter: names, parenting, token counts equal to Result.usage, parallel plan steps
overlapping, sub-agents nested under the step or tool call that started them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from plan_scripts import plan_reply, sleep_step, sleepy_tools, step  # noqa: E402

import tao  # noqa: E402
from tao import ReActAgent, ScriptedModel, calculator, tool_call  # noqa: E402
from tao.plan import agent_as_tool  # noqa: E402
from tao.plan.agent import PlanExecuteAgent  # noqa: E402

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture
def spans():
    """tao.instrument() with an in-memory exporter; the finished spans, by name."""
    tao.instrument(PROVIDER)
    EXPORTER.clear()
    yield lambda: list(EXPORTER.get_finished_spans())
    tao.uninstrument()


def named(spans, prefix):
    return [s for s in spans if s.name.startswith(prefix)]


def parent_of(span, spans):
    return next((s for s in spans if span.parent and s.context.span_id == span.parent.span_id), None)


def test_a_react_run_is_one_agent_span_with_its_chats_and_tool_calls(spans):
    model = ScriptedModel([tool_call("calculator", operation="multiply", a=3, b=12),
                           "36"])
    result = ReActAgent(model, [calculator]).run("3 本书每本 12 元，一共多少钱？")

    got = spans()
    [root] = named(got, "invoke_agent")
    assert root.name == "invoke_agent react" and root.parent is None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "react"
    assert root.attributes["gen_ai.request.model"] == "scripted"
    chats = named(got, "chat ")
    assert [c.name for c in chats] == ["chat scripted", "chat scripted"]
    assert {c.attributes["gen_ai.provider.name"] for c in chats} == {"tao.scripted"}
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == result.usage.prompt_tokens
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) \
        == result.usage.completion_tokens > 0
    [tool_span] = named(got, "execute_tool")
    assert tool_span.name == "execute_tool calculator"
    assert tool_span.attributes["gen_ai.tool.name"] == "calculator"
    call_id = result.messages[2].tool_calls[0].id
    assert tool_span.attributes["gen_ai.tool.call.id"] == call_id
    assert all(parent_of(s, got) is root for s in [*chats, tool_span])
    assert {s.context.trace_id for s in got} == {root.context.trace_id}
    # in order, inside the run: chat, tool, chat
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert root.start_time <= first.end_time <= tool_span.start_time
    assert tool_span.end_time <= second.start_time <= root.end_time
    assert root.attributes["tao.run.id"] and root.attributes["tao.run.status"] == "done"


def test_a_failing_tool_call_is_an_error_span(spans):
    model = ScriptedModel([tool_call("calculator", operation="divide", a=1, b=0), "no"])
    ReActAgent(model, [calculator]).run("1/0")
    [span] = named(spans(), "execute_tool")
    assert span.status.status_code.name == "ERROR"
    assert span.attributes["error.type"] == "tool_error"


def test_parallel_plan_steps_are_children_that_overlap(spans):
    plan = {"steps": [sleep_step(1, "wait", 0.2), sleep_step(2, "wait", 0.2),
                      sleep_step(3, "wait", 0.05, 1, 2)], "answer": "$step3"}
    result = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), sleepy_tools()).run("sleep")
    assert result.ok

    got = spans()
    [root] = named(got, "invoke_agent")
    assert root.name == "invoke_agent plan-execute" or root.name.startswith("invoke_agent plan")
    steps = {s.attributes["tao.plan.step.id"]: s for s in named(got, "execute_tool wait")}
    assert set(steps) == {"step1", "step2", "step3"}
    assert all(parent_of(s, got) is root for s in steps.values())
    s1, s2, s3 = steps["step1"], steps["step2"], steps["step3"]
    assert s1.start_time < s2.end_time and s2.start_time < s1.end_time  # ran at once
    assert s3.start_time >= max(s1.end_time, s2.end_time)  # waited for both
    assert (s1.end_time - s1.start_time) / 1e9 >= 0.19
    [chat] = named(got, "chat")  # the planner's one call
    assert chat.attributes["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens


def test_a_step_agent_runs_nested_under_its_step(spans):
    plan = {"steps": [
        step(1, "multiply", 3, 12, description="books"),
        {"id": "step2", "description": "what is left", "depends_on": ["step1"],
         "instruction": "Xiao Ming had 50 yuan and spent $step1; how much is left?"},
    ], "answer": "He has $step2 left"}
    worker = ReActAgent(ScriptedModel([tool_call("calculator", operation="subtract", a=50, b=36),
                                       "14 yuan"]), [calculator])
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [calculator], step_agent=worker)
    result = agent.run("Xiao Ming has 50 yuan ...")
    assert result.answer == "He has 14 yuan left"

    got = spans()
    outer, inner = sorted(named(got, "invoke_agent"), key=lambda s: s.start_time)
    assert inner.name == "invoke_agent react"
    step_span = parent_of(inner, got)
    assert step_span.name == "plan_step step2" and parent_of(step_span, got) is outer
    assert outer.start_time <= step_span.start_time <= inner.start_time
    assert inner.end_time <= step_span.end_time <= outer.end_time
    [sub_tool] = [s for s in named(got, "execute_tool calculator") if parent_of(s, got) is inner]
    assert sub_tool.attributes["gen_ai.tool.call.id"]
    # every model call of the run and its sub-agent: the run's own count, no more, no less
    chats = named(got, "chat")
    assert len(chats) == 3
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == result.usage.prompt_tokens
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) \
        == result.usage.completion_tokens
    assert [parent_of(c, got) for c in chats].count(inner) == 2


def test_an_agent_used_as_a_tool_runs_nested_under_that_tool_call(spans):
    helper = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=2, b=2), "4"]),
                        [calculator])
    boss = ReActAgent(ScriptedModel([tool_call("helper", task="add 2 and 2"), "it is 4"]),
                      [agent_as_tool(helper, "helper", "Adds numbers")])
    result = boss.run("what is 2+2?")
    assert result.answer == "it is 4"

    got = spans()
    [call] = named(got, "execute_tool helper")
    [inner] = [s for s in named(got, "invoke_agent") if parent_of(s, got) is call]
    assert parent_of(call, got).name == "invoke_agent react" and parent_of(call, got) is not inner
    assert call.start_time <= inner.start_time <= inner.end_time <= call.end_time
    assert [s.name for s in got if parent_of(s, got) is inner].count("chat scripted") == 2
    assert len(named(got, "execute_tool calculator")) == 1


def test_runs_stop_being_traced_after_uninstrument(spans):
    tao.uninstrument()
    ReActAgent(ScriptedModel(["hi"])).run("hello")
    assert spans() == []


def test_import_tao_loads_no_opentelemetry_and_no_tracing_sends_nothing():
    code = ("import sys, tao; from tao import ReActAgent, ScriptedModel;"
            "ReActAgent(ScriptedModel(['hi'])).run('hello');"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "TAO_TRACING": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    # on, without any OTEL_* exporter: the API's no-op tracer, the SDK never loaded
    code = code.replace("import sys, tao;", "import sys, tao; tao.instrument();")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout)
    assert "opentelemetry.trace" in loaded and not any(m.startswith("opentelemetry.sdk")
                                                       or "exporter" in m for m in loaded)


def test_a_codeact_code_block_is_a_python_tool_span(spans):
    from tao.agents.codeact import CodeActAgent

    model = ScriptedModel(["```python\nprint(6 * 7)\n```", "42", ])
    result = CodeActAgent(model).run("6 times 7?")
    assert result.answer == "42"
    got = spans()
    [code] = named(got, "execute_tool python")
    [root] = named(got, "invoke_agent")
    assert root.name == "invoke_agent codeact" and parent_of(code, got) is root
    assert code.attributes["gen_ai.tool.call.id"] == "turn1.1"
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in named(got, "chat")) \
        == result.usage.completion_tokens


def test_the_tools_a_codeact_block_calls_are_spans_of_the_run_too(spans):
    from tao.agents.codeact import CodeActAgent

    model = ScriptedModel(["```python\nprint(multiply(6, 7))\n```", "42"])
    assert CodeActAgent(model).run("6 times 7?").answer == "42"
    got = spans()
    [call] = named(got, "execute_tool multiply")
    [root] = named(got, "invoke_agent")
    assert parent_of(call, got) is root and call.status.is_ok


def test_a_recorded_trace_becomes_the_same_spans_afterwards(tmp_path):
    # an OtelSink is a sink like any other: a JSONL trace read back gives the tree again, at
    # the times the run had (no model door then: chat spans without token counts)
    from tao.sinks import JsonlTrace, read_trace
    from tao.sinks.otel import OtelSink

    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"])
    with JsonlTrace(tmp_path / "run.jsonl") as trace:
        ReActAgent(model, [calculator]).run("1+2?", sinks=[trace])
    EXPORTER.clear()
    sink = OtelSink(PROVIDER.get_tracer("replay"))
    events = read_trace(tmp_path / "run.jsonl")
    for event in events:
        sink(event)
    got = list(EXPORTER.get_finished_spans())
    assert sorted(s.name for s in got) == ["chat scripted", "chat scripted",
                                           "execute_tool calculator", "invoke_agent react"]
    [root] = named(got, "invoke_agent")
    assert root.start_time == int(events[0].ts * 1e9) and root.end_time == int(events[-1].ts * 1e9)
    assert "gen_ai.usage.input_tokens" not in named(got, "chat")[0].attributes


def test_an_agent_a_tool_function_runs_itself_is_nested_under_that_call(spans):
    helper = ReActAgent(ScriptedModel(["4"]))

    @tao.tool
    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return (await helper.arun(question)).answer

    boss = ReActAgent(ScriptedModel([tool_call("ask_helper", question="2+2?"), "it is 4"]),
                      [ask_helper])
    assert boss.run("what is 2+2?").answer == "it is 4"
    got = spans()
    [call] = named(got, "execute_tool ask_helper")
    [inner] = [s for s in named(got, "invoke_agent") if parent_of(s, got) is call]
    assert [s.name for s in got if parent_of(s, got) is inner] == ["chat scripted"]
    assert call.start_time <= inner.start_time <= inner.end_time <= call.end_time


def test_reflexion_trials_are_agent_runs_under_the_reflexion_run(spans):
    from tao.agents.reflexion import Reflexion

    model = ScriptedModel(["41", "Check the product.", "42"])
    result = Reflexion(ReActAgent(model), lambda task, r: r.answer == "42").run("What is 6 * 7?")
    assert result.ok
    got = spans()
    roots = [s for s in got if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent reflexion-react"]
    trials = [s for s in named(got, "invoke_agent react") if parent_of(s, got) is roots[0]]
    assert len(trials) == 2
    assert all([parent_of(c, got) for c in named(got, "chat")].count(t) == 1 for t in trials)


def test_a_model_that_fails_leaves_an_error_chat_and_approvals_are_span_events(spans):
    from tao import Model

    class Down(Model):
        name = "down"

        async def stream(self, messages, **kwargs):
            raise ConnectionError("no route to host")
            yield  # pragma: no cover

    result = ReActAgent(Down()).run("hello")
    assert result.status == "error"
    got = spans()
    [chat] = named(got, "chat down")
    assert chat.status.status_code.name == "ERROR" and chat.attributes["error.type"] == "model_error"
    [root] = named(got, "invoke_agent")
    assert root.status.status_code.name == "ERROR"

    EXPORTER.clear()
    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"])
    ReActAgent(model, [calculator], require_approval=["calculator"], approve=lambda r: True).run("1+2")
    [root] = named(spans(), "invoke_agent")
    marks = [(e.name, e.attributes.get("tao.verdict")) for e in root.events]
    assert marks == [("approval_requested", None), ("approval_decided", "approved")]


def test_tool_arguments_and_results_are_on_the_spans_only_when_asked(spans, monkeypatch):
    def run_once():
        EXPORTER.clear()
        model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"])
        ReActAgent(model, [calculator]).run("1+2")
        [span] = named(spans(), "execute_tool")
        return span.attributes

    assert "gen_ai.tool.call.arguments" not in run_once()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    attrs = run_once()
    assert attrs["gen_ai.tool.call.arguments"] == '{"operation": "add", "a": 1, "b": 2}'
    assert attrs["gen_ai.tool.call.result"] == "3"


def test_a_handoff_is_a_span_and_the_chain_is_one_trace(spans):
    closer = ReActAgent(ScriptedModel(["it is 4"]), name="closer")
    worker = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=2, b=2),
                                       tool_call("transfer_to_closer", reason="wrap up")]),
                        [calculator], name="worker", handoffs=[closer])
    triage = ReActAgent(ScriptedModel([tool_call("transfer_to_worker", reason="math")]),
                        name="triage", handoffs=[worker])
    result = triage.run("what is 2+2?")
    assert result.answer == "it is 4"

    got = spans()
    assert len({s.context.trace_id for s in got}) == 1
    [root] = [s for s in got if s.parent is None]
    assert root.name == "invoke_agent triage"
    [to_worker] = named(got, "handoff worker")
    assert parent_of(to_worker, got) is root
    assert dict(to_worker.attributes) == {"tao.handoff.from": "triage", "tao.handoff.to": "worker",
                                          "tao.handoff.depth": 1}
    [worker_run] = named(got, "invoke_agent worker")
    assert parent_of(worker_run, got) is to_worker
    assert worker_run.attributes["tao.run.id"] == root.attributes["tao.run.id"] + ".h1"
    [to_closer] = named(got, "handoff closer")
    [closer_run] = named(got, "invoke_agent closer")
    assert parent_of(to_closer, got) is worker_run and parent_of(closer_run, got) is to_closer
    assert len(named(got, "invoke_agent")) == 3  # each run traced once
    # the chain's spans nest in time, and its chat spans add up to the chain's usage
    assert root.start_time <= to_worker.start_time <= closer_run.end_time <= root.end_time
    chats = named(got, "chat ")
    assert len(chats) == 1 + 2 + 1
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) \
        == result.usage.prompt_tokens > 0
    assert root.attributes["tao.run.status"] == "done"


def test_deps_reach_no_span_even_when_contents_are_captured(spans, monkeypatch):
    from tao import RunContext, tool

    @tool
    def whoami(ctx: RunContext[dict]) -> str:
        """Who the user is."""
        return ctx.deps["user"]

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    agent = ReActAgent(ScriptedModel([tool_call("whoami"), "ann"]), [whoami])
    agent.run("who am I?", deps={"user": "ann", "token": "sk-live-0123456789abcdef"})
    got = spans()
    assert named(got, "execute_tool whoami")[0].attributes["gen_ai.tool.call.result"] == "ann"
    assert not [s for s in got if "sk-live-0123456789abcdef" in repr(dict(s.attributes))]


def test_the_provider_given_gets_the_spans_even_when_another_is_already_global():
    """OpenTelemetry takes a global provider once per process and ignores the next one with a
    warning. An app (or a library before it) that set one first must not swallow the spans of
    ``tao.instrument(mine)``."""
    code = textwrap.dedent("""
        import tao
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from tao import ReActAgent, ScriptedModel

        trace.set_tracer_provider(TracerProvider())   # someone else's, first
        mine, exporter = TracerProvider(), InMemorySpanExporter()
        mine.add_span_processor(SimpleSpanProcessor(exporter))
        assert tao.instrument(mine) is mine
        ReActAgent(ScriptedModel(["hi"])).run("hello")
        print(sorted(s.name for s in exporter.get_finished_spans()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['chat scripted', 'invoke_agent react']", out.stdout
