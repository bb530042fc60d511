"""NDP front end without a device: schedule lattice and pruning, policy spaces, translation subset, fusion."""

import math

import numpy as np
import pytest

from adaptune.lang import ndp
from adaptune.lang.ndp import schedule
from adaptune.lang.ndp.lower import lower
from adaptune.lang.ndp.policy import space_for
from adaptune.lang.ndp.translate import TranslationError, Value, scalar_function

GAIN = 3


def test_spmv_lattice_is_the_seeds_example():
    en = schedule.enumerate_schedules(("map", "reduce"))
    assert en.strongest == ("independent", "cooperative")
    assert set(en.kept) == {("independent", "cooperative"), ("independent", "sequential"),
                            ("sequential", "cooperative"), ("sequential", "sequential")}
    assert en.kept[0] == en.strongest and en.kept[-1] == ("sequential", "sequential")  # top and bottom
    assert schedule.stronger(("independent", "cooperative"), ("sequential", "sequential"))
    assert not schedule.stronger(("independent", "sequential"), ("sequential", "cooperative"))  # incomparable


def test_table_5_3_and_rewrites():
    assert schedule.strongest(["scan"]) == ("cooperative",)
    assert schedule.STRONGEST["nest"] == ("independent", "independent")
    assert schedule.STRONGEST["reduce_by_key"] == ("cooperative",)
    assert schedule.rewrites(("cooperative",)) == [("sequential",)]
    assert schedule.reachable(("sequential",)) == [("sequential",)]
    with pytest.raises(KeyError, match="sort"):
        schedule.strongest(["sort"])


def test_platform_prunes_deep_and_wide_parallelism():
    en = schedule.enumerate_schedules(("map", "map", "reduce"))
    assert len(en.kept) + len(en.pruned) == 8
    for s in en.kept:  # a GPU maps two levels (grid, work-group): level 3 must be sequential
        assert s[2] == "sequential"
    assert all("level 3" in why or "parallel levels" in why for _, why in en.pruned)
    cpu = schedule.Platform("cpu", parallel_levels=1, logical_warp=False)
    kept = schedule.enumerate_schedules(("map", "reduce"), cpu).kept
    assert set(kept) == {("independent", "sequential"), ("sequential", "sequential")}


@ndp.computation(values="f32", columns="i32", offsets="i32", x="f32")
def spmv(values, columns, offsets, x):
    rows, cols = ndp.nest(values, offsets), ndp.nest(columns, offsets)
    return ndp.map(lambda r, c: ndp.reduce(ndp.add, ndp.map(ndp.mul, r, ndp.gather(x, c))), rows, cols)


def test_gather_and_map_fuse_into_the_row_reduce():
    stages = spmv.lowered.stages
    assert len(stages) == 1 and stages[0].kind == "segreduce"
    assert {"gather", "map(mul)"} <= set(stages[0].fused)
    assert spmv.operator_sequences() == ["map.reduce"]


def test_scan_is_materialised_not_fused():
    @ndp.computation(x="f32")
    def scaled_scan(x):
        return ndp.map(lambda v: v * 2.0, ndp.scan(ndp.add, x))

    kinds = [s.kind for s in scaled_scan.lowered.stages]
    assert kinds == ["scan", "map"]


def test_policy_spaces_respect_device_limits():
    stages = spmv.lowered.stages
    coop = {0: ("independent", "cooperative")}
    gpu = space_for(stages, coop, {"max_wg": 1024, "local_mem": 49152, "cuda": 1})
    small = space_for(stages, coop, {"max_wg": 128, "local_mem": 49152, "cuda": 0})
    assert set(gpu.column("block_reduce_algo")) == {"tree", "shuffle"}
    assert set(small.column("block_reduce_algo")) == {"tree"}
    assert max(small.column("block_size")) == 128 and max(gpu.column("block_size")) == 1024
    assert len(gpu) < gpu.cartesian_size  # logical warp size collapses when a work-group takes the row
    assert space_for(stages, {0: ("sequential", "sequential")}, {"max_wg": 1024, "local_mem": 1, "cuda": 0}).names \
        == ("enable_unroll",)


def emit(fn, *types):
    sf = scalar_function(fn)
    counter = iter(range(100))
    stmts, value = sf.emit([Value(f"a{i}", t) for i, t in enumerate(types)], lambda: f"t{next(counter)}")
    return stmts, value


def test_translation_of_the_accepted_subset():
    _, v = emit(lambda a, b: a * GAIN + b if a > b else -b, "f32", "f32")
    assert v.type == "f32" and "3" in v.text and "?" in v.text
    _, v = emit(lambda i: i // 4 + i % 3, "i32")
    assert v.type == "i32" and "ndp_floordiv" in v.text and "ndp_mod" in v.text
    _, v = emit(lambda x: math.sqrt(abs(x)) / 2, "f32")
    assert "sqrt" in v.text and v.type == "f32"
    stmts, v = emit(lambda x: x ** 3, "f32")
    assert "pow" not in v.text and stmts  # small integer powers become products
    _, v = emit(lambda a, b: not (a < b <= 2.0) or a == b, "f32", "f32")
    assert v.type == "bool"


@pytest.mark.parametrize("fn, construct", [
    (lambda x: [x], "List"),
    (lambda x: x.real, "Attribute"),
    (lambda x: np.sqrt(x), "np.sqrt"),
    (lambda x: x @ x, "MatMult"),
    (lambda x: unknown_name + x, "unknown_name"),  # noqa: F821
    (lambda x: "s", "constant 's'"),
    (lambda x: x[0], "Subscript"),
])
def test_rejections_name_the_construct(fn, construct):
    with pytest.raises(TranslationError, match=construct):
        emit(fn, "f32")


def test_def_with_locals_and_rejected_statements():
    def good(a, b):
        """Docstrings are skipped."""
        d = a - b
        return d * d

    stmts, v = emit(good, "f32", "f32")
    assert len(stmts) == 1 and v.type == "f32"

    def loop(a):
        for _ in range(3):
            a = a + 1
        return a

    with pytest.raises(TranslationError, match="For"):
        emit(loop, "f32")


def test_operator_misuse_is_named():
    x = ndp.ops.Input(name="x", type="f32")
    with pytest.raises(ndp.NdpError, match="initial value"):
        ndp.reduce(lambda a, b: a + b, x)
    with pytest.raises(ndp.NdpError, match="i32"):
        ndp.gather(x, x)
    with pytest.raises(ndp.NdpError, match="nested"):
        ndp.map(lambda r, v: ndp.reduce(ndp.add, r), ndp.split(x, 4), x)
    with pytest.raises(ndp.NdpError, match="takes 2"):
        ndp.map(lambda a, b: a + b, x)
    with pytest.raises(ndp.NdpError, match="share their row structure"):
        lower([ndp.map(lambda r, s: ndp.reduce(ndp.add, ndp.map(ndp.mul, r, s)), ndp.split(x, 4), ndp.split(x, 8))])
