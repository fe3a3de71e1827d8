"""The LP relaxation of `planner solve`'s model, solved with HiGHS: a bound CP-SAT alone does not find.

With exactly one candidate per workload and a handful of coupling rows (quotas, node limits,
the budget), the relaxation has at most as many fractional workloads as coupling rows, so its
value sits within cents of the integer optimum, while CP-SAT's own bound can stay percent
below it. The rows come from `rows.py` (the same as the CP-SAT model's); same-region and
same-provider groups enter as their linear relaxation: one value y_v per group with Σ y_v = 1,
and each member's picks with value v at most y_v.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import highspy
import numpy as np
import pandas as pd
from highspy import cb

from planner.candidates.limits import Limits
from planner.solve import interruptible
from planner.solve.rows import LinearRow, coupling_groups, coupling_rows


@dataclass(frozen=True)
class LpBound:
    """The relaxation's optimum `value` (in the objective's units), a solution `x` per candidate, the
    `reduced` cost of each candidate (what picking it adds to the LP at least), time."""

    value: float
    x: np.ndarray
    seconds: float
    reduced: np.ndarray | None = None

    @property
    def least_whole(self) -> int:
        """The least whole value a plan can have (the objective is in whole cents or ranks)."""
        return math.ceil(self.value - 1e-6)

    def can_beat(self, upper: float) -> np.ndarray:
        """Candidates some plan of cost <= `upper` may use: a pick raises the LP value by its reduced
        cost, so one whose reduced cost exceeds upper - value is in no such plan (reduced-cost fixing)."""
        if self.reduced is None:
            return np.ones(len(self.x), dtype=bool)
        return self.reduced <= upper - self.value + 1e-6

    def narrowed(self, keep: np.ndarray) -> LpBound:
        """The same bound over the candidates `keep` marks (still a bound: a plan among them is a plan of all)."""
        return LpBound(
            self.value,
            self.x[keep],
            self.seconds,
            None if self.reduced is None else self.reduced[keep],
        )


@dataclass(frozen=True)
class _Sparse:
    """A sparse matrix as its entries (row, column, value), each (row, column) once, sorted by row then column
    (SciPy's canonical CSR order, so products sum each row as it did)."""

    row: np.ndarray
    col: np.ndarray
    val: np.ndarray
    rows: int

    @classmethod
    def of(cls, row, col, val, rows: int) -> _Sparse:
        row, col, val = (
            np.asarray(row, dtype=np.int64),
            np.asarray(col, dtype=np.int64),
            np.asarray(val, dtype=float),
        )
        order = np.lexsort((col, row))
        return cls(row[order], col[order], val[order], rows)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        return np.bincount(
            self.row, weights=self.val * x[self.col], minlength=self.rows
        )

    def below(self, other: _Sparse) -> _Sparse:
        """This matrix with `other`'s rows under it."""
        return _Sparse(
            np.concatenate([self.row, other.row + self.rows]),
            np.concatenate([self.col, other.col]),
            np.concatenate([self.val, other.val]),
            self.rows + other.rows,
        )

    def by_column(self, columns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, index, value) column by column, rows ascending in each: HiGHS's column-wise matrix."""
        order = np.lexsort((self.row, self.col))
        start = np.concatenate(
            [[0], np.cumsum(np.bincount(self.col, minlength=columns))]
        ).astype(np.int32)
        return start, self.row[order].astype(np.int32), self.val[order]


@dataclass(frozen=True)
class _Matrices:
    """The relaxation as HiGHS takes it: x per candidate, then one y per (group, value)."""

    cost: np.ndarray
    a_ub: _Sparse | None
    b_ub: np.ndarray | None
    a_eq: _Sparse
    b_eq: np.ndarray
    n: int


def lp_bound(
    cands: pd.DataFrame,
    limits: Limits,
    objective: np.ndarray,
    extra: list | None = None,
) -> LpBound | None:
    """min objective · x over the relaxation (x in [0, 1]); None when HiGHS finds it infeasible or fails.

    `extra` adds rows (`LinearRow`s) such as the cost ceiling of the tie-break stage.
    """
    started = time.perf_counter()
    m = _matrices(cands, limits, objective, extra)
    highs = _run(m, integer=False, options={"simplex_strategy": 1})  # dual simplex
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    solution, at_lower = (
        highs.getSolution(),
        np.array(highs.getBasis().col_status) == highspy.HighsBasisStatus.kLower,
    )
    # what raising x from 0 costs at least; a column at its upper bound keeps its (negative) dual, so that
    # a column alike in the rows but dearer by d reads it plus d
    dual = np.array(solution.col_dual)
    reduced = np.where(at_lower, dual, np.minimum(dual, 0.0))
    return LpBound(
        float(highs.getInfo().objective_function_value),
        np.array(solution.col_value)[: m.n],
        time.perf_counter() - started,
        reduced[: m.n],
    )


def mip_optimum(
    cands: pd.DataFrame,
    limits: Limits,
    objective: np.ndarray,
    time_limit_s: float,
    extra: list | None = None,
) -> np.ndarray | None:
    """The picks of a proven optimum of the integer model (HiGHS's branch and bound on the same rows,
    no gap allowed), or None when it is not proven within the time limit. With a few coupling rows the
    LP leaves only a few workloads fractional, so this is a small search where CP-SAT's bound is weak.
    The rounded solution is checked against every row in exact arithmetic before it is returned."""
    if time_limit_s <= 0:
        return None
    m = _matrices(cands, limits, objective, extra)
    highs = _run(
        m, integer=True, options={"time_limit": float(time_limit_s), "mip_rel_gap": 0.0}
    )
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return _picks(
        m, highs
    )  # None where HiGHS's tolerances let a row slip: left to CP-SAT


PLAN_WITHIN_NODES = 2000
"""Branch-and-bound nodes `plan_within` may take: a work limit, not a clock, so its answer never depends on the
machine's load."""


def plan_within(
    cands: pd.DataFrame,
    limits: Limits,
    objective: np.ndarray,
    among: np.ndarray,
    ceiling: int,
    time_limit_s: float,
) -> np.ndarray | None | bool:
    """A plan that picks at least one candidate of `among` (positions) and whose objective is at most `ceiling`:
    its picks; None when HiGHS's branch and bound proves there is none; False when it cannot tell within
    `PLAN_WITHIN_NODES` nodes (or the time limit). The picks are checked against every row in exact arithmetic."""
    if time_limit_s <= 0:
        return False
    extra = [
        LinearRow("a candidate of among", np.asarray(among), -np.ones(len(among)), -1),
        LinearRow(
            "ceiling", np.arange(len(cands)), np.asarray(objective), int(ceiling)
        ),
    ]
    m = _matrices(cands, limits, objective, extra)
    highs = _run(
        m,
        integer=True,
        options={"time_limit": float(time_limit_s), "mip_max_nodes": PLAN_WITHIN_NODES},
    )
    if highs.getModelStatus() == highspy.HighsModelStatus.kInfeasible:
        return None
    if highs.getInfo().primal_solution_status != 2:  # no feasible solution at hand
        return False
    picks = _picks(m, highs)
    return False if picks is None else picks


def _picks(m: _Matrices, highs: highspy._Highs) -> np.ndarray | None:
    """The candidates HiGHS's integer solution picks, once it holds every row in exact arithmetic (None if not)."""
    z = np.round(np.array(highs.getSolution().col_value))
    if not (
        np.array_equal(m.a_eq @ z, m.b_eq)
        and (m.a_ub is None or np.all(m.a_ub @ z <= m.b_ub))
    ):
        return None
    return z[: m.n] > 0.5


def _run(m: _Matrices, integer: bool, options: dict) -> highspy._Highs:
    """HiGHS run on the relaxation (x in [0, 1]; whole numbers when `integer`), silent and presolved."""
    if m.a_ub is None:
        rows, lower, upper = m.a_eq, m.b_eq, m.b_eq
    else:
        rows = m.a_ub.below(m.a_eq)
        lower = np.concatenate([np.full(len(m.b_ub), -highspy.kHighsInf), m.b_eq])
        upper = np.concatenate([m.b_ub, m.b_eq])
    width = len(m.cost)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = width, rows.rows
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = m.cost, np.zeros(width), np.ones(width)
    lp.row_lower_, lp.row_upper_ = (
        np.asarray(lower, dtype=float),
        np.asarray(upper, dtype=float),
    )
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = rows.by_column(
        width
    )
    if integer:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * width
    # the bare binding: highspy.Highs prints a banner to standard output
    highs = highspy._Highs()
    highs.setOptionValue("output_flag", False)
    # a worker process per core already (what-if points)
    highs.setOptionValue("threads", 1)
    highs.setOptionValue("presolve", "on")
    for name, value in options.items():
        highs.setOptionValue(name, value)
    highs.passModel(lp)
    stop = threading.Event()

    def interrupt(
        kind, message, data_out, data_in, user_data
    ) -> None:  # HiGHS asks at each iteration and node
        if stop.is_set():
            data_in.user_interrupt = True

    highs.setCallback(interrupt, None)
    for kind in _INTERRUPTS:
        highs.startCallback(kind)
    interruptible.call(highs.run, stop.set)
    return highs


_INTERRUPTS = (
    cb.HighsCallbackType.kCallbackSimplexInterrupt,
    cb.HighsCallbackType.kCallbackIpmInterrupt,
    cb.HighsCallbackType.kCallbackMipInterrupt,
)
"""Where HiGHS asks whether to stop: simplex iterations, interior-point iterations, branch-and-bound nodes."""


def _matrices(
    cands: pd.DataFrame, limits: Limits, objective: np.ndarray, extra: list | None
) -> _Matrices:
    n = len(cands)
    rows = coupling_rows(cands, limits) + (extra or [])
    groups = coupling_groups(cands, limits)
    values = [
        v for _, by_value in groups for v in by_value
    ]  # one y per (group, value), after the x's

    workload_codes = pd.factorize(cands["workload"])[0]
    eq_rows, eq_cols = (
        [workload_codes],
        [np.arange(n)],
    )  # each workload picks one candidate
    equalities = workload_codes.max() + 1
    eq_rhs = [np.ones(equalities)]
    ub_rows, ub_cols, ub_vals, ub_rhs = [], [], [], []
    for r, row in enumerate(rows):
        ub_rows += [r] * len(row.index)
        ub_cols += list(row.index)
        ub_vals += list(row.coef.astype(float))
        ub_rhs.append(float(row.upper))
    r = len(rows)
    y = n
    for g, (members, by_value) in enumerate(groups):
        eq_rows.append(np.full(len(by_value), equalities))  # each group takes one value
        eq_cols.append(np.arange(y, y + len(by_value)))
        eq_rhs.append(np.ones(1))
        equalities += 1
        workloads = cands["workload"].to_numpy()
        for k, (_, picks) in enumerate(by_value.items()):
            for workload in sorted(
                set(workloads[picks])
            ):  # Σ_{c of w with value v} x_c - y_v <= 0
                own = [i for i in picks if workloads[i] == workload]
                ub_rows += [r] * (len(own) + 1)
                ub_cols += own + [y + k]
                ub_vals += [1.0] * len(own) + [-1.0]
                ub_rhs.append(0.0)
                r += 1
        y += len(by_value)
    a_ub = _Sparse.of(ub_rows, ub_cols, ub_vals, r) if r else None
    eq_rows, eq_cols = np.concatenate(eq_rows), np.concatenate(eq_cols)
    a_eq = _Sparse.of(eq_rows, eq_cols, np.ones(len(eq_rows)), equalities)
    cost = np.concatenate([np.asarray(objective, dtype=float), np.zeros(len(values))])
    return _Matrices(
        cost, a_ub, np.array(ub_rhs) if r else None, a_eq, np.concatenate(eq_rhs), n
    )
