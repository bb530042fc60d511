"""Transfer to an unseen device (Nitro, seed 001 ch. 3): models built from *other* devices' measurements.

Two problems, one recipe (multitask learning by feature concatenation, device-feature selection):

- **configuration prediction**: given full measurements of one tuning space on source devices, predict
  how good every configuration is on a target that has no measurement (``ConfigTransfer``). The target
  is relative log time, log(time / that device's optimum), so devices of different speed share one
  scale. With no device feature selected the model is the *consensus* of the sources (the mean relative
  log time per configuration: it picks what is good everywhere); with device features, an extra-trees
  regression on [configuration features ∘ device features] over the union of the sources (MTL).
  Its prediction is the zero-shot choice and the prior of the ``warm`` search strategy.
- **variant selection per input** (``MTLSelector``): Nitro's model trained on the union of the sources'
  labelled inputs with the device features appended to the input features; queried with the target's.

Device features are chosen per application: ``cv_dfs`` (Algorithm 2: each source in turn is a temporary
target, every subset of <= 3 candidate features is scored by leave-that-source-out, the k features most
frequent in the best subsets win) and ``p_dfs`` (Algorithm 1's vote: proxies with the highest predicted
intensity per input, majority over inputs, union of their device features). The proxies themselves are
measured by ``adaptune.kernels.proxies`` (copy, atomics, local memory, FMA, launch micro-benchmarks;
``PROXY_FEATURES_MEASURED`` maps Nitro's proxies onto those measured features). The profile-to-intensity
models need a profiler (ncu) and are *not* built here: ``p_dfs`` takes the intensities from the caller.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import ExtraTreesRegressor

from adaptune.adaptive.device_features import device_vector
from adaptune.search.auto import value_features
from adaptune.search.surrogate import FAILURE_PENALTY, informative_columns
from adaptune.space import Space

PROXY_FEATURES: dict[str, tuple[str, ...]] = {
    "SP-GFLOP": ("peak_gflops_sp", "cores", "clock_mhz"),
    "DP-GFLOP": ("cores", "clock_mhz"),
    "ATOMIC": ("l2_kb", "compute_units"),
    "MEM-BW": ("mem_bandwidth_gbs", "l2_kb", "last_level_cache_mb"),
    "SH-MEM-BW": ("local_mem_kb",),
}
"""Nitro's Table 3.3, application proxy -> device features, mapped onto this project's feature names
(no DP peak or atomic latency in our table: DP uses cores and clock, ATOMIC the L2 and unit count)."""

PROXY_FEATURES_MEASURED: dict[str, tuple[str, ...]] = {
    "SP-GFLOP": ("gflops_sp_measured",),
    "ATOMIC": ("atomic_contended_gops", "atomic_spread_gops"),
    "MEM-BW": ("copy_gbs",),
    "SH-MEM-BW": ("local_mem_gbs",),
    "LAUNCH": ("launch_us",),
}
"""Nitro's proxies -> the rates ``adaptune.kernels.proxies`` measures (``data/devices/proxy_features.json``);
LAUNCH is added here: small inputs are bound by launch latency, which Nitro's table does not cover."""


@dataclass
class DeviceSpace:
    """One device's measurements of a tuning space: objective per valid configuration (inf = failed)."""

    device: str
    features: dict[str, float]
    values: np.ndarray

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=float)
        if not np.isfinite(self.values).any():
            raise ValueError(f"device {self.device!r}: no configuration succeeded")

    @property
    def optimum(self) -> float:
        return float(self.values[np.isfinite(self.values)].min())


def fractions(values: np.ndarray) -> np.ndarray:
    """Fraction of optimum per configuration: optimum / value (1 = best, 0 = failed)."""
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v) & (v > 0)
    out = np.zeros(len(v))
    out[ok] = v[ok].min() / v[ok]
    return out


