"""The compiled predictors reproduce scikit-learn's predictions exactly, and survive a JSON round trip."""

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier

from adaptune.adaptive.compiled import compile_predictor, export_model, predict_many
from adaptune.adaptive.models import fit_model, fraction_of_oracle

ESTIMATORS = {
    "svm": lambda: SVC(C=8.0, gamma=0.7),
    "tree": lambda: DecisionTreeClassifier(random_state=0),
    "forest": lambda: RandomForestClassifier(n_estimators=15, random_state=0),
    "boosting": lambda: GradientBoostingClassifier(n_estimators=10, random_state=0),
    "knn": lambda: KNeighborsClassifier(n_neighbors=5),
}


@pytest.mark.parametrize("n_classes", [2, 3, 5, 6])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_compiled_matches_sklearn_on_random_data(name, n_classes):
    rng = np.random.default_rng(n_classes)
    spread = np.array([1.0, 10.0, 1000.0, 0.01])
    x = rng.normal(size=(90, 4)) * spread
    y = rng.integers(0, n_classes, 90)
    scaler = MinMaxScaler((-1, 1)).fit(x)
    est = ESTIMATORS[name]().fit(scaler.transform(x), y)
    labels = np.arange(n_classes) + 3  # class positions map to arbitrary label indices
    predict = compile_predictor(export_model(est, scaler.scale_, scaler.min_, labels))
    queries = rng.normal(size=(400, 4)) * spread * 1.5  # also outside the training range
    expected = labels[est.predict(scaler.transform(queries))]
    assert np.array_equal(predict_many(predict, queries), expected)


def test_cost_aware_model_picks_argmax_of_predicted_relative_performance():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, size=(40, 2))
    # label 0 is best left of 0.5, label 1 right of it; label 2 always 3x slower
    costs = np.stack([1 + (x[:, 0] > 0.5) * 2.0, 1 + (x[:, 0] <= 0.5) * 2.0, np.full(40, 3.0)], axis=1)
    model = fit_model("cost", x, costs)
    test = rng.uniform(0, 1, size=(200, 2))
    chosen = model.predict(test)
    truth = np.stack([1 + (test[:, 0] > 0.5) * 2.0, 1 + (test[:, 0] <= 0.5) * 2.0, np.full(200, 3.0)], axis=1)
    assert np.mean(fraction_of_oracle(truth, chosen)) > 0.9
    assert not np.any(chosen == 2)


def test_single_winning_label_gives_constant_model():
    x = np.arange(10.0)[:, None]
    costs = np.stack([np.ones(10), np.full(10, 2.0)], axis=1)
    model = fit_model("svm", x, costs)
    assert model.params.kind == "constant"
    assert set(model.predict(np.array([[100.0], [-5.0]]))) == {0}


def test_rows_where_everything_failed_are_dropped_and_all_failed_is_an_error():
    x = np.arange(6.0)[:, None]
    costs = np.array([[1, 2], [2, 1], [np.inf, np.inf], [1, 2], [2, 1], [1, 2]], float)
    assert fit_model("tree", x, costs).params.kind == "forest"
    with pytest.raises(ValueError, match="every variant failed"):
        fit_model("svm", x, np.full((6, 2), np.inf))


@pytest.mark.parametrize("name", ["tree", "forest", "boosting"])
def test_trees_too_deep_to_compile_use_the_array_traversal_with_the_same_labels(name, monkeypatch):
    import adaptune.adaptive.compiled as compiled

    rng = np.random.default_rng(7)
    x = rng.normal(size=(80, 3))
    y = rng.integers(0, 3, 80)
    scaler = MinMaxScaler((-1, 1)).fit(x)
    est = ESTIMATORS[name]().fit(scaler.transform(x), y)
    params = export_model(est, scaler.scale_, scaler.min_, np.arange(3))
    queries = rng.normal(size=(200, 3)) * 2
    fast = predict_many(compile_predictor(params), queries)
    monkeypatch.setattr(compiled, "MAX_COMPILED_DEPTH", -1)  # force the fallback for any depth
    slow = predict_many(compile_predictor(params), queries)
    assert np.array_equal(fast, slow)
    assert np.array_equal(slow, est.predict(scaler.transform(queries)))


def test_generated_tree_source_holds_only_numbers_and_feature_names():
    from adaptune.adaptive.compiled import _tree_source

    x = np.random.default_rng(3).normal(size=(40, 2))
    est = DecisionTreeClassifier(random_state=0).fit(x, (x[:, 0] > x[:, 1]).astype(int))
    params = export_model(est, np.ones(2), np.zeros(2), np.arange(2))
    source = _tree_source("trees", params.arrays, str)
    words = {w for w in __import__("re").findall(r"[A-Za-z_]\w*", source)}
    assert words <= {"def", "trees", "if", "else", "return", "x0", "x1", "t0", "e", "inf"}


def test_auto_prefers_the_cost_aware_model_when_tied_and_the_best_otherwise():
    from adaptune.adaptive.models import pick_kind

    assert pick_kind({"svm": 0.951, "cost": 0.948, "tree": 0.90}) == "cost"
    assert pick_kind({"svm": 0.97, "cost": 0.948, "tree": 0.969}) == "tree"  # tree and svm tie; tree is faster
    assert pick_kind({"svm": 0.99, "cost": 0.948, "boosting": 0.95}) == "svm"
    with pytest.raises(ValueError, match="no model kinds"):
        pick_kind({})
