"""``auto``: the recommended default, chosen from the measured comparison (docs/search.md).

It is Gaussian-process Bayesian optimisation with expected improvement evaluated over *every* unasked
valid configuration (no candidate subsampling up to ``pool_size``): on the recorded spaces this beat the
subsampled pool, the tree-ensemble surrogate, the bandit ensemble and the local/evolutionary searches.
On spaces too small for a model (fewer than ``n_initial`` configurations) it is random search.
"""

from __future__ import annotations

from adaptune.search.base import register
from adaptune.search.bayes import BayesGP


@register
class Auto(BayesGP):
    """The default strategy: GP-EI over all unasked valid configurations (see module docstring)."""

    name = "auto"
    options = {**BayesGP.options, "pool_size": 20000}
