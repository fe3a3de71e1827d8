"""`planner batch` end to end: run candidates with calendar durations, then the CP-SAT schedule
(the report is `planner.report.batch`).

A run's duration on the calendar is the wall time it needs at the deadline confidence: the
`q`-quantile of its completion time under the cost model, rounded up to whole steps.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.batch.greedy import endpoint_occupancy, greedy
from planner.batch.model import (
    BatchLimits,
    Pool,
    PrioritiesTooHeavy,
    QuarterEndpoints,
    RunInfo,
)
from planner.batch.search import solve_in_phases
from planner.candidates.cache import CandidateCache, without_cycle_collection
from planner.candidates.endpoints import endpoint_options
from planner.candidates.expand import grouped
from planner.candidates.generate import candidate_records, records_table
from planner.candidates.limits import Limits, limit_keys, limits_of, to_cents
from planner.candidates.offers import apply_overrides, offer_prices, offers_token
from planner.candidates.price import wall_law
from planner.candidates.screen import Calendar
from planner.economics import fallback
from planner.economics.candidate import CandidateInputs
from planner.economics.estimate_error import EstimateError
from planner.economics.inputs import cost_inputs, estimate_error
from planner.errors import PlannerError
from planner.load.quarter import LoadedQuarter
from planner.schema.quarter import as_scenario
from planner.schema.workload import Workload
from planner.solve.model import build_model
from planner.solve.outcome import BatchResult, cut_by_clock
from planner.solve.search import solve_model

DEADLINE_LEVELS = (1.0, 0.5, 0.25)
"""Candidates are generated for the run's whole window and for half and a quarter of it, so
the schedule can trade money for speed when capacity or precedence squeezes a run."""
MAX_CANDIDATES_PER_RUN = 12


@dataclass
class BatchPlan:
    loaded: LoadedQuarter
    cands: pd.DataFrame
    pools: list[Pool]
    result: BatchResult | None
    infeasible: dict[str, str] = field(default_factory=dict)
    endpoints: QuarterEndpoints | None = None
    # `--schedule-confidence`: the whole schedule's target
    schedule_confidence: float | None = None
    # with it: P(the whole schedule holds), replayed
    simulated_holds: float | None = None

    @property
    def status(self) -> str:
        if self.result is None:
            return "INFEASIBLE"
        return self.result.status


def _inputs(
    row: dict, run: Workload, hw_rate: float, error: EstimateError
) -> CandidateInputs:
    spot = row["market"] not in ("on_demand", "reserved")
    return cost_inputs(
        run,
        work_h=row["work_h"],
        nodes=int(row["nodes"]),
        gpus_per_node=int(row["gpus_per_node"]),
        spot_rate_per_node_h=float(row["spot_rate_per_node_h"]) if spot else 0.0,
        capacity_wait_h=float(row["capacity_wait_h"]) if spot else 0.0,
        capacity_wait_cv=float(row["capacity_wait_cv"]) if spot else 1.0,
        price=float(row["price_per_node_h"]),
        granularity_h=row["billing_granularity_h"],
        minimum_h=row["billing_minimum_h"],
        hw_rate=hw_rate,
        checkpoint_interval_h=row["checkpoint_interval_h"],
        checkpoint_write_h=row["checkpoint_write_h"],
        restart_h=row["restart_h"],
        error=error,
    )


def _pools(loaded: LoadedQuarter) -> list[Pool]:
    pools = []
    for r in loaded.quarter.reservations:
        start, end = loaded.to_step(r.start, up=True), loaded.to_step(r.end)
        pools.append(
            Pool(
                r.label,
                r.offer,
                start,
                end,
                r.price_per_node_h,
                r.min_nodes,
                r.max_nodes,
                (r.end - r.start).total_seconds() / 3600,
            )
        )
    return pools


@dataclass
class Market:
    """What every run of a quarter is priced against: the offers, and each reservation pool's offer as a
    one-row catalog at its reserved rate, each with its `offers_token` (computed once, so runs of the same
    expansion share their candidate work)."""

    offers: pd.DataFrame
    token: str | None
    prices: dict[str, np.ndarray]  # `offer_prices(offers)`
    pools: list[Pool]
    pool_offers: list[tuple[pd.DataFrame, str | None, dict[str, np.ndarray]]]


def market(offers: pd.DataFrame, pools: list[Pool]) -> Market:
    def token(frame: pd.DataFrame) -> str | None:
        return offers_token(frame) if frame["key"].is_unique else None

    reserved = [
        offers[offers["key"] == pool.offer_key].assign(
            spot_usd_h=np.nan,
            max_nodes=float(pool.max_nodes),
            on_demand_usd_h=pool.price_per_node_h,
        )
        for pool in pools
    ]
    return Market(
        offers,
        token(offers),
        offer_prices(offers),
        pools,
        [(frame, token(frame), offer_prices(frame)) for frame in reserved],
    )


def _wall_quantile(
    row: dict,
    workload: Workload,
    hw_rate: float,
    q: float,
    cache: CandidateCache,
    error: EstimateError,
) -> float:
    """The hours a candidate books on the calendar: its completion time's q-quantile (cost-model §6, §10, §12),
    from the law candidate generation kept for its timing key."""
    inputs = _inputs(row, workload, hw_rate, error)
    spot = wall_law(inputs, None, cache).quantile_met(q, error)
    if row["market"] != "spot_fallback":
        return spot
    return fallback.completion_quantile(
        dataclasses.replace(inputs, time_budget_h=float(row["budget_h"])), q, spot
    )


def run_candidates(
    loaded: LoadedQuarter,
    run,
    workload: Workload,
    prices: Market,
    scenario,
    cache: CandidateCache | None = None,
) -> tuple[pd.DataFrame, str]:
    """A run's candidates: on-demand/spot at several deadline levels, plus one per reservation pool
    on an offer it may use. Each gets its calendar duration in steps. `cache`: what the quarter's runs
    share (make_batch_plan passes one), else this call's own."""
    records, reason = run_records(loaded, run, workload, prices, scenario, cache)
    return candidate_table(records), reason


