"""A distilled first-call selector: a shallow cost-aware decision tree over host metadata, compiled into
nested closures.

Why: a first call on a new object must cost well under 2 % of a ~37 us run (SpMV, histogram) to meet the
issue's target, i.e. below ~0.7 us. Device features cost a launch, a copy and a sync (70-470 us from Python);
the host-metadata kernel-ridge model still costs 8-10 us (NumPy per call). A tree of depth <= 5 over numbers
the object already holds on the host (rows, non-zeros, whether ELL / DIA were built; keys, bins, key width;
vertices, edges) needs a few attribute reads and comparisons. The tree is fitted to the measured run time of
every variant on the training inputs, maximising the mean fraction of oracle directly (each leaf picks the
variant with the largest summed fraction over its inputs; each split the largest gain), with depth and
leaf size chosen by cross-validation on the training inputs only. It is plain data (JSON-friendly dicts),
so it is saved and loaded without pickles, and compiled without ``eval``/``exec``.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import ModelParams, compile_predictor, kernel_ridge_scores
from adaptune.adaptive.models import fit_model, relative_performance

Tree = dict[str, Any]  # {"leaf": variant} or {"feature": i, "threshold": t, "low": Tree, "high": Tree}

# Host metadata each benchmark's objects carry (no device work): names, and a reader over the call's
# arguments returning them as a tuple of numbers in that order.
HOST_METADATA: dict[str, tuple[str, ...]] = {
    "spmv": ("n_rows", "nnz", "avg_nnz_per_row", "ell_built", "dia_built"),
    "histogram": ("n", "bins", "key_bits", "n_per_bin"),
    "sort": ("n", "key_bits", "is_float"),
    "bfs": ("vertices", "edges", "avg_degree"),
}


# Where each feature is read: the index of the call argument that holds the object, and per feature a
# descriptor: ("attr", a) = o.a; ("ratio", a, b) = o.a / o.b; ("present", a) = o.a is not None;
# ("dtype_bits",) = o.dtype.itemsize * 8; ("dtype_float",) = o.dtype.kind == "f"; ("item", k) = o[k] (a
# feature dict, for trees over device features); over a pair o = (object, features) (trees over host metadata
# and device features, ``pair_sources``): ("host", *d) = descriptor d of o[0], ("device", k) = o[1][k].
# Descriptors, not code:
# the compiled nodes read them with getattr (no eval), and only the features on the taken path are read.
SOURCES: dict[str, tuple[int, tuple[tuple[str, ...], ...]]] = {
    "spmv": (0, (("attr", "n_rows"), ("attr", "nnz"), ("ratio", "nnz", "n_rows"), ("present", "ell"),
                 ("present", "dia"))),
    "histogram": (0, (("attr", "n"), ("attr", "bins"), ("attr", "key_bits"), ("ratio", "n", "bins"))),
    "sort": (1, (("attr", "size"), ("dtype_bits",), ("dtype_float",))),
    "bfs": (0, (("attr", "n"), ("attr", "m"), ("ratio", "m", "n"))),
}


# Which host metadata (an index into SOURCES / HOST_METADATA) the budget gate compares: the size a run grows
# with (non-zeros, keys, keys, edges).
GATE_SIZE: dict[str, int] = {"spmv": 1, "histogram": 0, "sort": 0, "bfs": 1}


def _value(o: Any, source: tuple[str, ...]) -> float:
    kind = source[0]
    if kind == "attr":
        return getattr(o, source[1])
    if kind == "ratio":
        return getattr(o, source[1]) / getattr(o, source[2])
    if kind == "present":
        return getattr(o, source[1]) is not None
    if kind == "dtype_bits":
        return o.dtype.itemsize * 8
    if kind == "dtype_float":
        return o.dtype.kind == "f"
    if kind == "item":
        return o[source[1]]
    if kind == "host":
        return _value(o[0], source[1:])
    if kind == "device":
        return o[1][source[1]]
    raise ValueError(f"unknown metadata source {source!r}")


def read_metadata(benchmark: str, *args: Any) -> tuple[float, ...]:
    """All of a benchmark's host metadata for these call arguments (SpMV: (m, x, y); histogram: (d, out);
    sort: (dev, keys); BFS: (g, source))."""
    arg, sources = SOURCES[benchmark]
    return tuple(_value(args[arg], src) for src in sources)


def pair_sources(benchmark: str, feature_names: Sequence[str]) -> tuple[int, tuple[tuple[str, ...], ...]]:
    """Sources of a tree over a benchmark's host metadata then its device features, in that order, read from a
    pair (object, features dict): what ``PrefetchedDispatch`` walks once prefetched features are on the host."""
    arg, host = SOURCES[benchmark]
    return arg, tuple(("host", *src) for src in host) + tuple(("device", k) for k in feature_names)


def metadata_from_info(benchmark: str, info: dict[str, Any]) -> tuple[float, ...]:
    """The same host metadata from a recorded input's ``info`` (benchmarks/gpu_suite/run.py raw.json), so a
    selector can be distilled from recorded runs; equal to ``read_metadata`` on the live object."""
    if benchmark == "spmv":
        return (info["n_rows"], info["nnz"], info["nnz"] / info["n_rows"], bool(info["ell_built"]),
                bool(info["dia_built"]))
    if benchmark == "histogram":
        return (info["n"], info["bins"], info["key_bits"], info["n"] / info["bins"])
    if benchmark == "sort":
        dt = np.dtype(info["dtype"])
        return (info["n"], dt.itemsize * 8, dt.kind == "f")
    if benchmark == "bfs":
        return (info["n"], info["m"], info["m"] / info["n"])
    raise ValueError(f"no host metadata for {benchmark!r}")


# ------------------------------------------------------------------------------------------ fitting


def relative(runtime: np.ndarray) -> np.ndarray:
    """Each variant's fraction of oracle per input (best / its time; 0 where it failed, and on an input where
    every variant failed)."""
    return np.nan_to_num(relative_performance(runtime), nan=0.0)


def _split_point(a: float, b: float) -> float:
    """Between two distinct sorted values: the geometric midpoint for positive sizes (they span decades),
    else the arithmetic one."""
    return float(np.sqrt(a * b)) if a > 0 and b > 0 else float(a + b) / 2.0


def fit_tree(x: np.ndarray, runtime: np.ndarray, names: Sequence[str], max_depth: int = 3,
             min_leaf: int = 2) -> Tree:
    """Greedy cost-aware tree: a leaf picks the variant of largest summed fraction of oracle over its inputs
    (the first in ``names`` on a tie); a split is kept where it raises that sum. Deterministic."""
    x = np.asarray(x, float)
    rel = relative(runtime)
    return _grow(x, rel, list(names), np.arange(len(x)), max_depth, max(1, min_leaf))


def _grow(x: np.ndarray, rel: np.ndarray, names: list[str], rows: np.ndarray, depth: int, min_leaf: int) -> Tree:
    sums = rel[rows].sum(axis=0)
    here = float(sums.max())
    leaf = {"leaf": names[int(np.argmax(sums))]}
    if depth == 0 or len(rows) < 2 * min_leaf:
        return leaf
    best_gain, best = 1e-9, None
    for f in range(x.shape[1]):
        order = rows[np.argsort(x[rows, f], kind="stable")]
        values = x[order, f]
        prefix = np.cumsum(rel[order], axis=0)
        # split after position k - 1 (k = min_leaf ... n - min_leaf), only between distinct values
        k = np.arange(min_leaf, len(order) - min_leaf + 1)
        k = k[values[k - 1] != values[np.minimum(k, len(order) - 1)]]
        if k.size == 0:
            continue
        left = prefix[k - 1]
        gains = left.max(axis=1) + (prefix[-1] - left).max(axis=1) - here
        j = int(np.argmax(gains))  # the first (lowest threshold) of the largest gain
        if gains[j] > best_gain:
            best_gain, best = float(gains[j]), (f, _split_point(values[k[j] - 1], values[k[j]]))
    if best is None:
        return leaf
    f, t = best
    low, high = rows[x[rows, f] <= t], rows[x[rows, f] > t]
    lo, hi = _grow(x, rel, names, low, depth - 1, min_leaf), _grow(x, rel, names, high, depth - 1, min_leaf)
    if "leaf" in lo and lo == hi:
        return lo
    return {"feature": f, "threshold": t, "low": lo, "high": hi}


def predict(tree: Tree, row: Sequence[float]) -> str:
    """The tree's variant for one feature row (the reference the compiled selector must equal)."""
    while "leaf" not in tree:
        tree = tree["low"] if row[tree["feature"]] <= tree["threshold"] else tree["high"]
    return tree["leaf"]


