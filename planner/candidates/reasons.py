"""Why a workload has no candidate: the sentences a plan gives when no offered shape fits, none is fast
enough, or every row priced misses the deadline, takes more risk than allowed, fails its replays on measured
availability or practically never finishes.
"""

from __future__ import annotations

import collections

import pandas as pd

from planner.candidates.limits import MAX_CANDIDATE_USD
from planner.candidates.screen import reach
from planner.economics.estimate_error import EstimateError
from planner.physics.hardware_shape import Estimate
from planner.schema.workload import Workload


def physics_reason(workload: Workload, estimates: list[Estimate], budget: float) -> str:
    fitting = [e for e in estimates if e.fits]
    if not fitting:
        precision = [e for e in estimates if e.ruled_out_by == "precision"]
        if precision and len(precision) == len(estimates):
            return precision[0].reason
        short = [e for e in estimates if e.ruled_out_by == "vram"]
        if (
            not short
        ):  # no shape ran out of memory: what ruled them out, the most common first
            reasons = collections.Counter(e.reason for e in estimates).most_common()
            more = (
                f" (and {len(reasons) - 1} other reasons on other shapes)"
                if len(reasons) > 1
                else ""
            )
            return f"no offered shape can run it: {reasons[0][0]}{more}"
        best = min(short, key=lambda e: e.memory.total * 1.0 - e.shape.vram_gib)
        largest = max(e.shape.vram_gib for e in estimates)
        return (
            f"no GPU has enough VRAM: even {best.shape.gpus} x {best.shape.gpu} {best.reason}"
            f" (largest GPU offered: {largest:.0f} GiB)"
        )
    return sorted({e.reason for e in estimates if e.reason})[0]


def too_slow_reason(
    workload: Workload,
    rows: pd.DataFrame,
    budget: float,
    q: float,
    error: EstimateError,
) -> str:
    fastest = rows.loc[rows["t0"].idxmin()]
    head = (
        f"every fitting candidate misses the time budget: the fastest, {int(fastest['nodes'])} x "
        f"{fastest['key']}, needs {fastest['t0']:.1f} h without any failure"
    )
    if fastest["t0"] > budget:
        return f"{head} against a budget of {budget:.1f} h (short by {fastest['t0'] - budget:.1f} h)"
    return (
        f"{head}, and real runs take up to {error.factor(q):.2f}x the estimate at confidence {q:.0%} "
        f"(estimate_error, docs/cost-model.md §12), so it can promise {budget:.1f} h only if it needs at most "
        f"{reach(budget, q, error):.1f} h"
    )


def deadline_reason(workload: Workload, missed, q: float) -> str:
    row, unit = max(missed, key=lambda m: (m[1].p_deadline, -m[1].wall_h))
    return (
        f"every fitting candidate misses the time budget at confidence {q:.0%}: the best, "
        f"{int(row.nodes)} x {row.key} ({row.market}), meets {workload.time_budget:.1f} h with probability "
        f"{unit.p_deadline:.1%} (expected {unit.wall_h:.1f} h)"
    )


def priced_reason(
    workload: Workload, q: float, missed: list, runaway: list, unheld: list, risky: list
) -> str:
    """Why no row priced is a candidate: each risked too much (`risky`: (row, why)), failed its replays on measured
    availability (`unheld`: (row, why)) or cost more than a run can (`runaway`: rows), the cheapest said, where no
    row missed the deadline; else the deadline (`missed`: (row, its cost-model result))."""
    if risky and not missed:
        row, why = risky[0]
        return (
            f"every candidate takes more risk than the workload's risk: allows: the cheapest, {int(row.nodes)} x "
            f"{row.key} ({row.market}), {why}"
        )
    if unheld and not missed:
        row, why = unheld[0]
        return (
            f"no candidate keeps its promise on measured spot availability: the cheapest, "
            f"{int(row.nodes)} x {row.key} ({row.market}), {why}"
        )
    if runaway and not missed:
        return (
            f"every candidate's expected cost is above ${MAX_CANDIDATE_USD:,.0f}: failures restart "
            f"the work so often that it practically never finishes (checkpoint it, or give it fewer "
            f"GPUs or hours)"
        )
    return deadline_reason(workload, missed, q)
