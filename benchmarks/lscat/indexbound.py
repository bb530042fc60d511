"""Static check of adaptune.predict.indexbound over the LS-CAT working set against the recorded crashes.

    python -m benchmarks.lscat.indexbound [--work data/lscat_work] [--size 240]
        [--out benchmarks/lscat/results/lscat_indexbound.json]

For every working-set kernel it bounds the highest index of each pointer parameter at matrix size
``--size`` (most recorded crashes happened at 240) and compares it with the buffer the kernel got
(``buffer_rule`` in data/lscat_h100/kernels.csv: 2xy in runs 1-2, 4xy+64k since). Per recorded status
(ok, crash by illegal address, other crashes, hang, not yet attempted) it counts kernels whose every
pointer is bounded, kernels with a bounded pointer past their buffer (the analysis predicts an
out-of-bounds access), and kernels the ``index`` rule would size to their bound within the memory cap.
A crash the analysis explains is a hit; an ok kernel it says overruns is a false alarm or an access the
kernel never reaches (the analysis is flow-insensitive). Needs the git-ignored working set only.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import time
from pathlib import Path

from adaptune.predict import corpus, indexbound

ROOT = Path(__file__).resolve().parents[2]


def status_class(rec: dict | None) -> str:
    if rec is None:
        return "not attempted"
    st, err = rec["status"], rec.get("error", "")
    if st == "crash":
        return "crash: illegal address" if "ILLEGAL_ADDRESS" in err.upper() or "illegal memory" in err.lower() \
            else "crash: other"
    return st


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=str(ROOT / "data" / "lscat_work"))
    ap.add_argument("--kernels", default=str(ROOT / "data" / "lscat_h100" / "kernels.csv"))
    ap.add_argument("--size", type=int, default=240)
    ap.add_argument("--out", default="out/lscat/lscat_indexbound.json", help="default out/lscat/lscat_indexbound.json (never the committed results)")
    a = ap.parse_args(argv)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.kernels, newline="") as fh:
        recs = {r["kernel"]: r for r in csv.DictReader(fh)}
    t0 = time.time()
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    examples: dict[str, list] = collections.defaultdict(list)
    for line in (Path(a.work) / "workset.jsonl").read_text().splitlines():
        item = json.loads(line)
        rec = recs.get(item["id"])
        cls = status_class(rec)
        rule = (rec or {}).get("buffer_rule") or "4xy+64k"
        have = corpus.buffer_elements(a.size, a.size, rule)
        params = corpus.parse_params(item["params"])
        bounds = indexbound.pointer_bounds(item["source"], item["function"], params, a.size, a.size,
                                           bool(item.get("two_d")))
        known = [b for b in bounds.values() if b is not None]
        c = counts[cls]
        c["kernels"] += 1
        c["all_pointers_bounded"] += bool(bounds) and len(known) == len(bounds)
        c["some_pointer_bounded"] += bool(known)
        over = [b for b in known if b + 1 > have]
        c["bounded_pointer_past_buffer"] += bool(over)
        if over:
            fits = all(b + 1 <= corpus.INDEX_RULE_CAP for b in over)
            c["index_rule_sizes_it"] += fits
            c["past_cap"] += not fits
            if len(examples[cls]) < 5:
                examples[cls].append({"kernel": item["id"], "function": item["function"],
                                      "bounds": bounds, "buffer": have})
    out = {"size": a.size, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "index_rule_cap_elements": corpus.INDEX_RULE_CAP, "seconds": round(time.time() - t0, 1),
           "by_status": {k: dict(v) for k, v in sorted(counts.items())}, "examples": examples}
    Path(a.out).write_text(json.dumps(out, indent=1))
    for k, v in sorted(counts.items()):
        print(f"{k:24s} " + ", ".join(f"{n} {v[n]}" for n in ("kernels", "all_pointers_bounded",
                                                               "bounded_pointer_past_buffer", "index_rule_sizes_it",
                                                               "past_cap")))


if __name__ == "__main__":
    main()
