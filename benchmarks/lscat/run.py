"""Scores on the LS-CAT H100 table: the seed's metric for baselines and models, grouped CV over seeds.

    python -m benchmarks.lscat.run [--data data/lscat_h100] [--seeds 5] [--out DIR]
    python -m benchmarks.lscat.run --profile smoke          # 2 seeds, source features only (about a minute)
    python -m benchmarks.lscat.run --kinds seq --merge     # token-sequence model (needs torch, the corpus)

Writes OUT/lscat_h100.json (+ .md, .png; default OUT: out/lscat/, the table was measured on an H100); the
committed run is benchmarks/lscat/results/. With --work it first (re)computes the kernel features
(source + PTX) from the git-ignored working set (benchmarks.lscat.workset) into
data/lscat_h100/features.csv.gz, which is committed so the scores can be recomputed without the corpus.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import math
import time
from pathlib import Path

import numpy as np

from adaptune.adaptive.device_features import cpu_device
from adaptune.predict import corpus, features, metric, model, sequence
from benchmarks.harness import git_commit, parse_study_args, study_parser

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _read_csv(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as fh:
        return {r["kernel"]: r for r in csv.DictReader(fh)}


def token_components(texts: list[str], dims: int = 32) -> np.ndarray:
    """Bag of token 1-2-grams (TF-IDF) reduced to ``dims`` SVD components: a token model without order.
    Unsupervised and fit on all working-set kernels (no timings are used)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(token_pattern=sequence.TOKEN_PATTERN, ngram_range=(1, 2), min_df=3,
                          sublinear_tf=True)
    return TruncatedSVD(dims, random_state=0).fit_transform(vec.fit_transform(texts))


def kernel_texts(work: Path) -> dict[str, str]:
    """Comment-free source of each working-set kernel (our prelude removed), keyed by kernel id, in the
    working set's order: the text both token models read."""
    out = {}
    for line in (work / "workset.jsonl").read_text().splitlines():
        item = json.loads(line)
        out[item["id"]] = sequence.strip_comments(item["source"][len(corpus.PRELUDE):])
    return out


def write_features(work: Path, kernels_csv: Path, out: Path) -> None:
    """Source + PTX features of every working-set kernel, plus device attributes from the run."""
    attrs = _read_csv(kernels_csv) if kernels_csv.exists() else {}
    rows = []
    for line in (work / "workset.jsonl").read_text().splitlines():
        item = json.loads(line)
        f = {"kernel": item["id"], "repo": item["repo"]}
        f.update(features.source_features(item["source"], corpus.parse_params(item["params"])))
        ptx = work / "ptx" / (item["id"].replace("/", "_") + ".ptx")
        if ptx.exists():
            f.update(features.ptx_features(ptx.read_text()))
        a = attrs.get(item["id"], {})
        f.update(features.attr_features({k: int(float(a[k])) for k in features.ATTR_FEATURES if a.get(k)}))
        rows.append(f)
    texts = list(kernel_texts(work).values())
    for r, z in zip(rows, token_components(texts), strict=True):
        r.update({f"tok_{j}": float(v) for j, v in enumerate(z)})
    names = sorted({k for r in rows for k in r} - {"kernel", "repo"})
    with gzip.open(out, "wt", newline="") as fh:
        w = csv.DictWriter(fh, ["kernel", "repo", *names])
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()})


