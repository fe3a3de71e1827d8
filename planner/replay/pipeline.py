"""What `planner simulate` replays and how: the plan file read back as the plan's records (`schema/plan.py`), or
the input planned now and its plan taken as those same records, then each part replayed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.batch.contract import batch_json
from planner.batch.pipeline import make_batch_plan
from planner.economics.schedule_sim import ScheduleOutlook, replay_record
from planner.errors import NoPlan, PlannerError
from planner.load.plan_file import load_plan, load_schedule, plan_from_data
from planner.load.traces import load_traces
from planner.replay.endpoints import EndpointReplay, replay_endpoints
from planner.replay.jobs import JobReplay, replay_jobs, unreplayable
from planner.replay.schedule import schedule_unreplayable
from planner.replay.traces import TraceReplays, replay_on_traces
from planner.schema.plan import PlanRecord, ScheduleRecord
from planner.solve.endpoint_report import endpoint_reports
from planner.solve.pipeline import assignments, make_plan


@dataclass(frozen=True)
class PlanReplay:
    """A plan replayed: each job's Monte-Carlo beside the cost model, each endpoint minute by minute."""

    jobs: list[JobReplay]
    endpoints: list[EndpointReplay]


def plan_record(
    loaded,
    plan_file: Path | None = None,
    time_limit_s: float = 60.0,
    data: Any = None,
    where: str = "plan",
) -> PlanRecord:
    """The plan to replay: `plan_file` read back (or `data`, a plan's JSON as Python data, named `where` in
    errors) and checked against the scenario, or the scenario planned now (`NoPlan` when it has none)."""
    if plan_file is not None or data is not None:
        record = (
            load_plan(plan_file, loaded.scenario)
            if plan_file is not None
            else plan_from_data(data, loaded.scenario, Path(where))
        )
        if found := unreplayable(record.assignments):
            index, key, why = found
            raise PlannerError(why, f"{plan_file or where}: assignments[{index}].{key}")
        return record
    plan = make_plan(loaded, time_limit_s=time_limit_s)
    if plan.result is None or not plan.result.solved:
        reasons = (
            "; ".join(f"{i['workload']}: {i['reason']}" for i in plan.infeasible)
            or plan.status
        )
        raise NoPlan(f"no plan to simulate ({reasons})", str(loaded.path), plan.status)
    return PlanRecord.model_validate(
        {
            "assignments": assignments(plan, alternatives=0),
            "endpoints": endpoint_reports(plan),
        },
        strict=False,
    )


def replay_plan(
    record: PlanRecord, trials: int, seed: int, progress=None
) -> PlanReplay:
    """Every job Monte-Carlo'd (`trials` each; `progress(fraction)` as they go) and every endpoint replayed."""
    jobs = (
        replay_jobs(record.assignments, trials, seed, progress)
        if record.assignments
        else []
    )
    return PlanReplay(
        jobs, replay_endpoints(record.endpoints, seed) if record.endpoints else []
    )


def replay_traces(loaded, record: PlanRecord, traces_dir: str | None) -> TraceReplays:
    """`--traces`: the plan's spot jobs on the shipped traces (`traces_dir` "shipped") or on a folder's."""
    return replay_on_traces(
        loaded,
        record.assignments,
        load_traces(None if traces_dir == "shipped" else Path(traces_dir)),
    )


def schedule_record(
    loaded, plan_file: Path | None = None, time_limit_s: float = 60.0
) -> ScheduleRecord:
    """The schedule to replay: `plan_file` read back and checked against the quarter, or the quarter
    scheduled now (`NoPlan` when it has none)."""
    if plan_file is not None:
        record = load_schedule(plan_file, loaded)
        if found := schedule_unreplayable(record):
            index, key, why = found
            raise PlannerError(why, f"{plan_file}: runs[{index}].{key}")
        return record
    plan = make_batch_plan(loaded, time_limit_s=time_limit_s)
    if plan.result is None or not plan.result.solved:
        reasons = (
            "; ".join(f"{r}: {why}" for r, why in plan.infeasible.items())
            or plan.status
        )
        raise NoPlan(
            f"no schedule to simulate ({reasons})", str(loaded.path), plan.status
        )
    return ScheduleRecord.model_validate(batch_json(plan, timings=False), strict=False)


def replay_schedule(
    loaded, record: ScheduleRecord, trials: int, seed: int
) -> ScheduleOutlook:
    """The schedule replayed `trials` times: per run P(on time) and delays, and P(the quarter holds)."""
    return replay_record(loaded.quarter, record, trials, seed)
