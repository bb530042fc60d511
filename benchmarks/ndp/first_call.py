"""The prefetched first call of an NDP computation (issue 24): rules, fractions of oracle and the live protocol,
shared by the main run (``run.py``: every computation's ``first_call`` entry in ``ndp_<device>.json``) and the
prefetched study (``prefetched.py``: offline from a recorded run, or live at the median inputs).

The selector is ``adaptune.lang.ndp.prefetched.PrefetchedSelector``: ``fix`` when the inputs are bound starts the
row-spread features (a side stream on CUDA), the host finishes them and the full rule's pick as they land (on
another thread), and a call is a gate: that pick once it is there, else the host rule over sizes. Both rules are
fitted on the training inputs only: the host rule is the distilled tree over the sizes
(``Program.n_host_features``); the full rule the distilled tree over all features where its cross-validated
fraction of oracle on the training inputs reaches ``TARGET`` (or there are no device features), else the candidate
of largest cross-validated fraction of oracle on the training inputs (5 folds x 3 shuffles, all on the same
folds; the first, the cheaper, on a tie): that tree, the ``cost`` model's students of
``STUDENT_RECIPES`` (``distilled.distil_students``: a student's pick costs ~0.5-1 us instead of the model's 5-10 us
of NumPy on the thread that finishes the features) and the ``cost`` model itself. The test inputs only score the
chosen rules.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from adaptune.kernels import distilled
from adaptune.lang.ndp.prefetched import PrefetchedSelector
from benchmarks.harness import time_host

BUDGET = 0.05  # selection share of the median run (issue 24)
TARGET = 0.95  # mean fraction of oracle
# Students of the ``cost`` model tried for the full rule (``distilled.student_tree`` options; min_leaf 5, 4000
# resampled inputs): the grid of ``rules.py`` since 65e4978, fixed before the test inputs were looked at again.
STUDENT_RECIPES: tuple[dict[str, Any], ...] = tuple({"jitter": j, "max_depth": d} for j in (0.05, 0.1)
                                                    for d in (4, 6, 8))


def matrices(result: Mapping[str, Any], keep: set[str] | None = None
             ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(labels, train features, train times, test features, test times) of one computation's results in
    ``ndp_<device>.json`` (``keep``: only these labels, for a device that lacks some)."""
    labels = [lab["label"] if isinstance(lab, dict) else lab for lab in (result.get("labels") or result["names"])]
    labels = [lab for lab in labels if keep is None or lab in keep]

    def matrix(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        x = np.array([r["features"] for r in records], float)
        c = np.array([[r["gen_ms"].get(k) if r["gen_ms"].get(k) is not None else np.inf for k in labels]
                      for r in records], float)
        return x, c

    return (labels, *matrix(result["records"]["train"]), *matrix(result["records"]["test"]))


def fit_rules(labels: list[str], x_train: np.ndarray, t_train: np.ndarray, n_host: int) -> dict[str, Any]:
    """The host tree over the first ``n_host`` features and the full rule (see the module docstring)."""
    host = distilled.distil(x_train[:, :n_host], t_train, labels)
    tree = distilled.distil(x_train, t_train, labels)
    out = {"host": host["tree"], "host_cv": host["cv_fraction_of_oracle"], "host_depth": host["max_depth"],
           "tree": tree["tree"], "tree_cv": tree["cv_fraction_of_oracle"]}
    if n_host == x_train.shape[1] or tree["cv_fraction_of_oracle"] >= TARGET:  # sizes only, or a tree good enough:
        # the cheapest rule, nothing dearer fitted
        out.update(full=tree["tree"], full_kind="tree", full_cv=tree["cv_fraction_of_oracle"], candidates_cv={})
        return out
    fit = distilled.distil_students(x_train, t_train, labels, STUDENT_RECIPES)
    student = max(fit["students"], key=lambda s: s["cv_fraction_of_oracle"])  # the first on a tie
    out.update(cost=fit["teacher"], cost_cv=fit["teacher_cv_fraction_of_oracle"], student=student["tree"],
               student_cv=student["cv_fraction_of_oracle"], student_recipe=student["recipe"],
               candidates_cv={"tree": tree["cv_fraction_of_oracle"],
                              **{recipe_name(s["recipe"]): s["cv_fraction_of_oracle"] for s in fit["students"]},
                              "cost": fit["teacher_cv_fraction_of_oracle"]})
    kind = max(("tree", "student", "cost"), key=lambda k: out[f"{k}_cv"])  # the first (the cheaper) on a tie
    out.update(full=out[kind] if kind != "tree" else tree["tree"], full_kind=kind, full_cv=out[f"{kind}_cv"])
    return out


def recipe_name(recipe: Mapping[str, Any]) -> str:
    return f"student (depth {recipe['max_depth']}, jitter {recipe['jitter']})"


def picks(sel: PrefetchedSelector, x: np.ndarray, n_host: int) -> tuple[list[str], list[str]]:
    """Per input: the host rule's label and the full rule's (what the gate returns on either path)."""
    return [sel.pick_host(list(r[:n_host])) for r in x], [sel.pick_full(list(r)) for r in x]


def fraction(times: np.ndarray, labels: list[str], chosen: list[str], extra_ms: float = 0.0) -> np.ndarray:
    """Per input: best label's time / (chosen label's time + ``extra_ms``)."""
    best = np.min(times, axis=1)
    got = times[np.arange(len(times)), [labels.index(c) for c in chosen]]
    return np.where(np.isfinite(got), best / (got + extra_ms), 0.0)


def median_index(times: np.ndarray, labels: list[str], chosen: list[str]) -> int:
    """The median test input by the selector's own run time (the issue's 'median run')."""
    run_ms = times[np.arange(len(times)), [labels.index(c) for c in chosen]]
    return int(np.argsort(run_ms)[len(run_ms) // 2])


def wait_landed(pending: Any, limit_s: float = 1.0) -> float | None:
    """Seconds until the pending pick is on the host (polled, giving the GIL to the finishing thread); None
    when it did not land within ``limit_s``."""
    t0 = time.perf_counter()
    while pending.value is None:
        if time.perf_counter() - t0 > limit_s:
            return None
        time.sleep(0)  # gives the GIL to the finishing thread
    return time.perf_counter() - t0


def measure(sel: PrefetchedSelector, arrays: tuple[Any, ...], repeats: int, sync: Callable[[], None]
            ) -> dict[str, Any]:
    """The live protocol at one input, ``repeats`` times: fix, one call right after it (before the features land,
    honestly: the host rule unless they were there already), wait until they land, one call then (each call a
    first call for that fix: the selector forgets the input in between); then the warm cost of either path, the
    old ``feature_us`` column's method (p50 of 25 calls after one)."""
    wait_landed(sel.fix(*arrays))  # warm: the spread's kernels compile on first use
    sel.forget(*arrays)
    samples = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        pending = sel.fix(*arrays)
        t1 = time.perf_counter()
        ready = pending.value is not None
        early = sel.select(*arrays)
        t2 = time.perf_counter()
        landed_s = wait_landed(pending)
        t3 = time.perf_counter()
        late = sel.select(*arrays)
        t4 = time.perf_counter()
        samples.append({"fix_us": (t1 - t0) * 1e6, "early_us": (t2 - t1) * 1e6, "early_label": early,
                        "landed_before_early_call": ready,
                        "landed_after_fix_us": None if landed_s is None else (t3 - t0) * 1e6,
                        "late_us": (t4 - t3) * 1e6, "late_label": late,
                        "late_used_features": sel.used_features(*arrays)})
        sel.forget(*arrays)
    warm_not_landed = time_host(lambda: sel.select(*arrays), warmup=1, repeats=25)["p50"] * 1e6
    wait_landed(sel.fix(*arrays))
    warm_landed = time_host(lambda: sel.select(*arrays), warmup=1, repeats=25)["p50"] * 1e6
    sel.forget(*arrays)

    def spread(key: str) -> dict[str, float] | None:
        vals = [s[key] for s in samples if s[key] is not None]
        return None if not vals else {"p50": float(np.median(vals)), "p10": float(np.percentile(vals, 10)),
                                      "p90": float(np.percentile(vals, 90))}

    def most(key: str) -> str:
        return statistics.mode(s[key] for s in samples)

    return {"label_landed": most("late_label"), "label_not_landed": most("early_label"),
            "first_call_us_landed": spread("late_us"), "first_call_us_not_landed": spread("early_us"),
            "warm_us_landed": warm_landed, "warm_us_not_landed": warm_not_landed, "fix_us": spread("fix_us"),
            "landed_after_fix_us": spread("landed_after_fix_us"),
            "landed_share_of_repeats": float(np.mean([s["late_used_features"] for s in samples])),
            "landed_before_early_call_share": float(np.mean([s["landed_before_early_call"] for s in samples])),
            "samples": samples}


def evaluate(prog: Any, available: Mapping[str, tuple[str, Mapping[str, Any]]], result: Mapping[str, Any],
             rebuild: Callable[[int], tuple[Any, ...]], sync: Callable[[], None], repeats: int) -> dict[str, Any]:
    """A computation's first call in the main run: rules fitted on its training records, the selector's mean
    fraction of oracle over the test records (features landed / not), and ``measure`` at the median test input
    (by the landed pick's recorded time; ``rebuild(index)`` makes that test input again), its shares over the
    recorded run times at that input of the label each path picked there."""
    labels, xtr, ttr, xte, tte = matrices(result, set(available))
    fit = fit_rules(labels, xtr, ttr, prog.n_host_features)
    sel = PrefetchedSelector(prog, {lab: available[lab] for lab in labels}, fit["host"], fit["full"])
    host_picks, full_picks = picks(sel, xte, prog.n_host_features)
    med = median_index(tte, labels, full_picks)
    live = measure(sel, rebuild(med), repeats, sync)
    run_ms = {lab: float(tte[med, labels.index(lab)]) for lab in labels}
    landed_ms, early_ms = run_ms[live["label_landed"]], run_ms[live["label_not_landed"]]
    out = {"full_rule": fit["full_kind"], "full_rule_cv": fit["full_cv"], "host_rule_cv": fit["host_cv"],
           "full_rule_candidates_cv": fit["candidates_cv"], "student_recipe": fit.get("student_recipe"),
           "host_rule": f"tree depth {fit['host_depth']} over {prog.n_host_features} size feature(s)",
           "mean_fraction_of_oracle_landed": float(fraction(tte, labels, full_picks).mean()),
           "mean_fraction_of_oracle_not_landed": float(fraction(tte, labels, host_picks).mean()),
           "median_test_index": med, "run_ms_landed": landed_ms, "run_ms_not_landed": early_ms,
           "oracle_ms_at_median": float(np.min(tte[med])), **live}
    if fit["full_kind"] != "tree":  # control: the same protocol with the other of the cost model and its student
        # as the full rule (~1 us a pick on the finishing thread against 5-10 us): does the rule's cost reach the call?
        other = "cost" if fit["full_kind"] == "student" else "student"
        other_sel = PrefetchedSelector(prog, sel.labels, fit["host"], fit[other])
        control = measure(other_sel, rebuild(med), repeats, sync)
        out["control"] = {
            "full_rule": other, "cv": fit[f"{other}_cv"], "label_landed": control["label_landed"],
            "mean_fraction_of_oracle_landed": float(fraction(tte, labels, picks(other_sel, xte, prog.n_host_features)[1]).mean()),
            "first_call_us_landed": control["first_call_us_landed"], "warm_us_landed": control["warm_us_landed"]}
    for path, ms in (("landed", landed_ms), ("not_landed", early_ms)):
        first = out[f"first_call_us_{path}"]
        out[f"first_call_share_{path}"] = None if first is None else first["p50"] * 1e-3 / ms
        out[f"warm_share_{path}"] = out[f"warm_us_{path}"] * 1e-3 / ms
    out["meets_first_call_landed"] = bool(out["first_call_share_landed"] is not None
                                          and out["first_call_share_landed"] <= BUDGET
                                          and out["mean_fraction_of_oracle_landed"] >= TARGET)
    out["meets_warm_landed"] = bool(out["warm_share_landed"] <= BUDGET
                                    and out["mean_fraction_of_oracle_landed"] >= TARGET)
    return out
