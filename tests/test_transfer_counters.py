"""P-DFS intensities from the committed Nsight Compute counters (benchmarks/transfer/counters.py) and
the device study's ``--intensity counters`` option, on slices of the real files."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from adaptune.adaptive.transfer import PROXY_FEATURES_MEASURED, p_dfs
from benchmarks.transfer import counters, devices

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "transfer" / "results"
COUNTERS = RESULTS / "counters"
LAUNCH_US = 5.0


def _slice(tmp_path: Path, name: str, lines: int) -> Path:
    """The first ``lines`` lines of a committed ncu log (program output lines included), gzipped again."""
    with gzip.open(COUNTERS / name, "rt", newline="") as fh:
        head = [next(fh) for _ in range(lines)]
    out = tmp_path / name
    with gzip.open(out, "wt", newline="") as fh:
        fh.writelines(head)
    return out


@pytest.fixture(scope="module")
def committed() -> list[counters.Launch]:
    return [la for f in counters.DEFAULT_FILES for la in counters.read_launches(COUNTERS / f)]


def test_parser_reads_a_real_slice_with_program_output_and_thousands_separators(tmp_path):
    # 5 lines of the profiled program's output, the header, 20 launches x 9 metrics
    launches = counters.read_launches(_slice(tmp_path, "counters_bfs_h100.csv.gz", 6 + 20 * 9))
    assert len(launches) == 20
    assert all(set(la.metrics) == set(counters.NEEDED) | {"dram__bytes.sum",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed"} for la in launches)
    first = launches[0]
    assert (first.kernel, first.block, first.grid) == ("bfs_probe", "(256, 1, 1)", "(4, 1, 1)")
    assert first.metrics["dram__bytes.sum"] == 797_184  # "797,184" in the file
    assert first.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(0.03)


def test_every_committed_launch_has_the_metrics_the_intensities_need(committed):
    rows = 0
    for f in counters.DEFAULT_FILES:
        with gzip.open(COUNTERS / f, "rt") as fh:
            rows += sum(1 for line in fh if '"gpu__time_duration.sum"' in line)
    assert len(committed) == rows
    assert all(set(counters.NEEDED) <= set(la.metrics) for la in committed)
    benches = {counters.classify(la.kernel)[0] for la in committed}
    assert {"spmv", "histogram", "sort", "bfs"} <= benches


@pytest.mark.parametrize(("text", "match"), [
    (b"not gzip at all", "cannot read"),
    (gzip.compress(b'"a","b"\n"1","2"\n'), "no ncu --csv header"),
])
def test_bad_files_give_a_one_line_error(tmp_path, text, match):
    path = tmp_path / "bad.csv.gz"
    path.write_bytes(text)
    with pytest.raises(counters.CountersError, match=match):
        counters.read_launches(path)


def test_a_truncated_file_and_a_non_number_are_refused(tmp_path):
    good = _slice(tmp_path, "counters_bfs_h100.csv.gz", 6 + 9)
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(counters.CountersError, match="cannot read"):
        counters.read_launches(cut)
    text = gzip.decompress(good.read_bytes()).decode().replace('"797,184"', '"n/a"')
    bad = tmp_path / "nan.csv.gz"
    bad.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(counters.CountersError, match="'n/a' is not a number"):
        counters.read_launches(bad)


def test_intensities_lie_in_0_5_and_are_a_time_weighted_mean(committed):
    by_kernel: dict[str, list[counters.Launch]] = {}
    for la in committed:
        by_kernel.setdefault(la.kernel, []).append(la)
    for las in by_kernel.values():
        phi = counters.intensities(las, LAUNCH_US)
        assert set(phi) == set(counters.PROXIES)
        assert all(0.0 <= x <= 5.0 for x in phi.values())
    a, b = by_kernel["merge_pass"], by_kernel["sort_tiles"]
    pa, pb, both = (counters.intensities(x, LAUNCH_US) for x in (a, b, a + b))
    ta, tb = (sum(la.metrics["gpu__time_duration.sum"] for la in x) for x in (a, b))
    for p in ("MEM-BW", "SH-MEM-BW", "ATOMIC", "SP-GFLOP"):
        assert both[p] == pytest.approx((pa[p] * ta + pb[p] * tb) / (ta + tb))


def test_share_mapping_follows_nitros_definition(committed):
    m = copy.deepcopy(committed[0].metrics)
    inst = m["sm__inst_executed.sum"]
    m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] = 0.4 * 32 * inst  # 40 % FFMA -> phi 2
    m["l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum"] = 0.1 * inst
    m["l1tex__t_set_accesses_pipe_lsu_mem_global_op_red.sum"] = 0.1 * inst  # 20 % atomics -> phi 1
    m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] = 3 * inst  # capped at a share of 1
    m["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 60.0
    phi = counters.launch_shares(m)
    assert phi == pytest.approx({"SP-GFLOP": 2.0, "ATOMIC": 1.0, "SH-MEM-BW": 5.0, "MEM-BW": 3.0})


def test_launch_intensity_falls_as_kernels_get_longer(committed):
    las = [copy.deepcopy(la) for la in committed[:30]]
    short = counters.intensities(las, LAUNCH_US)["LAUNCH"]
    for la in las:
        la.metrics["gpu__time_duration.sum"] *= 10
    assert 0 < counters.intensities(las, LAUNCH_US)["LAUNCH"] < short < 5


def test_feature_and_library_kernels_do_not_move_a_benchmarks_intensity(committed):
    variants_only = [la for la in committed if counters.classify(la.kernel)[1] == "variant"]
    everything = counters.summarise(committed, LAUNCH_US)
    only = counters.summarise(variants_only, LAUNCH_US)
    assert {b: v["intensity"] for b, v in only.items()} == {b: v["intensity"] for b, v in everything.items()}
    roles = {row["role"] for v in everything.values() for row in v["kernels"].values()}
    assert roles == {"variant", "feature", "library"}


def test_committed_intensities_are_what_the_committed_counters_give(committed):
    saved = json.loads((RESULTS / "counters_intensity.json").read_text())
    now = counters.summarise(committed, saved["launch_us"])
    for b, v in saved["benchmarks"].items():
        assert now[b]["intensity"] == pytest.approx(v["intensity"])
        assert now[b]["p_dfs_counters"] == v["p_dfs_counters"]
        assert now[b]["hand_set"] == devices.INTENSITY[b]


def test_load_intensity_reads_the_committed_file_and_refuses_others(tmp_path):
    table = devices.load_intensity(RESULTS / "counters_intensity.json")
    assert set(table) == {"spmv", "histogram", "sort", "bfs"}
    assert all(set(v) == set(counters.PROXIES) for v in table.values())
    bad = tmp_path / "x.json"
    bad.write_text('{"benchmarks": {"sort": {"no": 1}}}')
    with pytest.raises(SystemExit, match="not a counters_intensity.json"):
        devices.load_intensity(bad)
    bad.write_text('{"benchmarks": {"sort": {"intensity": {"DP-GFLOP": 3}}}}')
    with pytest.raises(SystemExit, match="unknown proxies DP-GFLOP"):
        devices.load_intensity(bad)


def _trimmed(tmp_path: Path, name: str, keep: int) -> str:
    """A committed label file cut to its sort benchmark and the first ``keep`` train and test inputs."""
    raw = json.loads((RESULTS / name).read_text())
    sort = raw["benchmarks"]["sort"]
    raw["benchmarks"] = {"sort": sort | {"train": sort["train"][:keep], "test": sort["test"][:keep]}}
    out = tmp_path / name
    out.write_text(json.dumps(raw))
    return str(out)


@pytest.mark.slow
def test_devices_cli_uses_counter_intensities_for_p_dfs(tmp_path):
    raws = [_trimmed(tmp_path, f"gpu_suite_{t}_s005_raw.json", 12) for t in ("h100", "pocl", "pocl_basic")]
    table = devices.load_intensity(RESULTS / "counters_intensity.json")
    devices.main([*raws, "--intensity", "counters", "--out", str(tmp_path / "out")])
    out = json.loads((tmp_path / "out" / "transfer_devices_counters.json").read_text())
    assert out["intensity"]["values"]["sort"] == pytest.approx(table["sort"])
    want = p_dfs([table["sort"]], proxy_features=PROXY_FEATURES_MEASURED, per_input=2)
    assert out["benchmarks"]["sort"]["p_dfs_features"] == want
    assert "from ncu counters" in (tmp_path / "out" / "transfer_devices_counters.md").read_text()


def test_a_file_without_the_instruction_counts_is_refused_by_name():
    # the 60-launch smoke files carry six of the nine metrics
    launches = counters.read_launches(COUNTERS / "counters_smoke60_h200.csv.gz")
    with pytest.raises(counters.CountersError, match=r"counters_smoke60_h200.csv.gz: launch .* lacks .*sm__inst_executed"):
        counters.summarise(launches, LAUNCH_US)
