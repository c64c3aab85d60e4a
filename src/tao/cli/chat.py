"""``tao chat``: the seed's interactive entry - ask, watch the agent work, ask again.

    tao chat --tools examples/weather.py --agent react-text
    你想让 Agent 做什么？
    > 北京今天适合跑步吗？
    ...                                  (the Thought/Action/Observation chain, live)
    你想让 Agent 做什么？
    > 那上海呢？                          (the agent hears the first question and its answer)

Each line is one run of the agent, given the conversation so far (every earlier question with
its answer, before the new one; the oldest turns left out when the model's context would
overflow). What you say about yourself ("I prefer answers in Celsius", "我叫李雷") is kept in
``<data dir>/memory.sqlite3`` for your later sessions (``--user NAME``, ``--no-memory``);
``/memory`` lists it, ``/forget ID`` or ``/forget all`` deletes it. Ctrl-C stops the run in progress and the prompt
comes back, the conversation as it was; Ctrl-C twice in a row at the prompt, Ctrl-D or ``/exit``
leaves. ``/reset`` forgets the conversation, ``/agent NAME`` and ``/model NAME`` switch for the
next question (the conversation stays), ``/help`` lists them. The prompt has readline's line
editing, and its history is kept in ``<data dir>/chat_history`` (``$TAO_DATA_DIR``, else
``$XDG_DATA_HOME/tao``, else ``~/.local/share/tao``). The session speaks the language of the
last question typed (before the first one: the locale's). ``--journal FILE`` (or
``TAO_JOURNAL``) journals each answer as a run, with the conversation it was given: ``tao
resume RUN_ID`` answers it again after a crash, what the journal holds served from it.

As in ``tao run``, ``--agent NAME`` (and ``/agent NAME``) may name an ``[agents.NAME]`` of
tao.toml - each question is then answered by that agent with its handoffs - and
``--output-type`` types every answer (the validated value is shown after it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from ..errors import TaoError
from ..factory import AGENTS as NAMES
from ..lang import detect_language
from ..messages import Message
from .common import (ASK, DEFAULT_TIMEOUT_S, JournalOpt, McpOpt, ModelOpt, TimeoutOpt, ToolsOpt,
                     app, close_mcp, data_dir, fail, guard_options, guardrail_flags,
                     is_config_error, locale_language, open_mcp, pkg, settings, with_mcp)
from .named import (AgentNameOpt, OutputTypeOpt, SessionOpt, chain, is_named, output_type_of,
                    resolver, session_of, typed_name)

AGENTS = list(NAMES)
TEXTS = {
    "zh": {
        "welcome": "tao chat · {agent} · {model} · 工具：{tools}。/help 查看命令，Ctrl-D 退出。",
        "help": "/reset         清空对话\n/memory        列出记住的关于你的内容\n"
                "/forget ID|all 忘掉一条或全部\n"
                "/agent NAME    换 agent：{agents}\n/model NAME    换模型："
                "auto、local、local-1.5b、openai、openai:NAME\n/exit          退出（也可以按 Ctrl-D）\n"
                "Ctrl-C         停止正在进行的回答",
        "reset": "对话已清空。", "agent": "agent：{name}", "model": "模型：{name}",
        "no_memories": "还没有记住任何内容。", "forgot": "已忘掉 {n} 条。",
        "no_memory": "本次会话未开启记忆（--no-memory）。",
        "stopped": "已停止。", "again": "再按一次 Ctrl-C（或 Ctrl-D）退出。",
        "unknown": "未知命令 {cmd}；/help 列出所有命令。",
        "bad_agent": "没有名为 {name} 的 agent；可选：{agents}", "error": "出错：{e}",
        "no_history": "（无法保存输入历史 {path}：{e}）", "builtin": "内置计算器",
    },
    "en": {
        "welcome": "tao chat · {agent} · {model} · tools: {tools}. /help lists commands, Ctrl-D leaves.",
        "help": "/reset         forget the conversation\n/memory        list what is remembered about you\n"
                "/forget ID|all forget one memory, or all\n/agent NAME    switch agent: {agents}\n"
                "/model NAME    switch model: auto, local, local-1.5b, openai, openai:NAME\n"
                "/exit          leave (Ctrl-D too)\nCtrl-C         stop the answer in progress",
        "reset": "Conversation cleared.", "agent": "agent: {name}", "model": "model: {name}",
        "no_memories": "Nothing remembered yet.", "forgot": "Forgot {n}.",
        "no_memory": "Memory is off in this session (--no-memory).",
        "stopped": "Stopped.", "again": "Press Ctrl-C again (or Ctrl-D) to leave.",
        "unknown": "Unknown command {cmd}; /help lists them.",
        "bad_agent": "No agent named {name}; choose one of: {agents}", "error": "error: {e}",
        "no_history": "(cannot save the line history to {path}: {e})", "builtin": "built-in calculators",
    },
}


class ChatSession:
    """One ``tao chat`` session: the conversation, the agent and model chosen, the console.
    ``handle(line)`` runs one line (a question or a /command) and says whether to go on."""

    def __init__(self, model: Any, model_spec: str, *, agent: str = "react", tools: Any = None,
                 max_turns: int = 10, timeout: float = DEFAULT_TIMEOUT_S, console: Any = None,
                 language: str | None = None, guard: dict[str, Any] | None = None,
                 memory: Any = None, user: str | None = None, session: Any = None,
                 config: Any = None, output_type: Any = None,
                 resolve: Callable[[str], Any] | None = None):
        """``config``: tao.toml (``Settings.config``), its ``[agents.NAME]`` for /agent too;
        ``output_type``: every answer's; ``resolve``: a named agent's own model, by name."""
        from rich.console import Console

        self.model, self.model_spec = model, model_spec
        self.agent, self.tools = agent, tools
        self.max_turns, self.timeout = max_turns, timeout
        self.console = console if console is not None else Console()
        self.language = language or locale_language()
        #: the conversation: a ``tao.Session`` (``--session NAME`` continues one), read once
        self.session = session
        self.history: list[Any] = session.messages() if session is not None else []
        self.guard = guard or {}  # the guardrails of every answer (budgets count per answer)
        #: how the session was started, as its journal (``--journal``) records it with each run
        self._started = dict(getattr(self.guard.get("journal"), "meta", None) or {})
        from ..memory.inject import Memory  # the conversation, fitted to the context; the store

        self.memory = Memory(memory, history=self.history, user=user)
        self.config, self.output_type, self.resolve = config, output_type, resolve
        #: what /agent may switch to: the architectures, then tao.toml's named agents
        self.agents = [*AGENTS, *(getattr(config, "agents", None) or {})]

    @property
    def t(self) -> dict[str, str]:
        return TEXTS[self.language]

    def say(self, text: str, style: str = "") -> None:
        from rich.text import Text

        self.console.print(Text(text, style=style), soft_wrap=True, highlight=False)

    def welcome(self) -> None:
        sep = "、" if self.language == "zh" else ", "
        tools = sep.join(t.name for t in self.tools) if self.tools else self.t["builtin"]
        self.say(self.t["welcome"].format(agent=self.agent, model=self.model.name, tools=tools), "dim")

    def handle(self, line: str) -> bool:
        """Run ``line``; ``False`` when the session should end."""
        line = line.strip()
        if not line:
            return True
        if line.startswith("/"):
            return self.command(line)
        self.language = detect_language(line)
        self.ask(line)
        return True

    def command(self, line: str) -> bool:
        name, _, arg = line.partition(" ")
        arg, t = arg.strip(), self.t
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            self.say(t["help"].format(agents=", ".join(self.agents)))
        elif name == "/reset":
            self.history.clear()
            if self.session is not None:
                self.session.clear()
            self.say(t["reset"], "bold")
        elif name in ("/memory", "/forget"):
            self.memories(name, arg)
        elif name == "/agent":
            if arg and arg not in self.agents:
                self.say(t["bad_agent"].format(name=arg, agents=", ".join(self.agents)), "red")
            else:
                self.agent = arg or self.agent
                self.say(t["agent"].format(name=self.agent), "bold")
        elif name == "/model":
            if arg:
                try:
                    self.model = pkg().resolve_model(arg, timeout=self.timeout)
                    self.model_spec = arg
                except (TaoError, ValueError) as e:
                    self.say(t["error"].format(e=e), "red")
                    return True
            self.say(t["model"].format(name=f"{self.model_spec} ({self.model.name})"), "bold")
        else:
            self.say(t["unknown"].format(cmd=name), "yellow")
        return True

    def memories(self, name: str, arg: str) -> None:
        """``/memory`` lists this user's memories; ``/forget ID`` or ``/forget all`` deletes."""
        store, scope, t = self.memory.store, self.memory.scope, self.t
        if store is None:
            return self.say(t["no_memory"], "yellow")
        items = store.all(**scope)
        if name == "/memory":
            for i in items:
                self.say(f"{i.id:>4}  {i.get('kind', '-'):<10} {i.text}")
            return None if items else self.say(t["no_memories"], "dim")
        ids = {i.id for i in items}
        chosen = ids if arg == "all" else {int(arg)} & ids if arg.isdigit() else set()
        self.say(t["forgot"].format(n=sum(store.delete(i) for i in chosen)), "bold")
        return None

    def ask(self, question: str, run_id: str | None = None) -> Any:
        """One run of the agent on ``question`` with the conversation so far; a Ctrl-C stops it
        and leaves the conversation as it was before the question. The run's ``Result`` (None
        when it was stopped or could not start). ``run_id``: continue that journaled run."""
        from ..sinks.console import ConsoleSink

        journal = self.guard.get("journal")
        if hasattr(journal, "meta"):  # how to ask it again (tao resume): the session as it is now
            journal.meta = {**self._started, "agent": self.agent, "model": self.model_spec,
                            "history": [m.to_dict() for m in self.history]}
        sink = None
        try:
            runner = self.build()
            if self.agent == "plan":
                from ..sinks.plan_view import PlanView

                sink = PlanView(self.console)
            else:
                sink = ConsoleSink(self.console, typed=typed_name(self.output_type))
            typed = {"output_type": self.output_type} if self.output_type is not None else {}
            result = runner.run(question, [sink], run_id=run_id, **typed)
        except KeyboardInterrupt:
            if sink is not None:
                sink.close()  # a live view of the turn would stay on screen
            self.say(self.t["stopped"], "bold yellow")
            return None
        except (TaoError, ValueError) as e:  # no sandbox for CodeAct, say
            self.say(self.t["error"].format(e=e), "red")
            return None
        finally:
            if sink is not None:
                sink.close()
        if result.answer is not None:
            self.history += [Message.user(question), Message.assistant(result.answer)]
            if self.session is not None:
                self.session.add_turn(question, result.answer)
        return result

    def build(self) -> Any:
        """A fresh agent for one question: tao.toml's named agent and its handoffs, built as
        ``tao run --agent NAME`` builds it, else the architecture ``self.agent`` names."""
        tables = getattr(self.config, "agents", None) or {}
        if self.agent not in tables:
            return pkg().build_agent(self.agent, self.model, self.max_turns, tools=self.tools,
                                     memory=self.memory,
                                     **({"guard": self.guard} if self.guard else {}))
        from ..factory import build_agent
        from ..factory.team import chain_spec

        spec = chain_spec(tables, self.agent, tools=self.tools, guard=self.guard,
                          max_turns=self.max_turns, base=self.config.base, memory=self.memory)
        return build_agent(spec, self.model, self.resolve)

    def loop(self, read: Any = input) -> None:
        """Ask, run, again, until /exit, Ctrl-D or a second Ctrl-C in a row at the prompt."""
        self.welcome()
        interrupted, first = False, True
        while True:
            try:  # a Ctrl-C while the prompt is being printed counts as one at the prompt
                if not first:
                    self.console.print()
                first = False
                self.say(ASK[self.language], "bold")
                line = read("> ")
            except EOFError:
                self.console.print()
                return
            except KeyboardInterrupt:
                self.console.print()
                if interrupted:
                    return
                interrupted = True
                self.say(self.t["again"], "dim")
                continue
            interrupted = False
            try:
                if not self.handle(line):
                    return
            except KeyboardInterrupt:  # during a command (/model loading a model, say)
                self.say(self.t["stopped"], "bold yellow")


