"""The time-indexed LP of `planner batch`'s bound (`batch/bound.py` branches on it): a column per pooled
candidate and start step, a row per pool and step, and rows per step for the GPU quotas the LP is given; one
HiGHS instance, solved box after box of nodes bought, and at last with every column whole (`pack`)."""

from __future__ import annotations

import math
import threading

import highspy
import numpy as np
import pandas as pd
import scipy.sparse as sp

from planner.candidates.limits import quota_mask

INTEGRAL = 1e-6

Box = tuple[tuple[int, int], ...]  # (least, most) nodes bought, per pool

Floor = tuple[float, np.ndarray]
"""A box's LP duals read as a bound for any set of runs S (`TimeIndexedLP.floor`): (K, v), K + Σ_(r in S) v_r."""


def _columns(
    cands: pd.DataFrame, runs, pools, timed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One column per pooled (or `timed`) candidate and feasible start step; one per other candidate that fits."""
    window = {r.name: (r.release, r.due) for r in runs}
    release = cands["run"].map(lambda n: window[n][0]).to_numpy()
    due = cands["run"].map(lambda n: window[n][1]).to_numpy()
    duration = cands["duration_steps"].to_numpy(dtype=int)
    pool = cands["pool"].to_numpy(dtype=int)
    first, last = release.copy(), due - duration
    for p, spec in enumerate(pools):
        on = pool == p
        first[on] = np.maximum(first[on], spec.start)
        last[on] = np.minimum(last[on], spec.end - duration[on])
    indexed = pool >= 0 if timed is None else (pool >= 0) | timed
    starts = np.where(
        indexed, np.maximum(last - first + 1, 0), (last >= first).astype(int)
    )
    cand = np.repeat(np.arange(len(cands)), starts)
    offset = np.arange(len(cand)) - np.repeat(np.cumsum(starts) - starts, starts)
    return cand, np.repeat(first, starts) + offset


def capacity_terms(
    cands: pd.DataFrame, runs, pools, quotas: dict[str, int] | None = None
) -> int:
    """The LP's capacity terms: each pooled column's duration in steps, and each column's under a quota
    with rows (`TimeIndexedLP`) once per such quota."""
    cands = cands.reset_index(drop=True)
    covered = _covered(cands, quotas)
    cand, _ = _columns(cands, runs, pools, _any(covered))
    rows = (cands["pool"].to_numpy(dtype=int)[cand] >= 0).astype(np.int64)
    for mask in covered.values():
        rows += mask[cand]
    duration = cands["duration_steps"].to_numpy(dtype=np.int64)[cand]
    return int((duration * rows).sum())


def _covered(
    cands: pd.DataFrame, quotas: dict[str, int] | None
) -> dict[str, np.ndarray]:
    """Per quota key, in order, the candidate rows it covers."""
    return {key: quota_mask(cands, key).to_numpy() for key in sorted(quotas or {})}


def _any(covered: dict[str, np.ndarray]) -> np.ndarray | None:
    return np.logical_or.reduce(list(covered.values())) if covered else None


def _steps_of(columns: np.ndarray, start: np.ndarray, span: np.ndarray):
    """Each column repeated once per step it runs, and that step."""
    column = np.repeat(columns, span)
    step = (
        start[column] + np.arange(len(column)) - np.repeat(np.cumsum(span) - span, span)
    )
    return column, step


class TimeIndexedLP:
    """The LP, built once and kept in one HiGHS instance: a box of bought nodes changes only
    column bounds and adds rows, so each box re-solves warm from the last basis (about five
    times faster than solving every box from scratch on the 200-run benchmark).

    min Σ cost_c·x_cs + Σ price_p·term_p·b_p  s.t.  Σ_{c of r, s} x_cs = 1 for each run r;
    Σ_{pooled c, s ≤ t < s + d_c} nodes_c·x_cs ≤ b_p for each pool p and step t;
    Σ_{c under q, s ≤ t < s + d_c} gpus_c·x_cs ≤ quota_q for each quota q given and step t;  0 ≤ x ≤ 1.
    """

    def __init__(
        self,
        cands: pd.DataFrame,
        runs,
        pools,
        steps: int,
        quotas: dict[str, int] | None = None,
    ):
        cands = cands.reset_index(drop=True)
        steps = max([steps] + [p.end for p in pools])
        covered = _covered(cands, quotas)
        quota_timed = _any(
            covered
        )  # candidates under a quota with rows: a column per start
        cand, start = _columns(cands, runs, pools, quota_timed)
        n_x, n_b = len(cand), len(pools)
        run_row = (
            cands["run"].map({r.name: k for k, r in enumerate(runs)}).to_numpy()[cand]
        )
        one_each = sp.csr_matrix(
            (np.ones(n_x), (run_row, np.arange(n_x))), shape=(len(runs), n_x + n_b)
        )

        pool = cands["pool"].to_numpy(dtype=int)[cand]
        pooled = np.flatnonzero(pool >= 0)
        duration = cands["duration_steps"].to_numpy(dtype=int)[cand]
        column, step = _steps_of(pooled, start, duration[pooled])
        nodes = cands["nodes"].to_numpy(dtype=int)[cand[column]]
        bought_rows = np.arange(n_b * steps)
        capacity = sp.csr_matrix(
            (
                np.concatenate([nodes, -np.ones(n_b * steps)]),
                (
                    np.concatenate([pool[column] * steps + step, bought_rows]),
                    np.concatenate([column, n_x + bought_rows // steps]),
                ),
            ),
            shape=(n_b * steps, n_x + n_b),
        )
        # per quota key and step: the GPUs of its columns running then (valid for the runs alone: endpoints
        # only hold more of the quota)
        entries = [np.empty(0, int), np.empty(0, int), np.empty(0)]  # row, column, GPUs
        for k, mask in enumerate(covered.values()):
            under = np.flatnonzero(mask[cand])
            column_q, step_q = _steps_of(under, start, duration[under])
            entries[0] = np.concatenate([entries[0], k * steps + step_q])
            entries[1] = np.concatenate([entries[1], column_q])
            gpus = cands["gpus"].to_numpy(dtype=float)[cand[column_q]]
            entries[2] = np.concatenate([entries[2], gpus])
        quota = sp.csr_matrix(
            (entries[2], (entries[0], entries[1])),
            shape=(len(covered) * steps, n_x + n_b),
        )
        self.quota_gpus = np.repeat(
            np.array([quotas[key] for key in covered], dtype=float), steps
        )
        # what `broken` reads of the last LP solution: per column, its run's window, whether its start is
        # its own (timed), and the solution
        window = {r.name: (r.release, r.due) for r in runs}
        self.release = cands["run"].map(lambda n: window[n][0]).to_numpy()[cand]
        self.due = cands["run"].map(lambda n: window[n][1]).to_numpy()[cand]
        self.timed = (
            pool >= 0 if quota_timed is None else (pool >= 0) | quota_timed[cand]
        )
        self.duration, self.steps = duration, steps
        self.x = np.zeros(n_x)

        self.rounded: dict[
            int, list[tuple[int, sp.csr_matrix]]
        ] = {}  # pool -> [(k, Σ ⌊nodes/k⌋·x per step)]
        self.sizes: dict[int, set[int]] = {}  # pool -> node counts of its candidates
        for p in range(n_b):
            on = (pool[column] == p) & (nodes >= 2)
            self.sizes[p] = set(nodes[pool[column] == p].tolist())
            self.rounded[p] = [
                (
                    k,
                    sp.csr_matrix(
                        (nodes[on] // k, (step[on], column[on])),
                        shape=(steps, n_x + n_b),
                    ),
                )
                for k in range(2, max(self.sizes[p], default=0) + 1)
            ]
        self.n_x, self.n_b, self.n_runs = n_x, n_b, len(runs)
        self.nodes_range = tuple((p.min_nodes, p.max_nodes) for p in pools)
        self.cand, self.start, self.pooled = cand, start, pool >= 0
        self.run_of = run_row  # per x column, its run's row

        rows = sp.vstack([one_each, capacity, quota]).tocsc()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = rows.shape[1], rows.shape[0]
        lp.col_cost_ = np.concatenate(
            [
                cands["cost_cents"].to_numpy(dtype=float)[cand],
                [p.cents_per_node for p in pools],
            ]
        )
        lp.col_lower_ = np.concatenate(
            [np.zeros(n_x), [p.min_nodes for p in pools]]
        ).astype(float)
        lp.col_upper_ = np.concatenate(
            [np.ones(n_x), [p.max_nodes for p in pools]]
        ).astype(float)
        lp.row_lower_ = np.concatenate(
            [
                np.ones(len(runs)),
                np.full(n_b * steps + len(self.quota_gpus), -highspy.kHighsInf),
            ]
        )
        lp.row_upper_ = np.concatenate(
            [np.ones(len(runs)), np.zeros(n_b * steps), self.quota_gpus]
        )
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = (
            rows.indptr,
            rows.indices,
            rows.data,
        )
        # The bare binding: highspy.Highs's Python layer prints a banner to file descriptor 1
        # before any option can silence it, which would corrupt `planner batch --format json`.
        self.highs = highspy._Highs()
        self.highs.setOptionValue("output_flag", False)
        self.highs.setOptionValue("threads", 1)
        self.highs.passModel(lp)
        self.base_rows = lp.num_row_

    def solve(
        self, box: Box, seconds: float
    ) -> tuple[str, float, np.ndarray, dict[int, tuple[int, int]], Floor | None]:
        """("optimal", cents, bought, starts, floor), ("infeasible", ...) or ("stopped", ...) for this box;
        `starts` (see `Relaxation`) only when the box is a leaf: no pool left to branch on."""
        highs = self.highs
        for p, (least, most) in enumerate(box):
            highs.changeColBounds(self.n_x + p, float(least), float(most))
        added = 0
        added_upper: list[np.ndarray] = []  # the rounded rows' right-hand sides
        for p, (least, most) in enumerate(box):
            if least != most:
                continue
            for k, rows in self.rounded[p]:
                if most % k or any(
                    size % k for size in self.sizes[p]
                ):  # else it repeats the capacity row
                    rows = rows.tocsr()
                    highs.addRows(
                        rows.shape[0],
                        np.full(rows.shape[0], -highspy.kHighsInf),
                        np.full(rows.shape[0], float(most // k)),
                        rows.nnz,
                        rows.indptr[:-1].astype(np.int32),
                        rows.indices.astype(np.int32),
                        rows.data.astype(float),
                    )
                    added += rows.shape[0]
                    added_upper.append(np.full(rows.shape[0], float(most // k)))
        # its clock adds up runs
        highs.setOptionValue("time_limit", highs.getRunTime() + max(seconds, 0.01))
        highs.run()
        status = highs.getModelStatus()
        value = highs.getInfo().objective_function_value
        found = highs.getSolution()  # read before the rows go
        solution = np.array(found.col_value)
        self.x = solution[: self.n_x]
        floor = (
            self.floor(box, found, added_upper)
            if status == highspy.HighsModelStatus.kOptimal
            else None
        )
        if added:
            highs.deleteRows(
                added, np.arange(self.base_rows, self.base_rows + added, dtype=np.int32)
            )
        bought = solution[self.n_x :]
        if status == highspy.HighsModelStatus.kInfeasible:
            return "infeasible", math.inf, bought, {}, None
        if status != highspy.HighsModelStatus.kOptimal:
            return "stopped", -math.inf, bought, {}, None
        starts = (
            self._starts(solution[: self.n_x]) if open_pool(box, bought) is None else {}
        )
        return "optimal", float(value), bought, starts, floor

    def floor(self, box: Box, found, added_upper: list[np.ndarray]) -> Floor:
        """The LP's Lagrangian value split by run: with row duals π and reduced costs d = c − Aᵀπ, every x in
        the box has c·x − π·(Ax − rhs) = d·x + π·rhs ≤ c·x when the capacity rows' π ≤ 0, so
        K + Σ_r v_r, v_r = π_r + Σ_(columns c of r) min(0, d_c) (x_c in [0, 1]) and K the quota and rounded rows' π·rhs and
        the pools' min(d_b·least, d_b·most), bounds the LP (equal at its optimum). Leaving runs out leaves
        every other column's d as it is: summed over the runs kept it bounds their LP."""
        rows, cols = np.asarray(found.row_dual), np.asarray(found.col_dual)
        per_run = rows[: self.n_runs] + np.bincount(
            self.run_of,
            weights=np.minimum(cols[: self.n_x], 0.0),
            minlength=self.n_runs,
        )
        base = self.base_rows
        constant = float(
            np.minimum(rows[base - len(self.quota_gpus) : base], 0.0) @ self.quota_gpus
        )
        if added_upper:
            constant += float(
                np.minimum(rows[base:], 0.0) @ np.concatenate(added_upper)
            )
        for p, (least, most) in enumerate(box):
            d = cols[self.n_x + p]
            constant += min(d * least, d * most)
        return constant, per_run

    def broken(self, quotas: dict[str, int], cands: pd.DataFrame) -> dict[str, int]:
        """The quotas the last solution uses past their GPUs inside some run's window [a, b) (or the whole
        term), on average over it: a column of a run whose window is [r, d) runs at least
        d_c − (a − r)⁺ − (d − b)⁺ of its steps in there (a timed column: exactly its overlap). Only these are
        worth rows of their own: elsewhere they would lift the bound little and slow the LP (2-3 times on the
        benchmark's quarters)."""
        used = np.flatnonzero(self.x > INTEGRAL)
        start, duration = self.start[used], self.duration[used]
        release, due = self.release[used], self.due[used]
        cands = cands.reset_index(drop=True)
        energy = self.x[used] * cands["gpus"].to_numpy(dtype=float)[self.cand[used]]
        a, b = np.unique(
            np.vstack(
                [
                    np.append(self.release, 0),
                    np.append(self.due, self.steps),
                ]
            ),
            axis=1,
        )[:, :, None]
        inside = np.where(  # per window and column used
            self.timed[used],
            np.minimum(start + duration, b) - np.maximum(start, a),
            duration - np.maximum(a - release, 0) - np.maximum(due - b, 0),
        ).clip(min=0)
        inside = inside.reshape(len(a), -1)
        room = (b - a).ravel() * (1 + INTEGRAL)
        return {
            key: quotas[key]
            for key, mask in _covered(cands, quotas).items()
            if (inside @ (energy * mask[self.cand[used]]) > quotas[key] * room).any()
        }

    def pack(
        self, seconds: float, stop: threading.Event | None
    ) -> tuple[bool, float, dict[int, int], tuple[int, ...] | None]:
        """The LP with every column whole, by HiGHS's branch and cut, for `seconds` at most or until `stop`:
        (finished, its dual bound in cents, the packing: per pooled candidate row used its start, the nodes
        bought), the packing empty and bought None where no whole solution was found. Done last: the
        columns stay whole."""
        highs, n = self.highs, self.n_x + self.n_b
        for p, (least, most) in enumerate(self.nodes_range):
            highs.changeColBounds(self.n_x + p, float(least), float(most))
        highs.changeColsIntegrality(
            n,
            np.arange(n, dtype=np.int32),
            np.full(n, highspy.HighsVarType.kInteger, dtype=np.uint8),
        )
        highs.setOptionValue("mip_rel_gap", PACKING_GAP)
        highs.setOptionValue("time_limit", highs.getRunTime() + max(seconds, 0.01))
        if stop is not None and hasattr(highspy, "cb"):  # else the time limit stops it
            highs.setCallback(_interrupt, stop)
            highs.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
        highs.run()
        info = highs.getInfo()
        finished = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        bound = float(info.mip_dual_bound)
        if info.primal_solution_status != 2:  # no whole solution
            return finished, bound, {}, None
        x = np.array(highs.getSolution().col_value)
        used = np.flatnonzero((x[: self.n_x] > 0.5) & self.pooled)
        packing = {int(c): int(s) for c, s in zip(self.cand[used], self.start[used])}
        return finished, bound, packing, tuple(int(round(b)) for b in x[self.n_x :])

    def _starts(self, x: np.ndarray) -> dict[int, tuple[int, int]]:
        used = np.flatnonzero((x > INTEGRAL) & self.pooled)
        span = (
            pd.DataFrame({"cand": self.cand[used], "start": self.start[used]})
            .groupby("cand")["start"]
            .agg(["min", "max"])
        )
        return {int(c): (int(lo), int(hi)) for c, lo, hi in span.itertuples()}


PACKING_GAP = 1e-4
"""Where `TimeIndexedLP.pack` stops: its packing within this share of its own bound."""


def _interrupt(kind, message, out, into, stop: threading.Event) -> None:
    """HiGHS's branch and cut asks between nodes whether to stop: when `stop` is set."""
    into.user_interrupt = stop.is_set()


def open_pool(box: Box, bought: np.ndarray) -> int | None:
    """A pool whose count is not fixed but which the LP uses; branching on it can lift the bound."""
    for p, ((least, most), b) in enumerate(zip(box, bought)):
        if least != most and b > INTEGRAL:
            return p
    return None
