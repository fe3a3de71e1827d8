"""Why the plan chose what it chose, per workload: the winner against its runner-ups, what a cheap spot plan
risks, and how the plan fared on measured availability (`planner solve --explain`)."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from planner.candidates.limits import Limits, limits_of, quota_mask
from planner.candidates.risk import SAFETY
from planner.economics import costmodel, fallback
from planner.economics.inputs import inputs_from_assignment
from planner.schema.plan import AssignmentRecord
from planner.schema.units import format_hours
from planner.solve.pipeline import Plan, assignments

RISK_MARGIN = 0.15
"""A spot plan that beats the cheapest safer plan (spot_fallback, on-demand) by less than this is explained with its
risk: the preemption events it expects, the hours waiting for capacity, and its chance of missing the deadline if
capacity is slow to return."""
SLOW_CAPACITY = 2.0
"""'Slow to return': every wait for spot capacity this many times its fitted mean."""


def explanations(plan: Plan) -> list[str]:
    """Per workload: why the winner beat its runner-ups, in one line each."""
    lines = []
    every = plan.candidates.all
    limits = limits_of(plan.loaded.scenario)
    placed = {a["workload"]: a for a in assignments(plan, alternatives=0)}
    for row in plan.chosen.itertuples(index=False):
        lines.append(
            f"{row.workload}: {row.nodes} x {row.instance_type} ({row.provider}/{row.region}, {row.market}), "
            f"${row.cost_usd:,.2f} over {row.wall_h:.1f} h expected"
            + (f", run as {row.parallelism}" if row.parallelism else "")
        )
        on_estimate = placed[row.workload]["expected"]["p_deadline_on_estimate"]
        if on_estimate is not None and abs(on_estimate - row.p_deadline) >= 0.0005:
            lines.append(
                f"  deadline met with P {row.p_deadline:.1%} allowing for the error of the throughput "
                f"estimate, {on_estimate:.1%} on the estimate alone (docs/cost-model.md §12)"
            )
        replayed = placed[row.workload]["replayed"]
        if replayed:
            fitted = row.cost_usd - row.usd_storage - row.usd_egress
            lines.append(
                f"  replayed on {replayed['traces']} measured {'stand-in ' if replayed['stand_in'] else ''}"
                f"availability trace{'s' if replayed['traces'] != 1 else ''}: deadline met in "
                f"{replayed['p_deadline']:.1%} (fitted {row.p_deadline:.1%}), compute "
                f"${replayed['compute_usd']:,.2f} (fitted ${fitted:,.2f})"
            )
        others = every[(every["workload"] == row.workload) & (every["cid"] != row.cid)]
        lines.append("  " + _storage(row, others))
        risk = _risk(row, others, placed[row.workload])
        if risk:
            lines.append("  " + risk)
        other_market = others[others["market"] != row.market].nsmallest(1, "cost_usd")
        for alt in other_market.itertuples(index=False):
            lines.append("  " + _compare(row, alt, limits))
        rivals = (
            others[others["instance_type"] != row.instance_type]
            .sort_values("cost_usd")
            .drop_duplicates(["instance_type"])
            .head(2)
        )
        for alt in rivals.itertuples(index=False):
            if alt.cid not in set(other_market["cid"]):
                lines.append("  " + _compare(row, alt, limits))
        if others.empty:
            lines.append("  the only feasible candidate")
    return lines


def _storage(win, others: pd.DataFrame) -> str:
    """Where the winner keeps its data and checkpoints, what that costs it in hours, and the cheapest candidate
    of the same offer and market on other storage, where one was priced."""
    hours = [
        f"checkpoint write {format_hours(win.checkpoint_write_h)}"
        if win.checkpoint_write_h
        else "",
        f"restore {format_hours(win.restore_h)}" if win.restore_h else "",
        f"data staged in {format_hours(win.stage_h)} per start" if win.stage_h else "",
        f"volume filled in {format_hours(win.load_h)}" if win.load_h else "",
        f"data-bound {win.data_bound_share:.0%} of its reading time"
        if win.data_bound_share
        else "",
    ]
    text = (
        f"storage {win.storage} ({win.storage_class}, read {win.storage_read_gbs:,.1f} GB/s, write "
        f"{win.storage_write_gbs:,.1f} GB/s): " + ", ".join(h for h in hours if h)
    ).rstrip(": ")
    same = others[
        (others["offer_key"] == win.offer_key)
        & (others["market"] == win.market)
        & (others["storage"] != win.storage)
    ].nsmallest(1, "cost_usd")
    for alt in same.itertuples(index=False):
        text += (
            f"; on {alt.storage} ({alt.storage_class}) the same offer costs ${alt.cost_usd:,.2f} over "
            f"{alt.wall_h:.1f} h"
        )
    return text


def _risk(win, others: pd.DataFrame, assignment: dict) -> str:
    """For a spot or spot_fallback plan that wins by a small margin over the cheapest safer candidate (`SAFETY`:
    spot_fallback over spot, on-demand over both): what it risks for the saving."""
    safer = others[others["market"].map(SAFETY) > SAFETY[win.market]]
    if safer.empty:
        return ""
    best = safer.nsmallest(1, "cost_usd").iloc[0]
    saving = (
        (best["cost_usd"] - win.cost_usd) / best["cost_usd"]
        if best["cost_usd"] > 0
        else 0.0
    )
    if not 0 <= saving < RISK_MARGIN:
        return ""
    text = (
        f"risk: {saving:.1%} cheaper than {best['market'].replace('_', '-')} ({int(best['nodes'])} x "
        f"{best['instance_type']}, ${best['cost_usd']:,.2f}) for {win.preemption_events:,.1f} expected preemption "
        f"events and {win.waiting_h:,.1f} h waiting for spot capacity"
    )
    slow = slow_capacity_p_deadline(
        AssignmentRecord.model_validate(assignment, strict=False)
    )
    if slow is not None:
        text += (
            f"; misses its deadline in {_share(1 - win.p_deadline)} of runs as fitted, {_share(1 - slow)} if "
            f"capacity is slow to return (every wait {SLOW_CAPACITY:g}x as long)"
        )
    return text


def _share(p: float) -> str:
    return "under 0.1%" if p < 0.001 else f"{p:.1%}"


def slow_capacity_p_deadline(assignment: AssignmentRecord) -> float | None:
    """P(deadline) of a placed spot job when every wait for capacity lasts SLOW_CAPACITY times its mean (None
    without a deadline or a wait)."""
    inputs = inputs_from_assignment(assignment)
    if not math.isfinite(inputs.time_budget_h) or not inputs.capacity_wait_h:
        return None
    slow = replace(inputs, capacity_wait_h=inputs.capacity_wait_h * SLOW_CAPACITY)
    if assignment.market == "spot_fallback":
        result = fallback.unit(slow)
        return result.p_deadline if result is not None else None
    return costmodel.p_deadline(slow)


def _shared_limits(alt, workload: str, limits: Limits) -> str:
    """The limits shared with other workloads that a candidate draws on, named as in the scenario."""
    row = pd.DataFrame(
        [{"provider": alt.provider, "gpu": alt.gpu, "gpu_family": alt.gpu_family}]
    )
    names = [
        f"gpu_quotas {key}"
        for key in sorted(limits.gpu_quotas)
        if quota_mask(row, key).iloc[0]
    ]
    if alt.offer_key in limits.node_limits:
        names.append(f"node_limits {alt.offer_key}")
    names += [
        f"the {kind} group"
        for kind, groups in (
            ("same_region", limits.same_region),
            ("same_provider", limits.same_provider),
        )
        if any(workload in group for group in groups)
    ]
    return " and ".join(names) or "the shared limits"


def _compare(win, alt, limits: Limits) -> str:
    saving = (alt.cost_usd - win.cost_usd) / alt.cost_usd if alt.cost_usd > 0 else 0.0
    what = f"{win.market.replace('_', '-')} {win.instance_type}"
    against = f"{alt.nodes} x {alt.instance_type} {alt.market.replace('_', '-')} (${alt.cost_usd:,.2f}, {alt.wall_h:.1f} h)"
    if (
        alt.cost_usd < win.cost_usd - 0.005
    ):  # cheaper alone, but the other workloads hold what it needs
        return (
            f"{what}: instead of {against}, {win.cost_usd / alt.cost_usd - 1:.0%} dearer alone; "
            f"{_shared_limits(alt, win.workload, limits)} cannot also fit it next to the other workloads"
        )
    if win.market == "spot_fallback":
        why = (
            f"on spot, moving to on-demand in {win.p_fallback:.0%} of runs to hold the deadline "
            f"(P {win.p_deadline:.1%})"
        )
    elif win.market == "spot" and alt.market == "on_demand":
        why = f"after {win.failures:.1f} expected preemptions/failures costing ${win.usd_preemption_rework:,.2f} of rework"
    elif win.wall_h < alt.wall_h * 0.9:
        why = f"finishes in {win.wall_h:.1f} h instead of {alt.wall_h:.1f} h, so fewer node-hours are billed"
    elif win.price_per_node_h * win.nodes < alt.price_per_node_h * alt.nodes:
        why = f"${win.price_per_node_h * win.nodes:,.2f}/h against ${alt.price_per_node_h * alt.nodes:,.2f}/h"
    else:
        why = "lower expected billing, rework and data costs"
    if math.isclose(saving, 0.0, abs_tol=5e-4):
        return f"{what}: ties with {against}; shorter expected wall time or name breaks the tie"
    return f"{what}: {saving:.0%} cheaper than {against} {why}"
