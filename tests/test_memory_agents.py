"""Agents use long-term memory: what the user says about themselves is written (a ``remember``
tool, an end-of-run extraction), recalled at the start of a later run for the same user, never
for another, and no prompt text is ever stored (mem0 #2736). ``tao chat`` remembers across
sessions. Real ``MemoryStore`` files; the model a ``ScriptedModel``."""

from __future__ import annotations

import pytest
from cli_pty import launch

from tao import Message, ReActAgent, ScriptedModel, calculator, tool_call
from tao.cli.chat import ChatSession
from tao.memory import MemoryStore
from tao.memory.extract import rules
from tao.memory.inject import Memory
from tao.plan.agent import PlanExecuteAgent


@pytest.fixture
def store(tmp_path):
    with MemoryStore(tmp_path / "memory.sqlite3", embedder=False) as s:
        yield s


def seen_by(model: ScriptedModel) -> str:
    return "\n".join(m.content for call in model.calls for m in call)


def test_remember_tool_and_extraction_write_what_the_user_said(store):
    model = ScriptedModel([tool_call("remember", text="Ana's cat is called Miso"), "Noted."])
    task = "I prefer temperatures in Celsius. My cat is called Miso. What is 2+3?"
    result = ReActAgent(model, [calculator], memory=Memory(store, user="ana")).run(task)
    assert result.answer == "Noted."
    assert "Remembered: Ana's cat is called Miso" in result.messages[3].content
    kept = {(i.text, i["kind"], i["source"], i["user"]) for i in store.all()}
    assert kept == {("Ana's cat is called Miso", "fact", "remember_tool", "ana"),
                    ("I prefer temperatures in Celsius.", "preference", "extract", "ana"),
                    ("My cat is called Miso.", "fact", "extract", "ana")}


def test_a_later_run_recalls_them_before_the_task_and_another_user_does_not(store):
    store.add("I prefer temperatures in Celsius.", kind="preference", user="ana")
    store.add("Ana's cat is called Miso", kind="fact", user="ana")
    model = ScriptedModel(["12 °C"])
    ReActAgent(model, memory=Memory(store, user="ana")).run("What is the name of my cat?")
    sent = model.calls[0]
    assert sent[-1].content == "What is the name of my cat?"
    assert sent[-2].role == "system" and "What you remember" in sent[-2].content
    assert "- Ana's cat is called Miso" in sent[-2].content
    assert "- I prefer temperatures in Celsius." in sent[-2].content  # preferences always come
    other = ScriptedModel(["?"])
    ReActAgent(other, memory=Memory(store, user="bo")).run("What is the name of my cat?")
    assert "Miso" not in seen_by(other) and "Celsius" not in seen_by(other)


def test_the_system_prompt_and_tool_list_never_end_up_stored(store):
    """mem0 #2736: the extraction reads only what the user wrote, and a candidate copied from
    the prompt or a tool's description is refused - from the remember tool and from a model's
    extraction alike."""
    agent = ReActAgent(ScriptedModel([]), [calculator], memory=Memory(store, extract="model"))
    system = agent.protocol.system_prompt("en", agent.toolbox)
    tool_text = agent.toolbox["calculator"].description

    def extractor(messages):  # the extraction call: a model that parrots its prompt
        assert all(system[:60] not in m.content for m in messages)  # it was never shown it
        return f'["{system[:200]}", "{tool_text[:120]}", "I live in Oslo."]'

    model = ScriptedModel([tool_call("remember", text=system[:300]),
                           tool_call("remember", text=tool_text), "ok", extractor])
    agent.model = model
    result = agent.run("I live in Oslo. Add 1 and 2.")
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "Not remembered: that is text of the prompt or the tool list, not something the user said"] * 2
    assert [i.text for i in store.all()] == ["I live in Oslo."]
    sentence = system.split(".")[0]  # even one sentence of it
    assert agent.memory.save([sentence], "en") == [
        "Not remembered: that is text of the prompt or the tool list, not something the user said"]


def test_a_secret_told_to_remember_is_kept_as_stars_and_never_recalled(store):
    """An API key or a password given to the ``remember`` tool or said in the task is stored
    as ``***`` (the model is told what was kept), a memory that is nothing but a key is
    refused, and the next run's prompt holds none of them."""
    key = "sk-" + "live-Zq3vT8wLk2Rb9Xy4Nc7Hd1"
    model = ScriptedModel([tool_call("remember", text=f"Ana's OpenAI key is {key}"),
                           tool_call("remember", text=key), "Noted."])
    task = "I work at Acme and my VPN password is Tr0ub4dor&3. What is 2+3?"
    result = ReActAgent(model, [calculator], memory=Memory(store, user="ana")).run(task)
    said = [m.content for m in result.messages if m.role == "tool"]
    assert said == ["Remembered: Ana's OpenAI key is ***",
                    "Not remembered: it is a secret (a key, token or password); secrets are "
                    "never kept in memory"]
    assert {i.text for i in store.all()} == {"Ana's OpenAI key is ***",
                                             "I work at Acme and my VPN password is ***."}
    later = ScriptedModel(["ok"])
    ReActAgent(later, memory=Memory(store, user="ana", min_score=0.0)).run("Where do I work?")
    assert "I work at Acme" in seen_by(later)
    assert key not in seen_by(later) and "Tr0ub4dor" not in seen_by(later)
    assert Memory(store).save(["我的密钥是 9f8e7d6c5b4a"], "zh") == ["已记住：我的密钥是 ***"]


