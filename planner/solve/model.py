"""The CP-SAT model of `planner solve`: one candidate per workload under shared limits.

The only module that imports OR-Tools for assignment plans. It reads the candidate table
built by `candidates/generate.py` (one row per feasible, non-dominated candidate) and never the
domain model's YAML. Each constraint family is one `add_*` function with one signature.

Costs enter the model as integer cents (COST_RESOLUTION_USD); the reported objective is
the float sum of the chosen candidates' expected costs.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from planner.candidates.endpoints import Endpoint
from planner.candidates.limits import (
    COST_RESOLUTION_USD,
    Limits,
    budget_cents,
    node_cap,
    quota_mask,
)
from planner.solve import cpsat
from planner.solve.bound import LpBound, lp_bound, mip_optimum
from planner.solve.outcome import Clock, SolveResult
from planner.solve.rows import (
    LinearRow,
    admits,
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
    later_ties: list = dataclasses.field(
        default_factory=list
    )  # (rank, variable): a tie-break after the cost
    build_seconds: float = 0.0
    limits: Limits = Limits()
    ranks: np.ndarray = (
        None  # tie-break rank per candidate (0 = best within its workload)
    )
    serving: ServingVars | None = (
        None  # the endpoints' replicas, once the CP-SAT model is built
    )
    endpoints: tuple[pd.DataFrame, dict[str, Endpoint]] | None = (
        None  # their options and traffic, if any
    )

    def constrained(self) -> PlanModel:
        """This plan with its CP-SAT model built. Most plans are proven by the LP or HiGHS alone, and the
        model of 100,000 candidates takes seconds to build, so `build_model` can leave it to the first search
        (as it can for endpoints solved one by one: `_solve_by_endpoint`)."""
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


def solve_model(
    plan: PlanModel,
    time_limit_s: float = 60.0,
    workers: int = 0,
    seed: int = 0,
    hint: dict[str, str] | None = None,
    use_lp: bool = True,
    lp_hint: bool = True,
    parameters: dict | None = None,
) -> SolveResult:
    """Solve; report status, the chosen rows, and objective and bound in dollars.

    Two stages, each proven by the larger of CP-SAT's bound and the LP relaxation's (`bound.py`):
    first the cost in cents, stopped as soon as a plan's cost meets the LP bound; then, among plans
    of that cost, the tie-break (shorter wall time, then name; a sum of ranks, which two plans can share),
    so the same input gives the same plan. When the LP's rounded solution keeps every limit, it is a plan: what the
    LP prices above it is dropped before any search, and it stands if no search finds a plan in time
    (a table of 185,021 candidates had none from CP-SAT in 30 s). `hint` maps workload -> cid of a
    previous plan (what-if sweeps start from the neighbour); `lp_hint` starts CP-SAT from the LP's rounded
    solution instead. `parameters` are CP-SAT's own (for measurements: `linearization_level`,
    `optimize_with_lb_tree_search`, ...).
    """
    clock = Clock(time_limit_s)
    cands = plan.candidates
    cents = cands["cost_cents"].to_numpy(dtype=np.int64)
    if (
        plan.endpoints is not None
    ):  # the LP relaxation and HiGHS's MIP know only the jobs' candidates
        return _solve_with_endpoints(plan, clock, workers, seed, hint, parameters)
    relaxed = lp_bound(cands, plan.limits, cents) if use_lp else None
    cents_floor = relaxed.least_whole if relaxed else None
    if (
        relaxed is not None
        and not hint
        and np.all((relaxed.x < 1e-9) | (relaxed.x > 1 - 1e-9))
    ):
        # The relaxation's optimum is a plan (every workload whole): optimal in cents with nothing to search.
        # (Its picks meet every row; for the groups, two members on different values would need Σ y = 2.)
        picked = relaxed.x > 0.5
        return _finish(
            plan,
            cents,
            picked,
            int(cents[picked].sum()),
            True,
            "lp",
            relaxed,
            clock,
            workers,
            seed,
            0.0,
            0,
        )
    incumbent = None  # a plan known to meet every limit, while CP-SAT has found none
    if relaxed is not None and not hint:  # a few workloads fractional
        rounded = _rounded(cands, relaxed.x, plan.ranks)
        if admits(
            cands, plan.limits, rounded
        ):  # a plan: what the LP prices above it is in no cheaper one
            keep = relaxed.can_beat(float(cents[rounded].sum()))
            plan, cents, relaxed, incumbent = (
                _narrowed(plan, keep),
                cents[keep],
                relaxed.narrowed(keep),
                rounded[keep],
            )
            cands = plan.candidates
        # HiGHS's branch and bound closes the few fractional workloads
        exact = mip_optimum(cands, plan.limits, cents, min(MIP_LOOK_S, clock.left()))
        if exact is not None:
            return _finish(
                plan,
                cents,
                exact,
                int(cents[exact].sum()),
                True,
                "mip",
                relaxed,
                clock,
                workers,
                seed,
                0.0,
                0,
            )
    if hint:
        wanted = set(hint.values())
        start = [cid in wanted for cid in cands["cid"]]
    elif incumbent is not None:
        start = list(incumbent)
    else:  # the LP's rounded solution: most workloads are whole in it, so it is nearly the plan
        start = (
            list(_rounded(cands, relaxed.x, plan.ranks))
            if relaxed and lp_hint
            else None
        )

    def stop_at(model_plan: PlanModel) -> int | None:
        return (
            None
            if cents_floor is None
            else cents_floor * model_plan.tie_scale + model_plan.tie_scale - 1
        )

    left = clock.left()
    plan.constrained()
    first = _search(
        plan.model,
        plan.pick,
        start,
        min(left, FIRST_LOOK_S) if relaxed else left,
        workers,
        seed,
        stop_at=stop_at(plan),
        parameters=parameters,
    )
    left = clock.left()
    if (
        first.values is None and relaxed and left > 0.5
    ):  # no plan in the first look: search on, to the time limit
        again = _search(
            plan.model,
            plan.pick,
            start,
            left,
            workers,
            seed,
            stop_at=stop_at(plan),
            parameters=parameters,
        )
        first = dataclasses.replace(
            again, deterministic=again.deterministic + first.deterministic
        )
    if (
        first.values is None and incumbent is not None
    ):  # CP-SAT found none in time: the rounded LP stands
        first = dataclasses.replace(first, status="FEASIBLE", values=incumbent, bound=0)
    left = clock.left()
    if (
        relaxed
        and first.values is not None
        and first.status != "OPTIMAL"
        and int(cents[first.values].sum()) > cents_floor
        and left > 0.5
    ):
        # Reduced-cost fixing: no plan as cheap as this one picks a candidate the LP prices above it.
        keep = relaxed.can_beat(float(cents[first.values].sum()))
        reduced = _narrowed(plan, keep).constrained()
        again = _search(
            reduced.model,
            reduced.pick,
            list(first.values[keep]),
            left,
            workers,
            seed,
            stop_at=stop_at(reduced),
            parameters=parameters,
        )
        if again.values is not None:  # else keep the first plan and the full model
            plan, cands, cents, relaxed = (
                reduced,
                reduced.candidates,
                cents[keep],
                relaxed.narrowed(keep),
            )
            first = dataclasses.replace(
                again, deterministic=again.deterministic + first.deterministic
            )
    if first.values is None:
        return SolveResult(
            first.status,
            solve_seconds=clock.used(),
            deterministic_seconds=first.deterministic,
            workers=first.workers,
            seed=seed,
            lp_seconds=relaxed.seconds if relaxed else 0.0,
            chosen=cands.iloc[0:0],
        )
    picked = first.values
    best_cents = int(cents[picked].sum())
    cents_proven = first.status == "OPTIMAL" or (
        cents_floor is not None and best_cents <= cents_floor
    )
    proved_by = (
        "cp-sat" if first.status == "OPTIMAL" else ("lp" if cents_proven else "")
    )
    return _finish(
        plan,
        cents,
        picked,
        best_cents,
        cents_proven,
        proved_by,
        relaxed,
        clock,
        workers,
        seed,
        first.deterministic,
        first.workers,
        cp_floor=first.bound // plan.tie_scale,
        status=first.status,
    )


def _solve_with_endpoints(
    plan: PlanModel, clock: Clock, workers: int, seed: int, hint, parameters
) -> SolveResult:
    """CP-SAT alone, to proof: the endpoints' replica counts are integers the relaxations do not have."""
    groups = _endpoint_groups(plan)
    if groups:
        found = _solve_by_endpoint(plan, groups, clock, workers, seed, parameters)
        if found is not None:
            return found
    providers = _one_provider_split(plan)
    if providers:
        return _solve_by_provider(plan, providers, clock, workers, seed, parameters)
    plan.constrained()
    cands = plan.candidates
    wanted = set(hint.values()) if hint else set()
    start = [cid in wanted for cid in cands["cid"]] if hint else None
    found = _search(
        plan.model,
        plan.pick,
        start,
        clock.left(),
        workers,
        seed,
        stop_at=None,
        parameters=parameters,
        serving=plan.serving,
    )
    if plan.later_ties and found.status == "OPTIMAL":
        found = _endpoint_tie_break(
            plan, found, clock.left(), workers, seed, parameters
        )
    common = dict(
        solve_seconds=clock.used(),
        deterministic_seconds=found.deterministic,
        workers=found.workers,
        seed=seed,
    )
    if found.values is None:
        return SolveResult(found.status, chosen=cands.iloc[0:0], **common)
    chosen = (
        cands[found.values]
        .sort_values("workload", kind="stable")
        .reset_index(drop=True)
    )
    objective = float(chosen["cost_usd"].sum()) + float(
        found.serving["cost_usd"].sum() if len(found.serving) else 0
    )
    proven = found.status == "OPTIMAL"
    bound = (
        objective
        if proven
        else min(objective, (found.bound // plan.tie_scale) * COST_RESOLUTION_USD)
    )
    return SolveResult(
        found.status,
        objective,
        bound,
        proved_by="cp-sat" if proven else "",
        chosen=chosen,
        serving=found.serving,
        **common,
    )


def _endpoint_groups(plan: PlanModel) -> list[list[str]]:
    """The endpoints of a model that holds several and nothing else, grouped where they are alike but for their
    names (the same options and traffic), when no limit of the scenario ties them together: no quota, node limit,
    budget or group. [] otherwise. Only the offers' own node caps can then tie them; `_solve_by_endpoint` checks
    those on the plan it puts together."""
    (options, traffic), limits = plan.endpoints, plan.limits
    if (
        len(plan.candidates)
        or len(traffic) < 2
        or limits.gpu_quotas
        or limits.node_limits
        or limits.budget_usd is not None
        or limits.same_region
        or limits.same_provider
    ):
        return []
    groups: dict[tuple, list[str]] = {}
    alike = options.drop(columns=["workload", "oid"])
    for name, rows in sorted(options.groupby("workload", sort=False).indices.items()):
        key = (
            repr(alike.iloc[rows].to_numpy().tolist()),
            pickle.dumps(dataclasses.replace(traffic[name], name="")),
        )
        groups.setdefault(key, []).append(name)
    return list(groups.values())


def _solve_by_endpoint(
    plan: PlanModel,
    groups: list[list[str]],
    clock: Clock,
    workers: int,
    seed: int,
    parameters,
) -> SolveResult | None:
    """One search per group of alike endpoints (`_endpoint_groups`), its plan copied to each: with nothing that
    ties endpoints together the whole model's optimum is the sum of theirs, and alike endpoints share it (200
    copies of one endpoint were one model of 200 times the options, UNKNOWN after 5 s; now one search). None
    when the plan put together overruns an offer's node cap: the whole model decides then."""
    options, traffic = plan.endpoints
    options = options.reset_index(drop=True)
    where = options.groupby(
        "workload", sort=False
    ).indices  # each endpoint's rows, in the table's order
    parts, proven, deterministic, objective, bound = [], True, 0.0, 0.0, 0.0
    for names in groups:
        rows = where[names[0]]
        part = build_model(
            plan.candidates,
            plan.limits,
            serving=(options.iloc[rows], {names[0]: traffic[names[0]]}),
        )
        found = _solve_with_endpoints(
            part, Clock(clock.left()), workers, seed, None, parameters
        )
        deterministic += found.deterministic_seconds
        if not found.solved:  # one endpoint that cannot be planned alone cannot be planned with the others
            return SolveResult(
                found.status,
                chosen=plan.candidates.iloc[0:0],
                solve_seconds=clock.used(),
                deterministic_seconds=deterministic,
                workers=found.workers,
                seed=seed,
            )
        proven &= found.status == "OPTIMAL"
        objective += found.objective_usd * len(names)
        bound += found.bound_usd * len(names)
        for name in (
            names
        ):  # alike endpoints list their options in one order (by offer, TP and market)
            theirs = where[name][found.serving["option"].to_numpy(int)]
            parts.append(
                found.serving.assign(
                    workload=name, option=theirs, oid=options["oid"].to_numpy()[theirs]
                )
            )
    serving = pd.concat(parts, ignore_index=True)
    if _over_node_caps(options, plan.limits, serving):
        return None
    return SolveResult(
        "OPTIMAL" if proven else "FEASIBLE",
        objective,
        objective if proven else min(bound, objective),
        proved_by="cp-sat" if proven else "",
        chosen=plan.candidates.iloc[0:0],
        serving=serving,
        solve_seconds=clock.used(),
        deterministic_seconds=deterministic,
        workers=workers if workers > 0 else 2,
        seed=seed,
    )


def _over_node_caps(
    options: pd.DataFrame, limits: Limits, serving: pd.DataFrame
) -> bool:
    """Whether endpoints' nodes, period by period, overrun an offer's catalog cap (per market where the scenario
    counts them so): the one limit `_endpoint_groups` leaves between endpoints, as `add_node_limits` writes it."""
    if serving.empty:
        return False
    options = options.iloc[serving["option"].to_numpy(int)]
    used = serving.assign(
        offer_key=options["offer_key"].to_numpy(),
        market=options["market"].to_numpy(),
        cap=[node_cap(None, c) for c in options["max_nodes"]],
    )
    used = used[used["cap"].notna()]
    keys = (
        ["offer_key", "market", "period"]
        if limits.node_limits_per_market
        else ["offer_key", "period"]
    )
    totals = used.groupby(keys, sort=False).agg(
        nodes=("nodes", "sum"), cap=("cap", "first")
    )
    return bool((totals["nodes"] > totals["cap"]).any())


def _one_provider_split(plan: PlanModel) -> list[str]:
    """The providers of an endpoint alone in its model that may run on one of them (`max_providers` 1): its
    optimum is the cheapest of its optima on each provider alone, every limit included (a quota, node limit or
    budget then binds one provider's options only). [] where the model holds jobs or other endpoints too."""
    options, traffic = plan.endpoints
    if (
        len(plan.candidates)
        or len(traffic) != 1
        or next(iter(traffic.values())).max_providers != 1
    ):
        return []
    providers = sorted(set(options["provider"]))
    return providers if len(providers) > 1 else []


def _solve_by_provider(
    plan: PlanModel,
    providers: list[str],
    clock: Clock,
    workers: int,
    seed: int,
    parameters,
) -> SolveResult:
    """One search per provider, each a model a tenth the size of the whole (an 8B endpoint over twelve catalogs:
    344 options, 14.5 s to proof on one worker as one model, 2.0 s as twelve); the cheapest plan wins, the first
    provider by name among equals. Optimal when every search is; else its bound is the least of theirs."""
    options, traffic = plan.endpoints
    options = options.reset_index(
        drop=True
    )  # as `ServingVars.options`: the chosen rows' `option` counts in it
    best, bound, proven, deterministic = None, math.inf, True, 0.0
    for provider in providers:
        mine = np.flatnonzero((options["provider"] == provider).to_numpy())
        part = build_model(
            plan.candidates, plan.limits, serving=(options.iloc[mine], traffic)
        )
        found = _solve_with_endpoints(
            part, Clock(clock.left()), workers, seed, None, parameters
        )
        deterministic += found.deterministic_seconds
        if found.status == "INFEASIBLE":
            continue
        proven &= found.status == "OPTIMAL"
        bound = min(bound, found.bound_usd if found.solved else 0.0)
        if found.solved and (
            best is None or round(found.objective_usd, 2) < round(best.objective_usd, 2)
        ):
            best = dataclasses.replace(
                found,
                serving=found.serving.assign(
                    option=mine[found.serving["option"].to_numpy(dtype=int)]
                ),
            )
    common = dict(
        solve_seconds=clock.used(),
        deterministic_seconds=deterministic,
        workers=workers if workers > 0 else 2,
        seed=seed,
    )
    if best is None:
        return SolveResult(
            "INFEASIBLE" if proven else "UNKNOWN",
            chosen=plan.candidates.iloc[0:0],
            **common,
        )
    status = "OPTIMAL" if proven else "FEASIBLE"
    return dataclasses.replace(
        best,
        status=status,
        bound_usd=best.objective_usd if proven else min(bound, best.objective_usd),
        proved_by="cp-sat" if proven else "",
        **common,
    )


def _endpoint_tie_break(
    plan: PlanModel,
    found: _Search,
    time_limit_s: float,
    workers: int,
    seed: int,
    parameters,
) -> _Search:
    """Among plans of the optimal cost `found` has, the one the tie-break prefers (the second stage, for
    models whose cost and tie-break together would leave 64-bit integers), searched from `found`; `found`
    itself when the time is up first. The cost stays optimal either way."""
    model = plan.model.clone()
    cost = model.proto.objective
    model.add(
        sum(
            c * model.get_int_var_from_proto_index(v)
            for v, c in zip(cost.vars, cost.coeffs)
        )
        <= round(found.objective - cost.offset)
    ).with_name("cost_is_optimal")
    model.minimize(sum(r * var for r, var in plan.later_ties))
    again = _search(
        model,
        plan.pick,
        list(found.values),
        max(0.1, time_limit_s),
        workers,
        seed,
        stop_at=None,
        parameters=parameters,
        serving=plan.serving,
        serving_hint=found.serving,
    )
    if again.values is None:
        return found
    return dataclasses.replace(
        again,
        status="OPTIMAL",
        objective=found.objective,
        bound=found.bound,
        deterministic=found.deterministic + again.deterministic,
    )


def _finish(
    plan: PlanModel,
    cents: np.ndarray,
    picked: np.ndarray,
    best_cents: int,
    cents_proven: bool,
    proved_by: str,
    relaxed: LpBound | None,
    clock: Clock,
    workers: int,
    seed: int,
    deterministic: float,
    used_workers: int,
    cp_floor: int = 0,
    status: str = "FEASIBLE",
) -> SolveResult:
    """The tie-break stage when the cost is proven but not by CP-SAT itself, then the result in dollars."""
    if cents_proven and status != "OPTIMAL":  # the tie-break among plans of that cost
        if (
            relaxed is not None
        ):  # a plan of that cost holds only candidates the LP prices within it
            keep = relaxed.can_beat(float(best_cents))
            plan, cents, picked = _narrowed(plan, keep), cents[keep], picked[keep]
        picked, _, seconds = _tie_break(
            plan, cents, best_cents, picked, clock.left(), workers, seed
        )
        deterministic += seconds
    chosen = (
        plan.candidates[picked]
        .sort_values("workload", kind="stable")
        .reset_index(drop=True)
    )
    objective = float(chosen["cost_usd"].sum())
    cents_floor = relaxed.least_whole if relaxed else None
    bound_cents = (
        best_cents
        if cents_proven
        else max(cp_floor, cents_floor if cents_floor is not None else cp_floor)
    )
    bound = (
        objective if cents_proven else min(objective, bound_cents * COST_RESOLUTION_USD)
    )
    return SolveResult(
        "OPTIMAL" if cents_proven else status,
        objective,
        bound,
        clock.used(),
        deterministic,
        used_workers or (workers if workers > 0 else 2),
        seed,
        proved_by,
        relaxed.seconds if relaxed else 0.0,
        chosen=chosen,
    )


MIP_LOOK_S = 10.0
"""HiGHS's branch and bound gets this long to prove the optimum in cents before CP-SAT searches."""
FIRST_LOOK_S = 2.0
"""With an LP bound, CP-SAT first searches this long for a plan; if none meets the bound, the candidates
the LP's reduced costs rule out against that plan are dropped and the rest is searched to proof."""


@dataclass
class _Search:
    status: str
    values: np.ndarray | None  # chosen mask
    objective: float
    bound: float
    deterministic: float
    workers: int
    serving: pd.DataFrame | None = None  # the endpoints' chosen nodes and routing


class _StopAt(cp_model.CpSolverSolutionCallback):
    """Stops the search when a solution's objective reaches `target` (the LP bound): it is then proven."""

    def __init__(self, target: int | None):
        super().__init__()
        self.target = target

    def on_solution_callback(self) -> None:
        if self.target is not None and self.objective_value <= self.target + 0.5:
            self.stop_search()


def _search(
    model: cp_model.CpModel,
    pick: list,
    start: list | None,
    time_limit_s: float,
    workers: int,
    seed: int,
    stop_at: int | None,
    parameters: dict | None = None,
    serving: ServingVars | None = None,
    serving_hint: pd.DataFrame | None = None,
) -> _Search:
    solver = cp_model.CpSolver()
    for name, value in (parameters or {}).items():
        setattr(solver.parameters, name, value)
    solver.parameters.max_time_in_seconds = max(0.1, time_limit_s)
    solver.parameters.num_workers = workers if workers > 0 else 2
    solver.parameters.random_seed = seed
    model.clear_hints()
    if start:
        for var, chosen in zip(pick, start):
            model.add_hint(var, chosen)
    if serving_hint is not None:
        serving.add_hints(model, serving_hint)
    code = cpsat.run(solver, model, _StopAt(stop_at))
    status = solver.status_name(code)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Search(
            status,
            None,
            math.nan,
            math.nan,
            solver.deterministic_time,
            int(solver.parameters.num_workers),
        )
    values = np.array([solver.boolean_value(v) for v in pick], dtype=bool)
    return _Search(
        status,
        values,
        solver.objective_value,
        solver.best_objective_bound,
        solver.deterministic_time,
        int(solver.parameters.num_workers),
        serving.chosen(solver.value) if serving is not None else None,
    )


def _narrowed(plan: PlanModel, keep: np.ndarray) -> PlanModel:
    """The plan over the candidates `keep` marks, with their tie-break ranks; its CP-SAT model waits for a search."""
    if keep.all():
        return plan
    return build_model(
        plan.candidates[keep], plan.limits, ranks=plan.ranks[keep], constrain=False
    )


def _rounded(cands: pd.DataFrame, x: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The LP's solution rounded: each workload's candidate with the largest x (ties: the better rank)."""
    frame = pd.DataFrame(
        {"workload": cands["workload"].to_numpy(), "x": -x, "rank": ranks}
    )
    best = (
        frame.sort_values(["workload", "x", "rank"], kind="stable")
        .groupby("workload", sort=False)
        .head(1)
        .index
    )
    mask = np.zeros(len(cands), dtype=bool)
    mask[best] = True
    return mask


def _tie_break(
    plan: PlanModel,
    cents: np.ndarray,
    best_cents: int,
    picked: np.ndarray,
    time_limit_s: float,
    workers: int,
    seed: int,
) -> tuple[np.ndarray, bool, float]:
    """Among plans costing `best_cents`, the one the tie-break prefers: minimise Σ rank, proven by the LP."""
    ceiling = LinearRow("cost_is_optimal", np.arange(len(cents)), cents, best_cents)
    exact = mip_optimum(
        plan.candidates,
        plan.limits,
        plan.ranks.astype(float),
        min(MIP_LOOK_S, time_limit_s),
        extra=[ceiling],
    )
    if exact is not None:
        return exact, True, 0.0
    model = plan.constrained().model.clone()
    pick = [model.get_bool_var_from_proto_index(v.index) for v in plan.pick]
    model.add(sum(int(c) * p for c, p in zip(cents, pick)) <= best_cents).with_name(
        "cost_is_optimal"
    )
    model.minimize(sum(int(r) * p for r, p in zip(plan.ranks, pick)))
    relaxed = lp_bound(
        plan.candidates, plan.limits, plan.ranks.astype(float), extra=[ceiling]
    )
    floor = relaxed.least_whole if relaxed else None
    result = _search(
        model, pick, list(picked), time_limit_s, workers, seed, stop_at=floor
    )
    if result.values is None:
        return picked, False, result.deterministic
    proven = result.status == "OPTIMAL" or (
        floor is not None and result.objective <= floor + 0.5
    )
    return result.values, proven, result.deterministic
