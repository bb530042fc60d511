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


@pytest.mark.parametrize("n_classes", [2, 3, 5])
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
