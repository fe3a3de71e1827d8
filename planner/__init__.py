"""GPU rental planner: cheapest cloud GPU plans for AI workloads.

From Python (docs/python.md):

    import planner
    plan = planner.solve("scenarios/lora-finetune.yaml")   # a path, YAML text or a dict
    print(plan.objective_usd, plan.to_frame())
"""

import planner.batch
import planner.solve
from planner.api import (
    Assignment,
    EndpointPlan,
    Estimates,
    Schedule,
    ScheduledRun,
    Simulation,
    SolvedPlan,
    callable_package,
    estimate,
    simulate,
)
from planner.errors import PlannerError

# `planner.solve(...)`, and still the package `planner.solve`
callable_package(planner.solve, planner.api.solve)
callable_package(planner.batch, planner.api.batch)

__all__ = [
    "Assignment",
    "EndpointPlan",
    "Estimates",
    "PlannerError",
    "Schedule",
    "ScheduledRun",
    "Simulation",
    "SolvedPlan",
    "batch",
    "estimate",
    "simulate",
    "solve",
]
