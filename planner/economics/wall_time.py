"""The law of a candidate's wall time T (§6): P(T <= D) exact up to a fine grid (an FFT of the per-segment
compound-geometric laws), its quantiles, and Chernoff's bound on its tail, kept per segment plan so one grid
answers every deadline.
"""

from __future__ import annotations

import math

import numpy as np
from numpy import (
    fft as _fft,  # pocketfft, as scipy.fft's (the same transforms to the bit), without SciPy's import
)

from planner.economics.candidate import wait_phases
from planner.economics.estimate_error import EstimateError
from planner.economics.grids import (
    damped_grid,
    fast_len,
    hat_trexp,
    lump_scale,
    wait_factor,
)
from planner.economics.segment_plans import SegmentPlan, segment_moments, wall_moments

LAW_ERROR = 5e-5
"""What the grid may move P(T <= D) by, at most (§6)."""
HAT_SPREAD = 2.5
"""κ in the hat split's error on P(Z <= z), κ·E[F]·(h/σ)², σ the larger of Z's sd and a lump's width: splitting
each failure's lump onto the grid adds about h²/6 of variance, which moves the law by its slope, 1/σ² at most
(a lump's own, with a failure or two; Z's, with many); κ is the largest ratio of error to E[F]·(h/σ)² measured
over the 505 laws of the what-if benchmark's first point (2.4; most lie near 0.2)."""


KINK_POINTS = 8192
"""The finest grid the kinks' bound asks for (what every law had before the grid was sized per law)."""


def law_points(law: WallLaw) -> int:
    """Points of a grid over Z in [0, z_max] for P(Z <= z) within LAW_ERROR, at least 256, at most 65,536. Three
    bounds on the step h:
    - four points per lump X + R (`lump_scale`);
    - HAT_SPREAD·E[F]·(h/σ)² <= LAW_ERROR for the hat split;
    - the kinks (`kink_step`), as far as KINK_POINTS.
    So a law with few failures (on-demand's hardware failures) takes a few hundred points, one with dozens of
    long waits tens of thousands. Items narrower than the restart, with failures to spare, make a comb of
    near-atoms at multiples of R, which no grid of four points per R resolves: there P(Z <= z) is within the
    mass of an item near z (§6), as it always was."""
    p = law.plan
    lump = lump_scale(p)
    h = lump / 4
    if law.failures > 0:
        h = min(
            h,
            max(law.sd, lump) * math.sqrt(LAW_ERROR / (HAT_SPREAD * law.failures)),
            max(kink_step(law), law.z_max / (KINK_POINTS - 2)),
        )
    return max(256, fast_len(int(min(law.z_max / h, 65534)) + 2))


def kink_step(law: WallLaw) -> float:
    """The step that reads the CDF's kinks within LAW_ERROR (inf when none matters): where the lump of a run's
    only failure starts (and, with no wait, ends) the density jumps, by P(F = 1) over the item's width s, or
    times the wait's density at 0 after a preemption event, and reading the CDF between nodes misses it by
    about the jump times h/4; a jump whose mass is within 2·LAW_ERROR is read within it anyway. A wait's kink
    can ask for millions of points, and lies within a few steps of D − T0 = R only."""
    p = law.plan
    # P(F = 1)
    one = law.P0 * ((p.k - 1) * -math.expm1(-p.lam * p.s) + -math.expm1(-p.lam * p.s_k))
    waits = p.rho if p.wait else 0.0  # the share of failures a capacity wait follows
    if max(one * (1 - waits), one * waits) <= 2 * LAW_ERROR:
        return math.inf
    at_zero = (
        sum(share / mean for share, mean in wait_phases(p.wait, p.wait_cv))
        if waits
        else 0.0
    )
    return LAW_ERROR / (one * ((1 - waits) / p.width + waits * at_zero))


