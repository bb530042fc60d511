"""``warm``: ``auto`` started from a prior — what other devices (or a model) say about the space.

Transfer to an unseen device (docs/transfer.md) predicts, for every valid configuration, how good it
will be on the target, from measurements on *other* devices. A search on the target should not start
from a space-filling design as if nothing were known: ``warm``

- first asks the ``n_prior`` configurations the prior ranks best, at most ``per_mode`` from each mode
  (combination of the two-valued switches), so one wrong guess about a code path does not take every
  early evaluation; then ``n_explore`` points of the usual space-filling design;
- gives its extra-trees surrogate the prior as one more input column, so the model only has to learn
  how the target *differs* from the prior (a monotone map in the good case), not the landscape itself;
- otherwise behaves as ``auto`` (local steps around the best modes, mode-stratified EI).

Without a prior it is ``auto``. The prior is an array with one number per valid configuration of the
space (lower = predicted better, e.g. a predicted log time; ``inf``/``nan`` = predicted to fail).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptune.search.auto import Auto, maximin_design
from adaptune.search.base import register


@register
class Warm(Auto):
    """``auto`` warm-started from a prior over the space (see the module docstring)."""

    name = "warm"
    options = {**Auto.options, "prior": None, "n_prior": 8, "per_mode": 3, "n_explore": 4,
               "prior_feature": True}

    def __init__(self, space: Any, seed: int | None = None, **kw: Any) -> None:
        super().__init__(space, seed, **kw)
        prior = self.opts["prior"]
        if prior is None:
            return
        prior = np.asarray(prior, dtype=float).reshape(-1)
        if len(prior) != self.n:
            raise ValueError(f"strategy 'warm': prior has {len(prior)} values for a space of {self.n} "
                             "valid configurations (one value per valid configuration, in space order)")
        finite = np.isfinite(prior)
        if not finite.any():
            raise ValueError("strategy 'warm': the prior has no finite value")
        worst = prior[finite].max()
        span = max(worst - prior[finite].min(), 1e-9)
        self._prior = np.where(finite, prior, worst + 0.25 * span)
        first = self._prior_picks(int(self.opts["n_prior"]), int(self.opts["per_mode"]))
        explore = [i for i in maximin_design(self._x / np.maximum(self._x.max(axis=0), 1), int(self.opts["n_explore"]),
                                             self.rng) if i not in first] if self._x.shape[1] else []
        self._design = (first + explore)[::-1]  # popped from the end: prior picks first
        if self.opts["prior_feature"]:
            self._x = np.concatenate([self._x, self._prior[:, None]], axis=1)
            self._x32 = self._x.astype(np.float32)

    def _prior_picks(self, n: int, per_mode: int) -> list[int]:
        """The ``n`` best-ranked configurations of the prior, at most ``per_mode`` from one mode."""
        picks: list[int] = []
        taken: dict[int, int] = {}
        for i in np.argsort(self._prior, kind="stable"):
            m = int(self._mode[i])
            if taken.get(m, 0) >= per_mode:
                continue
            picks.append(int(i))
            taken[m] = taken.get(m, 0) + 1
            if len(picks) >= n:
                break
        return picks
