"""The cost model's closed forms vectorised over many timing keys at once, for candidate screening.

Each function is the array form of a scalar one in `costmodel` (named in its docstring) and is
tested against it (tests/test_costmodel.py); screening bounds come from these, exact costs from
`costmodel.expected`.
"""

from __future__ import annotations

import numpy as np

from planner.economics.candidate import MAX_EXP


def segment_time(lam, s, R):
    """segment_plans._seg_time vectorised: E[T_i] = (e^(λs) − 1)(1/λ + R) (§4), with the λ → 0 limit s."""
    x = np.minimum(lam * s, MAX_EXP)
    safe = np.where(x > 0, x, 1.0)
    return np.where(x > 0, s * np.expm1(x) / safe + np.expm1(x) * R, s)


def expected_time(W, C, R, lam, ks):
    """costmodel.expected_time vectorised over keys: E[T], E[F] for ks[i, j] equal segments of key i (C and R
    one per key, or one for all)."""
    C, R = (x[:, None] if np.ndim(x) else x for x in (C, R))
    s = W[:, None] / ks + C
    grow = np.expm1(np.minimum(lam[:, None] * s, MAX_EXP))
    safe = np.where(lam > 0, lam, 1.0)[:, None]
    et = np.where(
        lam[:, None] > 0, R + ks * grow * (1.0 / safe + R), R + W[:, None] + ks * C
    )
    return et, np.where(lam[:, None] > 0, ks * grow, 0.0)


def quick_k(W, C, R, lam, n, gran):
    """costmodel.quick_interval's k = W/τ, vectorised over keys: the same log grid, the same window
    around its best and the same ties, so the same k (tests/test_costmodel.py holds them together)."""
    W, lam, n, gran = (np.asarray(a, dtype=float) for a in (W, lam, n, gran))
    C, R = (np.broadcast_to(np.asarray(x, dtype=float), W.shape) for x in (C, R))
    k_max = np.minimum(
        100_000, np.maximum(1, np.ceil(W / np.maximum(W / 1e5, 1e-3)))
    ).astype(np.int64)
    # quick_interval's grid, unique(geomspace(1, k_max, 64).round()), per key: its repeats sit next to each
    # other and give the same proxy, so the first minimum is the same k without dropping them
    coarse = (
        np.geomspace(np.ones(len(W)), k_max, 64, axis=-1)
        .round()
        .astype(np.int64)
        .reshape(len(W), 64)
    )
    first = _argmin_k(coarse, W, C, R, lam, n, gran)
    lo = np.maximum(1, (first / 1.2).astype(np.int64) - 1)
    hi = np.minimum(k_max, (first * 1.2).astype(np.int64) + 2)
    k = first.copy()
    span = hi - lo + 1
    bucket = np.where(
        span <= _WINDOW, np.ceil(np.log2(np.maximum(span, 1))), -np.arange(len(W)) - 1
    )
    for b in np.unique(
        bucket
    ):  # keys of similar window width together (a wide window alone), padded to it
        chunk = np.flatnonzero(bucket == b)
        steps = lo[chunk, None] + np.arange(int(span[chunk].max()))[None, :]
        k[chunk] = _argmin_k(
            np.minimum(steps, hi[chunk, None]),
            W[chunk],
            C[chunk],
            R[chunk],
            lam[chunk],
            n[chunk],
            gran[chunk],
        )
    return np.where(lam > 0, k, 1).astype(float)


_WINDOW = 512
"""Fine windows up to this wide are searched in groups of similar width; wider ones key by key."""


def _argmin_k(ks, W, C, R, lam, n, gran):
    """Per key (row), the first k of `ks` minimising n·E[T] + γ/2·(n + E[F]) (quick_interval's proxy);
    repeats of the window's last k (padding) never come before it."""
    et, ef = expected_time(W, C, R, lam, ks.astype(float))
    proxy = n[:, None] * et + gran[:, None] / 2 * (n[:, None] + ef)
    return ks[np.arange(len(W)), np.argmin(proxy, axis=1)]


def min_expected_time(W, C, R, lam):
    """The least E[T] over every whole number of equal segments k in 1..k_max (E[T] is convex in k), by
    ternary search per key: a lower bound on E[T] whatever cadence the exact search settles on."""
    W, lam = np.asarray(W, dtype=float), np.asarray(lam, dtype=float)
    lo = np.ones(len(W), dtype=np.int64)
    # best_interval's k_max
    hi = np.minimum(100_000, np.maximum(1, np.ceil(W / 1e-3))).astype(np.int64)

    def et(k):
        return expected_time(W, C, R, lam, k[:, None].astype(float))[0][:, 0]

    while (hi - lo > 2).any():
        third = (hi - lo) // 3
        m1, m2 = lo + third, hi - third
        left = et(m1) < et(m2)
        lo, hi = np.where(left, lo, m1), np.where(left, m2, hi)
    return np.minimum(np.minimum(et(lo), et(np.minimum(lo + 1, hi))), et(hi))
