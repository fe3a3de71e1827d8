"""A solved quarter as `planner batch --format json` writes it (docs/commands.md): runs with their process,
reservations with their utilisation, endpoints with their dates, spending per month, and the measured schedule
confidence; every figure computed here, so the report only formats it and `planner simulate` reads it back."""

from __future__ import annotations

from planner.batch.pipeline import BatchPlan, month_spans
from planner.economics.inputs import estimate_error, process_json, storage_json
from planner.economics.schedule_sim import replay_record
from planner.schema.plan import ScheduleRecord
from planner.schema.quarter import as_scenario
from planner.solve.endpoint_report import serving_reports
from planner.solve.outcome import solve_report_json


def batch_json(plan: BatchPlan, timings: bool = True) -> dict:
    """The documented JSON contract of `planner batch --format json` (`timings` as for `plan_json`)."""
    loaded, result = plan.loaded, plan.result
    solved = result is not None and result.solved
    runs, reservations, months = [], [], []
    if solved:
        chosen = result.chosen.set_index("run")
        for run in (r for r in loaded.quarter.runs if not r.serving):
            if run.name not in chosen.index:
                runs.append(
                    {
                        "run": run.name,
                        "scheduled": False,
                        "reason": plan.infeasible.get(run.name, ""),
                    }
                )
                continue
            row = chosen.loc[run.name]
            start = int(row["start_step"])
            runs.append(
                {
                    "run": run.name,
                    "scheduled": True,
                    "start": loaded.to_time(start).isoformat(),
                    "end": loaded.to_time(
                        start + int(row["duration_steps"])
                    ).isoformat(),
                    "provider": row["provider"],
                    "region": row["region"],
                    "instance_type": row["instance_type"],
                    "nodes": int(row["nodes"]),
                    "gpus": int(row["gpus"]),
                    "market": row["market"],
                    "expected_wall_h": float(row["wall_h"]),
                    "p_deadline": float(row["p_deadline"]),
                    "preemption_events": float(row["preemption_events"]),
                    "waiting_h": float(row["waiting_h"]),
                    "cost_usd": round(float(row["cost_usd"]), 2),
                    **_process(loaded, run, row),
                }
            )
        endpoints = _endpoints(plan)
        for pool, bought in zip(plan.pools, result.bought):
            provider, region, instance = pool.offer_key.split("/", 2)
            on_pool = result.chosen[result.chosen["pool"] == plan.pools.index(pool)]
            used = (
                float((on_pool["nodes"] * on_pool["duration_steps"]).sum())
                * loaded.step_h
            )
            used += sum(
                max(
                    sum(
                        p["nodes"]
                        for p in period["pools"]
                        if p.get("reservation") == pool.label
                    )
                    for period in e["periods"]
                )
                * e["duration_h"]
                for e in endpoints
            )
            capacity = bought * pool.term_h
            reservations.append(
                {
                    "provider": provider,
                    "region": region,
                    "instance_type": instance,
                    "nodes": bought,
                    "start": loaded.to_time(pool.start).isoformat(),
                    "end": loaded.to_time(pool.end).isoformat(),
                    "cost_usd": round(bought * pool.price_per_node_h * pool.term_h, 2),
                    "utilisation": round(used / capacity, 4) if capacity else 0.0,
                    "name": pool.label,
                }
            )
        months = _months(plan)
    data = {
        "status": plan.status,
        "objective_usd": round(result.objective_usd, 2) if solved else None,
        "bound_usd": round(result.bound_usd, 2)
        if solved and result.bound_usd == result.bound_usd
        else None,
        "prices_as_of": as_of.isoformat()
        if (as_of := loaded.catalog.prices_as_of())
        else None,
        "reservations": reservations,
        "runs": runs,
        "endpoints": endpoints if solved else [],
        "months": months,
        "unscheduled": [
            {"run": r, "reason": why} for r, why in plan.infeasible.items()
        ],
    }
    if plan.schedule_confidence is not None:
        data["schedule_confidence"] = (
            _schedule_confidence(plan)
            if solved
            else {
                "target": plan.schedule_confidence,
                "per_run": loaded.quarter.defaults.deadline_confidence,
            }
        )
    if timings:
        data["solve_report"] = solve_report_json(result) | {
            "stopped_by_time_limit": bool(result and result.clocked)
        }
    return data


