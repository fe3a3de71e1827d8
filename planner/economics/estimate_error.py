"""The error of the throughput estimate itself, in P(deadline) (docs/cost-model.md §12).

A plan's times come from the physics' estimate of its throughput, and real runs differ from that estimate:
`benchmarks/published.py` holds it against 66 published training runs. A run whose estimate is off by a
factor ε takes ε times as long, failures and waits included (a run twice as long meets twice the
preemptions), so P(deadline) is P(ε·T ≤ D) with ε independent of the run's failures: the mixture of the
wall-time law over ε. ε is lognormal; `PUBLISHED` is its robust fit to those 66 figures (their median and
1.4826 x their median absolute deviation of ln ε: the widest misses are mostly figures that are not one
run's throughput, listed with their reasons in docs/validation.md, which a standard deviation would let
decide the spread). `tests/test_estimate_error.py` refits it from the benchmark, so it follows the physics.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = ["EstimateError", "EXACT", "PUBLISHED", "NODES"]

# numpy has no erfc, and SciPy's import is not worth one function
_erfc = np.frompyfunc(math.erfc, 1, 1)
NODES = 97
"""Points of the normal law ln ε is integrated over (±6 standard deviations, an eighth of one apart)."""


@dataclass(frozen=True)
class EstimateError:
    """ε = true time / estimated time, lognormal: ln ε ~ Normal(`median`, `sigma`) (`sigma` 0: exact)."""

    median: float = 0.0  # of ln ε (negative: runs are faster than estimated)
    sigma: float = 0.0

    @property
    def exact(self) -> bool:
        return self.sigma == 0 and self.median == 0

    def cdf(self, ratio):
        """P(ε ≤ ratio), elementwise."""
        ratio = np.asarray(ratio, dtype=float)
        with np.errstate(divide="ignore"):
            log = np.log(np.maximum(ratio, 0.0))
        if self.sigma == 0:
            return (log >= self.median - 1e-12).astype(float)
        return np.asarray(
            0.5 * _erfc((self.median - log) / (self.sigma * math.sqrt(2))), dtype=float
        )

    def factor(self, q: float) -> float:
        """The q-quantile of ε: a failure-free time at most D over it can meet D with probability q."""
        return math.exp(
            self.median + (self.sigma * NormalDist().inv_cdf(q) if self.sigma else 0.0)
        )

    def met(
        self, wall_h: np.ndarray, deadline_h: float, t0_h: float, fallback: bool
    ) -> np.ndarray:
        """Per run of wall time `wall_h` (NaN: not done), the chance it meets the deadline had the estimate been off
        by ε: P(ε·T <= D), or for a spot_fallback run P(T <= D)·P(ε·t0 <= D), its switch reading the work left
        as measured."""
        done = np.nan_to_num(np.asarray(wall_h, dtype=float), nan=math.inf)
        if self.exact or not math.isfinite(deadline_h):
            return (done <= deadline_h + 1e-9).astype(float)
        if fallback:
            return (done <= deadline_h + 1e-9) * float(self.cdf(deadline_h / t0_h))
        return self.cdf(deadline_h / done)

    def draws(self, trials: int, seed: int) -> np.ndarray:
        """ε for each of `trials` runs, from a stream of its own (the runs' other draws stay as they were)."""
        if self.exact:
            return np.ones(trials)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence((seed, 12))))
        return np.exp(self.median + self.sigma * rng.standard_normal(trials))

    def nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """(values of ε, weights summing to 1) that integrate a smooth function of ε (kept: read-only)."""
        return _nodes(self.median, self.sigma)


@functools.lru_cache(maxsize=64)
def _nodes(median: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    if sigma == 0:
        e, w = np.array([math.exp(median)]), np.array([1.0])
    else:
        z = np.linspace(-6.0, 6.0, NODES)
        w = np.exp(-z * z / 2)
        e, w = np.exp(median + sigma * z), w / w.sum()
    e.flags.writeable = w.flags.writeable = False
    return e, w


EXACT = EstimateError()
PUBLISHED = EstimateError(median=-0.0921, sigma=0.2486)
"""Fitted to the 66 training figures of `benchmarks/published.py` (2026-12-05): runs take 0.91x the estimated
time in the median, and a factor e^0.2486 = 1.28 spreads one standard deviation either way."""
