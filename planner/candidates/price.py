"""Pricing, the stage of candidate generation that calls the exact cost model: per timing key at price 1 and
no deadline, then per deadline, and a priced row's candidate record; what a spot row's replays on measured
availability say of it, and which rows the runner-ups still need priced.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from planner.candidates.cache import CandidateCache
from planner.candidates.expand import TIMING_COLUMNS
from planner.candidates.limits import to_cents
from planner.economics import (
    costmodel,
    fallback,
    segment_plans,
    spot_evidence,
    wall_time,
)
from planner.economics.candidate import CandidateInputs, CostResult
from planner.economics.estimate_error import EstimateError
from planner.economics.inputs import cost_inputs
from planner.load.catalog import Catalog
from planner.physics.storage import data_bound_share
from planner.schema.plan import PRICED_KEYS
from planner.schema.workload import Workload

LAW_AFTER = 8
"""A spot_fallback key met at this many deadlines gets spot alone's law on its grid (one FFT, ~2 ms) to tell
whether it rarely switches; before that Chernoff's bound (~0.2 ms) usually settles it (both give the same answer)."""
FALLBACK_MIN_SWITCH = 1e-3
"""A spot_fallback candidate that would switch in fewer runs than this is its spot twin, and is not offered
where the twin is; where spot alone is not allowed (`forbid: {markets: [spot]}`) it is priced as the twin
(`fallback.as_spot`). One with no room for spot before its switch point is none."""


def _fixed_interval(workload: Workload, work_h: float, item_h: float | None) -> float:
    """τ at the workload's fixed cadence: W when it cannot resume (or for `auto`, searched later),
    one item when stateless, else `checkpoint.every`."""
    if workload.interruption_tolerance == "none":
        return work_h
    if workload.interruption_tolerance == "stateless":
        return min(item_h if item_h and item_h == item_h else work_h, work_h)
    every = workload.checkpoint.every
    return work_h if every == "auto" else min(float(every), work_h)


def interval_is_auto(workload: Workload) -> bool:
    return (
        workload.interruption_tolerance == "checkpointed"
        and workload.checkpoint.every == "auto"
    )


# what-if reuse (planner/whatif/): the exact cost model at price 1 depends only on the
# workload's cost settings, W, the item time and the timing key, never on a price, so its
# results are kept across calls. A sweep point that changes prices only re-maps prices; one
# that changes preemption rates recomputes just the timing keys whose λ moved. The deadline
# enters only P(T <= D), kept per deadline beside the rest.
_COST_SETTINGS = {"checkpoint", "restart_overhead", "interruption_tolerance"}
"""The Workload fields `cost_inputs` and `interval_is_auto` read besides the deadline (the rest reaches them
through W)."""


@dataclass
class _Exact:
    """The cost model at price 1 with no deadline, and the result with P(T <= D) per deadline D met so far."""

    # None for spot_fallback, whose every figure depends on the deadline
    unit: CostResult | None
    inputs: CandidateInputs
    tau: float
    by_deadline: dict = field(default_factory=dict)

    @functools.cached_property
    def plan(self):
        """segment_plan(inputs, tau): what its law is kept under."""
        return segment_plans.segment_plan(self.inputs, self.tau)

    @functools.cached_property
    def spot_alone(self) -> CostResult:
        """A fallback's spot twin at price 1, whatever the deadline (what `fallback.as_spot` prices it as)."""
        return costmodel.expected(self.inputs, self.tau)

    def switches(self, budget: float, cache: CandidateCache) -> bool:
        """Whether a fallback priced at `budget` is the policy (`fallback.switches`), not spot alone or nothing:
        told before pricing, with spot alone's law kept."""
        return fallback.switches(
            replace(self.inputs, time_budget_h=budget),
            _law_of(self.plan, cache),
            FALLBACK_MIN_SWITCH,
        )

    def at(
        self, budget: float, cache: CandidateCache
    ) -> CostResult | fallback.FallbackResult | None:
        if budget not in self.by_deadline:
            law = _law_of(self.plan, cache)  # spot alone's, for a fallback
            if self.unit is None and len(self.by_deadline) >= LAW_AFTER:
                law.compute()
            if self.unit is not None:
                self.by_deadline[budget] = replace(
                    self.unit,
                    p_deadline=law.p_met(budget, self.inputs.estimate_error),
                    p_deadline_on_estimate=law.p_le(budget),
                )
            else:
                inputs = replace(self.inputs, time_budget_h=budget)
                self.by_deadline[budget] = fallback.unit(
                    inputs, self.tau, FALLBACK_MIN_SWITCH, law
                ) or (
                    fallback.as_spot(
                        self.inputs,
                        self.spot_alone,
                        law.p_met(budget, self.inputs.estimate_error),
                        law.p_le(budget),
                    )
                    if fallback.leaves_room(inputs, self.tau)
                    else None
                )
        return self.by_deadline[budget]


