"""Bayesian optimisation with a Gaussian process and expected improvement over valid configurations.

Encoding (``space.encode``): ordinal parameters as position/(len-1), categorical ones one-hot, so that a
Matern kernel with one length scale per column (ARD) sees neighbouring values as similar and
categories as equidistant. Hyperparameters are re-optimised every few tells and reused in between
(a refit with fixed hyperparameters is one Cholesky factorisation), and the training set is capped,
which keeps an ask at a few milliseconds.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from adaptune.search.base import register
from adaptune.search.surrogate import SurrogateStrategy


@register
class BayesGP(SurrogateStrategy):
    """GP surrogate (Matern 5/2, ARD) on log time; EI maximised over a pool of unasked valid configs."""

    name = "bayes"
    options = {**SurrogateStrategy.options, "n_initial": 15, "reoptimize_every": 10, "max_train": 200}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        # imported here: scikit-learn's 1.5 s of import is for the model-based strategies alone
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        super().__init__(space, seed, **kw)
        d = max(self._x.shape[1], 1)
        self._kernel = (ConstantKernel(1.0, (1e-3, 1e3))
                        * Matern(length_scale=np.full(d, 0.5), length_scale_bounds=(1e-2, 1e2), nu=2.5)
                        + WhiteKernel(1e-2, (1e-6, 1e0)))
        self._gp: Any = None  # a GaussianProcessRegressor once fitted
        self._fits = 0

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        # imported here: scikit-learn's 1.5 s of import is for the model-based strategies alone
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor

        cap = self.opts["max_train"]
        if len(y) > cap:  # keep the best half and the most recent half of the cap
            best = np.argsort(y, kind="stable")[: cap // 2]
            recent = np.arange(len(y) - cap // 2, len(y))
            keep = np.unique(np.concatenate([best, recent]))
            x, y = x[keep], y[keep]
        optimise = self._gp is None or self._fits % self.opts["reoptimize_every"] == 0
        kernel = self._kernel if self._gp is None else self._gp.kernel_
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True,
                                      optimizer="fmin_l_bfgs_b" if optimise else None,
                                      random_state=int(self.rng.integers(2**31)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(x, y)
        self._gp = gp
        self._fits += 1

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self._gp is not None
        mu, sigma = self._gp.predict(x, return_std=True)
        return mu, sigma
