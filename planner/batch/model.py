"""The CP-SAT model of `planner batch`: each run gets one candidate and a start step.

Capacity over time uses optional fixed-size intervals (sharing the run's start variable)
with cumulative constraints, created only for limits that can bind. Reserved capacity is an
integer decision per pool, paid for its whole term. One `add_*` function per constraint
family, each with the same signature.

Endpoints run from their release to their due date: their nodes are the solve model's
(`solve/serving.py`, the same families), and against quotas, node limits and pools each
endpoint holds, for its whole window, the most it runs in any period of the day.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from planner.candidates.endpoints import Endpoint
from planner.candidates.limits import (
    COST_RESOLUTION_USD,
    budget_cents,
    node_cap,
    quota_mask,
    to_cents,
)
from planner.errors import PlannerError
from planner.solve import cpsat
from planner.solve.model import OBJECTIVE_LIMIT
from planner.solve.outcome import BatchResult, cut_by_clock
from planner.solve.serving import SERVING_FAMILIES, ServingVars, serving_variables


@dataclass(frozen=True)
class RunInfo:
    name: str
    release: int  # earliest start step
    due: int  # latest end step
    after: tuple[str, ...]
    priority: int
    required: bool


@dataclass(frozen=True)
class Pool:
    """A reservation option: up to `max_nodes` of one offer for steps [start, end)."""

    label: str
    offer_key: str
    start: int
    end: int
    price_per_node_h: float
    min_nodes: int
    max_nodes: int
    term_h: float

    @property
    def cents_per_node(self) -> int:
        return to_cents(self.price_per_node_h * self.term_h)


@dataclass(frozen=True)
class BatchLimits:
    gpu_quotas: dict[str, int] = field(default_factory=dict)
    node_limits: dict[str, int] = field(default_factory=dict)
    budget_usd: float | None = None
    monthly_budget_usd: float | None = None
    months: tuple[
        tuple[str, int, int, dict], ...
    ] = ()  # (label, first step, end step, {pool: hours in month})
    node_limits_per_market: bool = False


@dataclass(frozen=True)
class QuarterEndpoints:
    """The quarter's endpoints: their options (`candidates/endpoints.py`, with `pool` >= 0 for nodes of a
    reservation, whose compute is prepaid), traffic, and windows in steps (release, due)."""

    options: pd.DataFrame
    traffic: dict[str, Endpoint]
    windows: dict[str, tuple[int, int]]

    def month_shares(self, first: int, end: int) -> dict[str, float]:
        """Share of each endpoint's window inside steps [first, end) (its cost is spread evenly)."""
        return {
            name: max(0, min(b, end) - max(a, first)) / (b - a)
            for name, (a, b) in self.windows.items()
        }


@dataclass
class BatchModel:
    model: cp_model.CpModel
    cands: pd.DataFrame
    runs: dict[str, RunInfo]
    pools: list[Pool]
    pick: list
    start: dict[str, cp_model.IntVar]
    scheduled: dict[str, object]
    bought: list
    priority_weight: int
    build_seconds: float = 0.0
    # run -> one flag per month (monthly budgets)
    month_flags: dict[str, list] = field(default_factory=dict)
    serving: ServingVars | None = None  # the endpoints' nodes, when the quarter has any
    endpoints: QuarterEndpoints | None = None
    # endpoint -> its window's interval, made once
    endpoint_intervals: dict = field(default_factory=dict)

    def endpoint_holds(
        self, mask: np.ndarray, column: str
    ) -> list[tuple[object, object, int]]:
        """Per endpoint with options in `mask`: (its window's interval, a variable at least the GPUs or nodes
        those options run in any period of the day, the window's length in steps)."""
        if self.serving is None or not mask.any():
            return []
        options, out = self.serving.options, []
        for name in sorted(set(options["workload"][mask])):
            mine = mask & (options["workload"] == name).to_numpy()
            coef = (
                options["gpus_per_node"].to_numpy()[mine]
                if column == "gpus"
                else np.ones(mine.sum(), dtype=int)
            )
            held = self.model.new_int_var(
                0, int(coef @ options["most_nodes"].to_numpy()[mine]), f"held[{name}]"
            )
            for terms in self.serving.node_terms(mine, column).values():
                self.model.add(held >= sum(c * v for c, v in terms))
            start, end = self.endpoints.windows[name]
            if name not in self.endpoint_intervals:
                self.endpoint_intervals[name] = self.model.new_fixed_size_interval_var(
                    start, end - start, f"window[{name}]"
                )
            out.append((self.endpoint_intervals[name], held, end - start))
        return out