def replay_evidence(
    exact: _Exact, row, budget: float, traces: tuple
) -> spot_evidence.Replayed | str:
    """A spot or spot_fallback row replayed on the traces that speak for its offer, or why no offer of that many
    nodes is: no trace shows so many held at once. Asked of what a replay reads (the job's segments, restarts,
    deadline and policy, not its prices or fitted rates), so offers that differ only there replay once."""
    found, stand_in = spot_evidence.covering(
        traces, row.provider, row.instance_type, int(row.nodes)
    )
    if not found:
        return (
            f"is a larger spot gang than any measured: no availability trace of {row.provider} shows "
            f"{int(row.nodes)} nodes held at once (the most: {spot_evidence.largest_gang(traces, row.provider)})"
        )
    inputs = replace(
        exact.inputs,
        checkpoint_interval_h=exact.tau,
        time_budget_h=budget,
        spot_rate_per_node_h=0.0,
        hw_failure_per_gpu_h=0.0,
        capacity_wait_h=0.0,
        capacity_wait_cv=1.0,
        gpus_per_node=1,
        billing_granularity_h=1.0,
        billing_minimum_h=0.0,
    )
    return spot_evidence.replayed(inputs, row.market, found, stand_in)


def refused_unpriced(
    exact: _Exact,
    evidence: spot_evidence.Replayed | str,
    budget: float,
    q: float,
    cache: CandidateCache,
    fallback_row: bool = True,
) -> bool:
    """Whether a held spot or spot_fallback row's replays turn it down whatever it would be priced at, so that it
    need not be priced (its FFTs take milliseconds, its replays one): no trace holds its gang, its replays miss
    the deadline, or a fallback's show more on-demand node-hours than it could be fitted
    (`fallback.on_demand_at_most`, by Chernoff's bound first, then by spot alone's law, which pricing would
    compute anyway). Spot alone is held on its spot node-hours too, known only once priced."""
    if isinstance(evidence, str):
        return True
    if not fallback_row:
        return spot_evidence.refuses(evidence, q)
    inputs, law = (
        replace(exact.inputs, time_budget_h=budget),
        _law_of(exact.plan, cache),
    )
    if spot_evidence.refuses(evidence, q, fallback.on_demand_at_most(inputs, law)):
        return True
    if law.ready:
        return False
    law.compute()
    return spot_evidence.refuses(evidence, q, fallback.on_demand_at_most(inputs, law))


def why_unheld(evidence: spot_evidence.Replayed | str, unit, q: float) -> str:
    """Why a priced spot or spot_fallback row is not offered on its measured record ('' when it is)."""
    if isinstance(evidence, str):
        return evidence
    if isinstance(unit, fallback.FallbackResult):
        return spot_evidence.verdict(
            evidence, q, sum(unit.spot.values()), sum(unit.on_demand.values())
        )
    return spot_evidence.verdict(evidence, q, unit.billed_node_h)


