"""What a search ends with, for either CP-SAT model: status, objective and bound in dollars, the gap,
and the effort (wall and deterministic time, workers, seed, the time spent building candidates).

Plain data (no OR-Tools), so the reports and the greedy fallback can use it without the solver.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import pandas as pd

SOLVED = ("OPTIMAL", "FEASIBLE")
"""CP-SAT statuses that come with a plan."""


@dataclass(frozen=True)
class Clock:
    """One search's time limit, read in one place: the seconds used since it started and those left (a phase
    that gets what is left starts its own `Clock(clock.left())`)."""

    limit_s: float
    started: float = field(default_factory=time.perf_counter)

    def used(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float:
        return self.limit_s - self.used()


def cut_by_clock(
    status: str, deterministic_seconds: float, work_limit: float | None
) -> bool:
    """Whether a CP-SAT search ended on the clock: neither proven nor at its work limit (CP-SAT reports at least
    the limit when that stopped it), so what it found depends on the machine's speed and load."""
    return status not in ("OPTIMAL", "INFEASIBLE") and (
        work_limit is None or deterministic_seconds < work_limit
    )


@dataclass
class SolveReport:
    status: str
    objective_usd: float = math.nan
    bound_usd: float = math.nan
    solve_seconds: float = 0.0
    deterministic_seconds: float = 0.0
    workers: int = 1
    seed: int = 0
    proved_by: str = ""  # "cp-sat" | "lp" (the HiGHS relaxation) | "mip" (HiGHS's branch and bound) | ""
    lp_seconds: float = 0.0
    # building candidates, before the model (set by the pipelines)
    candidates_seconds: float = 0.0
    # when a bound was left out rather than not reached in time: why
    no_bound_why: str = ""
    # rows priced exactly, and rows left unpriced as in no cheaper plan (`solve/lazy.py`; set by the pipelines)
    priced: int = 0
    unpriced: int = 0
    clocked: bool = False  # unproven, and the clock cut a search short of its work limit: the plan then depends on
    # the machine's speed and load (`planner batch` sets it; its phases otherwise stop on deterministic work)

    @property
    def solved(self) -> bool:
        return self.status in SOLVED

    @property
    def gap(self) -> float:
        """Relative distance to the bound: 0 without a positive objective, NaN without a bound."""
        if not self.objective_usd > 0:
            return 0.0
        if self.bound_usd != self.bound_usd:
            return math.nan
        return max(0.0, (self.objective_usd - self.bound_usd) / self.objective_usd)


@dataclass
class SolveResult(SolveReport):
    """`planner solve`: the picked candidate rows (empty unless solved), and the endpoints' nodes per option
    and period (`ServingVars.chosen`; empty without endpoints)."""

    chosen: pd.DataFrame = field(default_factory=pd.DataFrame)
    serving: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class BatchResult(SolveReport):
    """`planner batch`: the chosen candidate rows with `start_step`, nodes bought per pool, runs left out,
    and the endpoints' nodes per option and period (`ServingVars.chosen`; empty without endpoints)."""

    chosen: pd.DataFrame = field(default_factory=pd.DataFrame)
    bought: list[int] = field(default_factory=list)
    unscheduled: list[str] = field(default_factory=list)
    serving: pd.DataFrame = field(default_factory=pd.DataFrame)


def solve_report_json(r: SolveReport | None) -> dict:
    """The `solve_report` block of the JSON contracts (left out with `--no-timings`)."""
    r = r or SolveReport("", workers=0)  # no search ran (no candidates): zeros
    return {
        "solve_seconds": round(r.solve_seconds, 3),
        "deterministic_seconds": round(r.deterministic_seconds, 3),
        "workers": r.workers,
        "seed": r.seed,
        "proved_by": r.proved_by,
        "lp_seconds": round(r.lp_seconds, 3),
        "candidates_seconds": round(r.candidates_seconds, 3),
        "candidates_priced": r.priced,
        "candidates_unpriced": r.unpriced,
    }
