"""Screening, the stage of candidate generation between expansion and pricing: closed-form bounds lo <= exact
cost <= hi per row, and the rows they prove beaten (by a cheaper twin, or by a sure row of the same limits) before
the exact cost model is asked about them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.candidates.cache import CandidateCache
from planner.candidates.expand import Rows
from planner.candidates.price import interval_is_auto
from planner.candidates.risk import risk_of
from planner.candidates.shapes import Physics
from planner.economics import costmodel, screen
from planner.economics.estimate_error import EstimateError
from planner.economics.inputs import estimate_error
from planner.load.catalog import Catalog
from planner.physics.estimate import FLOOR_MARGIN
from planner.physics.storage import first_rows, numbered
from planner.schema.scenario import Scenario
from planner.schema.workload import Risk, Workload

FALLBACK_BOUND_SLACK = 0.99
"""The fallback's numeric method (`fallback.unit`) approximates the policy: over 85,547 spot_fallback candidates
of the shipped and benchmark scenarios it never came below the bound `_fallback_lo` proves for the policy itself
(0.011 % above it at the closest; 0.11 % below before its node-hours followed the replay), and the bound is taken
1 % lower: screening never drops what exhaustive pricing would keep."""
FIRST_ESTIMATES = 16
"""Shapes estimated in full in the first batch of `unbeaten_rows` (each next batch is twice as large)."""


def _screen_timings(
    keys: dict[str, np.ndarray], workload: Workload, hw_rate: float
) -> dict[str, np.ndarray]:
    """Per timing key (`keys`: its nodes, gpus_per_node, spot_rate_per_node_h, granularity_h, minimum_h, work_h and item_h, as
    arrays), closed forms only (no FFT), vectorised over keys: the quick τ with E[T] and E[F] there, the smallest
    E[T] the final τ can have (`et_lo`), the smallest and largest failure-free time (`t0`, `t0_hi`) and a lower
    bound on P(no failure) (`p0`), of one stream (the job, or one node of a stateless job)."""
    W = keys["work_h"].astype(float)
    tolerance = workload.interruption_tolerance
    # one stream of the job (segment_plans.segment_plan): all n nodes, or one node of a stateless job
    n = keys["nodes"].astype(float) if tolerance != "stateless" else np.ones(len(W))
    lam = (
        n * keys["spot_rate_per_node_h"].astype(float)
        + n * keys["gpus_per_node"].astype(float) * hw_rate
    )
    gran = keys["granularity_h"].astype(float)
    R = keys["restart_h"].astype(float)
    C = keys["checkpoint_h"].astype(float) * (tolerance == "checkpointed")
    if interval_is_auto(workload):
        # the exact τ with fine billing (see _auto_interval)
        k = screen.quick_k(W, C, R, lam, n, gran)
        ks = np.clip(k[:, None] + np.arange(-2, 3)[None, :], 1, None)
        et_all, _ = screen.expected_time(W, C, R, lam, ks)
        tau = W / k
        et, ef = (a[:, 0] for a in screen.expected_time(W, C, R, lam, k[:, None]))
        et_lo = et_all.min(axis=1)
        t0, t0_hi = R + W + ks.min(axis=1) * C, R + W + ks.max(axis=1) * C
        p0 = np.exp(-lam * (W + ks.max(axis=1) * C))
        full = last = W / k  # each segment's work; the fallback's bound reads them
        # coarse billing: the exact search may settle on any k, so bound over all of them
        coarse = (
            np.maximum(gran, keys["minimum_h"].astype(float)) > costmodel.FINE_BILLING_H
        )
        if coarse.any():
            k_max = np.minimum(100_000, np.maximum(1, np.ceil(W[coarse] / 1e-3)))
            et_lo[coarse] = screen.min_expected_time(
                W[coarse], C[coarse], R[coarse], lam[coarse]
            )
            t0[coarse] = R[coarse] + W[coarse] + C[coarse]
            t0_hi[coarse] = R[coarse] + W[coarse] + k_max * C[coarse]
            p0[coarse] = np.exp(-lam[coarse] * (W[coarse] + k_max * C[coarse]))
            # the fallback's bound then stays the failure-free one
            full[coarse] = last[coarse] = np.nan
    else:
        if tolerance == "none":
            tau = W
        elif tolerance == "stateless":
            item = keys["item_h"].astype(float)
            tau = np.minimum(np.where(np.isnan(item), W, item), W)
        else:
            tau = np.minimum(float(workload.checkpoint.every), W)
        k = np.maximum(1, np.ceil(W / tau * (1 - 1e-12)))
        last = W - (k - 1) * tau
        et = (
            R
            + (k - 1) * screen.segment_time(lam, tau + C, R)
            + screen.segment_time(lam, last + C, R)
        )
        full = tau
        ef = (k - 1) * np.expm1(lam * (tau + C)) + np.expm1(lam * (last + C))
        et_lo, t0 = et, R + W + k * C
        t0_hi, p0 = t0, np.exp(-lam * (W + k * C))
    # full, last: each segment's work (the last may be shorter)
    return {
        "tau": tau,
        "et": et,
        "ef": ef,
        "et_lo": et_lo,
        "t0": t0,
        "t0_hi": t0_hi,
        "p0": p0,
        "full": full,
        "last": last,
        "full_count": k - 1,
        "full_busy": screen.segment_time(lam, full + C, R),
        "last_busy": screen.segment_time(lam, last + C, R),
    }


def dominated(
    signature: np.ndarray,
    units: np.ndarray,
    lo: np.ndarray,
    dom_signature: np.ndarray,
    dom_units: np.ndarray,
    dom_hi: np.ndarray,
    steps: np.ndarray | None = None,
    dom_steps: np.ndarray | None = None,
    anywhere: bool = False,
) -> np.ndarray:
    """Rows whose cost lower bound exceeds the upper bound of some dominator with the same
    signature (number) drawing no more limited GPUs (a row never dominates itself: its hi >= its lo);
    with `steps`, only of a dominator booked for no more calendar steps (`dom_steps`, at most). With
    `anywhere` (no group ties the workload to a provider or region: `Rows.grouped`), a dominator drawing
    no limited GPUs dominates rows of every signature: it draws on no quota or capped offer, so a plan
    with the row has one as feasible and cheaper with it instead."""
    out = np.zeros(len(lo), dtype=bool)
    if len(dom_hi) == 0 or len(lo) == 0:
        return out
    if anywhere and (dom_units == 0).any():
        free = dom_units == 0
        out |= dominated(
            np.zeros(len(lo)),
            units,
            lo,
            np.zeros(int(free.sum())),
            dom_units[free],
            dom_hi[free],
            steps,
            None if dom_steps is None else dom_steps[free],
        )
    if (
        steps is not None
    ):  # per level of steps, the dominators up to it against the rows from it
        for level in np.unique(dom_steps):
            fast, slow = dom_steps <= level, steps >= level
            out[slow] |= dominated(
                signature[slow],
                units[slow],
                lo[slow],
                dom_signature[fast],
                dom_units[fast],
                dom_hi[fast],
            )
        return out
    for code in np.unique(dom_signature):
        mine = dom_signature == code
        order = np.argsort(dom_units[mine], kind="stable")
        levels, best = (
            dom_units[mine][order],
            np.minimum.accumulate(dom_hi[mine][order]),
        )
        members = np.flatnonzero(signature == code)
        at = np.searchsorted(levels, units[members], side="right") - 1
        ok = at >= 0
        out[members[ok]] = best[at[ok]] < lo[members[ok]]
    return out


def past_runner_ups(
    kind: np.ndarray,
    lo: np.ndarray,
    dom_kind: np.ndarray,
    dom_hi: np.ndarray,
    count: int,
) -> np.ndarray:
    """Rows no report lists as a runner-up (`Kinds`): a dominator of their kind (instance type, market) costs less
    than their lower bound for sure, or more than `count` other kinds have one that does. Each dominator is a
    candidate whose cost is at most its hi, so its kind's cheapest is below such a row's bound whatever else is
    priced (`Kinds.needed` says no)."""
    out = np.zeros(len(lo), dtype=bool)
    if len(dom_hi) == 0 or len(lo) == 0:
        return out
    kinds, of = np.unique(dom_kind, return_inverse=True)
    least = np.full(len(kinds), np.inf)
    np.minimum.at(least, of, dom_hi)
    place = np.minimum(np.searchsorted(kinds, kind), len(kinds) - 1)
    own = np.where(kinds[place] == kind, least[place], np.inf)
    # kinds with a dominator below the row's bound
    cheaper = np.searchsorted(np.sort(least), lo, side="left")
    return (own < lo) | (cheaper > count)


@dataclass(frozen=True)
class Calendar:
    """How a caller books candidates in whole steps of `step_h` (`planner batch`): `booked_h(record)`, the hours a
    candidate record is booked for, never less than its failure-free time."""

    step_h: float
    booked_h: Callable[[dict], float]

    def steps(self, hours):
        """Whole steps, 1 at least: what the calendar books for `hours` (a float or an array)."""
        return np.maximum(1, np.ceil(np.asarray(hours) / self.step_h - 1e-9))


_SCREENS_KEPT = 4  # preemption states kept per rows entry (a preemption sweep changes it every point)


@dataclass
class _Screen:
    """Screening of one workload's rows at one preemption state (see `screen_of`)."""

    code: np.ndarray  # row -> timing key number
    first: np.ndarray  # timing key number -> its first row
    bounds: dict[
        str, np.ndarray
    ]  # `_screen_timings`' `_BOUNDS`, by timing key number (NaN: not yet screened)
    done: np.ndarray  # timing key number -> screened
    exact: dict = field(default_factory=dict)  # timing key number -> `exact_of`


