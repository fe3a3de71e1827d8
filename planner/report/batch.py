"""The `planner batch` report: runs, reservations with utilisation, spending per month, as a
table, the JSON contract or one sectioned CSV."""
from __future__ import annotations

import dataclasses
import datetime as dt

import pandas as pd

from planner.batch.pipeline import BatchPlan, month_spans
from planner.economics.inputs import estimate_error, process_json
from planner.report.render import render_table, to_csv, to_json
from planner.report.serving import ENDPOINT_DROP, endpoint_footer, endpoint_frame, serving_reports
from planner.report.status import solve_report_json, status_line
from planner.schema.quarter import as_scenario
from planner.solve.outcome import SOLVED


def batch_json(plan: BatchPlan, timings: bool = True) -> dict:
    """The documented JSON contract of `planner batch --format json` (`timings` as for `plan_json`)."""
    loaded, result = plan.loaded, plan.result
    solved = result is not None and result.solved
    runs, reservations, months = [], [], []
    if solved:
        chosen = result.chosen.set_index("run")
        for run in (r for r in loaded.quarter.runs if not r.serving):
            if run.name not in chosen.index:
                runs.append({"run": run.name, "scheduled": False, "reason": plan.infeasible.get(run.name, "")})
                continue
            row = chosen.loc[run.name]
            start = int(row["start_step"])
            runs.append({
                "run": run.name, "scheduled": True, "start": loaded.to_time(start).isoformat(),
                "end": loaded.to_time(start + int(row["duration_steps"])).isoformat(),
                "provider": row["provider"], "region": row["region"], "instance_type": row["instance_type"],
                "nodes": int(row["nodes"]), "gpus": int(row["gpus"]), "market": row["market"],
                "expected_wall_h": float(row["wall_h"]), "p_deadline": float(row["p_deadline"]),
                "preemption_events": float(row["preemption_events"]), "waiting_h": float(row["waiting_h"]),
                "cost_usd": round(float(row["cost_usd"]), 2), **_process(loaded, run, row),
            })
        endpoints = _endpoints(plan)
        for pool, bought in zip(plan.pools, result.bought):
            provider, region, instance = pool.offer_key.split("/", 2)
            on_pool = result.chosen[result.chosen["pool"] == plan.pools.index(pool)]
            used = float((on_pool["nodes"] * on_pool["duration_steps"]).sum()) * loaded.step_h
            used += sum(max(sum(p["nodes"] for p in period["pools"] if p.get("reservation") == pool.label)
                            for period in e["periods"]) * e["duration_h"] for e in endpoints)
            capacity = bought * pool.term_h
            reservations.append({
                "provider": provider, "region": region, "instance_type": instance, "nodes": bought,
                "start": loaded.to_time(pool.start).isoformat(), "end": loaded.to_time(pool.end).isoformat(),
                "cost_usd": round(bought * pool.price_per_node_h * pool.term_h, 2),
                "utilisation": round(used / capacity, 4) if capacity else 0.0, "name": pool.label,
            })
        months = _months(plan)
    data = {
        "status": plan.status,
        "objective_usd": round(result.objective_usd, 2) if solved else None,
        "bound_usd": round(result.bound_usd, 2) if solved and result.bound_usd == result.bound_usd else None,
        "prices_as_of": as_of.isoformat() if (as_of := loaded.catalog.prices_as_of()) else None,
        "reservations": reservations, "runs": runs, "endpoints": endpoints if solved else [], "months": months,
        "unscheduled": [{"run": r, "reason": why} for r, why in plan.infeasible.items()],
    }
    if plan.schedule_confidence is not None:
        data["schedule_confidence"] = _schedule_confidence(plan, data) if solved else {
            "target": plan.schedule_confidence, "per_run": loaded.quarter.defaults.deadline_confidence}
    if timings:
        data["solve_report"] = solve_report_json(result) | {"stopped_by_time_limit": bool(result and result.clocked)}
    return data


CONFIDENCE_TRIALS = 2000
"""Trials of the replay that measures `--schedule-confidence` (its standard error is below 0.7 points)."""


