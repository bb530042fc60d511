"""CodeVariant end to end: labelling with failures, dispatch, constraint fallback, store reuse,
parameterised variants, persistence, asynchronous features, thread safety, active learning.

The toy problem reports a deterministic "work" metric (through the ``metrics`` hook) so that the
labels, and therefore the assertions, do not depend on timing noise; one test also times real code.
"""

import json
import threading

import numpy as np
import pytest

from adaptune.adaptive import CodeVariant, ModelFileError, evaluate, learning_curves
from adaptune.adaptive.features import FeatureError
from adaptune.adaptive.labelling import Label
from adaptune.store import Store

CALLS: list[str] = []


def linear(n, kind):
    CALLS.append("linear")
    return (2 * n, 10.0 + n)


def quadratic(n, kind):
    CALLS.append("quadratic")
    return (2 * n, 1.0 + n * n / 50.0)


def special(n, kind):
    CALLS.append("special")
    return (2 * n, 1.0)


def fragile(n, kind):
    CALLS.append("fragile")
    if n > 80:
        raise RuntimeError("fragile fails on large inputs")
    return (2 * n + (1 if kind == "odd" else 0), 5.0)


def only_special(n, kind):
    return kind == "special"


def size(n, kind):
    return float(n)


def is_special(n, kind):
    return 1.0 if kind == "special" else 0.0


def is_odd(n, kind):
    return 1.0 if kind == "odd" else 0.0


def make_cv(**options) -> CodeVariant:
    cv = CodeVariant("toy", objective="work", metrics=lambda run: {"work": run()[1]},
                     verify=lambda ref, out: ref[0] == out[0], **options)
    cv.variant(linear, default=True)
    cv.variant(quadratic)
    cv.variant(special)
    cv.variant(fragile)
    cv.constraint(special)(only_special)
    for f in (size, is_special, is_odd):
        cv.feature(f)
    return cv


def truth(n, kind):
    """The exact best work for an input, by construction."""
    options = [10.0 + n, 1.0 + n * n / 50.0]
    if kind == "special":
        options.append(1.0)
    if n <= 80 and kind != "odd":
        options.append(5.0)
    return min(options)


def inputs(ns, kinds=("plain", "special", "odd")):
    return [(f"n{n}-{k}", (n, k)) for n in ns for k in kinds]


TRAIN = inputs(range(1, 121, 8))
TEST = inputs(range(3, 121, 5))


def test_training_records_every_failure_and_never_crashes():
    cv = make_cv()
    report = cv.train(TRAIN, model="svm", repeats=1, progress=False)
    statuses = {(f["label"], f["status"]) for f in report.failures}
    assert ("special", "constraint") in statuses
    assert ("fragile", "launch_error") in statuses
    assert ("fragile", "wrong_result") in statuses
    assert report.labels == ["linear", "quadratic", "special", "fragile"]
    assert report.labels_used == len(TRAIN)


@pytest.mark.parametrize("model", ["svm", "cost", "auto"])  # auto fits every kind
def test_models_reach_the_oracle_on_disjoint_test_inputs(model):
    cv = make_cv()
    cv.train(TRAIN, model=model, repeats=1, progress=False)
    report = evaluate(cv, TEST, repeats=1, progress=False)
    assert report.n_inputs == len(TEST)
    assert sum(report.buckets.values()) == len(TEST)
    assert set(report.fixed_variants) == {"linear", "quadratic", "special", "fragile"}
    # the model beats every fixed variant; the labels are exact, so it is near the oracle
    assert report.mean_fraction_of_oracle > max(report.fixed_variants.values())
    assert report.mean_fraction_of_oracle > 0.9
    # the per-input oracle is the analytic one
    for row in report.per_input:
        n, kind = row["input"][1:].split("-")
        assert row["oracle_cost"] == pytest.approx(truth(int(n), kind))


def test_dispatch_runs_the_chosen_variant_and_falls_back_when_its_constraint_fails():
    cv = make_cv()
    assert cv(7, "plain") == (14, 17.0)  # untrained: the default runs
    cv.train(TRAIN, model="tree", repeats=1, progress=False)
    CALLS.clear()
    assert cv(100, "special")[0] == 200 and CALLS == ["special"]
    assert cv.select(100, "special") == Label("special")
    assert cv.select(110, "plain") == Label("linear")
    # a model that always says "special": where the constraint fails, the default runs instead
    from adaptune.adaptive.compiled import constant_model

    cv.install_model(constant_model(2, 3), cv.model_labels, "constant")
    CALLS.clear()
    assert cv(5, "plain") == (10, 15.0) and CALLS == ["linear"]
    assert cv.select(5, "plain") == Label("linear")
    assert cv.select(5, "special") == Label("special")


