"""One CP-SAT search of a plan's model: its time limit, workers and seed, its hints, a stop at the LP
bound, and what it found (`Search`).

Both strategies run their searches through it, the jobs' (`search.py`) and the endpoints'
(`endpoint_search.py`); it sits below both because `search.py` hands models with endpoints to the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from planner.solve import cpsat
from planner.solve.serving import ServingVars


@dataclass
class Search:
    status: str
    values: np.ndarray | None  # chosen mask
    objective: float
    bound: float
    deterministic: float
    workers: int
    serving: pd.DataFrame | None = None  # the endpoints' chosen nodes and routing


class _StopAt(cp_model.CpSolverSolutionCallback):
    """Stops the search when a solution's objective reaches `target` (the LP bound): it is then proven."""

    def __init__(self, target: int | None):
        super().__init__()
        self.target = target

    def on_solution_callback(self) -> None:
        if self.target is not None and self.objective_value <= self.target + 0.5:
            self.stop_search()


def search(
    model: cp_model.CpModel,
    pick: list,
    start: list | None,
    time_limit_s: float,
    workers: int,
    seed: int,
    stop_at: int | None,
    parameters: dict | None = None,
    serving: ServingVars | None = None,
    serving_hint: pd.DataFrame | None = None,
) -> Search:
    solver = cp_model.CpSolver()
    for name, value in (parameters or {}).items():
        setattr(solver.parameters, name, value)
    solver.parameters.max_time_in_seconds = max(0.1, time_limit_s)
    solver.parameters.num_workers = workers if workers > 0 else 2
    solver.parameters.random_seed = seed
    model.clear_hints()
    if start:
        for var, chosen in zip(pick, start):
            model.add_hint(var, chosen)
    if serving_hint is not None:
        serving.add_hints(model, serving_hint)
    code = cpsat.run(solver, model, _StopAt(stop_at))
    status = solver.status_name(code)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Search(
            status,
            None,
            math.nan,
            math.nan,
            solver.deterministic_time,
            int(solver.parameters.num_workers),
        )
    values = np.array([solver.boolean_value(v) for v in pick], dtype=bool)
    return Search(
        status,
        values,
        solver.objective_value,
        solver.best_objective_bound,
        solver.deterministic_time,
        int(solver.parameters.num_workers),
        serving.chosen(solver.value) if serving is not None else None,
    )
