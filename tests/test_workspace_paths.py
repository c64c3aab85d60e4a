"""Every way a model (or a command it ran in an earlier turn) could make the workspace tools touch
something outside the workspace: each is refused with a clear observation and nothing is written
outside the root. Calls go through Toolbox.execute, the way an agent makes them."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import socket
import stat
import threading
import time

import pytest

from tao.messages import ToolCall
from tao.workspace import Workspace

from sandbox_backends import skip_mark

needs_bwrap = skip_mark("bwrap") or (lambda f: f)
TOOLS = ("write_file", "append_file", "read_file", "list_dir", "edit_file")


@pytest.fixture
def box(tmp_path):
    """A workspace at tmp_path/ws with a sibling folder, tmp_path/outside, that must stay empty."""
    (tmp_path / "outside").mkdir()
    return Workspace(tmp_path / "ws", sandbox=False)


def call(ws, name, **arguments):
    return asyncio.run(ws.execute(ToolCall("c1", name, arguments)))


def args_for(name, path):
    return {"write_file": {"path": path, "content": "pwned"},
            "append_file": {"path": path, "content": "pwned"}, "read_file": {"path": path},
            "list_dir": {"path": path}, "edit_file": {"path": path, "old": "a", "new": "b"}}[name]


def assert_refused(ws, path, says, tools=TOOLS):
    for name in tools:
        r = call(ws, name, **args_for(name, path))
        assert r.is_error and not r.retryable, (name, r.content)
        assert r.content.startswith("Error: WorkspaceError: "), (name, r.content)
        assert says in r.content, (name, r.content)


def nothing_outside(tmp_path):
    assert os.listdir(tmp_path / "outside") == []
    assert sorted(os.listdir(tmp_path)) == ["outside", "ws"]


# -- the path itself -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["..", "../outside/x", "a/../../outside/x", "a/../b", "./../x",
                                  "a/b/../../../x"])
def test_dotdot_is_refused(box, tmp_path, path):
    assert_refused(box, path, "may not contain '..'")
    nothing_outside(tmp_path)
    assert os.listdir(tmp_path / "ws") == []  # not even the folder "a" was made


@pytest.mark.parametrize("path", ["/etc/passwd", "/tmp/x", "//etc/passwd", "~/.bashrc", "~",
                                  "C:\\Windows\\x", "\\\\server\\share", " /etc/passwd"])
def test_absolute_paths_are_refused(box, tmp_path, path):
    assert_refused(box, path, "absolute path")
    nothing_outside(tmp_path)
    assert not os.path.exists("/tmp/x")


def test_a_workspace_path_with_the_outside_in_it_stays_inside(box, tmp_path):
    """A path that names the outside folder is just a name inside the workspace."""
    r = call(box, "write_file", path=f"{tmp_path}/outside/x".lstrip("/"), content="in")
    assert not r.is_error
    nothing_outside(tmp_path)


def test_nul_bytes_are_refused(box, tmp_path):
    assert_refused(box, "index.html\x00.txt", "contains a NUL character")
    assert_refused(box, "\x00", "NUL")
    nothing_outside(tmp_path)
    assert os.listdir(tmp_path / "ws") == []


@pytest.mark.parametrize("path", ["snake\ud800.js", "\udcff", "a/\udc80b/c"])
def test_broken_unicode_in_a_path_is_refused(box, tmp_path, path):
    assert_refused(box, path, "broken Unicode")
    assert os.listdir(tmp_path / "ws") == []


def test_empty_and_overlong_paths(box):
    assert_refused(box, "", "the path is empty", tools=("write_file", "read_file", "edit_file"))
    assert_refused(box, "a" * 256, "too long")
    assert_refused(box, "a/" * 2100, "too long")
    assert call(box, "list_dir", path="").content == ". is an empty folder"  # "" is the root


def test_broken_unicode_in_content_writes_nothing(box, tmp_path):
    r = call(box, "write_file", path="game.js", content="let s = '\ud83d';")
    assert r.is_error and "broken Unicode (character 10 is a lone surrogate)" in r.content
    assert os.listdir(tmp_path / "ws") == []


# -- symbolic links ------------------------------------------------------------------------------
def test_a_link_to_a_folder_outside_is_not_followed(box, tmp_path):
    os.symlink(tmp_path / "outside", tmp_path / "ws" / "out")
    assert_refused(box, "out/x", f"out is a symbolic link (to {tmp_path}/outside)")
    assert_refused(box, "out/deeper/x", "out is a symbolic link")
    assert_refused(box, "out", "out is a symbolic link", tools=("list_dir",))
    nothing_outside(tmp_path)


def test_a_link_as_the_last_name_is_not_written_through(box, tmp_path):
    secret = tmp_path / "outside" / "secret.txt"
    secret.write_text("keep")
    os.symlink(secret, tmp_path / "ws" / "notes.txt")
    assert_refused(box, "notes.txt", "notes.txt is a symbolic link",
                   tools=("write_file", "read_file", "edit_file"))
    assert secret.read_text() == "keep" and os.listdir(tmp_path / "outside") == ["secret.txt"]
    assert os.path.islink(tmp_path / "ws" / "notes.txt")  # the link is left as it was
    # list_dir shows it for what it is
    assert f"notes.txt  (symbolic link -> {secret})" in call(box, "list_dir").content


def test_links_inside_the_workspace_are_not_followed_either(box, tmp_path):
    """One rule, no exceptions: a link that stays inside is refused too, and says where it points."""
    call(box, "write_file", path="src/app.js", content="1")
    os.symlink("src", tmp_path / "ws" / "lib")
    assert_refused(box, "lib/app.js", "lib is a symbolic link (to src)")
    assert call(box, "read_file", path="src/app.js").content.endswith("\n1")


def test_a_dangling_link_is_a_link(box, tmp_path):
    os.symlink(tmp_path / "outside" / "new", tmp_path / "ws" / "new")
    assert_refused(box, "new", "new is a symbolic link", tools=("write_file", "read_file"))
    assert_refused(box, "new/x", "new is a symbolic link", tools=("write_file",))
    nothing_outside(tmp_path)


def test_a_folder_swapped_for_a_link_while_writing_never_lets_a_write_out(box, tmp_path):
    """The race a check-then-open resolver loses: another process flips ws/d between a real folder
    and a link to the outside while write_file writes d/x over and over."""
    ws_d, outside = tmp_path / "ws" / "d", tmp_path / "outside"
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            shutil.rmtree(ws_d, ignore_errors=True)  # the folder write_file made goes...
            try:
                os.symlink(outside, ws_d)  # ...and a link to the outside takes its place
            except OSError:
                pass
            time.sleep(0.0005)
            try:
                os.unlink(ws_d)
            except OSError:
                pass
            time.sleep(0.0005)

    flipper = threading.Thread(target=flip)
    flipper.start()
    outcomes = set()
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            r = call(box, "write_file", path="d/x", content="x")
            outcomes.add("wrote" if not r.is_error else "link" if "symbolic link" in r.content
                         else r.content)
    finally:
        stop.set()
        flipper.join()
    assert os.listdir(outside) == []
    assert {"wrote", "link"} <= outcomes  # the race was really run: writes met both


@needs_bwrap
def test_a_link_planted_by_run_command_is_not_followed_later(tmp_path):
    """Turn 1: the model runs `ln -s /etc evil`. Later turns try to write and read through it."""
    passwd = hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest()

    async def main():
        async with Workspace(tmp_path / "ws") as ws:
            planted = await ws.run_command("ln -s /etc evil && ln -s /etc/passwd pw && "
                                           "ln -s / root && ls -l")
            outs = [await ws.execute(ToolCall("c", n, a)) for n, a in [
                ("write_file", {"path": "evil/x", "content": "pwned"}),
                ("read_file", {"path": "evil/passwd"}),
                ("list_dir", {"path": "evil"}),
                ("edit_file", {"path": "pw", "old": "root", "new": "toor"}),
                ("write_file", {"path": "pw", "content": "pwned"}),
                ("read_file", {"path": "pw"}),
                ("write_file", {"path": "root/tmp/x", "content": "pwned"}),
            ]]
            return planted, outs

    planted, outs = asyncio.run(main())
    assert "evil -> /etc" in planted
    for r in outs:
        assert r.is_error and "is a symbolic link (to /" in r.content, r.content
    assert not os.path.exists("/etc/x") and not os.path.exists("/tmp/x")
    assert hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest() == passwd


# -- special files -------------------------------------------------------------------------------
@needs_bwrap
def test_a_fifo_made_by_run_command_does_not_hang_a_read(tmp_path):
    async def main():
        async with Workspace(tmp_path / "ws") as ws:
            await ws.run_command("mkfifo pipe")
            return ws

    ws = asyncio.run(main())
    assert stat.S_ISFIFO(os.lstat(tmp_path / "ws" / "pipe").st_mode)
    started = time.monotonic()
    assert_refused(ws, "pipe", "pipe is a named pipe, not a regular file",
                   tools=("read_file", "write_file", "edit_file"))
    assert time.monotonic() - started < 2
    assert "pipe  (named pipe)" in call(ws, "list_dir").content


def test_a_fifo_swapped_in_after_the_check_does_not_hang_either(box, tmp_path):
    """The open is non-blocking and fstat decides: even a FIFO that appears between the lstat
    and the open is refused at once (simulated by making the lstat see a regular file)."""
    from tao.workspace import safe_path

    os.mkfifo(tmp_path / "ws" / "pipe")
    real = safe_path.lstat_at
    calls = []

    def first_looks_regular(dfd, name):
        calls.append(name)
        return os.stat(tmp_path / "ws" / "index.html") if len(calls) == 1 else real(dfd, name)

    call(box, "write_file", path="index.html", content="x")
    safe_path.lstat_at = first_looks_regular
    try:
        started = time.monotonic()
        r = call(box, "read_file", path="pipe")
    finally:
        safe_path.lstat_at = real
    assert time.monotonic() - started < 2
    assert r.is_error and "named pipe" in r.content


def test_a_socket_is_refused(box, tmp_path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "ws" / "agent.sock"))
    try:
        assert_refused(box, "agent.sock", "agent.sock is a socket",
                       tools=("read_file", "write_file", "edit_file"))
    finally:
        s.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device file needs root")
def test_a_device_file_is_refused(box, tmp_path):
    os.mknod(tmp_path / "ws" / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero
    assert_refused(box, "zero", "zero is a device file",
                   tools=("read_file", "write_file", "edit_file"))
    assert stat.S_ISCHR(os.lstat(tmp_path / "ws" / "zero").st_mode)  # left as it was


def test_a_file_in_the_middle_of_a_path(box):
    call(box, "write_file", path="index.html", content="x")
    assert_refused(box, "index.html/x", "index.html is a file, not a folder")


def test_a_folder_is_not_a_file(box):
    call(box, "write_file", path="css/style.css", content="x")
    assert_refused(box, "css", "css is a folder: use list_dir",
                   tools=("read_file", "write_file", "edit_file"))


def test_missing_files_say_how_to_look(box):
    assert_refused(box, "nope.js", "nope.js does not exist; list_dir shows",
                   tools=("read_file", "edit_file"))
    assert_refused(box, "nope/x.js", "nope does not exist", tools=("read_file", "list_dir"))


# -- sizes and counts ----------------------------------------------------------------------------
def test_over_size_content_is_refused_and_nothing_is_written(box, tmp_path):
    big = "x" * ((1 << 20) + 1)
    r = call(box, "write_file", path="big.txt", content=big)
    assert r.is_error and "too large (1048577 bytes); one write may be at most 1048576" in r.content
    assert os.listdir(tmp_path / "ws") == []
    wide = "好" * 400_000  # 1.2 MB in UTF-8 though only 400,000 characters
    r = call(box, "write_file", path="zh.txt", content=wide)
    assert "too large (1200000 bytes)" in r.content
    assert not call(box, "write_file", path="ok.txt", content="x" * (1 << 20)).is_error


def test_a_file_too_large_to_read_says_what_to_use(tmp_path):
    ws = Workspace(tmp_path, sandbox=False, max_read_bytes=1000)
    (tmp_path / "log.txt").write_text("x\n" * 600)
    r = call(ws, "read_file", path="log.txt")
    assert r.is_error and "too large (1200 bytes)" in r.content and "head or grep" in r.content


def test_too_many_files_is_refused(tmp_path):
    ws = Workspace(tmp_path, sandbox=False, max_files=3)
    assert not call(ws, "write_file", path="a/b.txt", content="1").is_error  # a folder and a file
    assert not call(ws, "write_file", path="c.txt", content="1").is_error
    r = call(ws, "write_file", path="d.txt", content="1")
    assert r.is_error and "at most 3 files and folders" in r.content
    assert not call(ws, "write_file", path="c.txt", content="2").is_error  # replacing is fine
    assert sorted(os.listdir(tmp_path)) == ["a", "c.txt"]


# -- content that is not text --------------------------------------------------------------------
def test_non_utf8_content_is_read_with_a_note_and_not_edited(box, tmp_path):
    (tmp_path / "ws" / "latin1.txt").write_bytes(b"caf\xe9 cr\xe8me\n")
    r = call(box, "read_file", path="latin1.txt")
    assert not r.is_error
    assert "caf\ufffd cr\ufffdme" in r.content and "not valid UTF-8: 2 bytes" in r.content
    e = call(box, "edit_file", path="latin1.txt", old="caf", new="tea")
    assert e.is_error and "not valid UTF-8 text" in e.content
    assert (tmp_path / "ws" / "latin1.txt").read_bytes() == b"caf\xe9 cr\xe8me\n"


def test_binary_content_is_refused(box, tmp_path):
    (tmp_path / "ws" / "a.out").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    r = call(box, "read_file", path="a.out")
    assert r.is_error and "a.out is a binary file" in r.content


def test_names_that_are_not_utf8_are_listed_escaped(box, tmp_path):
    name = os.path.join(os.fsencode(tmp_path / "ws"), b"bad\xffname")
    os.close(os.open(name, os.O_CREAT | os.O_WRONLY))
    text = call(box, "list_dir").content
    assert "bad\\xffname  (file, 0 bytes) (name is not valid UTF-8)" in text
    text.encode("utf-8")  # the observation itself is clean text
