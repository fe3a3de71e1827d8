"""The CP-SAT model of `planner solve`: one candidate per workload under shared limits.

It reads the candidate table built by `candidates/generate.py` (one row per feasible, non-dominated
candidate) and never the domain model's YAML. Each constraint family is one `add_*` function with one
signature. How the model is searched is `search.py` (and `endpoint_search.py` for endpoints).

Costs enter the model as integer cents (COST_RESOLUTION_USD); the reported objective is
the float sum of the chosen candidates' expected costs.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from planner.candidates.endpoints import Endpoint
from planner.candidates.limits import (
    Limits,
    budget_cents,
    node_cap,
    quota_mask,
)
from planner.solve.rows import (
    budget_rows,
    group_members,
    node_limit_rows,
    quota_rows,
)
from planner.solve.serving import (
    SERVING_FAMILIES,
    ServingVars,
    serving_ties,
    serving_variables,
)


@dataclass
class PlanModel:
    model: cp_model.CpModel | None  # None until a search needs it (`constrained`)
    candidates: pd.DataFrame
    pick: list | None  # one BoolVar per candidate row, same order
    tie_scale: int = 1  # objective = cents x tie_scale + tie-break rank
    # (rank, variable): a tie-break after the cost
    later_ties: list = dataclasses.field(default_factory=list)
    build_seconds: float = 0.0
    limits: Limits = Limits()
    # tie-break rank per candidate (0 = best within its workload)
    ranks: np.ndarray = None
    # the endpoints' replicas, once the CP-SAT model is built
    serving: ServingVars | None = None
    # their options and traffic, if any
    endpoints: tuple[pd.DataFrame, dict[str, Endpoint]] | None = None

    def constrained(self) -> PlanModel:
        """This plan with its CP-SAT model built. Most plans are proven by the LP or HiGHS alone, and the
        model of 100,000 candidates takes seconds to build, so `build_model` can leave it to the first search
        (as it can for endpoints solved one by one: `endpoint_search._solve_by_endpoint`)."""
        if self.model is None:
            started = time.perf_counter()
            _constrain(self, self.endpoints)
            self.build_seconds += time.perf_counter() - started
        return self


def tie_ranks(candidates: pd.DataFrame) -> pd.Series:
    """Within each workload, rank candidates by (cost, wall time, nodes, name): the deterministic tie-break
    (of two that cost and take the same, the one with fewer nodes to run)."""
    order = candidates.sort_values(
        ["workload", "cost_cents", "wall_h", "nodes", "cid"], kind="stable"
    )
    ranks = order.groupby("workload", sort=False).cumcount()
    return ranks.reindex(candidates.index)


# ---------------------------------------------------------------- constraint families
# Each family is `add_<rule>(m, limits)`, as in the batch model; `build_model` walks CONSTRAINT_FAMILIES.


def add_one_candidate_per_workload(m: PlanModel, limits: Limits) -> None:
    """Every workload runs on exactly one candidate.

    Σ_c pick[w, c] = 1 for each workload w.
    """
    for workload, rows in m.candidates.groupby("workload", sort=True).indices.items():
        m.model.add_exactly_one(m.pick[i] for i in rows).with_name(f"one[{workload}]")


def add_gpu_quotas(m: PlanModel, limits: Limits) -> None:
    """GPUs running at once per provider (or per provider and GPU family) stay within quota.

    Σ_{c on provider p [and family f]} gpus_c · pick_c ≤ quota[p(/f)].
    """
    _add_rows(m, quota_rows(m.candidates, limits, skip=_serving_quota_keys(m, limits)))
    if m.serving is None:
        return
    for key in sorted(_serving_quota_keys(m, limits)):
        quota = limits.gpu_quotas[key]
        _add_with_endpoints(
            m,
            f"quota[{key}]",
            quota_mask(m.candidates, key).to_numpy(),
            "gpus",
            quota_mask(m.serving.options, key).to_numpy(),
            quota,
        )


def _serving_quota_keys(m: PlanModel, limits: Limits) -> set[str]:
    if m.serving is None:
        return set()
    return {k for k in limits.gpu_quotas if quota_mask(m.serving.options, k).any()}


def _add_with_endpoints(
    m: PlanModel,
    name: str,
    job_mask: np.ndarray,
    column: str,
    option_mask: np.ndarray,
    upper: int,
) -> None:
    """Jobs (all at once) plus each period's endpoint nodes within one limit, period by period."""
    terms = m.serving.node_terms(option_mask, column)
    jobs = [
        (int(c), m.pick[i])
        for i, c in zip(
            np.flatnonzero(job_mask), m.candidates[column].to_numpy()[job_mask]
        )
    ]
    for period, endpoint_terms in sorted(terms.items()):
        m.model.add(sum(c * v for c, v in jobs + endpoint_terms) <= upper).with_name(
            f"{name}@{period}"
        )


