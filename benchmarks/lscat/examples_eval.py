"""Score launch_config's first configuration on the examples against their tuned optimum (H100 times).

    python -m benchmarks.lscat.examples_eval [--times data/lscat_h100/examples_h100.json]

Offline: the times come from benchmarks/lscat/examples.py on the device (a random sample of each CUDA
space plus the default with every block shape). For each example the predicted shape becomes a
configuration through adaptune.predict.first_config (other parameters at the example's defaults) and is
scored as best_time / its_time (1.0 = the optimum found). Baselines: the example's own default, the
1024-thread configuration nearest to (1024, 1), and the best block shape with the other parameters at
their defaults (the most any first block shape can reach).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from adaptune.predict import first_config, launch_config
from adaptune.space import Space

ROOT = Path(__file__).resolve().parents[2]

KERNELS = {"vector_add": ("vector_add", 1_000_003), "matmul": ("matmul_kernel", 512 * 512),
           "convolution": ("convolution_kernel", 512 * 512), "reduction": ("sum_floats", 2**22 + 3)}


def _ratio(times: dict[str, float], best: float, config: dict) -> float | None:
    t = times.get(json.dumps(config, sort_keys=True))
    return None if t is None else best / t


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--times", default=str(ROOT / "data" / "lscat_h100" / "examples_h100.json"))
    ap.add_argument("--out", default="out/lscat/lscat_examples_h100.json", help="default out/lscat/lscat_examples_h100.json (never the committed results)")
    a = ap.parse_args(argv)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(Path(a.times).read_text())
    out: dict = {"device": data.get("device"), "examples": {}}
    for ex, (name, elements) in KERNELS.items():
        rows = [r for r in data["examples"][ex]["rows"] if r.get("ms") is not None and not r.get("refused")]
        times = {json.dumps(r["config"], sort_keys=True): r["ms"] for r in rows}
        params: dict[str, list] = {}
        for r in rows:
            for k, v in r["config"].items():
                params.setdefault(k, [])
                if v not in params[k]:
                    params[k].append(v)
        space = Space({k: sorted(v) for k, v in params.items()})  # the measured values only
        default = data["examples"][ex]["default"]
        source = (ROOT / "examples" / ex / "kernel.cu").read_text()
        shape = launch_config(source, name, size=int(math.sqrt(elements)))
        cfg = first_config(space, shape, base=default)
        cfg_1024 = first_config(space, (1024, 1), base=default)
        best = min(times.values())

        block_names = [n for n in ("block_size_x", "block_size_y") if n in default]
        block_only = [t for c, t in ((json.loads(k), t) for k, t in times.items())
                      if all(c[n] == v for n, v in default.items() if n not in block_names)]
        r = {"predicted": _ratio(times, best, cfg), "default": _ratio(times, best, default),
             "1024": _ratio(times, best, cfg_1024), "block_oracle": best / min(block_only)}
        out["examples"][ex] = {"predicted_shape": list(shape), "first_config": cfg,
                               **{f"ratio_{k}": v for k, v in r.items()}, "configs_timed": len(times),
                               "best_ms": best}
        print(f"{ex:12s} shape {shape}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items() if v is not None))
    for key in ("ratio_predicted", "ratio_default", "ratio_1024", "ratio_block_oracle"):
        vals = [e[key] for e in out["examples"].values() if e[key] is not None]
        out[f"mean_{key}"] = sum(vals) / len(vals) if vals else None
    Path(a.out).write_text(json.dumps(out, indent=1))
    print({k: v for k, v in out.items() if k.startswith("mean")})


if __name__ == "__main__":
    main()
