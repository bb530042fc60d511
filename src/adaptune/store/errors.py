"""The two errors the store raises: a database it cannot use, and a file in a format it cannot read."""

from __future__ import annotations


class StoreError(RuntimeError):
    """A database that is missing, corrupt, of another program or of a newer schema; names the database."""


class FormatError(ValueError):
    """A results/input file (Kernel Tuner cache, T1, T4) that is malformed; names the file and the entry."""
