"""Dispatch that keeps its choice with the input object it describes (a matrix, a graph, a key set).

Why: an iterative solver multiplies one matrix hundreds of times and a graph is searched from many
sources; their features, and so the model's choice, do not change between calls. Nitro computes features
once inputs are fixed; here the first call on an object selects (features + model + constraint check) and
stores the label in the object's ``extra`` dict, so a repeated call costs one dictionary look-up. ``bind``
goes further for a hot loop: it returns the chosen variant's launcher itself (parameters bound), kept with
the object, so a repeated call costs an attribute read, a dict look-up and an identity check (~0.1-0.2 us in
CPython) and the caller may hold the launcher and pay nothing per call. The
object must not change after its first call (the kernels' DeviceMatrix / DeviceGraph never do; a caller
that rewrites a DeviceKeys' keys in place must call ``forget``).

A first call on a new object is what ``DistilledDispatch`` serves: a tree distilled from recorded run times
over host metadata the object carries (no device work; ``adaptune.kernels.distilled``); and
``FeatureTreeDispatch`` walks such a tree over the device features instead of running the model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


class KeptDispatch:
    """Wraps a trained CodeVariant; the first argument of every call must carry an ``extra`` dict."""

    def __init__(self, cv: Any) -> None:
        self.cv = cv
        self._slot = ("choice", id(self))  # one slot a dispatcher in each object's `extra`
        self._bound = ("launcher", id(self))

    def select(self, *args: Any) -> Any:
        """The label ``cv.select`` gives for these arguments, computed once per object and model (the slot
        holds the model it was computed with: installing a new model invalidates it)."""
        try:
            extra = args[0].extra
            entry = extra.get(self._slot)
        except (AttributeError, IndexError):
            _extra(args)  # raises the clear error
            raise
        params = self.cv.model_params
        if entry is not None and entry[0] is params:
            return entry[1]
        label = self.cv.select(*args)
        extra[self._slot] = (params, label)
        return label

    def bind(self, *args: Any) -> Callable[..., Any]:
        """The launcher of the chosen variant for these arguments (call it with the same arguments): on an
        object seen before with this model, no feature, model or label work at all."""
        try:
            entry = args[0].extra.get(self._bound)
        except (AttributeError, IndexError):
            _extra(args)
            raise
        if entry is not None and entry[0] is self.cv.model_params:
            return entry[1]
        label = self.select(*args)
        fn = self.cv.variant_function(label.variant)
        launcher = functools.partial(fn, **label.params) if label.config else fn
        args[0].extra[self._bound] = (self.cv.model_params, launcher)
        return launcher

    def __call__(self, *args: Any) -> Any:
        return self.bind(*args)(*args)

    def forget(self, *args: Any) -> None:
        extra = _extra(args)
        extra.pop(self._slot, None)
        extra.pop(self._bound, None)


def _extra(args: tuple[Any, ...]) -> dict[str, Any]:
    extra = getattr(args[0], "extra", None) if args else None
    if not isinstance(extra, dict):
        raise TypeError("KeptDispatch needs a first argument with an `extra` dict (DeviceMatrix, DeviceGraph, "
                        f"DeviceKeys), got {type(args[0]).__name__ if args else 'no arguments'}")
    return extra


class DistilledDispatch:
    """First-call dispatch with no device work: a distilled tree over the host metadata the object carries
    (``adaptune.kernels.distilled``), compiled into closures; the constraint of a chosen variant is checked
    (``checks``: predicates of the object, by default ``default_checks``) and refused choices fall back to
    ``default``. Nothing is kept with the object, so every call costs the
    same (a few getter calls and comparisons); it suits a first call on a new object, where ``KeptDispatch``
    would compute device features."""

    def __init__(self, benchmark: str, tree: dict[str, Any], variants: dict[str, Callable[..., Any]],
                 default: str, checks: dict[str, Callable[[Any], bool]] | None = None) -> None:
        from adaptune.kernels import distilled

        self.checks = _tree_checks(benchmark, tree, variants, default, checks)
        self.benchmark, self.tree, self.default = benchmark, tree, default
        self.variants = dict(variants)
        self.select = distilled.compile_tree(tree, distilled.SOURCES[benchmark], self.checks, default)
        # the launcher of the chosen variant (call it with the same arguments): leaves hold the launchers
        self.bind = distilled.compile_tree(launcher_tree(tree, self.variants), distilled.SOURCES[benchmark],
                                           self.checks, self.variants[default])

    def __call__(self, *args: Any) -> Any:
        return self.bind(*args)(*args)


class FeatureTreeDispatch:
    """A distilled tree over the features ``features(*args)`` returns (a dict: device features, a launch, a
    copy and a sync, kept with the object where the kernels keep them) in place of the kernel-ridge model.
    Why: where host metadata do not decide (sort: sortedness; BFS: depth), the first call must pay the
    device features, but not also the model's 8-10 us of NumPy."""

    def __init__(self, benchmark: str, tree: dict[str, Any], features: Callable[..., dict[str, float]],
                 names: tuple[str, ...] | list[str], variants: dict[str, Callable[..., Any]], default: str,
                 checks: dict[str, Callable[[Any], bool]] | None = None) -> None:
        from adaptune.kernels import distilled

        self.checks = _tree_checks(benchmark, tree, variants, default, checks)
        self.tree, self.default, self.variants = tree, default, dict(variants)
        walk = distilled.compile_tree(tree, (0, tuple(("item", n) for n in names)))
        arg, checks_, feats = distilled.SOURCES[benchmark][0], self.checks, features

        def select(*args: Any) -> str:
            label = walk(feats(*args))
            check = checks_.get(label)
            return label if check is None or check(args[arg]) else default

        self.select = select

    def bind(self, *args: Any) -> Callable[..., Any]:
        return self.variants[self.select(*args)]

    def __call__(self, *args: Any) -> Any:
        return self.bind(*args)(*args)


