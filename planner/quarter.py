"""The quarter file of `planner batch`: runs over a calendar, reservations, capacity over time.

Runs are scenario workloads plus `release`, `due`, `after`, `priority` and `required`; the
schema reuses the scenario's (pydantic, no solver). Times are ISO 8601 date-times (UTC when
no offset is given) and become integer steps of `horizon.step` from `horizon.start`.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from .catalog import Catalog, did_you_mean, load_catalog
from .domain import USD, Constraints, Defaults, Hours, Override, Strict, Workload
from .errors import PlannerError
from .scenario import _check_duplicate_workloads, validate_model
from .yamlio import load_yaml, where


def _datetime(value: object) -> object:
    """YAML dates/date-times or ISO strings -> aware UTC datetimes."""
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"expected an ISO 8601 date or date-time such as 2027-01-04T08:00, got {value!r}") from None
    else:
        raise ValueError(f"expected an ISO 8601 date or date-time, got {value!r}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.astimezone(dt.timezone.utc)


When = Annotated[dt.datetime, BeforeValidator(_datetime)]


class Horizon(Strict):
    start: When
    end: When
    step: Hours = Field(1.0, description="hours per schedule step")

    @model_validator(mode="after")
    def _ordered(self) -> "Horizon":
        if self.end <= self.start:
            raise ValueError(f"end ({self.end.isoformat()}) is not after start ({self.start.isoformat()})")
        return self


class Run(Workload):
    release: When | None = Field(None, description="earliest start (default: horizon start)")
    due: When | None = Field(None, description="latest end (default: horizon end)")
    after: tuple[str, ...] = Field((), description="runs that must finish first")
    priority: Annotated[int, Field(ge=1)] = Field(1, description="weight of an optional run; higher first")
    required: bool = True

    @model_validator(mode="after")
    def _no_time_budget(self) -> "Run":
        if self.time_budget is not None:
            raise ValueError("a run's time budget is its window: use release and due instead of time_budget")
        return self


class Reservation(Strict):
    """Reserved capacity for a term: paid for every node-hour of the term, never preempted."""

    name: str | None = None
    offer: str = Field(description="provider/region/instance_type")
    start: When
    end: When
    price_per_node_h: USD
    min_nodes: Annotated[int, Field(ge=0)] = 0
    max_nodes: Annotated[int, Field(gt=0)]

    @model_validator(mode="after")
    def _ordered(self) -> "Reservation":
        if self.end <= self.start:
            raise ValueError(f"end ({self.end.isoformat()}) is not after start ({self.start.isoformat()})")
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) is above max_nodes ({self.max_nodes})")
        return self

    @property
    def label(self) -> str:
        return self.name or f"{self.offer}@{self.start.date().isoformat()}"


class QuarterConstraints(Constraints):
    monthly_budget: USD | None = Field(None, description="USD per calendar month (runs count in the month they start)")


class Quarter(Strict):
    name: str = Field(min_length=1)
    description: str = ""
    catalogs: tuple[str, ...] = ("aws", "gcp", "azure", "lambda", "runpod")
    defaults: Defaults = Defaults()
    horizon: Horizon
    runs: tuple[Run, ...] = Field(min_length=1)
    reservations: tuple[Reservation, ...] = ()
    constraints: QuarterConstraints = QuarterConstraints()
    overrides: tuple[Override, ...] = ()

    @field_validator("runs")
    @classmethod
    def _unique(cls, runs: tuple[Run, ...]) -> tuple[Run, ...]:
        names = [r.name for r in runs]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise ValueError(f"duplicate run name {duplicate!r}")
        return runs


@dataclass
class LoadedQuarter:
    path: Path
    quarter: Quarter
    catalog: Catalog
    raw: Any

    def where(self, loc: tuple) -> str:
        return where(self.path, self.raw, loc)

    # ---- the calendar in steps

    @property
    def step_h(self) -> float:
        return self.quarter.horizon.step

    @property
    def steps(self) -> int:
        horizon = self.quarter.horizon
        return math.floor((horizon.end - horizon.start).total_seconds() / 3600 / self.step_h + 1e-9)

    def to_step(self, moment: dt.datetime, up: bool = False) -> int:
        hours = (moment - self.quarter.horizon.start).total_seconds() / 3600
        steps = hours / self.step_h
        return math.ceil(steps - 1e-9) if up else math.floor(steps + 1e-9)

    def to_time(self, step: float) -> dt.datetime:
        return self.quarter.horizon.start + dt.timedelta(hours=step * self.step_h)

    def window(self, run: Run) -> tuple[int, int]:
        """(earliest start step, latest end step) of a run."""
        release = self.to_step(run.release, up=True) if run.release else 0
        due = self.to_step(run.due) if run.due else self.steps
        return max(0, release), min(self.steps, due)


def load_quarter(path: str | Path) -> LoadedQuarter:
    path = Path(path)
    raw = load_yaml(path, "quarter file")
    if not isinstance(raw, dict):
        raise PlannerError("expected a mapping of quarter keys (name, horizon, runs, ...)", where(path, raw, ()))
    if isinstance(raw.get("runs"), list):
        _check_duplicate_workloads(path, {"workloads": raw["runs"]})
    quarter = validate_model(Quarter, raw, path)
    try:
        catalog = load_catalog(quarter.catalogs, base_dir=path.parent)
    except KeyError as exc:
        raise PlannerError(str(exc.args[0]), where(path, raw, ("catalogs",))) from None
    except PlannerError as exc:
        from .scenario import located_catalog_error

        raise located_catalog_error(exc, quarter.catalogs, path, raw) from None
    from .scenario import resolve_models

    quarter = quarter.model_copy(update={"runs": resolve_models(quarter.runs, catalog, path, raw, "runs")})
    loaded = LoadedQuarter(path, quarter, catalog, raw)
    _check_quarter(loaded)
    return loaded


def _check_quarter(loaded: LoadedQuarter) -> None:
    """Cross-field rules: names that must exist, windows inside the horizon, no cycles in `after`."""
    from .scenario import LoadedScenario, check_references

    quarter = loaded.quarter
    fail = lambda message, loc: (_ for _ in ()).throw(PlannerError(message, loaded.where(loc)))  # noqa: E731
    # Names the catalog must know: reuse the scenario checks on the runs as workloads.
    as_scenario = _scenario_view(quarter)
    check_references(LoadedScenario(loaded.path, as_scenario, loaded.catalog, loaded.raw), collection="runs")
    names = {r.name for r in quarter.runs}
    horizon = quarter.horizon
    for i, run in enumerate(quarter.runs):
        for j, before in enumerate(run.after):
            if before not in names:
                fail(f"unknown run {before!r} in after{did_you_mean(before, names)}", ("runs", i, "after", j))
            if before == run.name:
                fail("a run cannot come after itself", ("runs", i, "after", j))
        if run.release and run.due and run.due <= run.release:
            fail(f"due ({run.due.isoformat()}) is not after release ({run.release.isoformat()})", ("runs", i, "due"))
        release, due = loaded.window(run)
        if run.due and run.due <= horizon.start or run.release and run.release >= horizon.end:
            fail("the run's window lies outside the horizon", ("runs", i, "due" if run.due else "release"))
        if due <= release:
            fail("the run's window (release to due) holds no whole time step", ("runs", i))
    cycle = _find_cycle({r.name: r.after for r in quarter.runs})
    if cycle:
        index = next(i for i, r in enumerate(quarter.runs) if r.name == cycle[0])
        fail(f"runs wait for each other in a cycle: {' -> '.join(cycle)}", ("runs", index, "after"))
    offer_keys = set(loaded.catalog.offers["key"])
    for i, reservation in enumerate(quarter.reservations):
        if reservation.offer not in offer_keys:
            fail(f"unknown offer {reservation.offer!r}{did_you_mean(reservation.offer, offer_keys)}; "
                 "expected provider/region/instance_type", ("reservations", i, "offer"))
        if reservation.start < horizon.start or reservation.end > horizon.end:
            fail("the reservation term must lie inside the horizon", ("reservations", i))


def _find_cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt in graph and state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in graph:
        if state.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


def _scenario_view(quarter: Quarter):
    """The quarter's runs as a scenario (same catalogs, defaults, limits, overrides)."""
    from .domain import Scenario

    workloads = [Workload(**{k: v for k, v in run.model_dump().items() if k in Workload.model_fields})
                 for run in quarter.runs]
    constraints = quarter.constraints.model_dump(exclude={"monthly_budget"})
    return Scenario(name=quarter.name, catalogs=quarter.catalogs, defaults=quarter.defaults, workloads=workloads,
                    constraints=constraints, overrides=quarter.overrides)
