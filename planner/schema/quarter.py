"""The quarter file's schema: runs over a calendar, reservations, a monthly budget.

Runs are scenario workloads plus `release`, `due`, `after`, `priority` and `required`; the
schema reuses the scenario's (pydantic, no solver). Times are ISO 8601 date-times (UTC when
no offset is given); `planner.load.quarter` turns them into integer steps of `horizon.step`.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator, model_validator

from planner.schema.fields import (
    MAX_HOURS,
    MAX_PRIORITY,
    MAX_USD,
    USD,
    Hours,
    Name,
    Strict,
)
from planner.schema.scenario import (
    DEFAULT_CATALOGS,
    Constraints,
    Defaults,
    Override,
    Scenario,
    check_placement_scores,
)
from planner.schema.workload import MAX_GPUS, Workload

EARLIEST, LATEST = (
    dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    dt.datetime(9000, 1, 1, tzinfo=dt.UTC),
)
"""The dates a calendar may use: far from the years 1 and 9999 that Python's dates end at, so that a calendar's
arithmetic (the month after its end, a step past it) stays in range."""


def _datetime(value: object) -> object:
    """YAML dates/date-times or ISO strings -> aware UTC datetimes, from EARLIEST to LATEST."""
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"expected an ISO 8601 date or date-time such as 2027-01-04T08:00, got {value!r}"
            ) from None
    else:
        raise ValueError(f"expected an ISO 8601 date or date-time, got {value!r}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        parsed = parsed.astimezone(dt.UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is in the year 0
        parsed = None
    if parsed is None or not EARLIEST <= parsed <= LATEST:
        raise ValueError(
            f"expected a date from {EARLIEST.year} to {LATEST.year}, got {value!r}"
        )
    return parsed


When = Annotated[
    dt.datetime, BeforeValidator(_datetime, json_schema_input_type=str | dt.date)
]


class Horizon(Strict):
    start: When = Field(description="first moment a run may start")
    end: When = Field(description="last moment a run may end")
    step: Hours = Field(1.0, description="hours per schedule step")

    @model_validator(mode="after")
    def _ordered(self) -> Horizon:
        if self.end <= self.start:
            raise ValueError(
                f"end ({self.end.isoformat()}) is not after start ({self.start.isoformat()})"
            )
        hours = (self.end - self.start).total_seconds() / 3600
        if hours > MAX_HOURS:  # as every duration: an endpoint serves for its window
            raise ValueError(
                f"the horizon spans {hours:,.0f} h; at most {MAX_HOURS:,.0f} h (114 years)"
            )
        return self


class Run(Workload):
    release: When | None = Field(
        None, description="earliest start (default: horizon start)"
    )
    due: When | None = Field(None, description="latest end (default: horizon end)")
    after: tuple[str, ...] = Field((), description="runs that must finish first")
    priority: Annotated[int, Field(ge=1, le=MAX_PRIORITY)] = Field(
        1, description="weight of an optional run; higher first"
    )
    required: bool = Field(
        True,
        description="false: the run may be left out (its priority weighs what is scheduled)",
    )

    @model_validator(mode="after")
    def _no_time_budget(self) -> Run:
        if self.time_budget is not None:
            raise ValueError(
                "a run's time budget is its window: use release and due instead of time_budget"
            )
        if self.serving:
            if "duration" in self.model_fields_set:
                raise ValueError(
                    "an endpoint runs from its release to its due date: drop `duration`"
                )
            if self.after:
                raise ValueError(
                    "an endpoint runs from its release to its due date: it cannot wait `after` runs"
                )
            if not self.required:
                raise ValueError(
                    "an endpoint is always served: `required: false` is for runs that may be left out"
                )
        return self


class Reservation(Strict):
    """Reserved capacity for a term: paid for every node-hour of the term, never preempted."""

    name: Name | None = Field(
        None, description="how reports name it (default: offer@start)"
    )
    offer: str = Field(description="provider/region/instance_type")
    start: When = Field(description="the term's start")
    end: When = Field(description="the term's end")
    price_per_node_h: USD = Field(
        description="price per node-hour over the whole term, used or not"
    )
    min_nodes: Annotated[int, Field(ge=0, le=MAX_GPUS)] = Field(
        0, description="nodes that must be bought"
    )
    max_nodes: Annotated[int, Field(gt=0, le=MAX_GPUS)] = Field(
        description="nodes that may be bought"
    )

    @model_validator(mode="after")
    def _ordered(self) -> Reservation:
        if self.end <= self.start:
            raise ValueError(
                f"end ({self.end.isoformat()}) is not after start ({self.start.isoformat()})"
            )
        if self.min_nodes > self.max_nodes:
            raise ValueError(
                f"min_nodes ({self.min_nodes}) is above max_nodes ({self.max_nodes})"
            )
        most = (
            self.price_per_node_h
            * (self.end - self.start).total_seconds()
            / 3600
            * self.max_nodes
        )
        if (
            most > MAX_USD
        ):  # as every amount of money (and the schedule's sums stay in 64-bit integers)
            raise ValueError(
                f"max_nodes for the whole term cost ${most:,.4g}; at most ${MAX_USD:,.0f}"
            )
        return self

    @property
    def label(self) -> str:
        return self.name or f"{self.offer}@{self.start.date().isoformat()}"


class QuarterConstraints(Constraints):
    monthly_budget: USD | None = Field(
        None, description="USD per calendar month (runs count in the month they start)"
    )


class Quarter(Strict):
    name: Name = Field(min_length=1, description="the quarter's name, in every report")
    description: str = Field("", description="one line on what it plans")
    catalogs: tuple[str, ...] = Field(
        DEFAULT_CATALOGS,
        description="shipped catalog names and/or paths to offer CSV files",
    )
    defaults: Defaults = Field(
        Defaults(), description="settings every run takes unless it says otherwise"
    )
    horizon: Horizon = Field(description="the calendar the runs are scheduled on")
    runs: tuple[Run, ...] = Field(
        min_length=1, description="the jobs and endpoints to schedule"
    )
    reservations: tuple[Reservation, ...] = Field(
        (), description="reserved capacity that may be bought"
    )
    constraints: QuarterConstraints = Field(
        QuarterConstraints(), description="limits shared by all runs"
    )
    overrides: tuple[Override, ...] = Field(
        (), description="price and preemption changes to the catalogs' offers"
    )
    calibration: str | None = Field(
        None,
        min_length=1,
        description="a fit from `planner calibrate` (path relative to this file), as a scenario's",
    )

    @model_validator(mode="after")
    def _placement_scores_read(self) -> Quarter:
        check_placement_scores(self.defaults, self.runs)
        return self

    @field_validator("runs")
    @classmethod
    def _unique(cls, runs: tuple[Run, ...]) -> tuple[Run, ...]:
        names = [r.name for r in runs]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise ValueError(f"duplicate run name {duplicate!r}")
        return runs


def endpoint_hours(quarter: Quarter, run: Run) -> float:
    """Hours an endpoint runs: from its release (or the horizon's start) to its due date (or the end)."""
    start, end = run.release or quarter.horizon.start, run.due or quarter.horizon.end
    return (
        min(end, quarter.horizon.end) - max(start, quarter.horizon.start)
    ).total_seconds() / 3600


def as_scenario(quarter: Quarter):
    """The quarter's runs as a scenario (same catalogs, defaults, limits, overrides); an endpoint's
    duration is its window, release (or the horizon's start) to due (or its end)."""
    workloads = [
        Workload(
            **{
                k: getattr(run, k) for k in Workload.model_fields
            }  # as parsed: nothing read twice
            | ({"duration": endpoint_hours(quarter, run)} if run.serving else {})
        )
        for run in quarter.runs
    ]
    constraints = quarter.constraints.model_dump(exclude={"monthly_budget"})
    return Scenario(
        name=quarter.name,
        catalogs=quarter.catalogs,
        defaults=quarter.defaults,
        workloads=workloads,
        constraints=constraints,
        overrides=quarter.overrides,
    )
