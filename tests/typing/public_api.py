"""The public API as docs/python.md uses it, checked by mypy in CI (`.ci/run`): a typed caller's code must
type-check against what `import planner` promises (`planner/__init__.pyi`, `py.typed`). Not collected by pytest."""

from __future__ import annotations

import pandas as pd

import planner

plan: planner.SolvedPlan = planner.solve(
    "scenarios/lora-finetune.yaml", time_limit_s=10, timings=False
)
lean: planner.SolvedPlan = planner.solve("scenarios/lora-finetune.yaml", alternatives=0)
cost: float | None = plan.objective_usd
table: pd.DataFrame = plan.to_frame()
text: str = plan.to_json()
first: planner.Assignment = plan.assignments[0]
hours: float = first.wall_h + sum(first.breakdown_usd.values())
endpoints: tuple[planner.EndpointPlan, ...] = plan.endpoints
schedule: planner.Schedule = planner.batch({"name": "q"}, schedule_confidence=0.9)
runs: tuple[planner.ScheduledRun, ...] = schedule.runs
simulated: planner.Simulation = planner.simulate(
    "scenarios/lora-finetune.yaml", plan, trials=500, seed=1
)
mean_cost: float = simulated.jobs[0].cost_usd.mean
estimates: planner.Estimates = planner.estimate(
    "scenarios/lora-finetune.yaml", gpus=("H100",)
)
try:
    planner.solve("name: x\n")
except planner.PlannerError as exc:
    where: str | None = exc.where
