"""`planner batch` end to end: run candidates with calendar durations, the CP-SAT schedule,
and the report (runs, reservations with utilisation, spending per month).

A run's duration on the calendar is the wall time it needs at the deadline confidence: the
`q`-quantile of its completion time under the cost model, rounded up to whole steps.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import costmodel
from .batch_greedy import greedy
from .batch_model import BatchLimits, BatchResult, Pool, RunInfo
from .batch_search import solve_in_phases
from .candidates import apply_overrides, limit_keys, limits_of, offer_prices, offers_token, workload_candidates
from .domain import Workload
from .quarter import LoadedQuarter, _scenario_view
from .limits import COST_RESOLUTION_USD

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

    @property
    def status(self) -> str:
        if self.result is None:
            return "INFEASIBLE"
        return self.result.status


def _inputs(row, run: Workload, hw_rate: float) -> costmodel.CandidateInputs:
    tolerance = run.interruption_tolerance
    return costmodel.CandidateInputs(
        work_h=row.work_h, checkpoint_write_h=0.0 if tolerance == "stateless" else run.checkpoint.write_time,
        restart_h=run.restart_overhead, nodes=int(row.nodes), gpus_per_node=int(row.gpus_per_node),
        spot_rate_per_node_h=float(row.lam_spot) if row.market == "spot" else 0.0, hw_failure_per_gpu_h=hw_rate,
        price_per_node_h=float(row.price_per_node_h), billing_granularity_h=row.billing_granularity_h,
        billing_minimum_h=row.billing_minimum_h, interruption_tolerance=tolerance,
        checkpoint_interval_h=row.checkpoint_interval_h)


def _pools(loaded: LoadedQuarter) -> list[Pool]:
    pools = []
    for r in loaded.quarter.reservations:
        start, end = loaded.to_step(r.start, up=True), loaded.to_step(r.end)
        pools.append(Pool(r.label, r.offer, start, end, r.price_per_node_h, r.min_nodes, r.max_nodes,
                          (r.end - r.start).total_seconds() / 3600))
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

    reserved = [offers[offers["key"] == pool.offer_key].assign(spot_usd_h=np.nan, max_nodes=float(pool.max_nodes),
                                                              on_demand_usd_h=pool.price_per_node_h)
                for pool in pools]
    return Market(offers, token(offers), offer_prices(offers), pools,
                  [(frame, token(frame), offer_prices(frame)) for frame in reserved])


_QUANTILES: dict[tuple, float] = {}
_QUANTILES_MAX = 200_000


def _completion_quantile(inputs: costmodel.CandidateInputs, q: float) -> float:
    """`costmodel.completion_quantile`, kept: runs of the same shape and market repeat it."""
    key = (inputs, q)
    if key not in _QUANTILES:
        if len(_QUANTILES) >= _QUANTILES_MAX:
            _QUANTILES.clear()
        _QUANTILES[key] = costmodel.completion_quantile(inputs, q)
    return _QUANTILES[key]


def run_candidates(loaded: LoadedQuarter, run, workload: Workload, prices: Market, scenario
                   ) -> tuple[pd.DataFrame, str]:
    """A run's candidates: on-demand/spot at several deadline levels, plus one per reservation pool
    on an offer it may use. Each gets its calendar duration in steps."""
    catalog, q = loaded.catalog, loaded.quarter.defaults.deadline_confidence
    hw_rate = loaded.quarter.defaults.hardware_failure_per_gpu_h
    release, due = loaded.window(run)
    window_h = (due - release) * loaded.step_h
    limits = limits_of(scenario)
    frames, reason = [], ""
    for level in DEADLINE_LEVELS:
        budgeted = workload.model_copy(update={"time_budget": window_h * level})
        frame, why, _ = workload_candidates(budgeted, catalog, scenario, prices.offers, limits,
                                            offers_key=prices.token, prices=prices.prices)
        if why and level == 1.0:
            reason = why
        if not frame.empty:
            frames.append(frame.assign(pool=-1))
    for p, (offer, token, offer_rates) in enumerate(prices.pool_offers):
        reserved = workload.model_copy(update={"time_budget": window_h})
        frame, _, _ = workload_candidates(reserved, catalog, scenario, offer, limits, exhaustive=True,
                                          offers_key=token, prices=offer_rates)
        if not frame.empty:  # compute is prepaid with the reservation: only storage and data move cost money
            frame = frame.assign(pool=p, market="reserved", cid=frame["cid"].str.replace("|on_demand|", "|reserved|"),
                                 cost_usd=frame["usd_storage"] + frame["usd_egress"])
            frames.append(frame)
    if not frames:
        return pd.DataFrame(), reason or "no candidate fits its window"
    cands = pd.concat(frames, ignore_index=True).drop_duplicates("cid")
    cands["cost_cents"] = (cands["cost_usd"] / COST_RESOLUTION_USD).round().astype(int)
    wall_q = [_completion_quantile(_inputs(row, workload, hw_rate), q) for row in cands.itertuples(index=False)]
    cands["wall_q_h"] = wall_q
    cands["duration_steps"] = np.ceil(np.array(wall_q) / loaded.step_h - 1e-9).astype(int).clip(min=1)
    cands = cands[cands["duration_steps"] <= due - release]
    if cands.empty:
        return cands, f"no candidate finishes within its window of {window_h:.0f} h at confidence {q:.0%}"
    return _keep_useful(cands.rename(columns={"workload": "run"}), limits), ""


def _keep_useful(cands: pd.DataFrame, limits) -> pd.DataFrame:
    """Drop candidates another one beats on cost, duration and limited GPUs with the same limits
    and pool; keep at most MAX_CANDIDATES_PER_RUN, always including the fastest."""
    quota_keys, capped_offer, units = limit_keys(cands, limits, "offer_key")
    limits_of_row = list(zip(quota_keys, capped_offer, cands["pool"]))
    cents, duration, cid = (cands[c].tolist() for c in ("cost_cents", "duration_steps", "cid"))
    units = units.tolist()
    fronts: dict[tuple, list[tuple[int, int]]] = {}
    keep = []  # in (cost, duration, id) order
    for i in sorted(range(len(cid)), key=lambda i: (cents[i], duration[i], cid[i])):
        front = fronts.setdefault(limits_of_row[i], [])
        if not any(d <= duration[i] and u <= units[i] for d, u in front):
            keep.append(i)
            front.append((duration[i], units[i]))
    fastest = min(keep, key=lambda i: duration[i])  # the first of the shortest
    chosen = keep[:MAX_CANDIDATES_PER_RUN - 1]
    return cands.iloc[chosen + ([fastest] if fastest not in chosen else [])]


def month_spans(loaded: LoadedQuarter, pools: list[Pool]) -> tuple:
    """(label, first step, end step, {pool: hours of its term in the month}) for each month."""
    horizon = loaded.quarter.horizon
    months = []
    cursor = dt.datetime(horizon.start.year, horizon.start.month, 1, tzinfo=dt.timezone.utc)
    while cursor < horizon.end:
        following = dt.datetime(cursor.year + cursor.month // 12, cursor.month % 12 + 1, 1, tzinfo=dt.timezone.utc)
        first, end = max(0, loaded.to_step(cursor, up=True)), min(loaded.steps, loaded.to_step(following, up=True))
        hours = {}
        for p, reservation in enumerate(loaded.quarter.reservations):  # the real term, as it is paid
            overlap = min(following, reservation.end) - max(cursor, reservation.start)
            if overlap.total_seconds() > 0:
                hours[p] = overlap.total_seconds() / 3600
        if end > first:
            months.append((cursor.strftime("%Y-%m"), first, end, hours))
        cursor = following
    return tuple(months)


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


def make_batch_plan(loaded: LoadedQuarter, time_limit_s: float = 60.0, workers: int = 1, seed: int = 0,
                    offers: pd.DataFrame | None = None, progress=None) -> BatchPlan:
    """`offers` defaults to the catalog's with the quarter's overrides applied (what-if sweeps pass their own);
    `progress(done, total)` after each run's candidates."""
    quarter = loaded.quarter
    scenario = _scenario_view(quarter)
    if offers is None:
        offers = apply_overrides(loaded.catalog.offers, quarter.overrides, loaded.catalog)
    pools = _pools(loaded)
    prices = market(offers, pools)
    frames, infeasible, runs = [], {}, []
    for number, (run, workload) in enumerate(zip(quarter.runs, scenario.workloads)):
        if progress:
            progress(number, len(quarter.runs))
        cands, reason = run_candidates(loaded, run, workload, prices, scenario)
        release, due = loaded.window(run)
        runs.append(RunInfo(run.name, release, due, run.after, run.priority, run.required))
        if reason:
            infeasible[run.name] = reason
        else:
            frames.append(cands)
    _propagate_unplaceable(quarter.runs, infeasible)
    required_missing = [r for r in quarter.runs if r.name in infeasible and r.required]
    if required_missing or not frames:
        return BatchPlan(loaded, pd.DataFrame(), pools, None, infeasible)
    cands = pd.concat(frames, ignore_index=True)
    cands = cands[~cands["run"].isin(list(infeasible))].reset_index(drop=True)
    placeable = [r for r in runs if r.name not in infeasible]
    if cands.empty:
        return BatchPlan(loaded, cands, pools, None, infeasible)
    c = quarter.constraints
    limits = BatchLimits(dict(c.gpu_quotas), dict(c.node_limits), c.budget, c.monthly_budget, month_spans(loaded, pools),
                         c.node_limits_per_market)
    start = greedy(cands, placeable, pools, limits, loaded.steps)
    hint = None if start["failed_required"] else start
    result = solve_in_phases(cands, placeable, pools, limits, loaded.steps, time_limit_s, workers, seed, hint)
    plan = BatchPlan(loaded, cands, pools, result, infeasible)
    if result.status == "INFEASIBLE":
        for run in placeable:
            plan.infeasible.setdefault(run.name, "no schedule fits every required run within the quotas, node limits, "
                                                 "reservation terms, budgets and precedence together")
    for name in result.unscheduled:
        plan.infeasible.setdefault(name, "optional run left out: the budget or capacity cannot also fund it "
                                         "next to higher-priority runs")
    return plan


