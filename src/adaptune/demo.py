"""`make demo`: tune the OpenCL tiled matrix multiply on the default device (PoCL on a machine with no GPU).

Shows progress, prints the five best configurations and the speed-up of the best over the default
configuration, and writes the results database and a PNG plot to ``demo_out/``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from adaptune.cli.core import print_report
from adaptune.report.plots import plot_tuning
from adaptune.tuning import tune
from adaptune.tuning.spec_file import load_problem

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "matmul" / "problem.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="demo_out")
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--max-seconds", type=float, default=90.0, help="wall-clock budget of the search")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)

    console = Console()
    if not EXAMPLE.exists():
        raise SystemExit(f"demo: {EXAMPLE} not found (run the demo from a checkout of adaptune)")
    problem = load_problem(EXAMPLE)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]adaptune demo[/bold]: tuning {problem.name} "
                  f"({len(problem.space)} valid configurations of {problem.space.cartesian_size}) "
                  f"with {args.strategy}, budget {args.max_seconds:.0f} s")
    report = tune(problem, args.strategy, max_seconds=args.max_seconds, repeats=args.repeats,
                  db=str(out / "adaptune.db"), progress=True)
    print_report(report, console=console)
    png = plot_tuning(report.results, out / f"{problem.name}.png", title=f"{problem.name} on {report.device.name}")
    console.print(f"plot: {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
