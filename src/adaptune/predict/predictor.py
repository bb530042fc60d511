"""``launch_config``: a block shape for a CUDA kernel from its source, before any measurement.

The model is a random forest trained on first use from the committed H100 table
(``data/lscat_h100``: features + timings; no pickled model is shipped or loaded), so a prediction costs
one training (a few seconds) per process, then a feature extraction (and an NVRTC compile to PTX when
cuda-python's NVRTC is installed).
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.predict import corpus, features, model

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "lscat_h100"
BLOCK_NAMES = ("block_size_x", "block_size_y")


class PredictDataError(FileNotFoundError):
    """The training table is missing (adaptune installed without its data/ folder)."""


@lru_cache(maxsize=4)
def _trained(data_dir: str, use_ptx: bool) -> tuple[Any, tuple[str, ...]]:
    d = Path(data_dir)
    for f in ("features.csv.gz", "rows.csv.gz"):
        if not (d / f).exists():
            raise PredictDataError(f"launch_config needs {d / f} (the LS-CAT H100 table; see docs/predict.md)")
    feats: dict[str, dict[str, float]] = {}
    with gzip.open(d / "features.csv.gz", "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            k = r.pop("kernel")
            r.pop("repo", None)
            feats[k] = {n: float(v) for n, v in r.items() if v != ""}
    prefixes = ("src_", "par_", "ptx_") if use_ptx else ("src_", "par_")
    names = tuple(sorted({n for f in feats.values() for n in f if n.startswith(prefixes)}))
    clean = None
    if (d / "kernels.csv").exists():
        with open(d / "kernels.csv", newline="") as fh:
            clean = {r["kernel"] for r in csv.DictReader(fh) if r["status"] == "ok"}
    s = model.build_samples(model.load_rows(d / "rows.csv.gz"), kernels=clean)
    x = model.feature_matrix(s, feats, names)
    return model.make_model("forest", seed=0).fit(x, s.perf), names


def kernel_features(source: str, name: str, use_ptx: bool) -> dict[str, float]:
    """Source features (and PTX instruction mix when ``use_ptx``) of one kernel in ``source``."""
    f = features.source_features(source, corpus.params_from_source(source, name))
    if use_ptx:
        from adaptune.predict import nvrtc

        f.update(features.ptx_features(nvrtc.compile_source(source, name, "ptx").decode()))
    return f


def _size_from_args(args: Sequence[Any] | None) -> int:
    """LS-CAT's matrix side equivalent to the largest array argument (n elements ~ size^2)."""
    n = max((int(getattr(a, "size", 0) or 0) for a in (args or ())), default=0)
    return int(min(max(math.sqrt(n), corpus.LSCAT_SIZES[0]), corpus.LSCAT_SIZES[-1])) if n else 1016


def shape_scores(source: str, name: str, args: Sequence[Any] | None = None, *, size: int | None = None,
                 data_dir: str | Path | None = None, use_ptx: bool | None = None) -> np.ndarray:
    """The forest's predicted relative performance (min/time, 1 = best) of each of LS-CAT's 20 shapes
    (``corpus.SHAPES`` order) for kernel ``name`` in CUDA ``source``: the model's ranking of the shapes."""
    if use_ptx is None:
        try:
            feats = kernel_features(source, name, True)
            use_ptx = True
        except Exception:  # noqa: BLE001 - no NVRTC here or the text needs defines: source features only
            feats, use_ptx = kernel_features(source, name, False), False
    else:
        feats = kernel_features(source, name, use_ptx)
    forest, names = _trained(str(data_dir or DATA_DIR), bool(use_ptx))
    x = np.array([[*(feats.get(n, 0.0) for n in names), math.log2(size or _size_from_args(args))]])
    return np.asarray(forest.predict(x)[0], dtype=float)


def launch_config(source: str, name: str, args: Sequence[Any] | None = None, *, size: int | None = None,
                  data_dir: str | Path | None = None, use_ptx: bool | None = None) -> tuple[int, int]:
    """Predicted thread-block shape ``(bx, by)`` for kernel ``name`` in CUDA ``source``.

    ``args`` (arrays with ``.size``) or ``size`` give the problem scale; kernels that never read a
    ``.y`` index get a 1-D shape ``(threads, 1)``. ``use_ptx`` None: use PTX features when NVRTC
    compiles the source here.
    """
    perf = shape_scores(source, name, args, size=size, data_dir=data_dir, use_ptx=use_ptx)
    bx, by = corpus.SHAPES[int(np.argmax(perf))]
    return (bx, by) if corpus.is_2d(source) else (bx * by, 1)


def first_config(space: Any, shape: tuple[int, int], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The valid configuration of ``space`` nearest to ``shape`` in block_size_x/y (threads first, then
    aspect), with every other parameter as in ``base`` (default: the space's default or first config)."""
    names = [n for n in BLOCK_NAMES if n in space.names]
    if not names:
        raise ValueError(f"space has no block-size parameters {BLOCK_NAMES}; parameters are {space.names}")
    if base is None:
        i = space.default_index()
        base = space.config(i if i is not None else 0)
    want_t = math.log2(shape[0] * (shape[1] if "block_size_y" in names else 1))
    best, best_key = None, None
    for c in space.configs():
        if any(c[k] != v for k, v in base.items() if k not in names):
            continue
        t = c["block_size_x"] * c.get("block_size_y", 1)
        key = (abs(math.log2(t) - want_t), abs(math.log2(c["block_size_x"]) - math.log2(shape[0])))
        if best_key is None or key < best_key:
            best, best_key = c, key
    return best if best is not None else dict(base)


def with_predicted_default(space: Any, shape: tuple[int, int]) -> Any:
    """A copy of ``space`` whose defaults are :func:`first_config` (other defaults kept)."""
    d = space.to_dict()
    d["defaults"] = {**d.get("defaults", {}), **first_config(space, shape)}
    return type(space).from_dict(d)
