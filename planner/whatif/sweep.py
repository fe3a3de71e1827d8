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
"""
from __future__ import annotations

import gc
import math
import os
import re
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from planner.candidates.cache import CandidateCache
from planner.errors import PlannerError
from planner.schema.fields import MAX_MULTIPLIER
from planner.solve.outcome import SOLVED

PARAMETERS = ("spot_price_multiplier", "preemption_multiplier", "on_demand_price_multiplier", "rate_multiplier")
OPTIONS = {"spot_price_multiplier": "--spot-price", "preemption_multiplier": "--preemption",
           "on_demand_price_multiplier": "--on-demand-price", "rate_multiplier": "--rate"}
SHORT = {"spot_price_multiplier": "spot", "preemption_multiplier": "preempt", "on_demand_price_multiplier": "on_demand",
         "rate_multiplier": "rate"}
RATE = "rate_multiplier"
"""The endpoints' traffic: as it grows their node counts grow by design, so along it a switch is a change of
pools (GPU type, market, TP degree), not of node counts."""
NAMED = ", ".join(OPTIONS.values())  # "--spot-price, --preemption, --on-demand-price, --rate", for messages
WHERE_KEYS = ("provider", "gpu", "region", "instance_type")
DEFAULT_PRECISION = 0.005
MAX_POINTS = 10_000


# ---------------------------------------------------------------- parsing


def sweep_axes(given: dict[str, str | None]) -> dict[str, list[float]]:
    """The axes the command line asks for (parameter -> its range text, None when not given): at least
    one, and at most two with several values (a sweep is a line or a grid)."""
    if not any(given.values()):
        raise PlannerError(f"give at least one of {NAMED}", "whatif")
    axes = {p: parse_range(text, OPTIONS[p]) for p, text in given.items() if text}
    if sum(len(v) > 1 for v in axes.values()) > 2:
        raise PlannerError(f"at most two of {NAMED} may have several values; give the others one value", "whatif")
    return axes


def parse_range(text: str, option: str) -> tuple[float, ...]:
    """`start:stop:points` (evenly spaced, both ends included) or a comma list; multipliers > 0."""
    text = (text or "").strip()
    example = "expected start:stop:points (e.g. 0.5:2.0:16) or a comma list (e.g. 0.8,1,1.25)"
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise PlannerError(f"{example}, got {text!r}", option)
        try:
            start, stop = float(parts[0]), float(parts[1])
        except ValueError:
            raise PlannerError(f"{example}, got {text!r}", option) from None
        if not re.fullmatch(r"\s*\d+\s*", parts[2]):
            raise PlannerError(f"the number of points must be a whole number, got {parts[2]!r} in {text!r}", option)
        points = int(parts[2])
        _check_positive((start, stop), text, option)
        if points < 2 or points > MAX_POINTS:
            raise PlannerError(f"points must be between 2 and {MAX_POINTS:,}, got {points} in {text!r}", option)
        if not stop > start:
            raise PlannerError(f"stop must be greater than start, got {text!r}", option)
        step = (stop - start) / (points - 1)
        values = tuple(round(start + i * step, 12) for i in range(points))
        if values[0] <= 0 or len(set(values)) < points:  # the grid is kept to 12 decimals
            raise PlannerError(f"{points} points from {start:g} to {stop:g} are not distinct at 12 decimals, "
                               f"got {text!r}; give fewer points, a wider range or a comma list", option)
        return values
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise PlannerError(f"{example}, got {text!r}", option) from None
    if not values:
        raise PlannerError(f"{example}, got {text!r}", option)
    _check_positive(values, text, option)
    if len(values) > MAX_POINTS:
        raise PlannerError(f"at most {MAX_POINTS:,} points, got {len(values):,}", option)
    return tuple(sorted(set(values)))


def _check_positive(values: Iterable[float], text: str, option: str) -> None:
    """Multipliers above 0; of prices and preemption rates at most MAX_MULTIPLIER, as the file's own overrides
    (`--rate` is held to the traffic it gives: `check_rate`)."""
    most = math.inf if option == OPTIONS[RATE] else MAX_MULTIPLIER
    for v in values:
        if not (0 < v <= most and math.isfinite(v)):
            bound = f" and at most {most:,.0f}" if math.isfinite(most) else ""
            raise PlannerError(f"multipliers must be finite, greater than 0{bound}, got {v:g} in {text!r}", option)


def check_rate(values: Iterable[float], workloads) -> None:
    """`--rate` scales endpoints' traffic: the file must have an endpoint, and the largest rate stays in bounds."""
    from planner.schema.endpoint import MAX_REQUESTS_PER_S

    endpoints = [w for w in workloads if w.serving]
    if not endpoints:
        raise PlannerError("multiplies the traffic of serving endpoints (kind: serving), and the file has none",
                           "--rate")
    peak = max(endpoints, key=lambda w: w.traffic.peak)
    if peak.traffic.peak * max(values) > MAX_REQUESTS_PER_S:
        raise PlannerError(f"x{max(values):g} takes {peak.name!r} from {peak.traffic.peak:g} to "
                           f"{peak.traffic.peak * max(values):g} requests/s, above the {MAX_REQUESTS_PER_S:g} "
                           "the planner accepts", "--rate")


