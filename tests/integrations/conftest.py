"""A fresh store and working directory per Kernel Tuner drop-in test, and vector_add's arguments."""

from __future__ import annotations

import numpy as np
import pytest

from adaptune.integrations import kernel_tuner as drop_in


@pytest.fixture
def kt_env(tmp_path, monkeypatch):
    """Each test gets its own store and working directory; racing off so every repeat is kept."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(drop_in, "settings", drop_in.DropInSettings(db=str(tmp_path / "adaptune.db"),
                                                                     discard_factor=None, timeout_s=60.0))
    return tmp_path


@pytest.fixture
def vector_args():
    size = 1000
    rng = np.random.default_rng(0)
    a = rng.random(size, dtype=np.float32)
    b = rng.random(size, dtype=np.float32)
    return size, [np.zeros_like(a), a, b, np.int32(size)], a + b