def wall_law(
    inputs: CandidateInputs, tau: float | None, cache: CandidateCache
) -> wall_time.WallLaw:
    """The law of T for these inputs, kept per segment plan (what it depends on): one grid answers every
    deadline a timing key meets (a quarter's runs each bring their own) and every quantile batch books."""
    return _law_of(segment_plans.segment_plan(inputs, tau), cache)


def _law_of(plan, cache: CandidateCache) -> wall_time.WallLaw:
    found = cache.laws.get(plan)
    return (
        found
        if found is not None
        else cache.keep(cache.laws, plan, wall_time.WallLaw(plan))
    )


def cost_fingerprint(workload: Workload, hw_rate: float, error: EstimateError) -> tuple:
    return workload.model_dump_json(include=_COST_SETTINGS), hw_rate, error


def exact_of(
    workload: Workload, row, hw_rate: float, fingerprint: tuple, cache: CandidateCache
) -> _Exact:
    """The cost model at price 1 without storage/egress (both added per row) or deadline, per timing key
    (`fingerprint`, `cost_fingerprint`: the workload's cost settings, hardware failure rate, estimate error)."""
    shared = fingerprint + tuple(
        None if v != v else v
        for v in tuple(  # NaN never equals itself
            getattr(row, c) for c in TIMING_COLUMNS
        )
        + (row.work_h, row.item_h)
    )
    if shared not in cache.exact:
        inputs = replace(
            cost_inputs(
                workload,
                work_h=row.work_h,
                nodes=int(row.nodes),
                gpus_per_node=int(row.gpus_per_node),
                spot_rate_per_node_h=float(row.spot_rate_per_node_h),
                price=1.0,
                granularity_h=row.granularity_h,
                minimum_h=row.minimum_h,
                hw_rate=hw_rate,
                checkpoint_interval_h=_fixed_interval(workload, row.work_h, row.item_h),
                checkpoint_write_h=float(row.checkpoint_h),
                restart_h=float(row.restart_h),
                capacity_wait_h=float(row.wait_h),
                capacity_wait_cv=float(row.wait_cv),
                error=fingerprint[2],
            ),
            time_budget_h=math.inf,
        )
        # spot's own, for a fallback
        tau = (
            _auto_interval(inputs)
            if interval_is_auto(workload)
            else inputs.checkpoint_interval_h
        )
        unit = None if row.fallback else costmodel.expected(inputs, tau)
        cache.keep(cache.exact, shared, _Exact(unit, inputs, tau))
    return cache.exact[shared]


def _auto_interval(inputs: CandidateInputs) -> float:
    """`every: auto`: with billing finer than FINE_BILLING_H the quick search (exact E[T], the §5
    waste approximation) is the optimum to within 1e-6 of the cost; coarser billing gets the
    exact search, which also weighs the quick τ (the screen's upper bound is priced there)."""
    quick = costmodel.quick_interval(inputs)
    if (
        max(inputs.billing_granularity_h, inputs.billing_minimum_h)
        <= costmodel.FINE_BILLING_H
    ):
        return quick
    # never worse than the screen's upper bound
    return costmodel.best_interval(inputs, candidates=[quick])


