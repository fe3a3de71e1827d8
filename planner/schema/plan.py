"""The plan's JSON contract as types: the names shared by the layers that write, price and check it
(docs/cost-model.md), and the records a replay reads back (`planner simulate --plan`, `planner estimate --plan`).

The records declare every key `planner solve` and `planner batch` write (a test holds every shipped plan to
them, and `planner schema plan|schedule` prints them as JSON Schema). What the replays read (`replay/` for jobs,
traces, endpoints and schedules) is typed and bounded: a finite number in the scenario schema's ranges (a
century, a trillion dollars, a million GPUs, ...), so nothing a plan file says can make a replay divide by zero
or allocate gigabytes. `load/plan_file.py` reads a file into them and checks it against its scenario or quarter.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_serializer

from planner.schema.endpoint import MAX_REQUESTS_PER_S
from planner.schema.fields import (
    MAX_HOURS,
    MAX_USD,
    MAX_WAIT_CV,
    BillingStep,
    PricePerHour,
    Rate,
    Tolerance,
)
from planner.schema.quarter import When
from planner.schema.workload import MAX_GPUS

PRICED_KEYS = (
    "compute",
    "checkpointing",
    "startup",
    "preemption_rework",
    "rounding_waste",
)
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
Market = Literal[
    "on_demand", "spot", "spot_fallback", "reserved", "capacity_block", "flex_start"
]


class Record(BaseModel):
    """One object of a plan's JSON, as the commands write it (numbers as numbers, finite). What a replay reads is
    typed and bounded; what it does not read is declared too, optional (older plans lack it) and unbounded; a key
    this version does not know is kept as it is."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


def described(text: str):
    return Field(None, description=text)


# ---------------------------------------------------------------- a plan's jobs


class EstimateErrorRecord(Record):
    """ln(true time / estimated time) ~ Normal(median, sigma) (`economics/estimate_error.py`)."""

    median: Annotated[float, Field(ge=-5, le=5)]
    sigma: Annotated[float, Field(ge=0, le=5)]


class Process(Record):
    """A placed job's failure process (`economics/inputs.py` `process_json`), read back by `inputs_from_process`."""

    work_h: Hours = Field(
        description="hours of useful compute on its nodes, before failures and checkpoints"
    )
    checkpoint_write_h: HoursOrZero = Field(description="hours per checkpoint written")
    restart_h: HoursOrZero = Field(description="hours to restart after a failure")
    failure_rate_per_h: PerHour = Field(
        description="interruptions of the whole job per hour: preemption events and "
        "hardware failures"
    )
    preemption_events_per_h: PerHour | None = Field(
        None,
        description="the preemption events among them (absent in "
        "older plans: every failure counts as one)",
    )
    capacity_wait_h: HoursOrZero = Field(
        0.0, description="mean hours waiting for spot capacity after an event"
    )
    capacity_wait_cv: Annotated[float, Field(ge=1, le=MAX_WAIT_CV)] = Field(
        1.0, description="coefficient of variation of that wait"
    )
    interruption_tolerance: Tolerance
    time_budget_h: Hours | None = Field(
        None,
        description="a schedule's spot_fallback run: the slack it switches against",
    )
    estimate_error: EstimateErrorRecord | None = Field(
        None,
        description="the throughput estimate's error (absent in older plans: exact)",
    )


class AssignmentInputs(Process):
    """A job's process with the prices and deadline its cost was figured at."""

    price_per_node_h: PricePerHour
    billing_granularity_h: BillingStep
    billing_minimum_h: HoursOrZero
    time_budget_h: Hours | None = Field(
        description="the deadline in hours from the start; null: none"
    )
    deadline_confidence: float | None = described("P(deadline) the plan was held to")
    fallback_price_per_node_h: PricePerHour | None = described(
        "spot_fallback: the on-demand price it falls back to"
    )
    p_fallback: float | None = described(
        "spot_fallback: the probability it moves to on-demand"
    )