def add_node_limits(m: PlanModel, limits: Limits) -> None:
    """Nodes of one offer (per market, if the scenario says so) stay within its limit.

    Σ_{c on offer o [and market m]} nodes_c · pick_c ≤ limit[o] (scenario limit or catalog max_nodes).
    """
    _add_rows(m, node_limit_rows(m.candidates, limits, skip=_serving_offers(m)))
    if m.serving is None:
        return
    options, cands = m.serving.options, m.candidates
    for key in sorted(set(options["offer_key"])):
        offer_on = (options["offer_key"] == key).to_numpy()
        job_on = (cands["offer_key"] == key).to_numpy(dtype=bool)
        markets = (
            sorted(set(options["market"][offer_on]) | set(cands["market"][job_on]))
            if limits.node_limits_per_market
            else [None]
        )
        catalog_cap = options["max_nodes"][offer_on].iloc[0]
        for market in markets:
            on, jobs = offer_on.copy(), job_on.copy()
            if market is not None:
                on &= (options["market"] == market).to_numpy()
                jobs &= (cands["market"] == market).to_numpy(dtype=bool)
            cap = node_cap(limits.node_limits.get(key), catalog_cap)
            if cap is not None:
                _add_with_endpoints(
                    m,
                    f"nodes[{key}{'/' + market if market else ''}]",
                    jobs,
                    "nodes",
                    on,
                    cap,
                )


def _serving_offers(m: PlanModel) -> set[str]:
    return set() if m.serving is None else set(m.serving.options["offer_key"])


def add_budget(m: PlanModel, limits: Limits) -> None:
    """Total expected cost stays within the budget.

    Σ_c cost_cents_c · pick_c ≤ budget (in cents, rounded down).
    """
    if m.serving is None:
        _add_rows(m, budget_rows(m.candidates, limits))
        return
    if limits.budget_usd is not None:
        jobs = [(int(c), m.pick[i]) for i, c in enumerate(m.candidates["cost_cents"])]
        m.model.add(
            sum(c * v for c, v in jobs + m.serving.unit_cents)
            <= budget_cents(limits.budget_usd)
        ).with_name("budget")


def _add_rows(m: PlanModel, rows) -> None:
    for row in rows:
        m.model.add(
            sum(int(c) * m.pick[i] for i, c in zip(row.index, row.coef)) <= row.upper
        ).with_name(row.name)


def _add_same(m: PlanModel, groups, column: str, label: str) -> None:
    for number, (_, by_value) in enumerate(group_members(m.candidates, groups, column)):
        chosen = {v: m.model.new_bool_var(f"{label}[{number}={v}]") for v in by_value}
        m.model.add_exactly_one(chosen.values()).with_name(f"{label}[{number}]")
        for value, members in by_value.items():
            for i in members:
                m.model.add_implication(m.pick[i], chosen[value])


def add_same_region_groups(m: PlanModel, limits: Limits) -> None:
    """Workloads grouped together run in one provider region.

    region_g ∈ regions, exactly one; pick_c ⇒ region_g = region(c) for c of a member.
    """
    _add_same(m, limits.same_region, "provider_region", "same_region")


def add_same_provider_groups(m: PlanModel, limits: Limits) -> None:
    """Workloads grouped together run on one provider.

    provider_g exactly one; pick_c ⇒ provider_g = provider(c) for c of a member.
    """
    _add_same(m, limits.same_provider, "provider", "same_provider")


CONSTRAINT_FAMILIES = (
    add_one_candidate_per_workload,
    add_gpu_quotas,
    add_node_limits,
    add_budget,
    add_same_region_groups,
    add_same_provider_groups,
) + SERVING_FAMILIES