def _schedule_confidence(plan: BatchPlan, data: dict) -> dict:
    """The target, the per-run confidence the slots were sized at, and the replay's measured P(holds)."""
    replay = schedule_replay(plan.loaded, data, CONFIDENCE_TRIALS, seed=0)
    return {"target": plan.schedule_confidence, "per_run": plan.loaded.quarter.defaults.deadline_confidence,
            "simulated_holds": replay["holds"], "trials": CONFIDENCE_TRIALS}


REPLAY_FIELDS = ("gpus_per_node", "pool", "checkpoint_interval_h", "inputs")
"""A scheduled run's fields for `planner simulate` (JSON only: the CSV and the table keep the schedule)."""


def _process(loaded, run, row) -> dict:
    """What `planner simulate` needs to draw the run's wall time again: the cost model's process."""
    spot = row["market"] in ("spot", "spot_fallback")
    interval = float(row["checkpoint_interval_h"])
    process = process_json(run, work_h=float(row["work_h"]), nodes=int(row["nodes"]), gpus=int(row["gpus"]),
                           lam_spot=float(row["lam_spot"]) if spot else 0.0,
                           hw_rate=loaded.quarter.defaults.hardware_failure_per_gpu_h,
                           capacity_wait_h=float(row["capacity_wait_h"]) if spot else 0.0,
                           capacity_wait_cv=float(row["capacity_wait_cv"]) if spot else 1.0,
                           error=estimate_error(run, loaded.quarter.defaults))
    if row["market"] == "spot_fallback":  # the slack it switches against, from its start (cost-model §10)
        process["time_budget_h"] = float(row["budget_h"])
    return {"gpus_per_node": int(row["gpus_per_node"]), "pool": int(row["pool"]),
            "checkpoint_interval_h": interval if interval == interval and interval != float("inf") else None,
            "inputs": process}


def _endpoints(plan: BatchPlan) -> list[dict]:
    """The JSON contract's `endpoints` (as `planner solve` reports them), each with its dates; a pool on a
    reservation names it and costs nothing more (its compute is the reservation's)."""
    if plan.endpoints is None:
        return []
    loaded, found = plan.loaded, plan.endpoints
    reports = serving_reports(plan.result.serving, found.options, found.traffic, as_scenario(loaded.quarter).workloads,
                              loaded.catalog, loaded.quarter.defaults.vram_headroom, [p.label for p in plan.pools])
    for e in reports:
        start, end = found.windows[e["workload"]]
        e.update(start=loaded.to_time(start).isoformat(), end=loaded.to_time(end).isoformat())
    return reports


def _months(plan: BatchPlan) -> list[dict]:
    spans = month_spans(plan.loaded, plan.pools)
    totals = {label: 0.0 for label, *_ in spans}
    for row in plan.result.chosen.itertuples(index=False):
        label = next((label for label, first, end, _ in spans if first <= row.start_step < end), spans[-1][0])
        totals[label] += row.cost_usd
    if plan.endpoints is not None and len(plan.result.serving):
        cost = plan.result.serving.groupby("workload")["cost_usd"].sum()
        for label, first, end, _ in spans:
            shares = plan.endpoints.month_shares(first, end)
            totals[label] += sum(cost.get(name, 0.0) * share for name, share in shares.items())
    for label, _, _, hours in spans:
        for p, h in hours.items():
            totals[label] += plan.result.bought[p] * plan.pools[p].price_per_node_h * h
    return [{"month": label, "cost_usd": round(value, 2)} for label, value in totals.items()]


SCHEDULE_DROP = ("region", "provider", "nodes", "end")
"""A schedule's columns left out first in a narrow terminal: it keeps the run, its start, the offer, GPUs, market,
hours, P(deadline) and cost."""


