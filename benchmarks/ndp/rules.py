"""Cheaper full rules for the prefetched first call of SpMV and segmented reduce (issue 24), offline.

    python -m benchmarks.ndp.rules                     # -> out/ndp/ndp_rules_offline.{json,md}
    python -m benchmarks.ndp.rules --profile smoke     # fewer resampled inputs and repeats

Why: on the H100 the first call with the features landed cost 2.7-2.9 us for SpMV and segmented reduce (full
rule: the ``cost`` model) and 0.5-0.7 us for scan and compaction (a distilled tree), 6.1-6.8 % of segmented
reduce's 42 us median run. Is the rule the reason? Two parts:

``rules``: candidate full rules fitted on the training inputs of the recorded run (``RECORDED``), each with its
cross-validated fraction of oracle on those inputs (5 folds x 3 shuffles; a student is distilled again inside
every fold from the teacher fitted on that fold, ``adaptune.kernels.distilled.distil_students``; the cost model's
on the same folds), which of them ``first_call.fit_rules`` takes (the largest), its mean fraction of oracle over
the recorded test inputs (which only score the rules), and the cost of one pick timed here (fastest of 7 loops):
the ``cost`` model; the distilled tree over all features (depth and leaf size by cross-validation); students of
``first_call.STUDENT_RECIPES``: trees fitted to the ``cost`` model's predicted relative performance on
``resampled`` inputs (training inputs jittered by a share of each feature's range, ``distilled.student_tree``).

``handoff``: live on PoCL at one ragged input, interleaved ``ROUNDS`` x ``repeats`` times per rule: fix, wait until the pick
lands (made on the callback's thread), one call; the call's host cost with the ``cost`` model, with the
model's student tree and the distilled tree as the full rule (the call itself reads the landed pick either way).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import compile_predictor
from adaptune.kernels import distilled
from adaptune.lang.ndp.prefetched import PrefetchedSelector, compile_rule
from benchmarks.harness import fastest_us, markdown_table, parse_study_args, study_parser, write_results
from benchmarks.ndp import first_call
from benchmarks.ndp import run as ndp_run

RECORDED = Path("benchmarks/ndp/results/ndp_h100.json")
MIN_LEAF = 5  # a student's leaves (``first_call.STUDENT_RECIPES`` the recipes)
SEEDS = (0, 1, 2)  # resampling seeds of a student's test fraction spread
ROUNDS = 3  # handoff: rounds of ``repeats`` calls a rule (the host's load drifts: the spread between rounds)


def rules_part(doc: dict[str, Any], name: str, n: int) -> list[dict[str, Any]]:
    labels, xtr, ttr, xte, tte = first_call.matrices(doc["benchmarks"][name])
    tree = distilled.distil(xtr, ttr, labels)
    recipes = [{**r, "resampled": n, "min_leaf": MIN_LEAF} for r in first_call.STUDENT_RECIPES]
    fit = distilled.distil_students(xtr, ttr, labels, recipes)
    candidates: list[tuple[str, Any, float, dict[str, Any] | None]] = [
        ("cost model", fit["teacher"], fit["teacher_cv_fraction_of_oracle"], None),
        (f"distilled tree (depth {tree['max_depth']})", tree["tree"], tree["cv_fraction_of_oracle"], None)]
    candidates += [(f"student: depth {s['recipe']['max_depth']}, jitter {s['recipe']['jitter']}", s["tree"],
                    s["cv_fraction_of_oracle"], s["recipe"]) for s in fit["students"]]
    chosen_rule = (candidates[1][0] if tree["cv_fraction_of_oracle"] >= first_call.TARGET  # first_call.fit_rules's
                   else max(candidates[1:] + candidates[:1], key=lambda c: c[2])[0])  # choice, in its order
    teacher = compile_predictor(fit["teacher"])
    teacher_picks = [labels[int(teacher(r))] for r in xte]
    rows = []
    for what, rule, cv, recipe in candidates:
        pick = compile_rule(rule, labels, xtr.shape[1])
        chosen = [pick(list(r)) for r in xte]
        vec = list(xte[len(xte) // 2])
        rows.append({"computation": name, "rule": what, "cv_fraction": cv, "chosen_by_cv": what == chosen_rule,
                     "test_fraction": float(first_call.fraction(tte, labels, chosen).mean()),
                     "test_fraction_seeds": None if recipe is None else " / ".join(
                         f"{_test_fraction(fit['teacher'], xtr, xte, tte, labels, recipe, seed):.4f}"
                         for seed in SEEDS),
                     "agrees_with_cost_model": float(np.mean([a == b for a, b in zip(chosen, teacher_picks,
                                                                                      strict=True)])),
                     "leaves": None if not isinstance(rule, dict) else distilled.tree_leaves(rule),
                     "pick_us": fastest_us(lambda p=pick, v=vec: p(v), 500)})
        rows[-1]["meets"] = rows[-1]["cv_fraction"] >= first_call.TARGET and rows[-1]["test_fraction"] >= first_call.TARGET
    return rows


def _test_fraction(teacher: Any, xtr: np.ndarray, xte: np.ndarray, tte: np.ndarray, labels: list[str],
                   recipe: dict[str, Any], seed: int) -> float:
    """The test fraction of the student of this recipe distilled with another resampling seed (the rule's own
    is seed 0): how much of a student's score is the draw of its resampled inputs."""
    tree = distilled.student_tree(teacher, xtr, labels, seed=seed, **recipe)
    return float(first_call.fraction(tte, labels, [distilled.predict(tree, r) for r in xte]).mean())


