"""Leave-one-GPU-out transfer on the six recorded convolution spaces (no GPU needed).

For each of the six GPUs of data/benchmark_hub/convolution_milo as the target, with only the other five
as sources:

1. **zero-shot**: fraction of the target's optimum reached by the configuration a model predicts best,
   no evaluation on the target. Models: the consensus (no device features), MTL by feature
   concatenation with all device features, MTL with the features CV-DFS selects on the sources; top-k
   (k evaluations on the target) reported beside k=1. Baseline: BAT's "reuse another GPU's optimum"
   (mean, best and worst source).
2. **warm-started search**: evaluations until the best found reaches 0.95 of the optimum, ``warm``
   (prior = the consensus of the five sources) against cold ``auto``, ``--repeats`` seeds each, replayed
   from the records (capped at ``--cap`` evaluations; a run that does not get there counts as the cap).

Writes OUT/transfer.{json,md,png}.

    python -m benchmarks.transfer.run [--repeats 25] [--cap 400] [--jobs 2] [--out DIR]
    python -m benchmarks.transfer.run --profile smoke      # 2 seeds, cap 60 (seconds)

Default OUT: out/transfer/; the committed run is benchmarks/transfer/results/.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from adaptune.adaptive.device_features import table_features
from adaptune.adaptive.transfer import (
    ConfigTransfer,
    DeviceSpace,
    config_features,
    cv_dfs,
    fractions,
    leave_one_out,
    reuse_matrix,
)
from adaptune.search import Replay, make_strategy
from benchmarks.harness import finish_study, parse_study_args, study_meta, study_parser

ROOT = Path(__file__).resolve().parents[2]
GPUS = ("A100", "A4000", "A6000", "MI250X", "W6600", "W7800")
ALL_FEATURES = ("vendor_nvidia", "compute_units", "clock_mhz", "mem_bandwidth_gbs", "l2_kb",
                "last_level_cache_mb", "local_mem_kb", "simd_width", "peak_gflops_sp")
CV_DFS_CANDIDATES = ("vendor_nvidia", "mem_bandwidth_gbs", "l2_kb", "simd_width")
KS = (1, 3, 5, 10)
_REPLAYS: dict[str, Replay] = {}


def replays() -> dict[str, Replay]:
    if not _REPLAYS:
        for g in GPUS:
            _REPLAYS[g] = Replay.from_file(ROOT / "data" / "benchmark_hub" / "convolution_milo" / f"{g}.json.gz")
    return _REPLAYS


def spaces() -> list[DeviceSpace]:
    return [DeviceSpace(g, table_features(g), r.values) for g, r in replays().items()]


def evals_to(job: tuple[str, str, int, int]) -> tuple[str, str, int, int]:
    """One replayed search until 0.95 of the optimum (or the cap): (gpu, strategy, seed, evaluations)."""
    gpu, strategy, seed, cap = job
    rp = replays()[gpu]
    opts = {}
    if strategy == "warm":
        sources = [s for s in spaces() if s.device != gpu]
        opts["prior"] = ConfigTransfer().fit(config_features(rp.space), sources).predict()
    return gpu, strategy, seed, evals_until_095(make_strategy(strategy, rp.space, seed=seed, **opts), rp, cap)


def evals_until_095(s, rp, cap: int) -> int:
    """Evaluations of strategy ``s`` on replay ``rp`` until the best found is >= 0.95 of the optimum (or ``cap``)."""
    for n in range(1, cap + 1):
        i = s.ask()
        if i is None:
            break
        v = rp.evaluate(i)
        s.tell(i, v)
        if np.isfinite(v) and rp.optimum / v >= 0.95:
            return n
    return cap


SMOKE = {"repeats": 2, "cap": 60, "jobs": 1}


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("transfer", __doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--cap", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=2)
    args = parse_study_args(ap, argv, smoke=SMOKE)
    t0 = time.perf_counter()
    sp = spaces()
    x = config_features(replays()["A100"].space)
    for g, r in replays().items():  # same configuration order everywhere (the sources are aligned)
        assert [tuple(c.values()) for c in r.space.configs()] == [tuple(c.values()) for c in
                                                                   replays()["A100"].space.configs()], g
    out: dict = {"gpus": list(GPUS), "configurations": len(x)}

    reuse = reuse_matrix(sp)
    out["reuse"] = {"matrix_target_by_source": reuse.round(4).tolist(), "per_target": {}}
    for i, g in enumerate(GPUS):
        others = [reuse[i, j] for j in range(len(GPUS)) if j != i]
        out["reuse"]["per_target"][g] = {"mean": float(np.mean(others)), "best": float(max(others)),
                                         "worst": float(min(others))}
    print("BAT reuse (mean over sources):", {g: round(v["mean"], 3) for g, v in out["reuse"]["per_target"].items()},
          flush=True)

    models: dict[str, dict] = {}
    models["consensus"] = leave_one_out(x, sp, (), KS)
    models["mtl_all_features"] = leave_one_out(x, sp, ALL_FEATURES, KS)
    cv_sel: dict[str, dict] = {}
    cv_frac: dict[str, dict[int, float]] = {}
    for i, target in enumerate(sp):
        sources = [s for j, s in enumerate(sp) if j != i]
        selected, details = cv_dfs(x, sources, CV_DFS_CANDIDATES, max_size=2, k=1)
        cv_sel[target.device] = {"selected": selected, "best_subsets": details["best_subsets"]}
        order = ConfigTransfer(selected).fit(x, sources).rank(target.features, k=max(KS))
        f = fractions(target.values)
        cv_frac[target.device] = {k: float(f[order[:k]].max()) for k in KS}
        print(f"CV-DFS for {target.device}: {selected or '(none: consensus)'} -> {cv_frac[target.device][1]:.3f}",
              flush=True)
    models["mtl_cv_dfs"] = cv_frac
    out["zero_shot"] = {m: {g: {str(k): round(v, 4) for k, v in per.items()} for g, per in res.items()}
                        for m, res in models.items()}
    out["cv_dfs"] = {"candidates": list(CV_DFS_CANDIDATES), "max_size": 2, "k": 1, "per_target": cv_sel}
    out["zero_shot_fraction"] = {g: round(models["consensus"][g][1], 4) for g in GPUS}
    out["zero_shot_mean"] = {m: round(float(np.mean([res[g][1] for g in GPUS])), 4) for m, res in models.items()}
    out["zero_shot_mean"]["bat_reuse_mean"] = round(float(np.mean([out["reuse"]["per_target"][g]["mean"]
                                                                    for g in GPUS])), 4)
    print("zero-shot means:", out["zero_shot_mean"], flush=True)

    jobs = [(g, s, r * 100003, args.cap) for g in GPUS for s in ("auto", "warm") for r in range(args.repeats)]
    with ProcessPoolExecutor(args.jobs) as ex:
        res = list(ex.map(evals_to, jobs, chunksize=4))
    per: dict[str, dict[str, list[int]]] = {g: {"auto": [], "warm": []} for g in GPUS}
    for g, s, _, n in res:
        per[g][s].append(n)
    out["search"] = {"repeats": args.repeats, "cap": args.cap, "seeds": "r * 100003",
                     "per_gpu": {g: {s: {"evals": v, "mean": float(np.mean(v)), "median": float(np.median(v)),
                                         "censored": int(sum(n >= args.cap for n in v))}
                                     for s, v in d.items()} for g, d in per.items()}}
    out["warm_evals_to_095"] = {g: per[g]["warm"] and round(float(np.mean(per[g]["warm"])), 2) for g in GPUS}
    out["cold_evals_to_095"] = {g: round(float(np.mean(per[g]["auto"])), 2) for g in GPUS}
    warm_mean = float(np.mean(list(out["warm_evals_to_095"].values())))
    cold_mean = float(np.mean(list(out["cold_evals_to_095"].values())))
    out["warm_over_cold"] = round(warm_mean / cold_mean, 4)
    out["targets"] = {"zero_shot_mean_ge_0.90": out["zero_shot_mean"]["consensus"] >= 0.90,
                      "warm_le_half_of_cold": out["warm_over_cold"] <= 0.5}
    finish_study(args.out, "transfer", out, markdown=markdown, plot=plot,
                 meta=study_meta("benchmarks.transfer.run", t0))


def markdown(out: dict) -> str:
    m = out["meta"]
    z = out["zero_shot"]
    lines = ["# Transfer to an unseen GPU: leave one GPU out on the six recorded convolution spaces", "",
             f"- date {m['date']}, commit {m['commit']}, {m['host']} (replay of records: no GPU), took "
             f"{m['seconds']} s", f"- command: `{m['command']}`", "",
             "## Zero-shot configuration (fraction of the target's optimum; top-k = best of k predicted, "
             "k evaluations on the target)", "",
             "| target | BAT reuse mean / best / worst source | consensus k=1 | k=3 | k=5 | k=10 | MTL all features k=1 "
             "| MTL CV-DFS k=1 (selected) |", "|---|---|---|---|---|---|---|---|"]
    for g in out["gpus"]:
        r = out["reuse"]["per_target"][g]
        c = z["consensus"][g]
        sel = "+".join(out["cv_dfs"]["per_target"][g]["selected"]) or "none"
        lines.append(f"| {g} | {r['mean']:.3f} / {r['best']:.3f} / {r['worst']:.3f} | {c['1']:.3f} | {c['3']:.3f} "
                     f"| {c['5']:.3f} | {c['10']:.3f} | {z['mtl_all_features'][g]['1']:.3f} "
                     f"| {z['mtl_cv_dfs'][g]['1']:.3f} ({sel}) |")
    zm = out["zero_shot_mean"]
    lines += [f"| **mean** | {zm['bat_reuse_mean']:.3f} | **{zm['consensus']:.3f}** | "
              f"{np.mean([z['consensus'][g]['3'] for g in out['gpus']]):.3f} | "
              f"{np.mean([z['consensus'][g]['5'] for g in out['gpus']]):.3f} | "
              f"{np.mean([z['consensus'][g]['10'] for g in out['gpus']]):.3f} | {zm['mtl_all_features']:.3f} | "
              f"{zm['mtl_cv_dfs']:.3f} |", "",
              f"## Evaluations to reach 0.95 of the optimum ({out['search']['repeats']} seeds, cap "
              f"{out['search']['cap']})", "",
              "| target | cold `auto` mean / median (censored) | `warm` mean / median (censored) | warm / cold |",
              "|---|---|---|---|"]
    for g in out["gpus"]:
        a, w = out["search"]["per_gpu"][g]["auto"], out["search"]["per_gpu"][g]["warm"]
        lines.append(f"| {g} | {a['mean']:.1f} / {a['median']:.0f} ({a['censored']}) | {w['mean']:.1f} / "
                     f"{w['median']:.0f} ({w['censored']}) | {w['mean'] / a['mean']:.2f} |")
    cold = np.mean(list(out["cold_evals_to_095"].values()))
    warm = np.mean(list(out["warm_evals_to_095"].values()))
    lines += [f"| **mean** | {cold:.1f} | {warm:.1f} | **{out['warm_over_cold']:.2f}** |", "",
              f"Targets: zero-shot mean >= 0.90: **{'met' if out['targets']['zero_shot_mean_ge_0.90'] else 'missed'}**"
              f" ({zm['consensus']:.3f}); warm <= half of cold: "
              f"**{'met' if out['targets']['warm_le_half_of_cold'] else 'missed'}** ({out['warm_over_cold']:.2f}).", ""]
    return "\n".join(lines)


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = out["gpus"]
    xs = np.arange(len(gpus))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    bars = [("BAT reuse (mean source)", [out["reuse"]["per_target"][g]["mean"] for g in gpus]),
            ("BAT reuse (best source)", [out["reuse"]["per_target"][g]["best"] for g in gpus]),
            ("consensus (zero-shot)", [out["zero_shot"]["consensus"][g]["1"] for g in gpus]),
            ("MTL CV-DFS (zero-shot)", [out["zero_shot"]["mtl_cv_dfs"][g]["1"] for g in gpus]),
            ("consensus top-5", [out["zero_shot"]["consensus"][g]["5"] for g in gpus])]
    w = 0.16
    for k, (label, v) in enumerate(bars):
        a1.bar(xs + (k - 2) * w, v, w, label=label)
    a1.axhline(0.9, color="k", lw=0.8, ls="--")
    a1.set_xticks(xs, gpus)
    a1.set_ylabel("fraction of target optimum")
    a1.set_title("leave one GPU out: configuration from the other five")
    a1.legend(fontsize=7)
    cold = [out["search"]["per_gpu"][g]["auto"]["mean"] for g in gpus]
    warm = [out["search"]["per_gpu"][g]["warm"]["mean"] for g in gpus]
    a2.bar(xs - 0.2, cold, 0.4, label="cold auto")
    a2.bar(xs + 0.2, warm, 0.4, label="warm (prior: other five)")
    a2.set_xticks(xs, gpus)
    a2.set_ylabel("evaluations to 0.95 of optimum (mean)")
    a2.set_title(f"{out['search']['repeats']} seeds, cap {out['search']['cap']}")
    a2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