class _LineHistory:
    """readline's history, read from and written back to ``<data dir>/chat_history`` (only
    when the prompt is a terminal: that is when ``input()`` uses readline)."""

    def __init__(self) -> None:
        import sys

        self.path = data_dir() / "chat_history"
        self.readline: Any = None
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            return
        try:
            import readline
        except ImportError:  # pragma: no cover - Windows without pyreadline
            return
        self.readline = readline
        readline.set_history_length(1000)
        try:
            readline.read_history_file(self.path)
        except (FileNotFoundError, PermissionError, OSError):
            pass

    def save(self, session: ChatSession) -> None:
        if self.readline is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.readline.write_history_file(self.path)
        except OSError as e:
            session.say(session.t["no_history"].format(path=self.path, e=e.strerror or e), "dim")


@app.command("chat")
@guardrail_flags()
def chat_command(
    ctx: typer.Context,
    agent: AgentNameOpt = "react",
    model: ModelOpt = "auto",
    tools: ToolsOpt = None,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1,
                                           help="Turn budget of each answer.")] = 10,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    mcp: McpOpt = None,
    guard_flags: dict[str, Any] | None = None,
    memory: Annotated[bool, typer.Option(
        "--memory/--no-memory", help="Remember what you say about yourself across sessions "
        "(<data dir>/memory.sqlite3).")] = True,
    user: Annotated[str | None, typer.Option(
        "--user", help="Whose memories these are (default: your login name).")] = None,
    journal: JournalOpt = None,
    session_id: SessionOpt = None,
    output_type: OutputTypeOpt = None,
    resume_run: Annotated[str | None, typer.Option(
        "--resume-run", hidden=True, metavar="RUN_ID",
        help="(tao resume) Answer this journaled run again, with its conversation, and leave.",
    )] = None,
) -> None:
    """Talk to an agent: each line is a task, answered with the conversation so far.

    /reset forgets the conversation, /agent NAME and /model NAME switch, /help, /exit. Ctrl-C
    stops an answer; Ctrl-C twice or Ctrl-D leaves. A tao.toml in the working directory may set
    tools, model, agent, max_turns and timeout, and name agents with their handoffs
    ([agents.NAME]: --agent NAME). With --journal each answer is a journaled run that tao
    resume can continue."""
    s = settings(ctx, tools=tools, model=model, agent=agent, max_turns=max_turns, timeout=timeout)
    typed = output_type_of(output_type, s.config)
    from .runs import journal_for  # --journal / TAO_JOURNAL: tao resume can continue an answer

    journaled = journal_for(ctx, journal)
    row = _journaled_run(journaled, resume_run) if resume_run is not None else None
    if row is not None:  # the answer is asked again as it was: its agent and model
        s.agent, s.model = row["meta"].get("agent") or s.agent, row["meta"].get("model") or s.model
    if is_named(s.agent, s.config):  # a table whose tools cannot load: said before any model
        chain(s.config, s.agent or "", tools=s.tools, guard={}, max_turns=s.max_turns)
    try:
        chosen = pkg().resolve_model(s.model, timeout=s.timeout)
    except (TaoError, ValueError) as e:
        raise fail(f"error: {e}", 2) from None
    guard = guard_options(config=s.config, **(guard_flags or {}))
    if journaled is not None:
        guard = {**guard, "journal": journaled}
    servers = open_mcp(mcp, s.config)  # started once, for every question of the session
    import getpass

    from ..memory.inject import open_store

    kept = session_of(session_id) if row is None else None
    session = ChatSession(chosen, s.model, agent=s.agent or "react",
                          tools=with_mcp(s.tools, servers), max_turns=s.max_turns,
                          timeout=s.timeout, guard=guard, memory=open_store() if memory else None,
                          user=user or getpass.getuser(), session=kept, config=s.config,
                          output_type=typed, resolve=resolver(s.timeout))
    if row is not None:
        try:
            raise typer.Exit(_answer_again(session, row))
        finally:
            close_mcp(servers)
    lines = _LineHistory()
    try:
        session.loop()
    finally:
        lines.save(session)
        close_mcp(servers)
    raise typer.Exit(0)


def _journaled_run(journal: Any, run_id: str) -> dict[str, Any]:
    """The journal's row of ``run_id`` (``--resume-run``): a usage error when there is no
    journal, no such run, or it is not an answer of ``tao chat``."""
    from ..runs.journal import JournalError

    if journal is None:
        raise fail("error: --resume-run needs the journal (--journal FILE or TAO_JOURNAL)", 2)
    try:
        row = journal.find(run_id)
    except JournalError as e:
        raise fail(f"error: {e}", 2) from None
    if (row["meta"].get("argv") or [""])[0] != "chat":
        raise fail(f"error: run {row['run_id']} is not an answer of tao chat", 2)
    return row


def _answer_again(session: ChatSession, row: dict[str, Any]) -> int:
    """The journaled answer ``row`` run again under its id, with the conversation it had; the
    exit status as ``tao run``'s."""
    session.history[:] = [Message.from_dict(m) for m in row["meta"].get("history") or ()]
    session.language = detect_language(row["task"])
    result = session.ask(row["task"], run_id=row["run_id"])
    if result is None:
        return 1
    return 0 if result.ok else 2 if is_config_error(result.error) else 1


__all__ = ["ChatSession", "chat_command"]
