"""First-call dispatch with features prefetched at fix time: one selector, two distilled trees.

Why: on a first call the device features cost a launch, a copy and a sync (50-540 us from Python on an H100)
against median runs of 20-400 us, so a 2 % budget leaves 0.4-8 us; and reading features prefetched on a side
stream still cost 7-60 us there (the host finish, NumPy over the copied partials, then the model). Here the
features are started when the object is fixed (``fix``: ``features.prefetch_features`` with ``finish_early``,
so the host finishes them on another thread the moment the copies land, while the caller does other work),
and the first call is a budget gate over two trees compiled into closures (``adaptune.kernels.distilled``):
when the prefetched features are on the host and the object is large enough that reading them fits the
budget (``min_size``: one comparison, ``distilled.size_gate``), the tree over host metadata *and* device
features; otherwise the tree over host metadata alone. Either way a few attribute reads and comparisons.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from adaptune.kernels import distilled, features, sampled
from adaptune.kernels.dispatch import DistilledDispatch, launcher_tree

_NOTHING = object()  # what the cell of the object fixed last holds when none is: no argument is it


class PrefetchedDispatch:
    """``fix(*args)`` when the inputs are fixed, then ``select`` / ``bind`` / call with the same arguments.
    ``host_tree`` is over ``distilled.HOST_METADATA[benchmark]``; ``feature_tree`` over that metadata then
    ``feature_names`` (``distilled.pair_sources``). A fixed object is held until its first call (the Pending
    is dropped there), so fix only objects that will be called; ``forget`` drops one.

    The first call runs on cold caches (its thread was elsewhere while the features were finished), where every
    distinct step costs: the object fixed last and its Pending sit in two closure cells (an ``is``, an attribute
    read; other fixed objects are found by id), the gate's size is compared once at ``fix``, and with
    ``min_size`` None (the features never read) the call is the host tree's walk itself."""

    def __init__(self, benchmark: str, host_tree: dict[str, Any], feature_tree: dict[str, Any],
                 feature_names: Sequence[str], variants: dict[str, Callable[..., Any]], default: str, *,
                 min_size: float | None = 0.0, checks: dict[str, Callable[[Any], bool]] | None = None) -> None:
        # min_size None: the feature tree is never used (it did not beat the host tree in training)
        self.benchmark, self.default = benchmark, default
        self.min_size = float("inf") if min_size is None else float(min_size)
        host = DistilledDispatch(benchmark, host_tree, variants, default, checks)
        self.variants, self.checks = host.variants, host.checks
        unknown = sorted(v for v in distilled.leaf_names(feature_tree) if v not in self.variants)
        if unknown:
            raise ValueError(f"the feature tree names variants not given: {', '.join(unknown)}")
        self.host_tree, self.feature_tree = host_tree, feature_tree
        arg, sources = distilled.pair_sources(benchmark, feature_names)
        host_sources = distilled.SOURCES[benchmark][1]
        pair_checks = {k: (lambda p, _c=c: _c(p[0])) for k, c in self.checks.items()}
        self._pending: dict[int, tuple[Any, features.Pending]] = {}
        self._arg, self._size = arg, _size_attr(benchmark)
        # a feature tree that reads only sampled features (``adaptune.kernels.sampled``): they are computed at fix
        # (a gather of a few hundred words), so a first call right after finds them on the host
        n_host = len(distilled.HOST_METADATA[benchmark])
        read = {feature_names[i - n_host] for i in distilled.split_features(feature_tree) if i >= n_host}
        names, compute = sampled.SAMPLED.get(benchmark, ((), None))
        if read & set(names) and not read <= set(names):
            raise ValueError(f"the feature tree reads sampled features ({', '.join(sorted(read & set(names)))}) and "
                             f"device features ({', '.join(sorted(read - set(names)))}): one kind or the other")
        self._sample = compute if read and read <= set(names) else None
        self._reads = min_size is not None
        if not self._reads:  # the features are never read: the call is the host tree's walk alone
            self.select, self.bind = host.select, host.bind
            return
        pending = self._pending
        fixed_obj: Any = _NOTHING
        fixed: features.Pending | None = None
        fixed_row: tuple[Any, ...] | None = None  # features on the host at fix: (host metadata, features, object)

        def gated(use_features: Callable[[Any], Any], use_row: Callable[[Any], Any], fallback: Callable[[Any], Any]
                  ) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                nonlocal fixed_obj, fixed, fixed_row
                o = args[arg]
                if o is fixed_obj:
                    row = fixed_row
                    if row is not None:  # read at fix: C getters over one tuple
                        fixed_obj, fixed, fixed_row = _NOTHING, None, None
                        del pending[id(o)]
                        return use_row(row)
                    value = fixed.value  # type: ignore[union-attr]  # set with fixed_obj
                    if value is None:
                        return fallback(o)
                    fixed_obj, fixed = _NOTHING, None
                else:
                    entry = pending.get(id(o)) if pending else None  # nothing fixed: no id(), no lookup
                    if entry is None or entry[1].value is None:  # admitted by the gate at fix
                        return fallback(o)
                    value = entry[1].value
                del pending[id(o)]
                return use_features((o, value))
            return call

        names = tuple(feature_names)

        def latest(o: Any, p: features.Pending | None, row_of: tuple[Any, ...] | None) -> None:  # fix and forget
            nonlocal fixed_obj, fixed, fixed_row
            fixed_obj, fixed = (o, p) if p is not None else (_NOTHING, None)
            value = None if p is None else p.value
            fixed_row = None if value is None or row_of is None or any(k not in value for k in names) else (
                *row_of, *(value[k] for k in names), o)

        self._latest = latest
        rows = tuple(("item", i) for i in range(len(sources)))
        row_checks = {k: (lambda r, _c=c: _c(r[-1])) for k, c in self.checks.items()}
        launchers = launcher_tree(feature_tree, self.variants)
        self.select: Callable[..., str] = gated(
            distilled.compile_walk(feature_tree, sources, pair_checks, default),
            distilled.compile_walk(feature_tree, rows, row_checks, default),
            distilled.compile_walk(host_tree, host_sources, self.checks, default))
        self.bind: Callable[..., Callable[..., Any]] = gated(
            distilled.compile_walk(launchers, sources, pair_checks, self.variants[default]),
            distilled.compile_walk(launchers, rows, row_checks, self.variants[default]),
            distilled.compile_walk(launcher_tree(host_tree, self.variants), host_sources, self.checks,
                                   self.variants[default]))

    def fix(self, *args: Any, high_priority: bool = False, pending: features.Pending | None = None
            ) -> features.Pending | None:
        """Start the features of these arguments' object on a side stream (nothing waits): call when the
        inputs are fixed, then do other work; a first call uses them once they are on the host. ``pending``:
        features already started (or ``Pending.finished``) to use instead. Below the gate's ``min_size`` (never,
        where it is None) nothing is started and None returned: the call would not read the features, and a
        first call right after starting them pays a handoff (~1.5 us on an H100's host) on top of its walk. Where
        the feature tree reads only sampled features (``adaptune.kernels.sampled``), they are computed here, at once
        (a gather and a copy: a sync), and the Pending returned is finished."""
        o = args[self._arg]
        admitted = self._reads and getattr(o, self._size) >= self.min_size
        if pending is None:
            if not admitted:
                return None
            pending = self._start(args[0], o, high_priority)
        if admitted:
            self._pending[id(o)] = (o, pending)
            self._latest(o, pending, distilled.read_metadata(self.benchmark, *args))
        else:
            self.forget(*args)
        return pending

    def _start(self, dev: Any, o: Any, high_priority: bool) -> features.Pending:
        if self._sample is not None:
            return features.Pending.finished(self._sample(dev, o))
        if self.benchmark == "sort":  # (dev, keys): plain keys, nothing to keep the Pending with
            return features.prefetch_sort_features(dev, o, high_priority=high_priority, finish_early=True)
        pending = features.prefetch_features(o, high_priority=high_priority, finish_early=True)
        if pending is None:  # kept with the object already: on the host now
            pending = features.Pending.finished(features.kept_features(o))
        return pending

    def used_features(self, *args: Any) -> bool:
        """Whether a call now would walk the feature tree (for reports: no side effects)."""
        entry = self._pending.get(id(args[self._arg]))
        return entry is not None and entry[1].value is not None

    def forget(self, *args: Any) -> None:
        o = args[self._arg]
        if self._pending.pop(id(o), None) is not None:
            self._latest(_NOTHING, None, None)  # whichever was fixed last: a later fix sets it again

    def __call__(self, *args: Any) -> Any:
        return self.bind(*args)(*args)


def _size_attr(benchmark: str) -> str:
    """The attribute the gate compares (``distilled.GATE_SIZE``)."""
    source = distilled.SOURCES[benchmark][1][distilled.GATE_SIZE[benchmark]]
    if source[0] != "attr":
        raise ValueError(f"the gate's size of {benchmark!r} must be an attribute, got {source!r}")
    return source[1]
