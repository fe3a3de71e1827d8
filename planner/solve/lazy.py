"""Lazy exact pricing, the solver's half: price only the rows an optimal plan could use.

Generation (`generate(lazy=True)`) prices each workload's rows cheapest bound first and leaves those dearer by
their bound than a candidate it already has (`candidates/lazy.py`). Here the LP relaxation over the priced rows
and the unpriced ones at their bounds is solved first, and the unpriced rows it picks are priced until it
picks none (column generation): its value z is then that of the priced rows alone. The plan is solved on what
is priced; any plan that uses an unpriced row costs at least z plus the row's reduced cost, at its bound and
so at its exact cost, so a row whose reduced cost exceeds (the plan's cost - z) is in no cheaper plan. Of the
others, in reach of the LP, HiGHS's branch and bound is asked for a plan that picks one at its bound and costs
no more than the plan: where it proves there is none, no unpriced row is in a plan as cheap, ties included;
else the rows it picks are priced (all those in reach where it cannot tell) and the round repeats, until none
is left that could beat the plan: the plan and its proof are those of pricing every row. A scenario with no
plan gets every row priced, so that the explanation of why reads the same candidates. Unpriced rows alike in their column of the shared limits enter the LP as one,
their cheapest bound (`coupling_key`): another's reduced cost is the stand-in's plus how much dearer its bound
is, so each row is priced only where its own reduced cost is in reach.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.candidates.generate import CandidateSet
from planner.candidates.lazy import Pending
from planner.candidates.limits import Limits, node_cap
from planner.solve.bound import LpBound, lp_bound, plan_within
from planner.solve.outcome import SolveResult

LP_COLUMNS = (
    "cid",
    "workload",
    "offer_key",
    "provider",
    "region",
    "gpu",
    "gpu_family",
    "gpus",
    "nodes",
    "market",
    "max_nodes",
    "cost_cents",
)


def coupling_key(rows: pd.DataFrame, limits: Limits) -> pd.Series:
    """Per row, its workload and what its column of the shared limits holds: rows alike in it differ in the LP
    only by their cost. Quotas read the provider, GPU and GPUs; node limits the nodes, and the offer (and
    market) where the offer has a cap; groups the provider (and region, with same-region groups)."""
    capped = np.array(
        [
            node_cap(limits.node_limits.get(k), m) is not None
            for k, m in zip(rows["offer_key"], rows["max_nodes"])
        ],
        dtype=bool,
    )
    offer = rows["offer_key"].where(capped, "")
    if limits.node_limits_per_market:
        offer = offer + np.where(capped, "/" + rows["market"], "")
    parts = [
        rows["workload"],
        rows["provider"],
        rows["gpu"],
        rows["gpu_family"].astype(str),
        rows["gpus"].astype(str),
        rows["nodes"].astype(str),
        offer,
    ]
    if limits.same_region:
        parts.append(rows["region"])
    return pd.Series(["|".join(v) for v in zip(*parts)], index=rows.index)


def solve_lazily(
    candidates: CandidateSet,
    limits: Limits,
    solve: Callable[[CandidateSet], SolveResult],
) -> SolveResult:
    """`solve(candidates)` once the unpriced rows that could beat its plan are priced (module doc).
    `candidates` gains them; the result's `unpriced` says how many were left, proven out of every cheaper plan."""
    pending = candidates.pending
    if pending is None or not pending.left:
        return solve(candidates)
    keys = coupling_key(pending.every(), limits).to_numpy()  # each row keeps its key
    while True:
        relaxed = _relaxed(candidates, pending, keys, limits) if pending.left else None
        if relaxed is not None and relaxed.picked.any():
            # the relaxation stands on bounds: price what it picks first (column generation), so that the
            # plan's cost minus its value leaves few rows in reach
            priced = pending.price(*relaxed.rows_of(relaxed.picked))
            candidates.refresh(pending, priced)
            continue
        result = solve(candidates)
        if relaxed is None:
            return result
        if relaxed.bound is not None and result.solved:
            upper = float(result.chosen["cost_cents"].sum())
            wanted = relaxed.reduced <= upper - relaxed.bound.value + 1e-6
            if wanted.any():
                # in reach of the LP, but maybe in no plan as cheap: price only what such a plan uses
                found = _plan_with_unpriced(candidates, relaxed, wanted, limits, upper)
                if found is None:
                    result.unpriced = pending.left
                    return result
                if found is not False:
                    wanted = found
        else:
            # no plan even at the bounds, or none found on the priced rows: every row priced, for the
            # explanation of why to read the same candidates
            wanted = np.ones(len(relaxed.stand_ins), dtype=bool)
        if not wanted.any():
            result.unpriced = pending.left
            return result
        priced = pending.price(relaxed.stand_ins[wanted])
        candidates.refresh(pending, priced)


