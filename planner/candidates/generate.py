"""Candidate generation: every feasible (offer, node count, market, checkpoint interval) per
workload, with its expected cost from the cost model, then pruning of dominated ones.

The output is a pandas table the CP-SAT model reads (`planner/solve/model.py`); nothing here imports
OR-Tools. Work is shared where the physics is shared: W is computed once per hardware
shape, and the cost model once per *timing key* (shape, nodes, market, preemption rate,
billing rules); offers in twenty regions at twenty prices reuse it. Work is skipped where a
bound settles it: a shape is estimated only if a floor on its W leaves a row of it unbeaten,
and a row is priced only if its screening bounds do.
"""
from __future__ import annotations

import collections
import functools
import hashlib
import math
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from planner.candidates.cache import CandidateCache
from planner.candidates.endpoints import endpoint_options
from planner.candidates.limits import MAX_CANDIDATE_USD, Limits, quota_mask, to_cents
from planner.economics import costmodel, fallback, screen, spot_evidence
from planner.economics.estimate_error import EstimateError
from planner.economics.inputs import cost_inputs, estimate_error
from planner.load.catalog import Catalog, offer_mask
from planner.physics.estimate import (FLOOR_MARGIN, Estimate, Prepared, Shape, checkpoint_size_gib, estimate_prepared,
                                      layout_text, prepare, work_floor_h)
from planner.schema.plan import PRICED_KEYS
from planner.schema.scenario import Override, PlacementScore, Risk, Scenario, Workload

HOURS_PER_MONTH = 730.0
INTER_REGION_USD_PER_GIB = 0.02
"""Moving data between regions of one provider (AWS/GCP list ~0.01-0.02 USD/GB); a stated default."""
NODE_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
"""Node counts considered between a workload's bounds (plus the bounds): dense where it matters."""

LAW_AFTER = 8
"""A spot_fallback key met at this many deadlines gets spot alone's law on its grid (one FFT, ~2 ms) to tell
whether it rarely switches; before that Chernoff's bound (~0.2 ms) usually settles it (both give the same answer)."""
FALLBACK_MIN_SWITCH = 1e-3
"""A spot_fallback candidate that would switch in fewer runs than this is its spot twin, and is not offered
where the twin is; where spot alone is not allowed (`forbid: {markets: [spot]}`) it is priced as the twin
(`fallback.as_spot`). One with no room for spot before its switch point is none."""
FALLBACK_BOUND_SLACK = 0.99
"""The fallback's numeric method (`fallback.unit`) approximates the policy: over 85,547 spot_fallback candidates
of the shipped and benchmark scenarios it never came below the bound `_fallback_lo` proves for the policy itself
(0.011 % above it at the closest; 0.11 % below before its node-hours followed the replay), and the bound is taken
1 % lower: screening never drops what exhaustive pricing would keep."""
FIRST_ESTIMATES = 16
"""Shapes estimated in full in the first batch of `_unbeaten` (each next batch is twice as large)."""
RUNNER_UPS = 3
"""Runner-ups a plan reports per workload: the cheapest candidate of each of the cheapest kinds (instance
type, market) other than the winner's, the JSON's `alternatives`. Generation prices enough to find them
exactly; the cheapest of a kind is always the cheapest of its twins, so no dearer twin is ever needed."""


@dataclass
class CandidateSet:
    """Evaluated candidates (`all`), what the solver sees (`pruned`), and why workloads failed."""

    all: pd.DataFrame
    pruned: pd.DataFrame
    infeasible: dict[str, str] = field(default_factory=dict)
    considered: int = 0  # (offer, nodes, market) rows before any cost evaluation
    endpoints: pd.DataFrame = field(default_factory=pd.DataFrame)  # serving options (`endpoints.py`)
    traffic: dict = field(default_factory=dict)  # endpoint name -> its Endpoint


def apply_overrides(offers: pd.DataFrame, overrides: tuple[Override, ...], catalog: Catalog,
                    spot_mult: float = 1.0, preempt_mult: float = 1.0, on_demand_mult: float = 1.0,
                    where: dict[str, str] | None = None) -> pd.DataFrame:
    """Scale spot/on-demand prices and preemption rates of the offers each override matches.

    The scenario's overrides apply first; `spot_mult`/`preempt_mult`/`on_demand_mult`
    (what-if sweeps) then apply to the offers `where` selects (all when None).
    """
    offers = offers.copy()
    rules = [(o, o.spot_price_multiplier, o.on_demand_price_multiplier, o.preemption_rate_multiplier)
             for o in overrides]
    sweep = Override(**(where or {}))
    rules.append((sweep, spot_mult, on_demand_mult, preempt_mult))
    for rule, spot, on_demand, preempt in rules:
        settings = {c: v for c, v in (("spot_correlation", rule.spot_correlation),
                                      ("spot_capacity_wait_h", rule.spot_capacity_wait),
                                      ("spot_capacity_wait_cv", rule.spot_capacity_wait_cv)) if v is not None}
        if spot == on_demand == preempt == 1.0 and not settings:
            continue
        mask = pd.Series(True, index=offers.index)
        if rule.provider:
            mask &= offers["provider"] == rule.provider
        if rule.region:
            mask &= offers["region"] == rule.region
        if rule.instance_type:
            mask &= offers["instance_type"] == rule.instance_type
        if rule.gpu:
            mask &= offers["gpu"].map(lambda g: catalog.gpu_matches(g, rule.gpu))
        offers.loc[mask, "spot_usd_h"] *= spot
        offers.loc[mask, "on_demand_usd_h"] *= on_demand
        offers.loc[mask, "spot_preemption_per_h"] *= preempt
        for column, value in settings.items():  # set, not scaled, on offers with a spot market
            offers.loc[mask & offers["spot_usd_h"].notna(), column] = float(value)
    return offers


def limits_of(scenario: Scenario) -> Limits:
    c = scenario.constraints
    return Limits(gpu_quotas=dict(c.gpu_quotas), node_limits=dict(c.node_limits),
                  node_limits_per_market=c.node_limits_per_market, budget_usd=c.budget,
                  same_region=c.same_region, same_provider=c.same_provider)


# ---------------------------------------------------------------- expansion


def _node_counts(low_gpus: int, high_gpus: int, g: int, multi_node: bool, cap: float) -> list[int]:
    low, high = max(1, math.ceil(low_gpus / g)), high_gpus // g
    if not multi_node:
        high = min(high, 1)
    high = int(min(high, cap))
    if high < low:
        return []
    return sorted({low, high} | {n for n in NODE_LADDER if low <= n <= high})


_MARKETS = ("on_demand", "spot", "spot_fallback")


@dataclass
class _Markets:
    """Every (offer, market) row of one offers table under one scenario's limits, with what no workload changes
    (billing, GPU family, the quotas covering it, its node cap), market by market (`_MARKETS`) and offer by offer
    within each: built once and shared by every workload's rows, which pick and repeat them (`_build_rows`)."""

    columns: dict[str, np.ndarray]  # `_OFFER_ROW`: the offer's position
    ladder: np.ndarray  # per row: its number in `ladders`
    ladders: list[tuple[int, bool, float]]  # (GPUs per node, multi-node, node cap): what its node counts depend on
    codes: dict = field(default_factory=dict)  # (column, sorted) -> `code`

    def code(self, column: str, sort: bool = False) -> np.ndarray:
        """The column's values numbered (NaN too), in order of first appearance or, `sort`, of value."""
        if (column, sort) not in self.codes:
            self.codes[column, sort] = pd.factorize(self.columns[column], sort=sort, use_na_sentinel=False)[0]
        return self.codes[column, sort]


def _all_markets(offers: pd.DataFrame, catalog: Catalog, limits: Limits) -> _Markets:
    """`_Markets` of `offers`: on-demand where it has an on-demand price, spot where a spot price, and
    spot_fallback (§10) where both."""
    offers = offers.assign(**{_OFFER_ROW: np.arange(len(offers))})
    on_demand = offers[offers["on_demand_usd_h"].notna()]
    spot = offers[offers["spot_usd_h"].notna()].assign(
        market="spot", correlation=lambda o: o["spot_correlation"], wait_h=lambda o: o["spot_capacity_wait_h"],
        wait_cv=lambda o: o["spot_capacity_wait_cv"])
    markets = pd.concat([on_demand.assign(market="on_demand", correlation=0.0, wait_h=0.0, wait_cv=1.0), spot,
                         spot[spot["on_demand_usd_h"].notna()].assign(market="spot_fallback")], ignore_index=True)
    markets["fallback"] = markets["market"] == "spot_fallback"
    providers = catalog.providers
    # billing: the offer's own rule where its catalog row gives one (hourly GPU clouds, committed
    # contracts), else the provider's (cost-model §5)
    markets["granularity_h"] = markets["billing_granularity_h"].astype(float).fillna(
        markets["provider"].map({p: v.billing_granularity_h for p, v in providers.items()}))
    markets["minimum_h"] = markets["billing_minimum_h"].astype(float).fillna(
        markets["provider"].map({p: v.billing_minimum_h for p, v in providers.items()}))
    markets["gpu_family"] = markets["gpu"].map({name: gpu.family for name, gpu in catalog.gpus.items()})
    markets["provider_region"] = markets["provider"] + "/" + markets["region"]
    markets["quota_keys"], markets["capped_offer"], limited = limit_keys(markets.assign(gpus=1), limits, "key")
    markets["limited"] = np.array(limited, dtype=bool)  # 1 GPU: limited or not
    caps = np.minimum(markets["max_nodes"].astype(float).fillna(math.inf),
                      markets["key"].map(limits.node_limits).astype(float).fillna(math.inf))
    combos = pd.DataFrame({"g": markets["gpus_per_node"].astype(int), "multi": markets["inter_node"] != "none",
                           "cap": caps})
    return _Markets({c: markets[c].to_numpy() for c in markets.columns if c in _BASE_COLUMNS},
                    combos.groupby(list(combos.columns), sort=False).ngroup().to_numpy(),
                    list(combos.drop_duplicates().itertuples(index=False, name=None)))


