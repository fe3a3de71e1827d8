"""`planner calibrate`: the runs that happened held against the plan they followed, and the planner's assumptions
refitted from them (docs/calibrate.md).

Each run names the plan's workload it ran and the placement it ran on (the plan's). From its log the hours of
useful work it did are recovered exactly as the cost model accrues them (`economics/run_log.useful_hours`), and
from those:

- throughput per (GPU, recipe): the plan's compute hours over the measured ones, a geometric mean over runs,
  times the scenario's own calibration (so a refit composes);
- spot preemptions per (provider, instance type): events over the hours the runs' spot nodes were up, each run's
  hours weighted by the events that touch a gang of its size (`events_per_loss`), with the exact Poisson interval;
- the capacity wait after a preemption: its mean and coefficient of variation;
- checkpoint and restart times per storage option, measured over the plan's.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from scipy import stats

from planner.economics.candidate import events_per_loss
from planner.economics.run_log import useful_hours
from planner.errors import PlannerError
from planner.launch.jobs import slug
from planner.load.billing import billed
from planner.physics.estimate import STATED_RECIPE
from planner.schema.calibration import (
    Calibration,
    Efficiency,
    Interval,
    Preemption,
    StorageTimes,
)
from planner.schema.plan import AssignmentRecord, PlanRecord
from planner.schema.runs import RunRecord
from planner.solve.assignment_checks import spot_settings

LEVEL = 0.9
"""The intervals' level: the true value lies in them 9 times in 10."""


@dataclass(frozen=True)
class RunComparison:
    """One run beside its plan."""

    run: str
    workload: str
    market: str
    planned_wall_h: float
    wall_h: float
    planned_cost_usd: float
    billed_usd: float | None
    planned_work_h: float
    work_h: float  # the useful hours it did, from its log
    preemptions: int
    waiting_h: float

    @property
    def wall_error(self) -> float:
        """(actual - planned) / planned."""
        return self.wall_h / self.planned_wall_h - 1

    @property
    def cost_error(self) -> float | None:
        return (
            None
            if self.billed_usd is None or not self.planned_cost_usd
            else self.billed_usd / self.planned_cost_usd - 1
        )


@dataclass(frozen=True)
class Calibrated:
    """What `planner calibrate` found: the fit, each run against its plan, and what it could not use."""

    calibration: Calibration
    runs: list[RunComparison]
    notes: list[str]

    def errors(self, name: str) -> tuple[float, float] | None:
        """(median, worst) of the runs' absolute `wall` or `cost` errors; None where no run has one."""
        found = [
            abs(e)
            for e in (getattr(r, f"{name}_error") for r in self.runs)
            if e is not None
        ]
        if not found:
            return None
        return statistics.median(found), max(found)


def _assignment(plan: PlanRecord, record: RunRecord, where: str) -> AssignmentRecord:
    for a in plan.assignments:
        if a.workload == record.workload:
            ran = (record.provider, record.instance_type, record.nodes, record.market)
            planned = (a.provider, a.instance_type, a.nodes, a.market)
            if ran != planned:
                raise PlannerError(
                    f"run {record.run!r} ran {record.nodes} x {record.provider} {record.instance_type} "
                    f"{record.market}; the plan placed {a.workload!r} on {a.nodes} x {a.provider} "
                    f"{a.instance_type} {a.market} (calibrate compares runs with the plan they followed)",
                    where,
                )
            return a
    raise PlannerError(
        f"run {record.run!r} names workload {record.workload!r}, which the plan does not place",
        where,
    )


def _interval_h(a: AssignmentRecord) -> tuple[float, float]:
    """(τ, C) the run worked with: a job that cannot resume writes none and starts over."""
    if a.inputs.interruption_tolerance == "none":
        return math.inf, 0.0
    return a.checkpoint_interval_h or math.inf, a.inputs.checkpoint_write_h