PLAN_WITHIN_S = 30.0
"""What `_plan_with_unpriced` may take before every row in reach is priced instead (its node limit binds first
on every scenario measured)."""


def _plan_with_unpriced(
    candidates: CandidateSet,
    relaxed: _Relaxation,
    wanted: np.ndarray,
    limits: Limits,
    upper: float,
) -> np.ndarray | None | bool:
    """Of the unpriced rows `wanted` marks (those in reach of the LP), the ones a plan uses that picks at least
    one of them at its bound and costs no more than `upper` (a mask over them all); None when there is no such
    plan, which proves that no unpriced row is in a plan as cheap as the one found (its exact cost is at least
    its bound), ties included; False when HiGHS cannot tell in its node limit."""
    table = _lp_table(candidates, relaxed.stand_ins[wanted])
    priced = len(candidates.pruned)
    found = plan_within(
        table,
        limits,
        table["cost_cents"].to_numpy(dtype=np.int64),
        np.arange(priced, len(table)),
        int(round(upper)),
        PLAN_WITHIN_S,
    )
    if found is None or found is False:
        return found
    out = np.zeros(len(wanted), dtype=bool)
    out[np.flatnonzero(wanted)[found[priced:]]] = True
    return out


@dataclass(frozen=True)
class _Relaxation:
    """The LP over the priced rows and a stand-in per `key` (workload and column of the limits) for the
    unpriced ones; `bound` is None where it has no solution."""

    stand_ins: pd.DataFrame
    key: pd.Series
    first: np.ndarray  # the stand-ins' rows: the cheapest bound of each key
    priced: int  # how many priced rows come before the stand-ins in the LP
    bound: LpBound | None

    @property
    def picked(self) -> np.ndarray:
        """Per stand-in, whether the relaxation uses it."""
        if self.bound is None:
            return np.zeros(len(self.first), dtype=bool)
        return self.bound.x[self.priced :] > 1e-9

    @property
    def reduced(self) -> np.ndarray:
        """Per unpriced row, its reduced cost: its stand-in's plus how much dearer its bound is (the same
        column of the limits, so the same duals)."""
        assert self.bound is not None and self.bound.reduced is not None
        cents = self.stand_ins["cost_cents"].to_numpy()
        standing = pd.Series(
            self.bound.reduced[self.priced :] - cents[self.first],
            index=self.key.iloc[self.first],
        )
        return standing.loc[self.key].to_numpy() + cents

    def rows_of(self, stand_ins: np.ndarray) -> tuple[pd.DataFrame, pd.Series]:
        """The unpriced rows these stand-ins stand for, and their keys."""
        rows = self.key.isin(set(self.key.iloc[self.first[stand_ins]])).to_numpy()
        return self.stand_ins[rows], self.key[rows]


def _relaxed(
    candidates: CandidateSet, pending: Pending, keys: np.ndarray, limits: Limits
) -> _Relaxation:
    """The relaxation now; `keys`: `coupling_key` of every deferred row (`Pending.every`)."""
    stand_ins = pending.stand_ins()
    key = pd.Series(keys[stand_ins.index.to_numpy()])
    stand_ins = stand_ins.reset_index(drop=True)
    # one stand-in per workload and column of the limits: the cheapest bound stands for the rest in the LP
    first = stand_ins.groupby(key, sort=False)["cost_cents"].idxmin().to_numpy()
    table = _lp_table(candidates, stand_ins.loc[first])
    bound = lp_bound(table, limits, table["cost_cents"].to_numpy(dtype=np.int64))
    return _Relaxation(stand_ins, key, first, len(candidates.pruned), bound)


def _lp_table(candidates: CandidateSet, stand_ins: pd.DataFrame) -> pd.DataFrame:
    """The priced rows, then `stand_ins` at their bounds, as the LP and branch and bound read candidates."""
    table = pd.concat(
        [candidates.pruned[list(LP_COLUMNS)], stand_ins[list(LP_COLUMNS)]],
        ignore_index=True,
    )
    table["provider_region"] = table["provider"] + "/" + table["region"]
    return table
