"""`planner whatif`: sweep price and preemption multipliers, and find where each placement switches.

A sweep is a list of *points* (plain, picklable `PointTask`s). One module-level function
solves one point (`solve_point`: scenario file -> offers scaled by the point's multipliers
-> `make_plan`); the runner hands points to any `concurrent.futures.Executor`, so points can
run inline, in local processes, or on a Dask cluster (`make_executor`), and a different "solve
one point" function (`solve_quarter_point`, for quarter files of `planner batch`) plugs in
through `solve=`.

Work is reused, never results: each worker process keeps the loaded scenario and
its `CandidateCache` (per workload: the price-independent rows with their physics and
group numbers, the screening bounds per preemption state, exact cost-model results per
timing key), so a point maps its prices in, re-screens and re-prunes on arrays; each point
is rebuilt from scratch and only *hinted* with its neighbour's plan (never constrained by
a previous objective).

Switches are found by bisection between adjacent grid points whose placement of a workload
differs, until the interval is at most `precision` wide; `at` is its midpoint.

This module runs the sweep (neighbouring points in runs, then the bisections); what a sweep is
asked for (`spec`), one point (`points`), where points run (`executors`) and what it reports
(`result`) have a home each.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from pathlib import Path

from planner.errors import PlannerError
from planner.whatif.executors import InlineExecutor
from planner.whatif.points import (
    PointResult,
    PointTask,
    SolveFn,
    changed,
    multiplier_of,
    solve_point,
    solve_run,
)
from planner.whatif.result import SweepResult
from planner.whatif.spec import NAMED, PARAMETERS, SweepSpec, grid


@dataclass(frozen=True)
class BisectJob:
    """One grid interval along `parameter` where some workloads' placements differ at the ends."""

    template: PointTask  # the other multipliers fixed
    parameter: str
    low: PointResult
    high: PointResult
    workloads: tuple[str, ...]
    precision: float


def find_switches(
    job: BisectJob, solve: SolveFn = solve_point
) -> tuple[list[dict], int]:
    """Bisect the interval until it is at most `precision` wide wherever a tracked workload's
    placement differs between its ends; each midpoint is hinted with its lower neighbour's plan.
    Only settled points are split on (`PointResult.settled`): an interval with an unsettled end, or whose
    midpoint is unsettled, is where the switch is said to be, as wide as it is (`within`: its half-width).
    Returns (the switches, each with `at` the midpoint of its final interval; solves made)."""
    out, stack, solves = [], [(job.low, job.high, list(job.workloads))], 0
    while stack:
        low, high, names = stack.pop()
        lo, hi = multiplier_of(low, job.parameter), multiplier_of(high, job.parameter)
        if hi - lo > job.precision * (1 + 1e-9) and low.settled and high.settled:
            middle = solve(job.template.at(job.parameter, (lo + hi) / 2, low.cids))
            solves += 1
            if middle.settled:
                for pair in ((middle, high), (low, middle)):
                    moved = changed(*pair, names, job.parameter)
                    if moved:
                        stack.append((*pair, moved))
                continue
        at = round((lo + hi) / 2, 12)
        fixed = {p: v for p, v in low.multipliers.items() if p != job.parameter}
        for name in names:
            out.append(
                {
                    "workload": name,
                    "parameter": job.parameter,
                    "at": at,
                    "within": round((hi - lo) / 2, 12),
                    "from": low.placements.get(name),
                    "to": high.placements.get(name),
                    "held_from": low.held(name, job.parameter),
                    "held_to": high.held(name, job.parameter),
                    **fixed,
                    job.parameter: at,
                }
            )
    return out, solves


# Runs of neighbouring points per sweep, whatever the number of workers: a point's hint comes
# from the point before it in its run, and CP-SAT may break a tie between equal optima by
# the hint, so cutting by the worker count would make the plans depend on --workers.
SWEEP_RUNS = 4


def _runs(spec: SweepSpec, points: list[dict], chunks: int) -> list[list[int]]:
    """Indices of neighbouring points along the first swept axis, cut into about `chunks` runs."""
    swept = spec.swept
    line_length = len(spec.axes[swept[0]]) if swept else 1
    lines = [
        list(range(i, i + line_length)) for i in range(0, len(points), line_length)
    ]
    per_line = max(1, math.ceil(chunks / len(lines)))
    runs = []
    for line in lines:
        size = max(1, math.ceil(len(line) / per_line))
        runs += [line[i : i + size] for i in range(0, len(line), size)]
    return runs


def _bisect_jobs(
    spec: SweepSpec, template: PointTask, points: list[dict], results: list[PointResult]
) -> list[BisectJob]:
    index = {tuple(p[q] for q in PARAMETERS): r for p, r in zip(points, results)}
    jobs = []
    for parameter in spec.swept:
        values = spec.axes[parameter]
        for p in points:
            if p[parameter] == values[-1]:
                continue
            low = index[tuple(p[q] for q in PARAMETERS)]
            nxt = dict(p, **{parameter: values[values.index(p[parameter]) + 1]})
            high = index[tuple(nxt[q] for q in PARAMETERS)]
            names = changed(low, high, parameter=parameter)
            if names:
                fixed = replace(template, **{q: p[q] for q in PARAMETERS})
                jobs.append(
                    BisectJob(fixed, parameter, low, high, tuple(names), spec.precision)
                )
    return jobs


def run_sweep(
    spec: SweepSpec,
    executor: Executor | None = None,
    solve: SolveFn = solve_point,
    progress: Callable[[int, int], None] | None = None,
    chunks: int | None = None,
) -> SweepResult:
    """Solve every grid point, then bisect every interval where a placement changes.

    `executor` runs `solve_run` over runs of neighbouring points and `find_switches` over
    intervals; both are module-level functions of plain data, so any Executor works
    (default: inline). `progress(done, total)` is called as work finishes.
    """
    import time

    started = time.perf_counter()
    executor = executor or InlineExecutor()
    if len(spec.swept) > 2:
        raise PlannerError(f"at most two of {NAMED} may have several values")
    # an absolute path: a Dask worker resolves a relative one from wherever `dask worker` started
    template = PointTask(
        str(Path(spec.source).resolve()),
        where=spec.where,
        time_limit_s=spec.time_limit_s,
        seed=spec.seed,
    )
    points = grid(spec)
    runs = _runs(spec, points, chunks or SWEEP_RUNS)
    total, done = len(points), 0
    futures = [
        (
            run,
            executor.submit(
                solve_run, [replace(template, **points[i]) for i in run], solve
            ),
        )
        for run in runs
    ]
    results: list[PointResult | None] = [None] * len(points)
    for run, future in futures:
        for i, result in zip(run, future.result()):
            results[i] = result
        done += len(run)
        if progress:
            progress(done, total)
    jobs = _bisect_jobs(spec, template, points, results)
    total += len(jobs)
    switches, solves = [], len(points)
    pending = [executor.submit(find_switches, job, solve) for job in jobs]
    for future in pending:
        found, count = future.result()
        switches += found
        solves += count
        done += 1
        if progress:
            progress(done, total)
    switches.sort(
        key=lambda s: (
            s["parameter"] != (spec.swept or [""])[0],
            s["workload"],
            *(s[p] for p in PARAMETERS),
        )
    )
    return SweepResult(spec, results, switches, time.perf_counter() - started, solves)
