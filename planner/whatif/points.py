"""One point of a sweep: the plain task an executor carries (`PointTask`), what is kept of its plan
(`PointResult`), and the module-level functions that solve it (a scenario's `solve_point`, a quarter file's
`solve_quarter_point`), each worker process keeping its loaded file and candidate cache between points.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from planner.candidates.cache import CandidateCache
from planner.solve.outcome import SOLVED
from planner.whatif.spec import PARAMETERS, RATE


@dataclass(frozen=True)
class PointTask:
    """One point of a sweep: plain data, so any executor (local or remote) can carry it."""

    source: (
        str  # the scenario file (another solve function may read another kind of file)
    )
    spot_price_multiplier: float = 1.0
    preemption_multiplier: float = 1.0
    on_demand_price_multiplier: float = 1.0
    rate_multiplier: float = 1.0  # every endpoint's traffic
    where: tuple[tuple[str, str], ...] = ()
    time_limit_s: float = 60.0
    seed: int = 0
    hint: tuple[
        tuple[str, str], ...
    ] = ()  # (workload, cid) of the neighbouring point's plan

    def at(
        self, parameter: str, value: float, hint: dict[str, str] | None = None
    ) -> PointTask:
        return replace(
            self, **{parameter: value}, hint=tuple(sorted((hint or {}).items()))
        )

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
    # workload -> candidate id (the next point's hint)
    cids: dict[str, str] = field(default_factory=dict)
    spend_usd: dict[str, float] = field(default_factory=dict)  # market -> expected cost
    # endpoint -> its pools without node counts
    pools: dict[str, str] = field(default_factory=dict)
    settled: bool = True  # its placements are the answer, not where a time limit stopped the search (see `proven`)

    def held(self, name: str, parameter: str) -> str | None:
        """What a switch along `parameter` compares: the placement, or an endpoint's pools along the rate."""
        return (
            self.pools.get(name)
            if parameter == RATE and name in self.pools
            else self.placements.get(name)
        )

    def record(self) -> dict:
        """The JSON contract's point."""
        return {
            **self.multipliers,
            "status": self.status,
            "objective_usd": self.objective_usd,
            "placements": dict(self.placements),
            "spend_usd": dict(self.spend_usd),
        }


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
    return (
        f"{row.provider}/{row.region}/{row.instance_type}/{row.market}/{int(row.nodes)}"
    )


def solve_point(task: PointTask) -> PointResult:
    """Solve the scenario at one point: the scenario's overrides, then the point's multipliers on
    the offers `where` selects; CP-SAT on one worker (the sweep parallelises across points)."""
    from planner.solve.pipeline import make_plan

    loaded, cache = _loaded(task.source, "scenario")
    loaded = _at_rate(loaded, task.rate_multiplier, "scenario", "workloads")
    offers = _point_offers(task, loaded.catalog, loaded.scenario.overrides)
    plan = make_plan(
        loaded,
        time_limit_s=task.time_limit_s,
        workers=1,
        seed=task.seed,
        offers=offers,
        hint=dict(task.hint) or None,
        cache=cache,
        runner_ups=0,
    )  # a point reports its placements only
    if plan.result is None or not plan.result.solved:
        return PointResult(
            task.multipliers, plan.status, None, {}, settled=proven(plan.status)
        )
    return _point_result(
        task,
        plan.status,
        plan.result.objective_usd,
        plan.chosen.rename(columns={"workload": "run"}),
        plan.result.serving,
        plan.candidates.endpoints,
        settled=proven(plan.status),
    )


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
    plan = make_batch_plan(
        loaded,
        time_limit_s=task.time_limit_s,
        workers=1,
        seed=task.seed,
        offers=offers,
        cache=cache,
    )
    settled = plan.result is None or not plan.result.clocked
    if plan.status not in SOLVED:
        return PointResult(task.multipliers, plan.status, None, {}, settled=settled)
    return _point_result(
        task,
        plan.status,
        plan.result.objective_usd,
        plan.result.chosen,
        plan.result.serving,
        plan.endpoints.options if plan.endpoints is not None else None,
        settled,
    )


