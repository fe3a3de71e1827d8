"""The CP-SAT model of `planner solve`: one candidate per workload under shared limits.

The only module that imports OR-Tools for assignment plans. It reads the candidate table
built by `candidates.py` (one row per feasible, non-dominated candidate) and never the
domain model's YAML. Each constraint family is one `add_*` function with one signature.

Costs enter the model as integer cents (COST_RESOLUTION_USD); the reported objective is
the float sum of the chosen candidates' expected costs.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pandas as pd
from ortools.sat.python import cp_model

from .limits import COST_RESOLUTION_USD, Limits, quota_mask


@dataclass
class PlanModel:
    model: cp_model.CpModel
    candidates: pd.DataFrame
    pick: list  # one BoolVar per candidate row, same order
    tie_scale: int
    build_seconds: float


@dataclass
class SolveResult:
    status: str
    chosen: pd.DataFrame  # the picked candidate rows (empty unless FEASIBLE/OPTIMAL)
    objective_usd: float
    bound_usd: float
    solve_seconds: float
    deterministic_seconds: float
    workers: int

    @property
    def gap(self) -> float:
        if self.objective_usd <= 0:
            return 0.0
        return max(0.0, (self.objective_usd - self.bound_usd) / self.objective_usd)


def tie_ranks(candidates: pd.DataFrame) -> pd.Series:
    """Within each workload, rank candidates by (cost, wall time, name): the deterministic tie-break."""
    order = candidates.sort_values(["workload", "cost_cents", "wall_h", "cid"], kind="stable")
    ranks = order.groupby("workload", sort=False).cumcount()
    return ranks.reindex(candidates.index)


# ---------------------------------------------------------------- constraint families


def add_one_candidate_per_workload(model: cp_model.CpModel, cands: pd.DataFrame, pick: list, limits: Limits) -> None:
    """Every workload runs on exactly one candidate.

    Σ_c pick[w, c] = 1 for each workload w.
    """
    for workload, rows in cands.groupby("workload", sort=True).indices.items():
        model.add_exactly_one(pick[i] for i in rows).with_name(f"one[{workload}]")


def add_gpu_quotas(model: cp_model.CpModel, cands: pd.DataFrame, pick: list, limits: Limits) -> None:
    """GPUs running at once per provider (or per provider and GPU family) stay within quota.

    Σ_{c on provider p [and family f]} gpus_c · pick_c ≤ quota[p(/f)].
    """
    for key, quota in sorted(limits.gpu_quotas.items()):
        rows = cands.index[quota_mask(cands, key)]
        if len(rows) == 0 or cands.loc[rows, "gpus"].sum() <= quota:
            continue  # cannot bind
        model.add(sum(int(cands.at[i, "gpus"]) * pick[i] for i in rows) <= quota).with_name(f"quota[{key}]")


def add_node_limits(model: cp_model.CpModel, cands: pd.DataFrame, pick: list, limits: Limits) -> None:
    """Nodes of one offer (per market, if the scenario says so) stay within its limit.

    Σ_{c on offer o [and market m]} nodes_c · pick_c ≤ limit[o] (scenario limit or catalog max_nodes).
    """
    groups = ["offer_key", "market"] if limits.node_limits_per_market else ["offer_key"]
    for key, rows in cands.groupby(groups, sort=True).indices.items():
        offer_key = key[0] if isinstance(key, tuple) else key
        caps = [limits.node_limits.get(offer_key)]
        catalog_cap = cands.at[cands.index[rows[0]], "max_nodes"]
        caps.append(None if pd.isna(catalog_cap) else int(catalog_cap))
        caps = [c for c in caps if c is not None]
        if not caps:
            continue
        cap = min(caps)
        index = cands.index[rows]
        if cands.loc[index, "nodes"].groupby(cands.loc[index, "workload"]).max().sum() <= cap:
            continue  # cannot bind
        label = "/".join(key) if isinstance(key, tuple) else key
        model.add(sum(int(cands.at[i, "nodes"]) * pick[i] for i in index) <= cap).with_name(f"nodes[{label}]")


def add_budget(model: cp_model.CpModel, cands: pd.DataFrame, pick: list, limits: Limits) -> None:
    """Total expected cost stays within the budget.

    Σ_c cost_cents_c · pick_c ≤ budget (in cents, rounded down).
    """
    if limits.budget_usd is None:
        return
    cap = math.floor(limits.budget_usd / COST_RESOLUTION_USD + 1e-6)  # $0.29 is 29 cents, not int(28.999...)
    model.add(sum(int(cands.at[i, "cost_cents"]) * pick[i] for i in cands.index) <= cap).with_name("budget")


def _add_same(model, cands, pick, groups, column: str, label: str) -> None:
    for number, group in enumerate(groups):
        members = cands.index[cands["workload"].isin(group)]
        values = sorted(cands.loc[members, column].unique())
        chosen = {v: model.new_bool_var(f"{label}[{number}={v}]") for v in values}
        model.add_exactly_one(chosen.values()).with_name(f"{label}[{number}]")
        for i in members:
            model.add_implication(pick[i], chosen[cands.at[i, column]])


def add_same_region_groups(model: cp_model.CpModel, cands: pd.DataFrame, pick: list, limits: Limits) -> None:
    """Workloads grouped together run in one provider region.

    region_g ∈ regions, exactly one; pick_c ⇒ region_g = region(c) for c of a member.
    """
    _add_same(model, cands, pick, limits.same_region, "provider_region", "same_region")


def add_same_provider_groups(model: cp_model.CpModel, cands: pd.DataFrame, pick: list, limits: Limits) -> None:
    """Workloads grouped together run on one provider.

    provider_g exactly one; pick_c ⇒ provider_g = provider(c) for c of a member.
    """
    _add_same(model, cands, pick, limits.same_provider, "provider", "same_provider")


CONSTRAINT_FAMILIES = (
    add_one_candidate_per_workload,
    add_gpu_quotas,
    add_node_limits,
    add_budget,
    add_same_region_groups,
    add_same_provider_groups,
)


def build_model(candidates: pd.DataFrame, limits: Limits) -> PlanModel:
    """Decision variables, the constraint families in order, and the objective."""
    started = time.perf_counter()
    cands = candidates.reset_index(drop=True).copy()
    cands["provider_region"] = cands["provider"] + "/" + cands["region"]
    model = cp_model.CpModel()
    model.name = "planner-solve"
    pick = [model.new_bool_var(f"pick[{cid}]") for cid in cands["cid"]]
    for family in CONSTRAINT_FAMILIES:
        family(model, cands, pick, limits)
    ranks = tie_ranks(cands).astype(int)
    tie_scale = int(ranks.groupby(cands["workload"]).max().sum()) + 1
    objective = [(int(c) * tie_scale + int(r), pick[i]) for i, (c, r) in enumerate(zip(cands["cost_cents"], ranks))]
    model.minimize(sum(coef * var for coef, var in objective))
    return PlanModel(model, cands, pick, tie_scale, time.perf_counter() - started)


def solve_model(plan: PlanModel, time_limit_s: float = 60.0, workers: int = 0, seed: int = 0,
                hint: dict[str, str] | None = None) -> SolveResult:
    """Solve; report status, the chosen rows, and objective and bound in dollars.

    `hint` maps workload -> cid of a previous plan (what-if sweeps start from the neighbour).
    """
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers if workers > 0 else 2
    solver.parameters.random_seed = seed
    if hint:
        plan.model.clear_hints()
        wanted = set(hint.values())
        for var, cid in zip(plan.pick, plan.candidates["cid"]):
            plan.model.add_hint(var, cid in wanted)
    started = time.perf_counter()
    code = solver.solve(plan.model)
    elapsed = time.perf_counter() - started
    status = solver.status_name(code)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        mask = [bool(solver.boolean_value(v)) for v in plan.pick]
        chosen = plan.candidates[mask].sort_values("workload", kind="stable").reset_index(drop=True)
        objective = float(chosen["cost_usd"].sum())
        bound_cents = solver.best_objective_bound // plan.tie_scale
        bound = min(objective, bound_cents * COST_RESOLUTION_USD) if code == cp_model.FEASIBLE else objective
    else:
        chosen = plan.candidates.iloc[0:0]
        objective = bound = float("nan")
    return SolveResult(status, chosen, objective, bound, elapsed, solver.deterministic_time,
                       int(solver.parameters.num_workers))
