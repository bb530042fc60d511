"""`make demo`: tune the OpenCL tiled matrix multiply on the default device (PoCL on a machine with no GPU).

Shows progress, prints the five best configurations and the speed-up of the best over the default
configuration, and writes the results database and a PNG plot to ``demo_out/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from adaptune.cli.core import print_report
from adaptune.report.plots import plot_tuning
from adaptune.tuning import tune
from adaptune.tuning.spec_file import load_problem

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "matmul" / "problem.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", type=Path, default=EXAMPLE,
                    help="problem file to tune (default: the repository's examples/matmul/problem.py)")
    ap.add_argument("--out", default="demo_out", help="folder for the database and the plot (default: demo_out)")
    ap.add_argument("--strategy", default="auto", help="search strategy (default: auto)")
    ap.add_argument("--max-seconds", type=float, default=30.0, help="wall-clock budget of the search (default: 30)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs of each configuration (default: 5)")
    args = ap.parse_args(argv)

    console = Console()
    if not args.spec.exists():
        raise SystemExit(f"demo: error: not found: {args.spec} (run the demo from a checkout of adaptune)")
    problem = load_problem(args.spec)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]adaptune demo[/bold]: tuning {problem.name} "
                  f"({len(problem.space)} valid configurations of {problem.space.cartesian_size}) "
                  f"with {args.strategy}, budget {args.max_seconds:.0f} s")
    report = tune(problem, args.strategy, max_seconds=args.max_seconds, repeats=args.repeats,
                  db=str(out / "adaptune.db"), progress=True)
    print_report(report, console=console)
    summary = report.failure_summary()
    if summary:  # nothing worked (e.g. no OpenCL device that compiles): say why and fail
        print(f"demo: error: {summary}", file=sys.stderr)
        return 1
    png = plot_tuning(report.results, out / f"{problem.name}.png", title=f"{problem.name} on {report.device.name}")
    console.print(f"plot: {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
