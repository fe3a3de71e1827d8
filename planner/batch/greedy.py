"""A greedy list scheduler for `planner batch`: the benchmark's baseline and CP-SAT's first hint.

Runs in due-date order (a run waits for the runs it comes `after`); each takes the cheapest
of its candidates that fits, at the earliest start where quotas, node limits and reservation
capacity allow inside its window, ending early enough that the runs after it keep their shortest
durations off the reservations before their due dates (failing that, anywhere in its window).
Each reservation pool is sized by the peak demand of the runs whose cheapest candidate (reserved
compute priced at the reserved rate) is on the pool, and kept only if that pays against their
cheapest other candidates. Then the order is tried again, the runs that fared worst first (squeaky
wheel: required runs that found no room, else those that paid most above their cheapest candidate),
and the best schedule kept.
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


_READS = [
    "run",
    "cid",
    "offer_key",
    "pool",
    "nodes",
    "gpus",
    "max_nodes",
    "cost_cents",
    "cost_usd",
    "duration_steps",
    "wall_q_h",
]
"""The candidates' columns the greedy reads."""

ATTEMPTS = 16
"""Orders the greedy tries at most (squeaky wheel): due dates first, then each time with the required runs that
found no room moved to the front, or once every required run has its place, the `SQUEAKY` runs that paid most
above their cheapest candidate off the pools; the best schedule is kept."""
SQUEAKY = 3


def greedy(
    cands: pd.DataFrame,
    runs: list[RunInfo],
    pools,
    limits: BatchLimits,
    steps: int,
    held: list[tuple[tuple, int, int, int]] = (),
    fixed: dict | None = None,
) -> dict:
    """The list scheduler described in the module docstring; returns cost, bought, cids, starts. `held`:
    capacity endpoints placed beforehand hold (`endpoint_occupancy`), which the runs fit around. `fixed`: part
    of a schedule (its `cids`, `starts` and nodes `bought`, as a search's hint) kept as it is, the other runs
    placed around it on those bought nodes. The order is tried again with the runs that fared worst first
    (`ATTEMPTS`): a pretrain due late found the AWS H100 quota taken by those due before it on three of ten
    generated quarters (and with no complete schedule to start from the search ended 3.7-8.8 % above its
    bound), and a few pretrains on dear candidates for want of that quota cost a 500-run quarter 2 %."""
    cands = cands.reset_index(drop=True)
    if (
        cands.empty
    ):  # a quarter of endpoints only: its empty frame lacks some of the runs' columns
        cands = cands.reindex(columns=cands.columns.union(_READS))
    pool_of = cands["pool"].to_numpy(dtype=int)
    nodes = cands["nodes"].to_numpy(dtype=int)
    cents = cands["cost_cents"].to_numpy(dtype=float)
    duration = cands["duration_steps"].to_numpy(dtype=int)
    usd = cands["cost_usd"].to_numpy(dtype=float)
    run_of = cands["run"].to_numpy()
    cid = cands["cid"].to_numpy()
    uses: list[list[tuple[tuple, int]]] = [[] for _ in range(len(cands))]
    capacity: dict[tuple, int] = {}
    gpus = cands["gpus"].to_numpy(dtype=int) if limits.gpu_quotas else None
    for key, quota in limits.gpu_quotas.items():
        for i in np.flatnonzero(quota_mask(cands, key).to_numpy()):
            uses[i].append((("quota", key), int(gpus[i])))
        capacity[("quota", key)] = int(quota)
    for i, (offer, most) in enumerate(zip(cands["offer_key"], cands["max_nodes"])):
        if pool_of[i] >= 0:
            uses[i].append((("pool", int(pool_of[i])), int(nodes[i])))
            continue
        cap = node_cap(limits.node_limits.get(offer), most)
        if cap is not None:
            uses[i].append((("offer", offer), int(nodes[i])))
            capacity[("offer", offer)] = cap
    run_map = {r.name: r for r in runs}
    by_run = {name: rows for name, rows in cands.groupby("run").indices.items()}
    if fixed is not None:
        bought = [int(b) for b in fixed["bought"]]
    else:
        bought = _sized_pools(
            pool_of,
            nodes,
            cents,
            duration,
            nodes * cands["wall_q_h"].to_numpy(dtype=float),
            by_run,
            run_map,
            pools,
            steps,
            held,
        )
    for p, b in enumerate(bought):
        capacity[("pool", p)] = b
    base = {key: np.zeros(steps + 1, dtype=np.int64) for key in capacity}
    for key, first, end, amount in held:
        if key in base:
            base[key][first:end] += amount
    overfull = [
        key for key in base if base[key].max(initial=0) > capacity[key]
    ]  # endpoints placed one by one
    # each run's candidates off the pools (whose nodes others may hold), or all if none
    open_market = {
        name: rows[pool_of[rows] < 0] if (pool_of[rows] < 0).any() else rows
        for name, rows in by_run.items()
    }
    latest = _latest_ends(
        runs, {name: int(duration[rows].min()) for name, rows in open_market.items()}
    )
    # each run's candidates, cheapest first (then the shorter)
    ranked = {
        name: rows[np.lexsort((duration[rows], cents[rows]))]
        for name, rows in by_run.items()
    }
    # what each run's cheapest candidate off the pools costs: what the squeaky wheel measures runs by
    cheapest = {name: usd[rows].min() for name, rows in open_market.items()}
    # a run waits only for runs being scheduled, as in the model (`add_precedence`)
    waits_for = {r.name: [b for b in r.after if b in run_map] for r in runs}
    fee = (
        sum(pool.cents_per_node * b for pool, b in zip(pools, bought))
        * COST_RESOLUTION_USD
    )

    kept = (
        np.flatnonzero(np.isin(cid, list(fixed["cids"]))) if fixed is not None else []
    )

    def fits(i: int, usage: dict, lo: int, hi: int) -> int | None:
        """The earliest start in lo..hi where candidate i fits beside `usage`."""
        d = duration[i]
        ok = np.ones(hi - lo + 1, dtype=bool)
        for key, amount in uses[i]:
            if amount > capacity[key]:
                return None
            window = np.lib.stride_tricks.sliding_window_view(
                usage[key][lo : hi + d], d
            ).max(axis=1)
            ok &= window + amount <= capacity[key]
        return lo + int(np.argmax(ok)) if ok.any() else None

    def attempt(order: list[RunInfo]) -> dict:
        usage = {key: a.copy() for key, a in base.items()}
        ends: dict[str, int] = {}
        chosen: list[int] = []
        starts: dict[str, int] = {}
        failed: list[str] = []

        def place(i: int, s: int) -> None:
            for key, amount in uses[i]:
                usage[key][s : s + duration[i]] += amount
            ends[run_of[i]], starts[run_of[i]] = s + duration[i], s
            chosen.append(i)

        for i in kept:
            place(int(i), fixed["starts"][run_of[i]])
        pending = [r for r in order if r.name not in ends]
        while pending:
            run = next(
                (
                    r
                    for r in pending
                    if all(b in ends or b in failed for b in waits_for[r.name])
                ),
                None,
            )
            if run is None:  # what is left waits in a circle: none of it is placed
                failed += [r.name for r in pending]
                break
            pending.remove(run)
            if any(b in failed for b in waits_for[run.name]) or run.name not in by_run:
                failed.append(run.name)
                continue
            earliest = max([run.release] + [ends[b] for b in waits_for[run.name]])
            best = None
            for end_by in dict.fromkeys(
                (latest[run.name], run.due)
            ):  # leaving room for what follows, if it can
                for i in ranked[run.name]:
                    lo, hi = earliest, end_by - duration[i]
                    if pool_of[i] >= 0:
                        pool = pools[pool_of[i]]
                        lo, hi = max(lo, pool.start), min(hi, pool.end - duration[i])
                    if hi >= lo and (start := fits(i, usage, lo, hi)) is not None:
                        best = (int(i), start)
                        break  # the cheapest candidate that fits
                if best is not None:
                    break
            if best is None:
                failed.append(run.name)
            else:
                place(*best)
        return {
            # as the model reports its objective
            "cost_usd": fee + math.fsum(usd[i] for i in chosen),
            "bought": bought,
            "cids": set(cid[chosen]),
            "starts": starts,
            "failed_required": [r for r in failed if run_map[r].required]
            + [f"endpoints over {k[1]}" for k in overfull],
            "priority": sum(
                run_map[run_of[i]].priority
                for i in chosen
                if not run_map[run_of[i]].required
            ),
            "left_out": [r for r in failed if not run_map[r].required],
            "dearer": [  # the runs that paid most above their cheapest candidate off the pools
                run_of[i]
                for i in sorted(chosen, key=lambda i: cheapest[run_of[i]] - usd[i])[
                    :SQUEAKY
                ]
                if usd[i] > cheapest[run_of[i]] + 0.01
            ],
            "stuck": [  # failed on their own, not for a run they wait for
                r
                for r in failed
                if run_map[r].required and not any(b in failed for b in waits_for[r])
            ],
        }

    order = sorted(runs, key=lambda r: (r.due, r.release, r.name))
    best, tried = None, set()
    for _ in range(ATTEMPTS):
        tried.add(tuple(r.name for r in order))
        found = attempt(order)
        if best is None or _rank(found) < _rank(best):
            best = found
        first = set(found["stuck"] if found["failed_required"] else found["dearer"])
        order = [r for r in order if r.name in first] + [
            r for r in order if r.name not in first
        ]
        if tuple(r.name for r in order) in tried:
            break
    del best["stuck"], best["dearer"]
    return best


