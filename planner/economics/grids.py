"""The damped FFT grids the cost model's laws are computed on (§5, §6): their lengths and tilts, a failure's
lump split onto grid points, the capacity waits' transform, and a CDF read back off a grid; shared by the law of
the wall time, the rounding waste and the fallback policy.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from planner.economics.candidate import wait_phases
from planner.economics.segment_plans import SegmentPlan


@lru_cache(maxsize=1024)
def fast_len(n: int) -> int:
    """The least 2^a·3^b·5^c >= n: a length pocketfft transforms fast (`scipy.fft.next_fast_len(n, real=True)`)."""
    best = 1 << max(0, n - 1).bit_length()
    odd = 1
    while odd < best:  # odd = 3^b·5^c; then the least power of two that lifts it to n
        part = odd
        while part < best:
            best = min(best, part << max(0, -(-n // part) - 1).bit_length())
            part *= 3
        odd *= 5
    return best


def wait_factor(p: SegmentPlan, h: float, N: int) -> np.ndarray | float:
    """φ of the wall time a failure adds beyond R + X: the wait W (`wait_phases`) with probability ρ, else 0; on
    the damped grid of N points (`damped_grid`'s z1), in closed form per exponential phase of mean m: the transform of it
    hat-split onto the grid points i·h is a·(I0 + e^(−z)·I1) / (1 − e^(−z−a)), a = h/m, with
    I0 = ∫(1−u)e^(−au)du and I1 = ∫u·e^(−au)du on [0, 1] (the FFT of the same hat-split masses, without
    computing them)."""
    if not p.wait or not p.rho:
        return 1.0
    step = damped_grid(N)[
        3
    ]  # e^(−z): 1 − e^(−z−a) = 1 − e^(−z)·e^(−a) loses < 1e-12 here (z ≥ αh, a > 0)
    law = 0.0
    for share, mean in wait_phases(p.wait, p.wait_cv):
        a = h / mean
        if (
            a < 1e-6
        ):  # the grid is far finer than the wait: I0 = 1/2 − a/6, I1 = 1/2 − a/3 to second order
            i1, i0 = 0.5 - a / 3, 0.5 - a / 6
        else:
            i1 = -(math.expm1(-a) + a * math.exp(-a)) / (a * a)
            i0 = -math.expm1(-a) / a - i1
        law = law + share * a * (i0 + step * i1) / (1 - step * math.exp(-a))
    return (1 - p.rho) + p.rho * law


def hat_trexp(lam: float, s: float, R: float, h: float, N: int) -> np.ndarray:
    """Mass of R + X, X ~ Exp(λ) on [0, s), split linearly onto grid i·h.

    The linear (hat) split keeps every mean exact, so sums of many such
    variables do not drift with the grid; mass beyond the grid is dropped,
    which is exact for the part of any convolution that stays on it.
    """
    w = np.zeros(N)
    lo, hi = R, R + s
    i0 = int(math.floor(lo / h))
    if i0 >= N or s <= 0:
        return w
    i1 = min(int(math.ceil(hi / h)), N)
    cells = np.arange(i0, max(i1, i0 + 1))
    left = cells * h
    a = np.maximum(left, lo)
    b = np.minimum(left + h, hi)
    d = np.maximum(b - a, 0.0)
    p = -math.expm1(-lam * s)
    e0 = np.exp(-lam * (a - R))
    x = lam * d
    em = -np.expm1(-x)
    mass = e0 * em / p
    # ∫ (u − u0) λe^(−λu) du over the cell, stable for small λd
    mom = e0 * (em - x * np.exp(-x)) / (lam * p)
    up = (mom + (a - left) * mass) / h  # share of the right-hand grid point
    stop = i0 + cells.size  # the cells are consecutive: slices, not index arrays
    w[i0:stop] += mass - up
    w[i0 + 1 : stop + 1] += up[
        : N - 1 - i0
    ]  # a right-hand point past the grid is dropped
    return w


def half_cdf(w: np.ndarray, h: float, offset: float, xs, weights=None):
    """CDF (or partial first moment) of a hat-split grid measure at xs.

    Cumulative sums of hat masses equal the CDF averaged over [x_i, x_i+h],
    i.e. the CDF at the half-grid points to second order; interpolate there.
    Only the nodes up to the furthest of xs are summed: the sums run in order,
    so that prefix is exactly what summing all of them would give there.
    """
    reach = (np.max(xs) - offset) / h  # the furthest of xs, in cells
    n = int(reach) + 3 if reach < w.size else w.size  # node n lies past it (NaN: all)
    n = min(max(n, 1), w.size)
    v = w[:n] if weights is None else w[:n] * weights[:n]
    cum = np.concatenate(([0.0], np.cumsum(v)))
    # no mass below `offset` (lengths start there), so the first node is
    # (offset, 0), not (offset − h/2, 0): a density that starts with a jump
    # at x = 0 would otherwise leak half a cell below it
    xp = offset + np.concatenate(([0.0], (np.arange(n) + 0.5) * h))
    return np.interp(xs, xp, cum)


def lump_scale(p: SegmentPlan) -> float:
    """The scale a grid over the overhead Z must resolve: a failure's lump X + R, of width s (X's support),
    or where a segment is shorter than the restart (a stateless job's items of seconds), its place R: the
    item's shape within it moves P(Z <= z) by at most the mass within one item of z."""
    return max(p.width, p.R)


@lru_cache(maxsize=64)
def damped_grid(N: int, damping: float = 18.0):
    """Tilt, untilt, per-grid-step exponents z1 and e^(−z1) for a damped DFT on N points (read-only arrays).

    The tilt e^(−αx) with αNh = `damping` suppresses wrap-around by e^-18, so the grid need only cover the
    lengths we evaluate, not all of T. In grid steps (αh = damping/N) none of it depends on the step h, so
    every grid of N points shares one copy."""
    step = damping / N
    i = np.arange(N)
    tilt = np.exp(-step * i)
    untilt = np.exp(step * i)
    j = np.arange(N // 2 + 1)
    z1 = step + 2j * np.pi * j / N  # per-grid-step exponent
    out = tilt, untilt, z1, np.exp(-z1)
    for array in out:
        array.flags.writeable = False
    return out
