"""The Docker backend: the worker in a locked-down container, for hosts where a daemon is running.

``--network none --read-only --cap-drop ALL --security-opt no-new-privileges --pids-limit --memory``
(swap included), a non-root user, a tmpfs ``/tmp``, the workspace bind-mounted at ``/workspace``,
no environment but ``HOME`` and ``LANG``; inside, the worker also applies the rlimits and the
socket-denying seccomp filter itself. ``docker run`` cannot pass extra file descriptors, so the
protocol and the output streams go through named pipes in a small folder mounted at ``/tao-ipc``
(the host opens its ends read-write, so no end ever sees a premature EOF; the container's death is
noticed through the ``docker run`` process instead). The image must have ``python3`` on its PATH:
``TAO_SANDBOX_DOCKER_IMAGE`` (default ``python:3.11-slim``); it is never pulled implicitly.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import subprocess
import tempfile
from typing import Any

from .base import SandboxUnavailable, format_size
from .host import WorkerSandbox, _Worker, frame
from .privileges import tasks_of_uid
from .seccomp import build_filter, supported

DEFAULT_IMAGE = "python:3.11-slim"


def _image() -> str:
    return os.environ.get("TAO_SANDBOX_DOCKER_IMAGE") or DEFAULT_IMAGE


class DockerSandbox(WorkerSandbox):
    """A worker in a Docker container (see the module docstring)."""

    kind = "docker"
    uses_cgroup = False  # the daemon makes the container's cgroup (--memory, --pids-limit)

    def __init__(self, *, image: str | None = None, **kwargs: Any):
        self._docker = shutil.which("docker")
        if self._docker is None:
            raise SandboxUnavailable("the docker CLI is not installed")
        self.image = image or _image()
        super().__init__(**kwargs)
        # root: the sandbox's own uid; otherwise the invoking user's, who owns the workspace
        self.container_uid = self.uid if self.uid is not None else os.getuid()

    def python(self) -> str:
        return "python3"

    def describe(self) -> str:
        lim = self.limits
        return (f"docker ({self.image}) · the daemon's cgroup: memory "
                f"{format_size(lim.memory_bytes)}, {lim.max_processes} processes for the "
                f"container · {self._confinement.workspace.describe()}")

    def _precompiled(self) -> bool:
        return False  # the image's Python is not ours: send the source

    def _spawn(self) -> None:
        from .host import WORKER_SOURCE

        ipc = tempfile.mkdtemp(prefix="tao-docker-ipc-")
        os.chmod(ipc, 0o755)
        fds = []
        for name, mode in (("in", 0o644), ("out", 0o622), ("stdout", 0o622), ("stderr", 0o622)):
            path = os.path.join(ipc, name)
            os.mkfifo(path)
            os.chmod(path, mode)
            fds.append(os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC))
        name = f"tao-sandbox-{secrets.token_hex(6)}"
        lim = self.limits
        uid = self.container_uid
        argv = [
            self._docker, "run", "--rm", "--name", name, "--network", "none", "--read-only",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--pids-limit", str(lim.max_processes), "--memory", str(lim.memory_bytes),
            "--memory-swap", str(lim.memory_bytes), "--user", f"{uid}:{uid}",
            "--tmpfs", f"/tmp:rw,nosuid,nodev,size={lim.tmpfs_bytes},mode=1777",
            "--mount", f"type=bind,src={self.workspace},dst=/workspace",
            "--mount", f"type=bind,src={ipc},dst=/tao-ipc",
            "--workdir", "/workspace", "--env", "HOME=/workspace", "--env", "LANG=C.UTF-8",
            "--log-driver", "none", "--pull", "never", self.image,
            "python3", "-I", "-S", "-c", WORKER_SOURCE, "--fifos", "/tao-ipc"]
        log = os.open(os.path.join(ipc, "stderr"), os.O_WRONLY | os.O_CLOEXEC)  # the CLI's errors
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                         **_docker_env()}, start_new_session=True)
        except OSError:
            for fd in fds:
                os.close(fd)
            shutil.rmtree(ipc, ignore_errors=True)
            raise
        finally:
            os.close(log)
        worker = _Worker(proc, *fds)
        worker.extra_kill = functools.partial(_kill_container, self._docker, name, ipc)
        self._install(worker, frame({"op": "init", **self._init_config()}))

    def _init_config(self) -> dict[str, Any]:
        cfg = super()._init_config()
        if self.uid is None:  # the user's own uid: RLIMIT_NPROC counts their other tasks too
            cfg["rlimits"] = self._rlimits(other_tasks=tasks_of_uid(self.container_uid))
        if supported():
            cfg["seccomp"] = build_filter()
        return cfg


def _docker_env() -> dict[str, str]:
    """Only what the docker CLI needs to find its daemon: never the host's other variables."""
    keep = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH",
            "DOCKER_TLS_VERIFY", "HOME")
    return {k: os.environ[k] for k in keep if k in os.environ}


def _kill_container(docker: str, name: str, ipc: str) -> None:
    try:
        subprocess.run([docker, "kill", name], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=20, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                        **_docker_env()})
    except (OSError, subprocess.SubprocessError):
        pass
    shutil.rmtree(ipc, ignore_errors=True)


@functools.cache
def probe() -> str | None:
    """``None`` when a Docker daemon answers and the image is present, else why not (cached)."""
    docker = shutil.which("docker")
    if docker is None:
        return "the docker CLI is not installed"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **_docker_env()}
    try:
        r = subprocess.run([docker, "image", "inspect", "--format", "{{.Id}}", _image()],
                           capture_output=True, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return f"docker did not answer: {e}"
    if r.returncode != 0:
        return (r.stderr.decode("utf-8", "replace").strip()
                or f"image {_image()} is not available (docker pull it first)")
    return None
