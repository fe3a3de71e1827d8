"""The one status line of both commands' reports (`solve` and `batch`)."""

from __future__ import annotations

from planner.solve.outcome import SolveReport

PROVERS = {"lp": "the LP bound", "mip": "HiGHS's branch and bound", "cp-sat": "CP-SAT"}
"""`solve_report.proved_by` in words."""


def status_line(r: SolveReport, candidates: str, prices_as_of: str | None) -> str:
    """`OPTIMAL: expected total $X, optimal (proven by ...); <candidates>; solved in ...`: what was found,
    how sure, and what it took (wall and deterministic time, workers, seed, building candidates)."""
    if r.status == "OPTIMAL":
        proof = f"optimal (proven by {PROVERS.get(r.proved_by, 'CP-SAT')})"
    elif r.gap == r.gap:
        proof = f"feasible, gap {r.gap:.2%} to the bound ${r.bound_usd:,.2f}"
    else:
        proof = "feasible, no bound " + (
            f"({r.no_bound_why})" if r.no_bound_why else "within the time limit"
        )
    if r.clocked:
        proof += " (the time limit cut the search before its set work: a faster or idler machine may find another)"
    return (
        f"{r.status}: expected total ${r.objective_usd:,.2f}, {proof}; {candidates}; solved in "
        f"{r.solve_seconds:.2f} s ({r.deterministic_seconds:.2f} deterministic) on {r.workers} "
        f"worker{'s' if r.workers != 1 else ''}, seed {r.seed}; candidates built in {r.candidates_seconds:.2f} s"
        + (f"; prices as of {prices_as_of}" if prices_as_of else "")
    )
