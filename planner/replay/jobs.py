"""Each job of a plan Monte-Carlo'd (failures, lost work, restarts, billing sessions) and set beside the cost
model's analytic figures: the check `planner simulate` exists for."""

from __future__ import annotations

from dataclasses import dataclass

from planner.economics import fallback
from planner.economics.costmodel import expected
from planner.economics.inputs import inputs_from_assignment
from planner.economics.simulate import replay_problem, simulate, simulate_fallback
from planner.schema.plan import AssignmentRecord


@dataclass(frozen=True)
class Compared:
    """One quantity's simulated distribution beside the cost model's expectation."""

    mean: float
    p50: float
    p90: float
    p99: float
    stderr: float
    analytic: float
    relative_difference: float  # (simulated mean - analytic) / analytic


@dataclass(frozen=True)
class DeadlineCompared:
    simulated: float
    analytic: float
    difference_pp: float  # percentage points


@dataclass(frozen=True)
class JobReplay:
    """A job's Monte-Carlo (`trials` of them) against the plan's analytic figures."""

    workload: str
    trials: int
    wall_h: Compared
    cost_usd: Compared
    billed_node_h: Compared
    p_deadline: DeadlineCompared


def unreplayable(jobs: list[AssignmentRecord]) -> tuple[int, str, str] | None:
    """The first job of a plan the Monte-Carlo cannot replay in reasonable time (`economics/simulate.py`
    `replay_problem`), as (its index, the key at fault under it, why); None when every one can be."""
    for number, a in enumerate(jobs):
        if found := replay_problem(inputs_from_assignment(a), a.market):
            field, why = found
            return number, f"inputs.{field}" if field else "inputs", why
    return None


def replay_jobs(
    jobs: list[AssignmentRecord], trials: int, seed: int, progress=None
) -> list[JobReplay]:
    """Monte-Carlo each job and set the analytic figures beside the simulated ones."""
    out = []
    for number, a in enumerate(jobs):
        inputs = inputs_from_assignment(a)
        step = (lambda f, n=number: progress((n + f) / len(jobs))) if progress else None
        if (
            a.market == "spot_fallback"
        ):  # the policy as cost-model §10 prices it and as it would act
            on_demand = a.inputs.fallback_price_per_node_h
            analytic = fallback.expected(inputs, on_demand)
            sim = simulate_fallback(
                inputs, on_demand, trials=trials, seed=seed + number
            )
            if step:
                step(1.0)
        else:
            analytic = expected(inputs)
            sim = simulate(inputs, trials=trials, seed=seed + number, progress=step)
        out.append(
            JobReplay(
                a.workload,
                trials,
                _compared(sim, "wall_h", analytic.wall_h),
                _compared(sim, "cost_usd", analytic.cost_usd),
                _compared(sim, "billed_node_h", analytic.billed_node_h),
                DeadlineCompared(
                    sim.p_deadline,
                    analytic.p_deadline,
                    100 * (sim.p_deadline - analytic.p_deadline),
                ),
            )
        )
    return out


def _compared(sim, name: str, analytic: float) -> Compared:
    mean = sim.mean(name)
    return Compared(
        mean,
        sim.p50(name),
        sim.p90(name),
        sim.p99(name),
        sim.stderr(name),
        analytic,
        (mean - analytic) / analytic if analytic else 0.0,
    )
