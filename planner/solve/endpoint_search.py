"""The search of a model with endpoints: CP-SAT alone, to proof, on the whole model or split.

The LP relaxation and HiGHS's branch and bound know only the jobs' candidates, so `solve_model` (`search.py`)
hands such a model here. Alike endpoints that no limit ties together are searched once a group
(`_endpoint_groups`), an endpoint on one provider once per provider (`_one_provider_split`), and where the cost
and the tie-break together would leave 64-bit integers the tie-break follows the cost (`_endpoint_tie_break`).
"""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pandas as pd

from planner.candidates.limits import COST_RESOLUTION_USD, Limits, node_cap, to_cents
from planner.solve.cpsat_search import Search, search
from planner.solve.model import PlanModel, build_model
from planner.solve.outcome import Clock, SolveResult
from planner.solve.serving import floor_usd

FLOOR_SAFETY = 0.99
"""A provider is skipped only when 0.99 of its endpoints' floor (`serving.floor_usd`) is above the best plan so
far: the model's costs are whole cents per unit, the floor's are not."""


def solve_with_endpoints(
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
    found = search(
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
        found = solve_with_endpoints(
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
    provider by name among equals. Optimal when every search is; else its bound is the least of theirs.
    The providers with fewest options are searched first, and each later search only for plans as cheap as
    the best so far (`_no_dearer_than`): a provider that cannot match it is then proven so at once, where its
    own optimum took the longest searches (`serving-rag`: its twelve searches in a quarter of the time)."""
    options, traffic = plan.endpoints
    # as `ServingVars.options`: the chosen rows' `option` counts in it
    options = options.reset_index(drop=True)
    best, best_provider, bound, proven, deterministic = None, "", math.inf, True, 0.0
    counts = options["provider"].value_counts()
    for provider in sorted(providers, key=lambda p: (counts.get(p, 0), p)):
        mine = np.flatnonzero((options["provider"] == provider).to_numpy())
        if (
            best is not None
            and FLOOR_SAFETY * floor_usd(options.iloc[mine], traffic)
            > best.objective_usd + COST_RESOLUTION_USD
        ):
            continue  # dearer for sure than the best so far: its search would be INFEASIBLE
        part = build_model(
            plan.candidates, plan.limits, serving=(options.iloc[mine], traffic)
        )
        if best is not None:
            _no_dearer_than(part.constrained(), best.objective_usd)
        found = solve_with_endpoints(
            part, Clock(clock.left()), workers, seed, None, parameters
        )
        deterministic += found.deterministic_seconds
        if found.status == "INFEASIBLE":  # or dearer than the best so far
            continue
        proven &= found.status == "OPTIMAL"
        bound = min(bound, found.bound_usd if found.solved else 0.0)
        if found.solved and (
            best is None
            or (round(found.objective_usd, 2), provider)
            < (round(best.objective_usd, 2), best_provider)
        ):
            best, best_provider = (
                dataclasses.replace(
                    found,
                    serving=found.serving.assign(
                        option=mine[found.serving["option"].to_numpy(dtype=int)]
                    ),
                ),
                provider,
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


def _no_dearer_than(plan: PlanModel, usd: float) -> None:
    """Cuts from `plan`'s model plans that cost more than `usd` to the cent, and keeps every other, whatever its
    tie-break. The model holds each cost term in whole cents, c = round(100·x) per unit, so a plan's cents are at
    least Σ (c − ½)·v over its terms (every v ≥ 0): Σ (2c − 1)·v ≤ 2·cents holds for each plan that costs no
    more (a plan a little dearer may stay, by its terms' rounding)."""
    cents = to_cents(usd)
    terms = list(zip(plan.candidates["cost_cents"].astype(int), plan.pick))
    if plan.serving is not None:
        terms += plan.serving.unit_cents
    plan.model.add(sum((2 * int(c) - 1) * v for c, v in terms) <= 2 * cents).with_name(
        "no_dearer_than_the_best_provider"
    )


def _endpoint_tie_break(
    plan: PlanModel,
    found: Search,
    time_limit_s: float,
    workers: int,
    seed: int,
    parameters,
) -> Search:
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
    again = search(
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
