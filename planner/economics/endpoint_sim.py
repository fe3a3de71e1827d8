"""Replay an endpoint's plan: Poisson arrivals at each period's rate, spot nodes preempted at their rate
and replaced after a fixed time, minute by minute.

Per pool and minute, the nodes up carry the load routed to the pool (requests that arrived, over what a
node serves within the SLO); when the load exceeds them, the share of that minute's requests beyond
them misses the SLO. Capacity is below the rate in a minute when fewer nodes are up than the planned
rate needs (the analytic figure's definition). A spot node's life is exponential with mean 1/λ(1−c),
then it is away for the capacity wait (exponential, mean m) and `replace_h`; the pool as a whole is
preempted at λc and away the same way, taking every node (alternating renewal processes, as the plan
assumes); on-demand nodes stay up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MINUTE_H = 1 / 60


@dataclass(frozen=True)
class Pool:
    nodes: int
    need: float  # nodes the planned rate needs
    lam: float  # preemptions per node-hour (0: on demand)
    replace_h: float
    node_rps: tuple[float, ...]  # per bucket
    shares: tuple[float, ...]  # of each bucket's requests routed here
    zone_lam: float = 0.0  # zone-wide preemptions per hour: the whole pool goes
    # mean wait for spot capacity after a preemption, before `replace_h`
    wait_h: float = 0.0


@dataclass(frozen=True)
class PeriodPlan:
    hours: float
    bucket_rates: tuple[float, ...]  # requests/s per bucket
    pools: tuple[Pool, ...]
    # the days it applies to (Monday 0; day 0 of a replay is a Monday)
    weekdays: tuple[int, ...] = tuple(range(7))


@dataclass(frozen=True)
class EndpointReplay:
    days: int
    below_capacity_share: float
    within_slo_share: float  # of requests


def replay(periods: list[PeriodPlan], days: int, seed: int = 0) -> EndpointReplay:
    """Simulate `days` days of the daily (or weekly) plan; node states carry over from period to period."""
    rng = np.random.default_rng(seed)
    minutes_below = minutes = 0
    served = arrived = 0.0
    states: dict[
        tuple[int, int], tuple
    ] = {}  # (period, pool) -> each node's state and time left in it
    for day in range(days):
        for p_index, period in enumerate(periods):
            if day % 7 not in period.weekdays:
                continue
            steps = int(round(period.hours * 60))
            arrivals = rng.poisson(
                np.array(period.bucket_rates) * 60.0,
                size=(steps, len(period.bucket_rates)),
            )
            short = np.zeros(steps, dtype=bool)
            missed = np.zeros(steps)
            for k, pool in enumerate(period.pools):
                up = _up_nodes(
                    pool, steps, rng, states.setdefault((p_index, k), _fresh(pool, rng))
                )
                buckets = [
                    b
                    for b, share in enumerate(pool.shares)
                    if share and pool.node_rps[b] > 0
                ]
                routed = arrivals[:, buckets] * np.array(
                    [pool.shares[b] for b in buckets]
                )
                # nodes needed
                load = routed @ (
                    1 / (60.0 * np.array([pool.node_rps[b] for b in buckets]))
                )
                short |= up < pool.need - 1e-9
                over = np.where(
                    load > up,
                    1 - np.divide(up, load, out=np.ones(steps), where=load > 0),
                    0.0,
                )
                missed += routed.sum(axis=1) * over
            minutes_below += int(short.sum())
            minutes += steps
            arrived += float(arrivals.sum())
            served += float(arrivals.sum() - missed.sum())
    return EndpointReplay(
        days,
        minutes_below / minutes if minutes else 0.0,
        served / arrived if arrived else 1.0,
    )


def _fresh(pool: Pool, rng) -> tuple[np.ndarray, np.ndarray]:
    """Each node's state (up or away) and the hours left in it, and last the zone's; all start up."""
    rates = np.r_[np.full(pool.nodes, pool.lam), pool.zone_lam]
    left = np.where(
        rates > 0, rng.exponential(1 / np.where(rates > 0, rates, 1.0)), np.inf
    )
    return np.ones(pool.nodes + 1, dtype=bool), left


def _up_nodes(
    pool: Pool, steps: int, rng, state: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Nodes up in each minute, advancing every node's (and the zone's) alternating up/away clock in place:
    up for an exponential time, then away for the capacity wait (exponential, mean `wait_h`) and
    `replace_h`. While the zone is away, every node is."""
    if pool.lam <= 0 and pool.zone_lam <= 0:
        return np.full(steps, pool.nodes)
    is_up, left = state
    rates = np.r_[np.full(pool.nodes, pool.lam), pool.zone_lam]
    up = np.zeros(steps, dtype=int)
    for minute in range(steps):
        up[minute] = int(is_up[:-1].sum()) if is_up[-1] else 0
        left -= MINUTE_H
        for i in np.flatnonzero(left <= 0):
            while left[i] <= 0:  # a change of state (or several) within the minute
                is_up[i] = not is_up[i]
                wait = rng.exponential(pool.wait_h) if pool.wait_h > 0 else 0.0
                left[i] += (
                    rng.exponential(1 / rates[i]) if is_up[i] else pool.replace_h + wait
                )
    return up
