"""A lower bound for `planner batch` from a time-indexed LP over the reserved pools.

CP-SAT's own bound comes from its LP, which sees reserved capacity only through energy
cuts: it lets a run's node-hours spread fluidly over the whole term. Indexing each pooled
candidate by its start step makes the LP see, step by step, which runs overlap; on the
benchmark's 200-run quarter that lifts the bound by about 3 % in a few seconds (HiGHS).

The LP still buys fractional nodes and packs fractional runs into them. So the bound
branches on the nodes bought per pool, best box first, and once a pool's count is fixed
at b it adds the rounded capacity rows Σ ⌊nodes_c/k⌋·x_cs ≤ ⌊b/k⌋ per step (valid because
every run is whole: three 2-node runs fill 6 of 7 nodes, not 7). On the 200-run quarter
that is another 0.8 %.

The LP relaxes everything else (quotas, node limits, precedence, budgets, integrality of
the starts), so its optimum is a valid lower bound on the cost of any plan that schedules
every run; so is the least bound over the boxes still open when time runs out.

The LP of the box that gives the bound also says where good plans are: which pooled
candidates it uses and at which starts. The search packs the pools inside that
neighbourhood (see `batch/search.py`).

Then the same LP with every start and node count whole (`pack`, HiGHS's branch and cut): its
optimum is a packing of the pools that often extends to a plan (the search schedules the rest
around it), and its dual bound, where above the boxes', a better bound. On a 200-run quarter
where every packing near the LP cost more than buying nothing, the integer packing's plan was
1.1 % cheaper, 0.1 % above that bound.

A run's release is first moved past the soonest the runs it waits for can end
(`released_after`): the LP knows no precedence, and without it put a fine-tune on a pool at
step 0 whose pretrain could end at step 113 at the soonest.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import threading
import time
from dataclasses import dataclass, field

import highspy
import numpy as np
import pandas as pd
import scipy.sparse as sp

from planner.candidates.limits import COST_RESOLUTION_USD

# HiGHS solves to a relative objective tolerance near 1e-7; keep the bound safely below the LP value.
_SAFETY = 1e-6
_INTEGRAL = 1e-6

Box = tuple[tuple[int, int], ...]  # (least, most) nodes bought, per pool

MAX_LP_TERMS = 50_000_000
"""Capacity terms (a pooled candidate's nodes at each step of each start) the LP is built with at most: about
95 bytes each while it is built, so 4.7 GB here. Past it the bound is left out, as when its first LP does not
finish in time (the 200-run benchmark quarter at hourly steps has 32 million and solves in about 30 s; at 500
runs the LP took 7 GB and did not finish in 30 s)."""


Floor = tuple[float, np.ndarray]
"""A box's LP duals read as a bound for any set of runs S (`_TimeIndexedLP.floor`): (K, v), K + Σ_(r in S) v_r."""


@dataclass(frozen=True)
class Relaxation:
    """The bound, and the LP solution of the box it comes from when branching ended there:
    the nodes bought per pool and, per pooled candidate row the LP uses, its first and last start.
    `floors` bound plans that leave runs out (`bound_for`)."""

    bound_usd: float | None
    bought: tuple[int, ...] | None = None
    starts: dict[int, tuple[int, int]] = field(default_factory=dict)
    left_out: str = ""  # why there is no LP at all (its size), for the status line
    runs: tuple[str, ...] = ()
    # per box still open, or found infeasible (which a smaller set of runs may not be): the floors of its
    # LP and its ancestors' (each valid in it; the highest counts); empty where no LP of it or above it ended
    floors: tuple[tuple[Floor, ...], ...] = field(default=(), compare=False)
    # the integer packing (`pack`): per pooled candidate row it puts on a pool, its start; the nodes bought
    packing: dict[int, int] = field(default_factory=dict)
    packing_bought: tuple[int, ...] | None = None
    lp: _TimeIndexedLP | None = field(default=None, compare=False, repr=False)
    seconds: float = field(default=0.0, compare=False)  # the LP's build and branching

    def bound_for(self, scheduled: set[str]) -> float | None:
        """A lower bound on the cost of any plan that schedules exactly the runs `scheduled` (every run: the
        bound itself). An optional run left out takes its row and columns out of the LP; the LP's duals stay
        a feasible dual of what is left (the same reduced costs), so each box's Lagrangian value summed over
        the runs kept bounds that LP (weak duality), and the least over the boxes bounds every plan."""
        if set(self.runs) <= scheduled:
            return self.bound_usd
        if not self.floors or not all(self.floors):
            return None
        kept = np.array([r in scheduled for r in self.runs])
        cents = min(
            max(constant + float(v[kept].sum()) for constant, v in chain)
            for chain in self.floors
        )
        return max(0.0, cents - abs(cents) * _SAFETY) * COST_RESOLUTION_USD


def released_after(cands: pd.DataFrame, runs) -> list:
    """`runs` with each release moved to the soonest every run it waits for can have ended: their releases,
    so moved, plus their shortest candidate. A run starts only once those have ended and runs only if they
    run, so no plan starts it sooner: the LP and everything read from it stay valid."""
    shortest = cands.groupby("run")["duration_steps"].min().to_dict()
    by_name = {r.name: r for r in runs}
    release: dict[str, int] = {}

    def soonest(name: str) -> int:
        if name not in release:
            run = by_name[name]
            release[name] = max(
                [run.release]
                + [
                    soonest(b) + int(shortest.get(b, 0))
                    for b in run.after
                    if b in by_name
                ]
            )
        return release[name]

    return [dataclasses.replace(r, release=soonest(r.name)) for r in runs]


def _columns(cands: pd.DataFrame, runs, pools) -> tuple[np.ndarray, np.ndarray]:
    """One column per pooled candidate and feasible start step; one per other candidate that fits."""
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
    starts = np.where(
        pool >= 0, np.maximum(last - first + 1, 0), (last >= first).astype(int)
    )
    cand = np.repeat(np.arange(len(cands)), starts)
    offset = np.arange(len(cand)) - np.repeat(np.cumsum(starts) - starts, starts)
    return cand, np.repeat(first, starts) + offset


def _capacity_terms(cands: pd.DataFrame, runs, pools) -> int:
    """The LP's capacity terms: each pooled column's duration in steps."""
    cands = cands.reset_index(drop=True)
    cand, _ = _columns(cands, runs, pools)
    pooled = cands["pool"].to_numpy(dtype=int)[cand] >= 0
    return int(cands["duration_steps"].to_numpy(dtype=np.int64)[cand[pooled]].sum())


class _TimeIndexedLP:
    """The LP, built once and kept in one HiGHS instance: a box of bought nodes changes only
    column bounds and adds rows, so each box re-solves warm from the last basis (about five
    times faster than solving every box from scratch on the 200-run benchmark).

    min Σ cost_c·x_cs + Σ price_p·term_p·b_p  s.t.  Σ_{c of r, s} x_cs = 1 for each run r;
    Σ_{pooled c, s ≤ t < s + d_c} nodes_c·x_cs ≤ b_p for each pool p and step t;  0 ≤ x ≤ 1.
    """

    def __init__(self, cands: pd.DataFrame, runs, pools, steps: int):
        cands = cands.reset_index(drop=True)
        steps = max([steps] + [p.end for p in pools])
        cand, start = _columns(cands, runs, pools)
        n_x, n_b = len(cand), len(pools)
        run_row = (
            cands["run"].map({r.name: k for k, r in enumerate(runs)}).to_numpy()[cand]
        )
        one_each = sp.csr_matrix(
            (np.ones(n_x), (run_row, np.arange(n_x))), shape=(len(runs), n_x + n_b)
        )

        pool = cands["pool"].to_numpy(dtype=int)[cand]
        pooled = np.flatnonzero(pool >= 0)
        span = cands["duration_steps"].to_numpy(dtype=int)[cand[pooled]]
        column = np.repeat(pooled, span)
        step = (
            start[column]
            + np.arange(len(column))
            - np.repeat(np.cumsum(span) - span, span)
        )
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

        rows = sp.vstack([one_each, capacity]).tocsc()
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
            [np.ones(len(runs)), np.full(n_b * steps, -highspy.kHighsInf)]
        )
        lp.row_upper_ = np.concatenate([np.ones(len(runs)), np.zeros(n_b * steps)])
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
            self._starts(solution[: self.n_x])
            if _open_pool(box, bought) is None
            else {}
        )
        return "optimal", float(value), bought, starts, floor

    def floor(self, box: Box, found, added_upper: list[np.ndarray]) -> Floor:
        """The LP's Lagrangian value split by run: with row duals π and reduced costs d = c − Aᵀπ, every x in
        the box has c·x − π·(Ax − rhs) = d·x + π·rhs ≤ c·x when the capacity rows' π ≤ 0, so
        K + Σ_r v_r, v_r = π_r + Σ_(columns c of r) min(0, d_c) (x_c in [0, 1]) and K the rounded rows' π·rhs and
        the pools' min(d_b·least, d_b·most), bounds the LP (equal at its optimum). Leaving runs out leaves
        every other column's d as it is: summed over the runs kept it bounds their LP."""
        rows, cols = np.asarray(found.row_dual), np.asarray(found.col_dual)
        per_run = rows[: self.n_runs] + np.bincount(
            self.run_of,
            weights=np.minimum(cols[: self.n_x], 0.0),
            minlength=self.n_runs,
        )
        base = self.base_rows
        constant = (
            float(np.minimum(rows[base:], 0.0) @ np.concatenate(added_upper))
            if added_upper
            else 0.0
        )
        for p, (least, most) in enumerate(box):
            d = cols[self.n_x + p]
            constant += min(d * least, d * most)
        return constant, per_run

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
        used = np.flatnonzero((x > _INTEGRAL) & self.pooled)
        span = (
            pd.DataFrame({"cand": self.cand[used], "start": self.start[used]})
            .groupby("cand")["start"]
            .agg(["min", "max"])
        )
        return {int(c): (int(lo), int(hi)) for c, lo, hi in span.itertuples()}