class Expected(Record):
    """The cost model's expectation for the job."""

    wall_h: HoursOrZero = Field(description="hours from start to end")
    failures: float | None = described("interruptions expected")
    preemption_events: float | None = described("the preemption events among them")
    waiting_h: float | None = described("hours waiting for spot capacity")
    billed_node_h: float | None = described("node-hours billed")
    rounding_waste_node_h: float | None = described(
        "node-hours billed past use by the billing step and minimum"
    )
    p_deadline: Share = Field(description="probability it ends within its time budget")
    p_deadline_on_estimate: float | None = described(
        "the same on the throughput estimate alone (null: equal)"
    )
    cost_usd: Dollars = Field(description="expected total cost")


class Breakdown(Record):
    """The expected cost by part (`BREAKDOWN_KEYS`)."""

    compute: float | None = None
    checkpointing: float | None = None
    startup: float | None = None
    preemption_rework: float | None = None
    rounding_waste: float | None = None
    storage: Dollars
    egress: Dollars


class Replayed(Record):
    """A spot job held to measured availability traces (docs/cost-model.md §11)."""

    p_deadline: float
    compute_usd: float
    traces: int
    stand_in: bool


class Memory(Record):
    per_gpu_gib: float | None = None
    vram_gib: float | None = None


class Alternative(Record):
    """A runner-up: the cheapest candidate of another instance type or market."""

    provider: str
    region: str
    instance_type: str
    nodes: int
    market: str
    cost_usd: float
    wall_h: float


class StorageRecord(Record):
    """Where a job's data and checkpoints live and what that gives it (physics/storage.py); the hours here are
    already in the process's `work_h`, `checkpoint_write_h` and `restart_h`."""

    name: str
    storage_class: str = Field(alias="class")
    persistent: bool
    read_gbs: float | None = described("GB/s the job's nodes read together")
    write_gbs: float | None = described("GB/s its checkpoints are written at")
    provisioned_gib: float | None = described(
        "GiB provisioned (0: a local disk, its data kept in the backing store)"
    )
    restore_h: float | None = described(
        "hours to read the last checkpoint back, per restart"
    )
    stage_h: float | None = described(
        "hours to stage the data set onto new local disks, per start"
    )
    load_h: float | None = described(
        "hours to fill a persistent volume once, in work_h"
    )
    data_read_h: float | None = described(
        "hours to read the data set every epoch at this rate"
    )
    data_bound_share: float | None = described(
        "share of that reading time the GPUs wait on data (0: compute-bound)"
    )


class PurchaseRecord(Record):
    """What a job on a purchase option buys (cost-model §13): the option and the terms it was priced with."""

    name: str
    kind: Literal["reserved", "capacity_block", "flex_start"]
    offer: str = Field(description="provider/region/instance_type")
    buy: str = Field(description="what to buy and when, in words")
    term_h: Hours | None = described(
        "hours each node is paid for at once (none: billed by use)"
    )
    renewable: bool = False
    start_h: HoursOrZero = Field(
        0.0, description="hours from the plan's start until the nodes are there"
    )
    wait_h: HoursOrZero = Field(0.0, description="mean queue wait before they are")
    wait_cv: Annotated[float, Field(ge=1, le=MAX_WAIT_CV)] = 1.0
    run_cap_h: Hours | None = described("longest the job may run there")
    overrun_price_per_node_h: float | None = described(
        "what runs past a block's end costs per node-hour (on demand)"
    )
    upfront_usd: float | None = described("paid when bought")


