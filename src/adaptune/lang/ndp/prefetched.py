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

import sys
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
_NONE_FIXED: list[Any] = [object(), None, None]  # the slot of no input: no array is its first item, no pick


def compile_rule(rule: Rule, labels: Sequence[str], width: int) -> Callable[[Sequence[float]], str]:
    """``pick(vector) -> label``: a tree over positions ``0 .. width - 1`` compiled into closures, or a model; the
    label returned is always the very object in ``labels``."""
    if isinstance(rule, ModelParams):
        predict, names = compile_predictor(rule), list(labels)
        return lambda vec: names[int(predict(vec))]
    canonical = {label: label for label in labels}
    used = distilled.split_features(rule)
    if used and max(used) >= width:
        raise NdpError(f"the tree splits on feature {max(used)}, but the rule has {width} features")
    unknown = sorted(set(distilled.leaf_names(rule)) - set(labels))
    if unknown:
        raise NdpError(f"the tree picks labels that are not given: {', '.join(unknown)}")
    return distilled.compile_tree(_leaves_as(rule, canonical), (0, tuple(("item", i) for i in range(width))))


def _leaves_as(tree: distilled.Tree, canonical: Mapping[str, str]) -> distilled.Tree:
    """The tree with every leaf's label the given object (the selector's interned label): equal strings."""
    if "leaf" in tree:
        return {"leaf": canonical[tree["leaf"]]}
    return {**tree, "low": _leaves_as(tree["low"], canonical), "high": _leaves_as(tree["high"], canonical)}


class PrefetchedSelector:
    """``fix(*arrays)`` when the inputs are bound, then ``select`` / call with the same arrays.

    ``labels``: label -> (variant, policy) of ``program``; ``host``: the rule over the program's
    ``n_host_features`` leading features (sizes); ``full``: the rule over all its features."""

    def __init__(self, program: Program, labels: Mapping[str, tuple[str, Mapping[str, Any]]], host: Rule,
                 full: Rule) -> None:
        for label, (variant, _) in labels.items():
            if variant not in program.variants:
                raise NdpError(f"label {label!r}: {variant!r} is not a variant of {program.comp.name!r}")
        # the labels as interned strings, and every rule's pick one of these objects (immortal on Python 3.12:
        # returning one writes no reference count)
        self.labels = {sys.intern(label): how for label, how in labels.items()}
        self.program = program
        names = list(self.labels)
        self.pick_host = compile_rule(host, names, program.n_host_features)
        self.pick_full = compile_rule(full, names, len(program.feature_names))
        # fixed inputs: id -> slot [the input (held: its id stays unique), the full rule's pick (None until it
        # lands), the Pending (held so that its buffers live until they land)]; forgetting or fixing again drops
        # the slot, and a pick that lands in a dropped one is never read
        self._fixed: OrderedDict[int, list[Any]] = OrderedDict()
        self._latest: list[list[Any]] = [_NONE_FIXED]  # the slot of the input fixed last (not forgotten since)
        self._lock = threading.Lock()
        slot_of, key = self._fixed.get, program.feature_position
        host_vector, pick_host = program.host_features, self.pick_host
        # The input fixed last once its pick landed, and that pick: what the gate reads first. A call soon after
        # the pick lands runs on cold caches (its thread was descheduled while another finished the features), so
        # every distinct step costs: here one subscript, two cell reads and an ``is`` (no ``id()`` integer, no
        # hashing, no dict lookup); any other fixed input is found through its id.
        landed_input: Any = _NONE_FIXED[0]
        landed_label: str | None = None

        def select(*arrays: Any) -> str:
            o = arrays[key]
            if o is landed_input:
                return landed_label  # type: ignore[return-value]  # set with landed_input, never None then
            label = slot_of(id(o), _NONE_FIXED)[1]
            if label is not None:
                return label
            return pick_host(host_vector(*arrays))

        # publish's two writes, like select's two reads, have no thread switch point between them (the GIL is
        # handed over only at calls and backward jumps): a caller never sees an input with another's pick
        def publish(o: Any, label: str | None) -> None:  # under the lock (fix, forget and the finishing thread)
            nonlocal landed_input, landed_label
            landed_label = label
            landed_input = o

        self.select: Callable[..., str] = select
        self._publish = publish

    def fix(self, *arrays: Any, high_priority: bool = False) -> Pending:
        """Start these inputs' features (nothing waits); ``Pending.value`` becomes the full rule's label once
        they are on the host. The arrays must not change while they are fixed (``forget`` them first)."""
        o = self.program.feature_array(*arrays)
        ident, slot = id(o), [o, None, None]
        lock, latest, publish, pick_full = self._lock, self._latest, self._publish, self.pick_full
        with lock:
            self._drop(ident)
            self._fixed[ident] = latest[0] = slot
            publish(_NONE_FIXED[0], None)
            while len(self._fixed) > KEEP:
                self._drop(next(iter(self._fixed)))

        def landed(vec: Sequence[float]) -> str:  # on the finishing thread (or at once: nothing to wait for)
            slot[1] = label = pick_full(vec)
            with lock:
                if latest[0] is slot:  # still the input fixed last: not forgotten, not fixed again
                    publish(o, label)
            return label

        slot[2] = self.program.prefetch_features(*arrays, on_ready=landed, high_priority=high_priority)
        return slot[2]

    def _drop(self, ident: int) -> None:  # under the lock
        slot = self._fixed.pop(ident, None)
        if slot is not None and self._latest[0] is slot:
            self._latest[0] = _NONE_FIXED
            self._publish(_NONE_FIXED[0], None)

    def used_features(self, *arrays: Any) -> bool:
        """Whether a call now would take the full rule's pick (for reports; no side effects)."""
        return self._fixed.get(id(self.program.feature_array(*arrays)), _NONE_FIXED)[1] is not None

    def forget(self, *arrays: Any) -> None:
        with self._lock:
            self._drop(id(self.program.feature_array(*arrays)))

    def __call__(self, *arrays: Any) -> Any:
        variant, policy = self.labels[self.select(*arrays)]
        return self.program.run(variant, *arrays, **policy)
