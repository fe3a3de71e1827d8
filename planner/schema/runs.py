"""A run record: what happened to one run of a planned job, as `planner calibrate` reads it (one CSV row; the
format is docs/calibrate.md's). Times are ISO 8601 (UTC where no zone is given); a stop is `AT/BACK`, ISO 8601's
interval, when the run stopped and when its nodes ran again."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from planner.schema.fields import Strict
from planner.schema.quarter import When, _datetime
from planner.schema.workload import MAX_GPUS


def _stops(value: object) -> object:
    """`AT/BACK;AT/BACK` (or one time, back at once) -> [(at, back)], empty for ''."""
    if not isinstance(value, str):
        return value
    out = []
    for part in filter(None, (p.strip() for p in value.split(";"))):
        at, _, back = part.partition("/")
        start = _datetime(at)
        end = _datetime(back) if back else start
        if end < start:
            raise ValueError(f"{part!r}: its nodes are back before it stopped")
        out.append((start, end))
    return out


Stops = Annotated[
    tuple[tuple[dt.datetime, dt.datetime], ...],
    BeforeValidator(_stops, json_schema_input_type=str),
]


class RunRecord(Strict):
    run: str = Field(
        min_length=1, description="the run's own id, unique in the records"
    )
    workload: str = Field(min_length=1, description="the plan's workload it ran")
    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    instance_type: str = Field(min_length=1)
    nodes: Annotated[int, Field(ge=1, le=MAX_GPUS)]
    market: Literal[
        "on_demand", "spot", "spot_fallback", "reserved", "capacity_block", "flex_start"
    ]
    start: When = Field(description="when it was launched")
    end: When = Field(description="when it finished")
    tokens: Annotated[float, Field(gt=0)] | None = Field(
        None, description="tokens trained, where it stopped short of the workload's"
    )
    preemptions: Stops = Field(
        (), description="AT/BACK per preemption: stopped, and nodes back after the wait"
    )
    failures: Stops = Field(
        (), description="AT per hardware failure (restarted at once)"
    )
    fallback_at: When | None = Field(
        None,
        description="spot_fallback: when it moved to on demand (empty: it finished on spot)",
    )
    checkpoint_write_s: Annotated[float, Field(ge=0, le=1e7)] | None = Field(
        None, description="measured mean seconds to write a checkpoint"
    )
    restart_s: Annotated[float, Field(ge=0, le=1e7)] | None = Field(
        None, description="measured mean seconds from nodes up to training again"
    )
    billed_usd: Annotated[float, Field(ge=0, le=1e12)] | None = Field(
        None, description="what the run was billed"
    )

    @model_validator(mode="after")
    def _inside(self) -> RunRecord:
        if self.end <= self.start:
            raise ValueError(
                f"end ({self.end.isoformat()}) is not after start ({self.start.isoformat()})"
            )
        if self.fallback_at is not None:
            if self.market != "spot_fallback":
                raise ValueError(
                    f"fallback_at is for spot_fallback runs, not {self.market}"
                )
            if not self.start <= self.fallback_at <= self.end:
                raise ValueError(
                    f"fallback_at {self.fallback_at.isoformat()} is outside the run"
                )
        for at, back in (*self.preemptions, *self.failures):
            if not self.start <= at <= back <= self.end:
                raise ValueError(
                    f"a stop at {at.isoformat()} is outside the run, {self.start.isoformat()} to "
                    f"{self.end.isoformat()}"
                )
        return self

    @property
    def wall_h(self) -> float:
        return (self.end - self.start).total_seconds() / 3600

    def hours(self, moment: dt.datetime) -> float:
        return (moment - self.start).total_seconds() / 3600


RUN_COLUMNS = tuple(RunRecord.model_fields)
"""The CSV's columns, in the order `planner simulate --runs-out` writes them."""
