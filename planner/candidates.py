"""Candidate generation: every feasible (offer, node count, market, checkpoint interval) per
workload, with its expected cost from the cost model, then pruning of dominated ones.

The output is a pandas table the CP-SAT model reads (`solver.py`); nothing here imports
OR-Tools. Work is shared where the physics is shared: W is computed once per hardware
shape, and the cost model once per *timing key* (shape, nodes, market, preemption rate,
billing rules); offers in twenty regions at twenty prices reuse it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import costmodel
from .catalog import Catalog, offers_for
from .domain import Override, Scenario, Workload
from .estimate import Estimate, Shape, checkpoint_size_gib, estimate
from .solver import COST_RESOLUTION_USD, Limits

HOURS_PER_MONTH = 730.0
INTER_REGION_USD_PER_GIB = 0.02
"""Moving data between regions of one provider (AWS/GCP list ~0.01-0.02 USD/GB); a stated default."""
NODE_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
"""Node counts considered between a workload's bounds (plus the bounds): dense where it matters."""

BREAKDOWN = costmodel.BREAKDOWN_KEYS


@dataclass
class CandidateSet:
    """Evaluated candidates (`all`), what the solver sees (`pruned`), and why workloads failed."""

    all: pd.DataFrame
    pruned: pd.DataFrame
    infeasible: dict[str, str] = field(default_factory=dict)
    considered: int = 0  # (offer, nodes, market) rows before any cost evaluation


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
        if spot == on_demand == preempt == 1.0:
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


def expand(offers: pd.DataFrame, workload: Workload, limits: Limits) -> pd.DataFrame:
    """One row per (offer, market, node count) the workload could use, before any physics."""
    markets = [offers[offers["on_demand_usd_h"].notna()].assign(market="on_demand", price=lambda f: f["on_demand_usd_h"],
                                                                 lam_spot=0.0)]
    if workload.interruption_tolerance != "none":  # COST-MODEL §4: `none` cannot resume, so never spot
        spot = offers[offers["spot_usd_h"].notna()]
        markets.append(spot.assign(market="spot", price=spot["spot_usd_h"],
                                   lam_spot=spot["spot_preemption_per_h"].fillna(0.0)))
    rows = pd.concat(markets, ignore_index=True)
    if rows.empty:
        return rows.assign(nodes=pd.Series(dtype=int))
    caps = rows["max_nodes"].astype(float).fillna(math.inf)
    scenario_caps = rows["key"].map(limits.node_limits).astype(float).fillna(math.inf)
    caps = np.minimum(caps, scenario_caps)
    counts = [_node_counts(workload.gpus.min, workload.gpus.max, int(g), inter != "none", cap)
              for g, inter, cap in zip(rows["gpus_per_node"], rows["inter_node"], caps)]
    repeat = np.array([len(c) for c in counts])
    expanded = rows.loc[rows.index.repeat(repeat)].reset_index(drop=True)
    expanded["nodes"] = np.concatenate([np.array(c, dtype=int) for c in counts]) if repeat.sum() else []
    expanded["gpus"] = expanded["nodes"] * expanded["gpus_per_node"]
    return expanded


# ---------------------------------------------------------------- evaluation


@dataclass
class _WorkloadContext:
    workload: Workload
    catalog: Catalog
    scenario: Scenario
    checkpoint_gib: float
    estimates: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    def estimate(self, shape: Shape) -> Estimate:
        if shape not in self.estimates:
            self.estimates[shape] = estimate(self.workload, self.catalog, shape, self.scenario.defaults.vram_headroom)
        return self.estimates[shape]


def _shape(row) -> Shape:
    return Shape(row.gpu, int(row.gpus_per_node), int(row.nodes), float(row.gpu_vram_gib), row.intra_node,
                 float(row.intra_node_gbs), row.inter_node, float(row.inter_node_gbps))


def cost_inputs(workload: Workload, est: Estimate, *, nodes: int, gpus_per_node: int, lam_spot: float, price: float,
                granularity_h: float, minimum_h: float, hw_rate: float, storage_usd_per_h: float = 0.0,
                egress_usd: float = 0.0) -> costmodel.CandidateInputs:
    """The cost model's inputs for one candidate (τ left to `interval_for`)."""
    tolerance = workload.interruption_tolerance
    checkpoint_h = 0.0 if tolerance == "stateless" else workload.checkpoint.write_time
    return costmodel.CandidateInputs(
        work_h=est.work_h, checkpoint_write_h=checkpoint_h, restart_h=workload.restart_overhead, nodes=nodes,
        gpus_per_node=gpus_per_node, spot_rate_per_node_h=lam_spot, hw_failure_per_gpu_h=hw_rate,
        price_per_node_h=price, billing_granularity_h=granularity_h, billing_minimum_h=minimum_h,
        interruption_tolerance=tolerance, checkpoint_interval_h=_fixed_interval(workload, est),
        time_budget_h=workload.time_budget or math.inf, storage_usd_per_h=storage_usd_per_h, egress_usd=egress_usd)


