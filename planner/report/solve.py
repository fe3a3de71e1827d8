"""Turn a solved plan into what people read: table, JSON contract, CSV, Markdown, explanations."""
from __future__ import annotations

import math

import pandas as pd

from planner.candidates.limits import Limits, limits_of, quota_mask
from planner.candidates.risk import SAFETY
from planner.report.render import render_lines, render_markdown, render_table, to_csv, to_json
from planner.report.serving import ENDPOINT_DROP, endpoint_footer, endpoint_frame, endpoint_reports
from planner.report.status import solve_report_json, status_line
from planner.schema.plan import BREAKDOWN_KEYS
from planner.schema.units import format_hours
from planner.solve.outcome import SOLVED
from planner.solve.pipeline import Plan, assignments

RISK_MARGIN = 0.15
"""A spot plan that beats the cheapest safer plan (spot_fallback, on-demand) by less than this is explained with its
risk: the preemption events it expects, the hours waiting for capacity, and its chance of missing the deadline if
capacity is slow to return."""
SLOW_CAPACITY = 2.0
"""'Slow to return': every wait for spot capacity this many times its fitted mean."""


def plan_json(plan: Plan, timings: bool = True) -> dict:
    """The documented JSON contract of `planner solve --format json`; without `timings` it holds no
    clock reading, so two runs of the same input are identical byte for byte."""
    result = plan.result
    solved = result is not None and plan.status in SOLVED
    data = {
        "scenario": plan.loaded.scenario.name,
        "status": plan.status,
        "objective_usd": round(result.objective_usd, 2) if solved else None,
        "bound_usd": round(result.bound_usd, 2) if solved else None,
        "prices_as_of": _as_of(plan.loaded.catalog),
        "assignments": assignments(plan) if solved else [],
        "endpoints": endpoint_reports(plan) if solved else [],
        "infeasible": plan.infeasible,
    }
    if timings:
        data["solve_report"] = solve_report_json(result)
    return data


def plan_frame(plan: Plan) -> pd.DataFrame:
    """One row per workload: where, how big, which market, how long, how sure, how much."""
    rows = []
    for a in assignments(plan, alternatives=0):
        e = a["expected"]
        interval = a["checkpoint_interval_h"]
        rows.append({
            "workload": a["workload"], "provider": a["provider"], "region": a["region"],
            "instance": a["instance_type"], "gpu": a["gpu"], "gpus_per_node": a["gpus_per_node"],
            "nodes": a["nodes"], "gpus": a["gpus"],
            "market": a["market"], "parallelism": (a["parallelism"] or {}).get("label", ""),
            "checkpoint": format_hours(interval) if interval else "none",
            "expected_h": round(e["wall_h"], 2), "p_deadline": round(e["p_deadline"], 3),
            "cost_usd": round(e["cost_usd"], 2),
        })
    return pd.DataFrame(rows)


def breakdown_totals(plan: Plan) -> dict[str, float]:
    chosen = plan.chosen
    return {k: float(chosen[f"usd_{k}"].sum()) if len(chosen) else 0.0 for k in BREAKDOWN_KEYS}


def solve_text(plan: Plan, fmt: str, explain: bool = False, timings: bool = True) -> str:
    if fmt == "json":
        return to_json(plan_json(plan, timings))
    if plan.status not in SOLVED:
        return _infeasible_text(plan, fmt)
    frame = plan_frame(plan)
    if fmt == "csv":
        return to_csv(frame)
    if fmt == "markdown":
        return _markdown(plan, frame, explain)
    return _table(plan, frame, explain)


def _as_of(catalog) -> str | None:
    as_of = catalog.prices_as_of()
    return as_of.isoformat() if as_of else None


def _status_line(plan: Plan) -> str:
    cands = plan.candidates
    served = f"; {len(cands.endpoints)} endpoint options" if len(cands.endpoints) else ""
    return status_line(plan.result, f"{len(cands.pruned)} candidates after pruning ({len(cands.all)} evaluated, "
                                    f"{cands.considered} considered){served}",
                       _as_of(plan.loaded.catalog))