PACKING_GAP = 1e-4
"""Where `_TimeIndexedLP.pack` stops: its packing within this share of its own bound."""
PACKING_ROOM = 4
"""`packed` starts the branch and cut only with this many times the LP's build and branching left: it took
5-7 times as long on the 200-run benchmark quarters (25-35 s), and on the 500-run ones, whose branching alone
takes most of the time limit, a start with a second left ran 4-5 s past the limit (HiGHS's set-up does not
watch the clock)."""


def _interrupt(kind, message, out, into, stop: threading.Event) -> None:
    """HiGHS's branch and cut asks between nodes whether to stop: when `stop` is set."""
    into.user_interrupt = stop.is_set()


def _open_pool(box: Box, bought: np.ndarray) -> int | None:
    """A pool whose count is not fixed but which the LP uses; branching on it can lift the bound."""
    for p, ((least, most), b) in enumerate(zip(box, bought)):
        if least != most and b > _INTEGRAL:
            return p
    return None


def _split(box: Box, p: int, b: float) -> list[Box]:
    """The box cut at the LP's count for pool p: below, at (when integral) and above it."""
    least, most = box[p]
    whole = round(b)
    if abs(b - whole) <= _INTEGRAL:
        parts = [(least, whole - 1), (whole, whole), (whole + 1, most)]
    else:
        parts = [(least, math.floor(b)), (math.ceil(b), most)]
    return [box[:p] + (part,) + box[p + 1 :] for part in parts if part[0] <= part[1]]