def candidate_table(records: list[dict]) -> pd.DataFrame:
    """Runs' candidate records as the table the schedule reads (one row each, `run` naming the run)."""
    return records_table(records).rename(columns={"workload": "run"})


def run_records(
    loaded: LoadedQuarter,
    run,
    workload: Workload,
    prices: Market,
    scenario,
    cache: CandidateCache | None = None,
) -> tuple[list[dict], str]:
    """`run_candidates` as one dict per candidate, so a quarter makes one table of all its runs'."""
    cache = (cache or CandidateCache()).bind(loaded.catalog)
    catalog, q = loaded.catalog, loaded.quarter.defaults.deadline_confidence
    hw_rate = loaded.quarter.defaults.hardware_failure_per_gpu_h
    error = estimate_error(workload, loaded.quarter.defaults)
    release, due = loaded.window(run)
    window_h = (due - release) * loaded.step_h
    limits = limits_of(scenario)
    found, reason = {}, ""  # cid -> candidate record (the first of each id)

    def booking(budget_h: float) -> Calendar:
        """How the calendar books a candidate priced for this time budget."""
        return Calendar(
            loaded.step_h,
            lambda r: _wall_quantile(
                r | {"budget_h": budget_h}, workload, hw_rate, q, cache, error
            ),
        )

    for level in DEADLINE_LEVELS:
        budgeted = workload.model_copy(update={"time_budget": window_h * level})
        records, why, _ = candidate_records(
            budgeted,
            catalog,
            scenario,
            prices.offers,
            limits,
            offers_key=prices.token,
            prices=prices.prices,
            cache=cache,
            calendar=booking(window_h * level),
        )
        if why and level == 1.0:
            reason = why
        for r in records:
            found.setdefault(r["cid"], r | {"pool": -1, "budget_h": window_h * level})
    for p, (offer, token, offer_rates) in enumerate(prices.pool_offers):
        reserved = workload.model_copy(update={"time_budget": window_h})
        records, _, _ = candidate_records(
            reserved,
            catalog,
            scenario,
            offer,
            limits,
            exhaustive=True,
            offers_key=token,
            prices=offer_rates,
            cache=cache,
        )
        for r in records:  # compute is prepaid with the reservation: only storage and data move cost money
            cid = r["cid"].replace("|on_demand|", "|reserved|")
            found.setdefault(
                cid,
                r
                | {
                    "pool": p,
                    "market": "reserved",
                    "budget_h": window_h,
                    "cid": cid,
                    "cost_usd": r["usd_storage"] + r["usd_egress"],
                },
            )
    if not found:
        return [], reason or "no candidate fits its window"
    fitting = []
    for r in found.values():
        r["cost_cents"] = to_cents(r["cost_usd"])
        calendar = booking(r["budget_h"])
        r["wall_q_h"] = calendar.booked_h(r)
        if math.isinf(r["wall_q_h"]):  # its law runs past a century
            continue
        r["duration_steps"] = int(calendar.steps(r["wall_q_h"]))
        if r["duration_steps"] <= due - release:
            fitting.append(r)
    if not fitting:
        return (
            [],
            f"no candidate finishes within its window of {window_h:.0f} h at confidence {q:.0%}",
        )
    return _keep_useful(fitting, limits, any(grouped(workload, limits))), ""


