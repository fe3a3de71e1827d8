"""Turn a solved plan into what people read: table, JSON contract, CSV, Markdown, explanations (`solve/explain.py`)."""

from __future__ import annotations

import pandas as pd

from planner.report.render import (
    render_lines,
    render_markdown,
    render_table,
    to_csv,
    to_json,
)
from planner.report.serving import ENDPOINT_DROP, endpoint_footer, endpoint_frame
from planner.report.status import status_line
from planner.schema.plan import BREAKDOWN_KEYS
from planner.schema.units import format_hours
from planner.solve.endpoint_report import endpoint_reports
from planner.solve.explain import explanations
from planner.solve.outcome import SOLVED, solve_report_json
from planner.solve.pipeline import RUNNER_UPS, Plan, assignments


def plan_json(plan: Plan, timings: bool = True, alternatives: int = RUNNER_UPS) -> dict:
    """The documented JSON contract of `planner solve --format json`; without `timings` it holds no
    clock reading, so two runs of the same input are identical byte for byte. `alternatives`: runner-ups per
    workload, as many as the plan's candidates were generated for."""
    result = plan.result
    solved = result is not None and plan.status in SOLVED
    data = {
        "scenario": plan.loaded.scenario.name,
        "status": plan.status,
        "objective_usd": round(result.objective_usd, 2) if solved else None,
        "bound_usd": round(result.bound_usd, 2) if solved else None,
        "prices_as_of": _as_of(plan.loaded.catalog),
        "assignments": assignments(plan, alternatives) if solved else [],
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
        rows.append(
            {
                "workload": a["workload"],
                "provider": a["provider"],
                "region": a["region"],
                "instance": a["instance_type"],
                "gpu": a["gpu"],
                "gpus_per_node": a["gpus_per_node"],
                "nodes": a["nodes"],
                "gpus": a["gpus"],
                "market": a["market"],
                "storage": (a["storage"] or {}).get("name", ""),
                "parallelism": (a["parallelism"] or {}).get("label", ""),
                "checkpoint": format_hours(interval) if interval else "none",
                "expected_h": round(e["wall_h"], 2),
                "p_deadline": round(e["p_deadline"], 3),
                "cost_usd": round(e["cost_usd"], 2),
            }
        )
    return pd.DataFrame(rows)


def breakdown_totals(plan: Plan) -> dict[str, float]:
    chosen = plan.chosen
    return {
        k: float(chosen[f"usd_{k}"].sum()) if len(chosen) else 0.0
        for k in BREAKDOWN_KEYS
    }


def solve_text(
    plan: Plan, fmt: str, explain: bool = False, timings: bool = True
) -> str:
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
    served = (
        f"; {len(cands.endpoints)} endpoint options" if len(cands.endpoints) else ""
    )
    unpriced = plan.result.unpriced if plan.result else 0
    left = (
        f", {unpriced} left unpriced: no cheaper plan could use them"
        if unpriced
        else ""
    )
    return status_line(
        plan.result,
        f"{len(cands.pruned)} candidates after pruning ({len(cands.all)} evaluated, "
        f"{cands.considered} considered; {cands.priced} rows priced exactly{left}){served}",
        _as_of(plan.loaded.catalog),
    )


PLAN_DROP = (
    "parallelism",
    "checkpoint",
    "region",
    "provider",
    "gpus_per_node",
    "nodes",
    "gpu",
)
"""A plan's columns left out first in a narrow terminal: at 80 columns it keeps the workload, the offer, GPUs,
market, hours, P(deadline) and cost."""
PLAN_HEADERS = {
    "gpus_per_node": "per_node",
    "expected_h": "hours",
    "p_deadline": "P(dl)",
}


def _purchases(plan: Plan, endpoints: list[dict]) -> list[str]:
    """What the plan buys beyond on demand and spot, and when: one line per job on a purchase option, and per
    endpoint's commitment (its most nodes in any period); and the availability signals a job's offer carries."""
    lines = []
    chosen = plan.chosen
    bought = not chosen.empty and "purchase" in chosen and chosen["purchase"].any()
    if bought or (not chosen.empty and plan.loaded.catalog.signals):
        for a in assignments(plan, alternatives=0):
            if a["purchase"]:
                lines.append(f"{a['workload']}: {a['purchase']['buy']}")
            if a["signals"]:
                lines.append(f"{a['workload']}: planned with {'; '.join(a['signals'])}")
    for e in endpoints:
        committed: dict[tuple, int] = {}
        for period in e["periods"]:
            for p in period["pools"]:
                if p.get("reservation") and p.get("usd_per_h"):
                    key = (
                        p["reservation"],
                        f"{p['provider']}/{p['region']}/{p['instance_type']}",
                    )
                    committed[key] = max(committed.get(key, 0), int(p["nodes"]))
        lines += [
            f"{e['workload']}: commit {n} x {offer} ({name}) for its {e['duration_h'] / 24:g} days"
            for (name, offer), n in sorted(committed.items())
        ]
    return lines


def _table(plan: Plan, frame: pd.DataFrame, explain: bool) -> str:
    totals = breakdown_totals(plan)
    endpoints = endpoint_reports(plan)
    total = sum(totals.values()) + sum(e["cost_usd"] for e in endpoints)
    footer = [f"TOTAL expected cost ${total:,.2f}"]
    if len(frame):
        footer.append(
            ("jobs' breakdown: " if endpoints else "breakdown: ")
            + ", ".join(f"{k} ${v:,.2f}" for k, v in totals.items())
        )
    footer += _purchases(plan, endpoints)
    footer.append(_status_line(plan))
    text = ""
    if endpoints:
        text += (
            render_table(
                endpoint_frame(endpoints),
                title=f"endpoints of scenario {plan.loaded.scenario.name!r}",
                drop=ENDPOINT_DROP,
                footer=endpoint_footer(endpoints),
            )
            + "\n"
        )
    if len(frame) or not endpoints:
        text += render_table(
            frame.drop(columns=["storage"], errors="ignore"),  # in --explain, csv, json
            title=f"plan for scenario {plan.loaded.scenario.name!r}",
            footer=footer,
            drop=PLAN_DROP,
            headers=PLAN_HEADERS,
        )
    else:
        text += render_lines(footer)
    if explain:
        text += "\n" + "\n".join(explanations(plan)) + "\n"
    return text


def _markdown(plan: Plan, frame: pd.DataFrame, explain: bool) -> str:
    totals = breakdown_totals(plan)
    endpoints = endpoint_reports(plan)
    total = sum(totals.values()) + sum(e["cost_usd"] for e in endpoints)
    served = (
        [
            "## Endpoints",
            "",
            render_markdown(endpoint_frame(endpoints)),
            *[f"- {line}" for line in endpoint_footer(endpoints)],
            "",
        ]
        if endpoints
        else []
    )
    lines = [
        f"# Plan for `{plan.loaded.scenario.name}`",
        "",
        *served,
        render_markdown(frame) if len(frame) else "",
        f"**Total expected cost: ${total:,.2f}** ({plan.status.lower()})",
        "",
        "| part | USD |",
        "|---|---|",
        *[f"| {k} | {v:,.2f} |" for k, v in totals.items()],
        "",
    ]
    if explain:
        lines += [
            "## Why these choices",
            "",
            *[f"- {line.strip()}" for line in explanations(plan)],
            "",
        ]
    return "\n".join(lines)


def _infeasible_text(plan: Plan, fmt: str) -> str:
    frame = pd.DataFrame(plan.infeasible, columns=["workload", "reason"])
    if fmt == "csv":
        return to_csv(frame)
    if fmt == "markdown":
        return f"# `{plan.loaded.scenario.name}`: {plan.status}\n\n" + render_markdown(
            frame
        )
    if plan.status == "INFEASIBLE":
        return render_table(
            frame.rename(columns={"reason": "why"}),
            title=f"INFEASIBLE: scenario {plan.loaded.scenario.name!r} cannot be planned",
        )
    return f"{plan.status}: no plan found within the time limit; raise --time-limit\n"