# ---------------------------------------------------------------- constraint families
# Each family is `add_<rule>(m, limits)`, as in the solve model; `build_batch_model` walks CONSTRAINT_FAMILIES.


def add_one_candidate_per_run(m: BatchModel, limits: BatchLimits) -> None:
    """A required run gets exactly one candidate; an optional one at most one.

    Σ_c pick[r, c] = scheduled[r] (= 1 when required).
    """
    for run, rows in m.cands.groupby("run", sort=True).indices.items():
        m.model.add(sum(m.pick[i] for i in rows) == m.scheduled[run]).with_name(
            f"one[{run}]"
        )


def add_windows(m: BatchModel, limits: BatchLimits) -> None:
    """Runs start after release and end by due; reserved runs stay inside the pool's term,
    and inside the candidate's own `first_start`/`last_start` when the frame has them.

    release_r ≤ start_r (the start variable's domain, made in `build_batch_model`);
    pick[r, c] ⇒ start_r + d_c ≤ due_r (and term bounds for pools).
    """
    narrowed = "first_start" in m.cands
    for i, row in enumerate(m.cands.itertuples(index=False)):
        start, d = m.start[row.run], int(row.duration_steps)
        m.model.add(start + d <= m.runs[row.run].due).only_enforce_if(m.pick[i])
        if row.pool >= 0:
            pool = m.pools[row.pool]
            m.model.add(start >= pool.start).only_enforce_if(m.pick[i])
            m.model.add(start + d <= pool.end).only_enforce_if(m.pick[i])
        if narrowed and not pd.isna(row.first_start):
            m.model.add_linear_constraint(
                start, int(row.first_start), int(row.last_start)
            ).only_enforce_if(m.pick[i])


def add_precedence(m: BatchModel, limits: BatchLimits) -> None:
    """A run starts after every run it waits for has ended; it runs only if they do.

    scheduled[b] ≤ scheduled[a];  scheduled[b] ⇒ start_b ≥ start_a + Σ_c d_c·pick[a, c].
    """
    duration = {
        run: sum(int(m.cands.at[i, "duration_steps"]) * m.pick[i] for i in rows)
        for run, rows in m.cands.groupby("run").indices.items()
    }
    for run in m.runs.values():
        for before in (b for b in run.after if b in m.runs):
            m.model.add(m.scheduled[run.name] <= m.scheduled[before])
            order = m.model.add(m.start[run.name] >= m.start[before] + duration[before])
            order.with_name(f"after[{before}->{run.name}]")
            if not run.required:
                order.only_enforce_if(m.scheduled[run.name])


def _intervals(m: BatchModel, rows) -> list:
    return [
        m.model.new_optional_fixed_size_interval_var(
            m.start[m.cands.at[i, "run"]],
            int(m.cands.at[i, "duration_steps"]),
            m.pick[i],
            f"run[{m.cands.at[i, 'cid']}]",
        )
        for i in rows
    ]


def _can_bind(m: BatchModel, rows, demand_column: str, capacity: int) -> bool:
    """A capacity binds only if the runs that could use it together could exceed it (each run's largest
    demand: sound beside one candidate per run)."""
    frame = m.cands.loc[rows]
    return frame.groupby("run")[demand_column].max().sum() > capacity


