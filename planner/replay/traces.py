"""`planner simulate --traces`: each spot or spot_fallback job of a plan replayed on measured availability traces
(economics/trace_replay.py), beside what the plan expected, Uniform Progress on the same traces, all on-demand,
and the hindsight optimum Can't Be Late measures regret against."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.candidates.offers import apply_overrides
from planner.economics import trace_replay
from planner.economics.inputs import inputs_from_assignment
from planner.economics.segment_plans import segment_plan
from planner.economics.spot_evidence import STARTS_PER_TRACE, covering
from planner.load.traces import Trace
from planner.schema.plan import AssignmentRecord


@dataclass(frozen=True)
class TraceReplays:
    """One row per spot or spot_fallback job, as `planner simulate --traces --format json` writes it, and the
    most steps a replay takes (a longer horizon is cut there)."""

    rows: list[dict]
    max_steps: int = trace_replay.MAX_STEPS


def replay_on_traces(
    loaded, jobs: list[AssignmentRecord], traces: list[Trace]
) -> TraceReplays:
    """Each spot or spot_fallback job of `jobs` replayed on the traces that hold its nodes."""
    offers = apply_overrides(
        loaded.catalog.offers, loaded.scenario.overrides, loaded.catalog
    ).set_index("key")
    rows = []
    for a in jobs:
        if a.market not in ("spot", "spot_fallback"):
            continue
        key = f"{a.provider}/{a.region}/{a.instance_type}"
        inputs = inputs_from_assignment(a)
        on_demand = a.inputs.fallback_price_per_node_h
        if on_demand is None:
            on_demand = offers["on_demand_usd_h"].get(key, math.nan)
        found, no_provider_trace = covering(
            tuple(traces), a.provider, a.instance_type, a.nodes
        )
        row = {
            "workload": a.workload,
            "market": a.market,
            "nodes": a.nodes,
            "traces": [t.name for t in found],
            "stand_in": bool(found) and found[0].instance_type != a.instance_type,
            "other_providers": bool(found) and no_provider_trace,
            "planned": {
                "cost_usd": a.expected.cost_usd
                - a.breakdown_usd.storage
                - a.breakdown_usd.egress,
                "wall_h": a.expected.wall_h,
                "p_deadline": a.expected.p_deadline,
            },
        }
        if not found:
            whose = "any provider" if no_provider_trace else a.provider
            row["skipped"] = f"no trace of {whose} holds {a.nodes} nodes"
            rows.append(row)
            continue
        deadline = inputs.time_budget_h
        horizon = 2 * deadline if math.isfinite(deadline) else 4 * a.expected.wall_h
        job = trace_replay.TraceJob(inputs, float(on_demand))
        parts = [
            trace_replay.windows(t.up, t.gap_h, a.nodes, STARTS_PER_TRACE, horizon)
            for t in found
        ]
        policies = [a.market] + (
            ["uniform_progress"]
            if math.isfinite(deadline) and on_demand == on_demand
            else []
        )
        for policy in policies:
            out = [trace_replay.replay(job, up, step, policy) for up, step in parts]
            wall = np.concatenate([o.wall_h for o in out])
            cost = np.concatenate([o.cost_usd for o in out])
            row[policy] = {
                "cost_usd": float(np.mean(cost)),
                "wall_h": float(np.nanmean(wall)) if np.isfinite(wall).any() else None,
                "deadline_hit_rate": float(
                    np.mean(
                        inputs.estimate_error.met(
                            wall, deadline, segment_plan(inputs).T0, policy != "spot"
                        )
                    )
                ),
                "unfinished": float(np.mean(np.isnan(wall))),
            }
        row["samples"] = sum(up.shape[0] for up, _ in parts)
        replayed = min(up.shape[1] * step for up, step in parts)
        if replayed < horizon * (1 - 1e-9):
            row["replayed_h"] = replayed  # the horizon was cut at MAX_STEPS
        if len(policies) > 1:
            best = np.concatenate(
                [trace_replay.omniscient(job, up, step) for up, step in parts]
            )
            row["on_demand_cost_usd"] = float(
                a.nodes * on_demand * segment_plan(inputs).T0
            )
            row["omniscient_cost_usd"] = float(np.mean(best))
            for policy in policies:
                row[policy]["regret"] = (
                    row[policy]["cost_usd"] / row["omniscient_cost_usd"] - 1
                )
        rows.append(row)
    return TraceReplays(rows)