_PER_NODE_COUNT = ("nodes", "gpus", "units")
"""The expanded rows' columns that differ between the node counts of one (offer, market)."""
_PER_WORKLOAD = _PER_NODE_COUNT + ("storage_h", "egress")
"""The expanded rows' columns that are not the (offer, market) row's: its node count's, and the workload's."""


# ---------------------------------------------------------------- physics per shape

SHAPE_COLUMNS = ["gpu", "gpus_per_node", "nodes", "gpu_vram_gib", "intra_node", "intra_node_gbs", "inter_node",
                 "inter_node_gbps"]
TIMING_COLUMNS = SHAPE_COLUMNS + ["lam_spot", "wait_h", "wait_cv", "granularity_h", "minimum_h", "fallback"]
_PHYSICS_IRRELEVANT = {"name", "description", "time_budget", "checkpoint", "restart_overhead",
                       "interruption_tolerance", "data", "allow", "forbid"}
def _estimate(prepared: Prepared, physics: str, catalog: Catalog, shape: Shape, headroom: float,
              cache: CandidateCache) -> Estimate:
    """Physics shared by workloads that differ only in name, deadline, data or placement."""
    key = (physics, shape, headroom)
    found = cache.estimates.get(key)
    return found if found is not None else cache.keep(cache.estimates, key,
                                                      estimate_prepared(prepared, catalog, shape, headroom))


def _physics(rows: "_Rows", workload: Workload, catalog: Catalog, headroom: float) -> "_Physics":
    """The workload's physics on its rows' shapes, kept with the rows for every workload of the same physics:
    shapes never depend on prices, so what-if points reuse them. Only the cheap floor on W is worked out here;
    a shape is estimated in full when a row of it is still in the running (`_Physics.estimated`)."""
    physics = workload.model_dump_json(exclude=_PHYSICS_IRRELEVANT)
    key = (physics, headroom)
    if key not in rows.physics:
        prepared = prepare(workload, catalog)
        floor_h = np.array([work_floor_h(prepared, catalog, shape) for shape in rows.shapes], dtype=float)
        count = len(rows.shapes)
        rows.physics[key] = _Physics(key, prepared, floor_h, np.full(count, math.inf), np.full(count, math.nan),
                                     np.zeros(count, dtype=bool), [None] * count)
    return rows.physics[key]


@dataclass
class _Physics:
    """Physics of one workload on each of its rows' shapes (`_Rows.shapes`) at one VRAM headroom: a floor on W
    for every shape, the full estimate for those a row needed."""

    key: tuple  # (the workload's physics fields, headroom): what the screening depends on besides λ
    prepared: Prepared
    floor_h: np.ndarray  # per shape: a lower bound on W (`work_floor_h`)
    work_h: np.ndarray  # per shape (inf: does not fit, or not estimated yet)
    item_h: np.ndarray  # per shape (NaN: no item time)
    done: np.ndarray  # per shape: estimated
    estimates: list  # per shape: its Estimate once estimated

    def estimated(self, shapes: np.ndarray, rows: "_Rows", catalog: Catalog, cache: CandidateCache) -> None:
        """Estimate the shapes numbered `shapes` that are not yet."""
        physics, headroom = self.key
        for number in np.unique(shapes[~self.done[shapes]]).tolist():
            estimate = _estimate(self.prepared, physics, catalog, rows.shapes[number], headroom, cache)
            self.estimates[number], self.done[number] = estimate, True
            self.work_h[number], self.item_h[number] = estimate.work_h, estimate.item_h or math.nan


# ---------------------------------------------------------------- cost-model inputs


def _fixed_interval(workload: Workload, work_h: float, item_h: float | None) -> float:
    """τ at the workload's fixed cadence: W when it cannot resume (or for `auto`, searched later),
    one item when stateless, else `checkpoint.every`."""
    if workload.interruption_tolerance == "none":
        return work_h
    if workload.interruption_tolerance == "stateless":
        return min(item_h if item_h and item_h == item_h else work_h, work_h)
    every = workload.checkpoint.every
    return work_h if every == "auto" else min(float(every), work_h)


def _auto(workload: Workload) -> bool:
    return workload.interruption_tolerance == "checkpointed" and workload.checkpoint.every == "auto"


def _stored_gib(workload: Workload, catalog: Catalog) -> float:
    """What the run keeps in storage while it runs: its kept checkpoints and its data set."""
    kept = (checkpoint_size_gib(workload, catalog) * workload.checkpoint.keep
            if workload.interruption_tolerance == "checkpointed" else 0.0)
    return kept + workload.data.size