_BOUNDS = (
    "et",
    "ef",
    "et_lo",
    "t0",
    "t0_hi",
    "p0",
    "full",
    "last",
    "full_count",
    "full_busy",
    "last_busy",
)


def _twin_groups(
    rows: Rows, split: np.ndarray, state: bytes
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ordered by (twin group split by `split`, offer key, position) and where each group starts,
    kept per `state` (the digest of `split`): only prices then change which twin is cheapest."""
    if state not in rows.twins:
        if len(rows.twins) >= _SCREENS_KEPT:
            rows.twins.pop(next(iter(rows.twins)))
        code = pd.factorize(split)[0]
        twins = rows.twin * (code.max() + 1) + code
        order = np.lexsort((np.arange(len(split)), rows.key_rank, twins))
        starts = np.flatnonzero(np.r_[True, twins[order][1:] != twins[order][:-1]])
        rows.twins[state] = order, starts
    return rows.twins[state]


def cheapest_twins(
    rows: Rows, price: np.ndarray, lam: np.ndarray, fallback_price: np.ndarray
) -> np.ndarray:
    """Of rows identical in everything the cost and the limits depend on but the price (the same
    instance in many regions, say), the positions of the cheapest (ties: the first offer key,
    then the first row). The others are dominated before any physics is computed. Twins share λ
    and, on spot_fallback rows, the on-demand price they fall back to."""
    split = lam + 1j * np.nan_to_num(fallback_price, nan=0.0)
    order, starts = _twin_groups(rows, split, hashlib.sha1(split.tobytes()).digest())
    ordered = price[order]
    cheapest = ordered == np.repeat(
        np.minimum.reduceat(ordered, starts), np.diff(np.r_[starts, len(order)])
    )
    # in group order, so each group's first hit is its pick
    hits = np.flatnonzero(cheapest)
    group = np.searchsorted(starts, hits, side="right")
    return np.sort(order[hits[np.r_[True, group[1:] != group[:-1]]]])


def screen_of(
    rows: Rows,
    workload: Workload,
    physics: Physics,
    lam: np.ndarray,
    state: bytes,
    fingerprint: tuple,
) -> _Screen:
    """The closed-form bounds per timing key, kept per preemption state for every workload of the same
    physics and cost settings: a price multiplier never changes them, a preemption multiplier changes
    every spot key's λ. Deadlines do not enter them (each workload compares with its own). Keys are
    screened once a row needs them (`screened_bounds`)."""
    if state not in rows.screens:
        if len(rows.screens) >= _SCREENS_KEPT:
            rows.screens.pop(next(iter(rows.screens)))
        rows.screens[state] = {}
    screens, key = rows.screens[state], (physics.key, fingerprint)
    if key not in screens:
        lam_code = pd.factorize(lam)[0]
        code = numbered(rows.timing, [lam_code])
        first = first_rows(code)
        screens[key] = _Screen(
            code,
            first,
            {c: np.full(len(first), math.nan) for c in _BOUNDS},
            np.zeros(len(first), dtype=bool),
        )
    return screens[key]


def screened_bounds(
    screen: _Screen,
    at: np.ndarray,
    rows: Rows,
    workload: Workload,
    physics: Physics,
    lam: np.ndarray,
    hw_rate: float,
) -> dict[str, np.ndarray]:
    """The screen's bounds of the rows `at`, whose shapes are estimated and fit, screening the keys not yet."""
    codes = screen.code[at]
    todo = np.unique(codes[~screen.done[codes]])
    if len(todo):
        first = screen.first[todo]
        keys = {
            c: rows.columns[c][first]
            for c in ("nodes", "gpus_per_node", "granularity_h", "minimum_h")
        }
        shape = rows.shape[first]
        bounds = _screen_timings(
            keys
            | {
                "spot_rate_per_node_h": lam[first],
                "work_h": rows.work_h(physics.work_h[shape], first),
                "item_h": physics.item_h[shape],
                "checkpoint_h": rows.columns["checkpoint_h"][first],
                "restart_h": rows.columns["restart_h"][first],
            },
            workload,
            hw_rate,
        )
        for c in _BOUNDS:
            screen.bounds[c][todo] = bounds[c]
        screen.done[todo] = True
    return {c: v[codes] for c, v in screen.bounds.items()}


def _fallback_lo(
    spot: np.ndarray,
    on_demand: np.ndarray,
    nodes: np.ndarray,
    storage: np.ndarray,
    egress: np.ndarray,
    bound: dict,
    R: float,
) -> np.ndarray:
    """A lower bound on a spot_fallback row's cost. Attempts at a segment on spot are independent and the
    switch comes only after one ends, so by Wald's identity each segment finished on spot costs its
    expected busy time there (the screen's `*_busy`, restarts included, capacity waits not), and each
    left to on-demand at least its work: whichever is cheaper, per segment (NaN work: the exact search
    may pick any cadence, so only the failure-free time bounds it)."""

    def segment(work: np.ndarray, busy: np.ndarray) -> np.ndarray:
        return np.minimum(spot * busy, on_demand * work)

    node_h = (
        np.minimum(spot, on_demand) * R
        + bound["full_count"] * segment(bound["full"], bound["full_busy"])
        + segment(bound["last"], bound["last_busy"])
    )
    failure_free = np.minimum(spot, on_demand) * nodes * bound["t0"]
    node_cost = np.where(
        np.isnan(node_h), failure_free, FALLBACK_BOUND_SLACK * nodes * node_h
    )
    return node_cost + storage * bound["t0"] + egress


def cost_bounds(
    rows: Rows,
    at: np.ndarray,
    bound: dict,
    price: np.ndarray,
    lam: np.ndarray,
    fallback_price: np.ndarray,
    workload: Workload,
    hw_rate: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form bounds lo <= exact cost <= hi of the rows `at`, from their screen's `bound`."""
    column = rows.columns
    p, nodes = price[at], column["nodes"][at]
    storage, egress = (
        column["storage_h"][at].astype(float),
        column["egress"][at].astype(float),
    )
    # preemption events per hour; the rest of the failures are hardware
    events = lam[at] * nodes
    failures = events + column["gpus"][at] * hw_rate
    rho = np.divide(events, failures, out=np.zeros(len(at)), where=failures > 0)
    # ef is one stream's
    streams = (
        nodes if workload.interruption_tolerance == "stateless" else np.ones(len(at))
    )
    gang = nodes / streams
    # an event restarts every node, a failure one
    sessions = streams * (gang + (1 + rho * (gang - 1)) * bound["ef"])
    waste_hi = sessions * np.maximum(
        column["granularity_h"][at].astype(float), column["minimum_h"][at].astype(float)
    )
    # capacity waits: wall time, storage only
    waits = bound["ef"] * rho * column["wait_h"][at].astype(float)
    lo = (p * nodes + storage) * bound["et_lo"] + egress
    hi = (p * nodes + storage) * bound["et"] + p * waste_hi + storage * waits + egress
    falls_back = rows.fallback[at]
    if falls_back.any():
        lo[falls_back] = _fallback_lo(
            p,
            fallback_price[at],
            nodes,
            storage,
            egress,
            bound,
            workload.restart_overhead,
        )[falls_back]
    return lo, hi


def sure_rows(
    bound: dict, budget: float, q: float, uncertain: np.ndarray, error: EstimateError
) -> np.ndarray:
    """Rows certain to end on time, what beats others (`dominated`): no failure with probability p0 and a
    failure-free time within the budget, whatever the estimate's error, with probability p0·P(ε·t0 <= D) >= q
    (`booked_at_most` is what a calendar books them for); an `uncertain` row is never (a fallback, or a row its
    measured record or a risk preference may still rule out: `uncertain_rows`)."""
    if error.exact:
        return (bound["t0_hi"] <= budget) & (bound["p0"] >= q) & ~uncertain
    with np.errstate(divide="ignore", invalid="ignore"):
        met = bound["p0"] * error.cdf(budget / bound["t0_hi"])
    return (met >= q) & ~uncertain


def booked_at_most(bound: dict, q: float, error: EstimateError) -> np.ndarray:
    """The hours a `sure_rows` row books at most: the D with p0·P(ε·t0_hi <= D) = q, which its law meets."""
    if error.exact:
        return bound["t0_hi"]
    share = np.minimum(q / np.maximum(bound["p0"], q), 1.0)
    return bound["t0_hi"] * np.array(
        [error.factor(x) if x < 1 else math.inf for x in share]
    )


def reach(budget: float, q: float, error: EstimateError) -> float:
    """The longest failure-free time that can meet `budget` with probability q: budget over ε's q-quantile
    (a row's P(ε·T <= D) is at most P(ε·t0 <= D))."""
    return budget / error.factor(q)


def held_to_traces(
    rows: Rows, at: np.ndarray, workload: Workload, scenario: Scenario
) -> np.ndarray:
    """Which rows of `at` are offered only if their replays on measured availability keep their promise
    (`spot_evidence`): spot and spot_fallback rows, but for a stateless job, whose nodes are lost one by one
    where the replay can only treat them as one gang, and none under `defaults.spot_evidence: fitted`."""
    held = (
        scenario.defaults.spot_evidence == "traces"
        and workload.interruption_tolerance != "stateless"
    )
    return rows.spot[at] & held


def uncertain_rows(
    rows: Rows, at: np.ndarray, workload: Workload, scenario: Scenario
) -> np.ndarray:
    """Which rows of `at` may not beat others before they are priced (`sure_rows`): fallbacks, rows held to their
    measured record (`held_to_traces`), and spot rows under a risk preference, which may still drop them."""
    limited = risk_of(workload, scenario) != Risk()
    return (
        rows.fallback[at]
        | held_to_traces(rows, at, workload, scenario)
        | (rows.spot[at] & limited)
    )


def unbeaten_rows(
    rows: Rows,
    at: np.ndarray,
    physics: Physics,
    screen: _Screen,
    workload: Workload,
    price: np.ndarray,
    lam: np.ndarray,
    fallback_price: np.ndarray,
    hw_rate: float,
    budget: float,
    q: float,
    calendar: Calendar | None,
    catalog: Catalog,
    cache: CandidateCache,
    scenario: Scenario,
    runner_ups: int = 0,
) -> np.ndarray:
    """Which rows of `at` the screen keeps, estimating as few shapes as it takes to tell; with `runner_ups`, also
    those that may still be one of the cheapest other kinds a report lists (`past_runner_ups`). A row's cost is at
    least its floor: its shape's floor on W run once with no failure, at the cheaper of its prices. A row whose
    floor is above what a sure row with the same limits costs at most, or whose floor misses the deadline, is
    beaten whatever its physics; the others' shapes are estimated cheapest floor first, in doubling batches,
    until no row is left unestimated. The rows kept are those the screen keeps with every shape estimated: a row
    beaten there by a row left unestimated is beaten by what beat that row's floor (lo <= hi, so it is
    transitive)."""
    shape, column = rows.shape[at], rows.columns
    # a floor on the failure-free time
    t0 = workload.restart_overhead + physics.floor_h[shape]
    error = estimate_error(workload, scenario.defaults)
    # a booking is at least t0 times this: ε's q-quantile (`reach`)
    stretch = error.factor(q)
    open_ = (physics.floor_h[shape] < math.inf) & (t0 <= reach(budget, q, error))
    falls_back = rows.fallback[at]
    uncertain = uncertain_rows(rows, at, workload, scenario)
    node_price = np.where(
        falls_back,
        np.fmin(price[at], fallback_price[at]) * min(1.0, FALLBACK_BOUND_SLACK),
        price[at],
    )
    lo = (
        (node_price * column["nodes"][at] + column["storage_h"][at].astype(float)) * t0
        + column["egress"][at].astype(float)
    ) * FLOOR_MARGIN
    fastest = calendar.steps(t0 * stretch) if calendar else t0
    signature, units, kind = rows.signature[at], rows.units[at], rows.kind[at]
    known = np.zeros(len(at), dtype=bool)  # lo and fastest are the screen's
    # known, and certain to end on time: what beats others (`dominated`)
    sure = np.zeros(len(at), dtype=bool)
    hi, booked = (
        np.full(len(at), math.inf),
        np.full(len(at), math.inf),
    )  # the sure rows' hi and steps booked
    batch = FIRST_ESTIMATES
    while True:
        new = np.flatnonzero(open_ & ~known & physics.done[shape])
        if len(new):
            fits = physics.work_h[shape[new]] < math.inf
            open_[new[~fits]] = False
            new = new[fits]
            bound = screened_bounds(
                screen, at[new], rows, workload, physics, lam, hw_rate
            )
            on_time = bound["t0"] <= reach(budget, q, error)
            open_[new[~on_time]] = False
            new, bound = new[on_time], {c: v[on_time] for c, v in bound.items()}
            lo[new], hi[new] = cost_bounds(
                rows, at[new], bound, price, lam, fallback_price, workload, hw_rate
            )
            fastest[new] = (
                calendar.steps(bound["t0"] * stretch) if calendar else bound["t0"]
            )
            known[new] = True
            sure[new] = sure_rows(bound, budget, q, uncertain[new], error)
            if calendar:
                booked[new] = calendar.steps(booked_at_most(bound, q, error))
            rest, by = np.flatnonzero(open_), np.flatnonzero(sure)
            beaten = dominated(
                signature[rest],
                units[rest],
                lo[rest],
                signature[by],
                units[by],
                hi[by],
                *((fastest[rest], booked[by]) if calendar else (None, None)),
                anywhere=not rows.grouped,
            )
            if runner_ups:
                beaten &= past_runner_ups(
                    kind[rest], lo[rest], kind[by], hi[by], runner_ups
                )
            open_[rest[beaten]] = False
        pending = np.flatnonzero(open_ & ~physics.done[shape])
        if not len(pending):
            return open_
        physics.estimated(
            pd.unique(shape[pending[np.argsort(lo[pending], kind="stable")]])[:batch],
            rows,
            catalog,
            cache,
        )
        batch *= 2


def spot_twins(rows: Rows, at: np.ndarray) -> np.ndarray:
    """Per row of `at`: for a spot_fallback row, the position in `at` of its spot twin (the same offer and node
    count on spot alone), else -1."""
    nodes = rows.columns["nodes"][at].astype(np.int64)
    code = rows.offer_row[at].astype(np.int64) * (int(nodes.max(initial=0)) + 1) + nodes
    spot = np.flatnonzero(rows.spot[at] & ~rows.fallback[at])
    spot = spot[np.argsort(code[spot], kind="stable")]
    falls = np.flatnonzero(rows.fallback[at])
    found = np.minimum(np.searchsorted(code[spot], code[falls]), max(len(spot) - 1, 0))
    twin = np.full(len(at), -1, dtype=np.int64)
    if len(spot):
        hit = code[spot][found] == code[falls]
        twin[falls[hit]] = spot[found[hit]]
    return twin
