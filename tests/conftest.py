"""Fixtures shared by test modules."""

from __future__ import annotations

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
