"""A plan file (`planner solve --format json`) or a schedule (`planner batch --format json`) read back into
the plan's records (`schema/plan.py`) for `planner simulate --plan` and `planner estimate --plan`, then checked
against the scenario (or the schedule against the quarter) it is replayed with. Whether a job's process can be
drawn in reasonable time and a spot_fallback budget leaves spot room are the cost model's to say, above this
layer (`replay/` asks `economics/simulate.py` `replay_problem` before a replay).

Every problem is one `PlannerError` at the file and the key path into it
(`plan.json: assignments[3].inputs.failure_rate_per_h`), saying what was expected and what was found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from planner.errors import PlannerError
from planner.load.scenario import validation_problem
from planner.load.yaml import key_path, parse_json, read_text
from planner.schema.plan import (
    AssignmentRecord,
    EndpointRecord,
    PlanRecord,
    ScheduledRunRecord,
    ScheduleRecord,
)

# ---------------------------------------------------------------- reading


def at(path: Path, loc: tuple) -> str:
    """`plan.json: assignments[3].inputs` (the file alone for the whole document)."""
    return f"{path}: {key_path(loc)}" if loc else str(path)


def _read_json(path: Path, what: str):
    return parse_json(read_text(path, what, "JSON"), path, what)


def _validated(model: type[BaseModel], data: Any, path: Path, command: str):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        message, loc = validation_problem(model, exc, data)
        if message.startswith("missing required key"):
            message += f" (a file from this version of `{command}`)"
        raise PlannerError(message, at(path, loc)) from None


def load_plan(path: Path, scenario) -> PlanRecord:
    """A plan's assignments and endpoints for `scenario` (a `Scenario`): each assignment a job of the scenario, each
    endpoint one of its serving workloads with its traffic's periods and request sizes, every number in range."""
    return plan_from_data(_read_json(path, "plan file"), scenario, path)


def plan_from_data(data: Any, scenario, path: Path = Path("plan")) -> PlanRecord:
    """`load_plan` on data already read (the Python API's `SolvedPlan.to_dict()`); `path` names it in errors."""
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("assignments"), list)
        or not (data["assignments"] or data.get("endpoints"))
    ):
        raise PlannerError(
            "expected a plan from `planner solve --format json` with assignments or endpoints",
            str(path),
        )
    plan = _validated(PlanRecord, data, path, "planner solve --format json")
    jobs = {w.name: w for w in scenario.workloads if not w.serving}
    serving = {w.name: w for w in scenario.workloads if w.serving}
    for index, a in enumerate(plan.assignments):
        loc = ("assignments", index)
        if a.workload not in jobs:
            why = (
                "is an endpoint (kind: serving), planned under endpoints"
                if a.workload in serving
                else "is not in the scenario"
            )
            raise PlannerError(
                f"workload {a.workload!r} {why}", at(path, loc + ("workload",))
            )
        _check_job(a, jobs[a.workload], path, loc, fallback_price=True)
    for index, e in enumerate(plan.endpoints):
        _check_endpoint(e, serving, path, ("endpoints", index))
    return plan


def load_schedule(path: Path, loaded) -> ScheduleRecord:
    """A schedule from `planner batch --format json` for the quarter `loaded`: its scheduled runs name the
    quarter's runs (once each), every number in range, and it has one reservation entry per option."""
    data = _read_json(path, "schedule file")
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("runs"), list)
        or data.get("status") not in ("OPTIMAL", "FEASIBLE")
    ):
        raise PlannerError(
            "expected a schedule from `planner batch --format json` (status OPTIMAL or FEASIBLE)",
            str(path),
        )
    schedule = _validated(ScheduleRecord, data, path, "planner batch --format json")
    quarter = loaded.quarter
    if len(schedule.reservations) != len(quarter.reservations):
        raise PlannerError(
            f"{len(schedule.reservations)} reservation entries for {len(quarter.reservations)} "
            "reservation options in the quarter",
            at(path, ("reservations",)),
        )
    for index, (entry, option) in enumerate(
        zip(schedule.reservations, quarter.reservations)
    ):
        if entry.nodes > option.max_nodes:
            raise PlannerError(
                f"{entry.nodes} nodes bought of reservation {option.label!r}, which offers at most "
                f"{option.max_nodes}",
                at(path, ("reservations", index, "nodes")),
            )
    runs = {r.name: r for r in quarter.runs}
    first: dict[str, int] = {}
    for index, r in enumerate(schedule.runs):
        if not isinstance(r, ScheduledRunRecord):
            continue
        loc = ("runs", index)
        if r.run not in runs:
            raise PlannerError(
                f"run {r.run!r} is not in the quarter", at(path, loc + ("run",))
            )
        if r.run in first:
            raise PlannerError(
                f"run {r.run!r} is scheduled twice (first at runs[{first[r.run]}])",
                at(path, loc + ("run",)),
            )
        first[r.run] = index
        if r.end < r.start:
            raise PlannerError(
                f"ends ({r.end.isoformat()}) before it starts ({r.start.isoformat()})",
                at(path, loc + ("end",)),
            )
        if r.pool >= len(schedule.reservations):
            entries = len(schedule.reservations)
            choices = (
                f"or the index of a reservation entry, 0 to {entries - 1}"
                if entries
                else "(no reservations)"
            )
            raise PlannerError(
                f"expected -1 for no reservation {choices}; got {r.pool}",
                at(path, loc + ("pool",)),
            )
        if (r.market == "reserved") != (r.pool >= 0):
            raise PlannerError(
                f"market {r.market!r} with pool {r.pool}: a run on a reservation is market 'reserved' "
                "with the reservation's index, any other run pool -1",
                at(path, loc + ("pool",)),
            )
        if r.pool >= 0 and r.nodes > schedule.reservations[r.pool].nodes:
            raise PlannerError(
                f"{r.nodes} nodes on reservation {r.pool}, which buys "
                f"{schedule.reservations[r.pool].nodes}: the run could never start on it",
                at(path, loc + ("nodes",)),
            )
        _check_job(r, runs[r.run], path, loc, fallback_price=False)
    return schedule


