"""``anp.use_device(kind, fast_math=True)``: generated kernels are built with the compiler's relaxed floating
point (checked in the real PoCL program's build options), kept apart from IEEE builds of the same text, and
still close to NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402


@pytest.fixture(autouse=True)
def restore_session():
    yield
    lang_session.use_runtime(None)


def _built_options(runtime) -> list[str]:
    cl = runtime.device.cl
    dev = runtime.device.ctx.devices[0]
    return [program.get_build_info(dev, cl.program_build_info.OPTIONS) for program in runtime.device._programs.values()]


@pytest.mark.parametrize("fast_math", [False, True])
def test_build_options_follow_the_session(fast_math):
    anp.use_device("opencl", fast_math=fast_math)
    x = np.linspace(0.1, 4.0, 1000, dtype=np.float32)
    got = anp.exp(anp.asarray(x)) / (anp.asarray(x) + 1.0)
    anp.flush()
    runtime = lang_session.session().runtime
    options = _built_options(runtime)
    assert options and all(("-cl-fast-relaxed-math" in o) == fast_math for o in options)
    np.testing.assert_allclose(got.get(), np.exp(x) / (x + 1.0), rtol=1e-5 if not fast_math else 1e-4)
