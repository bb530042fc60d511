"""adaptune as a drop-in for ``triton.autotune``: swap the import, keep the kernel.

``from adaptune import triton as at`` then ``@at.autotune(configs=..., key=[...])``; see the README's
"Autotune a Triton kernel" and ``docs/INTERFACES.md``. Needs Triton (``pip install 'adaptune[triton]'``).
"""

from __future__ import annotations

try:
    import triton as _triton  # noqa: F401
except ImportError as exc:  # the one optional dependency of this package
    raise ImportError("adaptune.triton needs Triton: pip install 'adaptune[triton]'") from exc

from triton import Config

from adaptune.integrations.triton.ahead import import_triton_cache, tune_ahead
from adaptune.integrations.triton.autotuner import (
    POLICIES,
    AutotuneError,
    Autotuner,
    TuneSettings,
    TuneStats,
    autotune,
)

__all__ = ["POLICIES", "AutotuneError", "Autotuner", "Config", "TuneSettings", "TuneStats", "autotune",
           "import_triton_cache", "tune_ahead"]