def cv_fraction(x: np.ndarray, runtime: np.ndarray, names: Sequence[str], max_depth: int, min_leaf: int,
                folds: int = 5, repeats: int = 3, seed: int = 0) -> float:
    """Mean out-of-fold fraction of oracle over ``repeats`` shuffled k-fold splits (seeded: deterministic)."""
    x, runtime = np.asarray(x, float), np.asarray(runtime, float)
    rel = relative(runtime)
    n = len(x)
    scores = []
    for r in range(repeats):
        perm = np.random.default_rng(seed + r).permutation(n)
        for part in np.array_split(perm, min(folds, n)):
            train = np.setdiff1d(perm, part)
            tree = fit_tree(x[train], runtime[train], names, max_depth, min_leaf)
            scores.extend(rel[i, list(names).index(predict(tree, x[i]))] for i in part)
    return float(np.mean(scores))


DEPTHS = (1, 2, 3, 4, 5)
MIN_LEAVES = (1, 2, 3, 5, 8)


def distil(x: np.ndarray, runtime: np.ndarray, names: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """Depth and leaf size by training-set cross-validated fraction of oracle (ties: the shallower tree,
    then the larger leaves), then the tree on all training inputs. Returns {"tree", "max_depth",
    "min_leaf", "cv_fraction_of_oracle", "grid"} (JSON-friendly)."""
    grid = {(d, m): cv_fraction(x, runtime, names, d, m, seed=seed) for d in DEPTHS for m in MIN_LEAVES}
    (d, m), score = max(grid.items(), key=lambda kv: (round(kv[1], 12), -kv[0][0], kv[0][1]))
    return {"tree": fit_tree(x, runtime, names, d, m), "max_depth": d, "min_leaf": m,
            "cv_fraction_of_oracle": score, "grid": {f"{k[0]}/{k[1]}": v for k, v in grid.items()}}


def size_gate(sizes: np.ndarray, best_ms: np.ndarray, cost_us: float, budget: float) -> float:
    """The smallest size from which ``cost_us`` fits in ``budget`` of the predicted run: the run predicted by
    a log-log least-squares fit of the training inputs' fastest times on one size (non-zeros, keys, edges),
    so the gate at a first call is one comparison. inf where it never fits (a run that does not grow)."""
    logs, logt = np.log(np.maximum(np.asarray(sizes, float), 1.0)), np.log(np.asarray(best_ms, float))
    slope, icpt = np.polyfit(logs, logt, 1)
    need = np.log(cost_us * 1e-3 / budget)
    if slope <= 0:
        return 0.0 if icpt >= need else float("inf")
    return float(np.exp((need - icpt) / slope))


def distil_gated(x_host: np.ndarray, x_features: np.ndarray, runtime: np.ndarray, names: Sequence[str],
                 read_us: float, budget: float, benchmark: str, seed: int = 0,
                 students: Sequence[dict[str, float]] = ()) -> dict[str, Any]:
    """The two rules of ``PrefetchedDispatch`` from the training inputs alone: over host metadata, and over
    host metadata then device features, each ``distil_rule`` (the plain tree, or with ``students`` recipes the
    tree or a student of the cost model, whichever cross-validates best); and the gate's ``min_size`` (the
    feature path's cost, ``read_us``: the prefetched call's handoff plus the walk, within ``budget`` of the
    predicted run), None where the feature rule's cross-validated fraction of oracle does not beat the host
    rule's (the features would not be worth reading)."""
    x_host = np.asarray(x_host, float)
    host = distil_rule(x_host, runtime, names, students=students, seed=seed)
    full = distil_rule(np.column_stack([x_host, np.asarray(x_features, float)]), runtime, names, students=students,
                       seed=seed)
    best = np.nanmin(np.where(np.isfinite(runtime), runtime, np.nan), axis=1)
    min_size = (size_gate(x_host[:, GATE_SIZE[benchmark]], best, read_us, budget)
                if full["cv_fraction_of_oracle"] > host["cv_fraction_of_oracle"] else None)
    return {"host": host, "features": full, "min_size": None if min_size == float("inf") else min_size,
            "read_us": read_us, "budget": budget}


# Students tried beside the plain tree by ``distil_rule``: the NDP study's best recipe (depth 8, jitter 0.1 of
# each feature's range) and a shallower, cheaper one (depth 4: at most 4 comparisons a pick).
STUDENT_RECIPES: tuple[dict[str, float], ...] = ({"jitter": 0.1, "max_depth": 4}, {"jitter": 0.1, "max_depth": 8})


def distil_rule(x: np.ndarray, runtime: np.ndarray, names: Sequence[str], *,
                students: Sequence[dict[str, float]] = STUDENT_RECIPES, seed: int = 0) -> dict[str, Any]:
    """The first-call rule of largest training-CV fraction of oracle among the distilled tree (``distil``) and
    students of the ``cost`` model (``distil_model``, one per recipe in ``students``); ties go to the plain
    tree. Why: where host metadata separate the winners by a few sizes, the tree fitted to measured times is
    best; where the boundaries are smooth in several features, the model is, and its student walks as cheaply
    as a tree. Training inputs only. Returns {"tree", "rule", "cv_fraction_of_oracle", "candidates": {rule: {"tree",
    "cv_fraction_of_oracle"}}, "teacher_cv_fraction_of_oracle"} (JSON-friendly; the teacher's CV from the
    students' folds, None without students)."""
    tree = distil(x, runtime, names, seed)
    candidates = {f"tree (depth {tree['max_depth']})": {"tree": tree["tree"],
                                                       "cv_fraction_of_oracle": tree["cv_fraction_of_oracle"]}}
    teacher_cv = None
    for recipe in students:
        s = distil_model(x, runtime, names, seed=seed, **recipe)
        candidates[f"student (depth {recipe['max_depth']}, jitter {recipe['jitter']})"] = {
            "tree": s["tree"], "cv_fraction_of_oracle": s["cv_fraction_of_oracle"]}
        teacher_cv = s["teacher_cv_fraction_of_oracle"]
    rule = max(candidates, key=lambda k: candidates[k]["cv_fraction_of_oracle"])  # the first (the tree) on a tie
    return {**candidates[rule], "rule": rule, "candidates": candidates, "teacher_cv_fraction_of_oracle": teacher_cv}


def resample(x: np.ndarray, n: int, jitter: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` inputs near the rows of ``x``: each a random row plus Gaussian noise of ``jitter`` times every
    feature's range. Real features are correlated (row count, row length and spread move together): a box
    around them is mostly empty of real inputs, so a student fitted there learns the wrong boundaries."""
    x = np.asarray(x, float)
    span = np.ptp(x, axis=0)
    base = x[rng.integers(len(x), size=n)]
    return base + rng.normal(0.0, 1.0, base.shape) * jitter * np.where(span > 0, span, 1.0)


def student_tree(teacher: ModelParams, x: np.ndarray, names: Sequence[str], *, resampled: int = 4000,
                 jitter: float = 0.1, max_depth: int = 8, min_leaf: int = 5, seed: int = 0) -> Tree:
    """A tree that imitates the ``cost`` model ``teacher`` (kernel ridge of every label's relative performance):
    fitted to its predicted relative performance on ``resampled`` inputs near the training rows ``x`` (each leaf
    picks the label of largest summed predicted fraction of oracle). Its pick is a few comparisons (~1 us in
    Python at depth 8) instead of the model's NumPy calls (5-10 us)."""
    xs = resample(x, resampled, jitter, np.random.default_rng(seed))
    scores = np.maximum(kernel_ridge_scores(teacher, xs), 1e-3)
    return fit_tree(xs, 1.0 / scores, names, max_depth, min_leaf)  # relative = score / the best score


def distil_model(x: np.ndarray, runtime: np.ndarray, names: Sequence[str], *, folds: int = 5, repeats: int = 3,
                 seed: int = 0, **student: Any) -> dict[str, Any]:
    """The ``cost`` model fitted on the training inputs and its student tree (``student_tree``, options in
    ``student``), with both cross-validated on the same folds (the teacher refitted and the student distilled
    again in every fold): {"tree", "teacher" (ModelParams), "cv_fraction_of_oracle" (the student's),
    "teacher_cv_fraction_of_oracle"}. Whether the student may replace its teacher is the caller's call."""
    fit = distil_students(x, runtime, names, [student], folds=folds, repeats=repeats, seed=seed)
    return {"tree": fit["students"][0]["tree"], "teacher": fit["teacher"],
            "cv_fraction_of_oracle": fit["students"][0]["cv_fraction_of_oracle"],
            "teacher_cv_fraction_of_oracle": fit["teacher_cv_fraction_of_oracle"]}


def distil_students(x: np.ndarray, runtime: np.ndarray, names: Sequence[str], recipes: Sequence[dict[str, Any]], *,
                    folds: int = 5, repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """``distil_model`` for several student recipes (``student_tree`` options) at the cost of one: the teacher is
    fitted once a fold and every recipe's student distilled from it, so all are scored on the same folds (a
    choice among them by training cross-validation compares like with like). Returns {"teacher" (ModelParams,
    on all training inputs), "teacher_cv_fraction_of_oracle", "students": [{"recipe", "tree",
    "cv_fraction_of_oracle"}, ...] in the order of ``recipes``}."""
    x, runtime = np.asarray(x, float), np.asarray(runtime, float)
    rel = relative(runtime)
    names = list(names)
    taught: list[float] = []
    learnt: list[list[float]] = [[] for _ in recipes]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny folds make the estimators complain; the scores say it all
        for r in range(repeats):
            perm = np.random.default_rng(seed + r).permutation(len(x))
            for part in np.array_split(perm, min(folds, len(x))):
                train = np.setdiff1d(perm, part)
                teacher = fit_model("cost", x[train], runtime[train], runtime[train], score_repeats=0).params
                teach = compile_predictor(teacher)
                taught.extend(rel[i, int(teach(x[i]))] for i in part)
                for scores, recipe in zip(learnt, recipes, strict=True):
                    tree = student_tree(teacher, x[train], names, seed=seed + r, **recipe)
                    scores.extend(rel[i, names.index(predict(tree, x[i]))] for i in part)
        teacher = fit_model("cost", x, runtime, runtime).params
    return {"teacher": teacher, "teacher_cv_fraction_of_oracle": float(np.mean(taught)),
            "students": [{"recipe": dict(recipe), "tree": student_tree(teacher, x, names, seed=seed, **recipe),
                          "cv_fraction_of_oracle": float(np.mean(scores))}
                         for recipe, scores in zip(recipes, learnt, strict=True)]}


def tree_depth(tree: Tree) -> int:
    return 0 if "leaf" in tree else 1 + max(tree_depth(tree["low"]), tree_depth(tree["high"]))


def tree_leaves(tree: Tree) -> int:
    return 1 if "leaf" in tree else tree_leaves(tree["low"]) + tree_leaves(tree["high"])


def split_features(tree: Tree) -> list[int]:
    """The feature positions the tree's nodes split on (top down, left first; repeats kept)."""
    if "leaf" in tree:
        return []
    return [int(tree["feature"]), *split_features(tree["low"]), *split_features(tree["high"])]


# ---------------------------------------------------------------------------------------- compiling


def compile_tree(tree: Tree, sources: tuple[int, tuple[tuple[str, ...], ...]],
                 checks: dict[str, Callable[[Any], bool]] | None = None, default: Any = None
                 ) -> Callable[..., Any]:
    """``select(*args) -> variant``: nested closures over the object at ``args[sources[0]]``, one attribute
    read (or two and a division) and one comparison a level, only the features on the taken path read; at a
    leaf whose variant has a constraint in ``checks`` (a predicate of the object), the check, with a fall
    back to ``default`` where it refuses (as CodeVariant dispatch does). No NumPy, no ``eval``. A leaf may
    hold any value (a launcher) with its variant in ``name``; the checks are keyed by variant and
    ``default`` is returned as given. Where the object is the first argument, ``select`` is the root node
    itself (``compile_walk``): no wrapper call."""
    arg, descriptors = sources
    root = compile_walk(tree, descriptors, checks, default)
    if arg == 0:
        return root

    def select(*args: Any) -> Any:
        return root(args[arg])
    return select


def compile_walk(tree: Tree, descriptors: tuple[tuple[str, ...], ...],
                 checks: dict[str, Callable[[Any], bool]] | None = None, default: Any = None
                 ) -> Callable[..., Any]:
    """``walk(o, *ignored) -> variant``: the tree over one object as nested closures (``compile_tree``'s root).

    Why so: a first call runs on cold caches, where every distinct step costs (a call frame, a lookup), so a
    node returns the values of leaf children itself (a check at a constrained leaf called in place) instead
    of calling a closure per leaf, and reads attributes and items through C getters."""
    checks = checks or {}
    if any(v in checks for v in leaf_names(tree)) and default is None:
        raise ValueError("a constrained leaf needs a default to fall back to")
    if "leaf" in tree:
        label, check = tree["leaf"], checks.get(tree.get("name", tree["leaf"]))
        if check is None:
            return lambda o, *_: label
        return lambda o, *_: label if check(o) else default
    return _node(tree, descriptors, checks, default)


def leaf_names(tree: Tree) -> list[str]:
    """The variants at the leaves, left to right (a leaf's ``name`` where its value is not the name)."""
    if "leaf" in tree:
        return [tree.get("name", tree["leaf"])]
    return leaf_names(tree["low"]) + leaf_names(tree["high"])


def _child(tree: Tree, sources: tuple[tuple[str, ...], ...], checks: dict[str, Callable[[Any], bool]],
           default: Any) -> tuple[Callable[[Any], Any] | None, Any, Callable[[Any], bool] | None]:
    """(node, None, None) for a subtree; (None, value, check or None) for a leaf, returned by its parent."""
    if "leaf" in tree:
        return None, tree["leaf"], checks.get(tree.get("name", tree["leaf"]))
    return _node(tree, sources, checks, default), None, None


def _c_getter(src: tuple[str, ...]) -> Callable[[Any], Any] | None:
    """A C getter of the value where one reads it (an attribute, an item: no Python frame), else None."""
    if src[0] == "attr":
        return operator.attrgetter(src[1])
    if src[0] == "item":
        return operator.itemgetter(src[1])
    return None


def _getter(src: tuple[str, ...]) -> Callable[[Any], Any]:
    """``_c_getter``, else a closure (device features and host attributes of a pair, any other descriptor)."""
    get = _c_getter(src)
    if get is not None:
        return get
    if src[0] == "device":
        key = src[1]
        return lambda o: o[1][key]
    if src[0] == "host" and src[1] == "attr":
        name = src[2]
        return lambda o: getattr(o[0], name)
    return lambda o: _value(o, src)


def _node(tree: Tree, sources: tuple[tuple[str, ...], ...], checks: dict[str, Callable[[Any], bool]],
          default: Any) -> Callable[..., Any]:
    src, t = sources[int(tree["feature"])], float(tree["threshold"])
    two = _two_levels(tree, sources, checks, default)
    if two is not None:
        return two
    low, lo, lo_check = _child(tree["low"], sources, checks, default)
    high, hi, hi_check = _child(tree["high"], sources, checks, default)
    if src[0] == "ratio":  # node's body with the division inline: a getter closure would add a frame a call
        num, den = operator.attrgetter(src[1]), operator.attrgetter(src[2])

        def ratio_node(o: Any, *_: Any) -> Any:
            if num(o) / den(o) <= t:
                if low is not None:
                    return low(o)
                return lo if lo_check is None or lo_check(o) else default
            if high is not None:
                return high(o)
            return hi if hi_check is None or hi_check(o) else default
        return ratio_node
    get = _getter(src)

    def node(o: Any, *_: Any) -> Any:
        if get(o) <= t:
            if low is not None:
                return low(o)
            return lo if lo_check is None or lo_check(o) else default
        if high is not None:
            return high(o)
        return hi if hi_check is None or hi_check(o) else default
    return node


def _two_levels(tree: Tree, sources: tuple[tuple[str, ...], ...], checks: dict[str, Callable[[Any], bool]],
                default: Any) -> Callable[..., Any] | None:
    """A node whose two children are nodes over leaves, all three over attributes or items (a depth-2 tree over
    host metadata), as one closure: three C getter calls at most, no call of a child. None for any other shape."""
    kids = (tree["low"], tree["high"])
    if any("leaf" in k or "leaf" not in k["low"] or "leaf" not in k["high"] for k in kids):
        return None
    gets = [_c_getter(sources[int(n["feature"])]) for n in (tree, *kids)]
    if any(g is None for g in gets):
        return None
    get, get_lo, get_hi = gets
    t, t_lo, t_hi = (float(n["threshold"]) for n in (tree, *kids))
    leaves = [(k[side]["leaf"], checks.get(k[side].get("name", k[side]["leaf"]))) for k in kids
              for side in ("low", "high")]
    (a, ca), (b, cb), (c, cc), (d, cd) = leaves

    def node(o: Any, *_: Any) -> Any:
        if get(o) <= t:  # type: ignore[misc]
            if get_lo(o) <= t_lo:  # type: ignore[misc]
                return a if ca is None or ca(o) else default
            return b if cb is None or cb(o) else default
        if get_hi(o) <= t_hi:  # type: ignore[misc]
            return c if cc is None or cc(o) else default
        return d if cd is None or cd(o) else default
    return node