def _keep_useful(cands: list[dict], limits, grouped: bool = False) -> list[dict]:
    """Drop candidates another one beats on cost, duration and limited GPUs with the same limits
    and pool (of equals, the one with fewer nodes to run stays), or, unless a group ties the run to a provider
    or region (`grouped`), on cost and duration drawing on no limit at all (`screen.dominated`); keep at most
    MAX_CANDIDATES_PER_RUN, always including the fastest."""
    columns = {
        c: [r[c] for r in cands]
        for c in (
            "provider",
            "gpu",
            "gpu_family",
            "offer_key",
            "market",
            "max_nodes",
            "gpus",
            "pool",
            "cost_cents",
            "duration_steps",
            "nodes",
            "cid",
        )
    }
    quota_keys, capped_offer, units = limit_keys(columns, limits, "offer_key")
    limits_of_row = list(zip(quota_keys, capped_offer, columns["pool"]))
    cents, duration, nodes, cid = (
        columns["cost_cents"],
        columns["duration_steps"],
        columns["nodes"],
        columns["cid"],
    )
    fronts: dict[tuple, list[tuple[int, int]]] = {}
    free = math.inf  # the shortest duration kept of a candidate drawing on no limit
    keep = []  # in (cost, duration, nodes, id) order
    for i in sorted(
        range(len(cid)), key=lambda i: (cents[i], duration[i], nodes[i], cid[i])
    ):
        front = fronts.setdefault(limits_of_row[i], [])
        if free > duration[i] and not any(
            d <= duration[i] and u <= units[i] for d, u in front
        ):
            keep.append(i)
            front.append((duration[i], units[i]))
            if limits_of_row[i] == ("", "", -1) and not grouped:
                free = duration[i]
    fastest = min(keep, key=lambda i: duration[i])  # the first of the shortest
    chosen = keep[: MAX_CANDIDATES_PER_RUN - 1]
    return [cands[i] for i in chosen + ([fastest] if fastest not in chosen else [])]