class AssignmentRecord(Record):
    """Where one job runs, how, and what it is expected to cost (`planner solve`'s `assignments`)."""

    workload: str
    provider: str
    region: str
    instance_type: str
    gpu: str | None = None
    gpus_per_node: Nodes
    nodes: Nodes
    gpus: int | None = None
    market: Market
    checkpoint_interval_h: Hours | None = Field(
        description="hours between checkpoints; null: none (one segment)"
    )
    inputs: AssignmentInputs
    storage: StorageRecord | None = described("where its data and checkpoints live")
    expected: Expected
    breakdown_usd: Breakdown
    replayed: Replayed | None = None
    memory: Memory | None = None
    parallelism: dict[str, Any] | None = described(
        "the training layout (recipe, tp, pp, dp, ..., label) or a "
        "generation job's replicas; null: stated memory"
    )
    alternatives: list[Alternative] | None = None
    purchase: PurchaseRecord | None = described(
        "the purchase option it runs on (reserved, capacity_block, flex_start)"
    )
    signals: list[str] | None = described(
        "the availability signals its offer was planned with (`signals:`, refreshed stock), in words"
    )


# ---------------------------------------------------------------- a plan's endpoints


class PoolRecord(Record):
    """One option's nodes in one traffic period of an endpoint."""

    provider: str | None = None  # which option it is: read by `planner estimate --plan`
    region: str | None = None
    instance_type: str | None = None
    gpu: str | None = None
    market: str | None = None
    tensor_parallel: Annotated[int, Field(ge=1, le=64)] | None = None
    nodes: Annotated[int, Field(ge=0, le=MAX_GPUS)]
    replicas: int | None = None
    nodes_counted: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None
    load_nodes: Annotated[float, Field(ge=0, le=MAX_GPUS)] = Field(
        description="nodes' worth of load routed to it"
    )
    load_share: float | None = described(
        "the share of its capacity within the SLO that load uses"
    )
    share_of_requests: list[Share] = Field(
        description="per request size (bucket): the share it serves"
    )
    node_requests_per_s: list[RequestsPerS] = Field(
        description="per request size: a node's capacity within the SLO"
    )
    preemptions_per_node_h: Rate
    away_share: float | None = None
    zone_away_share: float | None = None
    correlation: Share
    capacity_wait_h: HoursOrZero
    replace_h: HoursOrZero
    usd_per_h: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    ttft_percentiles_s: dict[str, float] | None = None
    tpot_percentiles_s: dict[str, float] | None = None
    reservation: str | None = described(
        "the reservation (a quarter's) or commitment (a scenario's purchase option) it runs on"
    )


class PeriodRecord(Record):
    hours: str
    days: str = "daily"
    requests_per_s: float | None = None
    bucket_requests_per_s: list[RequestsPerS]
    below_capacity_share: float | None = None
    pools: list[PoolRecord]
    usd_per_h: float | None = None


class Peak(Record):
    hours: str
    ttft_s: float | None
    tpot_s: float | None


class Slo(Record):
    ttft_s: float | None
    tpot_s: float | None
    quantile: float


class Worst(Record):
    ttft_s: float | None
    tpot_s: float | None


class EndpointRecord(Record):
    """An endpoint's plan (`endpoints`): its pools per traffic period, latency, costs."""

    workload: str
    autoscale: bool | None = None
    availability: float | None = None
    duration_h: Hours
    periods: list[PeriodRecord]
    peak: Peak | None = None
    slo: Slo | None = None
    worst: Worst | None = None
    busiest_load_share: float | None = None
    cost_usd: float | None = None
    operating_usd: float | None = None
    usd_per_h: float | None = None
    usd_per_month: float | None = None
    usd_per_million_output_tokens: float | None = None
    below_capacity_share: Share
    start: str | None = described("in a quarter: when it starts serving")
    end: str | None = None


class Infeasible(Record):
    workload: str
    reason: str


class SolveReportRecord(Record):
    """The search's effort (left out with `--no-timings`)."""

    solve_seconds: float
    deterministic_seconds: float
    workers: int
    seed: int
    proved_by: str
    lp_seconds: float
    candidates_seconds: float
    # rows priced exactly, and rows left unpriced as in no cheaper plan (the LP's reduced costs)
    candidates_priced: int = 0
    candidates_unpriced: int = 0
    stopped_by_time_limit: bool | None = None  # `planner batch`'s


