"""A plan file (`planner solve --format json`) or a schedule (`planner batch --format json`) read back for
`planner simulate --plan`.

The models below are exactly what the replays read (`report/solve.py` `simulation_rows` and
`economics/simulate.py` for the jobs, `report/traces.py` for `--traces`, `report/serving.py` `endpoint_replays`
and `economics/endpoint_sim.py` for the endpoints, `report/batch.py` `schedule_replay` and
`economics/schedule_sim.py` for a schedule): each field's type, a finite number, and its range, with the
scenario schema's bounds (a century, a trillion dollars, a million GPUs, ...) so nothing the file says can make
a replay divide by zero or allocate gigabytes. Keys the replays do not read are kept as they are. Then the plan
is checked against the scenario (or the schedule against the quarter) it is replayed with. Whether a job's
process can be drawn in reasonable time and a spot_fallback budget leaves spot room are the cost model's to say,
above this layer (`economics/simulate.py` `replay_problem`, asked by `report/solve.py` `unreplayable` and
`report/batch.py` `schedule_unreplayable` before a replay).

Every problem is one `PlannerError` at the file and the key path into it
(`plan.json: assignments[3].inputs.failure_rate_per_h`), saying what was expected and what was found.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_serializer

from planner.errors import PlannerError
from planner.load.scenario import validation_problem
from planner.load.yaml import key_path, parse_json, read_text
from planner.schema.endpoint import MAX_REQUESTS_PER_S
from planner.schema.fields import MAX_HOURS, MAX_USD, MAX_WAIT_CV, BillingStep, PricePerHour, Rate, Tolerance
from planner.schema.quarter import When
from planner.schema.workload import MAX_GPUS

Hours = Annotated[float, Field(gt=0, le=MAX_HOURS)]
HoursOrZero = Annotated[float, Field(ge=0, le=MAX_HOURS)]
PerHour = Annotated[float, Field(ge=0)]
Dollars = Annotated[float, Field(ge=0, le=MAX_USD)]
Share = Annotated[float, Field(ge=0, le=1)]
Nodes = Annotated[int, Field(ge=1, le=MAX_GPUS)]
RequestsPerS = Annotated[float, Field(ge=0, le=MAX_REQUESTS_PER_S)]


class Read(BaseModel):
    """The keys a replay reads of one object of the file, as the JSON contract writes them (numbers as numbers,
    finite); any other key is kept untouched."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


# ---------------------------------------------------------------- a plan's jobs


class EstimateErrorFile(Read):
    """ln(true time / estimated time) ~ Normal(median, sigma) (`economics/estimate_error.py`)."""

    median: Annotated[float, Field(ge=-5, le=5)]
    sigma: Annotated[float, Field(ge=0, le=5)]


class Process(Read):
    """A placed job's failure process (`economics/inputs.py` `process_json`), read back by `inputs_from_process`."""

    work_h: Hours
    checkpoint_write_h: HoursOrZero
    restart_h: HoursOrZero
    failure_rate_per_h: PerHour
    preemption_events_per_h: PerHour = 0.0  # absent in older plans: every failure counts as one (not dumped)
    capacity_wait_h: HoursOrZero = 0.0
    capacity_wait_cv: Annotated[float, Field(ge=1, le=MAX_WAIT_CV)] = 1.0
    interruption_tolerance: Tolerance
    time_budget_h: Hours | None = None  # a schedule's spot_fallback run: the slack it switches against
    estimate_error: EstimateErrorFile | None = None  # absent in older plans: an exact estimate


class AssignmentInputs(Process):
    price_per_node_h: PricePerHour
    billing_granularity_h: BillingStep
    billing_minimum_h: HoursOrZero
    time_budget_h: Hours | None  # null: no deadline
    fallback_price_per_node_h: PricePerHour = 0.0  # spot_fallback only: the on-demand price it falls back to


class Expected(Read):
    wall_h: HoursOrZero  # divides the storage cost; sizes the --traces horizon without a deadline
    p_deadline: Share
    cost_usd: Dollars


class Breakdown(Read):
    storage: Dollars
    egress: Dollars


class Assignment(Read):
    workload: str
    provider: str
    region: str
    instance_type: str
    market: Literal["on_demand", "spot", "spot_fallback"]
    nodes: Nodes
    gpus_per_node: Nodes
    checkpoint_interval_h: Hours | None  # null: no checkpoints (one segment)
    inputs: AssignmentInputs
    expected: Expected
    breakdown_usd: Breakdown


# ---------------------------------------------------------------- a plan's endpoints