def test_labels_are_stored_and_retraining_measures_nothing(tmp_path):
    db = tmp_path / "labels.db"
    cv = make_cv()
    first = cv.train(TRAIN, model="svm", db=db, repeats=1, progress=False)
    assert first.measured > 0
    CALLS.clear()
    second = make_cv().train(TRAIN, model="tree", db=db, repeats=1, progress=False)
    assert second.measured == 0 and second.reused == first.measured
    assert CALLS == []
    with Store(db) as store:
        problems = store.problems()
        assert [p.name for p in problems] == ["toy"]
        assert len(store.inputs(problems[0].id)) == len(TRAIN)
        configs = {r.config["variant"] for r in store.results(problems[0].id)}
    assert configs == {"linear", "quadratic", "special", "fragile"}


def test_save_and_load_predict_identically_and_mismatches_are_refused(tmp_path):
    cv = make_cv()
    cv.train(TRAIN, model="forest", repeats=1, progress=False)
    path = cv.save(tmp_path / "toy.adaptune.json")
    doc = json.loads(path.read_text())
    assert doc["features"] == ["size", "is_special", "is_odd"]
    assert doc["provenance"]["inputs"] == [name for name, _ in TRAIN]
    loaded = CodeVariant.load(path, variants=[linear, quadratic, special, fragile],
                              features=[size, is_special, is_odd], constraints={special: only_special},
                              objective="work", metrics=lambda run: {"work": run()[1]})
    rng = np.random.default_rng(0)
    for x in rng.uniform([0, 0, 0], [150, 1, 1], size=(300, 3)):
        assert loaded.predict(x) == cv.predict(x)
    for _, args in TEST:
        assert loaded.select(*args) == cv.select(*args)

    other = CodeVariant("toy")
    other.variant(linear)
    other.variant(quadratic)
    other.feature(size)
    with pytest.raises(ModelFileError, match="features"):
        other.load_model(path)
    other.feature(is_special)
    other.feature(is_odd)
    with pytest.raises(ModelFileError, match="variants"):
        other.load_model(path)
    with pytest.raises(ModelFileError, match="were not passed"):
        CodeVariant.load(path, variants=[linear, quadratic], features=[size, is_special, is_odd])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelFileError, match="not a readable"):
        make_cv().load_model(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ModelFileError, match="not an adaptune"):
        make_cv().load_model(bad)


def test_fix_inputs_joins_asynchronous_features_and_dispatch_is_thread_safe():
    cv = make_cv(parallel_features=True)
    cv.train(TRAIN, model="svm", repeats=1, progress=False)
    cv.fix_inputs(100, "special")
    assert cv() == cv(100, "special")
    args = [a for _, a in TEST] * 5
    expected = [cv(*a) for a in args]
    got: dict[int, list] = {}

    def worker(k):
        got[k] = [cv(*a) for a in args]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(got[k] == expected for k in range(4))