def add_gpu_quotas(m: BatchModel, limits: BatchLimits) -> None:
    """GPUs running at the same time per provider (or provider/GPU) stay within quota.

    cumulative(intervals of covered candidates, demand gpus_c, capacity quota).
    """
    for key, quota in sorted(limits.gpu_quotas.items()):
        rows = m.cands.index[quota_mask(m.cands, key)]
        held = m.endpoint_holds(_option_mask(m, lambda o: quota_mask(o, key)), "gpus")
        if held or len(rows) and _can_bind(m, rows, "gpus", quota):
            m.model.add_cumulative(
                _intervals(m, rows) + [w for w, _, _ in held],
                [int(g) for g in m.cands.loc[rows, "gpus"]] + [h for _, h, _ in held],
                quota,
            )


def _option_mask(m: BatchModel, select) -> np.ndarray:
    """`select(options)` as a boolean array over the endpoints' options (empty without endpoints)."""
    return (
        np.zeros(0, dtype=bool)
        if m.serving is None
        else select(m.serving.options).to_numpy(dtype=bool)
    )


def add_node_limits(m: BatchModel, limits: BatchLimits) -> None:
    """Nodes of one offer running at the same time (reserved ones aside) stay within its limit.

    cumulative(intervals of the offer's on-demand/spot candidates, demand nodes_c, limit).
    """
    groups = ["offer_key", "market"] if limits.node_limits_per_market else "offer_key"
    runs = m.cands[m.cands["pool"] < 0].groupby(groups).groups
    options = (
        m.serving.options
        if m.serving is not None
        else pd.DataFrame(columns=["offer_key", "market", "pool", "max_nodes"])
    )
    served = options[options["pool"] < 0].groupby(groups).groups
    for key in sorted(set(runs) | set(served)):
        rows = runs.get(key, pd.Index([]))
        offer = key[0] if isinstance(key, tuple) else key
        catalog_cap = (
            m.cands.at[rows[0], "max_nodes"]
            if len(rows)
            else options.at[served[key][0], "max_nodes"]
        )
        cap = node_cap(limits.node_limits.get(offer), catalog_cap)
        mask = np.zeros(len(options), dtype=bool)
        mask[served.get(key, [])] = True
        held = m.endpoint_holds(mask, "nodes") if cap is not None else []
        if cap is not None and (held or _can_bind(m, rows, "nodes", cap)):
            m.model.add_cumulative(
                _intervals(m, rows) + [w for w, _, _ in held],
                [int(n) for n in m.cands.loc[rows, "nodes"]] + [h for _, h, _ in held],
                cap,
            )


def add_reservation_capacity(m: BatchModel, limits: BatchLimits) -> None:
    """Runs on a reservation pool never use more nodes at once than were bought.

    cumulative(pool intervals, nodes_c, bought_p);  energy cut Σ d_c·nodes_c·pick_c ≤ term·bought_p.
    """
    for p, pool in enumerate(m.pools):
        rows = m.cands.index[m.cands["pool"] == p]
        held = m.endpoint_holds(_option_mask(m, lambda o: o["pool"] == p), "nodes")
        if not len(rows) and not held:
            continue
        demands = [int(n) for n in m.cands.loc[rows, "nodes"]]
        m.model.add_cumulative(
            _intervals(m, rows) + [w for w, _, _ in held],
            demands + [h for _, h, _ in held],
            m.bought[p],
        )
        energy = sum(
            int(m.cands.at[i, "duration_steps"]) * d * m.pick[i]
            for i, d in zip(rows, demands)
        )
        energy += sum(steps * h for _, h, steps in held)
        m.model.add(energy <= (pool.end - pool.start) * m.bought[p]).with_name(
            f"energy[{pool.label}]"
        )


def _windows(
    m: BatchModel, limits: BatchLimits, first: int, end: int
) -> list[tuple[int, int]]:
    """Calendar windows for energy cuts inside [first, end): each month, and each run's own window."""
    spans = {(max(a, first), min(b, end)) for _, a, b, _ in limits.months}
    spans |= {(max(r.release, first), min(r.due, end)) for r in m.runs.values()}
    return sorted((a, b) for a, b in spans if b > a)


