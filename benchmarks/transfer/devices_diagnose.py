"""Issue 12 diagnostic: why MTL SpMV selection fails for a CPU target even with a CPU among the sources.

For each target of the leave-one-device-out (the committed labels), shows what the SVM sees of the device
block: the P-DFS features after ``device_vector`` (log2) and after the [-1, 1] scaling, per-feature (the
behaviour before the fix), shared (one scale for the whole device block) and each feature alone; the
distance of the target to each source in that block, and which variants the MTL model then picks on the
target's test inputs. Also the label shares of each device (the class-imbalance question) and the chosen
SVM hyperparameters.

    python -m benchmarks.transfer.devices_diagnose RAW... [--bench spmv] [--out PATH.md]

A diagnostic option of the transfer study (issue 12); its committed outputs are
benchmarks/transfer/results/transfer_devices_diagnose_4dev_{spmv,histogram}.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.preprocessing import MinMaxScaler

from adaptune.adaptive.device_features import device_vector  # noqa: E402
from adaptune.adaptive.models import share_ranges  # noqa: E402
from adaptune.adaptive.transfer import PROXY_FEATURES_MEASURED, MTLSelector, p_dfs  # noqa: E402
from benchmarks.harness import git_commit
from benchmarks.transfer.devices import FALLBACK, INTENSITY, LIBRARY_BACKED, ROOT, arrays, load, score, short


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.transfer.devices_diagnose", description=__doc__.splitlines()[0])
    ap.add_argument("raws", nargs="+")
    ap.add_argument("--bench", default="spmv")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    raws = [load(p) for p in args.raws]
    table = json.loads((ROOT / "data" / "devices" / "proxy_features.json").read_text())["devices"]
    names = [r["device"]["name"] for r in raws]
    feats = [table[n]["proxies"] for n in names]
    data = [r["benchmarks"][args.bench] for r in raws]
    common = [v for v in data[0]["variants"] if all(v in d["variants"] for d in data) and v not in LIBRARY_BACKED]
    pdfs = tuple(p_dfs([INTENSITY[args.bench]], proxy_features=PROXY_FEATURES_MEASURED, per_input=2))
    tr = [arrays(d, "train", common, FALLBACK[args.bench]) for d in data]
    te = [arrays(d, "test", common, FALLBACK[args.bench]) for d in data]
    commit = git_commit()
    lines = [f"# Issue 12 diagnostic: {args.bench}, {len(names)} devices, P-DFS features {', '.join(pdfs)}", "",
             f"- {datetime.date.today().isoformat()}, code at commit {commit} (+ working tree), "
             "replay of the committed labels: " + ", ".join(f"{short(n)} ({r['commit']})" for n, r in zip(names, raws, strict=True)),
             "- SVM as in benchmarks/transfer/devices.py (libsvm grid, coarse); distances in the scaled device block only", "",
             "Oracle label share on each device's training inputs (what the model learns per device):", ""]
    for n, t in zip(names, tr, strict=True):
        share = Counter(common[i] for i in np.argmin(t[1], 1))
        lines.append(f"- {short(n)}: " + ", ".join(f"{k} {v}" for k, v in share.most_common()))
    raw_dev = {short(n): [round(x, 2) for x in device_vector(f, pdfs)] for n, f in zip(names, feats, strict=True)}
    lines += ["", f"log2 of {', '.join(pdfs)} per device: " + "; ".join(f"{k} {v}" for k, v in raw_dev.items()), ""]
    for ti, target in enumerate(names):
        srcs = [i for i in range(len(names)) if i != ti]
        block = np.array([device_vector(feats[i], pdfs) for i in srcs])
        tvec = np.array([device_vector(feats[ti], pdfs)])
        lines.append(f"## target {short(target)} (sources: {', '.join(short(names[i]) for i in srcs)})")
        lines.append("")
        lines.append("| scaling | target's scaled device block | squared distance to each source | "
                     "nearest source | MTL score | MTL picks on the test inputs | SVM C, gamma |")
        lines.append("|---|---|---|---|---|---|---|")
        x_test, _, rt_test = te[ti]
        rows = [("per_feature", pdfs), ("shared", pdfs)] + [("per_feature", (f,)) for f in pdfs]
        for mode, fs in rows:
            cols = [pdfs.index(f) for f in fs]
            sc = MinMaxScaler((-1, 1)).fit(block[:, cols])
            if mode == "shared":
                share_ranges(sc, [range(len(cols))])
            s_src, s_t = sc.transform(block[:, cols]), sc.transform(tvec[:, cols])[0]
            d2 = ((s_src - s_t) ** 2).sum(1)
            sel = MTLSelector(fs, kind="svm", device_scale=mode).fit([(tr[i][0], tr[i][1], feats[i]) for i in srcs])
            picks = sel.predict(x_test, feats[ti])
            dist = ", ".join(f"{short(names[i])} {d:.2f}" for i, d in zip(srcs, d2, strict=True))
            pk = ", ".join(f"{common[k]} {v}" for k, v in Counter(picks.tolist()).most_common())
            hyper = sel.model.hyper
            label = mode if len(fs) == len(pdfs) else f"{fs[0]} alone"
            lines.append(f"| {label} | {np.round(s_t, 2).tolist()} | {dist} | {short(names[srcs[int(np.argmin(d2))]])} "
                         f"| {score(rt_test, picks):.3f} | {pk} | {hyper.get('C')}, {hyper.get('gamma')} |")
        lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