PLAN_DROP = ("parallelism", "checkpoint", "region", "provider", "gpus_per_node", "nodes", "gpu")
"""A plan's columns left out first in a narrow terminal: at 80 columns it keeps the workload, the offer, GPUs,
market, hours, P(deadline) and cost."""
PLAN_HEADERS = {"gpus_per_node": "per_node", "expected_h": "hours", "p_deadline": "P(dl)"}


def _table(plan: Plan, frame: pd.DataFrame, explain: bool) -> str:
    totals = breakdown_totals(plan)
    endpoints = endpoint_reports(plan)
    total = sum(totals.values()) + sum(e["cost_usd"] for e in endpoints)
    footer = [f"TOTAL expected cost ${total:,.2f}"]
    if len(frame):
        footer.append(("jobs' breakdown: " if endpoints else "breakdown: ")
                      + ", ".join(f"{k} ${v:,.2f}" for k, v in totals.items()))
    footer.append(_status_line(plan))
    text = ""
    if endpoints:
        text += render_table(endpoint_frame(endpoints), title=f"endpoints of scenario {plan.loaded.scenario.name!r}",
                             drop=ENDPOINT_DROP,
                             footer=endpoint_footer(endpoints)) + "\n"
    if len(frame) or not endpoints:
        text += render_table(frame, title=f"plan for scenario {plan.loaded.scenario.name!r}", footer=footer,
                             drop=PLAN_DROP, headers=PLAN_HEADERS)
    else:
        text += render_lines(footer)
    if explain:
        text += "\n" + "\n".join(explanations(plan)) + "\n"
    return text


def _markdown(plan: Plan, frame: pd.DataFrame, explain: bool) -> str:
    totals = breakdown_totals(plan)
    endpoints = endpoint_reports(plan)
    total = sum(totals.values()) + sum(e["cost_usd"] for e in endpoints)
    served = ["## Endpoints", "", render_markdown(endpoint_frame(endpoints)),
              *[f"- {line}" for line in endpoint_footer(endpoints)], ""] if endpoints else []
    lines = [f"# Plan for `{plan.loaded.scenario.name}`", "", *served, render_markdown(frame) if len(frame) else "",
             f"**Total expected cost: ${total:,.2f}** ({plan.status.lower()})", "",
             "| part | USD |", "|---|---|", *[f"| {k} | {v:,.2f} |" for k, v in totals.items()], ""]
    if explain:
        lines += ["## Why these choices", "", *[f"- {line.strip()}" for line in explanations(plan)], ""]
    return "\n".join(lines)


def _infeasible_text(plan: Plan, fmt: str) -> str:
    frame = pd.DataFrame(plan.infeasible, columns=["workload", "reason"])
    if fmt == "csv":
        return to_csv(frame)
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
    limits = limits_of(plan.loaded.scenario)
    placed = {a["workload"]: a for a in assignments(plan, alternatives=0)}
    for row in plan.chosen.itertuples(index=False):
        lines.append(f"{row.workload}: {row.nodes} x {row.instance_type} ({row.provider}/{row.region}, {row.market}), "
                     f"${row.cost_usd:,.2f} over {row.wall_h:.1f} h expected"
                     + (f", run as {row.parallelism}" if row.parallelism else ""))
        on_estimate = placed[row.workload]["expected"]["p_deadline_on_estimate"]
        if on_estimate is not None and abs(on_estimate - row.p_deadline) >= 0.0005:
            lines.append(f"  deadline met with P {row.p_deadline:.1%} allowing for the error of the throughput "
                         f"estimate, {on_estimate:.1%} on the estimate alone (docs/cost-model.md §12)")
        replayed = placed[row.workload]["replayed"]
        if replayed:
            fitted = row.cost_usd - row.usd_storage - row.usd_egress
            lines.append(f"  replayed on {replayed['traces']} measured {'stand-in ' if replayed['stand_in'] else ''}"
                         f"availability trace{'s' if replayed['traces'] != 1 else ''}: deadline met in "
                         f"{replayed['p_deadline']:.1%} (fitted {row.p_deadline:.1%}), compute "
                         f"${replayed['compute_usd']:,.2f} (fitted ${fitted:,.2f})")
        others = every[(every["workload"] == row.workload) & (every["cid"] != row.cid)]
        risk = _risk(row, others, placed[row.workload])
        if risk:
            lines.append("  " + risk)
        other_market = others[others["market"] != row.market].nsmallest(1, "cost_usd")
        for alt in other_market.itertuples(index=False):
            lines.append("  " + _compare(row, alt, limits))
        rivals = others[others["instance_type"] != row.instance_type].sort_values("cost_usd").drop_duplicates(
            ["instance_type"]).head(2)
        for alt in rivals.itertuples(index=False):
            if alt.cid not in set(other_market["cid"]):
                lines.append("  " + _compare(row, alt, limits))
        if others.empty:
            lines.append("  the only feasible candidate")
    return lines


