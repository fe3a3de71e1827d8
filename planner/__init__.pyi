from pathlib import Path

from planner.api import (Assignment as Assignment, EndpointPlan as EndpointPlan, Estimates as Estimates,
                         Schedule as Schedule, ScheduledRun as ScheduledRun, Simulation as Simulation,
                         SolvedPlan as SolvedPlan, Source as Source, estimate as estimate, simulate as simulate)
from planner.errors import PlannerError as PlannerError

def solve(scenario: Source, *, time_limit_s: float = 60.0, workers: int = 2, seed: int = 0, timings: bool = True,
          base_dir: str | Path | None = None) -> SolvedPlan: ...
def batch(quarter: Source, *, time_limit_s: float = 60.0, workers: int = 1, seed: int = 0,
          schedule_confidence: float | None = None, timings: bool = True,
          base_dir: str | Path | None = None) -> Schedule: ...

__all__ = ["Assignment", "EndpointPlan", "Estimates", "PlannerError", "Schedule", "ScheduledRun", "Simulation",
           "SolvedPlan", "batch", "estimate", "simulate", "solve"]
