"""The launch-configuration model as a search prior: evaluations to 0.95 of the optimum, with and without.

    python -m benchmarks.lscat.prior_eval [--times data/lscat_h100/examples_h100.json] [--seeds 20]

Offline, on recorded H100 times (benchmarks/lscat/examples.py: for each example a random sample of its
CUDA space, its default, and the default with every block shape). Each example becomes a replayed space
whose valid configurations are exactly the timed ones (adaptune.search.replay.Replay), so a strategy can
only ask what was measured. Strategies: ``warm`` with the model's prior (block-shape ranking + the
work-parameter rule of adaptune.predict.prior), ``warm`` with the block-shape ranking only, ``auto`` (=
``warm`` without a prior) and ``random``; seeds vary each strategy's own randomness. Reported per
example: evaluations until the best found is within 0.95 of the optimum (mean, median, and how many
runs never got there within the budget), and the first configuration's ratio optimum/time (the prior's
top pick: a first configuration that sets every parameter, not only the block shape).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from adaptune.predict import corpus
from adaptune.predict.predictor import first_config, shape_scores
from adaptune.predict.prior import space_prior
from adaptune.search.base import Budget
from adaptune.search.replay import Replay
from adaptune.space import Space

ROOT = Path(__file__).resolve().parents[2]

KERNELS = {"vector_add": ("vector_add", 1_000_003), "matmul": ("matmul_kernel", 512 * 512),
           "convolution": ("convolution_kernel", 512 * 512), "reduction": ("sum_floats", 2**22 + 3)}


def replay_of(rows: list[dict], name: str) -> Replay:
    """A Space whose valid configurations are the timed ones, and their times."""
    names = list(rows[0]["config"])
    params = {n: sorted({r["config"][n] for r in rows}) for n in names}
    times = {tuple(r["config"][n] for n in names): r["ms"] for r in rows}
    keys = frozenset(times)

    def timed(config: dict) -> bool:
        return tuple(config[n] for n in names) in keys

    space = Space(params, constraints=[timed])
    values = np.array([times[tuple(c[n] for n in names)] for c in space.configs()])
    return Replay(space, values, name=name)


def evals_to(trace_values: np.ndarray, optimum: float, frac: float) -> int | None:
    best = np.minimum.accumulate(trace_values)
    hit = np.nonzero(optimum / best >= frac)[0]
    return int(hit[0]) + 1 if len(hit) else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--times", default=str(ROOT / "data" / "lscat_h100" / "examples_h100.json"))
    ap.add_argument("--out", default="out/lscat/lscat_prior_h100.json", help="default out/lscat/lscat_prior_h100.json (never the committed results)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--frac", type=float, default=0.95)
    ap.add_argument("--candidates", choices=("timed", "checked"), default="timed",
                    help="timed: every timed configuration (round 2's definition); checked: only those whose "
                         "result passed the example's check (reduction's use_atomics=1 rows failed it, see "
                         "benchmarks/lscat/examples.py)")
    a = ap.parse_args(argv)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(Path(a.times).read_text())
    out: dict = {"device": data.get("device"), "seeds": a.seeds, "budget": a.budget, "frac": a.frac,
                 "candidates": a.candidates,
                 "examples": {}, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for ex, (kname, elements) in KERNELS.items():
        rows = [r for r in data["examples"][ex]["rows"] if r.get("ms") is not None and not r.get("refused")
                and (a.candidates == "timed" or r.get("ok"))]
        rp = replay_of(rows, ex)
        source = (ROOT / "examples" / ex / "kernel.cu").read_text()
        perf = shape_scores(source, kname, size=int(math.sqrt(elements)))
        two_d = corpus.is_2d(source)
        priors = {"shape+work": space_prior(rp.space, perf, two_d, 0.1),
                  "shape": space_prior(rp.space, perf, two_d, 0.0),
                  "shape+work+switches": space_prior(rp.space, perf, two_d, 0.1, 0.1)}
        default = data["examples"][ex]["default"]
        cfgs = list(rp.space.configs())
        key = [json.dumps(c, sort_keys=True) for c in cfgs]
        t_default = (rp.values[key.index(json.dumps(default, sort_keys=True))]
                     if json.dumps(default, sort_keys=True) in key else None)  # None: the default failed the check
        bshape = corpus.SHAPES[int(np.argmax(perf))]
        bshape = bshape if two_d else (bshape[0] * bshape[1], 1)
        block_first = first_config(rp.space, bshape, base=default)
        t_block_first = rp.values[key.index(json.dumps(block_first, sort_keys=True))] if block_first in cfgs else None
        e: dict = {"configs": len(rp.space), "optimum_ms": rp.optimum, "predicted_shape": list(bshape),
                   "first_config": {"default": rp.optimum / t_default if t_default else None,
                                    "predicted_block_other_defaults": (rp.optimum / t_block_first
                                                                       if t_block_first else None)},
                   "strategies": {}}
        for pname, pr in priors.items():
            i = int(np.argmin(pr))
            e["first_config"][f"prior_top_{pname}"] = rp.optimum / rp.values[i]
            e["first_config"][f"prior_top_{pname}_config"] = cfgs[i]
        runs = {"warm+prior(shape+work)": ("warm", {"prior": priors["shape+work"]}),
                "warm+prior(shape)": ("warm", {"prior": priors["shape"]}),
                "warm+prior(shape+work+switches)": ("warm", {"prior": priors["shape+work+switches"]}),
                "auto (no prior)": ("auto", {}), "random": ("random", {})}
        for sname, (strategy, opts) in runs.items():
            hits, firsts, at10 = [], [], []
            for seed in range(a.seeds):
                tr = rp.run(strategy, Budget(max_evals=a.budget), seed=seed, **opts)
                hits.append(evals_to(tr.values, rp.optimum, a.frac))
                firsts.append(rp.optimum / tr.values[0])
                at10.append(rp.optimum / tr.values[:10].min())
            got = [h for h in hits if h is not None]
            censored = [h if h is not None else a.budget + 1 for h in hits]
            e["strategies"][sname] = {"evals_to_frac_mean_censored": float(np.mean(censored)),
                                      "evals_to_frac_median": float(np.median(censored)),
                                      "never_within_budget": len(hits) - len(got),
                                      "first_eval_ratio_mean": float(np.mean(firsts)),
                                      "best_of_10_ratio_mean": float(np.mean(at10))}
            print(f"{ex:12s} {sname:24s} evals to {a.frac}: mean {np.mean(censored):5.1f} median "
                  f"{np.median(censored):4.0f} (never {len(hits) - len(got)}), first {np.mean(firsts):.3f}, "
                  f"best of 10 {np.mean(at10):.3f}", flush=True)
        out["examples"][ex] = e
    for sname in next(iter(out["examples"].values()))["strategies"]:
        out[f"mean_evals_to_frac[{sname}]"] = float(np.mean(
            [e["strategies"][sname]["evals_to_frac_mean_censored"] for e in out["examples"].values()]))
    for k in ("default", "predicted_block_other_defaults", "prior_top_shape", "prior_top_shape+work",
              "prior_top_shape+work+switches"):
        vals = [e["first_config"][k] for e in out["examples"].values() if e["first_config"].get(k) is not None]
        out[f"mean_first_config[{k}]"] = float(np.mean(vals)) if vals else None
    Path(a.out).write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({k: v for k, v in out.items() if k.startswith("mean")}, indent=1))


if __name__ == "__main__":
    main()
