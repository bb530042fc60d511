"""Per-input variant selection across devices: train on two devices' labels, test on the third.

Reads ``benchmarks/transfer/labels.py`` output of three devices (the H100, the H200, PoCL on the CPU; same
seed, scale and size scale, so the same inputs; the script checks) and, for SpMV, histogram and sort and
each device as the target:

- **target-trained**: the suite's model (SVM as Nitro, ``adaptive.models.fit_model``) trained on the
  target's own training labels, scored on its test inputs (mean fraction of the target's oracle);
- **MTL, two sources** (``MTLSelector``): one model on the union of the other two devices' training
  labels, each row's input features concatenated with its device's features: none (plain union), the
  measured proxies P-DFS selects for the benchmark, or all six measured proxies
  (``data/devices/proxy_features.json``); the target's own input features and proxies go in, its times
  score the choice;
- **one source**: the model of each other device alone; **source oracle labels**: each test input's best
  variant on a source run on the target (what copying a source's per-input choice gives);
- the best single variant on the target.

Only the variants that are the same kernel text on every device are compared: the dialect kernels
(cuSPARSE, CUB, torch and the presorted sort's library fallback are NumPy on PoCL, so they are left out).
A constraint-refused variant (ELL, DIA, shared histograms) costs what the benchmark's fallback costs
(``FALLBACK``), as at dispatch.

    python -m benchmarks.transfer.devices RAW_A RAW_B RAW_C [--proxies data/devices/proxy_features.json] [--out DIR]
    python -m benchmarks.transfer.devices        # the committed labels (H100, H200, PoCL) -> out/transfer/
    python -m benchmarks.transfer.devices --intensity counters   # P-DFS from ncu counters (counters.py)

P-DFS's intensities are the hand-set ``INTENSITY`` unless ``--intensity counters``: then the per-benchmark
intensities ``benchmarks.transfer.counters`` derived from Nsight Compute counters
(``results/counters_intensity.json``, or ``--counters PATH``), and the output is named
``transfer_devices_counters``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from adaptune.adaptive.models import fit_model, fraction_of_oracle
from adaptune.adaptive.transfer import PROXY_FEATURES_MEASURED, MTLSelector, p_dfs
from benchmarks.harness import finish_study, parse_study_args, study_meta, study_parser

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
LIBRARY_BACKED = {"cusparse", "cusparse_alg1", "cusparse_alg2", "torch_csr", "cub", "cub_radix", "torch_sort",
                  "presorted_radix"}
BOOTSTRAP = 2000
FALLBACK = {"spmv": "csr_scalar", "histogram": "global", "sort": "merge", "bfs": "topdown_thread"}
# P-DFS input: which proxy dominates each benchmark (intensity 0..5 per input), set by what each kernel family
# is bound by. Nitro predicts these from profiler counters: `--intensity counters` reads those `counters.py`
# derives from the H100's Nsight Compute counters (results/counters_intensity.json).
INTENSITY = {"spmv": {"MEM-BW": 5, "LAUNCH": 3, "SH-MEM-BW": 1, "ATOMIC": 0, "SP-GFLOP": 1},
             "histogram": {"ATOMIC": 5, "SH-MEM-BW": 4, "MEM-BW": 3, "LAUNCH": 2, "SP-GFLOP": 0},
             "sort": {"SH-MEM-BW": 5, "MEM-BW": 4, "LAUNCH": 4, "ATOMIC": 0, "SP-GFLOP": 0},
             # BFS (set by hand like the others, not yet from a profiler): one launch per level, irregular
             # gathers, frontier queues built with atomics
             "bfs": {"LAUNCH": 5, "MEM-BW": 4, "ATOMIC": 3, "SH-MEM-BW": 1, "SP-GFLOP": 0}}


def load_intensity(path: str | Path) -> dict[str, dict[str, float]]:
    """benchmark -> proxy -> intensity from ``counters.py``'s JSON; a clear error for a file that is not one."""
    try:
        data = json.loads(Path(path).read_text())
        table = {b: {p: float(x) for p, x in v["intensity"].items()} for b, v in data["benchmarks"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SystemExit(f"{path}: not a counters_intensity.json ({type(e).__name__}: {e})") from None
    if not table:
        raise SystemExit(f"{path}: no benchmarks with counter-derived intensities")
    unknown = sorted({p for v in table.values() for p in v} - set(PROXY_FEATURES_MEASURED))
    if unknown:
        raise SystemExit(f"{path}: unknown proxies {', '.join(unknown)}; known: {', '.join(PROXY_FEATURES_MEASURED)}")
    return table


def MODELS(pdfs: list[str], all_proxies: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], str]]:  # noqa: N802
    """(result key, device features, MTLSelector device_scale): "shared" is the issue-12 fix (one range for
    the log2 device block), "per_feature" the scaling of every earlier round (each feature its own range)."""
    return [("mtl_plain", (), "shared"), ("mtl_p_dfs", tuple(pdfs), "shared"),
            ("mtl_p_dfs_per_feature", tuple(pdfs), "per_feature"), ("mtl_all_proxies", all_proxies, "shared"),
            ("mtl_all_proxies_per_feature", all_proxies, "per_feature")]