def refresh_attr_features(kernels_csv: Path, path: Path) -> int:
    """Rewrite the ``attr_`` columns of ``features.csv.gz`` from kernels.csv (device attributes of kernels
    merged after the features were computed, e.g. run 5), leaving source/PTX/token columns as they are.
    Needs no corpus. Returns the number of kernels whose attributes changed."""
    attrs = _read_csv(kernels_csv)
    with gzip.open(path, "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        fields, rows = list(reader.fieldnames or []), list(reader)
    changed = 0
    for r in rows:
        a = attrs.get(r["kernel"], {})
        new = features.attr_features({k: int(float(a[k])) for k in features.ATTR_FEATURES if a.get(k)})
        new_s = {k: str(round(v, 5)) for k, v in new.items()}
        if any(str(round(float(r[k] or 0), 5)) != v for k, v in new_s.items()):
            changed += 1
        r.update(new_s)
    with gzip.open(path, "wt", newline="") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        w.writerows(rows)
    return changed


def load_features(path: Path) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    feats, repos = {}, {}
    with gzip.open(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            k = r.pop("kernel")
            repos[k] = r.pop("repo")
            feats[k] = {n: float(v) for n, v in r.items() if v != ""}
    return feats, repos


def noise_twins(s: model.Samples, kinfo: dict[str, dict[str, str]]) -> dict:
    """1-D kernels run (b, b) exactly like (b*b, 1): the spread of those twin timings is measurement noise.
    Also the score an oracle gets if it must take the twin of the best shape (a noise ceiling)."""
    one = np.array([kinfo.get(k, {}).get("two_d") == "0" for k in s.kernel])
    if not one.any():
        return {}
    out: dict = {"samples_1d": int(one.sum())}
    twin = {corpus.SHAPES.index((b, b)): corpus.SHAPES.index((b * b, 1)) for b in (8, 16, 24, 32)}
    twin.update({v: k for k, v in twin.items()})
    logs = np.concatenate([np.abs(np.log(s.times[one, i] / s.times[one, j])) for i, j in twin.items() if i < j])
    out["median_abs_log_ratio"] = float(np.median(logs))
    out["p90_abs_log_ratio"] = float(np.quantile(logs, 0.9))
    perf = s.perf[one]
    best = perf.argmax(axis=1)
    has = np.array([b in twin for b in best])
    if has.any():
        out["oracle_via_twin_score"] = float(np.mean([perf[i, twin[b]] for i, b in enumerate(best) if b in twin]))
        out["oracle_via_twin_samples"] = int(has.sum())
    return out


def two_sweeps(s: model.Samples, kinfo: dict[str, dict[str, str]], x: np.ndarray, groups: np.ndarray,
               seeds: int, n_jobs: int = 1) -> dict:
    """Runs 3- time every shape twice, in two interleaved sweeps. Choosing on one sweep and scoring on the
    other is the honest ceiling of any chooser that sees one measurement; averaging the sweeps shows what
    more repeats a shape change. ``x`` is the best feature set's matrix for all samples."""
    if s.times2 is None:
        return {}
    two = np.isfinite(s.times2).all(axis=1)
    if two.sum() < 50:
        return {}
    t1, t2 = s.times[two], s.times2[two]
    p1, p2 = s.perf[two], metric.relative_performance(t2)
    pm = metric.relative_performance(np.sqrt(t1 * t2))
    b1, b2 = p1.argmax(axis=1), p2.argmax(axis=1)
    logs = np.abs(np.log(t1 / t2))
    out: dict = {
        "n_samples": int(two.sum()), "n_kernels": int(len(set(s.kernel[two]))),
        "sweep_median_abs_log_ratio": float(np.median(logs)), "sweep_p90_abs_log_ratio": float(np.quantile(logs, 0.9)),
        "oracle_sweep1_scored_on_sweep2": metric.score(p2, b1),
        "oracle_sweep2_scored_on_sweep1": metric.score(p1, b2),
        "best_shape_same_in_both_sweeps": float((b1 == b2).mean()),
        "always_1024_sweep1": metric.score(p1, metric.always(p1)),
        "always_1024_sweep2": metric.score(p2, metric.always(p2)),
        "always_1024_mean_of_sweeps": metric.score(pm, metric.always(pm)),
    }
    sub = model.Samples(s.kernel[two], s.size[two], np.sqrt(t1 * t2), pm, s.n_rows, 0)
    out["twins_mean_of_sweeps"] = noise_twins(sub, kinfo)
    out["twins_sweep1"] = noise_twins(model.Samples(s.kernel[two], s.size[two], t1, p1, s.n_rows, 0), kinfo)
    g = groups[two]
    for name, train, score_on in (("train_sweep1", p1, {"sweep2": p2}), ("train_mean_of_sweeps", pm, {})):
        runs = [model.grouped_cv(x[two], train, g, seed, score_on=score_on, n_jobs=n_jobs) for seed in range(seeds)]
        out[name] = {k: {"mean": float(np.mean([r[k] for r in runs])), "sd": float(np.std([r[k] for r in runs],
                                                                                          ddof=1))}
                     for k in runs[0]}
        print(f"two sweeps, {name}: " + ", ".join(f"{k} {v['mean']:.4f} ± {v['sd']:.4f}"
                                                   for k, v in out[name].items()), flush=True)
    return out


RUN_GROUPS = {"runs 1-2": ("1", "2"), "runs 3-4": ("3", "4"), "run 5": ("5",)}


def _mean_sd(v: list[float]) -> dict[str, float]:
    return {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0}


def per_run(s: model.Samples, kinfo: dict[str, dict[str, str]], occ: np.ndarray,
            model_choices: list[np.ndarray]) -> dict[str, dict]:
    """Scores and noise ceilings of each group of device runs (runs 1-2, 3-4 and 5 differ in buffer rule,
    sweeps and standby handling). The model's choices are the out-of-fold choices of the CV on all runs
    (one array a seed), only scored on the run's samples. Ceilings: an oracle that picks the best shape
    from one sweep and is scored on the other (runs with two sweeps), and an oracle forced to take the
    twin of the best shape (1-D kernels, every run)."""
    run_of = np.array([kinfo.get(k, {}).get("run", "") for k in s.kernel])
    fixed = int(s.perf.mean(axis=0).argmax())
    out: dict[str, dict] = {}
    for name, ids in RUN_GROUPS.items():
        m = np.isin(run_of, ids)
        if not m.any():
            continue
        p = s.perf[m]
        r: dict = {"n_kernels": int(len(set(s.kernel[m]))), "n_samples": int(m.sum()),
                   "score_always_1024": metric.score(p, metric.always(p)), "score_random": metric.random_score(p),
                   "score_occupancy": metric.score(p, occ[m]), "score_best_fixed_all_data": metric.score(
                       p, metric.always(p, fixed)),
                   "score_model": _mean_sd([metric.score(p, c[m]) for c in model_choices])}
        sub = model.Samples(s.kernel[m], s.size[m], s.times[m], p, 0, 0)
        r["twins"] = noise_twins(sub, kinfo)
        if s.times2 is not None:
            two = m & np.isfinite(s.times2).all(axis=1)
            if two.sum() >= 50:
                p1, p2 = s.perf[two], metric.relative_performance(s.times2[two])
                b1, b2 = p1.argmax(axis=1), p2.argmax(axis=1)
                r.update({
                    "n_samples_two_sweeps": int(two.sum()),
                    "sweep_median_abs_log_ratio": float(np.median(np.abs(np.log(s.times[two] / s.times2[two])))),
                    "best_shape_same_in_both_sweeps": float((b1 == b2).mean()),
                    "ceiling_oracle_sweep1_on_sweep2": metric.score(p2, b1),
                    "ceiling_oracle_sweep2_on_sweep1": metric.score(p1, b2),
                    "always_1024_on_sweep2": metric.score(p2, metric.always(p2)),
                    "score_model_on_sweep2": _mean_sd([metric.score(p2, c[two]) for c in model_choices]),
                })
                r["model_share_of_ceiling_sweep2"] = r["score_model_on_sweep2"]["mean"] / r[
                    "ceiling_oracle_sweep1_on_sweep2"]
        out[name] = r
    return out


FEATURE_SETS = {
    "size_only": ("",),
    "source": ("src_", "par_"),
    "source+ptx": ("src_", "par_", "ptx_"),
    "source+ptx+attrs": ("src_", "par_", "ptx_", "attr_"),
    "tokens": ("tok_",),
    "source+tokens": ("src_", "par_", "tok_"),
}


PREVIOUS_ROUND = """\
## Earlier: round 2 (runs 1-4; 2,716 kernels, 8,070 samples; scored at commit 5c4404a)

| chooser | seed's score (mean min/t) |
|---|---|
| always 1024 | 0.8593 |
| best fixed shape (32x32, chosen on all data) | 0.8679 |
| random (expected) | 0.8106 |
| CUDA occupancy API | 0.8609 |
| forest:size_only | 0.8728 ± 0.0010 |
| forest:source | 0.9029 ± 0.0006 |
| forest:source+ptx | 0.9035 ± 0.0002 |
| forest:source+ptx+attrs | 0.9038 ± 0.0002 |
| forest:tokens | 0.9007 ± 0.0005 |
| forest:source+tokens | 0.9036 ± 0.0010 |

Two sweeps then (runs 3-4, 5,975 samples): oracle of sweep 1 on sweep 2 0.9170, of sweep 2 on sweep 1
0.9109; model trained on sweep 1 scored on sweep 2 0.9006 ± 0.0007; trained and scored on the mean of
both 0.9104 ± 0.0007. Forests ran with n_jobs=-1 then (same seeds; results do not depend on threads).

## Earlier: round 1 (runs 1-2 only; 701 kernels, 2,088 samples; scored at commit 3768e67)

| chooser | seed's score (mean min/t) |
|---|---|
| oracle | 1.0000 |
| always 1024 | 0.8832 |
| best fixed shape (512x1, chosen on all data) | 0.8890 |
| random (expected) | 0.8305 |
| CUDA occupancy API | 0.8843 |
| forest:size_only | 0.8905 ± 0.0017 |
| forest:source | 0.9199 ± 0.0019 |
| forest:source+ptx | 0.9193 ± 0.0010 |
| forest:source+ptx+attrs | 0.9192 ± 0.0006 |
| forest:tokens | 0.9147 ± 0.0027 |
| forest:source+tokens | 0.9205 ± 0.0021 |
| most common best shape (train folds) | 0.8890 |

Noise then: twin shapes differ by a median of 2.5 % (p90 14.5 %); oracle via twin 0.9105.
"""


def score_sequence(s: model.Samples, groups: np.ndarray, texts: dict[str, str], seeds: int,
                   cfg: sequence.SeqConfig, on_seed=None) -> tuple[dict, list[np.ndarray]]:
    """The token-sequence model on the forests' folds and seeds (``model.group_folds``), one torch thread.
    ``on_seed(summary)`` is called after each seed so a long run leaves its finished seeds behind."""
    import torch

    missing = sorted(set(s.kernel) - set(texts))
    if missing:
        raise SystemExit(f"{len(missing)} scored kernels have no source in the working set, e.g. {missing[:3]}")
    tokens = {k: sequence.tokenize(texts[k]) for k in set(s.kernel)}
    runs, choices, t0 = [], [], time.time()
    summary: dict = {}
    for seed in range(seeds):
        t1 = time.time()
        choice, common = sequence.grouped_cv_choices(tokens, s.kernel, s.size, s.perf, groups, seed, cfg)
        choices.append(choice)
        runs.append({"score_model": metric.score(s.perf, choice), "geomean_model": metric.geomean_ratio(s.perf, choice),
                     "score_most_common": metric.score(s.perf, common), "seconds": time.time() - t1})
        summary = {k: _mean_sd([r[k] for r in runs]) for k in runs[0]}
        summary.update({"per_seed": [r["score_model"] for r in runs], "seeds_done": len(runs),
                        "wall_s": time.time() - t0, "cpu": cpu_device().name, "torch_threads": torch.get_num_threads(),
                        "torch": torch.__version__, "config": dataclasses.asdict(cfg),
                        "n_tokens_median": float(np.median([len(v) for v in tokens.values()])),
                        "share_truncated": float(np.mean([len(v) > cfg.max_len for v in tokens.values()]))})
        print(f"seq seed {seed}: score {runs[-1]['score_model']:.4f} ({runs[-1]['seconds']:.0f}s)", flush=True)
        if on_seed:
            on_seed(summary)
    return summary, choices


def merge_sequence(res: dict, summary: dict, commit: str, out: Path) -> None:
    """Add the sequence model's scores to an existing results JSON (the forests' keys stay as they are)."""
    res["models"]["seq:tokens"] = {k: summary[k] for k in ("score_model", "geomean_model", "score_most_common")}
    res["score_sequence_model"] = summary["score_model"]["mean"]
    res["score_sequence_model_sd"] = summary["score_model"]["sd"]
    res["sequence_model"] = {**summary, "commit": commit,
                             "measured_on": "this session's shared 2-core CPU host (torch CPU, 1 thread)"}
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    write_report(res, out)


def write_report(res: dict, out: Path) -> None:
    """Markdown table + bar chart of the scores."""
    lines = [f"# LS-CAT block-size prediction on {res['device']}", "",
             f"Measured {res.get('measured_utc', '')}; scored at commit {res['commit']}; "
             f"{res['n_kernels']} kernels, {res['n_samples']} (kernel, size) samples, {res['n_rows']} ok rows, "
             f"{res['n_repositories']} repositories; {res['cv']}; {res['seeds']} seeds (mean ± sd).", "",
             "| chooser | seed's score (mean min/t) |", "|---|---|",
             "| oracle | 1.0000 |",
             f"| always 1024 | {res['score_always_1024']:.4f} |",
             f"| best fixed shape ({res['best_fixed_shape']}, chosen on all data) | "
             f"{res['score_always_best_fixed']:.4f} |",
             f"| random (expected) | {res['score_random']:.4f} |",
             f"| CUDA occupancy API | {res['score_occupancy']:.4f} |"]
    for k, v in res["models"].items():
        lines.append(f"| {k} | {v['score_model']['mean']:.4f} ± {v['score_model']['sd']:.4f} |")
    lines.append(f"| most common best shape (train folds) | {res['score_most_common']:.4f} |")
    nz = res.get("noise_twin_shapes", {})
    if nz:
        lines += ["", f"Noise: identical launches (twin shapes of 1-D kernels) differ by a median of "
                  f"{100 * (math.exp(nz['median_abs_log_ratio']) - 1):.1f} % (p90 "
                  f"{100 * (math.exp(nz['p90_abs_log_ratio']) - 1):.1f} %); an oracle forced to take the twin "
                  f"of the best shape scores {nz.get('oracle_via_twin_score', float('nan')):.4f}."]
    tw = res.get("two_sweeps", {})
    if tw.get("n_samples"):
        def pm(d: dict) -> str:
            return f"{d['mean']:.4f} ± {d['sd']:.4f}"
        lines += ["", f"## Two interleaved sweeps (runs 3-5: {tw['n_kernels']} kernels, {tw['n_samples']} samples)",
                  "", "Every shape timed twice, in two sweeps over the 20 shapes. Sweep-to-sweep difference of one "
                  f"launch: median {100 * (math.exp(tw['sweep_median_abs_log_ratio']) - 1):.1f} %, p90 "
                  f"{100 * (math.exp(tw['sweep_p90_abs_log_ratio']) - 1):.1f} %; the best shape is the same in "
                  f"both sweeps for {100 * tw['best_shape_same_in_both_sweeps']:.0f} % of samples.", "",
                  "| chooser | scored on | score |", "|---|---|---|",
                  f"| oracle of sweep 1 | sweep 2 | {tw['oracle_sweep1_scored_on_sweep2']:.4f} |",
                  f"| oracle of sweep 2 | sweep 1 | {tw['oracle_sweep2_scored_on_sweep1']:.4f} |",
                  f"| always 1024 | sweep 1 / sweep 2 / mean | {tw['always_1024_sweep1']:.4f} / "
                  f"{tw['always_1024_sweep2']:.4f} / {tw['always_1024_mean_of_sweeps']:.4f} |",
                  f"| model trained on sweep 1 | sweep 1 | {pm(tw['train_sweep1']['score_model'])} |",
                  f"| model trained on sweep 1 | sweep 2 | {pm(tw['train_sweep1']['score_model_on_sweep2'])} |",
                  f"| model trained on the mean of both | the mean of both | "
                  f"{pm(tw['train_mean_of_sweeps']['score_model'])} |"]
        t1, tm = tw.get("twins_sweep1", {}), tw.get("twins_mean_of_sweeps", {})
        if t1 and tm:
            lines += ["", f"Twin shapes (1-D kernels): one sweep differ by a median "
                      f"{100 * (math.exp(t1['median_abs_log_ratio']) - 1):.1f} % (oracle via twin "
                      f"{t1.get('oracle_via_twin_score', float('nan')):.4f}); the mean of two sweeps by "
                      f"{100 * (math.exp(tm['median_abs_log_ratio']) - 1):.1f} % (oracle via twin "
                      f"{tm.get('oracle_via_twin_score', float('nan')):.4f})."]
    pr = res.get("per_run", {})
    if pr:
        def cell(r: dict, k: str) -> str:
            v = r.get(k)
            if isinstance(v, dict):
                return f"{v['mean']:.4f} ± {v['sd']:.4f}"
            return "–" if v is None else f"{v:.4f}"

        lines += ["", f"## Per device run (the model: {res.get('best_model', '')}, trained by the grouped CV on all "
                  "runs, its out-of-fold choices scored on each run's samples)", "",
                  "| | " + " | ".join(pr) + " |", "|---|" + "---|" * len(pr),
                  "| kernels / samples | " + " | ".join(f"{r['n_kernels']} / {r['n_samples']}" for r in pr.values())
                  + " |"]
        for label, key in (("always 1024", "score_always_1024"), ("random (expected)", "score_random"),
                           ("CUDA occupancy API", "score_occupancy"),
                           ("best fixed shape (all data)", "score_best_fixed_all_data"),
                           ("model (sweep 1)", "score_model"),
                           ("ceiling: oracle of sweep 1 scored on sweep 2", "ceiling_oracle_sweep1_on_sweep2"),
                           ("ceiling: oracle of sweep 2 scored on sweep 1", "ceiling_oracle_sweep2_on_sweep1"),
                           ("always 1024, scored on sweep 2", "always_1024_on_sweep2"),
                           ("model, scored on sweep 2", "score_model_on_sweep2"),
                           ("model on sweep 2 / ceiling", "model_share_of_ceiling_sweep2"),
                           ("best shape the same in both sweeps", "best_shape_same_in_both_sweeps")):
            lines.append(f"| {label} | " + " | ".join(cell(r, key) for r in pr.values()) + " |")
        lines.append("| twins (1-D kernels): median diff. / oracle via twin | " + " | ".join(
            (f"{100 * (math.exp(r['twins']['median_abs_log_ratio']) - 1):.1f} % / "
             f"{r['twins'].get('oracle_via_twin_score', float('nan')):.4f}") if r.get("twins") else "–"
            for r in pr.values()) + " |")
        lines += ["", "Runs 1-2 timed each shape once (no sweep ceiling); their twin ceiling is the comparable "
                  "noise measure. The runs differ in kernels as well as in settings, so a difference between "
                  "runs is not the settings' effect alone."]
    sq = res.get("sequence_model")
    if sq:
        c = sq["config"]
        lines += ["", f"Token-sequence model (`seq:tokens`, `adaptune.predict.sequence`): embedding {c['embed']} -> "
                  f"Conv1d {c['channels']}x{c['width']} -> max-pool, + size -> MLP -> 20 relative performances, MSE, "
                  f"{c['epochs']} epochs, first {c['max_len']} tokens ({100 * sq['share_truncated']:.0f} % of kernels "
                  f"truncated), vocabulary from the training folds only. Same folds and seeds as the forests; "
                  f"{sq['seeds_done']} seeds: {sq['score_model']['mean']:.4f} ± {sq['score_model']['sd']:.4f} "
                  f"(per seed {', '.join(f'{v:.4f}' for v in sq['per_seed'])}). Trained at commit "
                  f"{sq.get('commit', res['commit'])} on {sq['cpu']} ({sq['torch_threads']} torch thread, shared host): "
                  f"{sq['wall_s'] / 60:.1f} min for all seeds."]
    if "examples_first_config" in res:
        lines += ["", "Examples (first configuration / best found): " + json.dumps(res["examples_first_config"])]
    lines += ["", PREVIOUS_ROUND]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = ["always 1024", "random", "occupancy", "most common", *res["models"]]
        vals = [res["score_always_1024"], res["score_random"], res["score_occupancy"], res["score_most_common"],
                *(v["score_model"]["mean"] for v in res["models"].values())]
        errs = [0, 0, 0, 0, *(v["score_model"]["sd"] for v in res["models"].values())]
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.barh(names, vals, xerr=errs, color=["grey"] * 4 + ["tab:blue"] * len(res["models"]))
        ax.set_xlim(min(vals) - 0.03, 1.0)
        ax.set_xlabel("seed's score: mean min_time / time of the chosen shape")
        ax.set_title(f"LS-CAT block size on {res['device']} ({res['n_kernels']} kernels)")
        fig.tight_layout()
        fig.savefig(out.with_suffix(".png"), dpi=110)
    except ImportError:
        pass


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("lscat", __doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "data" / "lscat_h100"))
    ap.add_argument("--work", default="", help="working set to (re)compute features from")
    ap.add_argument("--report-only", action="store_true", help="rewrite the .md/.png from the existing .json")
    ap.add_argument("--refresh-attrs", action="store_true",
                    help="rewrite the attr_ feature columns from kernels.csv (after a merge) before scoring")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1, help="forest threads (1 on a shared host)")
    ap.add_argument("--kinds", default="forest", help="forest, extra, seq (token-sequence model, needs torch)")
    ap.add_argument("--merge", action="store_true",
                    help="with --kinds seq: add the sequence model to the existing JSON, keep the forests' scores")
    ap.add_argument("--texts", default=str(ROOT / "data" / "lscat_work"),
                    help="working set whose sources the sequence model reads")
    ap.add_argument("--seq-epochs", type=int, default=sequence.SeqConfig.epochs)
    ap.add_argument("--sets", default=",".join(FEATURE_SETS), help="feature sets to score")
    ap.add_argument("--all-kernels", dest="only_clean", action="store_false",
                    help="also use complete sizes of kernels that faulted at a larger size")
    a = parse_study_args(ap, argv, smoke={"seeds": 2, "sets": "size_only,source"})
    Path(a.out).mkdir(parents=True, exist_ok=True)
    a.out = str(Path(a.out) / "lscat_h100")
    if a.report_only:
        write_report(json.loads(Path(a.out).with_suffix(".json").read_text()), Path(a.out))
        return
    data = Path(a.data)
    if a.work:
        write_features(Path(a.work), data / "kernels.csv", data / "features.csv.gz")
    elif a.refresh_attrs:
        print(f"attr_ features refreshed for {refresh_attr_features(data / 'kernels.csv', data / 'features.csv.gz')}"
              " kernels", flush=True)
    feats, repos = load_features(data / "features.csv.gz")
    kinfo = _read_csv(data / "kernels.csv")
    clean = {k for k, r in kinfo.items() if r["status"] == "ok"} if a.only_clean else None
    s = model.build_samples(model.load_rows(data / "rows.csv.gz"), kernels=clean)
    groups = np.array([repos.get(k, k.split("/")[0]) for k in s.kernel])
    perf = s.perf
    occ = np.array([metric.shape_for_block_size(int(float(kinfo[k]["occ_block"])) if kinfo.get(k, {}).get(
        "occ_block") not in (None, "", "None") else None) for k in s.kernel])
    occ_known = np.array([kinfo.get(k, {}).get("occ_block") not in (None, "", "None") for k in s.kernel])
    if a.merge:
        if a.kinds != "seq":
            raise SystemExit("--merge scores only --kinds seq")
        out = Path(a.out)
        res = json.loads(out.with_suffix(".json").read_text())
        if res["n_samples"] != len(s.kernel):
            raise SystemExit(f"samples differ from the JSON's ({len(s.kernel)} vs {res['n_samples']})")
        commit = git_commit()
        score_sequence(s, groups, kernel_texts(Path(a.texts)), a.seeds, sequence.SeqConfig(epochs=a.seq_epochs),
                       on_seed=lambda summ: merge_sequence(res, summ, commit, out))
        return
    best = np.argmax(perf, axis=1)
    res: dict = {
        "device": "", "n_kernels": int(len(set(s.kernel))), "n_samples": int(len(s.kernel)),
        "n_rows": int(s.n_rows), "n_incomplete_samples": int(s.n_incomplete),
        "n_repositories": int(len(set(groups))), "sizes": sorted({int(x) for x in s.size}),
        "score_oracle": 1.0,
        "score_always_1024": metric.score(perf, metric.always(perf)),
        "score_random": metric.random_score(perf),
        "score_occupancy": metric.score(perf, occ), "occupancy_known_share": float(occ_known.mean()),
        "share_1024_not_best": float((best != metric.always(perf)).mean()),
        "share_best_20pct_better_than_1024": float((perf[:, corpus.SHAPE_1024] < 1 / 1.2).mean()),
        "best_shape_counts": {f"{bx}x{by}": int(c) for (bx, by), c in zip(
            corpus.SHAPES, np.bincount(best, minlength=len(corpus.SHAPES)), strict=True)},
        "score_always_best_fixed": float(perf.mean(axis=0).max()),
        "best_fixed_shape": "{}x{}".format(*corpus.SHAPES[int(perf.mean(axis=0).argmax())]),
        "models": {},
        "only_clean_kernels": bool(a.only_clean),
        "noise_twin_shapes": noise_twins(s, kinfo),
    }
    all_names = sorted({n for f in feats.values() for n in f})
    t0 = time.time()
    choices: dict[str, list[np.ndarray]] = {}
    for kind in a.kinds.split(","):
        if kind == "seq":
            summary, choices["seq:tokens"] = score_sequence(s, groups, kernel_texts(Path(a.texts)), a.seeds,
                                                            sequence.SeqConfig(epochs=a.seq_epochs))
            res["models"]["seq:tokens"] = {k: summary[k] for k in ("score_model", "geomean_model",
                                                                   "score_most_common")}
            res["score_sequence_model"], res["score_sequence_model_sd"] = (summary["score_model"]["mean"],
                                                                           summary["score_model"]["sd"])
            res["sequence_model"] = summary
            continue
        for set_name in a.sets.split(","):
            prefixes = FEATURE_SETS[set_name]
            names = [n for n in all_names if prefixes != ("",) and n.startswith(prefixes)]
            x = model.feature_matrix(s, feats, names)
            runs, key = [], f"{kind}:{set_name}"
            for seed in range(a.seeds):
                choice, common = model.grouped_cv_choices(x, perf, groups, seed, kind, n_jobs=a.jobs)
                choices.setdefault(key, []).append(choice)
                runs.append({"score_model": metric.score(perf, choice),
                             "geomean_model": metric.geomean_ratio(perf, choice),
                             "score_most_common": metric.score(perf, common)})
            summary = {k: {"mean": float(np.mean([r[k] for r in runs])), "sd": float(np.std([r[k] for r in runs],
                                                                                              ddof=1))}
                       for k in runs[0]}
            summary["n_features"] = len(names) + 1
            res["models"][key] = summary
            print(f"{kind:7s} {set_name:18s} score {summary['score_model']['mean']:.4f} ± "
                  f"{summary['score_model']['sd']:.4f}  most-common {summary['score_most_common']['mean']:.4f}"
                  f"  ({time.time() - t0:.0f}s)", flush=True)
    best_key = max((k for k in res["models"] if not k.startswith("seq")),  # feature-matrix models only
                   key=lambda k: res["models"][k]["score_model"]["mean"])
    res["best_model"] = best_key
    res["per_run"] = per_run(s, kinfo, occ, choices[best_key])
    for name, r in res["per_run"].items():
        print(f"{name}: " + json.dumps({k: v for k, v in r.items() if not isinstance(v, dict)}), flush=True)
    prefixes = FEATURE_SETS[best_key.split(":", 1)[1]]
    x_best = model.feature_matrix(s, feats, [n for n in all_names if prefixes != ("",) and n.startswith(prefixes)])
    try:
        res["two_sweeps"] = two_sweeps(s, kinfo, x_best, groups, a.seeds, a.jobs)
    except Exception as exc:  # noqa: BLE001 - the main scores stand without it
        res["two_sweeps"] = {"error": repr(exc)}
    res["score_model"] = res["models"][best_key]["score_model"]["mean"]
    res["score_model_sd"] = res["models"][best_key]["score_model"]["sd"]
    res["score_most_common"] = res["models"][best_key]["score_most_common"]["mean"]
    run_summary = data / "run_summary.json"
    if run_summary.exists():
        rs = json.loads(run_summary.read_text())
        res["device"] = rs.get("device", "")
        res["measured_utc"] = rs.get("date_utc", "")
    res["seeds"] = a.seeds
    res["cv"] = "GroupKFold(5, shuffle) by LS-CAT repository; one seed = one fold split + model seed"
    res["commit"] = git_commit()
    ex = Path(a.out).parent / "lscat_examples_h100.json"
    ex = ex if ex.exists() else HERE / "results" / "lscat_examples_h100.json"
    if ex.exists():
        e = json.loads(ex.read_text())
        res["examples_first_config"] = {k: v for k, v in e.items() if k.startswith("mean")}
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    write_report(res, out)
    print(json.dumps({k: v for k, v in res.items() if k.startswith(("score", "n_", "share", "best"))}, indent=1))


if __name__ == "__main__":
    main()
