"""Fitted models as plain arrays, and fast single-row predictors built from those arrays.

Why: a generic scikit-learn ``predict`` costs 50-200 µs per call (input validation, 2-D reshaping,
dispatch); run-time selection must decide in a few microseconds. Each supported model is exported
to a :class:`ModelParams` (arrays + scalars, the exact persisted form) and :func:`compile_predictor`
turns those arrays into a closure of a handful of NumPy operations (kernels) or list look-ups
(tree branches). A loaded model therefore predicts through exactly the same code as a freshly
trained one. Hand-written on purpose: it is faster than ``predict`` and reproduces its labels
(tests compare against scikit-learn on random data).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Predictor = Callable[[np.ndarray], int]
"""Maps one raw (unscaled) feature vector to a label index."""

KINDS = ("constant", "svm", "tree", "forest", "boosting", "knn", "kernel_ridge")


@dataclass(frozen=True)
class ModelParams:
    """Everything needed to predict: ``kind``, named arrays and named scalars (all JSON-friendly)."""

    kind: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    scalars: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- export


def export_model(estimator: Any, scale: np.ndarray, offset: np.ndarray, classes: np.ndarray) -> ModelParams:
    """Turn a fitted scikit-learn estimator (trained on ``x * scale + offset``) into arrays.

    ``classes`` maps the estimator's class positions (or regression outputs) to label indices.
    """
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    base = {"scale": np.asarray(scale, float), "offset": np.asarray(offset, float),
            "classes": np.asarray(classes, np.int64)}
    if isinstance(estimator, SVC):
        return ModelParams("svm", {**base, **_svm_arrays(estimator)}, {"gamma": float(estimator._gamma)})
    if isinstance(estimator, DecisionTreeClassifier):
        return ModelParams("forest", {**base, **_trees_arrays([estimator])}, {"n_trees": 1, "kind": "tree"})
    if isinstance(estimator, RandomForestClassifier):
        arrays = _trees_arrays(list(estimator.estimators_))
        return ModelParams("forest", {**base, **arrays}, {"n_trees": len(estimator.estimators_)})
    if isinstance(estimator, GradientBoostingClassifier):
        return ModelParams("boosting", {**base, **_boosting_arrays(estimator)},
                           {"learning_rate": float(estimator.learning_rate)})
    if isinstance(estimator, KNeighborsClassifier):
        fit_x = np.asarray(estimator._fit_X, float)
        return ModelParams("knn", {**base, "points": fit_x, "point_class": np.asarray(estimator._y, np.int64)},
                           {"k": int(estimator.n_neighbors), "n_classes": len(estimator.classes_)})
    if isinstance(estimator, KernelRidge):
        return ModelParams("kernel_ridge", {**base, "points": np.asarray(estimator.X_fit_, float),
                                            "dual": np.atleast_2d(np.asarray(estimator.dual_coef_, float).T).T},
                           {"gamma": float(estimator.gamma)})
    raise TypeError(f"cannot compile a {type(estimator).__name__}; supported: SVC, DecisionTreeClassifier, "
                    "RandomForestClassifier, GradientBoostingClassifier, KNeighborsClassifier, KernelRidge")


def constant_model(label: int, n_features: int) -> ModelParams:
    """A model for training data with a single winning label."""
    return ModelParams("constant", {"scale": np.ones(n_features), "offset": np.zeros(n_features),
                                    "classes": np.array([label], np.int64)}, {})


def _svm_arrays(svc: Any) -> dict[str, np.ndarray]:
    """One-vs-one decision rows as one dense matrix over all support vectors (libsvm's layout)."""
    sv = np.asarray(svc.support_vectors_, float)
    dual = np.asarray(svc.dual_coef_, float)
    n_support = np.asarray(svc.n_support_, np.int64)
    start = np.concatenate([[0], np.cumsum(n_support)])
    k = len(n_support)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    rows = np.zeros((len(pairs), sv.shape[0]))
    for p, (i, j) in enumerate(pairs):
        rows[p, start[i]:start[i + 1]] = dual[j - 1, start[i]:start[i + 1]]
        rows[p, start[j]:start[j + 1]] = dual[i, start[j]:start[j + 1]]
    intercept = np.asarray(svc.intercept_, float).copy()
    if k == 2:  # scikit-learn flips the binary case's public signs; back to "positive votes class i"
        rows, intercept = -rows, -intercept
    return {"support_vectors": sv, "ovo_rows": rows, "intercept": intercept,
            "pairs": np.asarray(pairs, np.int64).reshape(-1, 2)}


def _trees_arrays(trees: list[Any], normalise: bool = True) -> dict[str, np.ndarray]:
    """Concatenate trees into global node arrays; leaves point to themselves so traversal can run
    a fixed number of levels for every tree at once."""
    left, right, feature, threshold, value, roots = [], [], [], [], [], []
    base = 0
    depth = 0
    for est in trees:
        t = est.tree_
        n = t.node_count
        leaf = t.children_left == -1
        ids = np.arange(n) + base
        left.append(np.where(leaf, ids, t.children_left + base))
        right.append(np.where(leaf, ids, t.children_right + base))
        feature.append(np.where(leaf, 0, t.feature))
        threshold.append(np.where(leaf, np.inf, t.threshold))
        v = np.asarray(t.value[:, 0, :], float)
        value.append(v / v.sum(axis=1, keepdims=True) if normalise else v)  # predict_proba's normalisation
        roots.append(base)
        base += n
        depth = max(depth, int(t.max_depth))
    return {"left": np.concatenate(left).astype(np.int64), "right": np.concatenate(right).astype(np.int64),
            "feature": np.concatenate(feature).astype(np.int64), "threshold": np.concatenate(threshold),
            "value": np.concatenate(value), "roots": np.asarray(roots, np.int64),
            "depth": np.asarray([depth], np.int64)}


def _boosting_arrays(gb: Any) -> dict[str, np.ndarray]:
    stages = gb.estimators_  # (n_stages, K) regression trees
    arrays = _trees_arrays([t for row in stages for t in row], normalise=False)
    x0 = np.zeros((1, gb.n_features_in_))
    arrays["init"] = np.asarray(gb._raw_predict_init(x0)[0], float)
    arrays["per_stage"] = np.asarray([stages.shape[1]], np.int64)
    return arrays


# --------------------------------------------------------------------------------------- compile


def compile_predictor(params: ModelParams) -> Predictor:
    """The fast single-row predictor for ``params``; thread-safe (closes over read-only arrays)."""
    builder = _BUILDERS.get(params.kind)
    if builder is None:
        raise ValueError(f"unknown model kind {params.kind!r}; known: {', '.join(KINDS)}")
    return builder(params)


def predict_many(predict: Predictor, features: np.ndarray) -> np.ndarray:
    """Label indices for each row of ``features`` (evaluation and training use this)."""
    return np.fromiter((predict(row) for row in np.asarray(features, float)), np.int64, len(features))


def _constant(p: ModelParams) -> Predictor:
    label = int(p.arrays["classes"][0])

    def predict(x: np.ndarray) -> int:
        return label

    return predict


def _svm(p: ModelParams) -> Predictor:
    a = p.arrays
    gamma = float(p.scalars["gamma"])
    scale, offset, classes = a["scale"], a["offset"], a["classes"].tolist()
    sv = a["support_vectors"]
    # exp(-g|s - x|^2) = exp(2g s.x - g|s|^2 - g|x|^2): one mat-vec instead of a difference matrix;
    # every step after the first product works in place on the call's own temporaries (thread-safe,
    # no further allocation): 7 NumPy calls in all, the fewest that keep scikit-learn's rounding.
    sv2 = 2.0 * gamma * sv
    gss = gamma * np.einsum("ij,ij->i", sv, sv)
    rows = np.ascontiguousarray(a["ovo_rows"])
    neg_b = (-a["intercept"]).tolist()
    pairs = [tuple(q) for q in a["pairs"].tolist()]
    k = len(classes)
    exp, dot, subtract = np.exp, np.dot, np.subtract

    if k == 2:
        nb0, c0, c1 = neg_b[0], classes[0], classes[1]
        row0 = rows[0].copy()

        def predict2(x: np.ndarray) -> int:
            xs = x * scale
            xs += offset
            u = dot(sv2, xs)
            subtract(u, gss + gamma * dot(xs, xs), out=u)
            exp(u, out=u)
            return c0 if dot(row0, u) > nb0 else c1

        return predict2

    def predict(x: np.ndarray) -> int:
        xs = x * scale
        xs += offset
        u = dot(sv2, xs)
        subtract(u, gss + gamma * dot(xs, xs), out=u)
        exp(u, out=u)
        votes = [0] * k
        for dp, nbp, (i, j) in zip(dot(rows, u).tolist(), neg_b, pairs, strict=True):
            votes[i if dp > nbp else j] += 1
        return classes[votes.index(max(votes))]

    return predict


MAX_COMPILED_DEPTH = 60
"""Deeper trees are traversed by the array loop: Python's parser limits nested blocks (100 levels)."""


def _tree_source(name: str, a: dict[str, np.ndarray], leaf: Callable[[int], str]) -> str:
    """Source of ``def name(x0, x1, ...)``: every tree as nested ``if`` statements on its own
    numeric arrays (ints and ``repr`` of floats only, never text from a file), each assigning its
    leaf's result to ``t<i>``; returns the tuple of those results.

    Why hand-written: branching on Python floats costs ~30 ns a node, while one NumPy call costs
    ~700 ns, so a tree of depth 8 decides in well under a microsecond.
    """
    left, right = a["left"].tolist(), a["right"].tolist()
    feature, threshold = a["feature"].tolist(), a["threshold"].tolist()
    n_features = len(a["scale"])
    lines = [f"def {name}({', '.join(f'x{i}' for i in range(n_features))}):"]

    def emit(node: int, out: str, indent: int) -> None:
        pad = "    " * indent
        if left[node] == node:
            lines.append(f"{pad}{out} = {leaf(node)}")
            return
        lines.append(f"{pad}if x{int(feature[node])} <= {float(threshold[node])!r}:")
        emit(int(left[node]), out, indent + 1)
        lines.append(f"{pad}else:")
        emit(int(right[node]), out, indent + 1)

    roots = a["roots"].tolist()
    for t, root in enumerate(roots):
        emit(int(root), f"t{t}", 1)
    lines.append(f"    return ({', '.join(f't{t}' for t in range(len(roots)))},)")
    return "\n".join(lines) + "\n"


def _compile_trees(a: dict[str, np.ndarray], leaf: Callable[[int], str]) -> Callable[..., tuple[Any, ...]] | None:
    """The trees of ``a`` as one generated Python function, or None when they are too deep."""
    if int(a["depth"][0]) > MAX_COMPILED_DEPTH:
        return None
    namespace: dict[str, Any] = {}
    code = compile(_tree_source("trees", a, leaf), "<adaptune compiled trees>", "exec")
    exec(code, {"__builtins__": {}}, namespace)  # noqa: S102 - source generated above from numbers only
    return namespace["trees"]


def _array_leaves(a: dict[str, np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """Leaf of every tree by vectorised level-by-level traversal (for trees too deep to compile)."""
    left, right, feature, threshold = a["left"], a["right"], a["feature"], a["threshold"]
    roots, depth = a["roots"], int(a["depth"][0])

    def leaves(xs: np.ndarray) -> np.ndarray:
        node = roots
        for _ in range(depth):
            node = np.where(xs[feature[node]] <= threshold[node], left[node], right[node])
        return node

    return leaves


def _forest(p: ModelParams) -> Predictor:
    a = p.arrays
    scale, offset, classes = a["scale"], a["offset"], a["classes"]
    n_trees = int(p.scalars["n_trees"])
    f32 = np.float32
    if n_trees == 1:  # a single tree: leaves return the class directly
        leaf_class = classes[np.argmax(a["value"], axis=1)].tolist()
        trees = _compile_trees(a, lambda node: str(int(leaf_class[node])))
        if trees is not None:
            def predict_tree(x: np.ndarray) -> int:
                return trees(*(x * scale + offset).astype(f32).tolist())[0]  # trees compare float32 inputs

            return predict_tree

    value = a["value"]
    class_list = classes.tolist()
    compiled = _compile_trees(a, str)
    leaves = _array_leaves(a)

    def predict(x: np.ndarray) -> int:
        xs = (x * scale + offset).astype(f32)
        node = list(compiled(*xs.tolist())) if compiled is not None else leaves(xs)
        proba = np.cumsum(value[node], axis=0)[-1] / n_trees  # sequential sum, as scikit-learn adds
        return class_list[int(np.argmax(proba))]

    return predict


def _boosting(p: ModelParams) -> Predictor:
    a = p.arrays
    scale, offset, classes = a["scale"], a["offset"], a["classes"].tolist()
    per_stage = int(a["per_stage"][0])
    step = float(p.scalars["learning_rate"]) * a["value"][:, 0]
    init = a["init"][None, :]
    compiled = _compile_trees(a, str)
    leaves = _array_leaves(a)
    f32 = np.float32

    def predict(x: np.ndarray) -> int:
        xs = (x * scale + offset).astype(f32)
        node = list(compiled(*xs.tolist())) if compiled is not None else leaves(xs)
        raw = np.concatenate([init, step[node].reshape(-1, per_stage)]).cumsum(axis=0)[-1]
        if per_stage == 1:
            return classes[1] if raw[0] >= 0 else classes[0]
        return classes[int(np.argmax(raw))]

    return predict


def _knn(p: ModelParams) -> Predictor:
    a = p.arrays
    scale, offset, classes = a["scale"], a["offset"], a["classes"].tolist()
    points, point_class = a["points"], a["point_class"]
    k, n_classes = int(p.scalars["k"]), int(p.scalars["n_classes"])
    norms = np.einsum("ij,ij->i", points, points)
    twice = 2.0 * points

    def predict(x: np.ndarray) -> int:
        xs = x * scale + offset
        dist = norms - np.dot(twice, xs)  # |p - x|^2 minus the constant |x|^2
        near = np.argpartition(dist, k - 1)[:k] if k < len(dist) else slice(None)
        return classes[int(np.argmax(np.bincount(point_class[near], minlength=n_classes)))]

    return predict


def _kernel_ridge(p: ModelParams) -> Predictor:
    a = p.arrays
    gamma = float(p.scalars["gamma"])
    scale, offset, classes = a["scale"], a["offset"], a["classes"].tolist()
    points, dual = a["points"], a["dual"]
    p2 = 2.0 * gamma * points
    gpp = gamma * np.einsum("ij,ij->i", points, points)
    dual_t = np.ascontiguousarray(dual.T)
    exp, dot, subtract = np.exp, np.dot, np.subtract

    def predict(x: np.ndarray) -> int:
        xs = x * scale
        xs += offset
        u = dot(p2, xs)
        subtract(u, gpp + gamma * dot(xs, xs), out=u)  # in place on this call's temporaries, as the SVM
        exp(u, out=u)
        return classes[int(dot(dual_t, u).argmax())]

    return predict


def kernel_ridge_scores(params: ModelParams, features: np.ndarray) -> np.ndarray:
    """Predicted relative performance of every label (rows: inputs); the cost-aware model's output."""
    a = params.arrays
    xs = np.asarray(features, float) * a["scale"] + a["offset"]
    d2 = (xs**2).sum(1)[:, None] + (a["points"] ** 2).sum(1)[None, :] - 2.0 * xs @ a["points"].T
    return np.exp(-float(params.scalars["gamma"]) * d2) @ a["dual"]


_BUILDERS: dict[str, Callable[[ModelParams], Predictor]] = {
    "constant": _constant, "svm": _svm, "forest": _forest, "boosting": _boosting, "knn": _knn,
    "kernel_ridge": _kernel_ridge,
}