# ---------------------------------------------------------------- report


def batch_json(plan: BatchPlan, timings: bool = True) -> dict:
    """The documented JSON contract of `planner batch --format json` (`timings` as for `plan_json`)."""
    loaded, result = plan.loaded, plan.result
    solved = result is not None and result.status in ("OPTIMAL", "FEASIBLE")
    runs, reservations, months = [], [], []
    if solved:
        chosen = result.chosen.set_index("run")
        for run in loaded.quarter.runs:
            if run.name not in chosen.index:
                runs.append({"run": run.name, "scheduled": False, "reason": plan.infeasible.get(run.name, "")})
                continue
            row = chosen.loc[run.name]
            start = int(row["start_step"])
            runs.append({
                "run": run.name, "scheduled": True, "start": loaded.to_time(start).isoformat(),
                "end": loaded.to_time(start + int(row["duration_steps"])).isoformat(),
                "provider": row["provider"], "region": row["region"], "instance_type": row["instance_type"],
                "nodes": int(row["nodes"]), "gpus": int(row["gpus"]), "market": row["market"],
                "expected_wall_h": float(row["wall_h"]), "p_deadline": float(row["p_deadline"]),
                "cost_usd": round(float(row["cost_usd"]), 2),
            })
        for pool, bought in zip(plan.pools, result.bought):
            provider, region, instance = pool.offer_key.split("/", 2)
            on_pool = result.chosen[result.chosen["pool"] == plan.pools.index(pool)]
            used = float((on_pool["nodes"] * on_pool["duration_steps"]).sum()) * loaded.step_h
            capacity = bought * pool.term_h
            reservations.append({
                "provider": provider, "region": region, "instance_type": instance, "nodes": bought,
                "start": loaded.to_time(pool.start).isoformat(), "end": loaded.to_time(pool.end).isoformat(),
                "cost_usd": round(bought * pool.price_per_node_h * pool.term_h, 2),
                "utilisation": round(used / capacity, 4) if capacity else 0.0, "name": pool.label,
            })
        months = _months(plan)
    data = {
        "status": plan.status,
        "objective_usd": round(result.objective_usd, 2) if solved else None,
        "bound_usd": round(result.bound_usd, 2) if solved and result.bound_usd == result.bound_usd else None,
        "prices_as_of": as_of.isoformat() if (as_of := loaded.catalog.prices_as_of()) else None,
        "reservations": reservations, "runs": runs, "months": months,
        "unscheduled": [{"run": r, "reason": why} for r, why in plan.infeasible.items()],
    }
    if timings:
        data["solve_report"] = {"solve_seconds": round(result.solve_seconds, 3) if result else 0.0}
    return data