def parse_where(items: Iterable[str]) -> dict[str, str]:
    """`provider=aws,gpu=H100` (repeatable) -> {key: value}; keys: provider, gpu, region, instance_type."""
    where: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not value:
                raise PlannerError(f"expected key=value pairs such as provider=aws,gpu=H100, got {part.strip()!r}",
                                   "--where")
            if key not in WHERE_KEYS:
                from planner.errors import did_you_mean

                raise PlannerError(f"unknown key {key!r}{did_you_mean(key, WHERE_KEYS)}; expected one of "
                                   f"{', '.join(WHERE_KEYS)}", "--where")
            if key in where and where[key] != value:
                raise PlannerError(f"{key} given twice ({where[key]!r} and {value!r})", "--where")
            where[key] = value
    return where


def check_where(where: dict[str, str], catalog) -> None:
    """Every `--where` value names something the scenario's catalogs offer, and together they match an offer."""
    from planner.errors import did_you_mean

    offers = catalog.offers
    for key, column in (("provider", "provider"), ("region", "region"), ("instance_type", "instance_type")):
        if key in where and where[key] not in set(offers[column]):
            raise PlannerError(f"unknown {key} {where[key]!r}{did_you_mean(where[key], set(offers[column]))} "
                               "in the scenario's catalogs", "--where")
    if "gpu" in where and not catalog.knows_gpu(where["gpu"]):
        raise PlannerError(f"unknown GPU {where['gpu']!r}{did_you_mean(where['gpu'], catalog.gpu_names_and_families())}",
                           "--where")
    if where and not _where_mask(where, catalog).any():
        raise PlannerError(f"no offer matches {', '.join(f'{k}={v}' for k, v in where.items())}", "--where")


def _where_mask(where: dict[str, str], catalog):
    offers = catalog.offers
    mask = offers["provider"].notna()
    for key in ("provider", "region", "instance_type"):
        if key in where:
            mask &= offers[key] == where[key]
    if "gpu" in where:
        mask &= offers["gpu"].map(lambda g: catalog.gpu_matches(g, where["gpu"]))
    return mask


# ---------------------------------------------------------------- one point


@dataclass(frozen=True)
class PointTask:
    """One point of a sweep: plain data, so any executor (local or remote) can carry it."""

    source: str  # the scenario file (another solve function may read another kind of file)
    spot_price_multiplier: float = 1.0
    preemption_multiplier: float = 1.0
    on_demand_price_multiplier: float = 1.0
    rate_multiplier: float = 1.0  # every endpoint's traffic
    where: tuple[tuple[str, str], ...] = ()
    time_limit_s: float = 60.0
    seed: int = 0
    hint: tuple[tuple[str, str], ...] = ()  # (workload, cid) of the neighbouring point's plan

    def at(self, parameter: str, value: float, hint: dict[str, str] | None = None) -> "PointTask":
        return replace(self, **{parameter: value}, hint=tuple(sorted((hint or {}).items())))

    @property
    def multipliers(self) -> dict[str, float]:
        return {p: getattr(self, p) for p in PARAMETERS}


