"""The tables of an adaptune results database (SQLAlchemy Core, portable across SQLite and PostgreSQL).

One measurement row per (device, problem, input, configuration): the UNIQUE constraint is what makes
writes idempotent and lets an interrupted tuning run resume from what it already measured.
"""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 1
"""Bumped whenever a table changes shape; a database with a newer version is refused, not guessed at."""

metadata = sa.MetaData()

schema_info = sa.Table(
    "adaptune_schema",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

devices = sa.Table(
    "devices",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("platform", sa.String(256), nullable=False),
    sa.Column("driver", sa.String(256), nullable=False, default=""),
    sa.Column("properties", sa.JSON, nullable=False),
    sa.UniqueConstraint("name", "platform", "driver", name="uq_device"),
)

problems = sa.Table(
    "problems",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("source_hash", sa.String(128), nullable=False),
    sa.Column("space", sa.JSON, nullable=False),
    sa.UniqueConstraint("name", "source_hash", name="uq_problem"),
)

inputs = sa.Table(
    "inputs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id", ondelete="CASCADE"), nullable=False),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("features", sa.JSON, nullable=False),
    sa.UniqueConstraint("problem_id", "name", name="uq_input"),
)

measurements = sa.Table(
    "measurements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id", ondelete="CASCADE"), nullable=False),
    sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id", ondelete="CASCADE"), nullable=False),
    sa.Column("input_id", sa.Integer, sa.ForeignKey("inputs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("config_key", sa.Text, nullable=False),  # canonical JSON of the config, sorted keys
    sa.Column("config", sa.JSON, nullable=False),  # the config in parameter order, as given
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("time_ms", sa.Float, nullable=True),  # NULL stands for inf (every failure)
    sa.Column("samples", sa.JSON, nullable=False),
    sa.Column("compile_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("verify_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("benchmark_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("observers", sa.JSON, nullable=False),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Column("timestamp", sa.Float, nullable=False),
    sa.UniqueConstraint("device_id", "problem_id", "input_id", "config_key", name="uq_measurement"),
)
sa.Index("ix_measurements_problem", measurements.c.problem_id, measurements.c.status)

TABLE_NAMES = frozenset(metadata.tables)
