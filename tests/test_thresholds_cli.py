"""``adaptune thresholds``: tree, count and tune on recorded text and real PoCL timings."""

from __future__ import annotations

import json

import pytest

from adaptune.cli import main
from adaptune.thresholds.futhark import flows_from_comparisons, parse_comparisons, read_tuning_file
from adaptune.thresholds.model import ThresholdModel, oracle_signatures
from adaptune.thresholds.tree import parse_print_sizes

SIZES = """\
main.suff_outer_par_0 (threshold ())
main.suff_intra_par_1 (threshold (!main.suff_outer_par_0))
main.group_size_2 (group_size)
main.suff_outer_par_3 (threshold (!main.suff_outer_par_0 !main.suff_intra_par_1))
main.suff_intra_par_4 (threshold (!main.suff_outer_par_0 !main.suff_intra_par_1 !main.suff_outer_par_3))
"""


def _log(n: int, m: int, p: int) -> str:
    return (f"Compared main.suff_outer_par_0 <= {n}\nCompared main.suff_intra_par_1 <= {p}\n"
            f"Compared main.suff_outer_par_3 <= {n * p}\nCompared main.suff_intra_par_4 <= {m}\n")


def test_tree_and_count(tmp_path, capsys) -> None:
    sizes = tmp_path / "matmul.sizes"
    sizes.write_text(SIZES)
    assert main(["thresholds", "tree", str(sizes)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "nullroot" and "[F] main.suff_intra_par_4" in out
    logs = []
    for i, shape in enumerate([(20, 50, 30), (1000, 4, 4)]):
        f = tmp_path / f"d{i}.log"
        f.write_text(_log(*shape))
        logs.append(str(f))
    assert main(["thresholds", "count", str(sizes), *logs, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["naive_2^15"] == 2**60 and info["datasets"] == 2
    assert info["candidates"]["main.suff_outer_par_0"] == [20, 1000, 1001]
    assert info["distinct_behaviours"] <= info["seed_combinations"]
    model = ThresholdModel(parse_print_sizes(SIZES, strict=False),
                           {f"d{i}": flows_from_comparisons(parse_comparisons(_log(*s)))
                            for i, s in enumerate([(20, 50, 30), (1000, 4, 4)])})
    assert info["distinct_behaviours"] == len(oracle_signatures(model)) < 5 * 5  # versions move together


def test_errors_are_clear(tmp_path, capsys) -> None:
    sizes = tmp_path / "s"
    sizes.write_text("a (threshold ())\nb (threshold ())\nc (threshold (a !b))\n")
    assert main(["thresholds", "tree", str(sizes)]) == 2
    assert "several direct parents" in capsys.readouterr().err
    assert main(["thresholds", "tree", str(sizes), "--multi-parent", "duplicate"]) == 0
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    assert main(["thresholds", "count", str(sizes), str(empty), "--multi-parent", "duplicate"]) == 2
    assert "no 'Compared" in capsys.readouterr().err
    assert main(["thresholds", "tree", str(tmp_path / "missing")]) == 2


def test_tune_writes_a_tuning_file_and_store(tmp_path, capsys) -> None:
    pytest.importorskip("pyopencl")
    from adaptune.kernels.device import OpenCLDevice
    from adaptune.store import Store
    from adaptune.thresholds import matmul
    from adaptune.thresholds.timing import PathTimes, live_measure

    dev = OpenCLDevice()
    prog = matmul.program()
    sizes = {"tall": (2000, 4, 4), "deep": (2, 4096, 2)}
    model = prog.model({k: matmul.make_data(None, *v) for k, v in sizes.items()})
    data = {k: matmul.make_data(dev, *v) for k, v in sizes.items()}
    times = PathTimes(model, live_measure(prog, data, dev.synchronize, repeats=2, warmup=0))
    assert times.record_every_path() == 10
    path = tmp_path / "timings.json"
    times.save(path)
    out = tmp_path / "matmul.fut.tuning"
    db = tmp_path / "t.db"
    args = ["thresholds", "tune", str(path), "--repeats", "2", "-o", str(out), "--db", str(db), "--json"]
    assert main(args) == 0
    res = json.loads(capsys.readouterr().out)
    tuned = read_tuning_file(out)
    assert tuned == res["best"] and set(tuned) == set(model.names)
    for d in sizes:  # the exact optimum over both datasets is never worse than the defaults in total
        assert res["datasets"][d]["tuned_ms"] > 0
    assert sum(v["tuned_ms"] for v in res["datasets"].values()) <= sum(
        v["untuned_ms"] for v in res["datasets"].values()) + 1e-9
    store = Store(str(db))
    assert res["stored"] == 10 and len(store.results()) == 10
    assert main([*args[:3], "--tuner", "paths+early", "--repeats", "2", "--json"]) == 0
    early = json.loads(capsys.readouterr().out)
    assert early["tuning_s"] <= res["tuning_s"] and sum(v["tuned_ms"] for v in early["datasets"].values()) == (
        pytest.approx(sum(v["tuned_ms"] for v in res["datasets"].values())))
    assert main(["thresholds", "tune", str(path), "--tuner", "nope"]) == 2