def month_spans(loaded: LoadedQuarter, pools: list[Pool]) -> tuple:
    """(label, first step, end step, {pool: hours of its term in the month}) for each month."""
    horizon = loaded.quarter.horizon
    months = []
    cursor = dt.datetime(horizon.start.year, horizon.start.month, 1, tzinfo=dt.UTC)
    while cursor < horizon.end:
        following = dt.datetime(
            cursor.year + cursor.month // 12, cursor.month % 12 + 1, 1, tzinfo=dt.UTC
        )
        first, end = (
            max(0, loaded.to_step(cursor, up=True)),
            min(loaded.steps, loaded.to_step(following, up=True)),
        )
        hours = {}
        for p, reservation in enumerate(
            loaded.quarter.reservations
        ):  # the real term, as it is paid
            overlap = min(following, reservation.end) - max(cursor, reservation.start)
            if overlap.total_seconds() > 0:
                hours[p] = overlap.total_seconds() / 3600
        if end > first:
            months.append((cursor.strftime("%Y-%m"), first, end, hours))
        cursor = following
    return tuple(months)


ENDPOINTS_SHARE = 0.1
"""Of the time limit, what placing each endpoint alone (the schedule's first hint, and the endpoints' part of
its bound) may take; limited by CP-SAT's deterministic work, so the plan does not depend on the clock."""
ENDPOINT_WORK_PER_SECOND = 0.5


def served_window(loaded: LoadedQuarter, run) -> tuple[int, int]:
    """The steps an endpoint holds capacity: every step its window (release to due) touches."""
    start = loaded.to_step(run.release) if run.release else 0
    end = loaded.to_step(run.due, up=True) if run.due else loaded.steps
    return max(0, start), min(loaded.steps, end)


def quarter_endpoints(
    loaded: LoadedQuarter, scenario, prices: Market, infeasible: dict[str, str]
) -> QuarterEndpoints | None:
    """The quarter's endpoints: options on the offers (on demand, spot) and on every reservation pool whose
    term covers the endpoint's window (market `reserved`, compute prepaid: it costs nothing more)."""
    if not any(w.serving for w in scenario.workloads):
        return None
    options, traffic, why = endpoint_options(scenario, loaded.catalog, prices.offers)
    infeasible.update(why)
    windows = {
        run.name: served_window(loaded, run)
        for run in loaded.quarter.runs
        if run.serving
    }
    frames = [options.assign(pool=-1)] if len(options) else []
    for p, (pool, (offer, _, _)) in enumerate(zip(prices.pools, prices.pool_offers)):
        reserved, _, _ = endpoint_options(scenario, loaded.catalog, offer)
        if reserved.empty:
            continue
        inside = [
            pool.start <= windows[w][0] and windows[w][1] <= pool.end
            for w in reserved["workload"]
        ]
        reserved = reserved[inside]
        frames.append(
            reserved.assign(
                pool=p,
                market="reserved",
                node_usd_h=0.0,
                away=0.0,
                zone_away=0.0,
                oid=reserved["oid"].str.replace(
                    "/on_demand", f"/reserved@{pool.label}"
                ),
            )
        )
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    for name in windows:
        if name not in infeasible and (
            frame.empty or not (frame["workload"] == name).any()
        ):
            infeasible[name] = "no offer can serve it"
    if frame.empty:
        return None
    frame = frame.sort_values(["workload", "oid"], kind="stable").reset_index(drop=True)
    return QuarterEndpoints(frame, traffic, windows)


def endpoints_alone(
    endpoints: QuarterEndpoints, constraints, seconds: float, workers: int, seed: int
) -> tuple[pd.DataFrame, float, bool]:
    """Each endpoint placed alone under the quarter's quotas and node limits (reservation pools up to their
    largest size, free): the nodes the schedule starts from, the sum of their lower bounds (each alone
    relaxes what the endpoint shares with the runs and the other endpoints), and whether the clock cut a
    search short of its work limit and of a proof (`BatchResult.clocked`)."""
    limits = Limits(
        dict(constraints.gpu_quotas),
        dict(constraints.node_limits),
        constraints.node_limits_per_market,
    )
    found, floor, clocked = [], 0.0, False
    share = seconds / len(endpoints.traffic)
    for name in sorted(endpoints.traffic):
        mine = endpoints.options[endpoints.options["workload"] == name]
        alone = mine.assign(
            offer_key=np.where(
                mine["pool"] >= 0,
                mine["offer_key"] + "#" + mine["pool"].astype(str),
                mine["offer_key"],
            )
        )
        plan = build_model(
            pd.DataFrame(), limits, serving=(alone, {name: endpoints.traffic[name]})
        )
        work = share * ENDPOINT_WORK_PER_SECOND
        result = solve_model(
            plan,
            share,
            max(workers, 1),
            seed,
            parameters={"max_deterministic_time": work, "interleave_search": True},
        )
        clocked |= cut_by_clock(result.status, result.deterministic_seconds, work)
        if not result.solved:
            continue
        floor += result.bound_usd
        found.append(
            result.serving.assign(
                option=mine.index[result.serving["option"].to_numpy()]
            )
        )
    return (
        (pd.concat(found, ignore_index=True) if found else pd.DataFrame()),
        floor,
        clocked,
    )