def relative_log(values: np.ndarray, penalty: float = FAILURE_PENALTY) -> np.ndarray:
    """log(value / optimum); failures at the worst success + ``penalty`` (the search layer's rule)."""
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v) & (v > 0)
    y = np.empty(len(v))
    y[ok] = np.log(v[ok] / v[ok].min())
    y[~ok] = y[ok].max() + penalty
    return y


def config_features(space: Space) -> np.ndarray:
    """Configuration features, one row per valid configuration: the parameter positions that vary plus
    ``auto``'s value features (log2, power of two, alignment of integer parameters)."""
    t = np.asarray(space.table, dtype=float)
    pos = t[:, informative_columns(t)] if t.shape[1] else t
    extra = value_features(space)
    return np.concatenate([pos, extra[:, informative_columns(extra)] if extra.shape[1] else extra], axis=1)


class ConfigTransfer:
    """Predicts every configuration's relative log time on a device from other devices' measurements."""

    def __init__(self, device_features: Sequence[str] = (), *, n_trees: int = 48, seed: int = 0,
                 min_samples_leaf: int = 2, max_samples: float | None = None) -> None:
        self.device_features = tuple(device_features)
        self.n_trees = n_trees
        self.max_samples = max_samples  # bootstrap this fraction of the rows per tree (faster CV-DFS)
        self.seed = seed
        self.min_samples_leaf = min_samples_leaf
        self._consensus: np.ndarray | None = None
        self._model: ExtraTreesRegressor | None = None
        self._x: np.ndarray | None = None

    def fit(self, x_config: np.ndarray, sources: Sequence[DeviceSpace]) -> ConfigTransfer:
        if not sources:
            raise ValueError("transfer needs at least one source device")
        n = len(x_config)
        for s in sources:
            if len(s.values) != n:
                raise ValueError(f"source {s.device!r} has {len(s.values)} values for {n} configurations: "
                                 "every source must measure the same space, in space order")
        self._x = np.asarray(x_config, dtype=float)
        targets = [relative_log(s.values) for s in sources]
        self._consensus = np.mean(targets, axis=0)
        if self.device_features:
            rows = [self._rows(s.features) for s in sources]
            self._model = ExtraTreesRegressor(n_estimators=self.n_trees, max_features=0.8, n_jobs=1,
                                              min_samples_leaf=self.min_samples_leaf,
                                              bootstrap=self.max_samples is not None,
                                              max_samples=self.max_samples, random_state=self.seed)
            self._model.fit(np.concatenate(rows), np.concatenate(targets))
        return self

    def _rows(self, features: Mapping[str, float]) -> np.ndarray:
        assert self._x is not None
        d = np.asarray(device_vector(features, self.device_features))
        return np.concatenate([self._x, np.tile(d, (len(self._x), 1))], axis=1)

    def predict(self, features: Mapping[str, float] | None = None) -> np.ndarray:
        """Predicted relative log time of every configuration on the device described by ``features``."""
        if self._consensus is None:
            raise RuntimeError("ConfigTransfer.predict before fit")
        if self._model is None:
            return self._consensus.copy()
        if features is None:
            raise ValueError(f"this model uses device features {self.device_features}: pass the target's")
        return self._model.predict(self._rows(features))

    def rank(self, features: Mapping[str, float] | None = None, k: int = 1) -> np.ndarray:
        """Indices of the ``k`` configurations predicted best (the zero-shot choice is ``rank()[0]``)."""
        return np.argsort(self.predict(features), kind="stable")[:k]


def best_of(values: np.ndarray, picks: Sequence[int] | np.ndarray) -> float:
    """Fraction of the target's optimum reached by the best of ``picks`` (0 when all of them failed)."""
    f = fractions(values)
    return float(max((f[int(i)] for i in picks), default=0.0))


def reuse_matrix(spaces: Sequence[DeviceSpace]) -> np.ndarray:
    """BAT's baseline: [target, source] = fraction of the target's optimum reached by the source's optimum."""
    best = [int(np.argmin(np.where(np.isfinite(s.values), s.values, np.inf))) for s in spaces]
    return np.array([[fractions(t.values)[b] for b in best] for t in spaces])