def _months(plan: BatchPlan) -> list[dict]:
    spans = month_spans(plan.loaded, plan.pools)
    totals = {label: 0.0 for label, *_ in spans}
    for row in plan.result.chosen.itertuples(index=False):
        label = next((label for label, first, end, _ in spans if first <= row.start_step < end), spans[-1][0])
        totals[label] += row.cost_usd
    for label, _, _, hours in spans:
        for p, h in hours.items():
            totals[label] += plan.result.bought[p] * plan.pools[p].price_per_node_h * h
    return [{"month": label, "cost_usd": round(value, 2)} for label, value in totals.items()]


def batch_text(plan: BatchPlan, fmt: str, timings: bool = True) -> str:
    from .output import render_table, to_json

    data = batch_json(plan, timings)
    if fmt == "json":
        return to_json(data)
    runs = pd.DataFrame([r for r in data["runs"] if r["scheduled"]],
                        columns=["run", "scheduled", "start", "end", "provider", "region", "instance_type", "nodes",
                                 "gpus", "market", "expected_wall_h", "p_deadline", "cost_usd"])
    if fmt == "csv":
        return sections_csv(data)
    if plan.status not in ("OPTIMAL", "FEASIBLE"):
        frame = pd.DataFrame(data["unscheduled"], columns=["run", "reason"]).rename(columns={"reason": "why"})
        title = f"{plan.status}: quarter {plan.loaded.quarter.name!r} cannot be planned"
        return render_table(frame, title=title) if not frame.empty else title + "\n"
    shown = runs.assign(start=runs["start"].astype(str).str[:16], end=runs["end"].astype(str).str[:16],
                        expected_wall_h=runs["expected_wall_h"].astype(float).round(1),
                        p_deadline=runs["p_deadline"].astype(float).round(3))
    shown = shown.drop(columns=["scheduled", "reason"], errors="ignore")
    text = render_table(shown, title=f"schedule for quarter {plan.loaded.quarter.name!r}")
    if data["reservations"]:
        text += "\n" + render_table(pd.DataFrame(data["reservations"]), title="reservations to buy")
    text += "\n" + render_table(pd.DataFrame(data["months"]), title="spending per month")
    if data["unscheduled"]:
        text += "\n" + render_table(pd.DataFrame(data["unscheduled"]).rename(columns={"reason": "why"}),
                                    title="runs left out")
    r = plan.result
    proof = ("optimal (proven)" if r.status == "OPTIMAL" else f"feasible, gap {r.gap:.2%} to the bound ${r.bound_usd:,.2f}"
             if r.gap == r.gap else "feasible, no bound within the time limit")
    text += (f"\n{r.status}: expected total ${r.objective_usd:,.2f}, {proof}; {len(plan.cands)} candidates for "
             f"{len(plan.loaded.quarter.runs)} runs; solved in {r.solve_seconds:.2f} s"
             + (f"; prices as of {data['prices_as_of']}" if data["prices_as_of"] else "") + "\n")
    return text


def sections_csv(data: dict) -> str:
    """Runs, reservations and months in one CSV, told apart by its first column `section`
    (one file, so a pipe or `-o FILE` carries the whole plan; empty cells where a section has no such column)."""
    parts = [pd.DataFrame(data[key]).assign(section=name) for key, name in
             (("runs", "run"), ("reservations", "reservation"), ("months", "month")) if data[key]]
    if not parts:
        return "section\n"
    frame = pd.concat(parts, ignore_index=True)
    for column in ("nodes", "gpus"):
        if column in frame:
            frame[column] = frame[column].astype("Int64")  # whole numbers, blank where a section has none
    return frame[["section"] + [c for c in frame.columns if c != "section"]].to_csv(index=False)
