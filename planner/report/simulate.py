"""`planner simulate` as people read it: each job's Monte-Carlo beside the cost model, the endpoints' replay, the
jobs replayed on measured spot availability (`--traces`), and a quarter's schedule replayed; the figures are
`replay/`'s."""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from planner.replay.endpoints import EndpointReplay
from planner.replay.jobs import JobReplay
from planner.replay.pipeline import (  # the schedule's replay, as `replay` returns it
    PlanReplay,
    ScheduleOutlook,
)
from planner.replay.traces import TraceReplays
from planner.report.render import render_table, to_csv, to_json


def simulation_text(replay: PlanReplay, fmt: str) -> str:
    """The jobs' Monte-Carlo, then the endpoints' replay; JSON is the jobs' list, or {"workloads": [...],
    "endpoints": [...]} when the plan has endpoints; CSV, the jobs' rows, a blank line and the endpoints' rows."""
    jobs = jobs_text(replay.jobs, fmt) if replay.jobs else ""
    if not replay.endpoints:
        return jobs
    if fmt == "json":
        return to_json(
            {
                "workloads": [asdict(r) for r in replay.jobs],
                "endpoints": [asdict(r) for r in replay.endpoints],
            }
        )
    return (
        jobs
        + ("\n" if jobs and fmt == "csv" else "")
        + endpoints_text(replay.endpoints, fmt)
    )


def jobs_text(rows: list[JobReplay], fmt: str) -> str:
    if fmt == "json":
        return to_json([asdict(r) for r in rows])
    frame = pd.DataFrame(
        [
            {
                "workload": r.workload,
                "wall_mean_h": round(r.wall_h.mean, 3),
                "wall_p50": round(r.wall_h.p50, 3),
                "wall_p90": round(r.wall_h.p90, 3),
                "wall_p99": round(r.wall_h.p99, 3),
                "wall_analytic": round(r.wall_h.analytic, 3),
                "wall_diff": f"{r.wall_h.relative_difference:+.2%}",
                "cost_mean": round(r.cost_usd.mean, 2),
                "cost_p50": round(r.cost_usd.p50, 2),
                "cost_p90": round(r.cost_usd.p90, 2),
                "cost_p99": round(r.cost_usd.p99, 2),
                "cost_analytic": round(r.cost_usd.analytic, 2),
                "cost_diff": f"{r.cost_usd.relative_difference:+.2%}",
                "p_deadline_sim": round(r.p_deadline.simulated, 4),
                "p_deadline_analytic": round(r.p_deadline.analytic, 4),
            }
            for r in rows
        ]
    )
    if fmt == "csv":
        return to_csv(frame)
    trials = rows[0].trials if rows else 0
    return render_table(
        frame,
        title=f"Monte-Carlo ({trials:,} trials per workload) against the analytic model",
        footer=["diff = (simulated mean - analytic) / analytic"],
    )


def endpoints_text(replays: list[EndpointReplay], fmt: str) -> str:
    frame = pd.DataFrame(
        [
            {
                "endpoint": r.workload,
                "days": r.days,
                "below_capacity_sim": f"{r.below_capacity_share.simulated:.4%}",
                "below_capacity_analytic": f"{r.below_capacity_share.analytic:.4%}",
                "requests_within_slo_sim": f"{r.requests_within_slo_share.simulated:.4%}",
            }
            for r in replays
        ]
    )
    if fmt == "csv":
        return to_csv(frame)
    return render_table(
        frame,
        title="endpoints replayed minute by minute (Poisson arrivals, preemptions, "
        "replacements) against the plan",
    )


