"""Measurement on many devices and machines (a Ray cluster or local devices) and a shared PostgreSQL store.

Layer: above ``store`` and ``search``, below ``tuning`` (which drives executors: ``tune(executor="ray")``).
"""

from adaptune.distributed.executor import (
    Completion,
    Executor,
    LocalExecutor,
    RayExecutor,
    device_kind,
    make_executor,
)
from adaptune.distributed.postgres import PostgresUnavailable, local_postgres, terminate_other_connections

__all__ = [
    "Completion",
    "Executor",
    "LocalExecutor",
    "PostgresUnavailable",
    "RayExecutor",
    "device_kind",
    "local_postgres",
    "make_executor",
    "terminate_other_connections",
]