def _at_rate(loaded, factor: float, file: str, items: str):
    """The loaded file (`file`: scenario or quarter) with every endpoint among its `items` at `factor` times
    its traffic."""
    if factor == 1.0:
        return loaded
    inner = getattr(loaded, file)
    return replace(
        loaded,
        **{
            file: inner.model_copy(
                update={items: tuple(w.at_rate(factor) for w in getattr(inner, items))}
            )
        },
    )


def _point_offers(task: PointTask, catalog, overrides):
    """The offers at the point: the file's overrides, then the point's multipliers where it says."""
    from planner.candidates.offers import apply_overrides

    return apply_overrides(
        catalog.offers,
        overrides,
        catalog,
        spot_mult=task.spot_price_multiplier,
        preempt_mult=task.preemption_multiplier,
        on_demand_mult=task.on_demand_price_multiplier,
        where=dict(task.where) or None,
    )


def _point_result(
    task: PointTask,
    status: str,
    objective_usd: float,
    chosen,
    serving=None,
    options=None,
    settled: bool = True,
) -> PointResult:
    """What a sweep keeps of a solved point's chosen rows (one per `run`) and endpoints' nodes (`serving`
    over `options`); reads only the few columns it needs (a named tuple of every candidate column costs
    ~10 ms, a point ~0.4 s)."""
    import pandas as pd

    spend = (
        chosen.groupby("market")["cost_usd"].sum()
        if len(chosen)
        else pd.Series(dtype=float)
    )
    picked = (
        list(
            chosen[
                ["run", "cid", "provider", "region", "instance_type", "market", "nodes"]
            ].itertuples(index=False)
        )
        if len(chosen)
        else []
    )
    placements, kinds = {r.run: placement(r) for r in picked}, {}
    if serving is not None and len(serving):
        pools = serving.join(options[["offer_key", "market", "tp"]], on="option")
        spend = spend.add(pools.groupby("market")["cost_usd"].sum(), fill_value=0.0)
        placements |= endpoint_placements(pools)
        kinds = endpoint_placements(pools, nodes=False)
    return PointResult(
        task.multipliers,
        status,
        float(objective_usd),
        placements,
        {r.run: r.cid for r in picked},
        {m: float(spend.get(m, 0.0)) for m in ("spot", "spot_fallback", "on_demand")},
        kinds,
        settled,
    )


def endpoint_placements(pools, nodes: bool = True) -> dict[str, str]:
    """Per endpoint, its pools as `offer/market/TPt/nodes` joined by ` + `, with the most nodes the pool runs in
    any period (so a switch of GPU, market or size shows, and autoscaling within a day does not); without
    `nodes`, only which pools run (`offer/market/TPt`)."""
    most = pools.groupby(["workload", "offer_key", "market", "tp"], sort=True)[
        "nodes"
    ].max()
    out: dict[str, list[str]] = {}
    for (name, offer, market, tp), count in most.items():
        if count:
            out.setdefault(name, []).append(
                f"{offer}/{market}/TP{tp}" + (f"/{int(count)}" if nodes else "")
            )
    return {name: " + ".join(parts) for name, parts in out.items()}


SolveFn = Callable[[PointTask], PointResult]


def solve_run(
    tasks: list[PointTask], solve: SolveFn = solve_point
) -> list[PointResult]:
    """Solve neighbouring points in order, each hinted with the plan of the one before."""
    results: list[PointResult] = []
    for task in tasks:
        if results and not task.hint:
            task = replace(task, hint=tuple(sorted(results[-1].cids.items())))
        results.append(solve(task))
    return results


def multiplier_of(result: PointResult, parameter: str) -> float:
    return result.multipliers[parameter]


def changed(
    a: PointResult,
    b: PointResult,
    among: Iterable[str] | None = None,
    parameter: str = "",
) -> list[str]:
    """The workloads whose placement differs between two points (along `parameter`: see `PointResult.held`)."""
    names = (
        among if among is not None else sorted(set(a.placements) | set(b.placements))
    )
    return [w for w in names if a.held(w, parameter) != b.held(w, parameter)]
