"""A greedy list scheduler for `planner batch`: the benchmark's baseline and CP-SAT's first hint.

Runs in due-date order (a run waits for the runs it comes `after`); each takes the cheapest
of its candidates that fits, at the earliest start where quotas, node limits and reservation
capacity allow inside its window, ending early enough that the runs after it keep their shortest
durations off the reservations before their due dates (failing that, anywhere in its window).
Each reservation pool is sized by the peak demand of the runs whose cheapest candidate (reserved
compute priced at the reserved rate) is on the pool, and kept only if that pays against their
cheapest other candidates.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from planner.batch.model import BatchLimits, RunInfo
from planner.candidates.limits import COST_RESOLUTION_USD, node_cap, quota_mask


def endpoint_occupancy(
    options: pd.DataFrame,
    chosen: pd.DataFrame,
    windows: dict[str, tuple[int, int]],
    limits: BatchLimits,
) -> list[tuple[tuple, int, int, int]]:
    """What endpoints placed beforehand hold, as the greedy counts it: (limit, first step, end step, amount),
    the most GPUs or nodes they run in any period, for their whole window."""
    if chosen is None or chosen.empty:
        return []
    frame = chosen.join(
        options[
            ["offer_key", "provider", "gpu", "gpu_family", "gpus_per_node", "pool"]
        ],
        on="option",
    )
    frame["gpus"] = frame["nodes"] * frame["gpus_per_node"]
    out = []
    for name, mine in frame.groupby("workload", sort=True):
        start, end = windows[name]
        for key in limits.gpu_quotas:
            used = mine[quota_mask(mine, key)].groupby("period")["gpus"].sum()
            if len(used) and used.max() > 0:
                out.append((("quota", key), start, end, int(used.max())))
        for (pool, offer), rows in mine.groupby(["pool", "offer_key"]):
            peak = int(rows.groupby("period")["nodes"].sum().max())
            if peak:
                out.append(
                    (
                        ("pool", int(pool)) if pool >= 0 else ("offer", offer),
                        start,
                        end,
                        peak,
                    )
                )
    return out


def greedy(
    cands: pd.DataFrame,
    runs: list[RunInfo],
    pools,
    limits: BatchLimits,
    steps: int,
    held: list[tuple[tuple, int, int, int]] = (),
) -> dict:
    """The list scheduler described in the module docstring; returns cost, bought, cids, starts. `held`:
    capacity endpoints placed beforehand hold (`endpoint_occupancy`), which the runs fit around."""
    cands = cands.reset_index(drop=True)
    uses: list[list[tuple[tuple, int]]] = [[] for _ in range(len(cands))]
    capacity: dict[tuple, int] = {}
    for key, quota in limits.gpu_quotas.items():
        for i in np.flatnonzero(quota_mask(cands, key).to_numpy()):
            uses[i].append((("quota", key), int(cands.at[i, "gpus"])))
        capacity[("quota", key)] = int(quota)
    for i, row in enumerate(cands.itertuples(index=False)):
        if row.pool >= 0:
            uses[i].append((("pool", int(row.pool)), int(row.nodes)))
            continue
        cap = node_cap(limits.node_limits.get(row.offer_key), row.max_nodes)
        if cap is not None:
            uses[i].append((("offer", row.offer_key), int(row.nodes)))
            capacity[("offer", row.offer_key)] = cap
    run_map = {r.name: r for r in runs}
    by_run = {name: rows for name, rows in cands.groupby("run").indices.items()}
    # reservation sizing: runs whose cheapest option (reserved compute at the reserved rate) is the pool
    bought = []
    for p, pool in enumerate(pools):
        demand = np.zeros(steps + 1)
        amortised_cents, other_cents = 0.0, 0.0
        for name, rows in by_run.items():
            frame = cands.loc[rows]
            amortised = frame.assign(
                eff=np.where(
                    frame["pool"] == p,
                    frame["cost_cents"]
                    + frame["nodes"]
                    * frame["wall_q_h"]
                    * pool.price_per_node_h
                    / COST_RESOLUTION_USD,
                    frame["cost_cents"],
                )
            )
            amortised = amortised[(amortised["pool"] == p) | (amortised["pool"] < 0)]
            if amortised.empty:
                continue
            best = amortised.loc[amortised["eff"].idxmin()]
            if best["pool"] != p:
                continue
            run = run_map[name]
            first = max(run.release, pool.start)
            demand[first : first + int(best["duration_steps"])] += int(best["nodes"])
            amortised_cents += best["cost_cents"]
            others = amortised[amortised["pool"] < 0]
            other_cents += others["cost_cents"].min() if len(others) else math.inf
        reserved_by_endpoints = [
            (first, end, amount)
            for key, first, end, amount in held
            if key == ("pool", p)
        ]
        for first, end, amount in reserved_by_endpoints:
            demand[first:end] += amount
        peak = int(min(pool.max_nodes, demand.max()))
        peak = max(peak, pool.min_nodes)
        pays = peak * pool.cents_per_node + amortised_cents < other_cents
        bought.append(peak if pays or pool.min_nodes or reserved_by_endpoints else 0)
        capacity[("pool", p)] = bought[-1]
    usage = {key: np.zeros(steps + 1, dtype=np.int64) for key in capacity}
    for key, first, end, amount in held:
        if key in usage:
            usage[key][first:end] += amount
    overfull = [
        key for key in usage if usage[key].max(initial=0) > capacity[key]
    ]  # endpoints placed one by one
    order = sorted(runs, key=lambda r: (r.due, r.release, r.name))
    latest = _latest_ends(
        runs,
        {
            name: int(_open_market(cands.loc[rows])["duration_steps"].min())
            for name, rows in by_run.items()
        },
    )
    ends: dict[str, int] = {}
    chosen, starts, pending = [], {}, list(order)
    cost = (
        sum(pool.cents_per_node * b for pool, b in zip(pools, bought))
        * COST_RESOLUTION_USD
    )
    failed = []
    while pending:
        run = next(
            (r for r in pending if all(b in ends or b in failed for b in r.after)), None
        )
        if run is None:
            break
        pending.remove(run)
        if any(b in failed for b in run.after) or run.name not in by_run:
            failed.append(run.name)
            continue
        earliest = max([run.release] + [ends[b] for b in run.after])
        best = None
        for end_by in dict.fromkeys(
            (latest[run.name], run.due)
        ):  # leaving room for what follows, if it can
            for i in sorted(
                by_run[run.name],
                key=lambda i: (
                    cands.at[i, "cost_cents"],
                    cands.at[i, "duration_steps"],
                ),
            ):
                d = int(cands.at[i, "duration_steps"])
                lo, hi = earliest, end_by - d
                pool = int(cands.at[i, "pool"])
                if pool >= 0:
                    lo, hi = max(lo, pools[pool].start), min(hi, pools[pool].end - d)
                if hi < lo:
                    continue
                ok = np.ones(hi - lo + 1, dtype=bool)
                for key, amount in uses[i]:
                    if amount > capacity[key]:
                        ok[:] = False
                        break
                    window = np.lib.stride_tricks.sliding_window_view(
                        usage[key][lo : hi + d], d
                    ).max(axis=1)
                    ok &= window + amount <= capacity[key]
                if ok.any():
                    best = (i, lo + int(np.argmax(ok)), d)
                    break  # the cheapest candidate that fits
            if best is not None:
                break
        if best is None:
            failed.append(run.name)
            continue
        i, s, d = best
        for key, amount in uses[i]:
            usage[key][s : s + d] += amount
        ends[run.name] = s + d
        starts[run.name] = s
        chosen.append(i)
        cost += float(cands.at[i, "cost_usd"])  # as the model reports its objective
    required_failed = [r for r in failed if run_map[r].required] + [
        f"endpoints over {k[1]}" for k in overfull
    ]
    priority = sum(
        run_map[cands.at[i, "run"]].priority
        for i in chosen
        if not run_map[cands.at[i, "run"]].required
    )
    return {
        "cost_usd": cost,
        "bought": bought,
        "cids": {cands.at[i, "cid"] for i in chosen},
        "starts": starts,
        "failed_required": required_failed,
        "priority": priority,
        "left_out": [r for r in failed if not run_map[r].required],
    }


def _open_market(frame: pd.DataFrame) -> pd.DataFrame:
    """A run's candidates off the reservation pools (whose nodes others may hold), or all if none."""
    open_market = frame[frame["pool"] < 0]
    return open_market if len(open_market) else frame


def _latest_ends(runs: list[RunInfo], shortest: dict[str, int]) -> dict[str, int]:
    """Per run, the step it should end by so every run after it still has its shortest duration before its
    due date: its own due date, tightened back along the `after` chains."""
    latest = {r.name: r.due for r in runs}
    followers: dict[str, list[str]] = {r.name: [] for r in runs}
    for r in runs:
        for b in r.after:
            followers.setdefault(b, []).append(r.name)
    for r in sorted(
        runs, key=lambda r: -r.due
    ):  # a follower is due no earlier than what it follows
        for f in followers.get(r.name, ()):
            if f in shortest:
                latest[r.name] = min(latest[r.name], latest[f] - shortest[f])
    return latest
