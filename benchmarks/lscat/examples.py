"""Measure the examples' CUDA spaces on a GPU for the launch_config evaluation (runs on the device).

    python -m benchmarks.lscat.examples --out $OUT/examples.json [--sample 120]

For each example (vector_add, matmul, convolution, reduction) it times (a) a seeded random sample of the
CUDA space plus its default, whose best stands for the tuned optimum, and (b) the default configuration
with every block shape the space allows, so any predicted first configuration can be scored offline
against the optimum (benchmarks/lscat/run.py). Reuses examples/check_cuda.py's problem set-up and
correctness checks; each time is the median of ``--repeats`` launches after a warm-up (CUDA events).

check_cuda's checks expect the state after exactly two launches (warm-up + timed): the reduction with
``use_atomics=1`` adds into its output on every launch. Round 2's file timed 5 launches after the warm-up
and so marked every ``use_atomics=1`` row as failing its check (66 of 126 reduction rows). Now every array
argument is saved before timing and restored after it, and the kernel is launched twice more, so the
check sees what it expects.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.space import Space
from benchmarks.harness import example_module

ROOT = Path(__file__).resolve().parents[2]

BLOCK_NAMES = ("block_size_x", "block_size_y")


def default_config(space: Space, defaults: dict[str, Any]) -> dict[str, Any]:
    """The first valid configuration that agrees with the example's DEFAULTS on the names it gives."""
    given = {k: v for k, v in defaults.items() if k in space.names}
    for c in space.configs():
        if all(c[k] == v for k, v in given.items()):
            return c
    return space.config(0)


def configs_for(space: Space, sample: int, seed: int, defaults: dict[str, Any]) -> list[dict[str, Any]]:
    """The default, a random sample, and the default with each block shape the space allows."""
    out: dict[str, dict[str, Any]] = {}
    default = default_config(space, defaults)
    out[space.key(default)] = default
    rng = np.random.default_rng(seed)
    for i in space.sample(rng, min(sample, len(space))):
        c = space.config(int(i))
        out[space.key(c)] = c
    names = [n for n in BLOCK_NAMES if n in space.names]
    for c in space.configs():
        if all(c[k] == v for k, v in default.items() if k not in names):
            out[space.key(c)] = c
    return [default, *(c for c in out.values() if c != default)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sample", type=int, default=120)
    ap.add_argument("--deadline-s", type=float, default=150.0)
    ap.add_argument("--repeats", type=int, default=20, help="timed launches a configuration (median)")
    a = ap.parse_args(argv)
    import cupy as cp

    cc = example_module("check_cuda")
    t0 = time.time()

    def timed_launch(cp_: Any, example: str, name: str, defines: dict[str, int], grid: tuple[int, ...],
                     block: tuple[int, ...], args: list[Any]) -> float:
        source = "".join(f"#define {k} {int(v)}\n" for k, v in defines.items()) + (
            ROOT / "examples" / example / "kernel.cu").read_text()
        kernel = cp_.RawModule(code=source, options=("-std=c++17",)).get_function(name)
        saved = {i: arg.copy() for i, arg in enumerate(args) if isinstance(arg, cp_.ndarray)}
        try:
            kernel(grid, block, tuple(args))
        except cp_.cuda.driver.CUDADriverError as exc:
            if "OUT_OF_RESOURCES" in str(exc):
                raise cc.Refused(str(exc)) from None
            raise
        times = []
        start, stop = cp_.cuda.Event(), cp_.cuda.Event()
        for _ in range(a.repeats):
            start.record()
            kernel(grid, block, tuple(args))
            stop.record()
            stop.synchronize()
            times.append(cp_.cuda.get_elapsed_time(start, stop))
        for i, arr in saved.items():  # back to the state before timing, then the two launches the check expects
            args[i][...] = arr
        kernel(grid, block, tuple(args))
        kernel(grid, block, tuple(args))
        cp_.cuda.get_current_stream().synchronize()
        return float(np.median(times))

    chosen: dict[str, Any] = {}

    def pick(space: Space, per_kernel: int, seed: int) -> list[dict[str, Any]]:
        cfgs = configs_for(space, a.sample, seed, cc.literals(chosen["example"]).get("DEFAULTS", {}))
        chosen["last"] = cfgs
        return cfgs

    cc.launch = timed_launch        # better timing, same set-up and checks
    cc.sample_configs = pick
    result: dict[str, Any] = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "examples": {}}
    for check in (cc.check_vector_add, cc.check_matmul, cc.check_convolution, cc.check_reduction):
        name = check.__name__.removeprefix("check_")
        if time.time() - t0 > a.deadline_s:
            break
        chosen["example"] = name
        try:
            rows = check(cp, a.sample)
        except Exception as exc:  # noqa: BLE001 - one example's failure must not lose the others
            result["examples"][name] = {"error": repr(exc)[:500]}
            continue
        result["examples"][name] = {"default": chosen["last"][0], "rows": [{"config": r["config"], "ok": r["ok"], "ms": r.get("ms"),
                                              "refused": bool(r.get("refused"))} for r in rows]}
        good = [r["ms"] for r in rows if r["ok"] and r.get("ms") is not None]
        print(f"{name:12s} {len(rows)} configs, {len(good)} timed, best {min(good) if good else None} ms, "
              f"{time.time() - t0:.0f}s", flush=True)
        Path(a.out).write_text(json.dumps(result, default=str))
    result["seconds"] = round(time.time() - t0, 1)
    Path(a.out).write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
