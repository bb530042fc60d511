"""The ``adaptune`` command: a thin shell over the public API, one module per command group."""

from __future__ import annotations

import argparse
import importlib
import sys

from adaptune.backends.base import BackendError

COMMAND_GROUPS = ("adaptune.cli.core", "adaptune.cli.search", "adaptune.cli.adaptive")
COMMAND_GROUPS += ("adaptune.cli.thresholds",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adaptune", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_GROUPS:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, KeyError) as exc:
        print(f"adaptune {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BackendError as exc:  # no usable device, a missing driver: one line, not a traceback
        print(f"adaptune {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130  # the layer that was interrupted said what was kept


if __name__ == "__main__":
    sys.exit(main())
