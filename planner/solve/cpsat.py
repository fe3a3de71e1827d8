"""Running CP-SAT so that Ctrl-C keeps meaning "stop, status 130".

CP-SAT catches SIGINT itself by default and, when a solve ends, leaves the operating system's
default handler behind: a later Ctrl-C then killed the command with no message. Here the solver
never touches the handler, and the search runs off the main thread, so the command's own handler
answers at once and stops the search on its way out.
"""
from __future__ import annotations

import threading

from ortools.sat.python import cp_model


def run(solver: cp_model.CpSolver, model: cp_model.CpModel,
        callback: cp_model.CpSolverSolutionCallback | None = None) -> int:
    """`solver.solve(model, callback)`, interruptible from the main thread; returns the status code."""
    solver.parameters.catch_sigint_signal = False
    if threading.current_thread() is not threading.main_thread():
        return solver.solve(model, callback)
    outcome: dict = {}
    finished = threading.Event()  # not Thread.join: an interrupted join can mark a running thread as stopped

    def search() -> None:
        try:
            outcome["code"] = solver.solve(model, callback)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=search, name="cp-sat", daemon=True).start()
    try:
        while not finished.wait(0.05):
            pass
    except BaseException:  # an interrupt: stop the search and let it wind down before passing it on
        solver.stop_search()
        while not finished.wait(0.1):  # again, in case the search had not begun when the first stop came
            solver.stop_search()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["code"]
