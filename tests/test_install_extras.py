"""Every extra the README, the docs (or an install hint in the code) names is one pyproject.toml provides,
under a name no pip has to normalise: pip 23.2.1 - a fresh ``python3.11 -m venv``'s own - reads
``.[local-1_5b]`` as not provided and installs nothing, though the metadata says ``local-1-5b``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: ".[a,b]" after pip install, or tao-agents[a,b]
_NAMED = re.compile(r"""(?:pip install[^\n`|]*?["']?\.|tao-agents)\[([A-Za-z0-9_.,\- ]+)\]""")


def extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]


def named_in(text: str) -> set[str]:
    return {name.strip() for group in _NAMED.findall(text) for name in group.split(",") if name.strip()}


def test_extras_have_names_pip_does_not_rewrite():
    for name in extras():
        assert name == re.sub(r"[-_.]+", "-", name).lower(), (
            f"extra {name!r} is normalised to {re.sub(r'[-_.]+', '-', name).lower()!r} by newer "
            "pips and not found by pip 23.2.1: give it that name")


def test_every_extra_the_readme_and_the_code_name_exists():
    provided = set(extras())
    sources = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md")),
               *sorted((ROOT / "src").rglob("*.py"))]
    for path in sources:
        missing = named_in(path.read_text("utf-8")) - provided
        assert not missing, f"{path.relative_to(ROOT)} names extras pyproject.toml lacks: {missing}"
    assert named_in((ROOT / "README.md").read_text("utf-8")), "the README names no extra at all?"


def test_the_pattern_finds_what_a_user_would_type():
    assert named_in('pip install -e ".[local-1_5b]"  and  pip install "tao-agents[ray,eval]"') == {
        "local-1_5b", "ray", "eval"}


def test_extras_pin_exact_versions():
    for name, requirements in extras().items():
        for req in requirements:
            pin = req.split(";")[0].strip()  # an environment marker may follow the pin
            assert re.fullmatch(r"[A-Za-z0-9_.\-]+(\[[a-z,]+\])?==[0-9][0-9A-Za-z.]*", pin), f"{name}: {req}"
