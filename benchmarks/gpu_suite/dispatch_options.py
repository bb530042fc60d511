"""First-call dispatch options on the GPU suite's median test inputs (CUDA): how long until an object's
features are on the host, as the caller sees it (host wall time), done five ways.

    python -m benchmarks.gpu_suite.dispatch_options [--out DIR] spmv:NAME histogram:NAME bfs:NAME

A diagnostic option of the GPU suite (CUDA only; writes DIR/dispatch_options_<device>.json, default DIR
out/gpu_suite/; the committed run is benchmarks/gpu_suite/results/gpu_dispatch_options_h100.json).
NAME is a test input of `benchmarks/gpu_suite/run.py` (the report's median inputs). Ways: blocking (kernels + copy + sync on
the caller's stream); prefetched on a side stream of normal or highest priority (issue cost at fix time, then
the wait + finish once the result is needed); each also with the caller's stream busy (a 256 MB copy queued
first); and, for the histogram only, a CUDA graph of the feature kernel replayed (the SpMV and BFS feature
kernels take a generation stamp argument that changes every call, so a replayed graph would be wrong). The
model itself (host only) is what `benchmarks/gpu_suite/run.py` reports as the host-features dispatch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from adaptune.kernels import features, inputs
from benchmarks.gpu_suite.run import BENCHES, SETS, Runtime, wall_median_ms
from benchmarks.harness import device_tag, time_host

QUEUED_BYTES = 256 << 20


def build(rt: Runtime, bench_name: str, input_name: str, seed: int) -> tuple[Any, ...]:
    make, n_train, n_test = SETS[bench_name]
    _, test = inputs.train_test(make, n_train, n_test, seed)
    spec = next(s for s in test if s.name == input_name)
    args, _, _ = BENCHES[bench_name](rt).build(spec)
    return args


def measure(rt: Runtime, obj: Any, compute: Any, busy: tuple[Any, Any]) -> dict[str, Any]:
    cp = rt.cp
    src, dst = busy
    out: dict[str, Any] = {}

    def blocking() -> None:
        features.forget_features(obj)
        compute(obj)

    out["blocking_ms"] = wall_median_ms(blocking, repeats=21)
    for high in (False, True):
        tag = "high" if high else "normal"
        try:
            issue, finish = [], []
            for _ in range(21):
                features.forget_features(obj)
                t0 = time.perf_counter()
                pending = features.prefetch_features(obj, high_priority=high)
                issue.append((time.perf_counter() - t0) * 1e3)
                while not pending.ready():
                    pass
                t0 = time.perf_counter()
                compute(obj)
                finish.append((time.perf_counter() - t0) * 1e3)
            out[f"prefetch_{tag}_issue_ms"] = statistics.median(issue)
            out[f"prefetch_{tag}_finish_ms"] = statistics.median(finish)
        except Exception as exc:  # recorded, the other ways go on
            out[f"prefetch_{tag}_error"] = repr(exc)[:300]
    out["busy_queued_ms"] = wall_median_ms(lambda: (cp.copyto(dst, src), cp.cuda.Device().synchronize()), 5)
    def queue_busy_work() -> None:
        features.forget_features(obj)
        cp.cuda.Device().synchronize()
        cp.copyto(dst, src)

    for way in ("blocking", "side_normal", "side_high"):
        def first_call(way: str = way) -> None:
            if way != "blocking":
                features.prefetch_features(obj, after_caller=False, high_priority=way == "side_high")
            compute(obj)

        try:
            out[f"busy_{way}_ms"] = 1e3 * time_host(first_call, warmup=0, repeats=11, setup=queue_busy_work)["p50"]
        except Exception as exc:
            out[f"busy_{way}_error"] = repr(exc)[:300]
        cp.cuda.Device().synchronize()
    return out


def histogram_graph(rt: Runtime, d: Any) -> dict[str, Any]:
    """The histogram's feature kernel captured once in a CUDA graph and replayed (keys rewritten in place:
    the features must be computed again), against launching it again."""
    cp = rt.cp
    out: dict[str, Any] = {}
    stream = cp.cuda.Stream(non_blocking=True)
    plan = features._histogram_plan

    def relaunch() -> None:
        with stream:
            p = plan(d, features.HISTOGRAM_SAMPLE)
            p.finish([cp.asnumpy(p.buffers[0], stream=stream)])

    out["relaunch_ms"] = wall_median_ms(relaunch, repeats=21)
    try:
        with stream:
            warm = plan(d, features.HISTOGRAM_SAMPLE)  # the pool holds a block for the capture to reuse
            del warm
            stream.synchronize()
            stream.begin_capture()
            p = plan(d, features.HISTOGRAM_SAMPLE)
            graph = stream.end_capture()
        want = features.histogram_features(d, cached=False)

        def replay() -> dict[str, float]:
            graph.launch(stream=stream)
            return p.finish([cp.asnumpy(p.buffers[0], stream=stream)])

        out["replay_equal"] = replay() == want
        out["replay_ms"] = wall_median_ms(replay, repeats=21)
    except Exception as exc:
        out["graph_error"] = repr(exc)[:300]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_suite.dispatch_options",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", help="benchmark:input_name")
    parser.add_argument("--out", default="out/gpu_suite", help="folder (default out/gpu_suite/)")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    rt = Runtime("cuda")
    cp = rt.cp
    busy = (cp.zeros(QUEUED_BYTES // 4, cp.float32), cp.zeros(QUEUED_BYTES // 4, cp.float32))
    compute = {"spmv": features.spmv_features, "histogram": features.histogram_features,
               "bfs": features.bfs_features}
    result: dict[str, Any] = {"device": rt.dev.name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "inputs": {}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for item in args.inputs:
        bench_name, input_name = item.split(":", 1)
        try:
            obj = build(rt, bench_name, input_name, args.seed)[0]
            row = {"input": input_name, **measure(rt, obj, compute[bench_name], busy)}
            if bench_name == "histogram":
                row["graph"] = histogram_graph(rt, obj)
        except Exception as exc:
            row = {"input": input_name, "error": repr(exc)[:500]}
        result["inputs"][bench_name] = row
        print(bench_name, json.dumps(row), flush=True)
        (out / f"dispatch_options_{device_tag(rt.dev.name)}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