def add_energy_cuts(m: BatchModel, limits: BatchLimits) -> None:
    """Redundant cuts the LP relaxation can see (cumulatives alone give it nothing): inside any
    window, the runs that must lie wholly in it use at most capacity x window length.

    Σ_{c: window_r ⊆ [a,b)} d_c·demand_c·pick_c ≤ capacity·(b − a), for quotas and reservation pools.
    """
    inside_cache: dict[tuple[int, int], set[str]] = {}

    def runs_inside(a: int, b: int) -> set[str]:
        if (a, b) not in inside_cache:
            inside_cache[(a, b)] = {
                r.name for r in m.runs.values() if r.release >= a and r.due <= b
            }
        return inside_cache[(a, b)]

    def cut(rows, demand_column, capacity, first, end, label):
        frame = m.cands.loc[rows]
        # each candidate's steps x demand, read once for every window
        energies = frame["duration_steps"].astype(np.int64) * frame[
            demand_column
        ].astype(np.int64)
        for a, b in _windows(m, limits, first, end):
            inside = frame["run"].isin(runs_inside(a, b)).to_numpy()
            if inside.sum() < 2:
                continue
            energy = cp_model.LinearExpr.weighted_sum(
                [m.pick[i] for i in frame.index[inside]],
                energies.to_numpy()[inside].tolist(),
            )
            m.model.add(energy - capacity * (b - a) <= 0).with_name(
                f"energy[{label}@{a}-{b}]"
            )

    # no runs: an endpoints-only quarter
    horizon_end = max((r.due for r in m.runs.values()), default=0)
    for key, quota in sorted(limits.gpu_quotas.items()):
        rows = m.cands.index[quota_mask(m.cands, key)]
        if len(rows) and _can_bind(m, rows, "gpus", quota):
            cut(rows, "gpus", quota, 0, horizon_end, key)
    for p, pool in enumerate(m.pools):
        rows = m.cands.index[m.cands["pool"] == p]
        if len(rows):
            cut(rows, "nodes", m.bought[p], pool.start, pool.end, pool.label)


def _run_cost(m: BatchModel, rows):
    return sum(int(m.cands.at[i, "cost_cents"]) * m.pick[i] for i in rows)


def total_cost_cents(m: BatchModel):
    runs = sum(int(c) * m.pick[i] for i, c in enumerate(m.cands["cost_cents"]))
    endpoints = (
        sum(c * v for c, v in m.serving.unit_cents) if m.serving is not None else 0
    )
    return (
        runs
        + endpoints
        + sum(pool.cents_per_node * m.bought[p] for p, pool in enumerate(m.pools))
    )


def _endpoint_cents_in(m: BatchModel, first: int, end: int):
    """The endpoints' cost terms for the part of their windows inside steps [first, end)."""
    if m.serving is None:
        return 0
    shares = m.endpoints.month_shares(first, end)
    return sum(round(c * shares[name]) * v for name, c, v in m.serving.cost_terms)


def add_budgets(m: BatchModel, limits: BatchLimits) -> None:
    """The quarter's expected spending (runs + reservations bought) stays within the budget; with a
    monthly budget, each month's spending too (a run counts in the month it starts, so every scheduled
    run starts inside one of `limits.months`; a reservation counts by its hours in the month).

    Σ cost_c·pick_c + Σ price_p·term_p·bought_p ≤ budget;  per month m: the same restricted to m.
    """
    if limits.budget_usd is not None:
        m.model.add(total_cost_cents(m) <= budget_cents(limits.budget_usd)).with_name(
            "budget"
        )
    if limits.monthly_budget_usd is None:
        return
    cap = budget_cents(limits.monthly_budget_usd)
    months = limits.months
    for run, rows in m.cands.groupby("run").indices.items():
        in_month = [
            m.model.new_bool_var(f"month[{run}={label}]") for label, *_ in months
        ]
        m.model.add(sum(in_month) == m.scheduled[run])
        for flag, (_, first, end, _) in zip(in_month, months):
            m.model.add(m.start[run] >= first).only_enforce_if(flag)
            m.model.add(m.start[run] <= end - 1).only_enforce_if(flag)
        m.month_flags[run] = in_month
    for k, (label, first, end, pool_hours) in enumerate(months):
        spend = []
        for run, rows in m.cands.groupby("run").indices.items():
            most = int(m.cands.loc[m.cands.index[rows], "cost_cents"].max())
            share = m.model.new_int_var(0, most, f"spend[{run}@{label}]")
            m.model.add(share == _run_cost(m, rows)).only_enforce_if(
                m.month_flags[run][k]
            )
            m.model.add(share == 0).only_enforce_if(~m.month_flags[run][k])
            spend.append(share)
        reserved = sum(
            to_cents(m.pools[p].price_per_node_h * hours) * m.bought[p]
            for p, hours in pool_hours.items()
        )
        endpoints = _endpoint_cents_in(m, first, end)
        m.model.add(sum(spend) + reserved + endpoints <= cap).with_name(
            f"monthly_budget[{label}]"
        )