def _fixed_interval(workload: Workload, est: Estimate) -> float:
    if workload.interruption_tolerance == "none":
        return est.work_h
    if workload.interruption_tolerance == "stateless":
        return min(est.item_h or est.work_h, est.work_h)
    every = workload.checkpoint.every
    return est.work_h if every == "auto" else min(float(every), est.work_h)


def interval_for(workload: Workload, inputs: costmodel.CandidateInputs) -> float:
    """τ: the workload's cadence, or for `every: auto` the cost-minimising one (COST-MODEL §4)."""
    if workload.interruption_tolerance == "checkpointed" and workload.checkpoint.every == "auto":
        return costmodel.best_interval(inputs)
    return inputs.checkpoint_interval_h


def _storage_usd_per_h(workload: Workload, provider, checkpoint_gib: float) -> float:
    kept = checkpoint_gib * workload.checkpoint.keep if workload.interruption_tolerance == "checkpointed" else 0.0
    return (kept + workload.data.size) * provider.storage_usd_per_gib_month / HOURS_PER_MONTH


def _egress_usd(workload: Workload, catalog: Catalog, provider: str, region: str) -> float:
    """Moving the data set from where it lives to the candidate (charged by the source provider)."""
    if not workload.data.location or workload.data.size == 0:
        return 0.0
    home, _, home_region = workload.data.location.partition("/")
    if home != provider:
        return workload.data.size * catalog.providers[home].egress_usd_per_gib
    if home_region and home_region != region:
        return workload.data.size * INTER_REGION_USD_PER_GIB
    return 0.0


def _timing(ctx: _WorkloadContext, row, est: Estimate) -> costmodel.CostResult:
    """Cost-model result at price 1 and no storage/egress, cached per timing key."""
    provider = ctx.catalog.providers[row.provider]
    key = (row.gpu, row.gpus_per_node, row.nodes, row.gpu_vram_gib, row.intra_node, row.intra_node_gbs,
           row.inter_node, row.inter_node_gbps, row.lam_spot, provider.billing_granularity_h, provider.billing_minimum_h)
    if key not in ctx.timings:
        inputs = cost_inputs(ctx.workload, est, nodes=int(row.nodes), gpus_per_node=int(row.gpus_per_node),
                             lam_spot=float(row.lam_spot), price=1.0, granularity_h=provider.billing_granularity_h,
                             minimum_h=provider.billing_minimum_h,
                             hw_rate=ctx.scenario.defaults.hardware_failure_per_gpu_h)
        tau = interval_for(ctx.workload, inputs)
        ctx.timings[key] = costmodel.expected(inputs, tau)
    return ctx.timings[key]


def _candidate_row(ctx: _WorkloadContext, row, est: Estimate, unit: costmodel.CostResult) -> dict:
    provider = ctx.catalog.providers[row.provider]
    storage_h = _storage_usd_per_h(ctx.workload, provider, ctx.checkpoint_gib)
    parts = {k: unit.breakdown[k] * row.price for k in BREAKDOWN if k not in ("storage", "egress")}
    parts["storage"] = storage_h * unit.wall_h
    parts["egress"] = _egress_usd(ctx.workload, ctx.catalog, row.provider, row.region)
    cost = math.fsum(parts.values())
    workload = ctx.workload
    return {
        "workload": workload.name,
        "cid": f"{workload.name}|{row.key}|{row.market}|x{int(row.nodes)}",
        "offer_key": row.key, "provider": row.provider, "region": row.region, "instance_type": row.instance_type,
        "gpu": row.gpu, "gpu_family": ctx.catalog.gpus[row.gpu].family, "gpus_per_node": int(row.gpus_per_node),
        "nodes": int(row.nodes), "gpus": int(row.gpus), "market": row.market, "max_nodes": row.max_nodes,
        "price_per_node_h": float(row.price), "lam_spot": float(row.lam_spot),
        "checkpoint_interval_h": unit.checkpoint_interval_h, "segments": unit.segments,
        "work_h": est.work_h, "wall_h": unit.wall_h, "failures": unit.failures, "billed_node_h": unit.billed_node_h,
        "rounding_waste_node_h": unit.rounding_waste_node_h, "p_deadline": unit.p_deadline,
        "cost_usd": cost, "cost_cents": int(round(cost / COST_RESOLUTION_USD)),
        **{f"usd_{k}": v for k, v in parts.items()},
        "storage_usd_per_h": storage_h, "memory_gib": est.memory.total, "vram_gib": float(row.gpu_vram_gib),
        "billing_granularity_h": provider.billing_granularity_h, "billing_minimum_h": provider.billing_minimum_h,
        "precision": est.precision, "tensor_parallel": est.tensor_parallel,
    }


