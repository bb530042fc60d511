"""The landed first call's gate before and after issue 24's segmented-reduce fix, A/B (PoCL or CUDA).

    python -m benchmarks.ndp.gate                               # PoCL -> out/ndp/ndp_gate_ab_pocl.{json,md}
    python -m benchmarks.ndp.gate --profile smoke               # fewer repeats
    bash benchmarks/gpu.sh ndp.gate --device cuda               # -> $OUT/ndp/ndp_gate_ab_h100.*

What the main run's first-call share times (``first_call.measure``) is one ``select`` right after the pick landed.
That call is dear (2.2 us on the H100's host against 0.2-0.6 us in a loop) because its thread was descheduled
while the features were finished on another thread: every step of the call then runs on cold caches, so the gate
is cut to the fewest distinct steps. ``Baseline`` is the gate as of 95ac2c9 (the id of the input, a dict lookup
of (input, pick), an identity check), kept here only as the A side; the B side is
``adaptune.lang.ndp.prefetched.PrefetchedSelector`` (the input fixed last recognised by identity: two list reads
and an ``is``). Both are built from the same rules (fitted on the recorded run's training inputs,
``first_call.fit_rules``) at one ragged segmented-reduce input, and timed interleaved (order alternating) in
``ROUNDS`` rounds of ``repeats``, under two protocols:

``handoff``: fix the inputs on the device, wait until the pick lands (made on the OpenCL callback's thread, CUDA's
host-function thread; ``first_call.wait_landed``, the main run's protocol), one call. ``descheduled``: the same,
then ``time.sleep(SLEEP_S)`` before the call: the caller's thread descheduled. Beside them a call of a function
that does nothing with the same arguments (the floor of any call after the same wait).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adaptune.lang.ndp.prefetched import PrefetchedSelector
from benchmarks.harness import (
    device_tag,
    markdown_table,
    paired_summary,
    parse_study_args,
    study_parser,
    write_results,
)
from benchmarks.ndp import first_call
from benchmarks.ndp import run as ndp_run

RECORDED = Path("benchmarks/ndp/results/ndp_h100.json")
ROUNDS = 3
SLEEP_S = 300e-6  # about the time from fix to the landed pick on the H100 (234 us in the main run)


class Baseline(PrefetchedSelector):
    """The gate of 95ac2c9: landed picks as (input, label) by the input's id, written under the lock by the
    finishing thread once it has checked that the fix is still current."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._picks: dict[int, tuple[Any, str]] = {}
        self._tokens: dict[int, object] = {}
        picks, key, host_vector, pick_host = self._picks, self.program.feature_position, \
            self.program.host_features, self.pick_host

        def select(*arrays: Any) -> str:
            o = arrays[key]
            landed = picks.get(id(o))
            if landed is not None and landed[0] is o:
                return landed[1]
            return pick_host(host_vector(*arrays))

        self.select = select

    def fix(self, *arrays: Any, high_priority: bool = False) -> Any:
        o = self.program.feature_array(*arrays)
        token = object()
        with self._lock:
            self.forget(*arrays)
            self._tokens[id(o)] = token

        def landed(vec: Any) -> str:
            label = self.pick_full(vec)
            with self._lock:
                if self._tokens.get(id(o)) is token:
                    self._picks[id(o)] = (o, label)
            return label

        return self.program.prefetch_features(*arrays, on_ready=landed, high_priority=high_priority)

    def forget(self, *arrays: Any) -> None:
        ident = id(self.program.feature_array(*arrays))
        self._tokens.pop(ident, None)
        self._picks.pop(ident, None)


def _nothing(*arrays: Any) -> None:
    return None


