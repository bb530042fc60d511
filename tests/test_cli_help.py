"""Every option of every ``adaptune`` command says what it does and what it is when left out."""

from __future__ import annotations

import argparse

from adaptune.cli import build_parser

FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction, argparse._VersionAction)


def _commands(parser: argparse.ArgumentParser, prefix: str = "adaptune"):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prefix} {name}")


def _options_missing_help() -> list[str]:
    missing = []
    for command, parser in _commands(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
                continue
            name = f"{command} {'/'.join(action.option_strings) or action.dest}"
            text = (action.help or "").lower()
            if not text:
                missing.append(f"{name}: no help text")
            elif action.option_strings and not action.required and not isinstance(action, FLAGS) \
                    and "default" not in text:
                missing.append(f"{name}: help does not state the default")
    return missing


def test_every_option_has_help_and_states_its_default():
    """A flag's default is off, a required option has none; every other option says what it defaults to."""
    assert _options_missing_help() == []


def test_the_walk_sees_every_command():
    names = {c for c, _ in _commands(build_parser())}
    assert {"adaptune tune", "adaptune export", "adaptune thresholds tune"} <= names