def leave_one_out(x_config: np.ndarray, spaces: Sequence[DeviceSpace], device_features: Sequence[str] = (),
                  ks: Sequence[int] = (1,), *, seed: int = 0, n_trees: int = 48) -> dict[str, dict[int, float]]:
    """Per target device: fraction of its optimum reached by the best of the top-k predictions of a model
    trained on all the other devices (k=1 is zero-shot: no evaluation on the target)."""
    out: dict[str, dict[int, float]] = {}
    for i, target in enumerate(spaces):
        sources = [s for j, s in enumerate(spaces) if j != i]
        model = ConfigTransfer(device_features, seed=seed, n_trees=n_trees).fit(x_config, sources)
        order = model.rank(target.features, k=max(ks))
        out[target.device] = {k: best_of(target.values, order[:k]) for k in ks}
    return out


def cv_dfs(x_config: np.ndarray, sources: Sequence[DeviceSpace], candidates: Sequence[str], *,
           max_size: int = 3, k: int = 1, seed: int = 0, n_trees: int = 8, max_samples: float | None = 0.3,
           score: Callable[[np.ndarray, DeviceSpace], float] | None = None,
           predict: Callable[[tuple[str, ...], Sequence[DeviceSpace], DeviceSpace], np.ndarray] | None = None,
           ) -> tuple[list[str], dict]:
    """CV-DFS (Nitro Algorithm 2) on the sources only: returns (selected features, details).

    Each source in turn is the temporary target; every subset of ``candidates`` of size <= ``max_size``
    (the empty subset, i.e. the consensus, included) trains on the other sources and is scored on the
    temporary target (default: fraction of its optimum of the top-1 prediction). The best subset per
    temporary target is kept (ties: the best mean over all temporary targets, then the smaller); the ``k`` features most frequent among those
    are returned, and none when the empty subset won for most temporary targets.

    ``predict(subset, training sources, temporary target)`` replaces the model (default: a small
    ``ConfigTransfer``), so CV-DFS can select features for any model of configuration quality.
    """
    if len(sources) < 3:
        raise ValueError("CV-DFS needs at least 3 source devices (2 to train on, 1 to score)")
    score = score or (lambda pred, t: best_of(t.values, [int(np.argmin(pred))]))
    subsets = [()] + [c for r in range(1, max_size + 1) for c in itertools.combinations(candidates, r)]
    per_target: list[dict[tuple[str, ...], float]] = []
    table: dict[str, dict[str, float]] = {}
    for i, temp in enumerate(sources):
        rest = [s for j, s in enumerate(sources) if j != i]
        scores = {}
        for sub in subsets:
            if predict is not None:
                pred = predict(sub, rest, temp)
            else:
                model = ConfigTransfer(sub, seed=seed, n_trees=n_trees, max_samples=max_samples).fit(x_config, rest)
                pred = model.predict(temp.features)
            scores[sub] = float(score(pred, temp))
        per_target.append(scores)
        table[temp.device] = {"+".join(s) or "(none)": v for s, v in scores.items()}
    # ties within one temporary target go to the subset with the best mean score over all of them,
    # then to the smaller subset
    mean = {sub: float(np.mean([sc[sub] for sc in per_target])) for sub in subsets}
    best: list[tuple[str, ...]] = []
    for scores in per_target:
        top = max(scores.values())
        best.append(min((s for s in subsets if scores[s] >= top - 1e-12), key=lambda s: (-mean[s], len(s))))
    empty_wins = sum(1 for b in best if not b)
    counts = Counter(f for b in best for f in b)
    selected = [] if empty_wins * 2 > len(best) else [f for f, _ in counts.most_common(k)]
    return selected, {"best_subsets": ["+".join(b) or "(none)" for b in best], "counts": dict(counts),
                      "scores": table}


