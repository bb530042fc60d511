"""First configuration on an independent test: the recorded convolution spaces of six other GPUs.

    python -m benchmarks.lscat.first_config_hub [--out benchmarks/lscat/results/lscat_first_config_hub.json]

``data/benchmark_hub/convolution_milo/`` holds Kernel Tuner caches of one convolution kernel (4096x4096
image, 15x15 filter; block_size_x/y, tile_size_x/y, read_only, use_padding, use_shmem) timed on A100,
A4000, A6000 (NVIDIA) and MI250X, W6600, W7800 (AMD). None of them was used to build the LS-CAT model
or to write the hand rules (those rules were committed in 5d9a7ae before these times were read), so
this is an independent test of the first configuration. The model reads the CUDA twin of that kernel,
``examples/convolution/kernel.cu`` (our port of Kernel Tuner's convolution; ``use_shared_mem`` there is
``use_shmem`` in the caches); the hub's own kernel source is not in the repository.

Every chooser picks one configuration of the recorded space (the configurations Kernel Tuner ran); its
score is optimum / its time on that GPU (a failed configuration scores 0). The declared rule is
``adaptune.predict.first_pick`` (model block shape + work rule + switch rule); the others are
baselines and ablations, not candidates to choose among.
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

ROOT = Path(__file__).resolve().parents[2]

GPUS = ("A100", "A4000", "A6000", "MI250X", "W6600", "W7800")
HUB = ROOT / "data" / "benchmark_hub" / "convolution_milo"


def ratio(rp: Replay, i: int) -> float:
    """optimum / time of valid configuration ``i`` (0 when it failed)."""
    v = float(rp.values[i])
    return rp.optimum / v if math.isfinite(v) and v > 0 else 0.0


def choosers(rp: Replay, perf: np.ndarray, two_d: bool) -> dict[str, int]:
    """Index of each chooser's first configuration in the replayed space."""
    space = rp.space
    cfgs = list(space.configs())
    shape = corpus.SHAPES[int(np.argmax(perf))]
    smallest = {n: min(c[n] for c in cfgs) for n in space.names}
    smallest_ok = next((c for c in cfgs if all(c[n] == smallest[n] for n in space.names
                                               if n not in ("block_size_x", "block_size_y"))), cfgs[0])
    block_only = first_config(space, shape if two_d else (shape[0] * shape[1], 1), base={
        n: v for n, v in smallest_ok.items() if n not in ("block_size_x", "block_size_y")})
    key = [json.dumps(c, sort_keys=True) for c in cfgs]
    return {
        "first_pick (declared: shape + work + switches)": int(np.argmin(space_prior(space, perf, two_d, 0.1, 0.1))),
        "prior top before (shape + work; switches by enumeration order)": int(np.argmin(space_prior(
            space, perf, two_d, 0.1, 0.0))),
        "ablation: shape + switches (no work rule)": int(np.argmin(space_prior(space, perf, two_d, 0.0, 0.1))),
        "ablation: shape only, other parameters at their smallest": key.index(json.dumps(block_only, sort_keys=True)),
    }


