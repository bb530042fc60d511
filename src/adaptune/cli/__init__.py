"""The ``adaptune`` command: a thin shell over the public API, one module per command group."""

from __future__ import annotations

import argparse
import importlib
import sys

from adaptune.backends.base import BackendError
from adaptune.store.errors import StoreError

COMMAND_GROUPS = ("adaptune.cli.core", "adaptune.cli.search", "adaptune.cli.adaptive")
COMMAND_GROUPS += ("adaptune.cli.thresholds", "adaptune.cli.triton", "adaptune.cli.dashboard")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adaptune", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_GROUPS:
        importlib.import_module(module).register(sub)
    _state_defaults(parser)
    return parser


def _state_defaults(parser: argparse.ArgumentParser) -> None:
    """Append "(default: X)" to the help of every option that has a value when left out and does not say it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _state_defaults(command)
        elif (action.help and action.option_strings and "default" not in action.help.lower()
              and action.default is not None and action.default is not False
              and action.default not in ([], argparse.SUPPRESS)):
            action.help += f" (default: {str(action.default).replace('%', '%%')})"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, KeyError, StoreError) as exc:
        print(f"adaptune {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except BackendError as exc:  # no usable device, a missing driver: one line, not a traceback
        print(f"adaptune {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130  # the layer that was interrupted said what was kept


def _one_line(exc: BaseException) -> str:
    """The cause in one line (a KeyError's message is its repr; a database error may span lines)."""
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(str(text).split())


if __name__ == "__main__":
    sys.exit(main())