def _egress_usd(workload: Workload, catalog: Catalog, providers: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """Moving the data set from where it lives to each candidate (charged by the source provider)."""
    if not workload.data.location or workload.data.size == 0:
        return np.zeros(len(providers))
    home, _, home_region = workload.data.location.partition("/")
    elsewhere = np.asarray(providers != home, dtype=bool)
    other_region = np.asarray((providers == home) & (regions != home_region), dtype=bool) if home_region else False
    return np.where(elsewhere, workload.data.size * catalog.providers[home].egress_usd_per_gib,
                    np.where(other_region, workload.data.size * INTER_REGION_USD_PER_GIB, 0.0))


# ---------------------------------------------------------------- screening


def _screen_timings(keys: dict[str, np.ndarray], workload: Workload, hw_rate: float) -> dict[str, np.ndarray]:
    """Per timing key (`keys`: its nodes, gpus_per_node, lam_spot, granularity_h, minimum_h, work_h and item_h, as
    arrays), closed forms only (no FFT), vectorised over keys: the quick τ with E[T] and E[F] there, the smallest
    E[T] the final τ can have (`et_lo`), the smallest and largest failure-free time (`t0`, `t0_hi`) and a lower
    bound on P(no failure) (`p0`), of one stream (the job, or one node of a stateless job)."""
    W = keys["work_h"].astype(float)
    tolerance = workload.interruption_tolerance
    # one stream of the job (costmodel.segment_plan): all n nodes, or one node of a stateless job
    n = keys["nodes"].astype(float) if tolerance != "stateless" else np.ones(len(W))
    lam = n * keys["lam_spot"].astype(float) + n * keys["gpus_per_node"].astype(float) * hw_rate
    gran = keys["granularity_h"].astype(float)
    R = workload.restart_overhead
    C = 0.0 if tolerance != "checkpointed" else workload.checkpoint.write_time
    if _auto(workload):
        k = screen.quick_k(W, C, R, lam, n, gran)  # the exact τ with fine billing (see _auto_interval)
        ks = np.clip(k[:, None] + np.arange(-2, 3)[None, :], 1, None)
        et_all, _ = screen.expected_time(W, C, R, lam, ks)
        tau = W / k
        et, ef = (a[:, 0] for a in screen.expected_time(W, C, R, lam, k[:, None]))
        et_lo = et_all.min(axis=1)
        t0, t0_hi = R + W + ks.min(axis=1) * C, R + W + ks.max(axis=1) * C
        p0 = np.exp(-lam * (W + ks.max(axis=1) * C))
        full = last = W / k  # each segment's work; the fallback's bound reads them
        # coarse billing: the exact search may settle on any k, so bound over all of them
        coarse = np.maximum(gran, keys["minimum_h"].astype(float)) > costmodel.FINE_BILLING_H
        if coarse.any():
            k_max = np.minimum(100_000, np.maximum(1, np.ceil(W[coarse] / 1e-3)))
            et_lo[coarse] = screen.min_expected_time(W[coarse], C, R, lam[coarse])
            t0[coarse] = R + W[coarse] + C
            t0_hi[coarse] = R + W[coarse] + k_max * C
            p0[coarse] = np.exp(-lam[coarse] * (W[coarse] + k_max * C))
            full[coarse] = last[coarse] = np.nan  # the fallback's bound then stays the failure-free one
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
        et = R + (k - 1) * screen.segment_time(lam, tau + C, R) + screen.segment_time(lam, last + C, R)
        full = tau
        ef = (k - 1) * np.expm1(lam * (tau + C)) + np.expm1(lam * (last + C))
        et_lo, t0 = et, R + W + k * C
        t0_hi, p0 = t0, np.exp(-lam * (W + k * C))
    # full, last: each segment's work (the last may be shorter)
    return {"tau": tau, "et": et, "ef": ef, "et_lo": et_lo,
            "t0": t0, "t0_hi": t0_hi, "p0": p0, "full": full, "last": last, "full_count": k - 1,
            "full_busy": screen.segment_time(lam, full + C, R), "last_busy": screen.segment_time(lam, last + C, R)}


def _dominated(signature: np.ndarray, units: np.ndarray, lo: np.ndarray, dom_signature: np.ndarray,
               dom_units: np.ndarray, dom_hi: np.ndarray, steps: np.ndarray | None = None,
               dom_steps: np.ndarray | None = None) -> np.ndarray:
    """Rows whose cost lower bound exceeds the upper bound of some dominator with the same
    signature (number) drawing no more limited GPUs (a row never dominates itself: its hi >= its lo);
    with `steps`, only of a dominator booked for no more calendar steps (`dom_steps`, at most)."""
    out = np.zeros(len(lo), dtype=bool)
    if len(dom_hi) == 0 or len(lo) == 0:
        return out
    if steps is not None:  # per level of steps, the dominators up to it against the rows from it
        for level in np.unique(dom_steps):
            fast, slow = dom_steps <= level, steps >= level
            out[slow] |= _dominated(signature[slow], units[slow], lo[slow], dom_signature[fast], dom_units[fast],
                                    dom_hi[fast])
        return out
    for code in np.unique(dom_signature):
        mine = dom_signature == code
        order = np.argsort(dom_units[mine], kind="stable")
        levels, best = dom_units[mine][order], np.minimum.accumulate(dom_hi[mine][order])
        members = np.flatnonzero(signature == code)
        at = np.searchsorted(levels, units[members], side="right") - 1
        ok = at >= 0
        out[members[ok]] = best[at[ok]] < lo[members[ok]]
    return out


# ---------------------------------------------------------------- exact evaluation


# what-if reuse (planner/whatif.py): the exact cost model at price 1 depends only on the
# workload's cost settings, W, the item time and the timing key, never on a price, so its
# results are kept across calls. A sweep point that changes prices only re-maps prices; one
# that changes preemption rates recomputes just the timing keys whose λ moved. The deadline
# enters only P(T <= D), kept per deadline beside the rest.
_COST_SETTINGS = {"checkpoint", "restart_overhead", "interruption_tolerance"}
"""The Workload fields `cost_inputs` and `_auto` read besides the deadline (the rest reaches them through W)."""


@dataclass
class _Exact:
    """The cost model at price 1 with no deadline, and the result with P(T <= D) per deadline D met so far."""

    unit: costmodel.CostResult | None  # None for spot_fallback, whose every figure depends on the deadline
    inputs: costmodel.CandidateInputs
    tau: float
    by_deadline: dict = field(default_factory=dict)

    @functools.cached_property
    def plan(self):
        """segment_plan(inputs, tau): what its law is kept under."""
        return costmodel.segment_plan(self.inputs, self.tau)

    @functools.cached_property
    def spot_alone(self) -> costmodel.CostResult:
        """A fallback's spot twin at price 1, whatever the deadline (what `fallback.as_spot` prices it as)."""
        return costmodel.expected(self.inputs, self.tau)

    def at(self, budget: float, cache: CandidateCache) -> costmodel.CostResult | fallback.FallbackResult | None:
        if budget not in self.by_deadline:
            law = _law_of(self.plan, cache)  # spot alone's, for a fallback
            if self.unit is None and len(self.by_deadline) >= LAW_AFTER:
                law.compute()
            if self.unit is not None:
                self.by_deadline[budget] = replace(self.unit, p_deadline=law.p_met(budget, self.inputs.estimate_error),
                                                   p_deadline_on_estimate=law.p_le(budget))
            else:
                inputs = replace(self.inputs, time_budget_h=budget)
                self.by_deadline[budget] = fallback.unit(inputs, self.tau, FALLBACK_MIN_SWITCH, law) or (
                    fallback.as_spot(self.inputs, self.spot_alone, law.p_met(budget, self.inputs.estimate_error),
                                     law.p_le(budget))
                    if fallback.leaves_room(inputs, self.tau) else None)
        return self.by_deadline[budget]


def _evidence(exact: _Exact, row, budget: float, traces: tuple) -> spot_evidence.Replayed | str:
    """A spot or spot_fallback row replayed on the traces that speak for its offer, or why no offer of that many
    nodes is: no trace shows so many held at once. Asked of what a replay reads (the job's segments, restarts,
    deadline and policy, not its prices or fitted rates), so offers that differ only there replay once."""
    found, stand_in = spot_evidence.covering(traces, row.provider, row.instance_type, int(row.nodes))
    if not found:
        return (f"is a larger spot gang than any measured: no availability trace of {row.provider} shows "
                f"{int(row.nodes)} nodes held at once (the most: {spot_evidence.largest_gang(traces, row.provider)})")
    inputs = replace(exact.inputs, checkpoint_interval_h=exact.tau, time_budget_h=budget, spot_rate_per_node_h=0.0,
                     hw_failure_per_gpu_h=0.0, capacity_wait_h=0.0, capacity_wait_cv=1.0, gpus_per_node=1,
                     billing_granularity_h=1.0, billing_minimum_h=0.0)
    return spot_evidence.replayed(inputs, row.market, found, stand_in)


def _unheld(evidence: spot_evidence.Replayed | str, unit, q: float) -> str:
    """Why a priced spot or spot_fallback row is not offered on its measured record ('' when it is)."""
    if isinstance(evidence, str):
        return evidence
    if isinstance(unit, fallback.FallbackResult):
        return spot_evidence.verdict(evidence, q, sum(unit.spot.values()), sum(unit.on_demand.values()))
    return spot_evidence.verdict(evidence, q, unit.billed_node_h)


def wall_law(inputs: costmodel.CandidateInputs, tau: float | None, cache: CandidateCache) -> costmodel.WallLaw:
    """The law of T for these inputs, kept per segment plan (what it depends on): one grid answers every
    deadline a timing key meets (a quarter's runs each bring their own) and every quantile batch books."""
    return _law_of(costmodel.segment_plan(inputs, tau), cache)


def _law_of(plan, cache: CandidateCache) -> costmodel.WallLaw:
    found = cache.laws.get(plan)
    return found if found is not None else cache.keep(cache.laws, plan, costmodel.WallLaw(plan))


def _cost_fingerprint(workload: Workload, hw_rate: float, error: EstimateError) -> tuple:
    return workload.model_dump_json(include=_COST_SETTINGS), hw_rate, error


def _exact(workload: Workload, row, hw_rate: float, fingerprint: tuple, cache: CandidateCache) -> _Exact:
    """The cost model at price 1 without storage/egress (both added per row) or deadline, per timing key
    (`fingerprint`, `_cost_fingerprint`: the workload's cost settings, hardware failure rate, estimate error)."""
    shared = fingerprint + tuple(None if v != v else v for v in  # NaN never equals itself
                                 tuple(getattr(row, c) for c in TIMING_COLUMNS) + (row.work_h, row.item_h))
    if shared not in cache.exact:
        inputs = replace(cost_inputs(workload, work_h=row.work_h, nodes=int(row.nodes),
                                     gpus_per_node=int(row.gpus_per_node), lam_spot=float(row.lam_spot), price=1.0,
                                     granularity_h=row.granularity_h, minimum_h=row.minimum_h, hw_rate=hw_rate,
                                     checkpoint_interval_h=_fixed_interval(workload, row.work_h, row.item_h),
                                     capacity_wait_h=float(row.wait_h), capacity_wait_cv=float(row.wait_cv),
                                     error=fingerprint[2]),
                         time_budget_h=math.inf)
        tau = _auto_interval(inputs) if _auto(workload) else inputs.checkpoint_interval_h  # spot's own, for a fallback
        unit = None if row.fallback else costmodel.expected(inputs, tau)
        cache.keep(cache.exact, shared, _Exact(unit, inputs, tau))
    return cache.exact[shared]


def _auto_interval(inputs: costmodel.CandidateInputs) -> float:
    """`every: auto`: with billing finer than FINE_BILLING_H the quick search (exact E[T], the §5
    waste approximation) is the optimum to within 1e-6 of the cost; coarser billing gets the
    exact search, which also weighs the quick τ (the screen's upper bound is priced there)."""
    quick = costmodel.quick_interval(inputs)
    if max(inputs.billing_granularity_h, inputs.billing_minimum_h) <= costmodel.FINE_BILLING_H:
        return quick
    return costmodel.best_interval(inputs, candidates=[quick])  # never worse than the screen's upper bound


def _candidate_row(workload: Workload, catalog: Catalog, row, unit: costmodel.CostResult | fallback.FallbackResult,
                   memory_gib: float, precision: str | None, parallelism: str = "", spot_share: float = 0.0,
                   evidence: spot_evidence.Replayed | None = None) -> dict:
    """One candidate's table row; `spot_share` is ρ, the share of its spot failures that are preemption events;
    `evidence` its replays on measured availability, where it was held to them."""
    if row.fallback:
        parts = unit.parts(row.price, row.fallback_price)
    else:
        parts = {k: unit.breakdown[k] * row.price for k in PRICED_KEYS}
    parts["storage"] = row.storage_h * unit.wall_h
    parts["egress"] = row.egress
    cost = math.fsum(parts.values())
    events = (unit.spot_failures if row.fallback else unit.failures) * spot_share
    return {
        "workload": workload.name,
        "cid": f"{workload.name}|{row.key}|{row.market}|x{int(row.nodes)}",
        "offer_key": row.key, "provider": row.provider, "region": row.region, "instance_type": row.instance_type,
        "gpu": row.gpu, "gpu_family": row.gpu_family, "gpus_per_node": int(row.gpus_per_node),
        "nodes": int(row.nodes), "gpus": int(row.gpus), "market": row.market, "max_nodes": row.max_nodes,
        "price_per_node_h": float(row.price), "lam_spot": float(row.lam_spot), "capacity_wait_h": float(row.wait_h),
        "capacity_wait_cv": float(row.wait_cv),
        "fallback_price_per_node_h": float(row.fallback_price), "p_fallback": unit.p_switch if row.fallback else 0.0,
        "checkpoint_interval_h": unit.checkpoint_interval_h, "segments": unit.segments,
        "work_h": row.work_h, "wall_h": unit.wall_h, "failures": unit.failures, "billed_node_h": unit.billed_node_h,
        "preemption_events": events, "waiting_h": unit.waiting_h if row.fallback else events * float(row.wait_h),
        "rounding_waste_node_h": unit.rounding_waste_node_h, "p_deadline": unit.p_deadline,
        "p_deadline_on_estimate": unit.p_deadline_on_estimate,
        "cost_usd": cost, "cost_cents": to_cents(cost),
        "replayed_p_deadline": evidence.p_deadline if evidence else math.nan,
        "replayed_compute_usd": evidence.compute_usd(row.price, row.fallback_price) if evidence else math.nan,
        "replayed_traces": len(evidence.traces) if evidence else 0,
        "replayed_stand_in": bool(evidence and evidence.stand_in),
        **{f"usd_{k}": v for k, v in parts.items()},
        "storage_usd_per_h": row.storage_h, "memory_gib": memory_gib, "vram_gib": float(row.gpu_vram_gib),
        "billing_granularity_h": row.granularity_h, "billing_minimum_h": row.minimum_h,
        "precision": precision, "parallelism": parallelism,
    }


# ---------------------------------------------------------------- per workload


@dataclass(frozen=True)
class Calendar:
    """How a caller books candidates in whole steps of `step_h` (`planner batch`): `booked_h(record)`, the hours a
    candidate record is booked for, never less than its failure-free time."""

    step_h: float
    booked_h: Callable[[dict], float]

    def steps(self, hours):
        """Whole steps, 1 at least: what the calendar books for `hours` (a float or an array)."""
        return np.maximum(1, np.ceil(np.asarray(hours) / self.step_h - 1e-9))


def _signature_columns(workload: Workload, limits: Limits) -> list[str]:
    """What a candidate draws on besides cost and GPUs: which quotas cover it, which offer node
    limit, and (for grouped workloads) its provider or region. Candidates with different
    signatures can never stand in for each other, so dominance is checked within one."""
    columns = ["quota_keys", "capped_offer"]
    if any(workload.name in g for g in limits.same_provider):
        columns.append("provider")
    if any(workload.name in g for g in limits.same_region):
        columns.append("provider_region")
    return columns


def limit_keys(table, limits: Limits, offer_column: str) -> tuple[list[str], list[str], list[int]]:
    """Per row of `table` (a DataFrame, or columns as lists): the quotas that cover it (`key;key;`), its capped
    offer (and market, when node limits are per market; "" when uncapped), and the GPUs it draws from them
    (on lists: `planner batch` asks this of every run's few candidates). Worked out per distinct hardware, then
    mapped onto the rows: a workload has some 30,000 rows of a few hundred."""
    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(table)
    if frame.empty:
        return [], [], []
    hardware = ["provider", "gpu", "gpu_family"]
    quotas = tuple(sorted(limits.gpu_quotas))
    distinct = frame[hardware].drop_duplicates()
    keys = _covering(quotas, distinct)[frame.groupby(hardware, sort=False, dropna=False).ngroup().to_numpy()]
    offers = frame[offer_column].to_numpy(dtype=object)
    capped = (frame["max_nodes"].notna() | frame[offer_column].isin(list(limits.node_limits))).to_numpy()
    named = offers + "|" + frame["market"].to_numpy(dtype=object) if limits.node_limits_per_market else offers
    capped_offer = np.where(capped, named, "")
    units = np.where((keys != "") | capped, frame["gpus"].to_numpy(), 0)
    return keys.tolist(), capped_offer.tolist(), units.tolist()


_COVERING: dict[tuple, str] = {}
"""(quotas, provider, GPU, family) -> the quotas that cover it, as `_covering` found them (at most 4,096 kept)."""


def _covering(quotas: tuple[str, ...], hardware: pd.DataFrame) -> np.ndarray:
    """Per row of `hardware` (provider, gpu, gpu_family), which of `quotas` cover it, as `key;key;` (the rule is
    `quota_mask`'s), for every row not seen before at once."""
    rows = [(quotas, *h) for h in hardware.itertuples(index=False, name=None)]
    new = [i for i, row in enumerate(rows) if row not in _COVERING]
    if len(_COVERING) + len(new) > 4096:
        _COVERING.clear()
        new = list(range(len(rows)))
    if new:
        masks = [quota_mask(hardware.iloc[new], key).to_numpy() for key in quotas]
        for j, i in enumerate(new):
            _COVERING[rows[i]] = "".join(key + ";" for key, mask in zip(quotas, masks) if mask[j])
    return np.array([_COVERING[row] for row in rows], dtype=object)


def _pareto(frame: pd.DataFrame, signature: np.ndarray, units: np.ndarray) -> pd.DataFrame:
    """Keep, within each signature, the candidates on the (cost, quota GPUs) Pareto front.

    A dominated candidate costs no less and draws no fewer quota GPUs than another of the same
    workload with the same provider/region/offer-limit signature; wall time does not enter any
    constraint, so it only breaks ties (shorter first, then fewer nodes to run, then name). Removing such
    candidates never changes the optimum. `signature` and `units` (limited GPUs) come with the rows, so a
    what-if point does not derive them again."""
    cents, wall, nodes, cid = (frame[c].tolist() for c in ("cost_cents", "wall_h", "nodes", "cid"))
    order = sorted(range(len(cid)), key=lambda i: (cents[i], wall[i] != wall[i], wall[i] if wall[i] == wall[i] else 0,
                                                   nodes[i], cid[i]))  # as pandas sorts: NaN last
    keep, fewest = [], {}
    for i in order:
        if units[i] < fewest.get(signature[i], math.inf):  # every cheaper one before it draws more limited GPUs
            keep.append(i)
            fewest[signature[i]] = units[i]
    return frame.iloc[np.sort(np.array(keep, dtype=np.int64))]


_TWIN_COLUMNS = SHAPE_COLUMNS + ["market", "lam_spot", "wait_h", "wait_cv", "granularity_h", "minimum_h", "storage_h",
                                 "egress", "units"]


# what-if reuse (planner/whatif/sweep.py): the expanded rows depend on prices only through the
# `price`/`lam_spot` columns and the three price columns copied from the offer, so `generate`
# keeps them per (expansion inputs, limits, offers-without-prices), shared by every
# workload with those inputs, together with everything derived from them that no price touches
# (twin groups, signatures, physics per shape and workload physics) and the screening bounds per
# preemption state; a sweep point only maps its prices in (kept in the caller's CandidateCache).
PRICE_COLUMNS = ("on_demand_usd_h", "spot_usd_h", "spot_preemption_per_h")
_SCREENS_KEPT = 4  # preemption states kept per rows entry (a preemption sweep changes it every point)
_OFFER_ROW = "_offer_row"
_ROW_COLUMNS = SHAPE_COLUMNS + ["granularity_h", "minimum_h", "storage_h", "egress", "key", "market", "provider",
                                "region", "instance_type", "gpu_family", "gpus", "max_nodes", "wait_h", "wait_cv",
                                "correlation", "fallback"]
"""What `_exact` and `_candidate_row` read of a row, besides the point's price, λ and physics."""
_Row = namedtuple("_Row", _ROW_COLUMNS + ["price", "lam_spot", "work_h", "item_h", "fallback_price"])
_BASE_COLUMNS = set(_ROW_COLUMNS + TIMING_COLUMNS + _TWIN_COLUMNS + [
    "quota_keys", "capped_offer", "provider_region", "limited", _OFFER_ROW]) - {"lam_spot", *_PER_WORKLOAD}
"""The columns `_Markets` keeps of every (offer, market) row: no prices or λ, which each call maps in (`_prices`)."""


def offers_token(offers: pd.DataFrame) -> str:
    """A fingerprint of everything in `offers` except the prices and preemption rates (but
    including which prices exist), so frames that differ only by what-if multipliers share it."""
    rest = offers[[c for c in offers.columns if c not in PRICE_COLUMNS]].astype(str)
    exists = offers[[c for c in PRICE_COLUMNS if c in offers.columns]].notna()
    digest = hashlib.sha1(pd.util.hash_pandas_object(rest, index=True).to_numpy().tobytes())
    digest.update(pd.util.hash_pandas_object(exists, index=True).to_numpy().tobytes())
    digest.update(repr(list(offers.columns)).encode())
    return digest.hexdigest()


@dataclass
class _Rows:
    """One workload's expanded rows and what is derived from them without prices."""

    catalog: Catalog
    reason: str  # why there are none ('' when there are)
    considered: int
    columns: dict = field(default_factory=dict)  # _ROW_COLUMNS as arrays (strings as Python objects)
    offer_row: np.ndarray | None = None  # the offer's position in the offers table (None: no rows)
    spot: np.ndarray | None = None  # priced at spot: spot and spot_fallback rows
    fallback: np.ndarray | None = None  # spot_fallback rows, which also carry the on-demand price
    twin: np.ndarray | None = None  # twin group, before splitting by λ
    timing: np.ndarray | None = None  # timing key without λ
    signature: np.ndarray | None = None
    units: np.ndarray | None = None
    kind: np.ndarray | None = None  # (instance type, market) number: what runner-ups differ in (`_Kinds`)
    events_per_loss: np.ndarray | None = None  # spot events that touch the job per node loss (§3)
    key_rank: np.ndarray | None = None
    market_rank: np.ndarray | None = None
    shape: np.ndarray | None = None  # row -> its hardware shape's number
    shapes: list[Shape] = field(default_factory=list)  # by number
    twins: dict = field(default_factory=dict)  # digest of λ and fallback prices -> `_twin_groups`
    physics: dict = field(default_factory=dict)  # `_Physics.key` -> _Physics
    screens: dict = field(default_factory=dict)  # λ digest -> {(physics, cost settings, hw_rate) -> _Screen}

    @property
    def size(self) -> int:
        return 0 if self.offer_row is None else len(self.offer_row)


@dataclass
class _Screen:
    """Screening of one workload's rows at one preemption state (see `_screen`)."""

    code: np.ndarray  # row -> timing key number
    first: np.ndarray  # timing key number -> its first row
    bounds: dict[str, np.ndarray]  # `_screen_timings`' `_BOUNDS`, by timing key number (NaN: not yet screened)
    done: np.ndarray  # timing key number -> screened
    exact: dict = field(default_factory=dict)  # timing key number -> `_exact`


_BOUNDS = ("et", "ef", "et_lo", "t0", "t0_hi", "p0", "full", "last", "full_count", "full_busy", "last_busy")


_EXPANSION_FIELDS = {"allow", "forbid", "gpus", "data"}
"""The Workload fields `_build_rows` reads, besides its market rule and the GiB it stores."""


def _rows(workload: Workload, catalog: Catalog, offers: pd.DataFrame, limits: Limits, token: str | None,
          cache: CandidateCache) -> _Rows:
    """The workload's price-independent rows, kept per `offers_token` (built afresh without one) and shared
    by every workload with the same expansion inputs: offers allowed, GPU range, markets, storage, data,
    placement groups."""
    if token is None:
        return _build_rows(workload, catalog, offers, _all_markets(offers, catalog, limits), limits)
    scope = (token, repr(limits))
    every = cache.markets.get(scope)
    if every is None:
        every = cache.keep(cache.markets, scope, _all_markets(offers, catalog, limits))
    key = (*scope, _grouped(workload, limits), workload.model_dump_json(include=_EXPANSION_FIELDS),
           workload.interruption_tolerance == "none", bool(workload.time_budget), _stored_gib(workload, catalog))
    if key not in cache.rows:
        if sum(r.size for r in cache.rows.values()) >= cache.max_rows:
            cache.rows.clear()
        cache.rows[key] = _build_rows(workload, catalog, offers, every, limits)
    return cache.rows[key]


def _grouped(workload: Workload, limits: Limits) -> tuple[bool, bool]:
    """Whether the workload is in a same-provider and a same-region group (its signature columns)."""
    return (any(workload.name in g for g in limits.same_provider),
            any(workload.name in g for g in limits.same_region))


def _build_rows(workload: Workload, catalog: Catalog, offers: pd.DataFrame, every: _Markets, limits: Limits) -> _Rows:
    """The workload's (offer, market) rows of `every`, repeated once per node count it could run on, with
    storage, egress and the group numbers every call needs, worked out from the rows' codes so a call works
    on arrays."""
    allowed = offer_mask(catalog, workload.allow, workload.forbid, offers).to_numpy()
    if not allowed.any():
        return _Rows(catalog, "no offer in the scenario's catalogs matches its allow/forbid rules", 0)
    resumes = workload.interruption_tolerance != "none"  # cost-model §4: `none` cannot resume, so never spot
    open_market = {"on_demand": True, "spot": resumes,
                   "spot_fallback": resumes and bool(workload.time_budget)}  # §10: it acts on the slack before it
    markets = every.columns["market"]
    wanted = [m for m in _MARKETS if open_market[m] and workload.allows_market(m)]
    pick = np.flatnonzero(allowed[every.columns[_OFFER_ROW]] & np.isin(markets, wanted))
    ladders = [np.array(_node_counts(workload.gpus.min, workload.gpus.max, *combo), dtype=int)
               for combo in every.ladders]
    lengths = np.array([len(ladder) for ladder in ladders], dtype=np.int64)
    sizes = lengths[every.ladder[pick]]
    considered = int(sizes.sum())
    if not considered:
        why = ("no offer can host its GPU count range "
               f"{workload.gpus.min}-{workload.gpus.max} (node sizes, multi-node networking, node limits)")
        if workload.interruption_tolerance == "none" and offers["on_demand_usd_h"][allowed].isna().all():
            why = "interruption_tolerance none rules out spot, and no allowed offer has an on-demand price"
        return _Rows(catalog, why, 0)
    pick, sizes = pick[sizes > 0], sizes[sizes > 0]
    repeat = np.repeat(pick, sizes)  # each row's (offer, market) row in `every`
    firsts = np.cumsum(sizes) - sizes  # each (offer, market)'s first row
    starts = (np.cumsum(lengths) - lengths)[every.ladder[pick]]  # each ladder's place in their concatenation
    nodes = np.concatenate(ladders)[np.repeat(starts - firsts, sizes) + np.arange(considered)]
    columns = {c: every.columns[c][repeat] for c in _ROW_COLUMNS if c not in _PER_WORKLOAD}
    columns["nodes"], columns["gpus"] = nodes, nodes * columns["gpus_per_node"]
    provider = every.columns["provider"][pick]
    stored_gib = _stored_gib(workload, catalog)
    per_offer = {  # what depends on the (offer, market) and the workload
        "storage_h": pd.Series(provider).map({p: stored_gib * v.storage_usd_per_gib_month / HOURS_PER_MONTH
                                              for p, v in catalog.providers.items()}).to_numpy(float),
        "egress": _egress_usd(workload, catalog, provider, every.columns["region"][pick])}
    columns |= {c: np.repeat(v, sizes) for c, v in per_offer.items()}
    units = np.where(every.columns["limited"][repeat], columns["gpus"], 0)  # GPUs drawn from quotas or a capped offer
    codes: dict[str, np.ndarray] = {"units": pd.factorize(units)[0]}

    def code(column: str) -> np.ndarray:
        """The column's values as codes, worked out per (offer, market) where no node count enters."""
        if column not in codes:
            codes[column] = (pd.factorize(columns[column])[0] if column in _PER_NODE_COUNT else
                             np.repeat(pd.factorize(per_offer[column], use_na_sentinel=False)[0], sizes)
                             if column in per_offer else every.code(column)[repeat])
        return codes[column]

    def number(names: list[str]) -> np.ndarray:
        """Rows numbered by their values in `names` in order of first appearance (a groupby's `ngroup`),
        from the columns' codes rather than their strings."""
        number, size = np.zeros(considered, dtype=np.int64), 1
        for name in names:
            values = int(code(name).max()) + 1
            if size * values >= 2**62:  # renumber before the mixed radix overflows
                number = pd.factorize(number)[0]
                size = int(number.max()) + 1
            number, size = number * values + code(name), size * values
        return pd.factorize(number)[0]

    signature = _signature_columns(workload, limits)
    shape = number(SHAPE_COLUMNS)
    first = np.unique(shape, return_index=True)[1]
    return _Rows(catalog, "", considered, columns=columns, offer_row=every.columns[_OFFER_ROW][repeat],
                 spot=markets[repeat] != "on_demand", fallback=every.columns["fallback"][repeat].astype(bool),
                 twin=number([c for c in _TWIN_COLUMNS if c != "lam_spot"] + signature),
                 timing=number([c for c in TIMING_COLUMNS if c != "lam_spot"]), signature=number(signature),
                 kind=number(["instance_type", "market"]), units=units.astype(float),
                 events_per_loss=costmodel.events_per_loss(nodes, columns["correlation"].astype(float)),
                 key_rank=every.code("key", sort=True)[repeat], market_rank=every.code("market", sort=True)[repeat],
                 shape=shape, shapes=[Shape(*s) for s in zip(*(columns[c][first].tolist() for c in SHAPE_COLUMNS))])


def offer_prices(offers: pd.DataFrame) -> dict[str, np.ndarray]:
    """The offers' prices and preemption rates as float arrays (NaN where missing)."""
    return {c: offers[c].to_numpy(dtype=float, na_value=np.nan) for c in PRICE_COLUMNS}


def _prices(rows: _Rows, prices: dict[str, np.ndarray], stateless: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This call's price, spot preemption rate and fallback (on-demand) price per row (NaN but on
    spot_fallback rows), mapped in from its offers' `offer_prices`."""
    def column(name: str) -> np.ndarray:
        return prices[name][rows.offer_row]

    price = np.where(rows.spot, column("spot_usd_h"), column("on_demand_usd_h"))
    nodes = rows.columns["nodes"].astype(float)
    lam_node = np.nan_to_num(column("spot_preemption_per_h"), nan=0.0)
    events = lam_node * (nodes if stateless else rows.events_per_loss)  # costmodel.spot_event_rate
    lam = np.where(rows.spot, events / nodes, 0.0)  # preemption events per node-hour as the job sees them (§3, §4)
    return price, lam, np.where(rows.fallback, column("on_demand_usd_h"), np.nan)


def _twin_groups(rows: _Rows, split: np.ndarray, state: bytes) -> tuple[np.ndarray, np.ndarray]:
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


def _cheapest_twins(rows: _Rows, price: np.ndarray, lam: np.ndarray, fallback_price: np.ndarray) -> np.ndarray:
    """Of rows identical in everything the cost and the limits depend on but the price (the same
    instance in many regions, say), the positions of the cheapest (ties: the first offer key,
    then the first row). The others are dominated before any physics is computed. Twins share λ
    and, on spot_fallback rows, the on-demand price they fall back to."""
    split = lam + 1j * np.nan_to_num(fallback_price, nan=0.0)
    order, starts = _twin_groups(rows, split, hashlib.sha1(split.tobytes()).digest())
    ordered = price[order]
    cheapest = ordered == np.repeat(np.minimum.reduceat(ordered, starts), np.diff(np.r_[starts, len(order)]))
    hits = np.flatnonzero(cheapest)  # in group order, so each group's first hit is its pick
    group = np.searchsorted(starts, hits, side="right")
    return np.sort(order[hits[np.r_[True, group[1:] != group[:-1]]]])


def _screen(rows: _Rows, workload: Workload, physics: _Physics, lam: np.ndarray, state: bytes, fingerprint: tuple
            ) -> _Screen:
    """The closed-form bounds per timing key, kept per preemption state for every workload of the same
    physics and cost settings: a price multiplier never changes them, a preemption multiplier changes
    every spot key's λ. Deadlines do not enter them (each workload compares with its own). Keys are
    screened once a row needs them (`_screened`)."""
    if state not in rows.screens:
        if len(rows.screens) >= _SCREENS_KEPT:
            rows.screens.pop(next(iter(rows.screens)))
        rows.screens[state] = {}
    screens, key = rows.screens[state], (physics.key, fingerprint)
    if key not in screens:
        lam_code = pd.factorize(lam)[0]
        code = pd.factorize(rows.timing * (lam_code.max() + 1) + lam_code)[0]
        first = np.unique(code, return_index=True)[1]
        screens[key] = _Screen(code, first, {c: np.full(len(first), math.nan) for c in _BOUNDS},
                               np.zeros(len(first), dtype=bool))
    return screens[key]


def _screened(screen: _Screen, at: np.ndarray, rows: _Rows, workload: Workload, physics: _Physics, lam: np.ndarray,
              hw_rate: float) -> dict[str, np.ndarray]:
    """The screen's bounds of the rows `at`, whose shapes are estimated and fit, screening the keys not yet."""
    codes = screen.code[at]
    todo = np.unique(codes[~screen.done[codes]])
    if len(todo):
        first = screen.first[todo]
        keys = {c: rows.columns[c][first] for c in ("nodes", "gpus_per_node", "granularity_h", "minimum_h")}
        shape = rows.shape[first]
        bounds = _screen_timings(keys | {"lam_spot": lam[first], "work_h": physics.work_h[shape],
                                         "item_h": physics.item_h[shape]}, workload, hw_rate)
        for c in _BOUNDS:
            screen.bounds[c][todo] = bounds[c]
        screen.done[todo] = True
    return {c: v[codes] for c, v in screen.bounds.items()}


def _fallback_lo(spot: np.ndarray, on_demand: np.ndarray, nodes: np.ndarray, storage: np.ndarray,
                 egress: np.ndarray, bound: dict, R: float) -> np.ndarray:
    """A lower bound on a spot_fallback row's cost. Attempts at a segment on spot are independent and the
    switch comes only after one ends, so by Wald's identity each segment finished on spot costs its
    expected busy time there (the screen's `*_busy`, restarts included, capacity waits not), and each
    left to on-demand at least its work: whichever is cheaper, per segment (NaN work: the exact search
    may pick any cadence, so only the failure-free time bounds it)."""
    def segment(work: np.ndarray, busy: np.ndarray) -> np.ndarray:
        return np.minimum(spot * busy, on_demand * work)

    node_h = (np.minimum(spot, on_demand) * R + bound["full_count"] * segment(bound["full"], bound["full_busy"])
              + segment(bound["last"], bound["last_busy"]))
    failure_free = np.minimum(spot, on_demand) * nodes * bound["t0"]
    node_cost = np.where(np.isnan(node_h), failure_free, FALLBACK_BOUND_SLACK * nodes * node_h)
    return node_cost + storage * bound["t0"] + egress


def _cost_bounds(rows: _Rows, at: np.ndarray, bound: dict, price: np.ndarray, lam: np.ndarray,
                 fallback_price: np.ndarray, workload: Workload, hw_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form bounds lo <= exact cost <= hi of the rows `at`, from their screen's `bound`."""
    column = rows.columns
    p, nodes = price[at], column["nodes"][at]
    storage, egress = column["storage_h"][at].astype(float), column["egress"][at].astype(float)
    events = lam[at] * nodes  # preemption events per hour; the rest of the failures are hardware
    failures = events + column["gpus"][at] * hw_rate
    rho = np.divide(events, failures, out=np.zeros(len(at)), where=failures > 0)
    streams = nodes if workload.interruption_tolerance == "stateless" else np.ones(len(at))  # ef is one stream's
    gang = nodes / streams
    sessions = streams * (gang + (1 + rho * (gang - 1)) * bound["ef"])  # an event restarts every node, a failure one
    waste_hi = sessions * np.maximum(column["granularity_h"][at].astype(float), column["minimum_h"][at].astype(float))
    waits = bound["ef"] * rho * column["wait_h"][at].astype(float)  # capacity waits: wall time, storage only
    lo = (p * nodes + storage) * bound["et_lo"] + egress
    hi = (p * nodes + storage) * bound["et"] + p * waste_hi + storage * waits + egress
    falls_back = rows.fallback[at]
    if falls_back.any():
        lo[falls_back] = _fallback_lo(p, fallback_price[at], nodes, storage, egress, bound,
                                      workload.restart_overhead)[falls_back]
    return lo, hi


def _sure(bound: dict, budget: float, q: float, uncertain: np.ndarray, error: EstimateError) -> np.ndarray:
    """Rows certain to end on time, what beats others (`_dominated`): no failure with probability p0 and a
    failure-free time within the budget, whatever the estimate's error, with probability p0·P(ε·t0 <= D) >= q
    (`_booked_at_most` is what a calendar books them for); an `uncertain` row is never (a fallback, or a row its
    measured record or a risk preference may still rule out: `_uncertain`)."""
    if error.exact:
        return (bound["t0_hi"] <= budget) & (bound["p0"] >= q) & ~uncertain
    with np.errstate(divide="ignore", invalid="ignore"):
        met = bound["p0"] * error.cdf(budget / bound["t0_hi"])
    return (met >= q) & ~uncertain


def _booked_at_most(bound: dict, q: float, error: EstimateError) -> np.ndarray:
    """The hours a `_sure` row books at most: the D with p0·P(ε·t0_hi <= D) = q, which its law meets."""
    if error.exact:
        return bound["t0_hi"]
    share = np.minimum(q / np.maximum(bound["p0"], q), 1.0)
    return bound["t0_hi"] * np.array([error.factor(x) if x < 1 else math.inf for x in share])


def _reach(budget: float, q: float, error: EstimateError) -> float:
    """The longest failure-free time that can meet `budget` with probability q: budget over ε's q-quantile
    (a row's P(ε·T <= D) is at most P(ε·t0 <= D))."""
    return budget / error.factor(q)


def _held_to_traces(rows: "_Rows", at: np.ndarray, workload: Workload, scenario: Scenario) -> np.ndarray:
    """Which rows of `at` are offered only if their replays on measured availability keep their promise
    (`spot_evidence`): spot and spot_fallback rows, but for a stateless job, whose nodes are lost one by one
    where the replay can only treat them as one gang, and none under `defaults.spot_evidence: fitted`."""
    held = scenario.defaults.spot_evidence == "traces" and workload.interruption_tolerance != "stateless"
    return rows.spot[at] & held


def _uncertain(rows: "_Rows", at: np.ndarray, workload: Workload, scenario: Scenario) -> np.ndarray:
    """Which rows of `at` may not beat others before they are priced (`_sure`): fallbacks, rows held to their
    measured record (`_held_to_traces`), and spot rows under a risk preference, which may still drop them."""
    limited = _risk(workload, scenario) != Risk()
    return rows.fallback[at] | _held_to_traces(rows, at, workload, scenario) | (rows.spot[at] & limited)


def _risk(workload: Workload, scenario: Scenario) -> Risk:
    """The workload's risk preferences over the scenario's defaults."""
    return workload.risk.over(scenario.defaults.risk)


SAFETY = {"spot": 0, "spot_fallback": 1, "on_demand": 2}
"""How safe a market is from preemptions: a candidate's spot saving is measured against safer ones."""


def _too_risky(candidate: dict, risk: Risk, scores: tuple[PlacementScore, ...]) -> str:
    """Why a priced spot or spot_fallback candidate takes more risk than `risk` allows ('' when it does not):
    too many expected preemption events, or a region scored below `risk.min_placement_score` for its nodes."""
    if candidate["market"] == "on_demand":
        return ""
    cap, events = risk.max_expected_preemptions, candidate["preemption_events"]
    if cap is not None and events > cap:
        return f"expects {events:,.1f} preemption events, over risk.max_expected_preemptions ({cap:g})"
    least = risk.min_placement_score
    scored = placement_score(scores, candidate["provider"], candidate["region"], candidate["instance_type"],
                             candidate["nodes"]) if least is not None else None
    if scored is not None and scored.score < least:
        return (f"its spot placement score in {scored.region} is {scored.score} for {scored.nodes} node(s), under "
                f"risk.min_placement_score ({least})")
    return ""


def placement_score(scores: tuple[PlacementScore, ...], provider: str, region: str, instance_type: str,
                    nodes: int) -> PlacementScore | None:
    """The score that speaks for `nodes` nodes of an offer: its smallest scored capacity of at least `nodes`, else
    its largest (a smaller request is at least as likely granted, so a low score there rules a larger gang out
    too, where a high one says nothing of it); None where the offer is not scored (it is kept)."""
    own = sorted((s for s in scores if (s.provider, s.region, s.instance_type) == (provider, region, instance_type)),
                 key=lambda s: s.nodes)
    return next((s for s in own if s.nodes >= nodes), own[-1] if own else None)


def _saving_kept(out: list[dict], risk: Risk) -> list[int]:
    """The candidates kept under `risk.min_spot_saving`: those that cost at least that share less than the
    cheapest candidate of a safer market (`SAFETY`), or have none safer; all without it."""
    m = risk.min_spot_saving
    if not m:
        return list(range(len(out)))
    cheapest = {level: min((c["cost_usd"] for c in out if SAFETY[c["market"]] > level), default=math.inf)
                for level in set(SAFETY.values())}
    return [j for j, c in enumerate(out) if c["cost_usd"] <= (1 - m) * cheapest[SAFETY[c["market"]]]]


def _unbeaten(rows: _Rows, at: np.ndarray, physics: _Physics, screen: _Screen, workload: Workload,
              price: np.ndarray, lam: np.ndarray, fallback_price: np.ndarray, hw_rate: float, budget: float, q: float,
              calendar: Calendar | None, catalog: Catalog, cache: CandidateCache, scenario: Scenario) -> np.ndarray:
    """Which rows of `at` the screen keeps, estimating as few shapes as it takes to tell. A row's cost is at
    least its floor: its shape's floor on W run once with no failure, at the cheaper of its prices. A row whose
    floor is above what a sure row with the same limits costs at most, or whose floor misses the deadline, is
    beaten whatever its physics; the others' shapes are estimated cheapest floor first, in doubling batches,
    until no row is left unestimated. The rows kept are those the screen keeps with every shape estimated: a row
    beaten there by a row left unestimated is beaten by what beat that row's floor (lo <= hi, so it is
    transitive)."""
    shape, column = rows.shape[at], rows.columns
    t0 = workload.restart_overhead + physics.floor_h[shape]  # a floor on the failure-free time
    error = estimate_error(workload, scenario.defaults)
    stretch = error.factor(q)  # a booking is at least t0 times this: ε's q-quantile (`_reach`)
    open_ = (physics.floor_h[shape] < math.inf) & (t0 <= _reach(budget, q, error))
    falls_back = rows.fallback[at]
    uncertain = _uncertain(rows, at, workload, scenario)
    node_price = np.where(falls_back, np.fmin(price[at], fallback_price[at]) * min(1.0, FALLBACK_BOUND_SLACK),
                          price[at])
    lo = (((node_price * column["nodes"][at] + column["storage_h"][at].astype(float)) * t0
           + column["egress"][at].astype(float)) * FLOOR_MARGIN)
    fastest = calendar.steps(t0 * stretch) if calendar else t0
    signature, units = rows.signature[at], rows.units[at]
    known = np.zeros(len(at), dtype=bool)  # lo and fastest are the screen's
    sure = np.zeros(len(at), dtype=bool)  # known, and certain to end on time: what beats others (`_dominated`)
    hi, booked = np.full(len(at), math.inf), np.full(len(at), math.inf)  # the sure rows' hi and steps booked
    batch = FIRST_ESTIMATES
    while True:
        new = np.flatnonzero(open_ & ~known & physics.done[shape])
        if len(new):
            fits = physics.work_h[shape[new]] < math.inf
            open_[new[~fits]] = False
            new = new[fits]
            bound = _screened(screen, at[new], rows, workload, physics, lam, hw_rate)
            on_time = bound["t0"] <= _reach(budget, q, error)
            open_[new[~on_time]] = False
            new, bound = new[on_time], {c: v[on_time] for c, v in bound.items()}
            lo[new], hi[new] = _cost_bounds(rows, at[new], bound, price, lam, fallback_price, workload, hw_rate)
            fastest[new] = calendar.steps(bound["t0"] * stretch) if calendar else bound["t0"]
            known[new] = True
            sure[new] = _sure(bound, budget, q, uncertain[new], error)
            if calendar:
                booked[new] = calendar.steps(_booked_at_most(bound, q, error))
            rest, by = np.flatnonzero(open_), np.flatnonzero(sure)
            open_[rest[_dominated(signature[rest], units[rest], lo[rest], signature[by], units[by], hi[by],
                                  *((fastest[rest], booked[by]) if calendar else ()))]] = False
        pending = np.flatnonzero(open_ & ~physics.done[shape])
        if not len(pending):
            return open_
        physics.estimated(pd.unique(shape[pending[np.argsort(lo[pending], kind="stable")]])[:batch], rows, catalog,
                          cache)
        batch *= 2


def _spot_twins(rows: _Rows, at: np.ndarray) -> np.ndarray:
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


def _dearer_than_twin(twin: _Exact, row, budget: float, cache: CandidateCache) -> bool:
    """Whether the spot_fallback `row` costs at least a cent more than its spot twin for sure
    (`fallback.excess_over_spot`), so that the twin, a candidate with the same limits, leaves it off the front."""
    law = _law_of(twin.plan, cache)
    return fallback.excess_over_spot(law, budget, twin.unit, row.price, row.fallback_price, row.storage_h) >= 0.01


class _Kinds:
    """Which rows the runner-ups still need priced. Rows come cheapest bound first; a row is a runner-up only
    if it is its kind's cheapest, and its kind is among the `count` cheapest but the winner's. Neither holds
    once its kind, or `count` + 1 other kinds (one may be the winner's), have a candidate cheaper than its
    bound, which its exact cost is not below."""

    def __init__(self, count: int, kind: np.ndarray):
        self.count, self.kind, self.cheapest = count, kind, {}  # kind -> its cheapest cost so far

    def needed(self, i: int, bound: float) -> bool:
        if not self.count or self.cheapest.get(self.kind[i], math.inf) < bound:
            return False
        return sum(cost < bound for cost in self.cheapest.values()) <= self.count

    def priced(self, i: int, cost: float) -> None:
        self.cheapest[self.kind[i]] = min(cost, self.cheapest.get(self.kind[i], math.inf))


def candidate_records(workload: Workload, catalog: Catalog, scenario: Scenario, offers: pd.DataFrame,
                      limits: Limits, exhaustive: bool = False, offers_key: str | None = None,
                      prices: dict[str, np.ndarray] | None = None, cache: CandidateCache | None = None,
                      calendar: Calendar | None = None) -> tuple[list[dict], str, int]:
    """(evaluated feasible candidates, one dict each; reason if none; rows considered). Dicts, so a caller that
    keeps few of many (`planner batch`) makes one table at the end (`records_table`).

    Rows are screened with closed-form cost bounds (lo <= exact cost <= hi) and only those
    no other row provably beats get the exact cost model, cheapest bound first.
    `exhaustive` evaluates every row exactly (tests compare the two). `offers_key`
    (`offers_token(offers)`) lets repeated calls reuse the price-independent work, and `prices`
    (`offer_prices(offers)`) the offers' prices as arrays. With a `calendar` (`planner batch`) a row is
    beaten only by a candidate booked for no more steps than the row can take. No runner-ups are priced:
    what a calendar needs besides the cheapest are the faster rows, which stay.
    """
    return _workload_candidates(workload, catalog, scenario, offers, limits, exhaustive, offers_key,
                                offer_prices(offers) if prices is None else prices,
                                (cache or CandidateCache()).bind(catalog), 0, calendar)[:3]


def records_table(records: list[dict]) -> pd.DataFrame:
    """Candidate records as a table, one row each (empty without records)."""
    return pd.DataFrame({name: [r[name] for r in records] for name in records[0]}) if records else pd.DataFrame()


def _workload_candidates(workload: Workload, catalog: Catalog, scenario: Scenario, offers: pd.DataFrame,
                         limits: Limits, exhaustive: bool, offers_key: str | None, prices: dict[str, np.ndarray],
                         cache: CandidateCache, runner_ups: int, calendar: Calendar | None = None
                         ) -> tuple[list[dict], str, int, tuple[np.ndarray, np.ndarray] | None]:
    """`candidate_records` plus each candidate's signature number and limited GPUs, which the rows already
    carry, for `_pareto`; per-row work is on arrays, since a sweep repeats it at every point. Rows are priced
    cheapest bound first; one is skipped once a candidate priced beats it for sure, unless it could still be
    one of the `runner_ups` cheapest other kinds (`_Kinds`) the report lists. On a `calendar` a cheaper candidate
    beats a row only if it is booked for no more steps than the row's failure-free time takes (no booking is
    shorter): a dearer but faster row can still be what fits a schedule."""
    rows = _rows(workload, catalog, offers, limits, offers_key, cache)
    none: list[dict] = []
    if not rows.size:
        return none, rows.reason, rows.considered, None
    headroom, hw_rate = scenario.defaults.vram_headroom, scenario.defaults.hardware_failure_per_gpu_h
    q, budget = scenario.defaults.deadline_confidence, workload.time_budget or math.inf
    error = estimate_error(workload, scenario.defaults)
    price, lam, fallback_price = _prices(rows, prices, workload.interruption_tolerance == "stateless")
    state = hashlib.sha1(lam.tobytes()).digest()  # the preemption state: what screening depends on
    at = np.arange(len(price)) if exhaustive else _cheapest_twins(rows, price, lam, fallback_price)
    physics = _physics(rows, workload, catalog, headroom)
    fingerprint = _cost_fingerprint(workload, hw_rate, error)
    screen = _screen(rows, workload, physics, lam, state, fingerprint)
    # estimate only the shapes of rows that may be on the front (all when none may: the reasons read them)
    screened = False  # `at` is what the screen below keeps
    if not (exhaustive or runner_ups or physics.done[rows.shape[at]].all()):
        unbeaten = _unbeaten(rows, at, physics, screen, workload, price, lam, fallback_price, hw_rate, budget, q,
                             calendar, catalog, cache, scenario)
        if unbeaten.any():
            at, screened = at[unbeaten], True
    physics.estimated(rows.shape[at], rows, catalog, cache)
    work_h, item_h = physics.work_h[rows.shape], physics.item_h[rows.shape]
    fits = work_h[at] < math.inf
    if not fits.any():
        estimates = [physics.estimates[i] for i in pd.unique(rows.shape[at])]
        return none, _physics_reason(workload, estimates, budget), rows.considered, None
    at = at[fits]
    key = screen.code[at]
    bound = _screened(screen, at, rows, workload, physics, lam, hw_rate)
    column = rows.columns
    on_time = bound["t0"] <= _reach(budget, q, error)
    if not on_time.any():
        slow = pd.DataFrame({"t0": bound["t0"], "nodes": column["nodes"][at], "key": column["key"][at]})
        return none, _too_slow_reason(workload, slow, budget, q, error), rows.considered, None
    at, key, bound = at[on_time], key[on_time], {c: v[on_time] for c, v in bound.items()}
    nodes, falls_back = column["nodes"][at], rows.fallback[at]
    lo, hi = _cost_bounds(rows, at, bound, price, lam, fallback_price, workload, hw_rate)
    signature, units = rows.signature[at], rows.units[at]
    stretch = error.factor(q)  # the fewest steps it can be booked for: t0 times this (`_reach`)
    fastest = calendar.steps(bound["t0"] * stretch) if calendar else bound["t0"]
    front = np.ones(len(at), dtype=bool)  # not yet known to be beaten, so it may be on the Pareto front
    if not (exhaustive or screened):
        certain = _sure(bound, budget, q, _uncertain(rows, at, workload, scenario), error)
        booked = calendar.steps(_booked_at_most({c: v[certain] for c, v in bound.items()}, q, error)) if calendar \
            else None
        front &= ~_dominated(signature, units, lo, signature[certain], units[certain], hi[certain],
                             *((fastest, booked) if calendar else ()))
        if not runner_ups:  # nothing beaten is priced
            at, key, lo, nodes, signature, units, fastest, front = (
                a[front] for a in (at, key, lo, nodes, signature, units, fastest, front))
    twin = _spot_twins(rows, at)
    ties = (at, nodes, rows.market_rank[at], rows.key_rank[at])
    by_bound = np.argsort(np.lexsort((*ties, lo)))  # each row's place cheapest bound first, as the table lists them
    order = np.lexsort((*ties, np.where(twin >= 0, np.maximum(lo, lo[twin]), lo)))  # a fallback row after its twin
    at, key, lo, signature, units, fastest, front, twin, by_bound = (
        a[order] for a in (at, key, lo, signature, units, fastest, front, twin, by_bound))
    twin = np.where(twin >= 0, np.argsort(order)[twin], -1)  # positions in the new order
    columns = [rows.columns[c][at].tolist() for c in _ROW_COLUMNS]
    columns += [a[at].tolist() for a in (price, lam, work_h, item_h, fallback_price)]
    out, missed, chosen, runaway, unheld, risky = [], [], [], [], [], []
    spot_allowed = workload.allows_market("spot")  # then every fallback row's spot twin is a row too
    traces = spot_evidence.catalog_traces(catalog)
    held = _held_to_traces(rows, at, workload, scenario)
    risk = _risk(workload, scenario)
    # under a minimum saving a candidate beats only rows as risky as it, which its saving is no test of
    safety = np.array([SAFETY[m] for m in rows.columns["market"][at]]) if risk.min_spot_saving else None
    kinds = _Kinds(runner_ups, rows.kind[at])
    spot_priced: dict[int, int] = {}  # position of a spot candidate -> the calendar steps it is booked for
    for i, row in enumerate(map(_Row._make, zip(*columns))):
        if front[i] and twin[i] in spot_priced and safety is None:  # only screening keeps them
            t = twin[i]
            if signature[t] == signature[i] and units[t] <= units[i] and spot_priced[t] <= fastest[i]:
                front[i] = not _dearer_than_twin(screen.exact[key[t]], row, budget, cache)
        if not (front[i] or kinds.needed(i, lo[i])):
            continue
        exact = screen.exact.get(key[i])
        if exact is None:
            exact = screen.exact[key[i]] = _exact(workload, row, hw_rate, fingerprint, cache)
        unit = exact.at(budget, cache)
        if unit is None or row.fallback and unit.p_switch < FALLBACK_MIN_SWITCH and spot_allowed:
            continue  # a fallback that practically never switches is its spot twin, where that may be bought
        evidence = None  # its replays, where it is held to them and passes
        if unit.p_deadline < q:
            missed.append((row, unit))
        elif not unit.billed_node_h * np.fmax(row.price, row.fallback_price) <= MAX_CANDIDATE_USD:  # inf, NaN
            runaway.append(row)
        elif held[i] and (why := _unheld(evidence := _evidence(exact, row, budget, traces), unit, q)):
            unheld.append((row, why))
        else:
            est = physics.estimates[rows.shape[at[i]]]
            candidate = _candidate_row(workload, catalog, row, unit, est.memory.total, est.precision, layout_text(est),
                                       exact.inputs.spot_share, evidence)
            if why := _too_risky(candidate, risk, scenario.defaults.spot_placement_scores):
                risky.append((row, why))
                continue
            out.append(candidate)
            chosen.append(i)
            kinds.priced(i, candidate["cost_usd"])
            if not exhaustive:  # what it beats for sure is not on the front
                rest = slice(i + 1, None)  # `_dominated` by this one candidate, written out: it runs per candidate
                beaten = ((signature[rest] == signature[i]) & (units[rest] >= units[i])
                          & (lo[rest] > candidate["cost_usd"]))
                steps = calendar.steps(calendar.booked_h(candidate)) if calendar else 0
                if calendar:  # only by a candidate booked for no more steps
                    beaten &= fastest[rest] >= steps
                if safety is not None:
                    beaten &= safety[rest] <= safety[i]
                front[rest] &= ~beaten
                if row.market == "spot":
                    spot_priced[i] = steps
    kept = _saving_kept(out, risk)
    out, chosen = [out[j] for j in kept], [chosen[j] for j in kept]
    if not out:
        if risky and not missed:
            row, why = risky[0]
            return none, (f"every candidate takes more risk than the workload's risk: allows: the cheapest, {int(row.nodes)} x {row.key} "
                          f"({row.market}), {why}"), rows.considered, None
        if unheld and not missed:
            row, why = unheld[0]
            return none, (f"no candidate keeps its promise on measured spot availability: the cheapest, "
                          f"{int(row.nodes)} x {row.key} ({row.market}), {why}"), rows.considered, None
        if runaway and not missed:
            return none, (f"every candidate's expected cost is above ${MAX_CANDIDATE_USD:,.0f}: failures restart "
                          f"the work so often that it practically never finishes (checkpoint it, or give it fewer "
                          f"GPUs or hours)"), rows.considered, None
        return none, _deadline_reason(workload, missed, q), rows.considered, None
    in_bound_order = np.argsort(by_bound[chosen])  # the table lists candidates by bound, twins or not
    out, chosen = [out[j] for j in in_bound_order], np.array(chosen)[in_bound_order]
    return out, "", rows.considered, (signature[chosen], units[chosen])


def _physics_reason(workload: Workload, estimates: list[Estimate], budget: float) -> str:
    fitting = [e for e in estimates if e.fits]
    if not fitting:
        precision = [e for e in estimates if e.ruled_out_by == "precision"]
        if precision and len(precision) == len(estimates):
            return precision[0].reason
        short = [e for e in estimates if e.ruled_out_by == "vram"]
        if not short:  # no shape ran out of memory: what ruled them out, the most common first
            reasons = collections.Counter(e.reason for e in estimates).most_common()
            more = f" (and {len(reasons) - 1} other reasons on other shapes)" if len(reasons) > 1 else ""
            return f"no offered shape can run it: {reasons[0][0]}{more}"
        best = min(short, key=lambda e: e.memory.total * 1.0 - e.shape.vram_gib)
        largest = max(e.shape.vram_gib for e in estimates)
        return (f"no GPU has enough VRAM: even {best.shape.gpus} x {best.shape.gpu} {best.reason}"
                f" (largest GPU offered: {largest:.0f} GiB)")
    return sorted({e.reason for e in estimates if e.reason})[0]


def _too_slow_reason(workload: Workload, rows: pd.DataFrame, budget: float, q: float, error: EstimateError) -> str:
    fastest = rows.loc[rows["t0"].idxmin()]
    head = (f"every fitting candidate misses the time budget: the fastest, {int(fastest['nodes'])} x "
            f"{fastest['key']}, needs {fastest['t0']:.1f} h without any failure")
    if fastest["t0"] > budget:
        return f"{head} against a budget of {budget:.1f} h (short by {fastest['t0'] - budget:.1f} h)"
    return (f"{head}, and real runs take up to {error.factor(q):.2f}x the estimate at confidence {q:.0%} "
            f"(estimate_error, docs/cost-model.md §12), so it can promise {budget:.1f} h only if it needs at most "
            f"{_reach(budget, q, error):.1f} h")


def _deadline_reason(workload: Workload, missed, q: float) -> str:
    row, unit = max(missed, key=lambda m: (m[1].p_deadline, -m[1].wall_h))
    return (f"every fitting candidate misses the time budget at confidence {q:.0%}: the best, "
            f"{int(row.nodes)} x {row.key} ({row.market}), meets {workload.time_budget:.1f} h with probability "
            f"{unit.p_deadline:.1%} (expected {unit.wall_h:.1f} h)")


def generate(scenario: Scenario, catalog: Catalog, offers: pd.DataFrame | None = None,
             exhaustive: bool = False, progress=None, cache: CandidateCache | None = None,
             runner_ups: int = RUNNER_UPS, time_limit_s: float | None = None) -> CandidateSet:
    """All workloads' candidates; `offers` defaults to the catalog's with the scenario's overrides applied.
    `time_limit_s` bounds building the endpoints' options (`endpoint_options`), where many distinct ones add up.
    `progress(done, total)` is called after each workload (a progress bar); `cache` keeps the work for
    the caller's next call (a what-if point), else it lasts this call. `all` holds each workload's cheapest
    `runner_ups` kinds (instance type and market) besides its winner, as exhaustive pricing would find them,
    and what the screening could not rule off the Pareto front; 0 (nobody reads runner-ups) prices only that."""
    cache = (cache or CandidateCache()).bind(catalog)
    limits = limits_of(scenario)
    if offers is None:
        offers = apply_overrides(catalog.offers, scenario.overrides, catalog)
    token = offers_token(offers) if offers["key"].is_unique else None
    prices = offer_prices(offers)
    infeasible, considered = {}, 0
    classes: dict[tuple, int] = {}  # workloads identical but for their names are generated once
    results, members = [], []  # per class: (candidates, reason, rows, front, its first workload's name)
    for number, workload in enumerate(scenario.workloads):
        if progress:
            progress(number, len(scenario.workloads))
        if workload.serving:
            continue
        kind = (workload.model_dump_json(exclude={"name", "description"}), _grouped(workload, limits))
        if kind not in classes:
            classes[kind] = len(results)
            records, reason, count, limited = _workload_candidates(workload, catalog, scenario, offers, limits,
                                                                   exhaustive, token, prices, cache, runner_ups)
            frame = records_table(records)
            front = _pareto(frame, *limited) if limited is not None else frame
            results.append((frame, reason, count, front, workload.name))
        reason, count = results[classes[kind]][1:3]
        considered += count
        if reason:
            infeasible[workload.name] = reason
        else:
            members.append((classes[kind], workload.name))
    options, traffic, unserved = endpoint_options(scenario, catalog, offers, time_limit_s=time_limit_s)
    infeasible.update(unserved)
    return CandidateSet(_stacked(results, members, 0), _stacked(results, members, 3), infeasible, considered,
                        options, traffic)


def _stacked(results: list[tuple], members: list[tuple[int, str]], which: int) -> pd.DataFrame:
    """One table of every member's candidates (`which`: 0 all, 3 the pruned front), each a copy of its
    class's renamed to it: the candidate id is the workload's name and what follows it."""
    if not members:
        return pd.DataFrame()
    used = sorted({c for c, _ in members})
    frames = {c: results[c][which] for c in used}
    starts = dict(zip(used, np.cumsum([0] + [len(frames[c]) for c in used[:-1]])))
    stack = pd.concat([frames[c] for c in used], ignore_index=True)
    suffix = [cid[len(results[c][4]):] for c in used for cid in frames[c]["cid"]]
    at = np.concatenate([starts[c] + np.arange(len(frames[c])) for c, _ in members])
    names = [name for c, name in members for _ in range(len(frames[c]))]
    out = stack.take(at).reset_index(drop=True)
    out["workload"] = names
    out["cid"] = [name + suffix[i] for name, i in zip(names, at)]
    return out
