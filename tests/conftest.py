"""Fixtures shared by test modules."""

from __future__ import annotations

import os

import pytest

from adaptune.backends.opencl import NoUsableDeviceError, select_device


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, failing, when no OpenCL device here can compile: a broken set-up, never a pass, and one
    message instead of hundreds of identical build errors (issue 28)."""
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return  # the suite's OpenCL tests skip themselves without PyOpenCL
    try:
        select_device(None)
    except NoUsableDeviceError as exc:
        pytest.exit(f"adaptune tests: {exc}", returncode=3)


@pytest.fixture(scope="module")
def lang_runtime():
    """adaptune.numpy on a real device for one test module: OpenCL (PoCL in CI), or the device named by
    ADAPTUNE_LANG_TEST_DEVICE ("cuda" runs the same tests through NVRTC)."""
    from adaptune.lang import session
    from adaptune.lang.runtime import Runtime

    session.use_runtime(Runtime(os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")))
    yield
    session.use_runtime(None)
