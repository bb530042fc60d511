"""Plain function calls fanned out over a Ray cluster: labelling (inputs x variants) and other batch work.

The calls run on long-lived actors (``ray.util.ActorPool``), not one Ray task each: a GPU task's worker
process exits after every call (Ray's ``max_calls=1`` for GPU tasks), so each item would pay a fresh CUDA
context, imports and kernel compiles; an actor pays them once. One actor per GPU when ``num_gpus=1``.
Ray restarts an actor whose process dies and runs the interrupted call again (``max_restarts``), so a killed
worker costs time, not an item. Results come back as they finish; the caller (the driver) stores them, so
the store stays the one writer's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any


class _Caller:
    """The actor: calls ``fn`` on items; what ``fn`` caches in its process (modules, contexts) lives on."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def call(self, position: int, item: tuple[Any, ...]) -> tuple[int, Any]:
        return position, self.fn(*item)


def ray_map(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], *, address: str | None = None,
            num_cpus: float = 1, num_gpus: float | None = 0, n_workers: int | None = None,
            max_restarts: int = 3) -> Iterator[tuple[int, Any]]:
    """``fn(*item)`` for every item on Ray actors; yields ``(position, result)`` in the order they finish.

    ``num_gpus``: GPUs per actor (None: 1 when the cluster has GPUs, else 0). ``n_workers``: actors
    (default: as many as the cluster can place, at most one per item).
    """
    try:
        import ray
        from ray.util import ActorPool
    except ImportError as exc:
        raise ImportError("distributed labelling needs ray: pip install 'adaptune[distributed]'") from exc
    if not items:
        return
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    have = ray.cluster_resources()
    if num_gpus is None:
        num_gpus = 1.0 if have.get("GPU", 0) >= 1 else 0.0
    if n_workers is None:
        fit = [have.get("CPU", 1) / num_cpus if num_cpus else len(items)]
        if num_gpus:
            fit.append(have.get("GPU", 0) / num_gpus)
        n_workers = min(len(items), int(min(fit)))
    if n_workers < 1:
        raise RuntimeError(f"the Ray cluster cannot place a worker with {num_cpus} CPU and {num_gpus} GPU "
                           f"(resources: {have})")
    actor = ray.remote(_Caller).options(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=max_restarts,
                                        max_task_retries=max_restarts)
    fn_ref = ray.put(fn)
    actors = [actor.remote(fn_ref) for _ in range(n_workers)]
    try:
        pool = ActorPool(actors)
        yield from pool.map_unordered(lambda a, pi: a.call.remote(*pi), list(enumerate(items)))
    finally:
        for a in actors:
            ray.kill(a, no_restart=True)