class WallLaw:
    """The law of a candidate's wall time T = T0 + Z (§6), Z = Σ_i Σ_{j<F_i} (X_ij + R [+ W]): a compound
    geometric law per segment, (1−p)/(1−p·φ_Y), identical full segments by a power, inverted by one FFT
    on a grid over the whole support (T0 to T0 + E[Z] + 14 sd). P(T ≤ D) for any D and its quantiles then
    read the same cumulative sums, so one timing key's law serves every deadline it meets (`law_points` sizes
    the grid)."""

    def __init__(
        self, p: SegmentPlan, moments: tuple[float, float, float] | None = None
    ):
        self.plan = p
        ET, EF, sd = moments if moments is not None else segment_moments(p)
        self.finite = math.isfinite(ET)
        ET, sd = wall_moments(p, ET, EF, sd)
        self.mean, self.sd, self.failures = ET, sd, EF
        # no failure at all: T = T0 exactly
        self.P0 = math.exp(-p.lam * p.S) if p.lam else 1.0
        self.z_max = (
            (ET - p.T0) + 14.0 * sd + 2.0 * (p.R + p.s) if self.finite else math.inf
        )
        self._cdf: tuple[float, np.ndarray] | None = None
        # quantile_met's answers: a quarter's runs alike book the same quantile of one law many times
        self._quantiles: dict[tuple[float, EstimateError], float] = {}

    @property
    def ready(self) -> bool:
        """Whether the grid is computed (reading it is then microseconds)."""
        return self._cdf is not None

    def compute(self) -> WallLaw:
        """The grid now, for a caller that will read it many times."""
        if self.finite and self.plan.lam:
            self.cdf
        return self

    def p_le(self, D: float) -> float:
        """P(T ≤ D)."""
        p = self.plan
        zD = D - p.T0
        if zD < -1e-9 * max(1.0, abs(D)):
            return 0.0
        if p.lam == 0:
            return 1.0
        if not self.finite:
            return 0.0 if math.isfinite(D) else 1.0
        if zD >= self.z_max:
            return 1.0
        if zD <= 0:
            return self.P0
        h, cdf = self.cdf
        # position among the nodes 0, h/2, 3h/2, ... (node i > 0 at (i − 1/2)h)
        at = zD / h + 0.5
        i = min(int(at), cdf.size - 2)
        if i == 0:
            value = cdf[0] + (cdf[1] - cdf[0]) * zD / (0.5 * h)
        else:
            value = cdf[i] + (cdf[i + 1] - cdf[i]) * (at - i)
        return min(1.0, max(0.0, float(value)))

    def p_met(self, D: float, error: EstimateError) -> float:
        """P(ε·T ≤ D), ε the throughput estimate's error, independent of the run (§12): the atom at T0 exactly,
        the rest of the law over ε's nodes."""
        if error.exact or not math.isfinite(D):
            return self.p_le(D)
        return float(self.p_met_at(np.array([D], dtype=float), error)[0])

    def p_met_at(self, D: np.ndarray, error: EstimateError) -> np.ndarray:
        """`p_met` at each of the finite deadlines `D`, for an estimate error that is not exact."""
        p = self.plan
        atom = self.P0 * error.cdf(D / p.T0)
        if p.lam == 0 or not self.finite:
            return atom
        e, w = error.nodes()
        # where each ε puts each deadline on the overhead's axis
        z = D[:, None] / e[None, :] - p.T0
        return np.minimum(1.0, atom + (w * self._continuous(z)).sum(axis=1))

    def _continuous(self, z: np.ndarray) -> np.ndarray:
        """P(0 < T − T0 ≤ z) at each z: the law less its atom, read off the grid as `p_le` reads it."""
        h, cdf = self.cdf
        zc = np.clip(z, 0.0, self.z_max)
        at = zc / h + 0.5
        i = np.minimum(at.astype(np.int64), cdf.size - 2)
        first = cdf[0] + (cdf[1] - cdf[0]) * zc / (0.5 * h)
        value = np.where(i == 0, first, cdf[i] + (cdf[i + 1] - cdf[i]) * (at - i))
        value = np.where(z >= self.z_max, 1.0, np.clip(value, 0.0, 1.0))
        return np.where(z > 0, np.maximum(value - self.P0, 0.0), 0.0)

    def quantile_met(self, q: float, error: EstimateError) -> float:
        """The smallest D with P(ε·T ≤ D) ≥ q (`p_met`), to 1e-9 of itself, searched from ε's q-quantile times T0,
        which no smaller D reaches; kept per (q, ε)."""
        if error.exact:
            return self.quantile(q)
        found = self._quantiles.get((q, error))
        if found is None:
            found = self._quantiles[q, error] = self._quantile_met(q, error)
        return found

    def _quantile_met(self, q: float, error: EstimateError) -> float:
        lo = self.plan.T0 * error.factor(q)
        if self.p_met(lo, error) >= q:
            return lo
        hi = lo * 1.25
        while self.p_met(hi, error) < q:
            lo, hi = hi, hi * 2
            if hi > 1e6:
                return math.inf
        # P is monotone in D: each round reads 31 deadlines between lo and hi at once and keeps the step where
        # it reaches q, 32 times narrower
        while hi - lo > 1e-9 * hi:
            inner = np.linspace(lo, hi, 33)[1:-1]
            reached = np.flatnonzero(self.p_met_at(inner, error) >= q)
            i = int(reached[0]) if reached.size else inner.size
            lo, hi = (
                inner[i - 1] if i else lo,
                inner[i] if i < inner.size else hi,
            )
        return float(hi)

    def quantile(self, q: float) -> float:
        """The smallest D with P(T ≤ D) ≥ q (inf beyond a century: never on a calendar)."""
        p = self.plan
        if p.lam == 0:
            return p.T0
        if not self.finite or self.mean + 14.0 * self.sd > 1e6:
            return math.inf
        if self.P0 >= q:
            return p.T0
        h, cdf = self.cdf
        above = np.flatnonzero(cdf >= q)
        if not above.size:
            return p.T0 + self.z_max
        i = int(above[0])
        if i == 0:
            return p.T0
        left, right = max(i - 1.5, 0.0) * h, (i - 0.5) * h
        frac = (q - cdf[i - 1]) / (cdf[i] - cdf[i - 1]) if cdf[i] > cdf[i - 1] else 1.0
        return p.T0 + left + frac * (right - left)

    @property
    def cdf(self) -> tuple[float, np.ndarray]:
        """(h, P(T − T0 ≤ z) at the nodes z = 0, h/2, 3h/2, ...), `_half_cdf`'s nodes, from one inverse FFT,
        kept. The grid resolves the lumps X + R (`lump_scale`) and ends at z_max."""
        if self._cdf is None:
            p, lam = self.plan, self.plan.lam
            N = law_points(self)
            h = self.z_max / (N - 2)
            tilt, untilt, z1, _ = damped_grid(N)
            pf, pk = -math.expm1(-lam * p.s), -math.expm1(-lam * p.s_k)
            waits = wait_factor(p, h, N)
            zhat = (1 - pk) / (
                1 - pk * _fft.rfft(hat_trexp(lam, p.s_k, p.R, h, N) * tilt) * waits
            )
            if p.k > 1:
                fY = _fft.rfft(hat_trexp(lam, p.s, p.R, h, N) * tilt) * waits
                zhat = zhat * np.power((1 - pf) / (1 - pf * fY), p.k - 1)
            # the atom at Z = 0 (no failure) is added exactly
            z = _fft.irfft(zhat - self.P0, N) * untilt
            # no mass below 0 (lengths start there), so the first node is (0, P0), not (−h/2, P0)
            self._cdf = h, self.P0 + np.concatenate(([0.0], np.cumsum(z)))
        return self._cdf


