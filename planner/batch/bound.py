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

A GPU quota the first LP's solution breaks gets a row per step too, and its candidates a
column per start (`TimeIndexedLP.broken`, the LP built again): on a generated 200-run
quarter whose on-demand H100s ran at aws's H100 quota most of the term, the LP had put them
all at once, and the rows lifted the bound by 5.1 %. A quota the LP keeps to is left out: its
rows would slow every LP (2-3 times on the benchmark's quarters) and lift little.

The LP relaxes everything else (the other quotas, node limits, precedence, budgets,
integrality of the starts), so its optimum is a valid lower bound on the cost of any plan
that schedules every run; so is the least bound over the boxes still open when time runs out.

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

import numpy as np
import pandas as pd

from planner.batch.time_indexed import (
    INTEGRAL,
    Box,
    Floor,
    TimeIndexedLP,
    capacity_terms,
    open_pool,
)
from planner.candidates.limits import COST_RESOLUTION_USD

# HiGHS solves to a relative objective tolerance near 1e-7; keep the bound safely below the LP value.
_SAFETY = 1e-6


MAX_LP_TERMS = 50_000_000
"""Capacity terms (a pooled candidate's nodes at each step of each start) the LP is built with at most: about
95 bytes each while it is built, so 4.7 GB here. Past it the bound is left out, as when its first LP does not
finish in time (the 200-run benchmark quarter at hourly steps has 32 million and solves in about 30 s; at 500
runs the LP took 7 GB and did not finish in 30 s)."""


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
    lp: TimeIndexedLP | None = field(default=None, compare=False, repr=False)
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


PACKING_ROOM = 4
"""`packed` starts the branch and cut only with this many times the LP's build and branching left: it took
5-7 times as long on the 200-run benchmark quarters (25-35 s), and on the 500-run ones, whose branching alone
takes most of the time limit, a start with a second left ran 4-5 s past the limit (HiGHS's set-up does not
watch the clock)."""


def _split(box: Box, p: int, b: float) -> list[Box]:
    """The box cut at the LP's count for pool p: below, at (when integral) and above it."""
    least, most = box[p]
    whole = round(b)
    if abs(b - whole) <= INTEGRAL:
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
    quotas: dict[str, int] | None = None,
) -> float | None:
    """Least cost of a plan that schedules every run, relaxed as above; None if even the
    first LP did not finish (or no plan can schedule every run)."""
    return relax(cands, runs, pools, steps, seconds, stop, quotas=quotas).bound_usd


def _with_quotas(
    lp: TimeIndexedLP, cands, runs, pools, steps, quotas, deadline
) -> tuple[TimeIndexedLP, float, tuple[Floor, ...]]:
    """`lp`, or the LP built again with rows for the quotas its first box's solution breaks (while their terms
    stay within MAX_LP_TERMS); with that first LP's value and floor, which bound every box, so that they stand
    where the LP built again does not finish its first box in time."""
    box = tuple((p.min_nodes, p.max_nodes) for p in pools)
    state, value, _, _, floor = lp.solve(box, deadline - time.perf_counter())
    if state != "optimal" or floor is None:
        return lp, -math.inf, ()
    broken = lp.broken(quotas, cands)
    if broken and capacity_terms(cands, runs, pools, broken) <= MAX_LP_TERMS:
        lp = TimeIndexedLP(cands, runs, pools, steps, broken)
    return lp, value, (floor,)


def relax(
    cands: pd.DataFrame,
    runs,
    pools,
    steps: int,
    seconds: float = math.inf,
    stop: threading.Event | None = None,
    keep_lp: bool = False,
    quotas: dict[str, int] | None = None,
) -> Relaxation:
    """The bound, with its box's LP solution when branching ended at a leaf (and the LP itself with
    `keep_lp`, for `packed`).

    Best-first over boxes of bought nodes: a box's LP value bounds every plan in it; a box
    is split until the LP fixes or leaves unused every pool, and the least open box bounds
    them all when `seconds` run out or `stop` is set (checked between LPs). The GPU `quotas` the
    first LP breaks (`TimeIndexedLP.broken`) get rows of their own, the LP built again with them.
    """
    began = time.perf_counter()
    deadline = began + seconds
    if (terms := capacity_terms(cands, runs, pools)) > MAX_LP_TERMS:
        return Relaxation(
            None,
            left_out=f"the LP bound is left out: {terms:,} capacity terms, past the "
            f"{MAX_LP_TERMS:,} it builds",
        )
    names = tuple(r.name for r in runs)
    runs = released_after(cands, runs)
    lp, value, floors = TimeIndexedLP(cands, runs, pools, steps), -math.inf, ()
    if quotas:
        lp, value, floors = _with_quotas(
            lp, cands, runs, pools, steps, quotas, deadline
        )
    kept = lp if keep_lp else None
    count = 0  # breaks ties in the heap in creation order
    # (value, count, box, the LP's nodes bought, the floors of its LP and its ancestors')
    heap: list = [
        (value, count, tuple((p.min_nodes, p.max_nodes) for p in pools), None, floors)
    ]
    infeasible: list[tuple[Floor, ...]] = []  # for every run; a smaller set may fit
    leaves: dict[
        int, dict[int, tuple[int, int]]
    ] = {}  # heap entry's count -> its LP's starts
    while heap and not (stop is not None and stop.is_set()):
        value, _, box, bought, floors = heap[0]
        if bought is not None and open_pool(box, bought) is None:
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
        p = open_pool(box, bought)
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
    """`relaxation` with its LP's integer packing (`TimeIndexedLP.pack`), kept only where the branch and cut
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