def ab(sels: dict[str, Any], arrays: tuple[Any, ...], wait: Callable[[Any], Any], repeats: int
       ) -> dict[str, list[list[float]]]:
    """Per selector (and ``floor``: the empty call), ``ROUNDS`` lists of ``repeats`` single calls (us), each right
    after ``wait(fix(...))``, the sides interleaved and their order alternating."""
    sides = [*sels, "floor"]
    samples: dict[str, list[list[float]]] = {k: [[] for _ in range(ROUNDS)] for k in sides}
    for sel in sels.values():  # warm: compile the spread's kernels, the first callbacks
        wait(sel.fix(*arrays))
        sel.forget(*arrays)
    for rep in range(repeats * ROUNDS):
        for side in sides[:: 1 if rep % 2 else -1]:
            sel = sels.get(side, sels["baseline"])
            wait(sel.fix(*arrays))
            call = _nothing if side == "floor" else sel.select
            t0 = time.perf_counter()
            call(*arrays)
            samples[side][rep // repeats].append((time.perf_counter() - t0) * 1e6)
            sel.forget(*arrays)
    return samples


def summary(protocol: str, samples: dict[str, list[list[float]]]) -> list[dict[str, Any]]:
    return [{"protocol": protocol, "gate": r.pop("side"), **r} for r in paired_summary(samples)]


def main(argv: list[str] | None = None) -> None:
    p = study_parser("ndp", __doc__.splitlines()[0])
    p.add_argument("--device", choices=("opencl", "cuda"), default="opencl")
    p.add_argument("--recorded", default=str(RECORDED))
    p.add_argument("--repeats", type=int, default=300, help="calls per side and round")
    args = parse_study_args(p, argv, smoke={"repeats": 20})
    run(args)


def run(args: argparse.Namespace) -> Path:
    doc = json.loads(Path(args.recorded).read_text())
    b = ndp_run.Bench(args.device)
    prog = ndp_run.row_sums.generate(b.dev, reuse_outputs=True)
    available = ndp_run.labels_of(b, "segreduce", prog)
    labels, xtr, ttr, _, _ = first_call.matrices(doc["benchmarks"]["segreduce"], set(available))
    fit = first_call.fit_rules(labels, xtr, ttr, prog.n_host_features)
    chosen = {lab: available[lab] for lab in labels}
    sels = {"baseline": Baseline(prog, chosen, fit["host"], fit["full"]),
            "now": PrefetchedSelector(prog, chosen, fit["host"], fit["full"])}
    values, offsets, _ = ndp_run.ragged(b, "power_law", 20000, 20.0, 5)
    arrays = (values, b.xp.asarray(offsets)) if b.cuda else (b.upload(values), b.upload(offsets))

    def landed(pending: Any) -> None:
        b.dev.synchronize()
        first_call.wait_landed(pending)

    def landed_then_asleep(pending: Any) -> None:
        landed(pending)
        time.sleep(SLEEP_S)

    rows = summary("handoff", ab(sels, arrays, landed, args.repeats))
    rows += summary("descheduled", ab(sels, arrays, landed_then_asleep, args.repeats))
    picks = {side: sel.pick_full(prog.features(*arrays)) for side, sel in sels.items()}
    data = {"recorded": args.recorded, "device": ndp_run.device_description(b), "full_rule": fit["full_kind"],
            "picks": picks, "rows": rows, "threads": threading.active_count()}
    table = markdown_table(rows, ["protocol", "gate", "p50_us", "p10_us", "p90_us", "p50_per_round",
                                  "paired_ratio_p50", "ratio_of_p50s", "calls"])
    tag = device_tag(data["device"]["name"])
    return write_results(args.out, f"ndp_gate_ab_{tag}", data, table=table,
                         title=f"NDP first call: the landed gate, 95ac2c9's against now (segmented reduce, {tag})",
                         notes=NOTES.format(sleep_us=SLEEP_S * 1e6))


NOTES = """One `select` right after the pick landed (`handoff`: on the OpenCL callback's / CUDA host-function thread;
`descheduled`: the same, then a sleep of {sleep_us:.0f} us), us; `baseline`: the gate of 95ac2c9, `now`: this commit's,
`floor`: a call of a function that does nothing; each side timed interleaved with the others, order alternating;
`paired_ratio_p50`: the median of each call over the baseline call of the same repeat. See the module docstring of
benchmarks/ndp/gate.py."""


if __name__ == "__main__":
    main()