def _propagate_unplaceable(runs, infeasible: dict[str, str]) -> None:
    """A run that waits for a run that cannot be placed cannot be placed either."""
    changed = True
    while changed:
        changed = False
        for run in runs:
            blocker = next((b for b in run.after if b in infeasible), None)
            if blocker and run.name not in infeasible:
                infeasible[run.name] = f"waits for {blocker}, which cannot be placed"
                changed = True


def per_run_confidence(loaded: LoadedQuarter, schedule_confidence: float) -> float:
    """The deadline confidence each run's slot needs so that the whole schedule holds with probability at
    least `schedule_confidence`: runs' wall times are independent, and when every run ends inside its slot
    nothing is pushed and every run ends by its due date, so P(all hold) >= q**n; q = Q**(1/n), and never
    below the quarter's own `deadline_confidence`."""
    runs = sum(1 for r in loaded.quarter.runs if not r.serving)
    return max(
        loaded.quarter.defaults.deadline_confidence,
        schedule_confidence ** (1 / max(runs, 1)),
    )


def with_confidence(loaded: LoadedQuarter, confidence: float) -> LoadedQuarter:
    """The same quarter with every run's slot sized at `confidence`."""
    quarter = loaded.quarter
    defaults = quarter.defaults.model_copy(update={"deadline_confidence": confidence})
    return dataclasses.replace(
        loaded, quarter=quarter.model_copy(update={"defaults": defaults})
    )


@without_cycle_collection()
def make_batch_plan(
    loaded: LoadedQuarter,
    time_limit_s: float = 60.0,
    workers: int = 1,
    seed: int = 0,
    offers: pd.DataFrame | None = None,
    progress=None,
    cache: CandidateCache | None = None,
    schedule_confidence: float | None = None,
) -> BatchPlan:
    """`offers` defaults to the catalog's with the quarter's overrides applied (what-if sweeps pass their own,
    and their `cache`); `progress(done, total)` after each run's candidates. With `schedule_confidence`
    (`--schedule-confidence`) every run's slot is sized so that the whole schedule holds with it, and the
    schedule is replayed to measure how often it does (`simulated_holds`)."""
    if schedule_confidence is not None:
        loaded = with_confidence(
            loaded, per_run_confidence(loaded, schedule_confidence)
        )
    plan = _schedule(loaded, time_limit_s, workers, seed, offers, progress, cache)
    if (
        schedule_confidence is not None
        and plan.result is not None
        and plan.result.solved
    ):
        from planner.batch.contract import (
            measure_confidence,  # it reads the schedule as the contract writes it
        )

        plan.simulated_holds = measure_confidence(plan)
    plan.schedule_confidence = schedule_confidence
    return plan


