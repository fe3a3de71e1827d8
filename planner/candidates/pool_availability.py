"""How many of an endpoint's nodes count: the share of time a spot node is away, the nodes a pool of n
keeps at an availability, the chance a pool falls below what it must carry, and the table of pool sizes
the model indexes.

Nothing here grows with the size of a pool: an option's largest pool is found by a search over pool sizes
a few hundred at a time, and a spot option's table of nodes kept (`pool_table`) lists every size of a pool
of up to EXACT_POOL_NODES nodes; a larger pool's table lists only the sizes where its absent count steps up,
exact to EXACT_POOL_NODES and about 1/POOL_SIZE_STEP of the pool apart above (each size counted with the
absences of the next listed one: never more nodes than the pool keeps). So an endpoint of a million
requests a second, whose pools run to hundreds of thousands of nodes, is priced and planned in the memory
and time of one of a few requests a second.

Split from endpoints.py, which builds and prices the options: this is the availability math their
pools are counted with, which the solver's reports read too.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

EXACT_POOL_NODES = 1024
"""A spot pool of at most this many nodes has every size in its table (the model indexes the table by the
pool's size, an element constraint); a larger one has the sizes where its absent count steps up."""
POOL_SIZE_STEP = 64
"""Above EXACT_POOL_NODES a spot pool's table steps about 1/POOL_SIZE_STEP of the pool at a time (1.6 %):
a pool of 100,000 nodes is counted with the absences of one up to 1,560 larger, a few dozen nodes (a spot
node away 3 % of the time) of 100,000; about 45 steps per doubling of the pool."""
MOST_POOL_NODES = 10_000_000
"""Nodes of one option at most (ten million nodes, far beyond any cloud's capacity): an option that would
need more to carry an endpoint's peak alone is capped here, as by an offer's `max_nodes`, and keeps every
count the solver adds up well inside 64-bit integers."""


def kept_nodes(n: int, away: float, availability: float, zone_away: float = 0.0) -> int:
    """Nodes a pool of n keeps with probability >= availability when each is away a share `away` on its own
    and the whole pool a share `zone_away`: n − d, with d the smallest count of absent nodes such that
    (1 − z)·P(Binomial(n, away) <= d) (+ z when d = n) reaches `availability`."""
    return int(kept_counts(np.array([n]), away, availability, zone_away)[0])


def kept_counts(
    n: np.ndarray, away: float, availability: float, zone_away: float = 0.0
) -> np.ndarray:
    """`kept_nodes` for every pool size in `n` at once: the binomial's quantile by bisection on its CDF (scipy's
    incomplete beta, which stays exact where summing the terms one by one drifts or underflows: pools of
    hundreds of nodes)."""
    n = np.asarray(n, dtype=np.int64)
    if away <= 0 and zone_away <= 0:
        return n  # every node counts (on demand): nothing to import
    # here, not at the top: a solve without spot endpoint options never imports SciPy (0.25 s)
    from scipy import special

    target = (availability - 1e-12) / (1 - zone_away) if zone_away < 1 else math.inf
    if (
        target > 1
    ):  # only the whole pool's absence term reaches it: every node may be gone
        return np.zeros_like(n)
    # absent counts below and at the quantile
    short, enough = _quantile_bracket(n, away, target)
    while np.any(open_ := enough - short > 1):
        mid = (short + enough) // 2
        ok = special.bdtr(np.maximum(mid, 0), n, away) >= target
        enough, short = (
            np.where(open_ & ok, mid, enough),
            np.where(open_ & ~ok, mid, short),
        )
    return n - enough


def _quantile_bracket(
    n: np.ndarray, away: float, target: float
) -> tuple[np.ndarray, np.ndarray]:
    """Absent counts below and at the binomial's `target` quantile: a few standard deviations either side of
    the normal approximation where the CDF confirms them (a dozen bisection steps fewer for large pools),
    else -1 and n, which always hold."""
    from scipy import special

    sd = np.sqrt(n * away * (1 - away))
    guess = n * away + special.ndtri(min(target, 1 - 1e-16)) * sd
    margin = 3 * sd + 10
    low = np.clip(np.floor(guess - margin), -1, n).astype(np.int64)
    high = np.clip(np.ceil(guess + margin), 0, n).astype(np.int64)
    low_holds = (low < 0) | (special.bdtr(np.maximum(low, 0), n, away) < target)
    high_holds = special.bdtr(high, n, away) >= target
    return np.where(low_holds & (low < high), low, -1), np.where(high_holds, high, n)


def below_capacity(
    nodes: int, away: float, need: float, zone_away: float = 0.0
) -> float:
    """P(fewer than `need` of `nodes` are up) when each is away a share `away` on its own and the whole pool
    a share `zone_away`."""
    if away <= 0 and zone_away <= 0 or need <= 0:
        return 0.0
    from scipy import special

    up_needed = math.ceil(need - 1e-9)
    alone = (
        float(special.bdtr(min(up_needed - 1, nodes), nodes, 1 - away))
        if up_needed > 0
        else 0.0
    )
    return float(zone_away + (1 - zone_away) * alone)


def away_share(lam: float, replace_h: float) -> float:
    """Share of time a spot node is gone: up for 1/λ on average, then R to replace (alternating renewal)."""
    return lam * replace_h / (1 + lam * replace_h)


def pool_table(
    most: int, away: float, availability: float, zone_away: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """A spot pool's sizes and the nodes each keeps (`kept_counts`). Up to EXACT_POOL_NODES nodes, every size
    0 .. most. A larger pool lists, in order, the sizes n_i where its absent count a_i = n_i − kept_i steps
    up: a pool of n nodes counts n − a_i with n_i the first listed size at or above n (never more than it
    keeps: the absent count only grows with the pool). To EXACT_POOL_NODES those are the exact steps; above,
    sizes about 1/POOL_SIZE_STEP apart and `most`: a few hundred sizes, however large the pool."""
    if most <= EXACT_POOL_NODES:
        sizes = np.arange(most + 1)
        return sizes, kept_counts(sizes, away, availability, zone_away)
    grid, n = list(range(EXACT_POOL_NODES + 1)), EXACT_POOL_NODES
    while n < most:
        n = min(most, n + max(1, n // POOL_SIZE_STEP))
        grid.append(n)
    sizes = np.array(grid)
    absent = sizes - kept_counts(sizes, away, availability, zone_away)
    last = np.r_[
        absent[1:] > absent[:-1], True
    ]  # the largest size of each run of one absent count
    return sizes[last], (sizes - absent)[last]


@lru_cache(
    maxsize=16384
)  # an endpoint's options ask it the same thing per bucket and period
def most_nodes(
    need: float,
    away: float,
    availability: float,
    cap: int | None,
    zone_away: float = 0.0,
) -> int:
    """Enough nodes of one option to carry the whole peak alone (after its absences), within its cap and
    MOST_POOL_NODES: the smallest pool of want .. 4·want + 16 nodes that keeps `want`, else the largest of
    them. The nodes kept never fall as the pool grows (one more node adds at most one to the absent count),
    so the search weighs every size at once for pools of up to a few hundred nodes, and a few rounds of
    sizes spread over what is left for a million."""
    want = max(1, math.ceil(min(need, MOST_POOL_NODES) - 1e-9))
    low, high = (
        want,
        4 * want + 16,
    )  # the smallest pool that keeps `want` is in low .. high, if any is
    while True:
        count = high - low + 1 if high - low < SEARCH_SIZES else SEARCH_STEP
        sizes = np.unique(np.linspace(low, high, count).round().astype(np.int64))
        enough = np.flatnonzero(
            kept_counts(sizes, away, availability, zone_away) >= want
        )
        if not len(enough):
            most = high  # none keeps `want`: the largest
            break
        first = enough[0]
        if first == 0 or sizes[first] - sizes[first - 1] == 1:
            most = int(sizes[first])
            break
        low, high = int(sizes[first - 1]) + 1, int(sizes[first])
    most = min(most, MOST_POOL_NODES)
    return min(most, cap) if cap is not None else most


SEARCH_SIZES, SEARCH_STEP = 512, 32
"""`most_nodes` weighs every pool size at once when there are at most SEARCH_SIZES, else SEARCH_STEP sizes
spread over those left at a time."""