def overhead_tail_bound(p: SegmentPlan, level: float) -> float:
    """Chernoff's bound on P(Z > level), Z = T − T0, from Z's moment generating function in closed form:
    per segment (1 − p)/(1 − p·M_Y(θ)), a failure's Y = R + X (X ~ Exp(λ) truncated to [0, s)) plus, with
    probability ρ, the capacity wait W (`wait_phases`); minimised over θ on a grid. Microseconds, where
    `WallLaw.p_le` takes an FFT: enough to tell that a tail is negligible."""
    lam, R, rho, m = p.lam, p.R, p.rho, p.wait
    if lam == 0 or level <= 0:
        return 0.0 if lam == 0 else 1.0
    phases = wait_phases(m, p.wait_cv)
    top = 1 / max(mean for _, mean in phases) if rho and m else 50 / p.s_k
    theta = np.geomspace(1e-3 / level, 0.999 * top, 48)
    log_mgf = np.zeros_like(theta)
    ok = np.ones_like(theta, dtype=bool)
    with np.errstate(all="ignore"):
        wait = (
            (1 - rho) + rho * sum(share / (1 - theta * mean) for share, mean in phases)
            if rho and m
            else 1.0
        )
        for count, s in ((p.k - 1, p.s), (1, p.s_k)):
            if count == 0:
                continue
            fail = -math.expm1(-lam * s)
            d = lam - theta
            near = np.abs(d) < 1e-12
            lost = (
                np.where(
                    near, lam * s, lam * -np.expm1(-d * s) / np.where(near, 1.0, d)
                )
                / fail
            )  # E[e^(θX)]
            phi = np.exp(theta * R) * lost * wait
            ok &= fail * phi < 1
            # log(1 − fail) = −λs, finite however long s is
            log_mgf += count * (-lam * s - np.log(1 - fail * phi))
    bound = np.where(ok, log_mgf - theta * level, np.inf)
    return float(min(1.0, np.exp(bound.min())))