def calibrate(
    loaded,
    plan: PlanRecord,
    records: list[RunRecord],
    fitted_on: str,
    charges: list | None = None,
) -> Calibrated:
    """Hold every run against the plan and refit (`loaded`: the scenario the plan was made from, with the
    calibration it was made with, if any; `charges`: a billing export's labelled lines, for runs that do not say
    what they were billed)."""
    catalog = loaded.catalog
    old = catalog.calibration or Calibration()
    workloads = {w.name: w for w in loaded.scenario.workloads}
    offers = catalog.offers.set_index("key")
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    spot: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    waits: dict[tuple[str, str], list[float]] = defaultdict(list)
    checkpoint: dict[str, list[float]] = defaultdict(list)
    restart: dict[str, list[float]] = defaultdict(list)
    notes: set[str] = set()
    runs = []
    for number, record in enumerate(records):
        a = _assignment(plan, record, f"run {record.run!r}")
        workload = workloads[a.workload]
        inputs = a.inputs
        tau, planned_c = _interval_h(a)
        measured_c = (
            planned_c
            if record.checkpoint_write_s is None
            or inputs.interruption_tolerance == "none"
            else record.checkpoint_write_s / 3600
        )
        measured_r = (
            inputs.restart_h if record.restart_s is None else record.restart_s / 3600
        )
        stops = [
            (record.hours(at), record.hours(back))
            for at, back in (*record.preemptions, *record.failures)
        ]
        # the move to on demand restarts the job from its last checkpoint, as a stop with no wait
        moved = None if record.fallback_at is None else record.hours(record.fallback_at)
        work = useful_hours(
            record.wall_h,
            stops + ([(moved, moved)] if moved is not None else []),
            interval_h=tau,
            checkpoint_h=measured_c,
            restart_h=measured_r,
        )
        if record.tokens is not None:
            if workload.work is None or workload.work.tokens is None:
                notes.add(
                    f"{a.workload}: tokens in its runs, but the workload states no tokens to compare"
                )
            else:
                work *= workload.work.tokens / record.tokens
        waiting = math.fsum(back - at for at, back in stops)
        bill = record.billed_usd
        if bill is None and charges:
            bill = billed(charges, slug(a.workload), record.start, record.end)
        runs.append(
            RunComparison(
                record.run,
                a.workload,
                a.market,
                a.expected.wall_h,
                record.wall_h,
                a.expected.cost_usd,
                bill,
                inputs.work_h,
                work,
                len(record.preemptions),
                waiting,
            )
        )
        # throughput: the GPUs' own hours, where the data did not bound them
        storage = a.storage
        load_h = (storage.load_h or 0.0) if storage else 0.0
        bound = storage is not None and (storage.data_bound_share or 0.0) > 0
        compute_plan, compute_run = inputs.work_h - load_h, work - load_h
        if (
            workload.training_method == "inference"
            or inputs.interruption_tolerance == "stateless"
        ):
            notes.add(
                f"{a.workload}: no throughput fit for inference or stateless jobs"
            )
        elif bound:
            notes.add(
                f"{a.workload}: data-bound in the plan, so its runs do not measure the GPUs"
            )
        elif compute_plan > 0 and compute_run > 0:
            recipe = (a.parallelism or {}).get("recipe") or STATED_RECIPE
            ratios[a.gpu or "", recipe].append(compute_plan / compute_run)
        # preemptions while the spot nodes were up
        if a.market in ("spot", "spot_fallback"):
            key = f"{a.provider}/{a.region}/{a.instance_type}"
            if key not in offers.index:
                raise PlannerError(
                    f"the plan places {a.workload!r} on {key}, which the scenario's catalogs do not offer",
                    f"run {record.run!r}",
                )
            offer = {**offers.loc[key].to_dict(), "key": key}
            correlation = spot_settings(loaded.scenario.overrides, offer, catalog)[0]
            # the hours its spot nodes were up: to the end, or to the move to on demand
            on_spot = record.wall_h if moved is None else moved
            before = [s for s in stops if s[0] < on_spot]
            up = max(
                0.0,
                on_spot
                - math.fsum(back - at for at, back in before)
                - measured_r * (1 + len(before)),
            )
            family = (a.provider, a.instance_type)
            tally = spot[family]
            tally[0] += len(record.preemptions)
            tally[1] += up * float(events_per_loss(a.nodes, correlation))
            tally[2] += up * a.nodes
            # a wait the move to on demand cut short says only that it was longer: left out
            waits[family] += [
                record.hours(b) - record.hours(t)
                for t, b in record.preemptions
                if record.fallback_at is None or b < record.fallback_at
            ]
        if storage is not None:
            if (
                record.checkpoint_write_s is not None
                and planned_c > 0
                and workload.checkpoint.write_time is None
            ):
                checkpoint[storage.name].append(measured_c / planned_c)
            if record.restart_s is not None and inputs.restart_h > 0:
                restart[storage.name].append(measured_r / inputs.restart_h)
    calibration = Calibration(
        fitted_on=fitted_on,
        runs=len(records),
        efficiency=_merged(
            old.efficiency,
            [
                _efficiency(gpu, recipe, found, old)
                for (gpu, recipe), found in sorted(ratios.items())
            ],
            lambda e: (e.gpu, e.recipe),
        ),
        preemption=_merged(
            old.preemption,
            [
                _preemption(family, *spot[family], waits[family])
                for family in sorted(spot)
            ],
            lambda p: (p.provider, p.instance_type),
        ),
        storage=_merged(
            old.storage,
            [
                _storage(name, checkpoint.get(name, []), restart.get(name, []), old)
                for name in sorted(set(checkpoint) | set(restart))
            ],
            lambda s: s.storage,
        ),
    )
    return Calibrated(calibration, runs, sorted(notes))