def handoff_part(doc: dict[str, Any], repeats: int) -> list[dict[str, Any]]:
    """The call right after the pick lands on PoCL, with the ``cost`` model, its student and the distilled tree as
    the full rule (``first_call.fit_rules``'s)."""
    b = ndp_run.Bench("opencl")
    prog = ndp_run.row_sums.generate(b.dev, reuse_outputs=True)
    available = ndp_run.labels_of(b, "segreduce", prog)
    labels, xtr, ttr, _, _ = first_call.matrices(doc["benchmarks"]["segreduce"], set(available))
    fit = first_call.fit_rules(labels, xtr, ttr, prog.n_host_features)
    values, offsets, _ = ndp_run.ragged(b, "power_law", 20000, 20.0, 5)
    arrays = (b.upload(values), b.upload(offsets))
    sels = {what: PrefetchedSelector(prog, {lab: available[lab] for lab in labels}, fit["host"], fit[key])
            for what, key in (("cost model", "cost"), ("student tree", "student"), ("distilled tree", "tree"))}
    samples: dict[str, list[list[float]]] = {k: [[] for _ in range(ROUNDS)] for k in sels}
    for sel in sels.values():  # warm: compile the kernels, first callbacks
        first_call.wait_landed(sel.fix(*arrays))
        sel.forget(*arrays)
    for rep in range(repeats * ROUNDS):
        for what in list(sels)[:: 1 if rep % 2 else -1]:
            sel = sels[what]
            b.dev.synchronize()
            first_call.wait_landed(sel.fix(*arrays))
            t0 = time.perf_counter()
            sel.select(*arrays)
            samples[what][rep // repeats].append((time.perf_counter() - t0) * 1e6)
            sel.forget(*arrays)
    vec = prog.features(*arrays)
    return [{"full_rule": what, "first_call_us_p50": statistics.median(sum(v, [])),
             "p10": float(np.percentile(sum(v, []), 10)), "p90": float(np.percentile(sum(v, []), 90)),
             "p50_per_round": " / ".join(f"{statistics.median(r):.2f}" for r in v),
             "pick_us": fastest_us(lambda s=sels[what]: s.pick_full(vec), 500), "repeats": len(sum(v, []))}
            for what, v in samples.items()]


def main(argv: list[str] | None = None) -> None:
    p = study_parser("ndp", __doc__.splitlines()[0])
    p.add_argument("--recorded", default=str(RECORDED))
    p.add_argument("--resampled", type=int, default=4000, help="resampled inputs a student is fitted on")
    p.add_argument("--repeats", type=int, default=100, help="handoff: calls per rule")
    args = parse_study_args(p, argv, smoke={"resampled": 500, "repeats": 10})
    run(args)


def run(args: argparse.Namespace) -> Path:
    doc = json.loads(Path(args.recorded).read_text())
    rows = [r for name in ("spmv", "segreduce") for r in rules_part(doc, name, args.resampled)]
    handoff = handoff_part(doc, args.repeats)
    data = {"recorded": args.recorded, "recorded_commit": doc.get("commit"), "resampled": args.resampled,
            "rows": rows, "handoff": handoff}
    table = (markdown_table(rows, ["computation", "rule", "cv_fraction", "chosen_by_cv", "test_fraction",
                                   "test_fraction_seeds", "agrees_with_cost_model", "leaves", "pick_us", "meets"])
             + "\n\nThe call right after the pick landed, segmented reduce on PoCL (interleaved):\n\n"
             + markdown_table(handoff, ["full_rule", "first_call_us_p50", "p10", "p90", "p50_per_round", "pick_us",
                                      "repeats"]))
    return write_results(args.out, "ndp_rules_offline", data, table=table,
                         title="NDP first call: cheaper full rules, offline", notes=NOTES.format(seeds=", ".join(map(str, SEEDS)), **vars(args)))


NOTES = """Rules fitted on the training inputs of {recorded}; `cv_fraction`: cross-validated on those inputs (students:
the teacher refitted and the student distilled again in each fold); `test_fraction`: over its test inputs (recorded
times); `meets`: both >= 0.95; `chosen_by_cv`: the full rule `first_call.fit_rules` takes (the tree where its `cv_fraction`
reaches 0.95, else the largest `cv_fraction`, the tree then the students then the model on a tie); the test inputs only score the rules. Students: {resampled}
resampled inputs; `test_fraction_seeds`: the same recipe distilled with resampling seeds {seeds} (seed 0 is the rule's). `pick_us`: one pick timed on this host (the
landed call does not run it: the pick is made on the finishing thread as the features land). Handoff: see the
module docstring of benchmarks/ndp/rules.py."""


if __name__ == "__main__":
    main()
