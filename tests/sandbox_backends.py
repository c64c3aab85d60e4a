"""Which sandbox backends the sandbox tests run on, and what becomes of one that cannot run here.

Locally, a backend that cannot run is skipped with the probe's reason. ``TAO_REQUIRE_SANDBOX``
(comma-separated; ``.ci/run`` sets ``bwrap,limits``) turns that into failures: a listed backend
that cannot run fails each of its tests with the probe's reason, and ``limits`` makes the
whole-sandbox limit tests fail where no cgroup or size-capped workspace can be had - so a CI
machine where bwrap broke (a venv under /tmp did that once) cannot stay green by skipping.
"""

from __future__ import annotations

import os

import pytest

from tao.sandbox import KINDS, backend_problem

REQUIRED = frozenset(filter(None, os.environ.get("TAO_REQUIRE_SANDBOX", "").split(",")))


def backend_params(kinds: tuple[str, ...] = KINDS) -> list:
    """One param per backend: skipped where it cannot run, unless it is required."""
    params = []
    for kind in kinds:
        problem = backend_problem(kind)
        if problem is None or kind in REQUIRED:
            params.append(pytest.param(kind, id=kind))
        else:
            params.append(pytest.param(kind, id=kind,
                                       marks=pytest.mark.skip(reason=f"{kind}: {problem}")))
    return params


def skip_mark(kind: str) -> pytest.MarkDecorator | None:
    """The skip mark for a backend that cannot run and is not required, else ``None``."""
    problem = backend_problem(kind)
    if problem is None or kind in REQUIRED:
        return None
    return pytest.mark.skip(reason=f"{kind}: {problem}")


def ensure_backend(kind: str) -> None:
    """Fail at once (not skip) when a required backend cannot run."""
    problem = backend_problem(kind)
    if problem is not None:
        pytest.fail(f"TAO_REQUIRE_SANDBOX lists {kind}, which cannot run here: {problem}",
                    pytrace=False)


def ensure_limits(box) -> None:
    """Skip - or with ``limits`` required, fail - unless the sandbox has its own cgroup and a
    size-capped workspace."""
    missing = []
    if box.cgroup is None:
        missing.append(f"no cgroup: {box.describe()}")
    if box.workspace_bytes is None:
        missing.append(f"workspace not capped: {box.describe()}")
    if missing and "limits" in REQUIRED:
        pytest.fail("TAO_REQUIRE_SANDBOX lists limits: " + "; ".join(missing), pytrace=False)
    if missing:
        pytest.skip("; ".join(missing))