def _risk(win, others: pd.DataFrame, assignment: dict) -> str:
    """For a spot or spot_fallback plan that wins by a small margin over the cheapest safer candidate (`SAFETY`:
    spot_fallback over spot, on-demand over both): what it risks for the saving."""
    safer = others[others["market"].map(SAFETY) > SAFETY[win.market]]
    if safer.empty:
        return ""
    best = safer.nsmallest(1, "cost_usd").iloc[0]
    saving = (best["cost_usd"] - win.cost_usd) / best["cost_usd"] if best["cost_usd"] > 0 else 0.0
    if not 0 <= saving < RISK_MARGIN:
        return ""
    text = (f"risk: {saving:.1%} cheaper than {best['market'].replace('_', '-')} ({int(best['nodes'])} x "
            f"{best['instance_type']}, ${best['cost_usd']:,.2f}) for {win.preemption_events:,.1f} expected preemption "
            f"events and {win.waiting_h:,.1f} h waiting for spot capacity")
    slow = slow_capacity_p_deadline(assignment)
    if slow is not None:
        text += (f"; misses its deadline in {_share(1 - win.p_deadline)} of runs as fitted, {_share(1 - slow)} if "
                 f"capacity is slow to return (every wait {SLOW_CAPACITY:g}x as long)")
    return text


def _share(p: float) -> str:
    return "under 0.1%" if p < 0.001 else f"{p:.1%}"


def slow_capacity_p_deadline(assignment: dict) -> float | None:
    """P(deadline) of a placed spot job when every wait for capacity lasts SLOW_CAPACITY times its mean (None
    without a deadline or a wait)."""
    from dataclasses import replace

    from planner.economics import costmodel, fallback
    from planner.solve.pipeline import inputs_from_assignment

    inputs = inputs_from_assignment(assignment)
    if not math.isfinite(inputs.time_budget_h) or not inputs.capacity_wait_h:
        return None
    slow = replace(inputs, capacity_wait_h=inputs.capacity_wait_h * SLOW_CAPACITY)
    if assignment["market"] == "spot_fallback":
        result = fallback.unit(slow)
        return result.p_deadline if result is not None else None
    return costmodel.p_deadline(slow)


def _shared_limits(alt, workload: str, limits: Limits) -> str:
    """The limits shared with other workloads that a candidate draws on, named as in the scenario."""
    row = pd.DataFrame([{"provider": alt.provider, "gpu": alt.gpu, "gpu_family": alt.gpu_family}])
    names = [f"gpu_quotas {key}" for key in sorted(limits.gpu_quotas) if quota_mask(row, key).iloc[0]]
    if alt.offer_key in limits.node_limits:
        names.append(f"node_limits {alt.offer_key}")
    names += [f"the {kind} group" for kind, groups in (("same_region", limits.same_region),
                                                   ("same_provider", limits.same_provider))
              if any(workload in group for group in groups)]
    return " and ".join(names) or "the shared limits"


def _compare(win, alt, limits: Limits) -> str:
    saving = (alt.cost_usd - win.cost_usd) / alt.cost_usd if alt.cost_usd > 0 else 0.0
    what = f"{win.market.replace('_', '-')} {win.instance_type}"
    against = f"{alt.nodes} x {alt.instance_type} {alt.market.replace('_', '-')} (${alt.cost_usd:,.2f}, {alt.wall_h:.1f} h)"
    if alt.cost_usd < win.cost_usd - 0.005:  # cheaper alone, but the other workloads hold what it needs
        return (f"{what}: instead of {against}, {win.cost_usd / alt.cost_usd - 1:.0%} dearer alone; "
                f"{_shared_limits(alt, win.workload, limits)} cannot also fit it next to the other workloads")
    if win.market == "spot_fallback":
        why = (f"on spot, moving to on-demand in {win.p_fallback:.0%} of runs to hold the deadline "
               f"(P {win.p_deadline:.1%})")
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


