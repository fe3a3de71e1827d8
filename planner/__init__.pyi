from pathlib import Path

from planner.api import Assignment as Assignment
from planner.api import EndpointPlan as EndpointPlan
from planner.api import Estimates as Estimates
from planner.api import Schedule as Schedule
from planner.api import ScheduledRun as ScheduledRun
from planner.api import Simulation as Simulation
from planner.api import SolvedPlan as SolvedPlan
from planner.api import Source as Source
from planner.api import estimate as estimate
from planner.api import simulate as simulate
from planner.errors import PlannerError as PlannerError

def solve(
    scenario: Source,
    *,
    time_limit_s: float = 60.0,
    workers: int = 2,
    seed: int = 0,
    timings: bool = True,
    base_dir: str | Path | None = None,
    alternatives: int = 3,
) -> SolvedPlan: ...
def batch(
    quarter: Source,
    *,
    time_limit_s: float = 60.0,
    workers: int = 1,
    seed: int = 0,
    schedule_confidence: float | None = None,
    timings: bool = True,
    base_dir: str | Path | None = None,
) -> Schedule: ...

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
