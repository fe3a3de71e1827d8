"""Each endpoint of a plan replayed minute by minute for its duration (Poisson arrivals, spot nodes preempted
and replaced, `economics/endpoint_sim.py`): the share of time below capacity and of requests within the SLO,
beside the plan's."""

from __future__ import annotations

from dataclasses import dataclass

from planner.economics.endpoint_sim import PeriodPlan, Pool, replay
from planner.schema.endpoint import weekdays_of
from planner.schema.plan import EndpointRecord


@dataclass(frozen=True)
class BelowCapacity:
    simulated: float
    analytic: float


@dataclass(frozen=True)
class WithinSlo:
    simulated: float


@dataclass(frozen=True)
class EndpointReplay:
    workload: str
    days: int
    below_capacity_share: BelowCapacity
    requests_within_slo_share: WithinSlo


def replay_endpoints(
    endpoints: list[EndpointRecord], seed: int
) -> list[EndpointReplay]:
    """Replay each endpoint for its duration (7 to 365 days)."""
    out = []
    for number, e in enumerate(endpoints):
        periods = []
        for period in e.periods:
            start, _, end = period.hours.partition("-")
            pools = tuple(
                Pool(
                    p.nodes,
                    p.load_nodes,
                    p.preemptions_per_node_h * (1 - p.correlation),
                    p.replace_h,
                    tuple(p.node_requests_per_s),
                    tuple(p.share_of_requests),
                    p.preemptions_per_node_h * p.correlation,
                    p.capacity_wait_h,
                )
                for p in period.pools
            )
            periods.append(
                PeriodPlan(
                    float(end) - float(start),
                    tuple(period.bucket_requests_per_s),
                    pools,
                    weekdays_of(period.days),
                )
            )
        days = int(min(365, max(7, round(e.duration_h / 24))))
        result = replay(periods, days, seed + number)
        out.append(
            EndpointReplay(
                e.workload,
                days,
                BelowCapacity(result.below_capacity_share, e.below_capacity_share),
                WithinSlo(result.within_slo_share),
            )
        )
    return out
