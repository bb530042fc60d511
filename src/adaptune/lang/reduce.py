"""Reductions as code variants (seed 002, ch. 3, 5, 6), chosen per shape by ``adaptive.CodeVariant``.

Six kernels (``codegen.REDUCE_VARIANTS``) each with its work-group size (and, for ``segmented`` the
segment width, for ``grid_stride`` the unroll factor and groups per multiprocessor) as tuned parameters (a
``Space`` searched by the labelling's strategy), plus ``rule``: the untuned default in ``rules``. The features
are the reduction's shape after moving the reduced axes last: ``length`` (elements per output),
``n_out`` (number of outputs) and ``stride`` (1 when the reduced axis is the innermost in memory).
Training measures every (variant, work-group) on a ladder of shapes, stores the labels in adaptune's
``Store`` (reused on the next run), fits a model and installs it as the session's chooser, so every
later flush picks its reduction kernel by a few NumPy operations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.adaptive import CodeVariant
from adaptune.lang import fuse
from adaptune.lang.codegen import REDUCE_VARIANTS, ReduceShape, reduce_shape
from adaptune.lang.ir import Buffer, Reduce
from adaptune.lang.rules import default_choice
from adaptune.lang.runtime import Runtime
from adaptune.lang.session import session
from adaptune.records import DeviceInfo
from adaptune.space import Space

BLOCKS = (32, 64, 128, 256, 512, 1024)
SEGMENTS = (2, 4, 8, 16, 32)
UNROLLS = (1, 2, 4, 8)
GROUPS_PER_SM = (2, 4, 8, 16)


@dataclass
class ReductionInput:
    """One training shape: a float32 sum of ``n_out`` reductions of ``length`` elements on the device."""

    runtime: Runtime
    n_out: int
    length: int
    contiguous: bool
    data: Any = None
    host: np.ndarray | None = None

    def __post_init__(self) -> None:
        shape = (self.n_out, self.length) if self.contiguous else (self.length, self.n_out)
        if self.n_out == 1:
            shape = (self.length,)
        self.host = np.random.default_rng(self.n_out * 7919 + self.length).random(shape, dtype=np.float32)
        self.data = self.runtime.upload(self.host)
        self._plans: dict[tuple, tuple[fuse.Plan, list]] = {}

    @property
    def axis(self) -> int:
        return 0 if self.n_out == 1 or not self.contiguous else 1

    def node(self) -> Reduce:
        buf = Buffer(self.data, self.host.shape, np.dtype(np.float32))
        return Reduce("add", buf, (self.axis,), np.dtype(np.float32))

    def shape(self) -> ReduceShape:
        return reduce_shape(self.node())

    def run(self, variant: str, params: dict[str, int]) -> Any:
        key = (variant, tuple(sorted(params.items())))
        hit = self._plans.get(key)
        if hit is None:
            node = self.node()
            order, pos, _ = fuse.linearise([node])
            plan = fuse.build(order, pos, [node], self.runtime, lambda rs, n, rt: (variant, dict(params)))
            hit = self._plans[key] = (plan, order)
        plan, order = hit
        return fuse.run(plan, order, self.runtime)[0]

    @property
    def name(self) -> str:
        return f"sum{'' if self.contiguous else '_strided'}_{self.n_out}x{self.length}"


def features(rs: ReduceShape) -> list[float]:
    return [math.log2(max(rs.length, 1)), math.log2(max(rs.n_out, 1)), 1.0 if rs.stride == 1 else 0.0]


def make_code_variant(runtime: Runtime, device: DeviceInfo | None = None, blocks: Sequence[int] = BLOCKS,
                      segments: Sequence[int] = SEGMENTS, unrolls: Sequence[int] = UNROLLS,
                      groups_per_sm: Sequence[int] = GROUPS_PER_SM, grid_budget: int = 8) -> CodeVariant:
    """The reduction ``CodeVariant``: ``rule`` (default) and the four kernels, each with a work-group Space."""
    cv = CodeVariant("lang.reduce", sync=runtime.synchronize, rtol=1e-3, atol=1e-3,
                     device=device or DeviceInfo(runtime.name, f"lang:{runtime.kind}"))

    def rule(inp: ReductionInput) -> Any:
        return inp.run(*default_choice(inp.shape(), runtime))

    cv.variant(rule, name="rule", default=True)
    sizes = [b for b in blocks if b <= runtime.max_block]
    blocks_space = Space({"block": sizes})
    for name in ("thread_per_output", "tree"):
        cv.variant(lambda inp, block=256, _n=name: inp.run(_n, {"block": block}), name=name, space=blocks_space,
                   strategy="brute_force")
    cv.variant(lambda inp, block=256, unroll=1: inp.run("two_pass", {"block": block, "unroll": unroll}),
               name="two_pass", space=Space({"block": sizes, "unroll": [1, max(unrolls)]}), strategy="brute_force")
    grid_space = Space({"block": [b for b in sizes if b >= 128] or sizes, "unroll": list(unrolls),
                        "groups_per_sm": list(groups_per_sm)})
    cv.variant(lambda inp, block=256, unroll=4, groups_per_sm=8: inp.run(
        "grid_stride", {"block": block, "unroll": unroll, "groups_per_sm": groups_per_sm}),
        name="grid_stride", space=grid_space, strategy="random", budget=grid_budget)
    cv.variant(lambda inp, block=256: inp.run("column", {"block": block}), name="column", space=blocks_space,
               strategy="brute_force")  # shapes it does not fit run as two_pass (fuse._reduce_steps)
    seg_space = Space({"block": [b for b in sizes if b >= max(segments)], "seg": list(segments)})
    cv.variant(lambda inp, block=256, seg=32: inp.run("segmented", {"block": block, "seg": seg}),
               name="segmented", space=seg_space, strategy="random", budget=10)
    cv.feature(lambda inp: features(inp.shape())[0], name="log2_length")
    cv.feature(lambda inp: features(inp.shape())[1], name="log2_outputs")
    cv.feature(lambda inp: features(inp.shape())[2], name="contiguous")
    assert set(cv.variant_names) - {"rule"} == set(REDUCE_VARIANTS)
    return cv


LADDER: tuple[tuple[int, int, bool], ...] = (
    # (outputs, length, reduced axis innermost in memory)
    (1, 1 << 12, True), (1, 1 << 16, True), (1, 1 << 20, True), (1, 1 << 24, True),
    (16, 1 << 16, True), (64, 1 << 14, True), (1 << 10, 1 << 10, True), (1 << 12, 1 << 8, True),
    (1 << 14, 64, True), (1 << 16, 16, True), (1 << 18, 4, True),
    (16, 1 << 16, False), (1 << 10, 1 << 10, False), (1 << 14, 64, False), (1 << 16, 16, False),
)


def make_ladder(totals: Sequence[int] = (1 << 20, 1 << 24), lengths: Sequence[int] | None = None,
                strided: bool = True) -> list[tuple[int, int, bool]]:
    """A ladder of reduction shapes: for each total element count, every reduced length (powers of 4 from 16
    up to the total: one output per total at the top) as contiguous rows and, with more than one output,
    as a strided (axis-0) reduction. Two totals give 2 x (9 + 8) shapes or more: the training set of the
    variant selection (its features are exactly length, outputs and contiguity)."""
    out: list[tuple[int, int, bool]] = []
    for total in totals:
        lens = lengths if lengths is not None else [1 << k for k in range(4, total.bit_length(), 2)] + [total]
        for length in dict.fromkeys(n for n in lens if n <= total):
            n_out = total // length
            out.append((n_out, length, True))
            if strided and n_out > 1:
                out.append((n_out, length, False))
    return list(dict.fromkeys(out))


LADDER_FULL = tuple(make_ladder())  # 38 shapes of 1 Mi and 16 Mi float32 elements (the H100 training set)
LADDER_SMALL = tuple(make_ladder((1 << 12,), (16, 256, 1 << 12)))  # 5 shapes (CI on PoCL)


def ladder_inputs(runtime: Runtime, ladder: Iterable[tuple[int, int, bool]] = LADDER,
                  max_elements: int | None = None) -> list[tuple[str, ReductionInput]]:
    out = []
    for n_out, length, contiguous in ladder:
        if max_elements is not None and n_out * length > max_elements:
            continue
        inp = ReductionInput(runtime, n_out, length, contiguous)
        out.append((inp.name, (inp,)))
    return out


class Selector:
    """The session's chooser: the trained model's label for a shape (``rule`` defers to the default)."""

    def __init__(self, cv: CodeVariant) -> None:
        self.cv = cv
        self.cache: dict[tuple[int, int, int], tuple[str, dict[str, int]]] = {}

    def __call__(self, rs: ReduceShape, node: Any, runtime: Runtime) -> tuple[str, dict[str, int]]:
        key = (rs.n_out, rs.length, rs.stride == 1)
        hit = self.cache.get(key)
        if hit is None:
            label = self.cv.predict(features(rs))
            hit = default_choice(rs, runtime) if label.variant == "rule" else (label.variant, label.params)
            self.cache[key] = hit
        return hit


def tune_reductions(db: Any = "adaptune.db", *, model: str = "tree", ladder: Sequence[tuple[int, int, bool]] = LADDER,
                    max_elements: int | None = None, repeats: int = 5, progress: bool = True,
                    install: bool = True, blocks: Sequence[int] = BLOCKS,
                    segments: Sequence[int] = SEGMENTS, unrolls: Sequence[int] = UNROLLS,
                    groups_per_sm: Sequence[int] = GROUPS_PER_SM, grid_budget: int = 8) -> CodeVariant:
    """Label the ladder (every variant x work-group, stored in ``db`` and reused), fit, install, return."""
    runtime = session().runtime
    cv = make_code_variant(runtime, blocks=blocks, segments=segments, unrolls=unrolls, groups_per_sm=groups_per_sm,
                           grid_budget=grid_budget)
    cv.train(ladder_inputs(runtime, ladder, max_elements), model=model, db=db, repeats=repeats,
             min_sample_ms=0.5, progress=progress)
    if install:
        session().chooser = Selector(cv)
    return cv


def load_model(path: str, blocks: Sequence[int] = BLOCKS, segments: Sequence[int] = SEGMENTS,
               unrolls: Sequence[int] = UNROLLS, groups_per_sm: Sequence[int] = GROUPS_PER_SM) -> CodeVariant:
    """Install a saved reduction model (``cv.save(path)``) as the session's chooser."""
    runtime = session().runtime
    cv = make_code_variant(runtime, blocks=blocks, segments=segments, unrolls=unrolls, groups_per_sm=groups_per_sm)
    cv.load_model(path)
    session().chooser = Selector(cv)
    return cv
