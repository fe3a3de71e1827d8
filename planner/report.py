"""Turn a solved plan into what people read: table, JSON contract, CSV, Markdown, explanations."""
from __future__ import annotations

import math

import pandas as pd

from .output import render_markdown, render_table, to_json
from .plan import Plan, assignments
from .units import format_hours

BREAKDOWN = ("compute", "checkpointing", "startup", "preemption_rework", "rounding_waste", "storage", "egress")


def plan_json(plan: Plan) -> dict:
    """The documented JSON contract of `planner solve --format json`."""
    result = plan.result
    solved = result is not None and plan.status in ("OPTIMAL", "FEASIBLE")
    return {
        "scenario": plan.loaded.scenario.name,
        "status": plan.status,
        "objective_usd": round(result.objective_usd, 2) if solved else None,
        "bound_usd": round(result.bound_usd, 2) if solved else None,
        "solve_seconds": round(result.solve_seconds, 3) if result else 0.0,
        "assignments": assignments(plan) if solved else [],
        "infeasible": plan.infeasible,
    }


def plan_frame(plan: Plan) -> pd.DataFrame:
    """One row per workload: where, how big, which market, how long, how sure, how much."""
    rows = []
    for a in assignments(plan, alternatives=0):
        e = a["expected"]
        interval = a["checkpoint_interval_h"]
        rows.append({
            "workload": a["workload"], "provider": a["provider"], "region": a["region"],
            "instance": a["instance_type"], "gpus": f"{a['gpus_per_node']}x{a['gpu']} x{a['nodes']}",
            "market": a["market"], "checkpoint": format_hours(interval) if interval else "none",
            "expected_h": round(e["wall_h"], 2), "p_deadline": round(e["p_deadline"], 3),
            "cost_usd": round(e["cost_usd"], 2),
        })
    return pd.DataFrame(rows)


def breakdown_totals(plan: Plan) -> dict[str, float]:
    chosen = plan.chosen
    return {k: float(chosen[f"usd_{k}"].sum()) if len(chosen) else 0.0 for k in BREAKDOWN}


def solve_text(plan: Plan, fmt: str, explain: bool = False) -> str:
    if fmt == "json":
        return to_json(plan_json(plan))
    if plan.status not in ("OPTIMAL", "FEASIBLE"):
        return _infeasible_text(plan, fmt)
    frame = plan_frame(plan)
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "markdown":
        return _markdown(plan, frame, explain)
    return _table(plan, frame, explain)


def _status_line(plan: Plan) -> str:
    r = plan.result
    proof = "optimal (proven)" if plan.status == "OPTIMAL" else f"feasible, gap {r.gap:.2%} to the bound ${r.bound_usd:,.2f}"
    cands = plan.candidates
    return (f"{plan.status}: expected total ${r.objective_usd:,.2f}, {proof}; {len(cands.pruned)} candidates "
            f"after pruning ({len(cands.all)} evaluated, {cands.considered} considered); solved in "
            f"{r.solve_seconds:.2f} s ({r.deterministic_seconds:.2f} deterministic) on {r.workers} workers")


def _table(plan: Plan, frame: pd.DataFrame, explain: bool) -> str:
    totals = breakdown_totals(plan)
    total = sum(totals.values())
    footer = [f"TOTAL expected cost ${total:,.2f}",
              "breakdown: " + ", ".join(f"{k} ${v:,.2f}" for k, v in totals.items()),
              _status_line(plan)]
    text = render_table(frame, title=f"plan for scenario {plan.loaded.scenario.name!r}", footer=footer)
    if explain:
        text += "\n" + "\n".join(explanations(plan)) + "\n"
    return text


def _markdown(plan: Plan, frame: pd.DataFrame, explain: bool) -> str:
    totals = breakdown_totals(plan)
    lines = [f"# Plan for `{plan.loaded.scenario.name}`", "", render_markdown(frame),
             f"**Total expected cost: ${sum(totals.values()):,.2f}** ({plan.status.lower()})", "",
             "| part | USD |", "|---|---|", *[f"| {k} | {v:,.2f} |" for k, v in totals.items()], ""]
    if explain:
        lines += ["## Why these choices", "", *[f"- {line.strip()}" for line in explanations(plan)], ""]
    return "\n".join(lines)


def _infeasible_text(plan: Plan, fmt: str) -> str:
    frame = pd.DataFrame(plan.infeasible, columns=["workload", "reason"])
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "markdown":
        return f"# `{plan.loaded.scenario.name}`: {plan.status}\n\n" + render_markdown(frame)
    if plan.status == "INFEASIBLE":
        return render_table(frame.rename(columns={"reason": "why"}),
                            title=f"INFEASIBLE: scenario {plan.loaded.scenario.name!r} cannot be planned")
    return f"{plan.status}: no plan found within the time limit; raise --time-limit\n"


def explanations(plan: Plan) -> list[str]:
    """Per workload: why the winner beat its runner-ups, in one line each."""
    lines = []
    every = plan.candidates.all
    for row in plan.chosen.itertuples(index=False):
        lines.append(f"{row.workload}: {row.nodes} x {row.instance_type} ({row.provider}/{row.region}, {row.market}), "
                     f"${row.cost_usd:,.2f} over {row.wall_h:.1f} h expected")
        others = every[(every["workload"] == row.workload) & (every["cid"] != row.cid)]
        other_market = others[others["market"] != row.market].nsmallest(1, "cost_usd")
        for alt in other_market.itertuples(index=False):
            lines.append("  " + _compare(row, alt))
        rivals = others[others["instance_type"] != row.instance_type].sort_values("cost_usd").drop_duplicates(
            ["instance_type"]).head(2)
        for alt in rivals.itertuples(index=False):
            if alt.cid not in set(other_market["cid"]):
                lines.append("  " + _compare(row, alt))
        if others.empty:
            lines.append("  the only feasible candidate")
    return lines


def _compare(win, alt) -> str:
    saving = (alt.cost_usd - win.cost_usd) / alt.cost_usd if alt.cost_usd > 0 else 0.0
    what = f"{win.market.replace('_', '-')} {win.instance_type}"
    against = f"{alt.nodes} x {alt.instance_type} {alt.market.replace('_', '-')} (${alt.cost_usd:,.2f}, {alt.wall_h:.1f} h)"
    if win.market == "spot" and alt.market == "on_demand":
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