def test_rules_keep_statements_about_the_user_not_questions_or_tasks():
    assert rules("I prefer answers in metric units. What is 3 km in miles?") == [
        "I prefer answers in metric units."]
    assert rules("我叫李雷。我对花生过敏。北京今天天气怎么样？") == ["我叫李雷。", "我对花生过敏。"]
    assert rules("Compute 15 * 27 and explain the steps.") == []
    assert rules("Do I like tea?") == []


def test_plan_agent_recalls_too(store):
    store.add("The user's budget is 50 yuan", kind="fact")
    plan = '{"steps": [{"id": "step1", "description": "d", "tool": "calculator", ' \
           '"args": {"operation": "add", "a": 1, "b": 1}, "depends_on": []}], "answer": "$step1"}'
    model = ScriptedModel([plan])
    PlanExecuteAgent(model, [calculator], memory=Memory(store, min_score=0.0)).run(
        "How much budget do I have left?")
    assert "The user's budget is 50 yuan" in seen_by(model)


def weather(messages):
    """The scripted model answers in the unit the conversation asked for."""
    return "Oslo: 12 °C" if any("Celsius" in m.content for m in messages) else "Oslo: 54 °F"


def test_tao_chat_uses_a_preference_told_in_an_earlier_session(tmp_path):
    path = tmp_path / "memory.sqlite3"
    first = ChatSession(ScriptedModel(["Noted."]), "scripted", memory=MemoryStore(path),
                        user="ana", console=_quiet())
    first.handle("I prefer temperatures in Celsius, please.")
    second = ChatSession(ScriptedModel([weather]), "scripted", memory=MemoryStore(path),
                         user="ana", console=_quiet())
    second.handle("How warm is it in Oslo today?")
    assert second.history[-1] == Message.assistant("Oslo: 12 °C")  # the default embedder's store
    third = ChatSession(ScriptedModel([weather]), "scripted", memory=MemoryStore(path),
                        user="bo", console=_quiet())
    third.handle("How warm is it in Oslo today?")
    assert third.history[-1] == Message.assistant("Oslo: 54 °F")


def _quiet():
    from io import StringIO

    from rich.console import Console

    return Console(file=StringIO())


def test_tao_chat_in_a_terminal_remembers_across_sessions_and_not_with_no_memory(tmp_path):
    term = launch("model = ScriptedModel(['好的，记住了。'])", ["chat", "--user", "li"], cwd=tmp_path,
                  lang="zh_CN.UTF-8")
    term.prompt()
    term.sendline("我喜欢用摄氏度表示温度。")
    term.expect("好的，记住了。")
    term.prompt()
    term.sendline("/exit")
    assert term.wait_exit() == 0
    script = """
def weather(messages):
    return "奥斯陆：12 °C" if any("摄氏" in m.content for m in messages) else "奥斯陆：54 °F"
model = ScriptedModel([weather])
"""
    for args, answer in ((["chat", "--user", "li"], "奥斯陆：12 °C"),
                         (["chat", "--user", "li", "--no-memory"], "奥斯陆：54 °F")):
        term = launch(script, args, cwd=tmp_path, lang="zh_CN.UTF-8")
        term.prompt()
        term.sendline("奥斯陆今天多少度？")
        term.expect(answer)
        term.prompt()
        term.sendline("/exit")
        assert term.wait_exit() == 0


def test_tao_run_with_memory_keeps_and_recalls_a_preference(monkeypatch):
    from typer.testing import CliRunner

    import tao.cli as cli

    models = [ScriptedModel(["Noted, 5."]), ScriptedModel([weather]), ScriptedModel([weather])]
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: models.pop(0))
    run = CliRunner().invoke
    assert run(cli.app, ["run", "I prefer temperatures in Celsius. What is 2+3?", "--memory"]).exit_code == 0
    res = run(cli.app, ["run", "How warm is it in Oslo today?", "--memory"])
    assert "Final Answer: Oslo: 12 °C" in res.stdout
    res = run(cli.app, ["run", "How warm is it in Oslo today?"])  # without --memory: nothing
    assert "Final Answer: Oslo: 54 °F" in res.stdout


def test_tao_chat_lists_and_forgets_what_it_remembers(tmp_path):
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    store = MemoryStore(tmp_path / "m.sqlite3", embedder=False)
    store.add("Bo's memory", kind="fact", user="bo")
    session = ChatSession(ScriptedModel(["Noted."] * 2), "scripted", memory=store, user="ana",
                          console=Console(file=out, width=100))
    session.handle("/memory")
    assert "Nothing remembered yet." in out.getvalue()
    session.handle("I prefer tea to coffee.")
    session.handle("My name is Ana.")
    session.handle("/memory")
    assert "preference I prefer tea to coffee." in out.getvalue()
    assert "Bo's memory" not in out.getvalue()  # another user's
    [tea] = [i for i in store.all(user="ana") if "tea" in i.text]
    session.handle(f"/forget {tea.id}")
    assert "Forgot 1." in out.getvalue()
    assert [i.text for i in store.all(user="ana")] == ["My name is Ana."]
    session.handle("/forget all")
    assert store.all(user="ana") == [] and len(store.all(user="bo")) == 1
    session.handle("/forget nonsense")
    assert "Forgot 0." in out.getvalue()
