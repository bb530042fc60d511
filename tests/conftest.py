"""Fixtures shared by test modules."""

from __future__ import annotations

import itertools
import os

import pytest


@pytest.fixture(scope="module")
def lang_runtime():
    """adaptune.numpy on a real device for one test module: OpenCL (PoCL in CI), or the device named by
    ADAPTUNE_LANG_TEST_DEVICE ("cuda" runs the same tests through NVRTC)."""
    from adaptune.lang import session
    from adaptune.lang.runtime import Runtime

    session.use_runtime(Runtime(os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")))
    yield
    session.use_runtime(None)


@pytest.fixture(scope="session")
def pg(tmp_path_factory):
    """One real PostgreSQL server for the session (pgserver, else Debian's postgresql); each test that asks
    for ``pg_url`` gets its own database in it."""
    pytest.importorskip("psycopg")
    from adaptune.distributed import local_postgres
    from adaptune.distributed.postgres import PostgresUnavailable

    try:
        with local_postgres(tmp_path_factory.mktemp("pg")) as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))


_db_counter = itertools.count()


@pytest.fixture
def pg_url(pg):
    """A fresh, empty database on the session's PostgreSQL server."""
    import sqlalchemy as sa

    from adaptune.store.sql import engine_url

    name = f"t{os.getpid()}_{next(_db_counter)}"
    admin = sa.create_engine(engine_url(pg), isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return str(sa.engine.make_url(pg).set(database=name).render_as_string(hide_password=False))
