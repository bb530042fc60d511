"""``adaptune dashboard``: the store as a live web page (problems and runs, a run, comparisons,
per-input selection, energy), read-only, over the store interface only.

Needs the ``dashboard`` extra (Dash, plotly, AG Grid): ``pip install 'adaptune[dashboard]'``.
"""

from adaptune.dashboard.server import create_app, serve

__all__ = ["create_app", "serve"]
