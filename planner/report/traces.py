"""`planner simulate --traces`: each spot or spot_fallback assignment of a plan replayed on measured
availability traces (economics/trace_replay.py), beside what the plan expected, Uniform Progress on
the same traces, all on-demand, and the hindsight optimum Can't Be Late measures regret against."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from planner.candidates.offers import apply_overrides
from planner.economics import trace_replay
from planner.economics.segment_plans import segment_plan
from planner.economics.spot_evidence import STARTS_PER_TRACE, covering
from planner.load.traces import Trace
from planner.report.render import render_table, to_csv, to_json

def trace_rows(loaded, assignment_list: list[dict], traces: list[Trace]) -> list[dict]:
    """One row per spot or spot_fallback assignment."""
    from planner.solve.pipeline import inputs_from_assignment

    offers = apply_overrides(loaded.catalog.offers, loaded.scenario.overrides, loaded.catalog).set_index("key")
    rows = []
    for a in assignment_list:
        if a["market"] not in ("spot", "spot_fallback"):
            continue
        key = f"{a['provider']}/{a['region']}/{a['instance_type']}"
        inputs = inputs_from_assignment(a)
        on_demand = a["inputs"].get("fallback_price_per_node_h", offers["on_demand_usd_h"].get(key, math.nan))
        found, no_provider_trace = covering(tuple(traces), a["provider"], a["instance_type"], int(a["nodes"]))
        row = {"workload": a["workload"], "market": a["market"], "nodes": int(a["nodes"]),
               "traces": [t.name for t in found], "stand_in": bool(found) and found[0].instance_type != a[
                   "instance_type"], "other_providers": bool(found) and no_provider_trace,
               "planned": {"cost_usd": _compute(a), "wall_h": a["expected"]["wall_h"],
                           "p_deadline": a["expected"]["p_deadline"]}}
        if not found:
            whose = "any provider" if no_provider_trace else a["provider"]
            row["skipped"] = f"no trace of {whose} holds {a['nodes']} nodes"
            rows.append(row)
            continue
        deadline = inputs.time_budget_h
        horizon = 2 * deadline if math.isfinite(deadline) else 4 * a["expected"]["wall_h"]
        job = trace_replay.TraceJob(inputs, float(on_demand))
        parts = [trace_replay.windows(t.up, t.gap_h, int(a["nodes"]), STARTS_PER_TRACE, horizon) for t in found]
        policies = [a["market"]] + (["uniform_progress"] if math.isfinite(deadline) and on_demand == on_demand else [])
        for policy in policies:
            out = [trace_replay.replay(job, up, step, policy) for up, step in parts]
            wall = np.concatenate([o.wall_h for o in out])
            cost = np.concatenate([o.cost_usd for o in out])
            row[policy] = {"cost_usd": float(np.mean(cost)), "wall_h": float(np.nanmean(wall)) if
                           np.isfinite(wall).any() else None,
                           "deadline_hit_rate": float(np.mean(inputs.estimate_error.met(
                               wall, deadline, segment_plan(inputs).T0, policy != "spot"))),
                           "unfinished": float(np.mean(np.isnan(wall)))}
        row["samples"] = sum(up.shape[0] for up, _ in parts)
        replayed = min(up.shape[1] * step for up, step in parts)
        if replayed < horizon * (1 - 1e-9):
            row["replayed_h"] = replayed  # the horizon was cut at MAX_STEPS
        if len(policies) > 1:
            best = np.concatenate([trace_replay.omniscient(job, up, step) for up, step in parts])
            row["on_demand_cost_usd"] = float(int(a["nodes"]) * on_demand * segment_plan(inputs).T0)
            row["omniscient_cost_usd"] = float(np.mean(best))
            for policy in policies:
                row[policy]["regret"] = row[policy]["cost_usd"] / row["omniscient_cost_usd"] - 1
        rows.append(row)
    return rows


def _compute(a: dict) -> float:
    """The plan's expected compute cost: the trace replay prices node-hours only."""
    b = a["breakdown_usd"]
    return a["expected"]["cost_usd"] - b["storage"] - b["egress"]


def trace_text(rows: list[dict], fmt: str) -> str:
    if fmt == "json":
        return to_json(rows)
    lines = []
    for r in rows:
        if "skipped" in r:
            lines.append({"workload": r["workload"], "market": r["market"], "traces": 0})
            continue
        plan = r[r["market"]]
        up = r.get("uniform_progress", {})
        lines.append({
            "workload": r["workload"], "market": r["market"], "traces": len(r["traces"]), "samples": r["samples"],
            "planned_usd": round(r["planned"]["cost_usd"], 2), "realised_usd": round(plan["cost_usd"], 2),
            "planned_h": round(r["planned"]["wall_h"], 1),
            "realised_h": round(plan["wall_h"], 1) if plan["wall_h"] is not None else None,
            "planned_p": round(r["planned"]["p_deadline"], 3), "hit_rate": round(plan["deadline_hit_rate"], 3),
            "regret": f"{plan['regret']:+.1%}" if "regret" in plan else "",
            "uniform_progress_usd": round(up["cost_usd"], 2) if up else None,
            "up_hit_rate": round(up["deadline_hit_rate"], 3) if up else None,
            "up_regret": f"{up['regret']:+.1%}" if up else "",
            "omniscient_usd": round(r["omniscient_cost_usd"], 2) if "omniscient_cost_usd" in r else None,
            "on_demand_usd": round(r["on_demand_cost_usd"], 2) if "on_demand_cost_usd" in r else None,
        })
    footer = ["compute only (node-hours x price); traces read cyclically from many starts; hardware failures left out"]
    stand_ins = sorted({r["workload"] for r in rows if r.get("stand_in") and not r.get("other_providers")})
    if stand_ins:
        footer.append(f"no trace of their own instance type: {', '.join(stand_ins)} replayed on their provider's "
                      f"traces as a stand-in")
    others = sorted({r["workload"] for r in rows if r.get("other_providers")})
    if others:
        footer.append(f"no trace of their provider: {', '.join(others)} replayed on every provider's traces as a "
                      f"stand-in, as the planner holds them (docs/cost-model.md §11)")
    cut = [f"{r['workload']}: replayed for its first {r['replayed_h']:,.0f} h only ({trace_replay.MAX_STEPS:,} steps); "
           f"samples not done by then count as unfinished" for r in rows if "replayed_h" in r]
    footer += cut
    skipped = [f"{r['workload']}: {r['skipped']}" for r in rows if "skipped" in r]
    footer += skipped
    if not lines:
        return "no spot or spot_fallback assignment to replay on traces\n"
    if fmt == "csv":
        return to_csv(pd.DataFrame(lines))
    return render_table(pd.DataFrame(lines), title="Replayed on spot availability traces", footer=footer)