def test_variant_with_a_space_gets_its_configuration_searched_and_dispatched():
    from adaptune.space import Space

    cv = CodeVariant("blocked", objective="work", metrics=lambda run: {"work": run()[1]},
                     verify=lambda ref, out: ref[0] == out[0])
    cv.variant(lambda n: (n, 50.0), name="plain", default=True)

    @cv.variant(space=Space({"block": [1, 2, 4, 8, 16, 32]}), strategy="brute_force")
    def blocked(n, *, block):
        return (n, 1.0 + abs(np.log2(block) - np.log2(max(1, n // 10))))  # best block ~ n/10

    cv.feature(lambda n: float(n), name="n")
    train = [(f"n{n}", (n,)) for n in (10, 20, 40, 80, 160, 320) for _ in range(1)]
    report = cv.train(train, model="knn", repeats=1, progress=False)
    assert "blocked[block=32]" in report.labels and "blocked[block=1]" in report.labels
    assert cv.select(330) == Label.of("blocked", {"block": 32})
    assert cv.select(9) == Label.of("blocked", {"block": 1})
    assert cv(330)[0] == 330
    result = evaluate(cv, [(f"t{n}", (n,)) for n in (15, 35, 70, 300)], repeats=1, progress=False)
    assert result.mean_fraction_of_oracle > 0.7


def test_active_learning_uses_at_most_n_labels_and_reports_a_curve():
    cv = make_cv()
    pool = inputs(range(1, 121, 3))
    report = cv.train(pool, model="svm", active=10, holdout=TEST[::3], repeats=1, progress=False)
    assert report.labels_used == 10
    assert [p["labels"] for p in report.learning_curve] == list(range(4, 11))
    assert all(0 <= p["fraction_of_oracle"] <= 1 for p in report.learning_curve)


def test_learning_curves_replay_bvsb_and_random_on_a_measured_pool():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (60, 2))
    costs = np.stack([1 + 2 * (x[:, 0] > 0.5), 1 + 2 * (x[:, 0] <= 0.5)], axis=1).astype(float)
    curves = learning_curves(x[:40], costs[:40], costs[:40], x[40:], costs[40:], max_labels=12,
                             random_repeats=2)
    assert set(curves) == {"bvsb", "random"}
    assert curves["bvsb"][-1]["labels"] == 12
    assert curves["bvsb"][-1]["fraction_of_oracle"] > 0.8


def test_real_timing_labels_numpy_sorts():
    cv = CodeVariant("sort")
    cv.variant(lambda a: np.sort(a, kind="quicksort"), name="quick", default=True)
    cv.variant(lambda a: np.sort(a, kind="stable"), name="stable")
    cv.feature(lambda a: float(a.size), name="n")
    rng = np.random.default_rng(0)
    data = [(f"k{i}", (rng.integers(0, 1000, 200 * (i + 1)),)) for i in range(4)]
    report = cv.train(data, repeats=3, min_sample_ms=0.2, progress=False)
    assert report.measured == 8 and not report.failures
    a = rng.integers(0, 9, 50)
    assert np.array_equal(cv(a), np.sort(a))


def test_bad_input_gives_one_clear_error():
    cv = make_cv()
    with pytest.raises(ValueError, match="unknown model"):
        cv.train(TRAIN, model="magic", progress=False)
    with pytest.raises(ValueError, match="input #0"):
        cv.train([42], progress=False)
    with pytest.raises(ValueError, match="unique"):
        cv.train([("a", (1, "plain")), ("a", (2, "plain"))], progress=False)
    with pytest.raises(KeyError, match="not a variant"):
        cv.constraint("nope")
    with pytest.raises(ValueError, match="no model"):
        cv.select(1, "plain")
    nan_cv = make_cv()
    nan_cv.feature(lambda n, kind: float("nan"), name="broken_feature")
    with pytest.raises(FeatureError, match="broken_feature"):
        nan_cv.train(TRAIN, progress=False)
    empty = CodeVariant("empty")
    empty.variant(linear)
    with pytest.raises(ValueError, match="no features"):
        empty.train(TRAIN, progress=False)


def test_near_tied_labels_get_extra_interleaved_rounds_and_clear_winners_do_not():
    from adaptune.adaptive.labelling import MeasureOptions, measure_labels

    work = {"a": 10.0, "b": 10.2, "c": 20.0}  # a and b within 5 %, c far behind
    cv = CodeVariant("tie", objective="work", metrics=lambda run: {"work": run()}, verify=False)
    for name in work:
        cv.variant(lambda name=name: work[name], name=name, default=name == "a")
    results = measure_labels(cv, (), cv.plain_labels(), MeasureOptions(repeats=2, tie_repeats=3))
    counts = {lab.variant: len(res.samples) for lab, res in results.items()}
    assert counts == {"a": 5, "b": 5, "c": 2}
    off = measure_labels(cv, (), cv.plain_labels(), MeasureOptions(repeats=2, tie_repeats=0))
    assert {len(res.samples) for res in off.values()} == {2}


def test_bvsb_explores_when_the_model_predicts_one_label_for_the_whole_pool():
    from adaptune.adaptive.active import run_loop

    g = np.linspace(0.0, 1.0, 7)
    features = np.array([(a, b) for a in g for b in g])
    rare = (np.abs(features - 0.5) < 0.2).all(axis=1)  # label 1 wins only in the centre
    costs = np.stack([np.where(rare, 3.0, 1.0), np.where(rare, 1.0, 3.0)], axis=1)

    def lookup(rows):
        return costs[rows], costs[rows]

    result = run_loop(features, lookup, 6, n_initial=2, select="bvsb", kind="svm", seed=0, init_seed=0)
    assert not rare[result.rows[:2]].any()  # the seeds (corners) all prefer label 0
    assert rare[result.rows].any()  # a constant model's margins say nothing: the loop must explore