JOB_COLUMNS = (
    "cid",
    "workload",
    "provider",
    "region",
    "gpu",
    "gpu_family",
    "offer_key",
    "market",
    "gpus",
    "nodes",
    "max_nodes",
    "cost_cents",
    "cost_usd",
    "wall_h",
)


def build_model(
    candidates: pd.DataFrame,
    limits: Limits,
    ranks: np.ndarray | None = None,
    serving: tuple[pd.DataFrame, dict[str, Endpoint]] | None = None,
    constrain: bool = True,
) -> PlanModel:
    """The candidates under the limits with their tie-break ranks; with `constrain`, also the CP-SAT model
    (decision variables, the constraint families in order, the objective), else it waits for the first
    search (`PlanModel.constrained`). `ranks`: the tie-break ranks to keep, when `candidates` are a subset
    of a larger table; `serving`: the endpoints' options and traffic, when the scenario has endpoints."""
    started = time.perf_counter()
    cands = (
        candidates.reset_index(drop=True).copy()
        if len(candidates)
        else pd.DataFrame({c: pd.Series(dtype=object) for c in JOB_COLUMNS})
    )
    cands["provider_region"] = cands["provider"] + "/" + cands["region"]
    ranks = (
        tie_ranks(cands).to_numpy(dtype=int)
        if ranks is None
        else np.asarray(ranks, dtype=int)
    )
    serving = serving if serving is not None and len(serving[0]) else None
    m = PlanModel(None, cands, None, limits=limits, ranks=ranks, endpoints=serving)
    if constrain:
        _constrain(m, serving)
    m.build_seconds = time.perf_counter() - started
    return m


def _constrain(
    m: PlanModel, serving: tuple[pd.DataFrame, dict[str, Endpoint]] | None
) -> None:
    """The CP-SAT model of `m`: decision variables, the constraint families in order, and the objective."""
    cands, limits = m.candidates, m.limits
    model = cp_model.CpModel()
    model.name = "planner-solve"
    m.model, m.pick = (
        model,
        [model.new_bool_var(f"pick[{cid}]") for cid in cands["cid"]],
    )
    pick = m.pick
    if serving is not None:
        m.serving = serving_variables(model, *serving)
    for family in CONSTRAINT_FAMILIES:
        family(m, limits)
    ranks = pd.Series(m.ranks, dtype=int)
    ties = serving_ties(m.serving) if m.serving is not None else []
    m.tie_scale = (
        int(
            ranks.groupby(cands["workload"].to_numpy()).max().sum() if len(cands) else 0
        )
        + 1
        + sum(r * hi for r, _, hi in ties)
    )
    if (
        m.serving is not None
        and _most_cents(model, cands, m.serving) * m.tie_scale >= OBJECTIVE_LIMIT
    ):
        # Endpoints of hundreds of thousands of nodes: cents x tie_scale would leave 64-bit integers (CP-SAT
        # calls such a model invalid), so the cost is minimised alone and the tie-break follows it.
        m.tie_scale = 1
        m.later_ties = [(int(r), pick[i]) for i, r in enumerate(ranks) if r] + [
            (r, v) for r, v, _ in ties
        ]
        ties = []
    objective = [
        (int(c) * m.tie_scale + int(r) * (not m.later_ties), pick[i])
        for i, (c, r) in enumerate(zip(cands["cost_cents"], ranks))
    ]
    if m.serving is not None:
        objective += [(c * m.tie_scale, v) for c, v in m.serving.unit_cents]
        objective += [(r, v) for r, v, _ in ties]
    model.minimize(sum(coef * var for coef, var in objective))


OBJECTIVE_LIMIT = 2**60
"""The most the objective's terms may add up to: CP-SAT calls a model invalid when its sums could leave
64-bit integers (with a margin of its own: a model at 2^61.7 was refused), so this keeps a factor 4 below
2^62. The shipped endpoints reach 2^48; 1,000 requests a second of a 70B model, 2^58."""


def _most_cents(
    model: cp_model.CpModel, cands: pd.DataFrame, serving: ServingVars
) -> int:
    """The most the objective's cents could reach: every candidate, every endpoint variable at its bound."""
    jobs = sum(abs(int(c)) for c in cands["cost_cents"])
    return jobs + sum(
        abs(c) * max(model.proto.variables[var.index].domain)
        for _, c, var in serving.cost_terms
    )