def p_dfs(intensities: Sequence[Mapping[str, float]], *, proxy_features: Mapping[str, Sequence[str]] = PROXY_FEATURES,
          per_input: int = 1) -> list[str]:
    """P-DFS's vote (Nitro Algorithm 1): per input (row: proxy -> predicted intensity 0..5), the
    ``per_input`` proxies of highest intensity; proxies chosen for a majority of inputs win; the union of
    their device features (in ``proxy_features`` order) is returned."""
    if not intensities:
        raise ValueError("P-DFS needs the predicted proxy intensities of at least one input")
    unknown = sorted({p for row in intensities for p in row} - set(proxy_features))
    if unknown:
        raise ValueError(f"unknown proxies {', '.join(unknown)}; known: {', '.join(proxy_features)}")
    votes: Counter[str] = Counter()
    for row in intensities:
        for p, _ in sorted(row.items(), key=lambda kv: (-kv[1], kv[0]))[:per_input]:
            votes[p] += 1
    winners = [p for p in proxy_features if votes[p] * 2 > len(intensities)]
    if not winners:  # no majority: the most voted proxy
        winners = [votes.most_common(1)[0][0]]
    out: list[str] = []
    for p in winners:
        out += [f for f in proxy_features[p] if f not in out]
    return out


DEVICE_SCALES = ("shared", "per_feature")


class MTLSelector:
    """Per-input variant selection for an unseen device: one model on the union of the sources' labelled
    inputs, each row's input features concatenated with its device's features (Nitro's MTL).

    The device block (log2 of each feature, ``device_vector``) is scaled with one common scale
    (``device_scale="shared"``, the default; ``models.share_ranges``): a factor 2 counts the same in every
    device feature, and the feature that varies most over the sources spans [-1, 1]. With
    ``"per_feature"`` (the behaviour before issue 12's fix) each device feature is stretched to [-1, 1] over
    the sources on its own, so launch latency (2.9-5.1 us over the sources, a factor 1.8) weighed as much as
    copy bandwidth (0.26-2,945 GB/s, a factor 11,000), and an unseen CPU whose launch latency lay outside
    the sources' range (7.1 us) landed nearer the GPUs than the other CPU (see docs/transfer.md).
    """

    def __init__(self, device_features: Sequence[str], kind: str = "forest", seed: int = 0,
                 device_scale: str = "shared") -> None:
        if device_scale not in DEVICE_SCALES:
            raise ValueError(f"device_scale must be one of {DEVICE_SCALES}, not {device_scale!r}")
        self.device_features = tuple(device_features)
        self.kind = kind
        self.seed = seed
        self.device_scale = device_scale
        self.model = None

    def _rows(self, x: np.ndarray, features: Mapping[str, float]) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        d = np.asarray(device_vector(features, self.device_features)) if self.device_features else np.zeros(0)
        return np.concatenate([x, np.tile(d, (len(x), 1))], axis=1)

    def fit(self, sources: Sequence[tuple[np.ndarray, np.ndarray, Mapping[str, float]]]) -> MTLSelector:
        """``sources``: (input features (n, f), costs (n, labels), device features) per source device."""
        from adaptune.adaptive.models import fit_model

        if not sources:
            raise ValueError("MTLSelector needs at least one source device")
        x = np.concatenate([self._rows(xs, dev) for xs, _, dev in sources])
        costs = np.concatenate([np.asarray(c, dtype=float) for _, c, _ in sources])
        n_dev = len(self.device_features)
        shared = [range(x.shape[1] - n_dev, x.shape[1])] if n_dev and self.device_scale == "shared" else []
        self.model = fit_model(self.kind, x, costs, seed=self.seed, coarse=True, score_repeats=0,
                               shared_scale=shared)
        return self

    def predict(self, x: np.ndarray, features: Mapping[str, float]) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("MTLSelector.predict before fit")
        return self.model.predict(self._rows(x, features))