def trace_text(replays: TraceReplays, fmt: str) -> str:
    rows = replays.rows
    if fmt == "json":
        return to_json(rows)
    lines = []
    for r in rows:
        if "skipped" in r:
            lines.append(
                {"workload": r["workload"], "market": r["market"], "traces": 0}
            )
            continue
        plan = r[r["market"]]
        up = r.get("uniform_progress", {})
        lines.append(
            {
                "workload": r["workload"],
                "market": r["market"],
                "traces": len(r["traces"]),
                "samples": r["samples"],
                "planned_usd": round(r["planned"]["cost_usd"], 2),
                "realised_usd": round(plan["cost_usd"], 2),
                "planned_h": round(r["planned"]["wall_h"], 1),
                "realised_h": round(plan["wall_h"], 1)
                if plan["wall_h"] is not None
                else None,
                "planned_p": round(r["planned"]["p_deadline"], 3),
                "hit_rate": round(plan["deadline_hit_rate"], 3),
                "regret": f"{plan['regret']:+.1%}" if "regret" in plan else "",
                "uniform_progress_usd": round(up["cost_usd"], 2) if up else None,
                "up_hit_rate": round(up["deadline_hit_rate"], 3) if up else None,
                "up_regret": f"{up['regret']:+.1%}" if up else "",
                "omniscient_usd": round(r["omniscient_cost_usd"], 2)
                if "omniscient_cost_usd" in r
                else None,
                "on_demand_usd": round(r["on_demand_cost_usd"], 2)
                if "on_demand_cost_usd" in r
                else None,
            }
        )
    footer = [
        "compute only (node-hours x price); traces read cyclically from many starts; hardware failures left out"
    ]
    stand_ins = sorted(
        {
            r["workload"]
            for r in rows
            if r.get("stand_in") and not r.get("other_providers")
        }
    )
    if stand_ins:
        footer.append(
            f"no trace of their own instance type: {', '.join(stand_ins)} replayed on their provider's "
            f"traces as a stand-in"
        )
    others = sorted({r["workload"] for r in rows if r.get("other_providers")})
    if others:
        footer.append(
            f"no trace of their provider: {', '.join(others)} replayed on every provider's traces as a "
            f"stand-in, as the planner holds them (docs/cost-model.md §11)"
        )
    cut = [
        f"{r['workload']}: replayed for its first {r['replayed_h']:,.0f} h only ({replays.max_steps:,} steps); "
        f"samples not done by then count as unfinished"
        for r in rows
        if "replayed_h" in r
    ]
    footer += cut
    skipped = [f"{r['workload']}: {r['skipped']}" for r in rows if "skipped" in r]
    footer += skipped
    if not lines:
        return "no spot or spot_fallback assignment to replay on traces\n"
    if fmt == "csv":
        return to_csv(pd.DataFrame(lines))
    return render_table(
        pd.DataFrame(lines), title="Replayed on spot availability traces", footer=footer
    )


def schedule_text(replay: ScheduleOutlook, fmt: str) -> str:
    if fmt == "json":
        return to_json(asdict(replay))
    frame = pd.DataFrame(
        [
            {
                "run": r.run,
                "p_on_time": round(r.p_on_time, 4),
                "delay_h": round(r.delay_h, 2),
                "late_h": round(r.late_h, 2),
                "planned_end": r.planned_end[:16],
                "p90_end": (r.p90_end or "after 9999")[:16],
                "due": r.due[:16],
            }
            for r in replay.runs
        ]
    )
    if fmt == "csv":
        return to_csv(frame)
    return render_table(
        frame,
        title="the schedule replayed: each run's wall time drawn from its process, "
        "after chains and reserved nodes pushing later runs",
        footer=[
            f"the whole quarter holds (every run by its due date) in {replay.holds:.2%} of "
            f"{replay.trials:,} trials"
        ],
    )


def drawn_text(jobs: list[dict], fmt: str, truth: bool) -> str:
    """`simulate --runs-out`: per job the runs drawn, their mean wall time beside the plan's."""
    if fmt == "json":
        return to_json(jobs)
    frame = pd.DataFrame(jobs)
    if fmt == "csv":
        return to_csv(frame)
    if not frame.empty:
        frame["wall_mean_h"] = frame["wall_mean_h"].round(3)
        frame["wall_planned_h"] = frame["wall_planned_h"].round(3)
    return render_table(
        frame,
        title="runs drawn "
        + ("as the truth file has the world" if truth else "from the plan"),
    )
