"""Cross-device variant selection on real labels (H100, H200, PoCL) with measured proxy features."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptune.adaptive.device_features import DeviceFeatureError, measured_features
from adaptune.adaptive.models import fraction_of_oracle
from adaptune.adaptive.transfer import PROXY_FEATURES_MEASURED, MTLSelector, p_dfs

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "transfer" / "results"
DEVICES = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200",
           "pocl": "pthread-skylake-avx512-Intel(R) Xeon(R) Processor"}  # the labels of gpu_suite_pocl_s005_raw.json
SPMV = ["csr_scalar", "csr_vector_2", "csr_vector_4", "csr_vector_8", "csr_vector_16", "csr_vector_32",
        "csr_balanced", "ell", "dia"]


# the four devices' labels of 2026-11-23 (PoCL on an AMD EPYC host), where issue 12's scaling fault showed
AMD_ROUND = {"h100": "history/gpu_suite_h100_s005_758c7ce_raw.json", "h200": "history/gpu_suite_h200_s005_758c7ce_raw.json",
             "pocl": "history/gpu_suite_pocl_amd_s005_29a7abf_raw.json",
             "pocl_basic": "history/gpu_suite_pocl_basic_amd_s005_758c7ce_raw.json"}


def _spmv(tag: str, part: str, files: dict[str, str] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    name = files[tag] if files else f"gpu_suite_{tag}_s005_raw.json"
    bench = json.loads((RESULTS / name).read_text())["benchmarks"]["spmv"]
    recs = bench[part]
    costs = np.array([[r["times_ms"][v] if r["times_ms"].get(v) is not None else np.inf for v in SPMV] for r in recs])
    runtime = costs.copy()
    for i, r in enumerate(recs):  # a refused ELL/DIA runs the fallback (csr_scalar), as at dispatch
        for j, v in enumerate(SPMV):
            if r["status"].get(v) == "constraint":
                runtime[i, j] = costs[i, 0]
    return np.array([r["model_features"] for r in recs]), costs, runtime


def test_measured_proxies_are_recorded_for_the_three_devices():
    feats = {t: measured_features(n) for t, n in DEVICES.items()}
    assert all(set(f) == {f for fs in PROXY_FEATURES_MEASURED.values() for f in fs} for f in feats.values())
    assert feats["h200"]["copy_gbs"] > feats["h100"]["copy_gbs"] > 1000 * feats["pocl"]["copy_gbs"]
    with pytest.raises(DeviceFeatureError, match="no measured proxies"):
        measured_features("Some Unknown GPU")


def test_p_dfs_votes_measured_features():
    assert p_dfs([{"MEM-BW": 5, "LAUNCH": 3, "ATOMIC": 0}], proxy_features=PROXY_FEATURES_MEASURED,
                 per_input=2) == ["copy_gbs", "launch_us"]
    assert p_dfs([{"ATOMIC": 5, "SH-MEM-BW": 4}] * 3, proxy_features=PROXY_FEATURES_MEASURED) == [
        "atomic_contended_gops", "atomic_spread_gops"]


def test_mtl_with_measured_proxies_separates_a_cpu_from_a_gpu():
    """SpMV labels of the H200 and PoCL (same inputs), target the H100: the plain union of the two sources
    averages a GPU's and a CPU's best kernels; with the measured copy bandwidth and launch latency
    appended, the model tells them apart and the H100 gets the GPU's choices."""
    feats = {t: measured_features(n) for t, n in DEVICES.items()}
    x_test, _, rt_test = _spmv("h100", "test")
    sources = [(_spmv(t, "train")[0], _spmv(t, "train")[1], feats[t]) for t in ("h200", "pocl")]
    plain = MTLSelector((), kind="svm").fit(sources).predict(x_test, feats["h100"])
    proxies = MTLSelector(("copy_gbs", "launch_us"), kind="svm").fit(sources).predict(x_test, feats["h100"])
    f_plain = float(np.nanmean(fraction_of_oracle(rt_test, plain)))
    f_proxies = float(np.nanmean(fraction_of_oracle(rt_test, proxies)))
    assert f_proxies > 0.9 and f_proxies > f_plain + 0.1


def test_mtl_picks_a_cpu_target_from_the_cpu_source_when_one_is_among_the_sources():
    """Issue 12 (four devices): SpMV, target PoCL pthread, sources H100, H200 and PoCL basic. The log2 device
    block must keep one unit (a factor 2) across features: scaled per feature, launch latency (2.9-5.1 us over
    the sources) weighed as much as copy bandwidth (0.26-2,945 GB/s) and the pthread CPU (7.1 us) landed
    nearer the GPUs, picking csr_vector kernels (0.37 of its oracle). With one range for the block it is
    nearest the other CPU and picks like it."""
    dev = dict(DEVICES, pocl="pthread-AMD EPYC", pocl_basic="basic-AMD EPYC")
    feats = {t: measured_features(n) for t, n in dev.items()}
    x_test, _, rt_test = _spmv("pocl", "test", AMD_ROUND)
    sources = [(_spmv(t, "train", AMD_ROUND)[0], _spmv(t, "train", AMD_ROUND)[1], feats[t])
               for t in ("h100", "h200", "pocl_basic")]
    pdfs = ("copy_gbs", "launch_us")
    shared = MTLSelector(pdfs, kind="svm").fit(sources).predict(x_test, feats["pocl"])
    per_feature = MTLSelector(pdfs, kind="svm", device_scale="per_feature").fit(sources).predict(x_test, feats["pocl"])
    f_shared = float(np.nanmean(fraction_of_oracle(rt_test, shared)))
    f_per_feature = float(np.nanmean(fraction_of_oracle(rt_test, per_feature)))
    assert f_shared > 0.9 and f_shared > f_per_feature + 0.3


def test_shared_scale_gives_a_column_group_one_range():
    from sklearn.preprocessing import MinMaxScaler

    from adaptune.adaptive.models import share_ranges

    x = np.array([[0.0, 10.0, 1.0], [1.0, 12.0, 2.0], [4.0, 11.0, 5.0]])
    sc = share_ranges(MinMaxScaler((-1, 1)).fit(x), [(1, 2)])
    xs = sc.transform(x)
    assert np.allclose(xs[:, 0], [-1, -0.5, 1])  # outside the group: its own range
    assert np.allclose(xs[:, 1], [-1, 0, -0.5])  # range 2 of the widest's 4: spans half of [-1, 1]
    assert np.allclose(xs[:, 2], [-1, -0.5, 1])  # the widest column spans [-1, 1]
    shifted = x + np.array([0.0, 10.0, 0.0])  # another unit of column 1 (log2: an offset) changes nothing
    assert np.allclose(share_ranges(MinMaxScaler((-1, 1)).fit(shifted), [(1, 2)]).transform(shifted), xs)
    with pytest.raises(ValueError, match="device_scale"):
        MTLSelector(("copy_gbs",), device_scale="log")
