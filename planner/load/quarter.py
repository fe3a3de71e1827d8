"""Loading a quarter file of `planner batch`: parse, validate, resolve models, check names,
windows and `after` chains; and its calendar in integer steps of `horizon.step`."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import PlannerError, did_you_mean
from planner.load.catalog import Catalog, load_catalog
from planner.load.scenario import check_duplicate_names, validate_model
from planner.load.team_config import with_team_config
from planner.load.yaml import is_quarter, load_yaml, where
from planner.schema.quarter import Quarter, Run, as_scenario
from planner.schema.units import format_hours


@dataclass
class LoadedQuarter:
    path: Path
    quarter: Quarter
    catalog: Catalog
    raw: Any
    hf_configs: tuple[
        Path, ...
    ] = ()  # the Hugging Face config files its models were read from
    configs: tuple[
        Path, ...
    ] = ()  # the team's planner.toml files it was read with (`team_config`)

    @property
    def inputs(self) -> tuple[Path, ...]:
        """Every file the quarter was read from: no output may be written over one."""
        return (self.path, *self.catalog.files, *self.hf_configs, *self.configs)

    def where(self, loc: tuple) -> str:
        return where(self.path, self.raw, loc)

    # ---- the calendar in steps

    @property
    def step_h(self) -> float:
        return self.quarter.horizon.step

    @property
    def steps(self) -> int:
        horizon = self.quarter.horizon
        return math.floor(
            (horizon.end - horizon.start).total_seconds() / 3600 / self.step_h + 1e-9
        )

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


def load_quarter(path: str | Path, text: str | None = None) -> LoadedQuarter:
    """A quarter file, or `text` as its content (as `load_scenario`)."""
    path = Path(path)
    raw = load_yaml(path, "quarter file", text)
    if not isinstance(raw, dict):
        raise PlannerError(
            "expected a mapping of quarter keys (name, horizon, runs, ...)",
            where(path, raw, ()),
        )
    if "workloads" in raw and not is_quarter(raw):
        raise PlannerError(
            "this is a scenario (workloads, no horizon): plan it with `planner solve`",
            where(path, raw, ("workloads",)),
        )
    check_duplicate_names(path, raw, "runs")
    raw, configs = with_team_config(raw, path.parent, "runs")
    quarter = validate_model(Quarter, raw, path)
    _check_calendar(quarter, path, raw)
    try:
        catalog = load_catalog(quarter.catalogs, base_dir=path.parent)
    except KeyError as exc:
        raise PlannerError(str(exc.args[0]), where(path, raw, ("catalogs",))) from None
    except PlannerError as exc:
        from planner.load.scenario import located_catalog_error

        raise located_catalog_error(exc, quarter.catalogs, path, raw) from None
    from planner.load.scenario import check_some_offers, hf_config_files, resolve_models

    check_some_offers(catalog, path, raw)
    if quarter.calibration is not None:
        from planner.load.calibration import calibrate_catalog

        quarter = quarter.model_copy(
            update={
                "overrides": calibrate_catalog(
                    quarter.calibration,
                    path.parent,
                    catalog,
                    path,
                    raw,
                    ("calibration",),
                )
                + quarter.overrides
            }
        )
    hf_configs = hf_config_files(quarter.runs, path)
    quarter = quarter.model_copy(
        update={"runs": resolve_models(quarter.runs, catalog, path, raw, "runs")}
    )
    loaded = LoadedQuarter(path, quarter, catalog, raw, hf_configs, configs)
    _check_quarter(loaded)
    return loaded


MAX_STEPS = 4_400
"""Steps of `horizon.step` a calendar may hold: 13 weeks of half-hour steps or 26 weeks of hourly ones
(4,368). The batch model's bound has a column per start step of each run a reservation may carry and a
row per reservation and step, each column as long as its run, so it grows with the steps squared: the
shipped 42-run quarter takes 0.4 GB at 6-hour steps (364), 1.1 GB at hourly (2,184), 3.2 GB at half-hour
(4,368) and 11 GB at 15 minutes; 1-second steps asked for terabytes."""


def _check_calendar(quarter: Quarter, path: Path, raw: Any) -> None:
    """A calendar of at most MAX_STEPS steps, else one line naming the step and the least that fits."""
    horizon = quarter.horizon
    hours = (horizon.end - horizon.start).total_seconds() / 3600
    steps = math.floor(hours / horizon.step + 1e-9)
    if steps <= MAX_STEPS:
        return
    least = hours / MAX_STEPS
    suggest = (
        f"{math.ceil(least * 60 - 1e-9)}m"
        if least < 1
        else f"{math.ceil(least - 1e-9)}h"
    )
    # a step of 1e-300 h: not 300 digits
    count = f"{steps:,}" if steps < 1e12 else f"{steps:.3g}"
    raise PlannerError(
        f"a horizon of {count} steps of {format_hours(horizon.step)} ({format_hours(hours)}); "
        f"at most {MAX_STEPS:,} steps (the schedule's bound grows with the steps squared): "
        f"use a longer step, {suggest} or more",
        where(path, raw, ("horizon", "step")),
    )


def _check_quarter(loaded: LoadedQuarter) -> None:
    """Cross-field rules: names that must exist, windows inside the horizon, no cycles in `after`."""
    from planner.load.scenario import LoadedScenario, check_references

    quarter = loaded.quarter

    def fail(message, loc):
        raise PlannerError(message, loaded.where(loc))

    names = {r.name for r in quarter.runs}
    horizon = quarter.horizon
    for i, run in enumerate(quarter.runs):
        for j, before in enumerate(run.after):
            if before not in names:
                fail(
                    f"unknown run {before!r} in after{did_you_mean(before, names)}",
                    ("runs", i, "after", j),
                )
            if before == run.name:
                fail("a run cannot come after itself", ("runs", i, "after", j))
            if (
                before in names
                and next(r for r in quarter.runs if r.name == before).serving
            ):
                fail(
                    f"{before!r} is an endpoint: it ends at its due date, so wait with `release` instead",
                    ("runs", i, "after", j),
                )
        if run.release and run.due and run.due <= run.release:
            fail(
                f"due ({run.due.isoformat()}) is not after release ({run.release.isoformat()})",
                ("runs", i, "due"),
            )
        if run.serving and (
            run.due
            and run.due > horizon.end
            or run.release
            and run.release < horizon.start
        ):
            fail(
                "an endpoint serves from its release to its due date, inside the horizon "
                f"({horizon.start.isoformat()} to {horizon.end.isoformat()})",
                ("runs", i, "due" if run.due and run.due > horizon.end else "release"),
            )
        release, due = loaded.window(run)
        if (
            run.due
            and run.due <= horizon.start
            or run.release
            and run.release >= horizon.end
        ):
            fail(
                "the run's window lies outside the horizon",
                ("runs", i, "due" if run.due else "release"),
            )
        if due <= release:
            fail(
                "the run's window (release to due) holds no whole time step",
                ("runs", i),
            )
    # Names the catalog must know: reuse the scenario checks on the runs as workloads (after the
    # windows, which give each endpoint its duration).
    try:
        runs_as_scenario = as_scenario(quarter)
    except (
        ValidationError
    ) as exc:  # a rule of the scenario's the quarter's own schema does not repeat
        error = exc.errors()[0]
        loc = tuple("runs" if part == "workloads" else part for part in error["loc"])
        fail(
            error["msg"].removeprefix("Value error, "),
            loc[:2] if loc[:1] == ("runs",) else (),
        )
    check_references(
        LoadedScenario(loaded.path, runs_as_scenario, loaded.catalog, loaded.raw),
        collection="runs",
    )
    cycle = _find_cycle({r.name: r.after for r in quarter.runs})
    if cycle:
        index = next(i for i, r in enumerate(quarter.runs) if r.name == cycle[0])
        fail(
            f"runs wait for each other in a cycle: {' -> '.join(cycle)}",
            ("runs", index, "after"),
        )
    offer_keys = set(loaded.catalog.offers["key"])
    for i, reservation in enumerate(quarter.reservations):
        if reservation.offer not in offer_keys:
            fail(
                f"unknown offer {reservation.offer!r}{did_you_mean(reservation.offer, offer_keys)}; "
                "expected provider/region/instance_type",
                ("reservations", i, "offer"),
            )
        if reservation.start < horizon.start or reservation.end > horizon.end:
            fail(
                "the reservation term must lie inside the horizon", ("reservations", i)
            )
        if loaded.to_step(reservation.end) <= loaded.to_step(
            reservation.start, up=True
        ):
            fail(
                f"the reservation term holds no whole step of {format_hours(horizon.step)}: runs could never use it "
                "(it is paid for all the same)",
                ("reservations", i),
            )


def _find_cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
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