def search(rp: Replay, perf: np.ndarray, two_d: bool, seeds: int, budget: int) -> dict[str, dict[str, float]]:
    """Best-so-far ratio after 10, 20 and ``budget`` evaluations (mean over seeds) of warm with each prior,
    auto and random: the prior as a search prior on spaces it was not written on."""
    runs = {"warm+prior(shape+work)": ("warm", {"prior": space_prior(rp.space, perf, two_d, 0.1, 0.0)}),
            "warm+prior(shape+work+switches)": ("warm", {"prior": space_prior(rp.space, perf, two_d, 0.1, 0.1)}),
            "auto (no prior)": ("auto", {}), "random": ("random", {})}
    out: dict[str, dict[str, float]] = {}
    for name, (strategy, opts) in runs.items():
        at: dict[int, list[float]] = {10: [], 20: [], budget: []}
        for seed in range(seeds):
            tr = rp.run(strategy, Budget(max_evals=budget), seed=seed, **opts)
            best = np.minimum.accumulate(np.where(np.isfinite(tr.values), tr.values, np.inf))
            for n in at:
                at[n].append(rp.optimum / best[min(n, len(best)) - 1] if math.isfinite(best[min(n, len(best)) - 1])
                             else 0.0)
        out[name] = {f"best_of_{n}": float(np.mean(v)) for n, v in at.items()}
        print(f"   {name:32s} " + ", ".join(f"{k} {v:.3f}" for k, v in out[name].items()), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="out/lscat/lscat_first_config_hub.json", help="default out/lscat/lscat_first_config_hub.json (never the committed results)")
    ap.add_argument("--use-ptx", choices=("auto", "yes", "no"), default="no",
                    help="PTX features need NVRTC; 'no' keeps the result the same on every host")
    ap.add_argument("--search-seeds", type=int, default=0,
                    help="also run warm (with each prior), auto and random for this many seeds")
    ap.add_argument("--budget", type=int, default=40)
    a = ap.parse_args(argv)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    source = (ROOT / "examples" / "convolution" / "kernel.cu").read_text()
    use_ptx = {"auto": None, "yes": True, "no": False}[a.use_ptx]
    out: dict = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "use_ptx": a.use_ptx,
                 "source": "examples/convolution/kernel.cu", "gpus": {}}
    for gpu in GPUS:
        rp = Replay.from_file(HUB / f"{gpu}.json.gz")
        size = int(math.sqrt(4096 * 4096))  # clipped to LS-CAT's largest size by the model
        perf = shape_scores(source, "convolution_kernel", size=size, use_ptx=use_ptx)
        two_d = corpus.is_2d(source)
        ok = np.isfinite(rp.values)
        r = rp.optimum / rp.values[ok]
        e: dict = {"configs": len(rp.space), "failed": int((~ok).sum()), "optimum_ms": rp.optimum,
                   "predicted_shape": list(corpus.SHAPES[int(np.argmax(perf))]),
                   "random_expected": float(np.sum(r) / len(rp.values)), "median_config": float(np.median(
                       np.where(ok, rp.optimum / np.where(ok, rp.values, 1.0), 0.0))),
                   "share_configs_within_0.9": float(np.mean(np.where(ok, rp.optimum / np.where(ok, rp.values, 1.0),
                                                                     0.0) >= 0.9)),
                   "choosers": {}}
        for name, i in choosers(rp, perf, two_d).items():
            v = float(rp.values[i])
            e["choosers"][name] = {"ratio": ratio(rp, i), "config": rp.space.config(i),
                                   "share_of_configs_faster": float(np.mean(rp.values[ok] < v)) if math.isfinite(v)
                                   else 1.0}
        if a.search_seeds:
            e["search"] = search(rp, perf, two_d, a.search_seeds, a.budget)
        out["gpus"][gpu] = e
        print(f"{gpu:7s} " + ", ".join(f"{k.split(' (')[0].split(':')[-1].strip()}: {v['ratio']:.3f}"
                                       for k, v in e["choosers"].items())
              + f", random {e['random_expected']:.3f}, share>=0.9 {e['share_configs_within_0.9']:.3f}", flush=True)
    if a.search_seeds:
        first = next(iter(out["gpus"].values()))["search"]
        out["mean_search"] = {k: {m: float(np.mean([g["search"][k][m] for g in out["gpus"].values()]))
                                  for m in first[k]} for k in first}
    names = list(next(iter(out["gpus"].values()))["choosers"])
    out["mean"] = {n: float(np.mean([g["choosers"][n]["ratio"] for g in out["gpus"].values()])) for n in names}
    out["mean"]["random_expected"] = float(np.mean([g["random_expected"] for g in out["gpus"].values()]))
    out["mean"]["median_config"] = float(np.mean([g["median_config"] for g in out["gpus"].values()]))
    out["mean_nvidia"] = {n: float(np.mean([out["gpus"][g]["choosers"][n]["ratio"] for g in GPUS[:3]])) for n in names}
    Path(a.out).write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({"mean": out["mean"], "mean_nvidia": out["mean_nvidia"]}, indent=1))


if __name__ == "__main__":
    main()