def candidate_row(
    workload: Workload,
    catalog: Catalog,
    row,
    unit: CostResult | fallback.FallbackResult,
    memory_gib: float,
    precision: str | None,
    parallelism: str = "",
    spot_share: float = 0.0,
    evidence: spot_evidence.Replayed | None = None,
) -> dict:
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
        "cid": f"{workload.name}|{row.key}|{row.market}|x{int(row.nodes)}|{row.storage}",
        "offer_key": row.key,
        "provider": row.provider,
        "region": row.region,
        "instance_type": row.instance_type,
        "gpu": row.gpu,
        "gpu_family": row.gpu_family,
        "gpus_per_node": int(row.gpus_per_node),
        "nodes": int(row.nodes),
        "gpus": int(row.gpus),
        "market": row.market,
        "purchase": "",  # a purchase option's name (`candidates.purchase`)
        "max_nodes": row.max_nodes,
        "price_per_node_h": float(row.price),
        "spot_rate_per_node_h": float(row.spot_rate_per_node_h),
        "capacity_wait_h": float(row.wait_h),
        "capacity_wait_cv": float(row.wait_cv),
        "fallback_price_per_node_h": float(row.fallback_price),
        "p_fallback": unit.p_switch if row.fallback else 0.0,
        "checkpoint_interval_h": unit.checkpoint_interval_h,
        "segments": unit.segments,
        "work_h": row.work_h,
        "storage": row.storage,
        "storage_class": row.storage_class,
        "storage_persistent": bool(row.persistent),
        "storage_read_gbs": float(row.read_gbs),
        "storage_write_gbs": float(row.write_gbs),
        "storage_provisioned_gib": float(row.provisioned_gib),
        "checkpoint_write_h": float(row.checkpoint_h),
        "restart_h": float(row.restart_h),
        "restore_h": float(row.restore_h),
        "stage_h": float(row.stage_h),
        "load_h": float(row.load_h),
        "data_read_h": float(row.read_h),
        "data_bound_share": data_bound_share(row.compute_h, float(row.read_h)),
        "wall_h": unit.wall_h,
        "failures": unit.failures,
        "billed_node_h": unit.billed_node_h,
        "preemption_events": events,
        "waiting_h": unit.waiting_h if row.fallback else events * float(row.wait_h),
        "rounding_waste_node_h": unit.rounding_waste_node_h,
        "p_deadline": unit.p_deadline,
        "p_deadline_on_estimate": unit.p_deadline_on_estimate,
        "cost_usd": cost,
        "cost_cents": to_cents(cost),
        "replayed_p_deadline": evidence.p_deadline if evidence else math.nan,
        "replayed_compute_usd": evidence.compute_usd(row.price, row.fallback_price)
        if evidence
        else math.nan,
        "replayed_traces": len(evidence.traces) if evidence else 0,
        "replayed_stand_in": bool(evidence and evidence.stand_in),
        **{f"usd_{k}": v for k, v in parts.items()},
        "storage_usd_per_h": row.storage_h,
        "memory_gib": memory_gib,
        "vram_gib": float(row.gpu_vram_gib),
        "billing_granularity_h": row.granularity_h,
        "billing_minimum_h": row.minimum_h,
        "precision": precision,
        "parallelism": parallelism,
    }


def dearer_than_twin(twin: _Exact, row, budget: float, cache: CandidateCache) -> bool:
    """Whether the spot_fallback `row` costs at least a cent more than its spot twin for sure
    (`fallback.excess_over_spot`), so that the twin, a candidate with the same limits, leaves it off the front."""
    law = _law_of(twin.plan, cache)
    return (
        fallback.excess_over_spot(
            law, budget, twin.unit, row.price, row.fallback_price, row.storage_h
        )
        >= 0.01
    )


class Kinds:
    """Which rows the runner-ups still need priced. Rows come cheapest bound first; a row is a runner-up only
    if it is its kind's cheapest, and its kind is among the `count` cheapest but the winner's. Neither holds
    once its kind, or `count` + 1 other kinds (one may be the winner's), have a candidate cheaper than its
    bound, which its exact cost is not below."""

    def __init__(self, count: int, kind: np.ndarray):
        self.count, self.kind, self.cheapest = (
            count,
            kind,
            {},
        )  # kind -> its cheapest cost so far

    def needed(self, i: int, bound: float) -> bool:
        if not self.count or self.cheapest.get(self.kind[i], math.inf) < bound:
            return False
        return sum(cost < bound for cost in self.cheapest.values()) <= self.count

    def priced(self, i: int, cost: float) -> None:
        self.cheapest[self.kind[i]] = min(
            cost, self.cheapest.get(self.kind[i], math.inf)
        )