# ---------------------------------------------------------------- per workload


def _signature_columns(workload: Workload, limits: Limits) -> list[str]:
    """The shared resources a candidate draws on besides cost and GPUs: candidates that differ in
    these can never stand in for each other, so dominance is only checked within equal signatures."""
    columns = []
    if limits.gpu_quotas or any(workload.name in g for g in limits.same_provider):
        columns.append("provider")
    if any(workload.name in g for g in limits.same_region):
        columns.append("provider_region")
    columns.append("capped_offer")
    return columns


def _quota_gpus(frame: pd.DataFrame, limits: Limits) -> pd.Series:
    """GPUs a candidate draws from quotas (0 when no quota covers it)."""
    covered = pd.Series(False, index=frame.index)
    for key in limits.gpu_quotas:
        provider, _, family = key.partition("/")
        mask = frame["provider"] == provider
        if family:
            mask &= frame["gpu_family"].str.lower() == family.lower()
        covered |= mask
    return frame["gpus"].where(covered, 0)


def prune_dominated(frame: pd.DataFrame, limits: Limits, workload: Workload) -> pd.DataFrame:
    """Keep, within each signature, the candidates on the (cost, quota GPUs) Pareto front.

    A dominated candidate costs no less and draws no fewer quota GPUs than another of the same
    workload with the same provider/region/offer-limit signature; wall time does not enter any
    constraint, so it only breaks ties (shorter first, then name). Removing such candidates
    never changes the optimum.
    """
    if frame.empty:
        return frame
    frame = frame.assign(
        provider_region=frame["provider"] + "/" + frame["region"],
        capped_offer=np.where(frame["max_nodes"].notna() | frame["offer_key"].isin(limits.node_limits),
                              frame["offer_key"] + ("|" + frame["market"] if limits.node_limits_per_market else ""), ""),
        quota_gpus=_quota_gpus(frame, limits))
    keep = []
    for _, group in frame.sort_values(["cost_cents", "wall_h", "cid"], kind="stable").groupby(
            _signature_columns(workload, limits), sort=False):
        best_gpus = math.inf
        for index, gpus in zip(group.index, group["quota_gpus"]):
            if gpus < best_gpus:  # cheaper ones before it all draw more quota GPUs
                keep.append(index)
                best_gpus = gpus
    return frame.loc[sorted(keep)].drop(columns=["provider_region", "capped_offer", "quota_gpus"])


