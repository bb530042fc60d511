"""``adaptune triton``: tune an ``adaptune.triton.autotune`` kernel ahead of deployment.

    adaptune triton tune pkg.kernels:matmul_kernel --make-args pkg.kernels:matmul_args --keys keys.json [--db URL]
        [--devices 0,1 | --ray ADDRESS]

``keys.json``: a list of objects, one per key (e.g. ``[{"M": 16, "N": 4096, "K": 4096}]``); ``make_args(key)``
returns ``(grid, args, kwargs)`` for one launch of that key. Each (key, configuration) is measured in adaptune's
worker process (``--in-process`` to skip it); every timing is a row in the store the decorator reads.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``triton`` command group (Triton is imported only when it runs)."""
    p = sub.add_parser("triton", help="Triton kernels decorated with adaptune.triton.autotune")
    tsub = p.add_subparsers(dest="triton_command", required=True)
    t = tsub.add_parser("tune", help="measure every configuration for a list of keys, before deployment")
    t.add_argument("kernel", help="the decorated kernel, as package.module:name")
    t.add_argument("--make-args", required=True, help="package.module:function, key -> (grid, args, kwargs)")
    t.add_argument("--keys", required=True, help="JSON file: a list of objects, one per key")
    t.add_argument("--db", default=None, help="store path or URL (default: the kernel's own, ~/.cache/adaptune)")
    t.add_argument("--in-process", action="store_true", help="measure in this process, not in the worker")
    t.add_argument("--devices", default=None, help="local GPUs to measure on at once, e.g. 0,1 (one worker each; default: one worker on GPU 0)")
    t.add_argument("--ray", default=None, metavar="ADDRESS", help="measure on a Ray cluster's GPUs ('local' starts one, "
                                                                  "'auto' joins one, or an address; a store all reach; default: no Ray)")
    t.add_argument("--timeout", type=float, default=120.0, help="seconds one (key, configuration) may take")
    t.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    t.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    from adaptune.integrations.triton import tune_ahead

    path = Path(args.keys)
    if not path.is_file():
        raise FileNotFoundError(f"{args.keys}: no such file")
    keys = json.loads(path.read_text())
    if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
        raise ValueError(f"{args.keys}: expected a JSON list of objects, one per key")
    executor = None
    if args.ray:
        from adaptune.distributed import RayExecutor

        executor = RayExecutor(address=None if args.ray == "local" else args.ray)
    elif args.devices:
        from adaptune.distributed import LocalExecutor

        executor = LocalExecutor([int(d) for d in args.devices.split(",")])
    report = tune_ahead(args.kernel, keys, args.make_args, db=args.db, isolate=not args.in_process,
                        executor=executor, timeout_s=args.timeout)
    if args.json:
        print(json.dumps(report.__dict__, default=str, indent=1))
    else:
        print(f"{report.keys} keys: {report.measured} configurations measured, {report.reused} reused, "
              f"{sum(len(v) for v in report.failed.values())} failed")
        for name, best in report.best.items():
            print(f"  {name}: {best}")
    return 0 if report.best else 1
