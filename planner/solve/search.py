"""How `planner solve` searches its model: `solve_model`, and the stages that prove a plan of jobs.

The LP relaxation first (its rounded solution may be a plan), HiGHS's branch and bound, CP-SAT's first look
and reduced-cost fixing, then the tie-break among plans of the optimal cost. A model with endpoints goes to
`endpoint_search.py`; the model itself is built in `model.py`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from planner.candidates.limits import COST_RESOLUTION_USD
from planner.solve.bound import LpBound, lp_bound, mip_optimum
from planner.solve.cpsat_search import search
from planner.solve.endpoint_search import solve_with_endpoints
from planner.solve.model import PlanModel, build_model
from planner.solve.outcome import Clock, SolveResult
from planner.solve.rows import LinearRow, admits


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
        return solve_with_endpoints(plan, clock, workers, seed, hint, parameters)
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
    first = search(
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
        again = search(
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
        again = search(
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
    result = search(
        model, pick, list(picked), time_limit_s, workers, seed, stop_at=floor
    )
    if result.values is None:
        return picked, False, result.deterministic
    proven = result.status == "OPTIMAL" or (
        floor is not None and result.objective <= floor + 0.5
    )
    return result.values, proven, result.deterministic