CONSTRAINT_FAMILIES = (
    add_one_candidate_per_run,
    add_windows,
    add_precedence,
    add_gpu_quotas,
    add_node_limits,
    add_reservation_capacity,
    add_energy_cuts,
    add_budgets,
)


def decision_variables(
    model: cp_model.CpModel, cands: pd.DataFrame, runs: list[RunInfo], pools: list[Pool]
):
    """One pick per candidate; a start per run in release .. due − its shortest duration (the release
    is held here, not by `add_windows`); `scheduled` per run (1 when required); nodes bought per pool."""
    pick = [model.new_bool_var(f"pick[{cid}]") for cid in cands["cid"]]
    shortest = cands.groupby("run")["duration_steps"].min()
    start = {
        r.name: model.new_int_var(
            r.release,
            max(r.release, r.due - int(shortest.get(r.name, 1))),
            f"start[{r.name}]",
        )
        for r in runs
    }
    scheduled = {
        r.name: (1 if r.required else model.new_bool_var(f"scheduled[{r.name}]"))
        for r in runs
    }
    bought = [
        model.new_int_var(p.min_nodes, p.max_nodes, f"bought[{p.label}]") for p in pools
    ]
    return pick, start, scheduled, bought


def build_batch_model(
    cands: pd.DataFrame,
    runs: list[RunInfo],
    pools: list[Pool],
    limits: BatchLimits,
    horizon_steps: int,
    endpoints: QuarterEndpoints | None = None,
) -> BatchModel:
    started = time.perf_counter()
    cands = cands.reset_index(drop=True)
    model = cp_model.CpModel()
    model.name = "planner-batch"
    run_map = {r.name: r for r in runs}
    pick, start, scheduled, bought = decision_variables(model, cands, runs, pools)
    upper = int(cands.groupby("run")["cost_cents"].max().sum()) + sum(
        p.cents_per_node * p.max_nodes for p in pools
    )
    m = BatchModel(
        model, cands, run_map, pools, pick, start, scheduled, bought, upper + 1
    )
    if endpoints is not None and len(endpoints.options):
        m.serving, m.endpoints = (
            serving_variables(model, endpoints.options, endpoints.traffic),
            endpoints,
        )
        m.priority_weight += m.serving.most_cents
    _check_priorities_fit(
        m.priority_weight,
        sum(r.priority for r in runs if not r.required),
        m.serving is not None,
    )
    for family in (
        CONSTRAINT_FAMILIES + SERVING_FAMILIES
    ):  # the endpoints' families: tested with the solve model's
        family(m, limits)
    priority = sum(r.priority * m.scheduled[r.name] for r in runs if not r.required)
    model.minimize(total_cost_cents(m) - m.priority_weight * priority)
    m.build_seconds = time.perf_counter() - started
    return m


class PrioritiesTooHeavy(PlannerError):
    """The optional runs' priorities, each point weighed above every cost the plan could reach, pass what CP-SAT
    counts in (the objective's sums must stay in 64-bit integers: OBJECTIVE_LIMIT)."""