class Pool(Read):
    provider: str | None = None  # which option it is: read by `planner estimate --plan`
    region: str | None = None
    instance_type: str | None = None
    market: str | None = None
    tensor_parallel: Annotated[int, Field(ge=1, le=64)] | None = None
    nodes_counted: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None
    nodes: Annotated[int, Field(ge=0, le=MAX_GPUS)]
    load_nodes: Annotated[float, Field(ge=0, le=MAX_GPUS)]
    preemptions_per_node_h: Rate
    correlation: Share
    replace_h: HoursOrZero
    capacity_wait_h: HoursOrZero
    node_requests_per_s: list[RequestsPerS]  # one per request size (bucket) of the traffic
    share_of_requests: list[Share]


class Period(Read):
    hours: str
    days: str = "daily"
    bucket_requests_per_s: list[RequestsPerS]
    pools: list[Pool]


class Endpoint(Read):
    workload: str
    duration_h: Hours
    below_capacity_share: Share
    periods: list[Period]


class Plan(Read):
    assignments: list[Assignment]
    endpoints: list[Endpoint] = []


# ---------------------------------------------------------------- a schedule


class ScheduledRun(Read):
    run: str
    scheduled: Literal[True]
    start: When
    end: When
    market: Literal["on_demand", "spot", "spot_fallback", "reserved"]
    nodes: Nodes
    gpus_per_node: Nodes
    pool: Annotated[int, Field(ge=-1)]  # the reservation's index, or -1
    checkpoint_interval_h: Hours | None
    inputs: Process

    @field_serializer("start", "end")
    def _iso(self, moment) -> str:
        return moment.isoformat()  # as `planner batch` writes it, in UTC


class UnscheduledRun(Read):
    scheduled: bool = False


def _run_kind(value: Any) -> str:
    return "<scheduled>" if isinstance(value, dict) and value.get("scheduled") is True else "<unscheduled>"


class ScheduleReservation(Read):
    nodes: Annotated[int, Field(ge=0, le=MAX_GPUS)]


class Schedule(Read):
    runs: list[Annotated[Annotated[ScheduledRun, Tag("<scheduled>")] | Annotated[UnscheduledRun, Tag("<unscheduled>")],
                         Discriminator(_run_kind)]]
    reservations: list[ScheduleReservation] = []


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


def load_plan(path: Path, scenario) -> tuple[list[dict], list[dict]]:
    """A plan's assignments and endpoints for `scenario` (a `Scenario`): each assignment a job of the scenario, each
    endpoint one of its serving workloads with its traffic's periods and request sizes, every number in range."""
    return plan_from_data(_read_json(path, "plan file"), scenario, path)


def plan_from_data(data: Any, scenario, path: Path = Path("plan")) -> tuple[list[dict], list[dict]]:
    """`load_plan` on data already read (the Python API's `SolvedPlan.to_dict()`); `path` names it in errors."""
    if not isinstance(data, dict) or not isinstance(data.get("assignments"), list) or not (
            data["assignments"] or data.get("endpoints")):
        raise PlannerError("expected a plan from `planner solve --format json` with assignments or endpoints",
                           str(path))
    plan = _validated(Plan, data, path, "planner solve --format json")
    jobs = {w.name: w for w in scenario.workloads if not w.serving}
    serving = {w.name: w for w in scenario.workloads if w.serving}
    for index, a in enumerate(plan.assignments):
        loc = ("assignments", index)
        if a.workload not in jobs:
            why = "is an endpoint (kind: serving), planned under endpoints" if a.workload in serving else \
                "is not in the scenario"
            raise PlannerError(f"workload {a.workload!r} {why}", at(path, loc + ("workload",)))
        _check_job(a, jobs[a.workload], path, loc, fallback_price=True)
    for index, e in enumerate(plan.endpoints):
        _check_endpoint(e, serving, path, ("endpoints", index))
    out = plan.model_dump(exclude_unset=True)
    return out["assignments"], out.get("endpoints", [])