def _schedule(
    loaded: LoadedQuarter,
    time_limit_s: float,
    workers: int,
    seed: int,
    offers: pd.DataFrame | None,
    progress,
    cache: CandidateCache | None,
) -> BatchPlan:
    cache = (cache or CandidateCache()).bind(loaded.catalog)
    quarter = loaded.quarter
    scenario = as_scenario(quarter)
    if offers is None:
        offers = apply_overrides(
            loaded.catalog.offers, quarter.overrides, loaded.catalog
        )
    started = time.perf_counter()
    pools = _pools(loaded)
    prices = market(offers, pools)
    records, infeasible, runs = [], {}, []
    endpoints = quarter_endpoints(loaded, scenario, prices, infeasible)
    for number, (run, workload) in enumerate(zip(quarter.runs, scenario.workloads)):
        if progress:
            progress(number, len(quarter.runs))
        if run.serving:
            continue
        found, reason = run_records(loaded, run, workload, prices, scenario, cache)
        release, due = loaded.window(run)
        runs.append(
            RunInfo(run.name, release, due, run.after, run.priority, run.required)
        )
        if reason:
            infeasible[run.name] = reason
        else:
            records += found
    _propagate_unplaceable(quarter.runs, infeasible)
    required_missing = [r for r in quarter.runs if r.name in infeasible and r.required]
    if required_missing or not (records or endpoints):
        return BatchPlan(loaded, pd.DataFrame(), pools, None, infeasible, endpoints)
    cands = candidate_table([r for r in records if r["workload"] not in infeasible])
    placeable = [r for r in runs if r.name not in infeasible]
    if cands.empty and endpoints is None:
        return BatchPlan(loaded, cands, pools, None, infeasible, endpoints)
    if (
        cands.empty
    ):  # endpoints only: the schedule reads the runs' columns, of which there are none
        cands = (
            pd.DataFrame(
                {
                    "run": [],
                    "cid": [],
                    "offer_key": [],
                    "provider": [],
                    "region": [],
                    "instance_type": [],
                    "gpu": [],
                    "market": [],
                }
            )
            .astype(str)
            .assign(
                **{
                    c: pd.Series(dtype="int64")
                    for c in (
                        "gpus_per_node",
                        "nodes",
                        "gpus",
                        "pool",
                        "cost_cents",
                        "duration_steps",
                    )
                },
                **{
                    c: pd.Series(dtype="float64")
                    for c in (
                        "cost_usd",
                        "wall_h",
                        "wall_q_h",
                        "budget_h",
                        "price_per_node_h",
                    )
                },
            )
        )
    c = quarter.constraints
    limits = BatchLimits(
        dict(c.gpu_quotas),
        dict(c.node_limits),
        c.budget,
        c.monthly_budget,
        month_spans(loaded, pools),
        c.node_limits_per_market,
    )
    candidates_seconds = time.perf_counter() - started
    placed, floor, clocked = (
        endpoints_alone(endpoints, c, ENDPOINTS_SHARE * time_limit_s, workers, seed)
        if endpoints is not None
        else (None, 0.0, False)
    )
    held = (
        endpoint_occupancy(endpoints.options, placed, endpoints.windows, limits)
        if endpoints is not None
        else []
    )
    start = greedy(cands, placeable, pools, limits, loaded.steps, held)
    start["serving"] = placed
    hint = None if start["failed_required"] else start
    try:
        result = solve_in_phases(
            cands,
            placeable,
            pools,
            limits,
            loaded.steps,
            time_limit_s,
            workers,
            seed,
            hint,
            endpoints,
            floor,
        )
    except PrioritiesTooHeavy as exc:  # said at the first optional run's priority
        first = next(i for i, r in enumerate(quarter.runs) if not r.required)
        raise PlannerError(
            exc.message, loaded.where(("runs", first, "priority"))
        ) from None
    result.candidates_seconds = candidates_seconds
    result.clocked = result.clocked or clocked and result.status != "OPTIMAL"
    plan = BatchPlan(loaded, cands, pools, result, infeasible, endpoints)
    if result.status == "INFEASIBLE":
        for run in placeable:
            plan.infeasible.setdefault(
                run.name,
                "no schedule fits every required run within the quotas, node limits, "
                "reservation terms, budgets and precedence together",
            )
    for name in result.unscheduled:
        plan.infeasible.setdefault(
            name,
            "optional run left out: the budget or capacity cannot also fund it "
            "next to higher-priority runs",
        )
    return plan