CONFIDENCE_TRIALS = 2000
"""Trials of the replay that measures `--schedule-confidence` (its standard error is below 0.7 points)."""


def _schedule_confidence(plan: BatchPlan) -> dict:
    """The target, the per-run confidence the slots were sized at, and the replay's measured P(holds)."""
    return {
        "target": plan.schedule_confidence,
        "per_run": plan.loaded.quarter.defaults.deadline_confidence,
        "simulated_holds": plan.simulated_holds,
        "trials": CONFIDENCE_TRIALS,
    }


def measure_confidence(plan: BatchPlan) -> float:
    """P(the whole schedule holds) in CONFIDENCE_TRIALS replays of the schedule as this contract writes it (the
    replay `planner simulate` runs on it)."""
    record = ScheduleRecord.model_validate(
        batch_json(plan, timings=False), strict=False
    )
    return replay_record(plan.loaded.quarter, record, CONFIDENCE_TRIALS, seed=0).holds


def _process(loaded, run, row) -> dict:
    """What `planner simulate` needs to draw the run's wall time again: the cost model's process."""
    spot = row["market"] in ("spot", "spot_fallback")
    interval = float(row["checkpoint_interval_h"])
    process = process_json(
        run,
        work_h=float(row["work_h"]),
        nodes=int(row["nodes"]),
        gpus=int(row["gpus"]),
        spot_rate_per_node_h=float(row["spot_rate_per_node_h"]) if spot else 0.0,
        hw_rate=loaded.quarter.defaults.hardware_failure_per_gpu_h,
        capacity_wait_h=float(row["capacity_wait_h"]) if spot else 0.0,
        capacity_wait_cv=float(row["capacity_wait_cv"]) if spot else 1.0,
        checkpoint_write_h=float(row["checkpoint_write_h"]),
        restart_h=float(row["restart_h"]),
        error=estimate_error(run, loaded.quarter.defaults),
    )
    if (
        row["market"] == "spot_fallback"
    ):  # the slack it switches against, from its start (cost-model §10)
        process["time_budget_h"] = float(row["budget_h"])
    return {
        "gpus_per_node": int(row["gpus_per_node"]),
        "pool": int(row["pool"]),
        "checkpoint_interval_h": interval
        if interval == interval and interval != float("inf")
        else None,
        "inputs": process,
        "storage": storage_json(row),
    }


def _endpoints(plan: BatchPlan) -> list[dict]:
    """The JSON contract's `endpoints` (as `planner solve` reports them), each with its dates; a pool on a
    reservation names it and costs nothing more (its compute is the reservation's)."""
    if plan.endpoints is None:
        return []
    loaded, found = plan.loaded, plan.endpoints
    reports = serving_reports(
        plan.result.serving,
        found.options,
        found.traffic,
        as_scenario(loaded.quarter).workloads,
        loaded.catalog,
        loaded.quarter.defaults.vram_headroom,
        [p.label for p in plan.pools],
    )
    for e in reports:
        start, end = found.windows[e["workload"]]
        e.update(
            start=loaded.to_time(start).isoformat(), end=loaded.to_time(end).isoformat()
        )
    return reports


def _months(plan: BatchPlan) -> list[dict]:
    spans = month_spans(plan.loaded, plan.pools)
    totals = {label: 0.0 for label, *_ in spans}
    for row in plan.result.chosen.itertuples(index=False):
        label = next(
            (label for label, first, end, _ in spans if first <= row.start_step < end),
            spans[-1][0],
        )
        totals[label] += row.cost_usd
    if plan.endpoints is not None and len(plan.result.serving):
        cost = plan.result.serving.groupby("workload")["cost_usd"].sum()
        for label, first, end, _ in spans:
            shares = plan.endpoints.month_shares(first, end)
            totals[label] += sum(
                cost.get(name, 0.0) * share for name, share in shares.items()
            )
    for label, _, _, hours in spans:
        for p, h in hours.items():
            totals[label] += plan.result.bought[p] * plan.pools[p].price_per_node_h * h
    return [
        {"month": label, "cost_usd": round(value, 2)} for label, value in totals.items()
    ]