def load_schedule(path: Path, loaded) -> dict:
    """A schedule from `planner batch --format json` for the quarter `loaded`: its scheduled runs name the
    quarter's runs (once each), every number in range, and it has one reservation entry per option."""
    data = _read_json(path, "schedule file")
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or data.get("status") not in (
            "OPTIMAL", "FEASIBLE"):
        raise PlannerError("expected a schedule from `planner batch --format json` (status OPTIMAL or FEASIBLE)",
                           str(path))
    schedule = _validated(Schedule, data, path, "planner batch --format json")
    quarter = loaded.quarter
    if len(schedule.reservations) != len(quarter.reservations):
        raise PlannerError(f"{len(schedule.reservations)} reservation entries for {len(quarter.reservations)} "
                           "reservation options in the quarter", at(path, ("reservations",)))
    for index, (entry, option) in enumerate(zip(schedule.reservations, quarter.reservations)):
        if entry.nodes > option.max_nodes:
            raise PlannerError(f"{entry.nodes} nodes bought of reservation {option.label!r}, which offers at most "
                               f"{option.max_nodes}", at(path, ("reservations", index, "nodes")))
    runs = {r.name: r for r in quarter.runs}
    first: dict[str, int] = {}
    for index, r in enumerate(schedule.runs):
        if not isinstance(r, ScheduledRun):
            continue
        loc = ("runs", index)
        if r.run not in runs:
            raise PlannerError(f"run {r.run!r} is not in the quarter", at(path, loc + ("run",)))
        if r.run in first:
            raise PlannerError(f"run {r.run!r} is scheduled twice (first at runs[{first[r.run]}])",
                               at(path, loc + ("run",)))
        first[r.run] = index
        if r.end < r.start:
            raise PlannerError(f"ends ({r.end.isoformat()}) before it starts ({r.start.isoformat()})",
                               at(path, loc + ("end",)))
        if r.pool >= len(schedule.reservations):
            entries = len(schedule.reservations)
            choices = f"or the index of a reservation entry, 0 to {entries - 1}" if entries else "(no reservations)"
            raise PlannerError(f"expected -1 for no reservation {choices}; got {r.pool}", at(path, loc + ("pool",)))
        if (r.market == "reserved") != (r.pool >= 0):
            raise PlannerError(f"market {r.market!r} with pool {r.pool}: a run on a reservation is market 'reserved' "
                               "with the reservation's index, any other run pool -1", at(path, loc + ("pool",)))
        if r.pool >= 0 and r.nodes > schedule.reservations[r.pool].nodes:
            raise PlannerError(f"{r.nodes} nodes on reservation {r.pool}, which buys "
                               f"{schedule.reservations[r.pool].nodes}: the run could never start on it",
                               at(path, loc + ("nodes",)))
        _check_job(r, runs[r.run], path, loc, fallback_price=False)
    return schedule.model_dump(exclude_unset=True)


# ---------------------------------------------------------------- against the scenario or quarter


def _check_job(job: Assignment | ScheduledRun, workload, path: Path, loc: tuple, fallback_price: bool) -> None:
    """A job's size is one the workload allows, its preemption events are among its failures, and a spot_fallback
    job has what the policy reads: its on-demand price (in a plan) and a time budget."""
    gpus = job.nodes * job.gpus_per_node
    if not workload.gpus.min <= gpus <= workload.gpus.max:
        raise PlannerError(f"{job.nodes} nodes of {job.gpus_per_node} GPUs is {gpus} GPUs, outside the workload's "
                           f"gpus {workload.gpus.min}-{workload.gpus.max}", at(path, loc + ("nodes",)))
    inputs = job.inputs
    if job.market == "spot_fallback":
        if fallback_price and "fallback_price_per_node_h" not in inputs.model_fields_set:
            raise PlannerError("missing required key 'fallback_price_per_node_h' (a spot_fallback job's on-demand "
                               "price)", at(path, loc + ("inputs", "fallback_price_per_node_h")))
        if inputs.time_budget_h is None:
            raise PlannerError("expected a number of hours, got none: a spot_fallback job switches to on-demand "
                               "against its time budget", at(path, loc + ("inputs", "time_budget_h")))
    events = inputs.preemption_events_per_h
    if events > inputs.failure_rate_per_h * (1 + 1e-9):
        raise PlannerError(f"{events:g} preemption events per hour, more than the {inputs.failure_rate_per_h:g} "
                           "failures per hour they are counted among (failure_rate_per_h)",
                           at(path, loc + ("inputs", "preemption_events_per_h")))


def _check_endpoint(e: Endpoint, serving: dict, path: Path, loc: tuple) -> None:
    """An endpoint of one of the scenario's serving workloads, over its traffic's periods (at most a day's minutes
    for each day replayed) with one figure per request size (bucket) wherever the replay indexes them."""
    if e.workload not in serving:
        known = ", ".join(sorted(serving)) or "none"
        raise PlannerError(f"endpoint {e.workload!r} is not a serving workload of the scenario (those: {known})",
                           at(path, loc + ("workload",)))
    traffic = serving[e.workload].traffic
    wanted = [(p.hours, p.days) for p in traffic.periods]
    given = [(p.hours, p.days) for p in e.periods]
    if given != wanted:
        def label(periods):  # the days too: periods of the same hours on other days differ only there
            return [h if d == "daily" else f"{d} {h}" for h, d in periods]
        raise PlannerError(f"periods {label(given)} are not the traffic's {label(wanted)}", at(path, loc + ("periods",)))
    buckets = len(traffic.buckets)
    for j, period in enumerate(e.periods):
        here = loc + ("periods", j)
        lists = [(here + ("bucket_requests_per_s",), period.bucket_requests_per_s)]
        for k, pool in enumerate(period.pools):
            lists += [(here + ("pools", k, key), getattr(pool, key)) for key in ("node_requests_per_s",
                                                                                  "share_of_requests")]
        for place, values in lists:
            if len(values) != buckets:
                raise PlannerError(f"{len(values)} values for the traffic's {buckets} request size(s) (buckets)",
                                   at(path, place))
