"""Rounding waste (§5): the expected billed hours beyond the hours used, over every billing session's length
rather than the γ/2 rule of thumb, split by how a session ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy import (
    fft as _fft,  # pocketfft, as scipy.fft's (the same transforms to the bit), without SciPy's import
)

from planner.economics.candidate import billed_hours
from planner.economics.grids import damped_grid, fast_len, half_cdf, hat_trexp
from planner.economics.segment_plans import SegmentPlan, segment_moments


@dataclass(frozen=True)
class Waste:
    """Expected Σ over billing sessions of billed(L) − L, in node-hours, split by how a session ends: the last
    sessions (no failure from their start to the job's end, the atoms below) and the rest, with how many
    sessions each part holds (a spot_fallback's phases reuse the per-session figures)."""

    last: float
    last_sessions: float
    rest: float
    rest_sessions: float

    @property
    def total(self) -> float:
        return self.last + self.rest


def expected_waste(
    p: SegmentPlan,
    gran: float,
    minimum: float,
    ET: float,
    EF: float,
    sd: float,
    cut_granules: int = 1000,
) -> Waste:
    """Expected Σ over billing sessions of billed(L) − L, in node-hours (`Waste`).

    Sessions per node slot: the slot's session started at the beginning of
    segment j (after a restart R) runs through other slots' failures (each
    adds X + R and restarts the segment) until this slot fails — each failure
    hits it with probability 1/n — or the job ends. Sessions start n times at
    j = 1 and E[F_j] = e^(λs_j) − 1 times at segment j. In transforms, with
    q = (n−1)/n,
        pass segment  A = (1−p)·e^(−iωs) / (1 − q·p·φ_Y)
        die in it     K = (1−q)·p·φ_X   / (1 − q·p·φ_Y)
    and summing the geometric series over start and end segments gives the
    measure of all session lengths. Its atoms (no failure after the start,
    L = R + S_j) are billed exactly; the continuous part is evaluated from
    its CDF at the billing steps up to `cut_granules` granules, beyond which
    a session's waste is γ/2 to within γ/2 in at least 1000 granules.
    """
    lam, k, n, R = p.lam, p.k, p.n, p.R
    s, s_k = p.s, p.s_k
    if lam == 0:
        return Waste(n * float(billed_hours(p.T0, gran, minimum) - p.T0), n, 0.0, 0.0)
    if not math.isfinite(ET):
        return Waste(math.inf, n, math.inf, math.inf)
    if EF > 1e7:
        # hopeless candidate (e^(λs) huge): the grid sums would overflow;
        # half a granule per session is plenty to rank it last
        return Waste(n * gran / 2, n, EF * gran / 2, EF)
    # sessions a failure starts: all n after a preemption event, else one
    beta = 1 + p.rho * (n - 1)
    mass_total = n + beta * EF
    J = max(0, math.ceil(minimum / gran - 1e-9) - 1)
    L_tail = p.T0 + (ET - p.T0) + 14.0 * sd + 2.0 * (R + s)
    I = max(J + 1, math.ceil(min(cut_granules * gran, L_tail) / gran - 1e-9))  # noqa: E741 (§5's I)
    cut = I * gran

    pf, pk = -math.expm1(-lam * s), -math.expm1(-lam * s_k)
    c, ck = (
        beta * math.expm1(lam * s),
        beta * math.expm1(lam * s_k),
    )  # sessions started per segment

    # ---- atoms: sessions with no failure from their start to the job end.
    # m = k − j segments after the start segment j; length R + s_k + m·s.
    M = min(k, 200_000)
    m_idx = np.arange(M, dtype=float)
    starts = np.full(M, c)
    starts[0] = ck
    if k == 1:
        starts[0] += n
    elif M == k:
        starts[-1] += n
    log1mp = -lam * s  # log(1 − p), exact
    amass = (1 - pk) * starts * np.exp(m_idx * log1mp)
    apos = R + s_k + m_idx * s
    if M < k:  # the very first session, never interrupted: L = T0
        amass = np.append(amass, (1 - pk) * (n + c) * math.exp((k - 1) * log1mp))
        apos = np.append(apos, p.T0)
    # numpy's sum, not BLAS's dot: its threads change the last bits with the machine's cores
    waste_atoms = float(np.sum(amass * (billed_hours(apos, gran, minimum) - apos)))
    # closed-form total mass of all atoms (§ derivation above, ω = 0)
    if k == 1:
        atom_total = (1 - pk) * (n + ck)
    else:
        # c·Σ_{m=1}^{k−1}(1−p)^m, c(1−p)/p = β
        geo = beta * -math.expm1(-lam * s * (k - 1))
        atom_total = (1 - pk) * (n * math.exp((k - 1) * log1mp) + geo + ck)
    # atoms not enumerated (only when k > 200,000): γ/2 each
    waste_atoms += max(atom_total - float(amass.sum()), 0.0) * gran / 2

    # ---- continuous part on a damped grid over x = L − R.
    range_x = cut - R
    cont_total = max(mass_total - atom_total, 0.0)
    if (
        range_x <= 0
        or cont_total <= 1e-12 * mass_total
        or minimum <= R
        and _half_granule_error(p, gran, EF) <= SMOOTH_WASTE_REL * n * ET
    ):
        return Waste(waste_atoms, atom_total, cont_total * gran / 2, cont_total)
    # resolve the billing step, the segment (X's support) and 1/λ; the
    # session law is lumpy at those scales (many lengths ≈ m·R + small)
    feat = p.width
    h_t = min(gran / 8.0, range_x / 4096.0, feat / 8.0, 1.0 / (8.0 * lam))
    h_t = max(h_t, range_x / 60000.0)
    if k > 1 and s >= h_t:
        ms = math.ceil(s / h_t - 1e-9)
        h, frac = s / ms, 0.0
    else:
        h = h_t
        ms, frac = int(s // h), (s / h) % 1.0
    N = fast_len(int(math.ceil(range_x / h)) + 4)
    tilt, untilt, z1, _ = damped_grid(N)
    shift = np.exp(-ms * z1)
    if frac:  # s not on the grid: hat-split the shift too (mean exact)
        shift = (1 - frac) * shift + frac * np.exp(-(ms + 1) * z1)
    # a failure passes this slot's session: another node's hardware failure
    q = (1 - p.rho) * (n - 1) / n

    fYk = _fft.rfft(hat_trexp(lam, s_k, R, h, N) * tilt)
    fXk = _fft.rfft(hat_trexp(lam, s_k, 0.0, h, N) * tilt)
    den_k = 1 - q * pk * fYk
    Ak = (1 - pk) / den_k  # offset s_k applied when evaluating
    Kk = (1 - q) * pk * fXk / den_k
    if k == 1:
        Uk = n + ck
        Ua = n + ck
        nu1 = Uk * Kk
    else:
        fY = _fft.rfft(hat_trexp(lam, s, R, h, N) * tilt)
        fX = _fft.rfft(hat_trexp(lam, s, 0.0, h, N) * tilt)
        den = 1 - q * pf * fY
        A = (1 - pf) * shift / den
        K = (1 - q) * pf * fX / den
        Ak1 = np.power(A, k - 1)
        D1 = 1 - A
        G = (1 - Ak1) / D1  # Σ_{i<k−1} A^i
        H = ((k - 1) - A * G) / D1  # Σ_{i=1}^{k−1} G_i
        Uk = n * Ak1 + c * A * G + ck
        nu1 = K * (n * G + c * H) + Uk * Kk
        a = (1 - pf) * shift  # atom part of A
        ak1 = np.power(a, k - 1)
        Ua = n * ak1 + c * a * (1 - ak1) / (1 - a) + ck
    nu2 = Uk * Ak - Ua * (1 - pk)  # completed sessions minus their atoms
    g1 = _fft.irfft(nu1, N) * untilt
    g2 = _fft.irfft(nu2, N) * untilt
    x = np.arange(N) * h
    o1, o2 = R, R + s_k

    pts = np.arange(J, I + 1) * gran
    F = half_cdf(g1, h, o1, pts) + half_cdf(g2, h, o2, pts)
    F_J, F_I = F[0], F[-1]
    billed_le = minimum * F_J + gran * (J * (F_I - F_J) + float(np.sum(F_I - F[:-1])))
    len_le = float(half_cdf(g1, h, o1, cut, o1 + x)) + float(
        half_cdf(g2, h, o2, cut, o2 + x)
    )
    waste_cont = billed_le - len_le + max(cont_total - F_I, 0.0) * gran / 2
    return Waste(waste_atoms, atom_total, waste_cont, cont_total)


@lru_cache(maxsize=4096)
def session_waste(p: SegmentPlan, granularity_h: float, minimum_h: float) -> Waste:
    """`expected_waste` of one stream of the plan `p` run to its end, kept: a spot_fallback prices its spot phase's
    sessions from it, per session by how they end."""
    return expected_waste(p, granularity_h, minimum_h, *segment_moments(p))


SMOOTH_WASTE_REL = 1e-8
"""How far (a share of the billed node-hours) half a granule per session may be from the continuous sessions'
exact waste for `expected_waste` to take it without the grid: under a cent on a million dollars."""


def _half_granule_error(p: SegmentPlan, gran: float, EF: float) -> float:
    """A bound on |waste − γ/2 · mass| over the sessions that end at a failure or after a pass (§5's continuous
    part), in node-hours: by Euler–Maclaurin, γ²/16 times the total variation of their lengths' density. Each
    session's length runs from a (re)start of the computation; from each, the next failure comes at λe^(−λu) up to
    the work left, which ends the session with probability 1 − q (a density of variation 2λ(1 − q) at most) or,
    a pass, starts the next (the session then completing at the restart plus the partial segment lost, whatever
    segment that was: min(k, 1/p) pieces of variation 2λq piled together). The (re)starts are the sessions and
    the passes, n − 1 per hardware failure."""
    q = (1 - p.rho) * (p.n - 1) / p.n
    starts = p.n + (1 + p.rho * (p.n - 1)) * EF + (1 - p.rho) * (p.n - 1) * EF
    pieces = min(p.k, 1 / -math.expm1(-p.lam * p.s)) if q else 0.0
    return gran * gran / 16 * 2 * p.lam * starts * ((1 - q) + q * pieces)