def _merged(old, new, key):
    """The new fits, and the old calibration's entries the runs said nothing about."""
    found = {key(e) for e in new}
    return tuple(sorted([*new, *(e for e in old if key(e) not in found)], key=key))


def _geometric(values: list[float]) -> tuple[float, float | None, Interval | None]:
    """(geometric mean, sd of the logs, its interval at LEVEL): the mean's t-interval on the logs."""
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None
    sd = statistics.stdev(logs)
    half = stats.t.ppf((1 + LEVEL) / 2, len(logs) - 1) * sd / math.sqrt(len(logs))
    return (
        math.exp(mean),
        sd,
        Interval(low=math.exp(mean - half), high=math.exp(mean + half), level=LEVEL),
    )


def _efficiency(
    gpu: str, recipe: str, found: list[float], old: Calibration
) -> Efficiency:
    base = old.efficiency_factor(gpu, recipe)
    mean, sd, interval = _geometric(found)
    if interval is not None:
        interval = Interval(
            low=interval.low * base, high=interval.high * base, level=LEVEL
        )
    return Efficiency(
        gpu=gpu,
        recipe=recipe,
        factor=mean * base,
        runs=len(found),
        interval=interval,
        sigma=sd,
    )


def _preemption(
    family: tuple[str, str],
    events: int,
    exposure: float,
    node_h: float,
    waits: list[float],
) -> Preemption:
    """The rate per node-hour with its exact Poisson interval (Garwood), and the wait's mean and spread."""
    rate = events / exposure if exposure > 0 else None
    interval = None
    if exposure > 0:
        low = (
            stats.chi2.ppf((1 - LEVEL) / 2, 2 * events) / (2 * exposure)
            if events
            else 0.0
        )
        high = stats.chi2.ppf((1 + LEVEL) / 2, 2 * events + 2) / (2 * exposure)
        interval = Interval(low=float(low), high=float(high), level=LEVEL)
    mean_wait = statistics.fmean(waits) if waits else None
    cv = (
        max(1.0, statistics.stdev(waits) / mean_wait)
        if len(waits) >= 2 and mean_wait
        else None
    )
    return Preemption(
        provider=family[0],
        instance_type=family[1],
        rate_per_node_h=rate,
        events=events,
        node_h=node_h,
        interval=interval,
        capacity_wait_h=mean_wait,
        capacity_wait_cv=cv,
        waits=len(waits),
    )


def _storage(
    name: str, checkpoint: list[float], restart: list[float], old: Calibration
) -> StorageTimes:
    base_checkpoint, base_restart = old.storage_factors(name)
    return StorageTimes(
        storage=name,
        checkpoint_factor=_geometric(checkpoint)[0] * base_checkpoint
        if checkpoint
        else None,
        restart_factor=_geometric(restart)[0] * base_restart if restart else None,
        runs=max(len(checkpoint), len(restart)),
    )
