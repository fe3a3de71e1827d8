"""The tie-break after `planner batch`'s search: the best schedule's runs each started as soon as its cost allows."""

from __future__ import annotations

import dataclasses
import time

import pandas as pd

from planner.batch.model import (
    BatchLimits,
    Pool,
    QuarterEndpoints,
    RunInfo,
    build_batch_model,
    solve_batch,
    total_cost_cents,
)
from planner.candidates.limits import COST_RESOLUTION_USD
from planner.solve.model import OBJECTIVE_LIMIT
from planner.solve.outcome import BatchResult


def soonest(
    best: BatchResult,
    hint: dict,
    cands: pd.DataFrame,
    runs: list[RunInfo],
    pools: list[Pool],
    limits: BatchLimits,
    steps: int,
    endpoints: QuarterEndpoints | None,
    workers: int,
    seed: int,
    work_limit: float,
    until: float,
) -> tuple[BatchResult, float]:
    """`best`'s runs on `best`'s candidates at no more cost, each starting as soon as it can (the least sum of
    start steps), searched from `hint` (`best` as a hint). The search stops at one of the schedules of equal cost, which differ only in when runs start;
    the sooner a run starts the more room it keeps before its due date (a replay starts no run before its slot),
    so ties go to that. A small model: each run has its one candidate, and the cost weighs more than every start.
    Its work is `work_limit` (CP-SAT's deterministic seconds), and it must end by `until` (`time.perf_counter()`); cut by the
    clock first, it is dropped, so the plan depends on timing no more than the search did. Returns the schedule
    and CP-SAT's deterministic work spent on it."""
    chosen = set(best.chosen["run"])
    kept = [r for r in runs if r.name in chosen]
    m = build_batch_model(
        cands[cands["cid"].isin(set(best.chosen["cid"]))],
        kept,
        pools,
        limits,
        steps,
        endpoints,
    )
    # one cent outweighs every start step together
    weight = max(1, steps) * len(kept) + 1
    if (
        weight * m.priority_weight >= OBJECTIVE_LIMIT
    ):  # what the cost can reach, with the endpoints at their most
        return best, 0.0
    for run in kept:
        m.model.add(m.scheduled[run.name] == 1)
    m.model.minimize(weight * total_cost_cents(m) + sum(m.start[r.name] for r in kept))
    left = until - time.perf_counter()
    if left < 0.1:
        return best, 0.0
    found = solve_batch(
        m,
        left,
        workers,
        seed,
        hint,
        work_limit=work_limit,
    )
    if (
        not found.solved
        or found.clocked
        or found.objective_usd > best.objective_usd + COST_RESOLUTION_USD / 2
        or set(found.chosen["run"]) != chosen
    ):
        return (
            best,
            found.deterministic_seconds,
        )  # cut by the clock it would make the plan depend on timing
    return dataclasses.replace(
        best,
        chosen=found.chosen,
        bought=found.bought,
        serving=found.serving,
        objective_usd=found.objective_usd,
    ), found.deterministic_seconds