@dataclass(frozen=True)
class PointResult:
    """What a sweep keeps of one solved point."""

    multipliers: dict[str, float]
    status: str
    objective_usd: float | None
    placements: dict[str, str]  # workload -> provider/region/instance_type/market/nodes
    cids: dict[str, str] = field(default_factory=dict)  # workload -> candidate id (the next point's hint)
    spend_usd: dict[str, float] = field(default_factory=dict)  # market -> expected cost
    pools: dict[str, str] = field(default_factory=dict)  # endpoint -> its pools without node counts
    settled: bool = True  # its placements are the answer, not where a time limit stopped the search (see `proven`)

    def held(self, name: str, parameter: str) -> str | None:
        """What a switch along `parameter` compares: the placement, or an endpoint's pools along the rate."""
        return self.pools.get(name) if parameter == RATE and name in self.pools else self.placements.get(name)

    def record(self) -> dict:
        """The JSON contract's point."""
        return {**self.multipliers, "status": self.status, "objective_usd": self.objective_usd,
                "placements": dict(self.placements), "spend_usd": dict(self.spend_usd)}


_WORKER: dict[tuple, tuple] = {}
"""This process's file and the CandidateCache its points share: one entry (a sweep's worker), replaced
when the file changes."""


def loaded_scenario(source: str):
    """The scenario, loaded once per process (and again only if the file changes)."""
    return _loaded(source, "scenario")[0]


def loaded_quarter(source: str):
    """The quarter file, loaded once per process (and again only if the file changes)."""
    return _loaded(source, "quarter")[0]