def _tree_checks(benchmark: str, tree: dict[str, Any], variants: dict[str, Callable[..., Any]], default: str,
                 checks: dict[str, Callable[[Any], bool]] | None) -> dict[str, Callable[[Any], bool]]:
    """The constraint predicates of the given variants (``default_checks`` unless given), after checking that
    every leaf of ``tree`` and ``default`` name a given variant."""
    from adaptune.kernels import distilled

    unknown = sorted({v for v in distilled.leaf_names(tree) if v not in variants} | (
        set() if default in variants else {default}))
    if unknown:
        raise ValueError(f"the tree or default names variants not given: {', '.join(unknown)}")
    return {k: v for k, v in (checks if checks is not None else default_checks(benchmark)).items() if k in variants}


def launcher_tree(tree: dict[str, Any], variants: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """The tree with each leaf's variant replaced by its launcher (the name kept): what ``bind`` walks."""
    if "leaf" in tree:
        return {"leaf": variants[tree["leaf"]], "name": tree["leaf"]}
    return {**tree, "low": launcher_tree(tree["low"], variants), "high": launcher_tree(tree["high"], variants)}


def default_checks(benchmark: str) -> dict[str, Callable[[Any], bool]]:
    """The kernels' constraints per variant as predicates of the object (what ``spmv.available`` and
    ``histogram.available`` decide, in one attribute read each: tests check they agree)."""
    if benchmark == "spmv":
        from adaptune.kernels import spmv

        return {"ell": lambda m: m.ell is not None, "dia": lambda m: m.dia is not None,
                **{v: (lambda m: m.library is not None) for v in ("cusparse", "torch_csr", *spmv.CUSPARSE_ALGS)}}
    if benchmark == "histogram":
        from adaptune.kernels import histogram

        return {v: (lambda d, _b=histogram.SHARED_WORDS // repl: d.bins <= _b)
                for v, (algo, repl) in histogram.ALGORITHMS.items() if algo == 2}
    return {}
