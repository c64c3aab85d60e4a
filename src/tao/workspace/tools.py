"""The coding agent's tools (seed 002): files and commands in one folder, and nowhere else.

    async with Workspace("workspace", language="zh") as ws:   # a Toolbox
        agent = ReActAgent(model, tools=ws)                   # or tools=[*ws, calculator]
        await agent.arun("用 HTML + CSS + JS 写一个贪吃蛇小游戏")

The file tools work on the folder from the host through ``safe_path``: no ``..``, no absolute
path, no link followed, no special file opened, sizes capped, every write atomic. Their refusals
are ``WorkspaceError`` (``retryable = False``), so they reach the model as error observations.

Lifecycle of the sandbox behind ``run_command``: created by the first call, never before (a run
that only writes files starts no process), reused by later calls, ended by ``close()`` or leaving
``async with`` (the files stay; a later ``run_command`` starts a fresh one). Each command is its
own ``/bin/sh -c`` process in the root - no shell state (``cd``, variables) carries over - and
whatever it left running is killed when it ends. bwrap by default: the root mounted read-write at
``/workspace``, nothing else of the host writable (``/tmp`` is the sandbox's own tmpfs), no
network. ``sandbox="subprocess"`` (the host's files visible) or ``"docker"`` is a choice, never a
fallback; ``sandbox=False`` leaves ``run_command`` out. As root, commands may change what the
tools wrote, not the files that were there before (``commands.py`` says why).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import prompts
from ..tools.base import MAX_OBSERVATION_CHARS, FunctionTool, Toolbox
from .commands import Commands, chosen_backend
from .finish import FinishChecks
from .verify import Verify
from .page import chromium as page_chromium
from . import safe_path, writes
from .safe_path import Refused

_BUDGET = MAX_OBSERVATION_CHARS - 400  # room for the header and notes: never cut by the Toolbox


def _then(said: str, note: str) -> str:
    """``said`` and a note that opens with its own full stop (". But ...", "。但 ..."), without
    doubling one that ``said`` already ends with."""
    if note[:1] in ".。" and said[-1:] in ".。":
        note = note[1:]
    return said + note


def _python_error(text: str) -> str | None:
    """``line N: why`` when ``text`` is not valid Python, else ``None``. Nesting too deep to
    compile counts as invalid; a file that is fine stays ``None``."""
    try:
        compile(text, "<file>", "exec", dont_inherit=True)
    except SyntaxError as e:
        return f"line {e.lineno}: {e.msg}"
    except (ValueError, RecursionError, MemoryError) as e:
        return f"{type(e).__name__}: {e}"[:200]
    return None


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


_WEB = (".html", ".htm", ".js", ".mjs", ".css")
#: pytest's summary of a run with failures ("3 failed", "1 failed, 2 passed", "1 error")
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) |\b\d+ (?:failed|errors?)\b", re.MULTILINE)


class WorkspaceError(ValueError):
    """A workspace tool refused a call (the message says why, for the model); the same call
    fails again, so ``retryable = False``."""

    retryable = False


class Workspace(FinishChecks, Verify, Toolbox):
    """``Workspace(root, language="en", sandbox=None, limits=None)``: the tools ``write_file``,
    ``read_file``, ``list_dir``, ``edit_file`` and ``run_command`` on the folder ``root`` (made if
    missing). ``language`` ("zh"/"en") is the language of the observations. ``max_write_bytes``
    caps one write, ``max_read_bytes`` the file read_file/edit_file take, ``max_files`` the files
    and folders the tools may create, ``max_timeout`` one command's seconds. A sandbox backend that
    cannot run here is ``SandboxUnavailable`` at once, not at the first command.

    For the guardrails (``tao.guard``): ``run_command`` is ``high_risk``; what ``read_file``
    returns is untrusted unless it is what ``write_file``/``edit_file`` wrote there (a file that
    was in the folder before, or that a command changed, is data from elsewhere), and so is
    ``run_command``'s output when the folder held files before. ``trusted=True``: the folder's
    files are the user's own, read as trusted.

    ``check_pages=True`` (tao code): after a write that leaves a web page with every file it
    loads, the page is opened in headless Chromium and what its scripts throw is added to the
    write's observation (``workspace_page``)."""

    def __init__(self, root: str | os.PathLike[str] = "workspace", *, language: str = "en",
                 sandbox: str | bool | None = None, limits: Any = None,
                 max_write_bytes: int = 1 << 20, max_read_bytes: int = 16 << 20,
                 max_files: int = 1000, max_timeout: float = 600, trusted: bool = False,
                 check_pages: bool = False):
        if language not in ("zh", "en"):
            raise ValueError(f"language must be 'zh' or 'en', not {language!r}")
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.language = language
        self.max_write_bytes, self.max_read_bytes = max_write_bytes, max_read_bytes
        self.max_files, self.max_timeout = max_files, max_timeout
        self._text: dict[str, str] = prompts.table("workspace")[language]
        self._made = 0
        #: the guard's view of the folder: files that were here before (the user's documents, a
        #: cloned project) may carry instructions aimed at the model; what the tools wrote does not
        self.trusted = trusted
        self.check_pages = check_pages  # a web page written whole: its JavaScript errors told
        self.foreign = not trusted and any(True for _ in os.scandir(self.root))
        self._wrote: dict[str, str] = {}  # path -> SHA-256 of what write_file/edit_file left
        self._read_ours: dict[str, bool] = {}  # path -> whether its last read was what we wrote
        self._checks_start()
        tools = [FunctionTool(self.write_file, continued_by="append_file"),
                 FunctionTool(self.append_file, continued_by="append_file"),
                 FunctionTool(self.read_file, untrusted_output=self._untrusted_read),
                 FunctionTool(self.list_dir), FunctionTool(self.edit_file)]
        if check_pages and page_chromium() is not None:  # pages a user clicks: the coder too
            tools.append(FunctionTool(self.try_page, side_effects=False))
        #: the sandbox backend run_command uses (``None``: no run_command)
        self.sandbox_kind: str | None = None
        self._commands: Commands | None = None
        if sandbox is not False:
            self.sandbox_kind = chosen_backend(None if sandbox is True else sandbox)
            self._commands = Commands(self.root, self.sandbox_kind, limits, self._text)
            # high risk: once untrusted text was read, a command needs approval; its output is
            # untrusted where the folder held files before (a command can print them)
            tools.append(FunctionTool(self.run_command, high_risk=True,
                                      untrusted_output=lambda args: self.foreign))
        super().__init__(tools)

    # -- the tools (their docstrings are what the model reads) ---------------------------------
    def write_file(self, path: str, content: str) -> str:
        """Write a whole file in the workspace (created or replaced; folders are made as needed).

        Args:
            path: a path relative to the workspace, e.g. index.html or src/app.js
            content: the complete content of the file
        """
        with self._refusals():
            parts = safe_path.parts_of(path)
            data, where = self._encoded(content), "/".join(parts)
            old = self._old_text(parts)
            if old is not None and old.encode("utf-8", "surrogateescape") == data:
                raise Refused("write_same", path=where)  # the same __init__.py ten times
            gone = writes.dropped(where, old or "", content)
            if needed := writes.still_called(where, content, gone):
                raise Refused("drops_used", path=where, names=", ".join(needed))
            safe_path.write_atomic(str(self.root), parts, data, owner=self._owner,
                                   made=self._count)
            self._wrote[where] = _sha(data)
            self._written(where)
            said = self._say("wrote", path=where, chars=len(content))
            if gone:  # dropped, and nothing left calls it: a rewrite may mean that, said
                said += self._say("defs_gone", names=", ".join(gone))
            said += self._page_note(where)
            return _then(said, self._python_note(where, content))

    def _old_text(self, parts: list[str]) -> str | None:
        """The file's text before a write (None: a new file, or one we may not read)."""
        try:
            return self._read(parts).decode("utf-8", "surrogateescape")
        except (Refused, OSError):
            return None

    def append_file(self, path: str, content: str) -> str:
        """Add lines to the end of a file in the workspace (made if missing): long files go in parts.

        Args:
            path: a path relative to the workspace
            content: the lines that come after the file's last line
        """
        with self._refusals():
            parts = safe_path.parts_of(path)
            where = "/".join(parts)
            if not content:
                raise Refused("append_empty", path=where)
            data = self._encoded(content)
            try:
                old = self._read(parts)
            except Refused as e:
                if e.key != "not_found":
                    raise
                old = b""
            text = old.decode("utf-8", "replace")
            if writes.repeated(where, text, content):
                raise Refused("append_again", path=where)
            content, resent = writes.after_resent(text, content)
            data = self._encoded(content) if resent else data
            if old and not old.endswith(b"\n"):  # the parts are lines: a part starts on its own
                old += b"\n"
            ours = not old or self._wrote.get(where) in (_sha(old), _sha(old[:-1]))
            safe_path.write_atomic(str(self.root), parts, old + data, owner=self._owner,
                                   made=self._count)
            if ours:  # a file the tools wrote (or made here) stays theirs
                self._wrote[where] = _sha(old + data)
            self._written(where, appended=True)
            total = (old + data).count(b"\n") + (not data.endswith(b"\n"))
            said = self._say("appended", path=where, lines=content.count("\n") + 1, total=total)
            if resent:
                said = self._say("append_resent", path=where) + said
            return said + self._page_note(where) + \
                self._python_note(where, (old + data).decode("utf-8", "replace"))

    def read_file(self, path: str, offset: int = 1, limit: int = 200) -> str:
        """Read a text file in the workspace, a window of lines at a time.

        Args:
            path: a path relative to the workspace
            offset: the first line to show (the first line is 1)
            limit: how many lines to show at most
        """
        with self._refusals():
            parts = safe_path.parts_of(path)
            if offset < 1:
                raise Refused("bad_offset", value=offset)
            if not 1 <= limit <= 2000:
                raise Refused("bad_limit", value=limit, cap=2000)
            where, data = "/".join(parts), self._read(parts)
            self._read_ours[where] = self._wrote.get(where) == _sha(data)
            if b"\x00" in data:
                raise Refused("binary", path=where)
            text = data.decode("utf-8", "replace")
            bad = text.count("\ufffd") - data.count("\ufffd".encode())
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()
            if not lines:
                return self._say("read_empty", path=where)
            if offset > len(lines):
                raise Refused("past_end", offset=offset, path=where, total=len(lines))
            shown, used, notes = [], 0, []
            for line in lines[offset - 1: offset - 1 + limit]:
                if used + len(line) + 1 > _BUDGET:
                    if not shown:  # one line longer than an observation: its head
                        shown.append(line[:_BUDGET])
                        notes.append(self._say("read_line_cut", line=offset, chars=len(line),
                                               shown=_BUDGET))
                    break
                shown.append(line)
                used += len(line) + 1
            last = offset + len(shown) - 1
            if last < len(lines):
                notes.append(self._say("read_more", left=len(lines) - last, next=last + 1))
            if bad:
                notes.append(self._say("read_bad_bytes", path=where, bad=bad))
            head = self._say("read_header", path=where, first=offset, last=last, total=len(lines))
            return "\n".join([head, *shown, *notes])

    def list_dir(self, path: str = ".") -> str:
        """List a folder of the workspace: names, kinds and sizes, sorted by name.

        Args:
            path: a folder relative to the workspace; "." is the workspace itself
        """
        with self._refusals():
            parts = safe_path.parts_of(path, allow_root=True)
            where = "/".join(parts) or "."
            found = safe_path.entries(str(self.root), parts)
            if not found:
                return self._say("list_empty", path=where)
            lines, used = [self._say("list_header", path=where, count=len(found))], 0
            for name, kind, size, target in found:
                text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                odd = self._text["odd_name"] if text != name else ""
                desc = self._say(f"kind_{kind}", size=size, target=target or "")
                line = f"{text}{'/' if kind == 'dir' else ''}  ({desc}){odd}"
                if used + len(line) > _BUDGET:
                    lines.append(self._say("list_more", left=len(found) - len(lines) + 1))
                    break
                lines.append(line)
                used += len(line) + 1
            return "\n".join(lines)

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace one exact piece of text in a file of the workspace.

        Args:
            path: a path relative to the workspace
            old: text copied exactly from the file; it must occur exactly once
            new: the text to put in its place
        """
        with self._refusals():
            parts = safe_path.parts_of(path)
            if not old:
                raise Refused("old_empty")
            if old == new:
                raise Refused("same_text")
            where = "/".join(parts)
            try:
                text = self._read(parts).decode("utf-8")
            except UnicodeDecodeError:
                raise Refused("not_utf8_edit", path=where) from None
            at, start = [], text.find(old)
            while start != -1:
                at.append(start)
                start = text.find(old, start + 1)
            if not at:
                raise Refused("no_match", path=where)
            if len(at) > 1:
                lines = ", ".join(str(text.count("\n", 0, i) + 1) for i in at[:10])
                raise Refused("many_matches", path=where, count=len(at),
                              lines=lines + (", ..." if len(at) > 10 else ""))
            changed = text[:at[0]] + new + text[at[0] + len(old):]
            if where.endswith(".py") and _python_error(text) is None:
                broken = _python_error(changed)
                if broken:  # the file ran before this edit: it stays as it was
                    raise Refused("edit_breaks_python", path=where, error=broken)
            try:
                data = changed.encode("utf-8")
            except UnicodeEncodeError as e:
                raise Refused("bad_content", index=e.start - at[0] + 1) from None
            if len(data) > self.max_write_bytes:
                raise Refused("too_big_write", size=len(data), cap=self.max_write_bytes)
            safe_path.write_atomic(str(self.root), parts, data, owner=self._owner)
            if self._wrote.get(where) == _sha(text.encode("utf-8")):  # ours before: still ours
                self._wrote[where] = _sha(data)
            self._written(where)
            return self._say("edited", path=where, line=text.count("\n", 0, at[0]) + 1,
                             chars=len(changed)) + self._page_note(where)

    async def run_command(self, command: str, timeout: float = 60) -> str:
        """Run a shell command in the workspace folder; returns its output and exit status.

        It runs in a sandbox: no network, and only the workspace is writable.

        Args:
            command: a /bin/sh command line, e.g. "ls -la" or "python3 test.py"
            timeout: seconds before the command is killed
        """
        with self._refusals():
            if "\x00" in command:
                raise Refused("cmd_nul")
            try:
                command.encode("utf-8")
            except UnicodeEncodeError:
                raise Refused("cmd_unicode") from None
            if not command.strip():
                raise Refused("cmd_empty")
            if len(command) > 100_000:
                raise Refused("cmd_too_long", size=len(command), cap=100_000)
            if not 1 <= timeout <= self.max_timeout:
                raise Refused("bad_timeout", value=timeout, cap=self.max_timeout)
        assert self._commands is not None  # the tool exists only with a sandbox
        out = await self._commands.run(command, timeout)
        failed = "pytest" in command and _PYTEST_FAILED.search(out) is not None
        return out + self._ran(command, out, silent=out == self._commands.quiet_success) + \
            ("\n" + self._say("tests_failed") if failed else "")

    def try_page(self, steps: str, page: str = "index.html") -> str:
        """Use a page of the workspace in a headless browser; see what it shows after each step.

        Steps on one line, split by ";", e.g. try_page【type 1 21; click Add】. A step: click
        TEXT (a button or link), type N TEXT (into input box N), press KEY, wait MS.

        Args:
            steps: the steps, split by ";" (or one a line), e.g. "type 1 21; click Add"
            page: the page to open, relative to the workspace (index.html if not given)
        """
        from . import page_try

        with self._refusals():
            parts = safe_path.parts_of(page)
            where = "/".join(parts)
            self._read(parts)  # a page that is there, a regular file inside the workspace
            try:
                plan = page_try.parse(steps)
                done = page_try.try_steps(self.root, where, plan)
            except page_try.StepError as e:
                raise Refused(e.key, **e.values) from None
        if done is None:
            return self._say("try_none", page=where)
        self._tried()
        return page_try.worded(where, plan, done, self._say)

    # -- lifecycle ----------------------------------------------------------------------------
    async def close(self) -> None:
        """End the sandbox of ``run_command`` (if one was started); the files stay."""
        if self._commands is not None:
            await self._commands.close()

    async def __aenter__(self) -> Workspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # sync code, as it should be here
            asyncio.run(self.close())
            return
        raise RuntimeError("inside a running event loop use `async with Workspace(...)`")

    # -- internals ----------------------------------------------------------------------------
    def _page_note(self, path: str) -> str:
        """With ``check_pages``, after a write to a web file: what the page throws
        (``workspace_page.note``), or nothing."""
        if not self.check_pages or not path.lower().endswith(_WEB):
            return ""
        from .page import note

        return note(self.root, path, self._say)

    def _python_note(self, path: str, text: str) -> str:
        """After a write to a .py file that does not parse: where and why, so the next turn
        fixes it rather than running it."""
        error = _python_error(text) if path.endswith(".py") else None
        if error:
            return self._say("py_syntax", path=path, error=error)
        if not path.endswith(".py"):
            return ""
        return self._shadow_note(path, text) + self._hidden_note(path, text)

    def _hidden_note(self, path: str, text: str) -> str:
        """A method hidden by an attribute of the same name (``defs.hidden_methods``): said at
        the write, where the line is known, since a run that never calls the method never
        shows it."""
        from .defs import hidden_methods

        return "".join(self._say("py_hidden", path=path, line=line, cls=cls, name=name)
                       for cls, name, line in hidden_methods(text)[:3])

    def _shadow_note(self, path: str, text: str) -> str:
        """A package's module named as what it defines (``shapes/Circle.py`` holding ``class
        Circle``), and an ``__init__.py`` that does not import it: ``from shapes import
        Circle`` then gives the module, and ``Circle(2)`` says "'module' object is not
        callable" - a trap the coder could not read its way out of (2026-12-07)."""
        from .defs import defined

        package, _, module = path[:-3].rpartition("/")
        if not package:
            return ""
        if module == "__init__":  # the modules written before it, checked against it
            for sibling in sorted((self.root / package).glob("*.py"))[:50]:
                name = sibling.stem
                parts = [*package.split("/"), sibling.name]
                if name != "__init__" and name not in text and self._defines(parts, name):
                    module = name
                    break
            else:
                return ""
        elif module not in defined(text, "python"):
            return ""
        else:
            try:  # read as the tools read: inside the workspace, no link followed out of it
                if module.encode() in self._read([*package.split("/"), "__init__.py"]):
                    return ""
            except (Refused, OSError):
                return ""  # no __init__.py: not a package (yet)
        return self._say("py_shadow", package=package.replace("/", "."), name=module,
                         init=f"{package}/__init__.py")

    def _say(self, key: str, **values: object) -> str:
        if "kind" in values:
            values["kind"] = self._text[f"kind_{values['kind']}"]
        return prompts.render(self._text[key], **{k: str(v) for k, v in values.items()})

    @contextlib.contextmanager
    def _refusals(self) -> Iterator[None]:
        """A ``Refused`` (or an ``OSError`` on the way) becomes a ``WorkspaceError`` in the
        workspace's language."""
        try:
            yield
        except Refused as e:
            raise WorkspaceError(self._say(e.key, **e.values)) from None
        except OSError as e:
            where = safe_path.shown(str(e.filename or "."))
            error = WorkspaceError(self._say("os_error", path=where, error=e.strerror or str(e)))
            error.retryable = True  # e.g. a full disk: freeing space helps
            raise error from None

    def _untrusted_read(self, args: dict[str, Any]) -> bool:
        """``read_file``'s ``untrusted_output``: the file read was not what the tools wrote."""
        if self.trusted:
            return False
        try:
            where = "/".join(safe_path.parts_of(args["path"]))
        except (Refused, KeyError, TypeError):
            return True
        return not self._read_ours.get(where, False)

    def _defines(self, parts: list[str], name: str) -> bool:
        """Whether the workspace's .py file at ``parts`` defines ``name`` at its top level."""
        from .defs import defined

        try:
            text = self._read(parts).decode("utf-8", "replace")
        except (Refused, OSError):
            return False
        return name in defined(text, "python")

    def _read(self, parts: list[str]) -> bytes:
        return safe_path.read_bytes(str(self.root), parts, self.max_read_bytes)

    def _encoded(self, content: str) -> bytes:
        """What write_file and append_file write: UTF-8, within ``max_write_bytes``."""
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as e:
            raise Refused("bad_content", index=e.start + 1) from None
        if len(data) > self.max_write_bytes:
            raise Refused("too_big_write", size=len(data), cap=self.max_write_bytes)
        return data

    def _count(self, path: str) -> None:
        """Told before the tools make a file or folder: the cap, and whom to give it to later."""
        if self._made >= self.max_files:
            raise Refused("too_many_files", cap=self.max_files)
        self._made += 1
        if self._commands is not None:
            self._commands.made(path)

    @property
    def _owner(self) -> int | None:
        """Whom new files go to: the sandbox's uid, once there is a sandbox (as root)."""
        return self._commands.owner if self._commands is not None else None