def batch_text(plan: BatchPlan, fmt: str, timings: bool = True, data: dict | None = None) -> str:
    """The schedule in `fmt`; `data`, its `batch_json` where the caller has it already."""
    data = batch_json(plan, timings) if data is None else data
    if fmt == "json":
        return to_json(data)
    runs = pd.DataFrame([r for r in data["runs"] if r["scheduled"]],
                        columns=["run", "scheduled", "start", "end", "provider", "region", "instance_type", "nodes",
                                 "gpus", "market", "expected_wall_h", "p_deadline", "cost_usd"])
    if fmt == "csv":
        return sections_csv(data)
    if plan.status not in SOLVED:
        frame = pd.DataFrame(data["unscheduled"], columns=["run", "reason"]).rename(columns={"reason": "why"})
        title = f"{plan.status}: quarter {plan.loaded.quarter.name!r} cannot be planned"
        return render_table(frame, title=title) if not frame.empty else title + "\n"
    shown = runs.assign(start=runs["start"].astype(str).str[:16], end=runs["end"].astype(str).str[:16],
                        expected_wall_h=runs["expected_wall_h"].astype(float).round(1),
                        p_deadline=runs["p_deadline"].astype(float).round(3))
    shown = shown.drop(columns=["scheduled", "reason"], errors="ignore")
    text = render_table(shown, title=f"schedule for quarter {plan.loaded.quarter.name!r}", drop=SCHEDULE_DROP,
                        headers={"instance_type": "instance", "expected_wall_h": "hours", "p_deadline": "P(dl)"})
    if data["endpoints"]:
        text += "\n" + render_table(endpoint_frame(data["endpoints"]), title="endpoints", drop=ENDPOINT_DROP,
                                    footer=endpoint_footer(data["endpoints"]))
    if data["reservations"]:
        bought = pd.DataFrame(data["reservations"])
        bought = bought.assign(start=bought["start"].astype(str).str[:16], end=bought["end"].astype(str).str[:16])
        text += "\n" + render_table(bought, title="reservations to buy")  # times as the schedule writes them
    text += "\n" + render_table(pd.DataFrame(data["months"]), title="spending per month")
    if data["unscheduled"]:
        text += "\n" + render_table(pd.DataFrame(data["unscheduled"]).rename(columns={"reason": "why"}),
                                    title="runs left out")
    count = len(plan.endpoints.traffic) if plan.endpoints is not None else 0
    served = f" and {len(plan.endpoints.options)} options for {count} endpoint{'s' if count > 1 else ''}" \
        if count else ""
    runs = sum(1 for r in plan.loaded.quarter.runs if not r.serving)
    if "schedule_confidence" in data and "simulated_holds" in data["schedule_confidence"]:
        sc = data["schedule_confidence"]
        text += (f"\nschedule confidence: every run's slot sized at {sc['per_run']:.4g} so that the whole schedule "
                 f"holds with probability >= {sc['target']:g}; replayed, it holds in {sc['simulated_holds']:.1%} "
                 f"of {sc['trials']:,} trials\n")
    text += "\n" + status_line(plan.result, f"{len(plan.cands)} candidates for {runs} runs{served}",
                               data["prices_as_of"]) + "\n"
    return text


def sections_csv(data: dict) -> str:
    """Runs, reservations and months in one CSV, told apart by its first column `section`
    (one file, so a pipe or `-o FILE` carries the whole plan; empty cells where a section has no such column)."""
    parts = [pd.DataFrame(data[key]).drop(columns=list(REPLAY_FIELDS), errors="ignore").assign(section=name)
             for key, name in (("runs", "run"), ("reservations", "reservation"), ("months", "month")) if data[key]]
    if not parts:
        return "section\n"
    frame = pd.concat(parts, ignore_index=True)
    for column in ("nodes", "gpus"):
        if column in frame:
            frame[column] = frame[column].astype("Int64")  # whole numbers, blank where a section has none
    return to_csv(frame[["section"] + [c for c in frame.columns if c != "section"]])


def _run_inputs(r: dict):
    """A scheduled run's process (the JSON contract above) as the cost model's inputs: wall time only, no
    prices; a spot_fallback run with the slack it switches against."""
    from planner.economics.inputs import inputs_from_process

    i = r["inputs"]
    inputs = inputs_from_process(i, nodes=int(r["nodes"]), gpus_per_node=int(r["gpus_per_node"]),
                                 checkpoint_interval_h=r["checkpoint_interval_h"])
    return dataclasses.replace(inputs, time_budget_h=i["time_budget_h"]) if r["market"] == "spot_fallback" else inputs