def unreplayable(assignment_list: list[dict]) -> tuple[int, str, str] | None:
    """The first job of a plan the Monte-Carlo cannot replay in reasonable time (`economics/simulate.py`
    `replay_problem`), as (its index, the key at fault under it, why); None when every one can be."""
    from planner.economics.simulate import replay_problem
    from planner.solve.pipeline import inputs_from_assignment

    for number, a in enumerate(assignment_list):
        if found := replay_problem(inputs_from_assignment(a), a["market"]):
            field, why = found
            return number, f"inputs.{field}" if field else "inputs", why
    return None


def simulation_rows(assignment_list: list[dict], trials: int, seed: int, progress=None) -> list[dict]:
    """Monte-Carlo each assignment and set the analytic figures beside the simulated ones."""
    from planner.economics import fallback
    from planner.economics.costmodel import expected
    from planner.economics.simulate import simulate, simulate_fallback
    from planner.solve.pipeline import inputs_from_assignment

    rows = []
    for number, a in enumerate(assignment_list):
        inputs = inputs_from_assignment(a)
        step = (lambda f, n=number: progress((n + f) / len(assignment_list))) if progress else None
        if a["market"] == "spot_fallback":  # the policy as cost-model §10 prices it and as it would act
            on_demand = a["inputs"]["fallback_price_per_node_h"]
            analytic = fallback.expected(inputs, on_demand)
            sim = simulate_fallback(inputs, on_demand, trials=trials, seed=seed + number)
            if step:
                step(1.0)
        else:
            analytic = expected(inputs)
            sim = simulate(inputs, trials=trials, seed=seed + number, progress=step)
        rows.append({
            "workload": a["workload"], "trials": trials,
            "wall_h": _compare_stats(sim, "wall_h", analytic.wall_h),
            "cost_usd": _compare_stats(sim, "cost_usd", analytic.cost_usd),
            "billed_node_h": _compare_stats(sim, "billed_node_h", analytic.billed_node_h),
            "p_deadline": {"simulated": sim.p_deadline, "analytic": analytic.p_deadline,
                           "difference_pp": 100 * (sim.p_deadline - analytic.p_deadline)},
        })
    return rows


def _compare_stats(sim, name: str, analytic: float) -> dict:
    mean = sim.mean(name)
    return {"mean": mean, "p50": sim.p50(name), "p90": sim.p90(name), "p99": sim.p99(name),
            "stderr": sim.stderr(name), "analytic": analytic,
            "relative_difference": (mean - analytic) / analytic if analytic else 0.0}


def simulation_text(rows: list[dict], fmt: str) -> str:
    if fmt == "json":
        return to_json(rows)
    frame = pd.DataFrame([{
        "workload": r["workload"],
        "wall_mean_h": round(r["wall_h"]["mean"], 3), "wall_p50": round(r["wall_h"]["p50"], 3),
        "wall_p90": round(r["wall_h"]["p90"], 3), "wall_p99": round(r["wall_h"]["p99"], 3),
        "wall_analytic": round(r["wall_h"]["analytic"], 3), "wall_diff": f"{r['wall_h']['relative_difference']:+.2%}",
        "cost_mean": round(r["cost_usd"]["mean"], 2), "cost_p50": round(r["cost_usd"]["p50"], 2),
        "cost_p90": round(r["cost_usd"]["p90"], 2), "cost_p99": round(r["cost_usd"]["p99"], 2),
        "cost_analytic": round(r["cost_usd"]["analytic"], 2),
        "cost_diff": f"{r['cost_usd']['relative_difference']:+.2%}",
        "p_deadline_sim": round(r["p_deadline"]["simulated"], 4),
        "p_deadline_analytic": round(r["p_deadline"]["analytic"], 4),
    } for r in rows])
    if fmt == "csv":
        return to_csv(frame)
    trials = rows[0]["trials"] if rows else 0
    return render_table(frame, title=f"Monte-Carlo ({trials:,} trials per workload) against the analytic model",
                        footer=["diff = (simulated mean - analytic) / analytic"])