class PlanRecord(Record):
    """`planner solve --format json`."""

    scenario: str | None = None
    status: str | None = None
    objective_usd: float | None = None
    bound_usd: float | None = None
    prices_as_of: str | None = None
    assignments: list[AssignmentRecord]
    endpoints: list[EndpointRecord] = []
    infeasible: list[Infeasible] = []
    solve_report: SolveReportRecord | None = None


# ---------------------------------------------------------------- a schedule


class ScheduledRunRecord(Record):
    """A run of the quarter on the calendar (`planner batch`'s `runs`)."""

    run: str
    scheduled: Literal[True]
    start: When
    end: When
    provider: str | None = None
    region: str | None = None
    instance_type: str | None = None
    nodes: Nodes
    gpus: int | None = None
    market: Literal["on_demand", "spot", "spot_fallback", "reserved"]
    expected_wall_h: float | None = None
    p_deadline: float | None = None
    preemption_events: float | None = None
    waiting_h: float | None = None
    cost_usd: float | None = None
    gpus_per_node: Nodes
    pool: Annotated[int, Field(ge=-1)] = Field(
        description="the reservation's index, or -1"
    )
    checkpoint_interval_h: Hours | None
    inputs: Process
    storage: StorageRecord | None = described("where its data and checkpoints live")

    @field_serializer("start", "end")
    def _iso(self, moment) -> str:
        return moment.isoformat()  # as `planner batch` writes it, in UTC


class UnscheduledRunRecord(Record):
    """An optional run left out, and why."""

    run: str | None = None
    scheduled: Literal[False] = False
    reason: str | None = None


def _run_kind(value: Any) -> str:
    return (
        "<scheduled>"
        if isinstance(value, dict) and value.get("scheduled") is True
        else "<unscheduled>"
    )


class ReservationRecord(Record):
    """Nodes of a reservation option to buy (one entry per option of the quarter, in its order)."""

    provider: str | None = None
    region: str | None = None
    instance_type: str | None = None
    nodes: Annotated[int, Field(ge=0, le=MAX_GPUS)]
    start: str | None = None
    end: str | None = None
    cost_usd: float | None = None
    utilisation: float | None = None
    name: str | None = None


class Month(Record):
    month: str
    cost_usd: float


class Unscheduled(Record):
    run: str
    reason: str


class ScheduleConfidence(Record):
    target: float
    per_run: float
    simulated_holds: float | None = None
    trials: int | None = None


class ScheduleRecord(Record):
    """`planner batch --format json`."""

    status: str | None = None
    objective_usd: float | None = None
    bound_usd: float | None = None
    prices_as_of: str | None = None
    reservations: list[ReservationRecord] = []
    runs: list[
        Annotated[
            Annotated[ScheduledRunRecord, Tag("<scheduled>")]
            | Annotated[UnscheduledRunRecord, Tag("<unscheduled>")],
            Discriminator(_run_kind),
        ]
    ]
    endpoints: list[EndpointRecord] = []
    months: list[Month] = []
    unscheduled: list[Unscheduled] = []
    schedule_confidence: ScheduleConfidence | None = None
    solve_report: SolveReportRecord | None = None


def undeclared(record: BaseModel, path: str = "") -> list[str]:
    """The keys of a record, at any depth, that no record declares (kept as extras): a key the writer spells
    differently from the schema shows here."""
    found = [f"{path}.{key}" for key in record.__pydantic_extra__ or {}]
    for name in type(record).model_fields:
        value = getattr(record, name)
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, BaseModel):
                found += undeclared(
                    item,
                    f"{path}.{name}" + (f"[{i}]" if isinstance(value, list) else ""),
                )
    return found