def all_runs_lower_bound_usd(
    cands: pd.DataFrame,
    runs,
    pools,
    steps: int,
    seconds: float = math.inf,
    stop: threading.Event | None = None,
) -> float | None:
    """Least cost of a plan that schedules every run, relaxed as above; None if even the
    first LP did not finish (or no plan can schedule every run)."""
    return relax(cands, runs, pools, steps, seconds, stop).bound_usd


def relax(
    cands: pd.DataFrame,
    runs,
    pools,
    steps: int,
    seconds: float = math.inf,
    stop: threading.Event | None = None,
    keep_lp: bool = False,
) -> Relaxation:
    """The bound, with its box's LP solution when branching ended at a leaf (and the LP itself with
    `keep_lp`, for `packed`).

    Best-first over boxes of bought nodes: a box's LP value bounds every plan in it; a box
    is split until the LP fixes or leaves unused every pool, and the least open box bounds
    them all when `seconds` run out or `stop` is set (checked between LPs).
    """
    began = time.perf_counter()
    deadline = began + seconds
    if (terms := _capacity_terms(cands, runs, pools)) > MAX_LP_TERMS:
        return Relaxation(
            None,
            left_out=f"the LP bound is left out: {terms:,} capacity terms, past the "
            f"{MAX_LP_TERMS:,} it builds",
        )
    names = tuple(r.name for r in runs)
    runs = released_after(cands, runs)
    lp = _TimeIndexedLP(cands, runs, pools, steps)
    kept = lp if keep_lp else None
    count = 0  # breaks ties in the heap in creation order
    # (value, count, box, the LP's nodes bought, the floors of its LP and its ancestors')
    heap: list = [
        (-math.inf, count, tuple((p.min_nodes, p.max_nodes) for p in pools), None, ())
    ]
    infeasible: list[tuple[Floor, ...]] = []  # for every run; a smaller set may fit
    leaves: dict[
        int, dict[int, tuple[int, int]]
    ] = {}  # heap entry's count -> its LP's starts
    while heap and not (stop is not None and stop.is_set()):
        value, _, box, bought, floors = heap[0]
        if bought is not None and _open_pool(box, bought) is None:
            break  # the least box cannot be lifted by branching
        heapq.heappop(heap)
        if bought is None:
            state, value_found, bought, starts, floor = lp.solve(
                box, deadline - time.perf_counter()
            )
            count += 1
            if starts:
                leaves[count] = starts
            if state == "stopped":
                heapq.heappush(heap, (value, count, box, None, floors))
                break
            if state == "optimal":
                heapq.heappush(
                    heap,
                    (max(value, value_found), count, box, bought, (*floors, floor)),
                )
            else:
                infeasible.append(floors)
            continue
        p = _open_pool(box, bought)
        for part in _split(box, p, bought[p]):
            count += 1
            heapq.heappush(heap, (value, count, part, None, floors))
    open_floors = tuple(entry[4] for entry in heap) + tuple(infeasible)
    if not heap or heap[0][0] == -math.inf:
        return Relaxation(None, runs=names, floors=open_floors)
    value, entry, _, bought, _ = heap[0]
    bound = value * (1 - _SAFETY) * COST_RESOLUTION_USD
    took = time.perf_counter() - began
    if entry not in leaves:
        return Relaxation(bound, runs=names, floors=open_floors, lp=kept, seconds=took)
    return Relaxation(
        bound,
        tuple(int(round(b)) for b in bought),
        leaves[entry],
        runs=names,
        floors=open_floors,
        lp=kept,
        seconds=took,
    )