def schedule_unreplayable(data: dict) -> tuple[int, str, str] | None:
    """The first scheduled run of a schedule (the JSON contract above) the Monte-Carlo cannot replay in
    reasonable time (`economics/simulate.py` `replay_problem`), as (its index among `runs`, the key at fault
    under it, why); None when every one can be."""
    from planner.economics.simulate import replay_problem

    for number, r in enumerate(data["runs"]):
        if r.get("scheduled") and (found := replay_problem(_run_inputs(r), r["market"])):
            field, why = found
            return number, f"inputs.{field}" if field else "inputs", why
    return None


def schedule_replay(loaded, data: dict, trials: int, seed: int) -> dict:
    """Monte-Carlo of a schedule (the JSON contract above): every run's wall time drawn from its cost-model
    process, then the calendar replayed (`economics/schedule_sim.py`). Per run: P(it ends by its due date),
    the expected delay past its planned end and past its due date; and P(the whole quarter holds)."""
    import numpy as np

    from planner.economics.schedule_sim import PlannedRun, replay_schedule
    from planner.economics.simulate import simulate, simulate_fallback

    quarter = loaded.quarter
    horizon = quarter.horizon
    hours = lambda moment: (moment - horizon.start).total_seconds() / 3600  # noqa: E731
    runs, walls = [], {}
    by_name = {r.name: r for r in quarter.runs}
    scheduled = [r for r in data["runs"] if r.get("scheduled")]
    for number, r in enumerate(scheduled):
        run, inputs = by_name[r["run"]], _run_inputs(r)
        if r["market"] == "spot_fallback":  # wall time only: the on-demand price does not move it
            walls[run.name] = simulate_fallback(inputs, 1.0, trials, seed + number).actual_h
        else:
            walls[run.name] = simulate(inputs, trials, seed + number).actual_h
        start, end = (dt.datetime.fromisoformat(r[k]) for k in ("start", "end"))
        due = run.due or horizon.end
        runs.append(PlannedRun(run.name, hours(start), hours(end), hours(due), tuple(run.after), int(r["pool"]),
                               int(r["nodes"]), run.required))
    bought = [int(e["nodes"]) for e in data["reservations"]]
    result = replay_schedule(runs, walls, bought)
    return {"trials": trials, "seed": seed, "holds": result.holds,
            "runs": [{"run": p.name, "p_on_time": result.on_time[p.name], "delay_h": result.delay_h[p.name],
                      "late_h": result.late_h[p.name],
                      "planned_end": data_end, "due": (by_name[p.name].due or horizon.end).isoformat(),
                      "p90_end": _moment(horizon.start, float(np.quantile(result.end_h[p.name], 0.9)))}
                     for p, data_end in zip(runs, [r["end"] for r in scheduled])]}


def _moment(start: dt.datetime, hours: float) -> str | None:
    """`start` plus `hours` as ISO 8601; None past the year 9999, where dates end (a run that waits millennia)."""
    try:
        return (start + dt.timedelta(hours=hours)).isoformat()
    except OverflowError:
        return None


def schedule_replay_text(replay: dict, fmt: str) -> str:
    if fmt == "json":
        return to_json(replay)
    frame = pd.DataFrame([{"run": r["run"], "p_on_time": round(r["p_on_time"], 4), "delay_h": round(r["delay_h"], 2),
                           "late_h": round(r["late_h"], 2), "planned_end": r["planned_end"][:16],
                           "p90_end": (r["p90_end"] or "after 9999")[:16], "due": r["due"][:16]}
                          for r in replay["runs"]])
    if fmt == "csv":
        return to_csv(frame)
    return render_table(frame, title="the schedule replayed: each run's wall time drawn from its process, "
                                     "after chains and reserved nodes pushing later runs",
                        footer=[f"the whole quarter holds (every run by its due date) in {replay['holds']:.2%} of "
                                f"{replay['trials']:,} trials"])
