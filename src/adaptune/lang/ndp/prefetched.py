"""First-call selection for an NDP program with its features prefetched when the inputs are fixed.

Why: the row-spread features of an irregular nest (SpMV, segmented reduce) cost a few launches, a copy and a
sync: 150-250 us from Python on an H100 against median runs of 40-90 us, so the issue's 5 % budget (2-4 us)
leaves only sizes. Sizes alone pick a label worth 0.65-0.86 of oracle there; with the spread, the ``cost``
model reaches 0.96. So, as ``adaptune.kernels.prefetched`` does for the GPU suite: ``fix`` starts the spread
when the inputs are bound (``Program.prefetch_features``: a side stream on CUDA, a non-blocking copy on
OpenCL) and the host finishes the vector *and the full model's pick* as soon as the copies land (CUDA's
host-function thread, an OpenCL event callback), while the caller does other work. The call is a gate: the
pick is there -> use it (one dict lookup of the landed picks); else the host rule over the sizes only.

A rule is a distilled tree (``adaptune.kernels.distilled``: plain dicts over feature positions) or a fitted
model's ``ModelParams`` (``compile_predictor``; its index is a position in ``labels``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adaptune.adaptive.compiled import ModelParams, compile_predictor
from adaptune.kernels import distilled
from adaptune.kernels.features import Pending
from adaptune.lang.ndp.ops import NdpError
from adaptune.lang.ndp.program import Program

Rule = distilled.Tree | ModelParams
KEEP = 16  # fixed inputs remembered at once (the oldest is forgotten first)


def compile_rule(rule: Rule, labels: Sequence[str], width: int) -> Callable[[Sequence[float]], str]:
    """``pick(vector) -> label``: a tree over positions ``0 .. width - 1`` compiled into closures, or a model."""
    if isinstance(rule, ModelParams):
        predict, names = compile_predictor(rule), list(labels)
        return lambda vec: names[int(predict(vec))]
    used = _split_positions(rule)
    if used and max(used) >= width:
        raise NdpError(f"the tree splits on feature {max(used)}, but the rule has {width} features")
    unknown = sorted(set(distilled.leaf_names(rule)) - set(labels))
    if unknown:
        raise NdpError(f"the tree picks labels that are not given: {', '.join(unknown)}")
    return distilled.compile_tree(rule, (0, tuple(("item", i) for i in range(width))))


def _split_positions(tree: distilled.Tree) -> list[int]:
    if "leaf" in tree:
        return []
    return [int(tree["feature"]), *_split_positions(tree["low"]), *_split_positions(tree["high"])]


class PrefetchedSelector:
    """``fix(*arrays)`` when the inputs are bound, then ``select`` / call with the same arrays.

    ``labels``: label -> (variant, policy) of ``program``; ``host``: the rule over the program's
    ``n_host_features`` leading features (sizes); ``full``: the rule over all its features."""

    def __init__(self, program: Program, labels: Mapping[str, tuple[str, Mapping[str, Any]]], host: Rule,
                 full: Rule) -> None:
        for label, (variant, _) in labels.items():
            if variant not in program.variants:
                raise NdpError(f"label {label!r}: {variant!r} is not a variant of {program.comp.name!r}")
        self.program, self.labels = program, dict(labels)
        names = list(self.labels)
        self.pick_host = compile_rule(host, names, program.n_host_features)
        self.pick_full = compile_rule(full, names, len(program.feature_names))
        # fixed inputs (bookkeeping: the input, a token of this fix, its Pending, held so that its buffers live
        # until they land) and the landed picks, which alone the gate reads: a call made soon after the pick
        # lands runs on cold caches (the finishing thread just ran), so it touches as few objects as it can
        self._fixed: OrderedDict[int, tuple[Any, object, Pending | None]] = OrderedDict()
        self._picks: dict[int, tuple[Any, str]] = {}
        self._lock = threading.Lock()
        picks, key, host_vector, pick_host = self._picks, program.feature_position, program.host_features, self.pick_host

        def select(*arrays: Any) -> str:
            o = arrays[key]
            landed = picks.get(id(o))
            if landed is not None and landed[0] is o:
                return landed[1]
            return pick_host(host_vector(*arrays))

        self.select: Callable[..., str] = select

    def fix(self, *arrays: Any, high_priority: bool = False) -> Pending:
        """Start these inputs' features (nothing waits); ``Pending.value`` becomes the full rule's label once
        they are on the host. The arrays must not change while they are fixed (``forget`` them first)."""
        o = self.program.feature_array(*arrays)
        token = object()
        with self._lock:
            self._drop(id(o))
            self._fixed[id(o)] = (o, token, None)
            while len(self._fixed) > KEEP:
                self._drop(next(iter(self._fixed)))

        def landed(vec: Sequence[float]) -> str:  # on the finishing thread (or at once: nothing to wait for)
            label = self.pick_full(vec)
            with self._lock:
                entry = self._fixed.get(id(o))
                if entry is not None and entry[1] is token:  # not forgotten or fixed again meanwhile
                    self._picks[id(o)] = (o, label)
            return label

        pending = self.program.prefetch_features(*arrays, on_ready=landed, high_priority=high_priority)
        with self._lock:
            entry = self._fixed.get(id(o))
            if entry is not None and entry[1] is token:
                self._fixed[id(o)] = (o, token, pending)
        return pending

    def _drop(self, ident: int) -> None:
        self._fixed.pop(ident, None)
        self._picks.pop(ident, None)

    def used_features(self, *arrays: Any) -> bool:
        """Whether a call now would take the full rule's pick (for reports; no side effects)."""
        o = self.program.feature_array(*arrays)
        landed = self._picks.get(id(o))
        return landed is not None and landed[0] is o

    def forget(self, *arrays: Any) -> None:
        with self._lock:
            self._drop(id(self.program.feature_array(*arrays)))

    def __call__(self, *arrays: Any) -> Any:
        variant, policy = self.labels[self.select(*arrays)]
        return self.program.run(variant, *arrays, **policy)