def packed(
    relaxation: Relaxation, seconds: float, stop: threading.Event | None = None
) -> Relaxation:
    """`relaxation` with its LP's integer packing (`_TimeIndexedLP.pack`), kept only where the branch and cut
    finished (so the plan built on it does not depend on the clock), and that search's dual bound where it is
    higher; without its LP, which is let go. Not started with less than PACKING_ROOM times the LP's own time
    left, or once `stop` is set."""
    lp = relaxation.lp
    if (
        lp is None
        or seconds < PACKING_ROOM * relaxation.seconds
        or (stop is not None and stop.is_set())
    ):
        return dataclasses.replace(relaxation, lp=None)
    finished, cents, packing, bought = lp.pack(seconds, stop)
    bound = relaxation.bound_usd
    if bound is not None and math.isfinite(cents):
        bound = max(bound, cents * (1 - _SAFETY) * COST_RESOLUTION_USD)
    if not finished:
        packing, bought = {}, None
    return dataclasses.replace(
        relaxation,
        bound_usd=bound,
        packing=packing,
        packing_bought=bought,
        lp=None,
    )


class Background:
    """Runs `bound(*args, stop=...)` in a thread beside the search, then `then(value, stop=...)` on its value
    (where given). `wait` gives the first value, `wait_then` the second; `finish()` stops the thread (between
    LPs, or between the branch and cut's nodes) and returns the last value it reached or raises its error;
    leaving the block does the same, but for a Ctrl-C, which only tells it to stop."""

    def __init__(self, bound, *args, then=None):
        self.stop, self.value, self.error = threading.Event(), None, None
        self.then, self.first, self.ready = then, None, threading.Event()
        self.late = False  # a `wait` ended before the value: what the caller did then depended on the clock
        self.thread = (
            threading.Thread(target=self._run, args=(bound, args), daemon=True)
            if bound
            else None
        )

    def _run(self, bound, args):
        try:
            self.value = self.first = bound(*args, stop=self.stop)
            self.ready.set()
            if self.then is not None and self.value is not None:
                self.value = self.then(self.value, stop=self.stop)
        except BaseException as error:  # raised again where the value is wanted
            self.error = error
        finally:
            self.ready.set()

    def __enter__(self):
        if self.thread:
            self.thread.start()
        return self

    def wait(self, seconds: float):
        """Its first value if it comes within `seconds` (None if not, or on error: `finish` raises it)."""
        if self.thread is None:
            return None
        self.late |= not self.ready.wait(max(seconds, 0.0))
        return None if self.error or not self.ready.is_set() else self.first

    def wait_then(self, seconds: float):
        """Its last value if the thread ends within `seconds` (None if not, or on error)."""
        if self.thread is None:
            return None
        self.thread.join(max(seconds, 0.0))
        self.late |= self.thread.is_alive()
        return None if self.error or self.thread.is_alive() else self.value

    def finish(self):
        self.stop.set()
        if self.thread:
            self.thread.join()
        if self.error:
            raise self.error
        return self.value

    def __exit__(self, kind, error, trace):
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.stop.set()  # Ctrl-C ends the command at once: do not wait out the LP (it checks between LPs)
        else:
            self.finish()
