"""GP and pairwise-ranking transfer models, CV-DFS with any model, and the sources-only ceiling."""

from __future__ import annotations

import numpy as np
import pytest

from adaptune.adaptive.transfer import DeviceSpace, best_of, cv_dfs
from adaptune.adaptive.zero_shot_models import GPTransfer, PairwiseRank, ceiling, pareto_front

GRID = np.array([(a, b) for a in range(8) for b in range(8)], dtype=float)


def device(name: str, nvidia: bool, units: float, scale: float) -> DeviceSpace:
    """Synthetic space whose best ``a`` depends on the vendor only (2 on NVIDIA, 5 elsewhere)."""
    best_a = 2 if nvidia else 5
    t = scale * (1 + (GRID[:, 0] - best_a) ** 2 + 0.5 * (GRID[:, 1] - 3) ** 2)
    return DeviceSpace(name, {"vendor_nvidia": float(nvidia), "compute_units": units}, t)


SOURCES = [device("n1", True, 40, 1.0), device("n2", True, 80, 2.0), device("a1", False, 60, 1.5),
           device("a2", False, 100, 0.7)]
TARGET = device("nt", True, 120, 3.0)


@pytest.mark.parametrize("make", [lambda d: GPTransfer(d, per_source=40), lambda d: PairwiseRank(d, pairs_per_source=800)])
def test_device_feature_lets_the_model_follow_the_target(make) -> None:
    with_vendor = make(("vendor_nvidia",)).fit(GRID, SOURCES).predict(TARGET.features)
    without = make(()).fit(GRID, SOURCES).predict()
    f_with = best_of(TARGET.values, [int(np.argmin(with_vendor))])
    f_without = best_of(TARGET.values, [int(np.argmin(without))])
    assert f_with >= 0.9  # the vendor moves the optimum; the model sees it
    assert f_without < f_with  # blind to the vendor, it cannot tell which optimum applies


def test_models_refuse_misuse() -> None:
    with pytest.raises(RuntimeError):
        GPTransfer().predict()
    with pytest.raises(RuntimeError):
        PairwiseRank().predict()
    fitted = PairwiseRank(("vendor_nvidia",), pairs_per_source=200).fit(GRID, SOURCES)
    with pytest.raises(ValueError, match="device features"):
        fitted.predict()
    with pytest.raises(ValueError):
        GPTransfer(top_share=0)


def test_cv_dfs_with_a_custom_model_selects_the_feature_that_matters() -> None:
    calls: list[tuple[str, ...]] = []

    def predict(sub, rest, temp):
        calls.append(tuple(sub))
        return PairwiseRank(sub, pairs_per_source=400).fit(GRID, list(rest)).predict(temp.features)

    sources = SOURCES + [device("a3", False, 30, 1.1)]
    selected, details = cv_dfs(GRID, sources, ("vendor_nvidia", "compute_units"), max_size=1, k=1, predict=predict)
    assert selected == ["vendor_nvidia"]
    assert set(calls) == {(), ("vendor_nvidia",), ("compute_units",)}
    assert len(details["best_subsets"]) == len(sources)


def test_pareto_front() -> None:
    p = np.array([[1, 0], [0, 1], [0.5, 0.5], [0.4, 0.4], [1, 0], [0.2, 0.9]])
    assert pareto_front(p).tolist() == [0, 1, 2, 4, 5]  # [0.4, 0.4] is dominated by [0.5, 0.5]; duplicates stay


def test_ceiling_counts_what_every_source_allows() -> None:
    s1 = DeviceSpace("s1", {}, np.array([1.0, 2.0, 1.25, 10.0]))  # fractions 1, 0.5, 0.8, 0.1
    s2 = DeviceSpace("s2", {}, np.array([4.0, 1.0, 1.25, 1.0]))  # fractions 0.25, 1, 0.8, 1
    t = DeviceSpace("t", {}, np.array([1.0, 4.0, 2.0, 1.0]))  # fractions 1, 0.25, 0.5, 1
    c = ceiling(t, [s1, s2], (0.2, 0.5, 0.9))
    assert c["threshold"]["0.20"] == {"count": 3, "best": 1.0, "median": 0.5, "worst": 0.25}
    assert c["threshold"]["0.50"] == {"count": 2, "best": 0.5, "median": 0.375, "worst": 0.25}
    assert c["threshold"]["0.90"] == {"count": 0, "best": None, "median": None, "worst": None}
    assert c["pareto_count"] == 3 and c["pareto_best"] == 1.0  # (0.1, 1) is dominated by (0.5, 1)
