"""Running CP-SAT so that Ctrl-C keeps meaning "stop, status 130".

CP-SAT catches SIGINT itself by default and, when a solve ends, leaves the operating system's
default handler behind: a later Ctrl-C then killed the command with no message. Here the solver
never touches the handler, and the search runs off the main thread (`interruptible.call`), so the
command's own handler answers at once and stops the search on its way out.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from planner.solve import interruptible


def run(
    solver: cp_model.CpSolver,
    model: cp_model.CpModel,
    callback: cp_model.CpSolverSolutionCallback | None = None,
) -> int:
    """`solver.solve(model, callback)`, interruptible from the main thread; returns the status code."""
    solver.parameters.catch_sigint_signal = False
    return interruptible.call(lambda: solver.solve(model, callback), solver.stop_search)