def _loaded(source: str, kind: str) -> tuple:
    """(the loaded file, the candidate cache of this worker's points)."""
    from planner.load.quarter import load_quarter
    from planner.load.scenario import load_scenario

    load = load_quarter if kind == "quarter" else load_scenario
    path = Path(source)
    try:
        stat = path.stat()
    except OSError:
        return load(path), CandidateCache()  # raises the usual one-line error
    key = (kind, str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _WORKER:
        _WORKER.clear()
        _WORKER[key] = (load(path), CandidateCache())
    return _WORKER[key]


def placement(row) -> str:
    return f"{row.provider}/{row.region}/{row.instance_type}/{row.market}/{int(row.nodes)}"


def solve_point(task: PointTask) -> PointResult:
    """Solve the scenario at one point: the scenario's overrides, then the point's multipliers on
    the offers `where` selects; CP-SAT on one worker (the sweep parallelises across points)."""
    from planner.solve.pipeline import make_plan

    loaded, cache = _loaded(task.source, "scenario")
    loaded = _at_rate(loaded, task.rate_multiplier, "scenario", "workloads")
    offers = _point_offers(task, loaded.catalog, loaded.scenario.overrides)
    plan = make_plan(loaded, time_limit_s=task.time_limit_s, workers=1, seed=task.seed, offers=offers,
                     hint=dict(task.hint) or None, cache=cache, runner_ups=0)  # a point reports its placements only
    if plan.result is None or not plan.result.solved:
        return PointResult(task.multipliers, plan.status, None, {}, settled=proven(plan.status))
    return _point_result(task, plan.status, plan.result.objective_usd, plan.chosen.rename(columns={"workload": "run"}),
                         plan.result.serving, plan.candidates.endpoints, settled=proven(plan.status))


def proven(status: str) -> bool:
    """Whether a scenario point's outcome is proven: where the time limit stops CP-SAT short of a proof, ties and
    near-ties among plans fall where the search happened to be, so placements may differ between neighbouring
    points with nothing changed between them. (A quarter point's search stops on deterministic work, the same on
    every run, unless the clock cut it first: `BatchResult.clocked`.)"""
    return status in ("OPTIMAL", "INFEASIBLE")


def solve_quarter_point(task: PointTask) -> PointResult:
    """The same for a quarter file: `planner batch` at the point's prices (its own greedy hint);
    placements and switches are per run."""
    from planner.batch.pipeline import make_batch_plan

    loaded, cache = _loaded(task.source, "quarter")
    loaded = _at_rate(loaded, task.rate_multiplier, "quarter", "runs")
    offers = _point_offers(task, loaded.catalog, loaded.quarter.overrides)
    plan = make_batch_plan(loaded, time_limit_s=task.time_limit_s, workers=1, seed=task.seed, offers=offers,
                           cache=cache)
    settled = plan.result is None or not plan.result.clocked
    if plan.status not in SOLVED:
        return PointResult(task.multipliers, plan.status, None, {}, settled=settled)
    return _point_result(task, plan.status, plan.result.objective_usd, plan.result.chosen, plan.result.serving,
                         plan.endpoints.options if plan.endpoints is not None else None, settled)


def _at_rate(loaded, factor: float, file: str, items: str):
    """The loaded file (`file`: scenario or quarter) with every endpoint among its `items` at `factor` times
    its traffic."""
    if factor == 1.0:
        return loaded
    inner = getattr(loaded, file)
    return replace(loaded, **{file: inner.model_copy(update={items: tuple(w.at_rate(factor)
                                                                          for w in getattr(inner, items))})})


def _point_offers(task: PointTask, catalog, overrides):
    """The offers at the point: the file's overrides, then the point's multipliers where it says."""
    from planner.candidates.offers import apply_overrides

    return apply_overrides(catalog.offers, overrides, catalog, spot_mult=task.spot_price_multiplier,
                           preempt_mult=task.preemption_multiplier, on_demand_mult=task.on_demand_price_multiplier,
                           where=dict(task.where) or None)


def _point_result(task: PointTask, status: str, objective_usd: float, chosen, serving=None,
                  options=None, settled: bool = True) -> PointResult:
    """What a sweep keeps of a solved point's chosen rows (one per `run`) and endpoints' nodes (`serving`
    over `options`); reads only the few columns it needs (a named tuple of every candidate column costs
    ~10 ms, a point ~0.4 s)."""
    import pandas as pd

    spend = chosen.groupby("market")["cost_usd"].sum() if len(chosen) else pd.Series(dtype=float)
    picked = list(chosen[["run", "cid", "provider", "region", "instance_type", "market", "nodes"]].itertuples(
        index=False)) if len(chosen) else []
    placements, kinds = {r.run: placement(r) for r in picked}, {}
    if serving is not None and len(serving):
        pools = serving.join(options[["offer_key", "market", "tp"]], on="option")
        spend = spend.add(pools.groupby("market")["cost_usd"].sum(), fill_value=0.0)
        placements |= endpoint_placements(pools)
        kinds = endpoint_placements(pools, nodes=False)
    return PointResult(task.multipliers, status, float(objective_usd), placements,
                       {r.run: r.cid for r in picked}, {m: float(spend.get(m, 0.0)) for m in ("spot", "spot_fallback", "on_demand")},
                       kinds, settled)


def endpoint_placements(pools, nodes: bool = True) -> dict[str, str]:
    """Per endpoint, its pools as `offer/market/TPt/nodes` joined by ` + `, with the most nodes the pool runs in
    any period (so a switch of GPU, market or size shows, and autoscaling within a day does not); without
    `nodes`, only which pools run (`offer/market/TPt`)."""
    most = pools.groupby(["workload", "offer_key", "market", "tp"], sort=True)["nodes"].max()
    out: dict[str, list[str]] = {}
    for (name, offer, market, tp), count in most.items():
        if count:
            out.setdefault(name, []).append(f"{offer}/{market}/TP{tp}" + (f"/{int(count)}" if nodes else ""))
    return {name: " + ".join(parts) for name, parts in out.items()}


SolveFn = Callable[[PointTask], PointResult]


def solve_run(tasks: list[PointTask], solve: SolveFn = solve_point) -> list[PointResult]:
    """Solve neighbouring points in order, each hinted with the plan of the one before."""
    results: list[PointResult] = []
    for task in tasks:
        if results and not task.hint:
            task = replace(task, hint=tuple(sorted(results[-1].cids.items())))
        results.append(solve(task))
    return results


# ---------------------------------------------------------------- switches


@dataclass(frozen=True)
class BisectJob:
    """One grid interval along `parameter` where some workloads' placements differ at the ends."""

    template: PointTask  # the other multipliers fixed
    parameter: str
    low: PointResult
    high: PointResult
    workloads: tuple[str, ...]
    precision: float


def _value(result: PointResult, parameter: str) -> float:
    return result.multipliers[parameter]


def changed(a: PointResult, b: PointResult, among: Iterable[str] | None = None, parameter: str = "") -> list[str]:
    """The workloads whose placement differs between two points (along `parameter`: see `PointResult.held`)."""
    names = among if among is not None else sorted(set(a.placements) | set(b.placements))
    return [w for w in names if a.held(w, parameter) != b.held(w, parameter)]


def find_switches(job: BisectJob, solve: SolveFn = solve_point) -> tuple[list[dict], int]:
    """Bisect the interval until it is at most `precision` wide wherever a tracked workload's
    placement differs between its ends; each midpoint is hinted with its lower neighbour's plan.
    Only settled points are split on (`PointResult.settled`): an interval with an unsettled end, or whose
    midpoint is unsettled, is where the switch is said to be, as wide as it is (`within`: its half-width).
    Returns (the switches, each with `at` the midpoint of its final interval; solves made)."""
    out, stack, solves = [], [(job.low, job.high, list(job.workloads))], 0
    while stack:
        low, high, names = stack.pop()
        lo, hi = _value(low, job.parameter), _value(high, job.parameter)
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
            out.append({"workload": name, "parameter": job.parameter, "at": at, "within": round((hi - lo) / 2, 12),
                        "from": low.placements.get(name), "to": high.placements.get(name),
                        "held_from": low.held(name, job.parameter), "held_to": high.held(name, job.parameter),
                        **fixed, job.parameter: at})
    return out, solves


# ---------------------------------------------------------------- the sweep


@dataclass(frozen=True)
class SweepSpec:
    source: str
    axes: dict[str, tuple[float, ...]]  # parameter -> values; at most two with more than one value
    where: tuple[tuple[str, str], ...] = ()
    precision: float = DEFAULT_PRECISION
    time_limit_s: float = 60.0
    seed: int = 0

    @property
    def swept(self) -> list[str]:
        return [p for p in PARAMETERS if len(self.axes.get(p, (1.0,))) > 1]


@dataclass
class SweepResult:
    spec: SweepSpec
    points: list[PointResult]
    switches: list[dict]
    seconds: float = 0.0
    solves: int = 0

    def record(self) -> dict:
        """The JSON contract: points and switches (plus what was swept and how finely)."""
        return {"scenario": self.spec.source, "swept": self.spec.swept, "where": dict(self.spec.where),
                "precision": self.spec.precision, "points": [p.record() for p in self.points],
                "switches": [{k: s[k] for k in ("workload", "parameter", "at", "within", "from", "to")} |
                             {p: s[p] for p in PARAMETERS} for s in self.switches]}


class InlineExecutor(Executor):
    """Runs each submitted call at once in this process (`--workers 1`)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed back through the future, like any executor
            future.set_exception(exc)
        return future


def grid(spec: SweepSpec) -> list[dict[str, float]]:
    """Every point of the sweep; the first swept parameter varies fastest."""
    import itertools

    values = [spec.axes.get(p, (1.0,)) for p in PARAMETERS]
    order = sorted(range(len(PARAMETERS)), key=lambda i: (len(values[i]) == 1, i))  # swept axes first
    points = []
    for combo in itertools.product(*(values[i] for i in reversed(order))):
        point = dict(zip((PARAMETERS[i] for i in reversed(order)), combo))
        points.append({p: point[p] for p in PARAMETERS})
    return points


# Runs of neighbouring points per sweep, whatever the number of workers: a point's hint comes
# from the point before it in its run, and CP-SAT may break a tie between equal optima by
# the hint, so cutting by the worker count would make the plans depend on --workers.
SWEEP_RUNS = 4


def _runs(spec: SweepSpec, points: list[dict], chunks: int) -> list[list[int]]:
    """Indices of neighbouring points along the first swept axis, cut into about `chunks` runs."""
    swept = spec.swept
    line_length = len(spec.axes[swept[0]]) if swept else 1
    lines = [list(range(i, i + line_length)) for i in range(0, len(points), line_length)]
    per_line = max(1, math.ceil(chunks / len(lines)))
    runs = []
    for line in lines:
        size = max(1, math.ceil(len(line) / per_line))
        runs += [line[i:i + size] for i in range(0, len(line), size)]
    return runs


def _bisect_jobs(spec: SweepSpec, template: PointTask, points: list[dict], results: list[PointResult]) -> list[BisectJob]:
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
                jobs.append(BisectJob(fixed, parameter, low, high, tuple(names), spec.precision))
    return jobs


def run_sweep(spec: SweepSpec, executor: Executor | None = None, solve: SolveFn = solve_point,
              progress: Callable[[int, int], None] | None = None, chunks: int | None = None) -> SweepResult:
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
    template = PointTask(str(Path(spec.source).resolve()), where=spec.where, time_limit_s=spec.time_limit_s,
                         seed=spec.seed)
    points = grid(spec)
    runs = _runs(spec, points, chunks or SWEEP_RUNS)
    total, done = len(points), 0
    futures = [(run, executor.submit(solve_run, [replace(template, **points[i]) for i in run], solve)) for run in runs]
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
    switches.sort(key=lambda s: (s["parameter"] != (spec.swept or [""])[0], s["workload"],
                                 *(s[p] for p in PARAMETERS)))
    return SweepResult(spec, results, switches, time.perf_counter() - started, solves)


DASK_TIMEOUT_S = 10.0  # connecting to a scheduler, and waiting for its first worker


def make_executor(processes: int | None = None, executor: str = "local") -> Executor:
    """`--executor`: `local` is `processes` local processes (default one per core; inline for one);
    `dask://HOST:PORT` is that Dask cluster, which runs as many points at once as it has worker
    threads, so `processes` is refused rather than silently ignored."""
    if executor == "local":
        processes = processes or os.cpu_count() or 1
        if processes <= 1:
            return InlineExecutor()
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(max_workers=processes, initializer=_ignore_interrupts)
    address = dask_address(executor)
    if processes is not None:
        raise PlannerError("sets local processes; a Dask cluster runs as many points at once as it has worker "
                           "threads; drop --processes or use --executor local", "--processes")
    return dask_executor(address)


def dask_address(text: str) -> str:
    """`dask://HOST:PORT` -> the scheduler's `tcp://HOST:PORT`."""
    match = re.fullmatch(r"dask://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})", text.strip())
    if not match or not 0 < int(match[2]) < 65536:
        raise PlannerError(f"expected local or dask://HOST:PORT (e.g. dask://10.0.0.5:8786), got {text!r}",
                           "--executor")
    return f"tcp://{match[1]}:{match[2]}"


class DaskExecutor(Executor):
    """A Dask client's `concurrent.futures` executor that owns the client: the end of `with` closes
    it, and leaving `with` on an error or Ctrl-C cancels the points still queued on the cluster."""

    def __init__(self, client):
        self.client, self.pool = client, client.get_executor()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        try:
            self.pool.shutdown(wait=wait and not cancel_futures)
        finally:
            self.client.close()

    def __exit__(self, exc_type, exc_value, traceback):
        self.shutdown(wait=exc_type is None)
        return False


def dask_executor(address: str) -> DaskExecutor:
    """Connect to the scheduler at `address` within DASK_TIMEOUT_S; one line if that fails."""
    try:
        from distributed import Client
    except ImportError:
        raise PlannerError("dask:// needs the dask extra: pip install 'gpu-planner[dask]'", "--executor") from None
    try:
        client = Client(address, timeout=DASK_TIMEOUT_S, set_as_default=False)
    except OSError as exc:  # refused, unknown host, or no answer in time
        message = f"cannot reach a Dask scheduler at {address}: {exc}"
    except Exception:  # noqa: BLE001 - garbage where a message's length should be (MemoryError), and the like
        message = f"{address} answers, but not as a Dask scheduler (the dashboard's port? the scheduler's is 8786)"
    else:
        try:
            _check_workers(client, address)
        except BaseException:
            client.close()
            raise
        return DaskExecutor(client)
    # Close the half-made client (still connected to whatever answered) now: left to interpreter
    # exit, its close waits twice the timeout, then prints a traceback.
    gc.collect()
    raise PlannerError(message, "--executor")


def _check_workers(client, address: str) -> None:
    """A cluster without workers would hang the sweep, and a worker without this planner's version
    would fail every point with a traceback (or plan differently): say so in one line instead."""
    from importlib.metadata import version

    try:
        client.wait_for_workers(1, timeout=DASK_TIMEOUT_S)
    except TimeoutError:
        raise PlannerError(f"the Dask scheduler at {address} has no workers after {DASK_TIMEOUT_S:g} s; start "
                           f"some with `dask worker {address}`", "--executor") from None
    here = version("gpu-planner")
    for worker, there in client.run(version, "gpu-planner", on_error="return").items():
        if there != here:
            has = f"gpu-planner {there}" if isinstance(there, str) else "no gpu-planner"
            raise PlannerError(f"Dask worker {worker} has {has} (here {here}); install the same version on "
                               "every worker", "--executor")


def _ignore_interrupts() -> None:
    """Worker processes leave Ctrl-C to the parent, which stops the sweep with one line."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------- reporting


def point_rows(result: SweepResult) -> list[dict]:
    """One row per grid point: the swept multipliers, status, objective and spot share of spending."""
    # one point: the parameters given (a single --rate point was labelled and valued as the spot price)
    swept = result.spec.swept or [p for p in PARAMETERS if p in result.spec.axes] or [PARAMETERS[0]]
    rows = []
    previous = None
    for point in result.points:
        spend = sum(point.spend_usd.values())
        row = {SHORT[p]: point.multipliers[p] for p in swept}
        row |= {"status": point.status, "objective_usd": point.objective_usd,
                "spot_share": (point.spend_usd.get("spot", 0.0) / spend) if spend > 0 else None}
        if len(swept) == 1:
            row["moved"] = ", ".join(changed(previous, point, parameter=swept[0])) if previous else ""
        rows.append(row)
        previous = point
    return rows


def segments(result: SweepResult) -> list[dict]:
    """For a one-parameter sweep: each workload's placement over each stretch between its switches."""
    if len(result.spec.swept) != 1:
        return []
    parameter = result.spec.swept[0]
    values = result.spec.axes[parameter]
    names = [w for w in dict.fromkeys(w for p in result.points for w in p.placements)]
    rows = []
    for name in names:
        switches = sorted((s for s in result.switches if s["workload"] == name), key=lambda s: s["at"])
        edges = [values[0], *(s["at"] for s in switches), values[-1]]
        held = [s["held_from"] for s in switches] + [switches[-1]["held_to"] if switches else
                                                     result.points[0].held(name, parameter)]
        for lo, hi, where in zip(edges, edges[1:], held):
            rows.append({"workload": name, "from_x": lo, "to_x": hi, "placement": where or "-"})
    return rows


def sweep_text(result: SweepResult, fmt: str) -> str:
    import pandas as pd

    from planner.report.render import render_table, to_csv, to_json

    if fmt == "json":
        return to_json(result.record())
    if fmt == "csv":
        names = list(dict.fromkeys(w for p in result.points for w in p.placements))
        frame = pd.DataFrame([{**p.multipliers, "status": p.status, "objective_usd": p.objective_usd,
                               **{w: p.placements.get(w, "") for w in names}} for p in result.points])
        return to_csv(frame)
    spec = result.spec
    label = ", ".join(f"{SHORT[p]} x{spec.axes[p][0]:g}..{spec.axes[p][-1]:g} ({len(spec.axes[p])} points)"
                      for p in spec.swept) or "one point"
    fixed = ", ".join(f"{SHORT[p]} x{spec.axes[p][0]:g}" for p in PARAMETERS if p not in spec.swept
                      and spec.axes.get(p, (1.0,))[0] != 1.0)
    where = ", ".join(f"{k}={v}" for k, v in spec.where) or "all offers"
    title = f"what-if sweep: {label}{'; ' + fixed if fixed else ''}; multipliers apply to {where}"
    parts = [title, render_table(pd.DataFrame(point_rows(result)), fold=("moved",))]
    if result.switches:
        coarse = any(s["within"] > spec.precision / 2 * (1 + 1e-9) for s in result.switches)
        frame = pd.DataFrame([{"workload": s["workload"], "parameter": SHORT[s["parameter"]], "at": s["at"],
                               **({"within": f"±{s['within']:g}"} if coarse else {}),
                               **{SHORT[p]: s[p] for p in spec.swept if p != s["parameter"]},
                               "from": s["from"] or "-", "to": s["to"] or "-"} for s in result.switches])
        heading = f"switch points (bisected to ±{spec.precision / 2:g}" + (
            " between proven points; no finer where the time limit left a point unproven)" if coarse else ")")
        parts.append(render_table(frame, title=heading, fold=("from", "to")))  # endpoints' pools run long
    else:
        parts.append("no placement changes between grid points\n")
    if segments(result):
        parts.append(render_table(pd.DataFrame(segments(result)), title="placements between switch points",
                                  fold=("placement",)))
    parts.append(f"{len(result.points)} points, {result.solves} solves (with bisection), {result.seconds:.1f} s\n")
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)
