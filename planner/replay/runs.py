"""`planner simulate --runs-out`: a plan's jobs run many times event by event (`economics/run_log`), written as
the run records `planner calibrate` reads. With a truth (a calibration file), each job is run as that truth
says the world is, not as the plan assumed: its throughput, preemptions, capacity waits, checkpoint and restart
times; calibrate fed these records should find that truth again."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from dataclasses import dataclass

from planner.economics.candidate import CandidateInputs, events_per_loss
from planner.economics.inputs import inputs_from_assignment
from planner.economics.run_log import draw_runs
from planner.errors import PlannerError
from planner.physics.estimate import STATED_RECIPE
from planner.schema.calibration import Calibration
from planner.schema.plan import AssignmentRecord, PlanRecord
from planner.solve.assignment_checks import spot_settings

FIRST_START = dt.datetime(2027, 1, 4, tzinfo=dt.UTC)
"""When the first drawn run of each job starts; each next one starts when the one before ends."""


@dataclass(frozen=True)
class DrawnRuns:
    """The records, and per job what was drawn beside what the plan expects."""

    rows: list[dict]  # `RUN_COLUMNS`, as the CSV holds them
    jobs: list[dict]  # workload, runs, mean wall drawn, the plan's, preemptions
    skipped: list[tuple[str, str]]


def _moment(start: dt.datetime, hours: float) -> str:
    return (start + dt.timedelta(hours=hours)).isoformat(timespec="seconds")


def truth_inputs(
    a: AssignmentRecord, inputs: CandidateInputs, loaded, truth: Calibration
) -> CandidateInputs:
    """The job's process as `truth` has it, the plan's own calibration (the scenario's) taken out first."""
    catalog = loaded.catalog
    planned = catalog.calibration or Calibration()
    workload = next(w for w in loaded.scenario.workloads if w.name == a.workload)
    recipe = (a.parallelism or {}).get("recipe") or STATED_RECIPE
    gpu = a.gpu or ""
    change: dict = {}
    storage = a.storage
    load_h = (storage.load_h or 0.0) if storage else 0.0
    bound = storage is not None and (storage.data_bound_share or 0.0) > 0
    if workload.training_method != "inference" and not bound:
        speed = planned.efficiency_factor(gpu, recipe) / truth.efficiency_factor(
            gpu, recipe
        )
        change["work_h"] = (inputs.work_h - load_h) * speed + load_h
    for p in truth.preemption:
        if (p.provider, p.instance_type) != (a.provider, a.instance_type):
            continue
        if a.market in ("spot", "spot_fallback"):
            key = f"{a.provider}/{a.region}/{a.instance_type}"
            offers = catalog.offers.set_index("key")
            if key not in offers.index:
                raise PlannerError(
                    f"{a.workload} is placed on {key}, which the scenario's catalogs do not offer",
                    "--plan",
                )
            offer = {**offers.loc[key].to_dict(), "key": key}
            correlation = spot_settings(loaded.scenario.overrides, offer, catalog)[0]
            if p.rate_per_node_h is not None:
                change["spot_rate_per_node_h"] = (
                    p.rate_per_node_h
                    * float(events_per_loss(a.nodes, correlation))
                    / a.nodes
                )
            if p.capacity_wait_h is not None:
                change["capacity_wait_h"] = p.capacity_wait_h
                change["capacity_wait_cv"] = p.capacity_wait_cv or 1.0
    if storage is not None:
        planned_c, planned_r = planned.storage_factors(storage.name)
        true_c, true_r = truth.storage_factors(storage.name)
        if workload.checkpoint.write_time is None:
            change["checkpoint_write_h"] = (
                inputs.checkpoint_write_h * true_c / planned_c
            )
        change["restart_h"] = inputs.restart_h * true_r / planned_r
    return dataclasses.replace(inputs, **change)


def truth_spread(a: AssignmentRecord, truth: Calibration) -> float:
    """The run-to-run spread of throughput the truth gives the job's GPU and recipe (its `sigma`; 0: none)."""
    recipe = (a.parallelism or {}).get("recipe") or STATED_RECIPE
    for entry in truth.efficiency:
        if (entry.gpu, entry.recipe) == (a.gpu, recipe):
            return entry.sigma or 0.0
    return 0.0


def drawn_runs(
    loaded, record: PlanRecord, runs: int, seed: int, truth: Calibration | None
) -> DrawnRuns:
    """`runs` runs of each job of the plan, one after another from FIRST_START (`seed`: the same runs)."""
    rows, jobs, skipped = [], [], []
    for index, a in enumerate(record.assignments):
        if a.inputs.interruption_tolerance == "stateless":
            skipped.append((a.workload, "a stateless job's nodes restart on their own"))
            continue
        inputs = inputs_from_assignment(a)
        # the run keeps the plan's checkpoint interval whatever its true speed (a job without one never writes one)
        inputs = dataclasses.replace(
            inputs, checkpoint_interval_h=a.checkpoint_interval_h or math.inf
        )
        spread = 0.0
        if truth is not None:
            inputs = truth_inputs(a, inputs, loaded, truth)
            spread = truth_spread(a, truth)
        start = FIRST_START
        walls, events, moved = [], 0, 0
        fallback = a.market == "spot_fallback"
        on_demand_price = a.inputs.fallback_price_per_node_h or (
            (a.purchase.overrun_price_per_node_h or 0.0) if a.purchase else 0.0
        )
        logs = draw_runs(inputs, runs, seed + index, spread, fallback)
        for number, log in enumerate(logs):
            preemptions = [i for i in log.interruptions if i.preemption]
            failures = [i for i in log.interruptions if not i.preemption]
            cost = (
                log.billed_node_h * inputs.price_per_node_h
                + log.on_demand_node_h * on_demand_price
                + inputs.storage_usd_per_h * log.wall_h
                + inputs.egress_usd
            )
            row = {
                "run": f"{a.workload}-{number + 1:04d}",
                "workload": a.workload,
                "provider": a.provider,
                "region": a.region,
                "instance_type": a.instance_type,
                "nodes": a.nodes,
                "market": a.market,
                "start": _moment(start, 0.0),
                "end": _moment(start, log.wall_h),
                "tokens": "",
                "preemptions": ";".join(
                    f"{_moment(start, i.at_h)}/{_moment(start, i.back_h)}"
                    for i in preemptions
                ),
                "failures": ";".join(_moment(start, i.at_h) for i in failures),
                "fallback_at": ""
                if log.fallback_h is None
                else _moment(start, log.fallback_h),
                "checkpoint_write_s": round(inputs.checkpoint_write_h * 3600, 3),
                "restart_s": round(inputs.restart_h * 3600, 3),
                "billed_usd": round(cost, 2),
            }
            rows.append(row)
            walls.append(log.wall_h)
            events += len(preemptions)
            moved += log.fallback_h is not None
            # the next run starts when this one ends, on a whole second
            start = dt.datetime.fromisoformat(row["end"])
        jobs.append(
            {
                "workload": a.workload,
                "runs": runs,
                "wall_mean_h": math.fsum(walls) / len(walls),
                "wall_planned_h": a.expected.wall_h,
                "preemptions": events,
                "moved_to_on_demand": moved,
            }
        )
    return DrawnRuns(rows, jobs, skipped)