# ---------------------------------------------------------------- against the scenario or quarter


def _check_job(
    job: AssignmentRecord | ScheduledRunRecord,
    workload,
    path: Path,
    loc: tuple,
    fallback_price: bool,
) -> None:
    """A job's size is one the workload allows, its preemption events are among its failures, and a spot_fallback
    job has what the policy reads: its on-demand price (in a plan) and a time budget."""
    gpus = job.nodes * job.gpus_per_node
    if not workload.gpus.min <= gpus <= workload.gpus.max:
        raise PlannerError(
            f"{job.nodes} nodes of {job.gpus_per_node} GPUs is {gpus} GPUs, outside the workload's "
            f"gpus {workload.gpus.min}-{workload.gpus.max}",
            at(path, loc + ("nodes",)),
        )
    inputs = job.inputs
    if job.market == "spot_fallback":
        if fallback_price and inputs.fallback_price_per_node_h is None:
            raise PlannerError(
                "missing required key 'fallback_price_per_node_h' (a spot_fallback job's on-demand "
                "price)",
                at(path, loc + ("inputs", "fallback_price_per_node_h")),
            )
        if inputs.time_budget_h is None:
            raise PlannerError(
                "expected a number of hours, got none: a spot_fallback job switches to on-demand "
                "against its time budget",
                at(path, loc + ("inputs", "time_budget_h")),
            )
    events = inputs.preemption_events_per_h
    if events is not None and events > inputs.failure_rate_per_h * (1 + 1e-9):
        raise PlannerError(
            f"{events:g} preemption events per hour, more than the {inputs.failure_rate_per_h:g} "
            "failures per hour they are counted among (failure_rate_per_h)",
            at(path, loc + ("inputs", "preemption_events_per_h")),
        )


def _check_endpoint(e: EndpointRecord, serving: dict, path: Path, loc: tuple) -> None:
    """An endpoint of one of the scenario's serving workloads, over its traffic's periods (at most a day's minutes
    for each day replayed) with one figure per request size (bucket) wherever the replay indexes them."""
    if e.workload not in serving:
        known = ", ".join(sorted(serving)) or "none"
        raise PlannerError(
            f"endpoint {e.workload!r} is not a serving workload of the scenario (those: {known})",
            at(path, loc + ("workload",)),
        )
    traffic = serving[e.workload].traffic
    wanted = [(p.hours, p.days) for p in traffic.periods]
    given = [(p.hours, p.days) for p in e.periods]
    if given != wanted:

        def label(
            periods,
        ):  # the days too: periods of the same hours on other days differ only there
            return [h if d == "daily" else f"{d} {h}" for h, d in periods]

        raise PlannerError(
            f"periods {label(given)} are not the traffic's {label(wanted)}",
            at(path, loc + ("periods",)),
        )
    buckets = len(traffic.buckets)
    for j, period in enumerate(e.periods):
        here = loc + ("periods", j)
        lists = [(here + ("bucket_requests_per_s",), period.bucket_requests_per_s)]
        for k, pool in enumerate(period.pools):
            lists += [
                (here + ("pools", k, key), getattr(pool, key))
                for key in ("node_requests_per_s", "share_of_requests")
            ]
        for place, values in lists:
            if len(values) != buckets:
                raise PlannerError(
                    f"{len(values)} values for the traffic's {buckets} request size(s) (buckets)",
                    at(path, place),
                )
