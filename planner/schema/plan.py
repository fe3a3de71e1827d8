"""The plan's JSON contract as types: the names shared by the layers that write, price and check it
(docs/cost-model.md), and the records a replay reads back (`planner simulate --plan`, `planner estimate --plan`).

The records hold exactly what the replays read (`replay/` for jobs, traces, endpoints and schedules): each
field's type, a finite number, and its range, with the scenario schema's bounds (a century, a trillion dollars,
a million GPUs, ...) so nothing a plan file says can make a replay divide by zero or allocate gigabytes. Keys the
replays do not read are kept as they are (`extra="allow"`); `load/plan_file.py` reads a file into them and checks
it against its scenario or quarter.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_serializer

from planner.schema.quarter import When
from planner.schema.scenario import (MAX_GPUS, MAX_HOURS, MAX_REQUESTS_PER_S, MAX_USD, MAX_WAIT_CV, BillingStep,
                                     PricePerHour, Rate, Tolerance)

PRICED_KEYS = ("compute", "checkpointing", "startup", "preemption_rework", "rounding_waste")
"""The parts of a job's expected cost priced per node-hour (the cost model's)."""
BREAKDOWN_KEYS = PRICED_KEYS + ("storage", "egress")
"""Every part of a job's expected cost, in the order `breakdown_usd` lists them."""


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
    preemption_events_per_h: PerHour | None = None  # absent in older plans: every failure counts as one
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
    fallback_price_per_node_h: PricePerHour | None = None  # spot_fallback only: the on-demand price it falls back to


class Expected(Read):
    wall_h: HoursOrZero  # divides the storage cost; sizes the --traces horizon without a deadline
    p_deadline: Share
    cost_usd: Dollars


class Breakdown(Read):
    storage: Dollars
    egress: Dollars


class AssignmentRecord(Read):
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


class PoolRecord(Read):
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


class PeriodRecord(Read):
    hours: str
    days: str = "daily"
    bucket_requests_per_s: list[RequestsPerS]
    pools: list[PoolRecord]


class EndpointRecord(Read):
    workload: str
    duration_h: Hours
    below_capacity_share: Share
    periods: list[PeriodRecord]


class PlanRecord(Read):
    assignments: list[AssignmentRecord]
    endpoints: list[EndpointRecord] = []


# ---------------------------------------------------------------- a schedule


class ScheduledRunRecord(Read):
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


class UnscheduledRunRecord(Read):
    scheduled: bool = False


def _run_kind(value: Any) -> str:
    return "<scheduled>" if isinstance(value, dict) and value.get("scheduled") is True else "<unscheduled>"


class ScheduleReservation(Read):
    nodes: Annotated[int, Field(ge=0, le=MAX_GPUS)]


class ScheduleRecord(Read):
    runs: list[Annotated[Annotated[ScheduledRunRecord, Tag("<scheduled>")] | Annotated[UnscheduledRunRecord, Tag("<unscheduled>")],
                         Discriminator(_run_kind)]]
    reservations: list[ScheduleReservation] = []
