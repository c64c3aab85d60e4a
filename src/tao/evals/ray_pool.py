"""``--executor ray``: the tasks as calls on Ray actors, each holding one model.

A plain Ray task per item would load the model for every task; ``workers`` actors
(``num_cpus=1`` each) load it once and take items from an ``ActorPool`` as they free up. Ray is
started with ``ray.init()`` when it is not running (``RAY_ADDRESS`` joins a cluster) and shut
down again at the end; one started by the caller is left as it is. ``Worker.run`` is a
coroutine, so each actor is an async actor: with ``concurrency`` N the pool holds each actor N
times and every actor has up to N tasks in flight on its event loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

INSTALL_HINT = "--executor ray needs Ray: pip install 'tao-agents[ray]'"


def ray_records(worker_class: type, init: tuple[Any, ...], pending: list[tuple[str, str]],
                workers: int, concurrency: int = 1) -> Iterator[dict[str, Any]]:
    try:
        import ray
        from ray.util import ActorPool
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e
    started = not ray.is_initialized()
    if started:
        ray.init()
    actor = ray.remote(num_cpus=1)(worker_class)
    actors = [actor.remote(*init) for _ in range(workers)]
    try:
        pool = ActorPool(actors * concurrency)
        yield from pool.map_unordered(lambda a, item: a.run.remote(*item), pending)
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()
