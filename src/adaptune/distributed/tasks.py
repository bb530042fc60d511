"""Plain function calls fanned out over a Ray cluster: labelling (inputs x variants) and other batch work.

Each item is one Ray task (``num_cpus``/``num_gpus`` each, so one per GPU when ``num_gpus=1``); Ray runs a
task again when its worker process dies (``max_retries``), so a killed worker costs time, not an item.
Results come back as they finish; the caller (the driver) stores them, so the store stays the one writer's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any


def ray_map(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], *, address: str | None = None,
            num_cpus: float = 1, num_gpus: float = 0, max_retries: int = 3) -> Iterator[tuple[int, Any]]:
    """``fn(*item)`` for every item on Ray; yields ``(position, result)`` in the order they finish."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError("distributed labelling needs ray: pip install 'adaptune[distributed]'") from exc
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(fn).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=max_retries)
    pending = {remote.remote(*item): k for k, item in enumerate(items)}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            yield pending.pop(ref), ray.get(ref)
