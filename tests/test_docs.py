"""The examples of README.md and docs/ cannot rot: every Python block runs, every `tao` command
of a bash or console block names a command and options that exist, and the built site has no
broken link or anchor.

Python blocks of one page run in order in one namespace, like a notebook, in a fresh folder of
their own (the data directory there too). A block that builds ``LocalModel()`` or
``OpenAIModel(...)`` gets a ``ScriptedModel`` instead, replaying the replies the HTML comment just
above the block names: ``<!-- test: scripts=[[tool_call("calculator", ...), "42"], ...] -->``,
one list per model the block builds, in order. A block that cannot run here (a PostgreSQL server,
a network service) says so: ``<!-- test: skip the reason -->``. A ``text`` block marked
``<!-- test: prints -->`` is what the Python block before it prints, and must stay so.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

FENCE = re.compile(r"^(?P<indent>[ ]{0,8})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
DIRECTIVE = re.compile(r"<!--\s*test:\s*(?P<body>.*?)\s*-->", re.DOTALL)


@dataclass
class Block:
    path: Path
    line: int                     # 1-based line of the opening fence
    lang: str
    code: str
    directive: str = ""           # the body of a <!-- test: ... --> comment just above
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, indented ones (in lists) included."""
    lines = path.read_text("utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"].strip()
        lang = info.split()[0].lower() if info else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) <= {fence[0]}:
                break
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        directive = ""
        if k >= 0 and lines[k].strip().endswith("-->"):
            start = k
            while start > 0 and "<!--" not in lines[start]:
                start -= 1
            d = DIRECTIVE.search("\n".join(lines[start:k + 1]))
            directive = d["body"] if d else ""
        found.append(Block(path, i + 1, lang, "\n".join(body) + "\n", directive))
        i = j + 1
    return found


def python_pages() -> list[Path]:
    return [p for p in PAGES if any(b.lang in ("python", "py") for b in blocks(p))]


# ---------------------------------------------------------------- Python blocks run

class ScriptsUsedUp(AssertionError):
    pass