def nested_scale(sources: list, pdfs: list[str]) -> dict:
    """The scaling a rule that sees only the sources would choose: each source in turn is the temporary
    target, MTL (P-DFS features) trains on the other sources' training labels and is scored on its test
    inputs; the mode with the higher mean wins, ties (e.g. with one training device, where the device
    columns are constant and both modes give the same model) go to "shared". Written after seeing
    round 3's four-device numbers (issue 12), so it is a check, not an independent result."""
    means = {}
    for mode in ("shared", "per_feature"):
        scores = []
        for k, (_, te_k, f_k) in enumerate(sources):
            rest = [(s[0][0], s[0][1], s[2]) for j, s in enumerate(sources) if j != k]
            sel = MTLSelector(tuple(pdfs), kind="svm", device_scale=mode).fit(rest)
            scores.append(score(te_k[2], sel.predict(te_k[0], f_k)))
        means[mode] = float(np.mean(scores))
    chosen = "shared" if means["shared"] >= means["per_feature"] - 1e-12 else "per_feature"
    return {"chosen": chosen, "inner_mean": means}


def load(path: str) -> dict:
    raw = json.loads(Path(path).read_text())
    raw["path"] = path
    return raw


def arrays(bench: dict, part: str, names: list[str], fallback: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(model features, costs with inf where refused/failed, run-time costs with the fallback's cost)."""
    recs = bench[part]
    costs = np.array([[r["times_ms"][v] if r["times_ms"].get(v) is not None else np.inf for v in names]
                      for r in recs], float)
    runtime = costs.copy()
    f = names.index(fallback)
    for i, r in enumerate(recs):
        for j, v in enumerate(names):
            if r["status"].get(v) == "constraint":
                runtime[i, j] = costs[i, f]
    return np.array([r["model_features"] for r in recs], float), costs, runtime


def score(runtime: np.ndarray, chosen: np.ndarray) -> float:
    return float(np.nanmean(fraction_of_oracle(runtime, chosen)))


SMOKE: dict = {}


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("transfer", __doc__.splitlines()[0])
    ap.add_argument("raws", nargs="*", default=[str(RESULTS / f"gpu_suite_{tag}_s005_raw.json")
                                                 for tag in ("h100", "h200", "pocl", "pocl_basic")],
                    help="gpu_suite raw.json labels of each device (default: the committed H100, H200, PoCL pthread and basic)")
    ap.add_argument("--proxies", default=str(ROOT / "data" / "devices" / "proxy_features.json"))
    ap.add_argument("--benchmarks", nargs="+", default=["spmv", "histogram", "sort", "bfs"],
                    choices=["spmv", "histogram", "sort", "bfs"], help="which of the suite's benchmarks (default: all)")
    ap.add_argument("--intensity", choices=("hand", "counters"), default="hand",
                    help="P-DFS's proxy intensities: hand-set INTENSITY (default) or derived from ncu counters")
    ap.add_argument("--counters", default=str(RESULTS / "counters_intensity.json"),
                    help="counters.py's JSON, read with --intensity counters")
    args = parse_study_args(ap, argv, smoke=SMOKE)
    t0 = time.perf_counter()
    intensity = load_intensity(args.counters) if args.intensity == "counters" else INTENSITY
    raws = [load(p) for p in args.raws]
    if len(raws) < 3:
        raise SystemExit("train on the others, test on one: give at least three raw files")
    table = json.loads(Path(args.proxies).read_text())["devices"]
    names = [r["device"]["name"] for r in raws]
    missing = [n for n in names if n not in table]
    if missing:
        raise SystemExit(f"no measured proxies for {missing} in {args.proxies}")
    feats = [table[n]["proxies"] for n in names]
    all_proxies = tuple(sorted(feats[0]))
    out: dict = {"devices": names, "sources": [r["path"] for r in raws], "proxies": dict(zip(names, feats, strict=True)),
                 "size_scale": [r.get("size_scale") for r in raws], "benchmarks": {},
                 "intensity": {"source": "hand-set" if intensity is INTENSITY else args.counters,
                               "values": {b: dict(v) for b, v in intensity.items()}}}
    for bname in args.benchmarks:
        if not all(bname in r["benchmarks"] for r in raws):
            continue
        if bname not in intensity:
            raise SystemExit(f"{bname}: no P-DFS intensities in {out['intensity']['source']}")
        data = [r["benchmarks"][bname] for r in raws]
        for part in ("train", "test"):
            lists = [[x["name"] for x in d[part]] for d in data]
            if any(lst != lists[0] for lst in lists):
                raise SystemExit(f"{bname}: the devices' {part} inputs differ (same seed, scale, size scale needed)")
        common = [v for v in data[0]["variants"] if all(v in d["variants"] for d in data) and v not in LIBRARY_BACKED]
        pdfs = p_dfs([intensity[bname]], proxy_features=PROXY_FEATURES_MEASURED, per_input=2)
        tr = [arrays(d, "train", common, FALLBACK[bname]) for d in data]
        te = [arrays(d, "test", common, FALLBACK[bname]) for d in data]
        per: dict = {}
        for ti, target in enumerate(names):
            x_test, _, rt_test = te[ti]
            srcs = [i for i in range(len(raws)) if i != ti]
            own = fit_model("svm", tr[ti][0], tr[ti][1], tr[ti][2]).predict(x_test)
            res = {"trained_on": [names[i] for i in srcs], "target_trained": score(rt_test, own)}
            picks = {}
            for label, dfeat, mode in MODELS(pdfs, all_proxies):
                sel = MTLSelector(dfeat, kind="svm", device_scale=mode).fit([(tr[i][0], tr[i][1], feats[i]) for i in srcs])
                picks[label] = sel.predict(x_test, feats[ti])
                res[label] = score(rt_test, picks[label])
            # spread: bootstrap the test inputs (the same resample for every model), 90 % interval
            f_own = fraction_of_oracle(rt_test, own)
            for label in ("mtl_p_dfs", "mtl_p_dfs_per_feature"):
                f_mtl = fraction_of_oracle(rt_test, picks[label])
                rng = np.random.default_rng(0)
                boot = [100 * (np.nanmean(f_own[b]) - np.nanmean(f_mtl[b]))
                        for b in rng.integers(0, len(f_own), (BOOTSTRAP, len(f_own)))]
                key = "points_behind_p_dfs_ci90" + label.removeprefix("mtl_p_dfs")
                res[key] = [float(np.percentile(boot, 5)), float(np.percentile(boot, 95))]
            res["nested_scale"] = nested_scale([(tr[i], te[i], feats[i]) for i in srcs], pdfs)
            res["one_source"] = {names[i]: score(rt_test, fit_model("svm", tr[i][0], tr[i][1], tr[i][2]).predict(x_test))
                                 for i in srcs}
            res["source_oracle_labels"] = {names[i]: score(rt_test, np.argmin(te[i][2], 1)) for i in srcs}
            fixed = [score(rt_test, np.full(len(rt_test), j)) for j in range(len(common))]
            res["best_fixed"], res["best_fixed_variant"] = float(max(fixed)), common[int(np.argmax(fixed))]
            res["oracle_label_share"] = {v: float(np.mean(np.argmin(rt_test, 1) == j)) for j, v in enumerate(common)}
            res["points_behind"] = {k: 100 * (res["target_trained"] - res[k]) for k, _, _ in MODELS(pdfs, all_proxies)}
            per[target] = res
            print(f"{bname} -> {target}: own {res['target_trained']:.4f}, MTL plain {res['mtl_plain']:.4f}, "
                  f"P-DFS {res['mtl_p_dfs']:.4f} (per-feature scale {res['mtl_p_dfs_per_feature']:.4f}), "
                  f"all proxies {res['mtl_all_proxies']:.4f}, nested scale {res['nested_scale']['chosen']}, "
                  f"fixed {res['best_fixed']:.4f}", flush=True)
        out["benchmarks"][bname] = {"variants": common, "fallback": FALLBACK[bname], "p_dfs_features": pdfs,
                                    "per_target": per}
    labels = {n: {"date": r["date"], "commit": r["commit"]} for n, r in zip(names, raws, strict=True)}
    name = "transfer_devices" if args.intensity == "hand" else "transfer_devices_counters"
    finish_study(args.out, name, out, markdown=markdown, plot=plot,
                 meta={**study_meta("benchmarks.transfer.devices", t0), "labels": labels})


def short(name: str) -> str:
    if name.startswith("basic"):
        return "PoCL basic (CPU, 1 unit)"
    return "PoCL (CPU)" if "pthread" in name or "cpu" in name.lower() else name.replace("NVIDIA ", "").split(" ")[0]


def markdown(out: dict) -> str:
    m = out["meta"]
    n = len(out["devices"])
    lines = [f"# Per-input variant selection across devices: train on the other {n - 1}, test on one", "",
             "- load average at analysis: " + str(out["meta"].get("load", "-")),
             f"- date {m['date']}, commit {m['commit']}; labels: " + "; ".join(
                 f"{short(n)} ({v['date']}, commit {v['commit']})" for n, v in m["labels"].items()),
             f"- same inputs on every device (seed 2024, size scale {out['size_scale'][0]}); dialect kernels only",
             "- mean fraction of the target's oracle on its test inputs; *points behind* = target-trained minus "
             "MTL with P-DFS proxies (90 % bootstrap interval over the test inputs)",
             "- device block scaling: *per-feature* = each log2 device feature stretched to [-1, 1] over the "
             "sources on its own (every round before issue 12's fix); *shared* = one scale for the whole log2 "
             "device block, its widest feature spanning [-1, 1] (the fix, `MTLSelector(device_scale=\"shared\")`, now the default)",
             "- *nested* = the scaling a leave-one-source-device-out rule on the sources alone picks (ties, e.g. "
             "with one device left to train on, go to shared); written after seeing round 3's numbers", "",
             "| benchmark | target | trained on target | MTL, no device features | MTL, P-DFS, per-feature scale "
             "(before) | MTL, P-DFS, shared scale (after) | MTL, all 6 proxies, before / after | points behind, "
             "before | points behind, after | nested pick (inner mean shared / per-feature) | one source alone "
             "| best fixed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for b, bd in out["benchmarks"].items():
        for t, v in bd["per_target"].items():
            one = ", ".join(f"{short(k)} {x:.3f}" for k, x in v["one_source"].items())
            pb = v["points_behind"]
            c0, c1 = v["points_behind_p_dfs_ci90_per_feature"], v["points_behind_p_dfs_ci90"]
            ns = v["nested_scale"]
            im = ns["inner_mean"]
            tie = " (tie)" if abs(im["shared"] - im["per_feature"]) < 1e-12 else ""
            lines.append(f"| {b} | {short(t)} | {v['target_trained']:.3f} | {v['mtl_plain']:.3f} "
                         f"| {v['mtl_p_dfs_per_feature']:.3f} | {v['mtl_p_dfs']:.3f} "
                         f"| {v['mtl_all_proxies_per_feature']:.3f} / {v['mtl_all_proxies']:.3f} "
                         f"| {pb['mtl_p_dfs_per_feature']:+.1f} [{c0[0]:+.1f}, {c0[1]:+.1f}] "
                         f"| {pb['mtl_p_dfs']:+.1f} [{c1[0]:+.1f}, {c1[1]:+.1f}] "
                         f"| {ns['chosen']}{tie} ({im['shared']:.3f} / {im['per_feature']:.3f}) | {one} "
                         f"| {v['best_fixed']:.3f} ({v['best_fixed_variant']}) |")
    src = out.get("intensity", {}).get("source", "hand-set")
    lines += ["", f"P-DFS selections (measured proxies; intensities {'hand-set' if src == 'hand-set' else 'from ncu counters'}): " + "; ".join(
        f"{b}: {', '.join(bd['p_dfs_features'])}" for b, bd in out["benchmarks"].items()), "",
        "Measured proxies per device:", "", "| device | " + " | ".join(next(iter(out["proxies"].values()))) + " |",
        "|---|" + "---|" * len(next(iter(out["proxies"].values())))]
    for n, p in out["proxies"].items():
        lines.append(f"| {short(n)} | " + " | ".join(f"{x:.4g}" for x in p.values()) + " |")
    return "\n".join(lines) + "\n"


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = list(out["benchmarks"])
    fig, axes = plt.subplots(1, len(benches), figsize=(4.2 * len(benches), 3.8), sharey=True)
    keys = [("target_trained", "target-trained"), ("mtl_plain", "MTL plain"),
            ("mtl_p_dfs_per_feature", "MTL P-DFS, per-feature scale"), ("mtl_p_dfs", "MTL P-DFS, shared scale"),
            ("best_fixed", "best fixed")]
    for ax, b in zip(np.atleast_1d(axes), benches, strict=True):
        per = out["benchmarks"][b]["per_target"]
        targets = list(per)
        xs = np.arange(len(targets))
        for k, (key, label) in enumerate(keys):
            ax.bar(xs + (k - 2) * 0.16, [per[t][key] for t in targets], 0.16, label=label)
        ax.set_xticks(xs, [short(t) for t in targets], fontsize=8)
        ax.set_title(b)
        ax.set_ylim(0, 1.05)
    np.atleast_1d(axes)[0].set_ylabel("fraction of target oracle (test)")
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
