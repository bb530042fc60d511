"""The one error the space layer raises for bad constraint or value text."""

from __future__ import annotations


class ConstraintError(ValueError):
    """A constraint or value text is malformed, forbidden, or names something unknown.

    Subclasses ``ValueError`` so callers that validate user input generically still catch it.
    """
