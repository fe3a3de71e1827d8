"""Expected cost of one candidate: the analytic side of docs/cost-model.md.

Pure functions over plain numbers (no pydantic, solver or CLI imports), so the
planner can call them for thousands of candidates and `planner.simulate` can
check every number by Monte-Carlo of exactly the same process.

This module assembles the expected cost (§4–§7), answers P(T <= D) and its quantiles for
a candidate, and searches the checkpoint interval (`every: auto`); the parts it assembles
have a home each: `candidate` (the inputs and the result), `segment_plans` (the job as
segments and its moments, §4), `wall_time` (the law of T, §6), `rounding_waste` (§5) and
`grids` (the damped FFT grids both laws are computed on).

Where the cost model departs from the formulas printed in docs/cost-model.md it is to
make them exact (the contract's tolerances are against simulation):

* rounding waste (§5) is computed from the distribution of every billing
  session's length, not from the ``γ/2`` rule of thumb (see `rounding_waste.expected_waste`);
* P(T <= D) (§6) is the exact distribution of T on a fine grid (FFT of the
  per-segment compound-geometric laws), not a normal approximation;
* 'none' writes no checkpoints, so its C is 0 as for 'stateless' (§4).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from planner.economics import purchase
from planner.economics.candidate import MAX_EXP, CandidateInputs, CostResult
from planner.economics.estimate_error import EXACT as EXACT_ESTIMATE
from planner.economics.rounding_waste import expected_waste
from planner.economics.segment_plans import segment_moments, segment_plan, wall_moments
from planner.economics.wall_time import WallLaw


def completion_quantile(
    inputs: CandidateInputs, q: float, tau: float | None = None
) -> float:
    """Smallest D with P(ε·T ≤ D) ≥ q: the same law as `p_deadline`, inverted (what `planner batch` books
    on the calendar)."""
    if inputs.terms is not None:
        raise ValueError("completion_quantile is for on-demand and spot candidates")
    return WallLaw(segment_plan(inputs, tau)).quantile_met(q, inputs.estimate_error)


def p_deadline(inputs: CandidateInputs, tau: float | None = None) -> float:
    """P(ε·T <= D), exact up to a fine grid (§6, §12); 1 when D is infinite."""
    D = inputs.time_budget_h
    law = WallLaw(segment_plan(inputs, tau))
    if inputs.terms is not None:
        return purchase.p_met(law, D, inputs.estimate_error, inputs.terms)
    if not math.isfinite(D):
        return 1.0
    return law.p_met(D, inputs.estimate_error)


def _evaluate(
    inputs: CandidateInputs, tau: float | None, with_deadline: bool
) -> CostResult:
    p = segment_plan(inputs, tau)
    # of one stream (§4): the whole job but for a stateless one
    ET, EF, sd = segment_moments(p)
    n, price = inputs.nodes, inputs.price_per_node_h
    gran, minimum = inputs.billing_granularity_h, inputs.billing_minimum_h
    terms = inputs.terms
    law = WallLaw(p, (ET, EF, sd)) if terms is not None else None
    overrun_usd = 0.0
    if terms is not None and terms.by_term:
        # paid by the term (§13): what the terms cost beyond the hours used is the waste
        paid, overrun = purchase.term_billing(law, n, terms)
        billed, waste = paid + overrun, paid - n * ET + overrun
        overrun_usd = overrun * (terms.overrun_usd_per_node_h - price)
    else:
        waste = p.streams * expected_waste(p, gran, minimum, ET, EF, sd).total
        billed = n * ET + waste
    billed, waste = float(billed), float(waste)
    W, kC = inputs.work_h, p.k * p.C

    def usd(rate: float, amount: float) -> float:  # 0 · inf is 0 here
        return float(rate * amount) if rate else 0.0

    # plus the capacity waits, which are not billed
    wall, _ = wall_moments(p, ET, EF, sd)
    breakdown = {
        "compute": usd(price, n * W),
        "checkpointing": usd(price, n * kC),
        "startup": usd(price, n * p.R),
        # E[T_busy] − W − kC − R: lost work and restarts (§7)
        "preemption_rework": usd(price, n * max(ET - p.T0, 0.0)),
        "rounding_waste": usd(price, waste) + overrun_usd,
        "storage": usd(inputs.storage_usd_per_h, wall),
        "egress": float(inputs.egress_usd),
    }
    cost = math.fsum(breakdown.values())
    pd = on_estimate = 1.0
    if with_deadline and terms is not None:
        pd = purchase.p_met(law, inputs.time_budget_h, inputs.estimate_error, terms)
        on_estimate = purchase.p_met(law, inputs.time_budget_h, EXACT_ESTIMATE, terms)
    elif with_deadline and math.isfinite(inputs.time_budget_h):
        law = WallLaw(p, (ET, EF, sd))
        pd, on_estimate = (
            law.p_met(inputs.time_budget_h, inputs.estimate_error),
            law.p_le(inputs.time_budget_h),
        )
    return CostResult(
        wall_h=wall,
        failures=p.streams * EF,
        billed_node_h=billed,
        rounding_waste_node_h=waste,
        p_deadline=pd,
        cost_usd=cost,
        breakdown=breakdown,
        segments=p.k,
        checkpoint_interval_h=p.tau,
        p_deadline_on_estimate=on_estimate,
    )


@lru_cache(maxsize=4096)
def expected(inputs: CandidateInputs, tau: float | None = None) -> CostResult:
    """Expected wall time, failures, billing, P(T <= D) and cost (§4–§7).

    `tau` overrides `inputs.checkpoint_interval_h` (used by `best_interval`).
    Kept by its arguments, all it depends on: candidate generation prices spot alone for a spot row and
    again as the spot phase of its spot_fallback twin. The result is shared, so read it, never change it.
    """
    return _evaluate(inputs, tau, with_deadline=True)


FINE_BILLING_H = 0.05
"""Billing finer than 3 minutes (granule and minimum): rounding waste barely depends on τ."""


def expected_time(work_h: float, C: float, R: float, lam: float, k) -> tuple:
    """E[T] and E[F] for k equal segments (§4), vectorised over k."""
    k = np.asarray(k, dtype=float)
    s = work_h / k + C
    if lam == 0:
        return R + work_h + k * C, np.zeros_like(k)
    grow = np.expm1(np.minimum(lam * s, MAX_EXP))
    return R + k * grow * (1.0 / lam + R), k * grow


def quick_interval(inputs: CandidateInputs) -> float:
    """τ = W/k minimising n·E[T] + γ/2·(n + E[F]) over integer k: exact E[T], the §5 waste
    approximation. Equal segments are best for a given k (e^(λs) is convex). Cheap (a few
    vectorised scans), so candidate generation can afford it for every hardware shape."""
    W, lam = inputs.work_h, inputs.failure_rate_per_h
    if inputs.interruption_tolerance != "checkpointed" or lam == 0:
        return segment_plan(inputs).tau
    C, R, n, gran = (
        inputs.checkpoint_write_h,
        inputs.restart_h,
        inputs.nodes,
        inputs.billing_granularity_h,
    )
    k_max = int(min(100_000, max(1, math.ceil(W / max(W / 1e5, 1e-3)))))

    def proxy(ks):
        ET, EF = expected_time(W, C, R, lam, ks)
        return n * ET + gran / 2 * (n + EF)

    ks = np.unique(np.geomspace(1, k_max, 64).round().astype(int))
    best = int(ks[np.argmin(proxy(ks))])
    lo, hi = max(1, int(best / 1.2) - 1), min(k_max, int(best * 1.2) + 2)
    ks = np.arange(lo, hi + 1)
    best = int(ks[np.argmin(proxy(ks))])
    return W / best


def best_interval(inputs: CandidateInputs, candidates=None) -> float:
    """τ minimising expected cost for 'checkpointed' with cadence `auto`.

    For a given k = ceil(W/τ), E[T] is smallest with equal segments τ = W/k
    (e^(λs) is convex), so the search runs over integers k: a log-spaced
    scan around Young/Daly's sqrt(2C/λ), then every k near the best few,
    then a continuous polish within the best k. Extra `candidates` (hours)
    are always considered. Ties go to the longer τ (fewer checkpoints).
    """
    W = inputs.work_h
    if inputs.interruption_tolerance != "checkpointed":
        return segment_plan(inputs).tau
    fine = max(inputs.billing_granularity_h, inputs.billing_minimum_h) <= FINE_BILLING_H
    if (
        fine and not candidates
    ):  # the quick optimum, settled against its neighbours at the exact cost
        k0 = round(W / quick_interval(inputs))
        near = [W / k for k in range(max(1, k0 - 2), k0 + 3)]
        return min(
            near, key=lambda t: (_evaluate(inputs, t, with_deadline=False).cost_usd, -t)
        )
    lam, C = inputs.failure_rate_per_h, inputs.checkpoint_write_h
    k_max = int(min(100_000, max(1, math.ceil(W / 1e-3))))
    cache: dict[float, float] = {}

    def cost(tau: float) -> float:
        if tau not in cache:
            c = _evaluate(inputs, tau, with_deadline=False).cost_usd
            cache[tau] = c if c == c else math.inf  # NaN never wins
        return cache[tau]

    if lam == 0:
        return W  # nothing to lose: one segment, fewest checkpoints
    ks = set(np.unique(np.geomspace(1, k_max, 48).round().astype(int)).tolist())
    if C > 0:
        k_yd = W / math.sqrt(2 * C / lam)
        for f in (0.5, 0.7, 1.0, 1.4, 2.0):
            ks.add(int(min(k_max, max(1, round(k_yd * f)))))
    for kk in ks:
        cost(W / kk)
    # refine: a fine log grid around the two best, then integer neighbours
    for t in sorted(cache, key=lambda t: (cache[t], -t))[:2]:
        k0 = W / t
        for kk in np.unique(
            np.geomspace(max(1, k0 / 1.35), min(k_max, k0 * 1.35), 16).round()
        ):
            cost(W / int(kk))
    k0 = round(W / min(cache, key=lambda t: (cache[t], -t)))
    for kk in range(max(1, k0 - 4), min(k_max, k0 + 4) + 1):
        cost(W / kk)
    # polish: unequal splits within the best k (rarely better, but cheap)
    t_best = min(cache, key=lambda t: (cache[t], -t))
    k0 = round(W / t_best)
    if k0 > 1:
        lo, hi = W / k0, W / (k0 - 1) * (1 - 1e-9)
        for t in np.linspace(lo, hi, 6)[1:]:
            cost(float(t))
    for t in candidates or ():
        if t > 0:
            cost(float(min(t, W)))
    return min(cache, key=lambda t: (cache[t], -t))
