"""CLI commands of this group (being built; see docs/INTERFACES.md)."""

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the parser."""