def workload_candidates(workload: Workload, catalog: Catalog, scenario: Scenario, offers: pd.DataFrame,
                        limits: Limits, exhaustive: bool = False) -> tuple[pd.DataFrame, str, int]:
    """(evaluated feasible candidates, reason if none, rows considered).

    `exhaustive` evaluates every row instead of skipping those whose lower bound already
    loses to an evaluated candidate of the same signature (tests compare the two).
    """
    allowed = offers_for(catalog, workload.allow, workload.forbid, offers)
    if allowed.empty:
        return pd.DataFrame(), "no offer in the scenario's catalogs matches its allow/forbid rules", 0
    rows = expand(allowed, workload, limits)
    if rows.empty:
        why = ("no offer can host its GPU count range "
               f"{workload.gpus.min}-{workload.gpus.max} (node sizes, multi-node networking, node limits)")
        if workload.interruption_tolerance == "none" and allowed["on_demand_usd_h"].isna().all():
            why = "interruption_tolerance none rules out spot, and no allowed offer has an on-demand price"
        return pd.DataFrame(), why, 0
    ctx = _WorkloadContext(workload, catalog, scenario, checkpoint_size_gib(workload, catalog))
    q = scenario.defaults.deadline_confidence
    budget = workload.time_budget or math.inf
    # Physics per shape, then a cheap lower bound: compute + startup at the row's price.
    estimates = [ctx.estimate(_shape(r)) for r in rows.itertuples(index=False)]
    rows["work_h"] = [e.work_h for e in estimates]
    rows["fits"] = [e.fits for e in estimates]
    feasible_physics = rows["work_h"] < math.inf
    min_wall = rows["work_h"] + workload.restart_overhead
    on_time = min_wall <= budget
    candidates_mask = feasible_physics & on_time
    if not candidates_mask.any():
        return pd.DataFrame(), _physics_reason(ctx, rows, estimates, feasible_physics, budget), len(rows)
    rows = rows[candidates_mask].copy()
    rows["lower_bound"] = rows["price"] * rows["nodes"] * min_wall[candidates_mask]
    rows = rows.sort_values(["lower_bound", "key", "market", "nodes"], kind="stable")
    # Evaluate in lower-bound order; skip rows that cannot beat what their signature already has.
    signature = _signature_columns(workload, limits)
    rows = rows.assign(provider_region=rows["provider"] + "/" + rows["region"],
                       capped_offer=np.where(rows["max_nodes"].notna() | rows["key"].isin(limits.node_limits),
                                             rows["key"] + ("|" + rows["market"] if limits.node_limits_per_market else ""),
                                             ""),
                       gpu_family=rows["gpu"].map(lambda g: catalog.gpus[g].family))
    rows["quota_gpus"] = _quota_gpus(rows.rename(columns={"key": "offer_key"}), limits)
    front: dict[tuple, list[tuple[float, int]]] = {}
    out, missed = [], []
    for row in rows.itertuples(index=False):
        sig = tuple(getattr(row, c) for c in signature)
        incumbents = front.setdefault(sig, [])
        if not exhaustive and any(cost < row.lower_bound and gpus <= row.quota_gpus for cost, gpus in incumbents):
            continue
        est = ctx.estimate(_shape(row))
        unit = _timing(ctx, row, est)
        if unit.p_deadline < q:
            missed.append((row, unit))
            continue
        candidate = _candidate_row(ctx, row, est, unit)
        out.append(candidate)
        incumbents.append((candidate["cost_usd"], row.quota_gpus))
    if not out:
        return pd.DataFrame(), _deadline_reason(workload, missed, q), len(rows)
    return pd.DataFrame(out), "", len(rows)


def _physics_reason(ctx: _WorkloadContext, rows, estimates, feasible, budget) -> str:
    fitting = [e for e in estimates if e.fits]
    if not fitting:
        best = min(estimates, key=lambda e: e.memory.total - e.shape.vram_gib)
        precision = [e for e in estimates if "support" in e.reason]
        if precision and len(precision) == len(estimates):
            return precision[0].reason
        largest = max(e.shape.vram_gib for e in estimates)
        return (f"no GPU has enough VRAM: even {best.shape.gpus} x {best.shape.gpu} {best.reason}"
                f" (largest GPU offered: {largest:.0f} GiB)")
    if not feasible.any():
        return sorted({e.reason for e in estimates if e.reason})[0]
    fastest = min(e.work_h for e in estimates if e.work_h < math.inf) + ctx.workload.restart_overhead
    return (f"every fitting candidate misses the time budget: the fastest needs {fastest:.1f} h without any "
            f"failure against a budget of {budget:.1f} h (short by {fastest - budget:.1f} h)")


def _deadline_reason(workload: Workload, missed, q: float) -> str:
    row, unit = max(missed, key=lambda m: (m[1].p_deadline, -m[1].wall_h))
    return (f"every fitting candidate misses the time budget at confidence {q:.0%}: the best, "
            f"{int(row.nodes)} x {row.key} ({row.market}), meets {workload.time_budget:.1f} h with probability "
            f"{unit.p_deadline:.1%} (expected {unit.wall_h:.1f} h)")


def generate(scenario: Scenario, catalog: Catalog, offers: pd.DataFrame | None = None,
             exhaustive: bool = False) -> CandidateSet:
    """All workloads' candidates; `offers` defaults to the catalog's with the scenario's overrides applied."""
    limits = limits_of(scenario)
    if offers is None:
        offers = apply_overrides(catalog.offers, scenario.overrides, catalog)
    frames, infeasible, considered = [], {}, 0
    for workload in scenario.workloads:
        frame, reason, count = workload_candidates(workload, catalog, scenario, offers, limits, exhaustive)
        considered += count
        if reason:
            infeasible[workload.name] = reason
        else:
            frames.append(frame)
    evaluated = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    pruned = (pd.concat([prune_dominated(f, limits, w) for f, w in zip(frames, [w for w in scenario.workloads
                                                                                 if w.name not in infeasible])],
                        ignore_index=True) if frames else pd.DataFrame())
    return CandidateSet(evaluated, pruned, infeasible, considered)
