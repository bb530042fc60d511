"""A throw-away PostgreSQL server on this machine, for tests, benchmarks and trying the shared store.

A team's store is a PostgreSQL server someone runs; this starts a private one in a folder so that CI and a
laptop exercise the same code path as a cluster (docs/distributed.md). It uses the server shipped on PyPI by
``pgserver`` (installed by the ``distributed`` extra) and falls back to ``initdb``/``pg_ctl`` on the PATH
(Debian's ``postgresql`` package).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa

from adaptune.store.sql import engine_url


class PostgresUnavailable(RuntimeError):
    """Neither pgserver nor a PostgreSQL installation on the PATH: install ``adaptune[distributed]``."""


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for root in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (root / name).exists():
            return str(root / name)
    return None


@contextmanager
def _system_server(folder: Path) -> Iterator[str]:
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise PostgresUnavailable("no PostgreSQL server: `pip install adaptune[distributed]` (pgserver) "
                                  "or install the postgresql package")
    data, sock = folder / "data", folder / "sock"
    sock.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # postgres refuses to run as root
        raise PostgresUnavailable("the system PostgreSQL refuses to run as root; install pgserver instead")
    subprocess.run([initdb, "-D", str(data), "-U", "postgres", "--auth=trust"], check=True,
                   capture_output=True)
    subprocess.run([pg_ctl, "-D", str(data), "-w", "-l", str(folder / "log"), "-o",
                    f"-k {sock} -c listen_addresses='' -c max_connections=200", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@/postgres?host={sock}"
    finally:
        subprocess.run([pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)


@contextmanager
def local_postgres(folder: str | Path | None = None) -> Iterator[str]:
    """Start a PostgreSQL server in ``folder`` (a fresh temporary one by default); yield its URL; stop it.

    The URL works with ``Store(url)`` from any process of this machine (a Unix socket in the folder).
    """
    own = folder is None
    path = Path(tempfile.mkdtemp(prefix="adaptune-pg-")) if own else Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    try:
        try:
            import pgserver
        except ImportError:
            with _system_server(path) as url:
                yield url
            return
        server = pgserver.get_server(path / "data", cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()
    finally:
        if own:
            shutil.rmtree(path, ignore_errors=True)


def terminate_other_connections(url: str) -> int:
    """Kill every other session on the server (``pg_terminate_backend``): what a failover or restart does.

    Used by the fault tests and benchmarks; returns how many sessions were ended.
    """
    engine = sa.create_engine(engine_url(url), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()")).all()
            conn.commit()
        return sum(1 for r in rows if r[0])
    finally:
        engine.dispose()