def _check_priorities_fit(
    weight: int, priorities: int, endpoints: bool = False
) -> None:
    """Refuse optional runs' priorities whose weighted sum would pass OBJECTIVE_LIMIT, saying what sum fits."""
    if priorities and weight * (priorities + 1) >= OBJECTIVE_LIMIT:
        fits = OBJECTIVE_LIMIT // weight - 1
        room = (
            f"priorities adding up to at most {fits:,} fit, or make runs required"
            if fits > 0
            else "make the optional runs required"
        )
        raise PrioritiesTooHeavy(
            f"the optional runs' priorities add up to {priorities:,} and each point must outweigh every cost the "
            f"plan could reach (${weight * COST_RESOLUTION_USD:.3g}{', the endpoints at their most nodes' if endpoints else ''}"
            f"); together they pass the 64-bit integers CP-SAT counts in: {room}"
        )


def solve_batch(
    m: BatchModel,
    time_limit_s: float = 60.0,
    workers: int = 2,
    seed: int = 0,
    hint: dict | None = None,
    fix_hint: bool = False,
    work_limit: float | None = None,
) -> BatchResult:
    """Solve; the bound is reported in dollars of cost for the chosen set of runs.

    `hint` holds chosen `cids`, `starts` per run and `bought` per pool; with `runs`, only
    those runs' candidates are hinted. `fix_hint` fixes the hinted variables. With
    `work_limit` (CP-SAT deterministic seconds) the workers interleave deterministically, so
    the result depends on the model, hint, seed and workers, not on the clock, unless
    `time_limit_s` cuts it first.
    """
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    if work_limit is not None:
        solver.parameters.interleave_search = True
        solver.parameters.max_deterministic_time = work_limit
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.fix_variables_to_their_hinted_value = fix_hint
    m.model.clear_hints()
    if hint:
        hinted_runs = hint.get("runs")
        for i, (cid, run) in enumerate(zip(m.cands["cid"], m.cands["run"])):
            if hinted_runs is None or run in hinted_runs:
                m.model.add_hint(m.pick[i], cid in hint.get("cids", ()))
        for run, step in hint.get("starts", {}).items():
            m.model.add_hint(m.start[run], step)
        for p, count in enumerate(hint.get("bought", [])):
            m.model.add_hint(m.bought[p], count)
        if m.serving is not None and hint.get("serving") is not None:
            m.serving.add_hints(m.model, hint["serving"])
    started = time.perf_counter()
    code = cpsat.run(solver, m.model)
    elapsed = time.perf_counter() - started
    status = solver.status_name(code)
    clocked = cut_by_clock(status, solver.deterministic_time, work_limit)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return BatchResult(
            status,
            solve_seconds=elapsed,
            deterministic_seconds=solver.deterministic_time,
            workers=workers,
            seed=seed,
            chosen=m.cands.iloc[0:0],
            clocked=clocked,
        )
    chosen_mask = [bool(solver.boolean_value(v)) for v in m.pick]
    chosen = m.cands[
        np.asarray(chosen_mask, dtype=bool)
    ].copy()  # an empty list would pick no columns
    chosen["start_step"] = [solver.value(m.start[r]) for r in chosen["run"]]
    bought = [int(solver.value(b)) for b in m.bought]
    reservations = (
        sum(p.cents_per_node * b for p, b in zip(m.pools, bought)) * COST_RESOLUTION_USD
    )
    runs_cost = float(chosen["cost_usd"].sum())
    serving = (
        m.serving.chosen(solver.value) if m.serving is not None else pd.DataFrame()
    )
    objective = (
        runs_cost
        + reservations
        + (float(serving["cost_usd"].sum()) if len(serving) else 0.0)
    )
    priority_done = sum(
        m.runs[r].priority for r in chosen["run"] if not m.runs[r].required
    )
    bound_cents = solver.best_objective_bound + m.priority_weight * priority_done
    bound = (
        objective
        if code == cp_model.OPTIMAL
        else min(objective, bound_cents * COST_RESOLUTION_USD)
    )
    unscheduled = sorted(set(m.runs) - set(chosen["run"]))
    return BatchResult(
        status,
        objective,
        bound,
        elapsed,
        solver.deterministic_time,
        workers,
        seed,
        "cp-sat" if code == cp_model.OPTIMAL else "",
        chosen=chosen.sort_values("run").reset_index(drop=True),
        bought=bought,
        unscheduled=unscheduled,
        serving=serving,
        clocked=clocked,
    )
