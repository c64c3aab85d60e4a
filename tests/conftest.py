"""Shared fixtures: the seed calculator tasks, read from the shared data folder (never copied here)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

# A suite started in the background by a non-interactive shell (`nohup ... &`, some CI runners)
# inherits SIGINT ignored, and so would every process it starts: the Ctrl-C tests would then test
# nothing. Python's own handler back, for this process and (as SIG_DFL after exec) its children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _seed_path() -> Path:
    """$TAO_SEED_TASKS, else the shared data folder beside the checkout (../shared/data)."""
    if os.environ.get("TAO_SEED_TASKS"):
        return Path(os.environ["TAO_SEED_TASKS"])
    beside = Path(__file__).resolve().parents[2] / "shared" / "data" / "calculator_tasks.jsonl"
    return beside if beside.is_file() else Path("/work/shared/data/calculator_tasks.jsonl")


SEED_TASKS = _seed_path()


def _load_tasks() -> dict[str, dict]:
    with SEED_TASKS.open(encoding="utf-8") as f:
        return {t["id"]: t for t in map(json.loads, filter(str.strip, f))}


@pytest.fixture(scope="session")
def seed_tasks() -> dict[str, dict]:
    """The seed calculator tasks by id ("seed-1-zh", ...). Without the file the test is skipped,
    except where ``TAO_REQUIRE_SEED=1`` (``.ci/run``): there it fails, so a CI machine that lost
    the shared data folder cannot stay green by skipping every seed test."""
    if not SEED_TASKS.is_file():
        missing = f"seed data not found: {SEED_TASKS} (set TAO_SEED_TASKS to its path)"
        if os.environ.get("TAO_REQUIRE_SEED") == "1":
            pytest.fail(f"TAO_REQUIRE_SEED=1 but {missing}", pytrace=False)
        pytest.skip(missing)
    return _load_tasks()


SEED_IDS = ["seed-1-zh", "seed-2-zh", "seed-3-zh", "seed-1-en", "seed-2-en", "seed-3-en"]


@pytest.fixture(scope="session")
def seed_questions(seed_tasks) -> list[dict]:
    """The six seed questions (three tasks, zh and en), in order."""
    return [seed_tasks[i] for i in SEED_IDS]


@pytest.fixture(scope="session")
def local_model():
    """The embedded model, loaded once for every ``local_model`` test of the session."""
    from tao.models.local import LocalModel

    return LocalModel()


@pytest.fixture(autouse=True)
def _own_endpoint_facts(tmp_path, monkeypatch):
    """What an endpoint refused is remembered (``tao.models.endpoint_facts``): each test starts
    with none, so a stand-in server on a reused port is not taken for an earlier one."""
    from tao.models import endpoint_facts

    monkeypatch.setenv("TAO_ENDPOINT_FACTS", str(tmp_path / "endpoints.json"))
    endpoint_facts.forget()
    yield
    endpoint_facts.forget()


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path_factory, monkeypatch):
    """The CLI writes its audit log (and chat history) in the user data directory: in tests,
    a fresh one, never the real ``~/.local/share/tao``."""
    if "TAO_DATA_DIR" not in os.environ:
        monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path_factory.mktemp("data")))


# -- PostgreSQL, for the tests that need one (memory store, sessions) ----------------------------

@pytest.fixture(scope="module")
def pg_url():
    """A server of the module's own, in a folder outside pytest's numbered temporary folders
    (another pytest session on the machine may remove those while this one runs)."""
    import pgserver

    folder = tempfile.mkdtemp(prefix="tao-pg-")
    # As root, pgserver opens every folder above its data and its own install (o+rx) so that its
    # user can reach them - /root included. Put the modes back: other tests (the subprocess
    # sandbox's) rely on a home that others cannot read.
    modes = _ancestor_modes(folder, os.path.dirname(pgserver.__file__))
    try:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        yield server.get_uri()
        server.cleanup()
    finally:
        for path, mode in modes.items():
            os.chmod(path, mode)
        shutil.rmtree(folder, ignore_errors=True)


def _ancestor_modes(*paths: str) -> dict[str, int]:
    modes = {}
    for path in paths:
        path = os.path.abspath(path)
        while True:
            modes.setdefault(path, os.stat(path).st_mode & 0o7777)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    return modes


@pytest.fixture
def browser():
    """Chromium for the page checks of the workspace (``tao.workspace.page``); CI has one
    (.ci/run), and with TAO_REQUIRE_BROWSER=1 a missing one fails instead of skipping."""
    from tao.workspace import page as workspace_page

    if workspace_page.chromium() is None:
        if os.environ.get("TAO_REQUIRE_BROWSER") == "1":
            pytest.fail("TAO_REQUIRE_BROWSER=1 but no Chromium", pytrace=False)
        pytest.skip("no Chromium here (apt-get install -y chromium)")