def run_page(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tao
    import tao.models.local
    import tao.models.openai

    monkeypatch.chdir(tmp_path)
    for var in ("TAO_DATA_DIR", "XDG_DATA_HOME", "TAO_CACHE_DIR"):
        monkeypatch.setenv(var, str(tmp_path / ".data"))
    monkeypatch.setenv("TAO_KV_CACHE", "0")
    for var in ("TAO_BASE_URL", "TAO_API_KEY", "TAO_MODEL", "OPENAI_API_KEY", "DEEPSEEK_API_KEY",
                "TAO_TRACING", "TAO_JOURNAL", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)

    queue: list[list] = []

    def scripted(*_args, **_kwargs):
        if not queue:
            raise ScriptsUsedUp("this block builds a model but its <!-- test: scripts=[...] --> "
                                "comment gives no (more) replies for it")
        return tao.ScriptedModel(queue.pop(0))

    monkeypatch.setattr(tao.models.local, "LocalModel", scripted)
    monkeypatch.setattr(tao.models.openai, "OpenAIModel", scripted)
    module = types.ModuleType("docs_page")   # a real module: dataclasses and pydantic look it up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    printed: str | None = None
    for block in blocks(path):
        if block.directive == "prints":
            assert printed is not None, f"{block.where}: no Python block ran before this output"
            shown = [ln.rstrip() for ln in block.code.strip("\n").splitlines()]
            got = [ln.rstrip() for ln in printed.strip("\n").splitlines()]
            assert got == shown, f"{block.where}: the block above now prints\n" + "\n".join(got)
            continue
        if block.lang not in ("python", "py"):
            continue
        if block.directive.startswith("skip"):
            assert block.directive[4:].strip(), f"{block.where}: say why the block is skipped"
            printed = None
            continue
        queue.clear()
        if block.directive.startswith("scripts="):
            queue.extend(eval(block.directive[len("scripts="):], {"tool_call": tao.tool_call}))
        elif block.directive:  # "prints" is handled above
            pytest.fail(f"{block.where}: unknown directive <!-- test: {block.directive} -->")
        out = io.StringIO()
        try:
            code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            with contextlib.redirect_stdout(out):
                if code.co_flags & inspect.CO_COROUTINE:
                    asyncio.run(eval(code, namespace))
                else:
                    exec(code, namespace)  # noqa: S102 - running the docs' examples is the point
        except BaseException as e:  # a SystemExit in an example is a failure too
            raise AssertionError(f"the block at {block.where} failed: {type(e).__name__}: {e}") from e
        assert not queue, f"{block.where}: {len(queue)} scripted model(s) were never built"
        printed = out.getvalue()


@pytest.mark.parametrize("path", python_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_page(path, tmp_path, monkeypatch)


def test_a_broken_block_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    page.write_text('Text.\n\n<!-- test: scripts=[["7"]] -->\n```python\nfrom tao import LocalModel, '
                    'ReActAgent\nassert ReActAgent(LocalModel()).run("x").answer == "8"\n```\n', "utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError, match=r"page.md:4 failed: AssertionError"):
        run_page(page, tmp_path, monkeypatch)


# ---------------------------------------------------------------- commands exist

def cli_commands() -> dict[str, set[str]]:
    """'run' -> its options, 'audit verify' -> its options, ... read off the click commands."""
    import typer.main

    from tao.cli import app

    out: dict[str, set[str]] = {}

    def walk(prefix: str, cmd) -> None:
        sub = getattr(cmd, "commands", None)
        if sub:
            out[prefix] = {"--help"}
            for name, c in sub.items():
                walk(f"{prefix} {name}".strip(), c)
        else:
            out[prefix] = {"--help", *(o for p in cmd.params for o in (*p.opts, *p.secondary_opts))}

    walk("", typer.main.get_command(app))
    return out


def command_lines(block: Block) -> list[str]:
    """The shell lines of a bash block, or the `$ `-prompted lines of a console block."""
    text = block.code.replace("\\\n", " ")
    lines = text.splitlines()
    if block.lang == "console":
        return [ln[2:] for ln in lines if ln.startswith("$ ")]
    return [ln for ln in lines if ln.strip()]


def tao_argv(line: str) -> list[str] | None:
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words.pop(0)                                  # OTEL_...=... tao run
    for i, w in enumerate(words):
        if w in ("|", "&&", ";"):
            words = words[:i]
            break
    return words[1:] if words and words[0] == "tao" else None


SHELL_BLOCKS = [b for p in PAGES for b in blocks(p) if b.lang in ("bash", "sh", "console", "shell")]


def test_every_tao_command_in_the_docs_exists() -> None:
    commands = cli_commands()
    problems, checked = [], 0
    for block in SHELL_BLOCKS:
        for line in command_lines(block):
            argv = tao_argv(line)
            if argv is None:
                words = shlex.split(line, comments=True) if line.strip() else []
                # a script the docs tell you to run must be there
                if (len(words) > 1 and words[0] == "python" and words[1].endswith(".py")
                        and not (ROOT / words[1]).is_file()):
                    problems.append(f"{block.where}: no such file {words[1]}")
                continue
            checked += 1
            name = ""
            rest = list(argv)
            while rest and f"{name} {rest[0]}".strip() in commands:
                name = f"{name} {rest.pop(0)}".strip()
            if not name:
                problems.append(f"{block.where}: `tao {' '.join(argv)}`: no such command")
                continue
            for w in rest:
                flag = w.split("=", 1)[0]
                if flag.startswith("-") and flag != "-" and flag not in commands[name]:
                    problems.append(f"{block.where}: `tao {name}` has no option {flag}")
    assert not problems, "\n".join(problems)
    assert checked > 20, f"only {checked} tao commands found in the docs"


# ---------------------------------------------------------------- the built site

class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and (tag != "link" or a.get("rel") in ("stylesheet",)):
                self.links.append(a[key])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists():
        if os.environ.get("TAO_REQUIRE_DOCS") == "1":
            pytest.fail("TAO_REQUIRE_DOCS=1 but mkdocs is not installed (pip install -e '.[docs]')")
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_the_site_has_no_broken_link_or_anchor(site: Path) -> None:
    pages = {p: _parse(p) for p in site.rglob("*.html")}
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith(("//", "mailto:")):
                continue
            if not parts.path:
                target = page
            elif parts.path.startswith("/"):                # 404.html links from the site's root
                target = site / unquote(parts.path).lstrip("/")
            else:
                target = (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert not broken, "\n".join(sorted(set(broken))[:50])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text("utf-8"))
    return parser


def test_every_page_is_in_both_languages() -> None:
    english = {p for p in DOCS.rglob("*.md") if not p.name.endswith(".zh.md")}
    chinese = {p for p in DOCS.rglob("*.zh.md")}
    missing = [str(p.relative_to(ROOT)) for p in english if p.with_suffix(".zh.md") not in chinese]
    orphans = [str(p.relative_to(ROOT)) for p in chinese
               if p.with_name(p.name.replace(".zh.md", ".md")) not in english]
    assert not missing and not orphans, f"no Chinese page: {missing}; no English page: {orphans}"


def test_the_readme_stays_short_and_keeps_its_three_commands() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 250
    first = next(b for b in blocks(ROOT / "README.md") if b.lang == "bash")
    assert [ln.split()[:2] for ln in first.code.splitlines() if ln.strip()] == [
        ["pip", "install"], ["tao", "run"], ["python", "-m"]]


def test_the_readme_links_into_the_docs() -> None:
    """The README is read on a forge, outside the site: its relative links must name real files."""
    readme = (ROOT / "README.md").read_text("utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    relative = [link for link in links if not urlsplit(link).scheme]
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert relative and not missing, f"the README links to files that do not exist: {missing}"


def test_the_site_in_chromium(site: Path) -> None:
    """docs/site_check.py: every page opens (no 404, no failed request, no JavaScript error), the
    search box finds English and Chinese words, the language switch keeps the page."""
    import importlib.util

    missing = ("Playwright is not installed" if importlib.util.find_spec("playwright") is None
               else None if shutil.which("chromium") else "no chromium on PATH")
    if missing:
        if os.environ.get("TAO_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TAO_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    proc = subprocess.run([sys.executable, str(DOCS / "site_check.py"), str(site)], check=False,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " pages opened" in proc.stdout


def test_every_tao_toml_in_the_docs_is_one_tao_reads(tmp_path: Path) -> None:
    """A ```toml block is a tao.toml: tao's own loader must take it (no unknown key, no bad type)."""
    from tao.factory.config import load_config

    tomls = [b for p in PAGES for b in blocks(p) if b.lang == "toml"]
    assert tomls
    for block in tomls:
        folder = tmp_path / f"{block.path.stem}-{block.line}"
        folder.mkdir()
        (folder / "tao.toml").write_text(block.code, "utf-8")
        try:
            load_config(folder)
        except Exception as e:  # noqa: BLE001 - the message names the page's line
            pytest.fail(f"{block.where}: tao does not read this tao.toml: {e}")
