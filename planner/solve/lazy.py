"""Lazy exact pricing, the solver's half: price only the rows an optimal plan could use.

Generation (`generate(lazy=True)`) prices each workload's rows cheapest bound first and leaves those dearer by
their bound than a candidate it already has (`candidates/lazy.py`). Here the plan is solved on what is
priced; the LP relaxation over the priced rows and the unpriced ones at their bounds gives a bound z and
each unpriced row's reduced cost; any plan that uses a row costs at least z plus the row's reduced cost, at
its bound and so at its exact cost, so a row whose reduced cost exceeds (the plan's cost - z) is in no
cheaper plan. The others are priced and the plan solved again, until none is left that could beat it: the
plan and its proof are those of pricing every row. A scenario with no plan gets every row priced, so that
the explanation of why reads the same candidates. Unpriced rows alike in their column of the shared limits
enter the LP as one, their cheapest bound (`coupling_key`): the others' reduced costs are no lower.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from planner.candidates.generate import CandidateSet
from planner.candidates.limits import Limits, node_cap
from planner.solve.bound import lp_bound
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
    while True:
        result = solve(candidates)
        if pending is None or not pending.left:
            return result
        stand_ins = pending.stand_ins()
        key = coupling_key(stand_ins, limits)
        # one stand-in per workload and column of the limits: the cheapest bound stands for the rest in the LP
        first = stand_ins.groupby(key, sort=False)["cost_cents"].idxmin().to_numpy()
        table = pd.concat(
            [
                candidates.pruned[list(LP_COLUMNS)],
                stand_ins.loc[first, list(LP_COLUMNS)],
            ],
            ignore_index=True,
        )
        table["provider_region"] = table["provider"] + "/" + table["region"]
        cents = table["cost_cents"].to_numpy(dtype=np.int64)
        relaxed = lp_bound(table, limits, cents)
        priced = len(candidates.pruned)
        if relaxed is None:
            # no plan even at the bounds, so none at all: every row priced, for the explanation to read
            wanted = np.ones(len(first), dtype=bool)
        elif result.solved:
            upper = float(result.chosen["cost_cents"].sum())
            wanted = relaxed.can_beat(upper)[priced:]
        else:  # no plan yet: price what the relaxation picks, else everything
            wanted = relaxed.x[priced:] > 1e-9
            if not wanted.any():
                wanted[:] = True
        if not wanted.any():
            result.unpriced = pending.left
            return result
        # a stand-in wanted: every row it stands for (their reduced costs are no lower, so no fewer can do)
        wanted_keys = set(key.iloc[first[wanted]])
        priced = pending.price(stand_ins[key.isin(wanted_keys).to_numpy()])
        candidates.refresh(pending, priced)
