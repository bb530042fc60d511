"""The cached pure-Python ``broadcast_shapes`` the recorder uses agrees with NumPy's, errors included."""

from __future__ import annotations

import numpy as np
import pytest

from adaptune.lang.array import broadcast_shapes


def test_agrees_with_numpy_on_random_shapes():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        shapes = [tuple(int(d) for d in rng.choice([0, 1, 2, 3], size=rng.integers(0, 4)))
                  for _ in range(rng.integers(1, 4))]
        try:
            want = np.broadcast_shapes(*shapes)
        except ValueError:
            with pytest.raises(ValueError, match="shape mismatch"):
                broadcast_shapes(*shapes)
            continue
        assert broadcast_shapes(*shapes) == want, shapes