def _rank(found: dict) -> tuple:
    """Fewer required runs unplaced, then more priority, then cheaper."""
    return (len(found["failed_required"]), -found["priority"], found["cost_usd"])


def _sized_pools(
    pool_of: np.ndarray,
    nodes: np.ndarray,
    cents: np.ndarray,
    duration: np.ndarray,
    node_h: np.ndarray,
    by_run: dict,
    run_map: dict,
    pools,
    steps: int,
    held,
) -> list[int]:
    """Nodes bought per pool: the peak demand of the runs whose cheapest option (reserved compute at the
    reserved rate) is the pool, kept only if that pays against their cheapest other candidates. The
    candidates' columns as `greedy` read them, by row."""
    bought = []
    for p, pool in enumerate(pools):
        demand = np.zeros(steps + 1)
        amortised_cents, other_cents = 0.0, 0.0
        for name, rows in by_run.items():
            rows = rows[(pool_of[rows] == p) | (pool_of[rows] < 0)]
            if not len(rows):
                continue
            eff = np.where(
                pool_of[rows] == p,
                cents[rows]
                + node_h[rows] * pool.price_per_node_h / COST_RESOLUTION_USD,
                cents[rows],
            )
            best = rows[np.argmin(eff)]
            if pool_of[best] != p:
                continue
            first = max(run_map[name].release, pool.start)
            demand[first : first + duration[best]] += nodes[best]
            amortised_cents += cents[best]
            others = rows[pool_of[rows] < 0]
            other_cents += cents[others].min() if len(others) else math.inf
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
    return bought


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
