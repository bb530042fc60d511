"""Crash rate of LS-CAT kernels under each buffer rule, with 95 % intervals (the ``index`` rule's H100 test).

    python -m benchmarks.lscat.crash_rule [--kernels data/lscat_h100/kernels.csv] [--work data/lscat_work]
        [--out out/lscat]      # writes lscat_crash_rule.json there (committed: benchmarks/lscat/results/)

Per buffer rule of data/lscat_h100/kernels.csv (2xy: runs 1-2, 4xy+64k: runs 3-5, index: run 6) it counts
attempted kernels by status and gives the crash rate (and crash + hang) with a Wilson interval; the
difference index - 4xy+64k with Newcombe's interval and Fisher's exact test. The runs measured different
kernels, so the script also splits kernels by what the rule does to them: at size 240 (where most crashes
happen), does ``index`` give some pointer more than 4xy+64k elements (``adaptune.predict.indexbound``)?
Where it does not, the two rules launch the kernel identically, and a difference in crash rate there is
the kernel populations', not the rule's. Sources come from ``--work`` (any workset.jsonl holding them).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import math
from pathlib import Path

from scipy.stats import binomtest, fisher_exact

from adaptune.predict import corpus, indexbound

ROOT = Path(__file__).resolve().parents[2]


def rate(k: int, n: int) -> dict:
    """k/n with its 95 % Wilson score interval."""
    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return {"k": k, "n": n, "rate": k / n, "ci95": [float(ci.low), float(ci.high)]}


def difference(a: dict, b: dict) -> dict:
    """a - b with Newcombe's hybrid score interval (95 %) and Fisher's exact two-sided p."""
    (la, ua), (lb, ub) = a["ci95"], b["ci95"]
    pa, pb = a["rate"], b["rate"]
    d = pa - pb
    lo = d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    hi = d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    p = fisher_exact([[a["k"], a["n"] - a["k"]], [b["k"], b["n"] - b["k"]]]).pvalue
    return {"difference": d, "ci95": [lo, hi], "fisher_p": float(p)}


def enlarged_at(item: dict, size: int) -> bool | None:
    """Does the ``index`` rule give some pointer more elements than 4xy+64k at ``size``? None: no source."""
    params = corpus.parse_params(item["params"])
    try:
        bounds = indexbound.pointer_bounds(item["source"], item["function"], params, size, size, bool(item["two_d"]))
    except Exception:  # noqa: BLE001 - the harness falls back to 4xy+64k when the reader fails
        return False
    base = corpus.buffer_elements(size, size, "4xy+64k")
    return any(corpus.buffer_elements(size, size, "index", b) > base for b in bounds.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default=str(ROOT / "data" / "lscat_h100" / "kernels.csv"))
    ap.add_argument("--work", default=str(ROOT / "data" / "lscat_work"))
    ap.add_argument("--size", type=int, default=240)
    ap.add_argument("--out", default="out/lscat", help="folder for lscat_crash_rule.json (default out/lscat/)")
    a = ap.parse_args()
    with open(a.kernels, newline="") as fh:
        recs = list(csv.DictReader(fh))
    items = {}
    for line in Path(a.work).joinpath("workset.jsonl").read_text().splitlines():
        item = json.loads(line)
        items[item["id"]] = item
    by_rule: dict[str, list[dict]] = collections.defaultdict(list)
    for r in recs:
        by_rule[r["buffer_rule"]].append(r)
    out: dict = {"size_for_split": a.size, "rules": {}, "sources_from": Path(a.work).name}
    for rule, rs in by_rule.items():
        n = len(rs)
        status = collections.Counter(r["status"] for r in rs)
        illegal = sum(r["status"] == "crash" and "illegal" in r["error"].lower() for r in rs)
        split: dict = {}
        for r in rs:
            item = items.get(r["kernel"])
            key = "no source" if item is None else ("enlarged" if enlarged_at(item, a.size) else "same as 4xy+64k")
            split.setdefault(key, []).append(r["status"] == "crash")
        out["rules"][rule] = {
            "runs": sorted({r["run"] for r in rs}, key=int), "attempted": n, "status": dict(status),
            "crash": rate(status["crash"], n), "crash_illegal_address": rate(illegal, n),
            "crash_or_hang": rate(status["crash"] + status["hang"], n),
            "by_index_rule_effect": {k: rate(sum(v), len(v)) for k, v in sorted(split.items())}}
    new, old = out["rules"].get("index"), out["rules"].get("4xy+64k")
    if new and old:
        out["index_minus_4xy64k"] = {k: difference(new[k], old[k])
                                     for k in ("crash", "crash_illegal_address", "crash_or_hang")}
        out["index_minus_4xy64k"]["by_index_rule_effect"] = {
            k: difference(new["by_index_rule_effect"][k], old["by_index_rule_effect"][k])
            for k in new["by_index_rule_effect"] if k in old["by_index_rule_effect"]}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "lscat_crash_rule.json").write_text(json.dumps(out, indent=1))

    def fmt(x: dict) -> str:
        return f"{100 * x['rate']:.1f} % [{100 * x['ci95'][0]:.1f}, {100 * x['ci95'][1]:.1f}] ({x['k']}/{x['n']})"

    for rule, r in out["rules"].items():
        print(f"{rule:8s} runs {','.join(r['runs'])}: crash {fmt(r['crash'])}; illegal address "
              f"{fmt(r['crash_illegal_address'])}; crash or hang {fmt(r['crash_or_hang'])}")
        for k, v in r["by_index_rule_effect"].items():
            print(f"    {k:16s} crash {fmt(v)}")
    for k, v in out.get("index_minus_4xy64k", {}).items():
        if k != "by_index_rule_effect":
            print(f"index - 4xy+64k, {k}: {100 * v['difference']:+.1f} points "
                  f"[{100 * v['ci95'][0]:+.1f}, {100 * v['ci95'][1]:+.1f}], Fisher p {v['fisher_p']:.3f}")
    for k, v in out.get("index_minus_4xy64k", {}).get("by_index_rule_effect", {}).items():
        print(f"index - 4xy+64k, crash, {k}: {100 * v['difference']:+.1f} points "
              f"[{100 * v['ci95'][0]:+.1f}, {100 * v['ci95'][1]:+.1f}], Fisher p {v['fisher_p']:.3f}")


if __name__ == "__main__":
    main()
