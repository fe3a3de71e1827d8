"""What a launcher needs of a plan: each placed job (or a quarter's scheduled run) as a `LaunchJob`, and the
scenario's quotas as `Quota`s, read from the plan's records and the scenario they were planned from. The
launchers' files (`skypilot`, `dstack`, `kueue`) are rendered from these and from nothing else.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from planner.schema.plan import (
    AssignmentRecord,
    PlanRecord,
    ScheduledRunRecord,
    ScheduleRecord,
    StorageRecord,
)

PLACEHOLDER = "REPLACE-ME"
"""Every value the planner cannot know (a bucket, an image, a command): `REPLACE-ME-<what>`, never invented."""


def placeholder(what: str) -> str:
    return f"{PLACEHOLDER}-{what}"


@dataclass(frozen=True)
class LaunchJob:
    """One job as the plan placed it, in the terms every launcher takes."""

    name: str  # the workload's (or run's) name, as written in the scenario
    provider: str
    region: str
    instance_type: str
    gpu: str  # the catalog's GPU name (H100-SXM)
    gpus_per_node: int
    nodes: int
    market: str  # on_demand | spot | spot_fallback | reserved
    checkpoint_interval_s: int | None  # None: no checkpoints (one segment)
    expected_cost_usd: float | None
    expected_wall_h: float | None
    deadline_h: float | None  # from its start; None: none
    deadline_confidence: float | None
    p_deadline: float | None
    storage: StorageRecord | None
    data_gib: float
    data_location: str | None
    start: datetime | None = None  # a quarter's run: when it is scheduled to start
    end: datetime | None = None
    after: tuple[str, ...] = ()
    # a quarter's run on reserved nodes, or a job on a scenario's purchase option: which one
    reservation: str | None = None
    buy: str | None = None  # a purchase option's: what to buy and when

    @property
    def slug(self) -> str:
        """The name as a DNS-1123 label (Kubernetes objects, SkyPilot clusters): lower case, `-`, 63 characters."""
        return slug(self.name)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def on_spot(self) -> bool:
        return self.market in ("spot", "spot_fallback")


def slug(text: str, limit: int = 63) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return (cleaned[:limit].rstrip("-")) or "job"


def _interval_s(hours: float | None, work_h: float) -> int | None:
    """Seconds between checkpoints; None where the plan writes none before the end (one segment)."""
    if hours is None or not math.isfinite(hours) or hours >= work_h * (1 - 1e-9):
        return None
    return max(1, round(hours * 3600))


def _data(scenario_workloads, name: str) -> tuple[float, str | None]:
    workload = scenario_workloads.get(name)
    if workload is None:
        return 0.0, None
    return float(workload.data.size), workload.data.location


def plan_jobs(record: PlanRecord, workloads: dict, gpus: dict) -> list[LaunchJob]:
    """The plan's jobs (`workloads`: the scenario's, by name, for where their data lives; `gpus`: each offer's
    GPU by `provider/region/instance_type`)."""
    return [_job(a, workloads, gpus) for a in record.assignments]


def _job(a: AssignmentRecord, workloads: dict, gpus: dict) -> LaunchJob:
    i = a.inputs
    return LaunchJob(
        name=a.workload,
        provider=a.provider,
        region=a.region,
        instance_type=a.instance_type,
        gpu=a.gpu or gpus.get(f"{a.provider}/{a.region}/{a.instance_type}", ("", 1))[0],
        gpus_per_node=a.gpus_per_node,
        nodes=a.nodes,
        market=a.market,
        checkpoint_interval_s=_interval_s(a.checkpoint_interval_h, i.work_h),
        expected_cost_usd=a.expected.cost_usd,
        expected_wall_h=a.expected.wall_h,
        deadline_h=i.time_budget_h,
        deadline_confidence=i.deadline_confidence,
        p_deadline=a.expected.p_deadline,
        storage=a.storage,
        data_gib=_data(workloads, a.workload)[0],
        data_location=_data(workloads, a.workload)[1],
        reservation=a.purchase.name if a.purchase else None,
        buy=a.purchase.buy if a.purchase else None,
    )


def schedule_jobs(record: ScheduleRecord, quarter, gpus: dict) -> list[LaunchJob]:
    """A schedule's runs in the order they start (`quarter`: the runs' dependencies, the reservations' names;
    `gpus` as `plan_jobs`')."""
    runs = {r.name: r for r in quarter.runs}
    labels = [r.label for r in quarter.reservations]
    jobs = []
    for r in record.runs:
        if not isinstance(r, ScheduledRunRecord):
            continue
        run = runs[r.run]
        jobs.append(_run_job(r, run, labels, quarter, gpus))
    return sorted(jobs, key=lambda j: (j.start, j.name))


def _run_job(
    r: ScheduledRunRecord, run, labels: list[str], quarter, gpus: dict
) -> LaunchJob:
    due = run.due or quarter.horizon.end
    gpu = gpus.get(f"{r.provider}/{r.region}/{r.instance_type}", ("", 1))[0]
    return LaunchJob(
        name=r.run,
        provider=r.provider or "",
        region=r.region or "",
        instance_type=r.instance_type or "",
        gpu=gpu,
        gpus_per_node=r.gpus_per_node,
        nodes=r.nodes,
        market=r.market,
        checkpoint_interval_s=_interval_s(r.checkpoint_interval_h, r.inputs.work_h),
        expected_cost_usd=r.cost_usd,
        expected_wall_h=r.expected_wall_h,
        deadline_h=(due - r.start).total_seconds() / 3600,
        deadline_confidence=quarter.defaults.deadline_confidence,
        p_deadline=r.p_deadline,
        storage=r.storage,
        data_gib=float(run.data.size),
        data_location=run.data.location,
        start=r.start,
        end=r.end,
        after=tuple(run.after),
        reservation=labels[r.pool] if r.pool >= 0 else None,
    )


@dataclass(frozen=True)
class Quota:
    """A limit of the scenario, in GPUs at once: over a provider (`gpu` "" for all of its GPUs) or, with
    `instance_type`, over one offer's nodes."""

    provider: str
    gpu: str
    region: str
    instance_type: str
    gpus: (
        int | None
    )  # GPUs at once (a node limit times the offer's GPUs per node); None: nodes not known
    nodes: int | None


def quotas(constraints, jobs: list[LaunchJob]) -> list[Quota]:
    """The scenario's GPU quotas and node limits (`constraints`), the node limits in GPUs where a job of the
    plan says how many GPUs a node of that offer has."""
    per_node = {(j.provider, j.region, j.instance_type): j.gpus_per_node for j in jobs}
    out = []
    for key, gpus in sorted(constraints.gpu_quotas.items()):
        provider, _, gpu = key.partition("/")
        out.append(Quota(provider, gpu, "", "", int(gpus), None))
    for key, nodes in sorted(constraints.node_limits.items()):
        provider, region, instance_type = key.split("/", 2)
        g = per_node.get((provider, region, instance_type))
        out.append(
            Quota(
                provider,
                "",
                region,
                instance_type,
                None if g is None else int(nodes) * g,
                int(nodes),
            )
        )
    return out


@dataclass(frozen=True)
class LaunchService:
    """One pool of an endpoint (an offer and market), with the nodes the plan runs in each traffic period."""

    endpoint: str
    provider: str
    region: str
    instance_type: str
    gpu: str
    gpus_per_node: int
    market: str
    periods: tuple[tuple[str, str, int], ...]  # (hours, days, nodes) per traffic period
    rps_per_node: float | None  # requests/s the plan routes to each node at its busiest
    usd_per_h: float | None  # the whole endpoint's, all pools
    ttft_s: float | None  # the SLO's
    tpot_s: float | None
    start: datetime | None = None
    end: datetime | None = None

    @property
    def name(self) -> str:
        return f"{self.endpoint} on {self.provider} {self.instance_type} {self.market}"

    @property
    def slug(self) -> str:
        return slug(f"{self.endpoint}-{self.instance_type}-{self.market}")

    @property
    def min_nodes(self) -> int:
        return min(n for _, _, n in self.periods)

    @property
    def max_nodes(self) -> int:
        return max(n for _, _, n in self.periods)


def plan_services(endpoints, gpus: dict) -> list[LaunchService]:
    """Each endpoint's pools, one service per (offer, market) it uses in any period."""
    out = []
    for e in endpoints:
        pools: dict[tuple, list] = {}
        for period in e.periods:
            for pool in period.pools:
                key = (pool.provider, pool.region, pool.instance_type, pool.market)
                pools.setdefault(key, []).append((period, pool))
        for (provider, region, instance_type, market), found in pools.items():
            busiest = max(
                (
                    sum(
                        rate * share
                        for rate, share in zip(
                            period.bucket_requests_per_s, pool.share_of_requests
                        )
                    )
                    / pool.nodes
                    for period, pool in found
                    if pool.nodes
                ),
                default=None,
            )
            key = f"{provider}/{region}/{instance_type}"
            offer_gpu, per_node = gpus.get(key, ("", 1))
            gpu = next((p.gpu for _, p in found if p.gpu), None) or offer_gpu
            out.append(
                LaunchService(
                    endpoint=e.workload,
                    provider=provider or "",
                    region=region or "",
                    instance_type=instance_type or "",
                    gpu=gpu,
                    gpus_per_node=int(per_node),
                    market=market or "on_demand",
                    periods=tuple(
                        (period.hours, period.days, pool.nodes)
                        for period, pool in found
                    ),
                    rps_per_node=busiest,
                    usd_per_h=e.usd_per_h,
                    ttft_s=e.slo.ttft_s if e.slo else None,
                    tpot_s=e.slo.tpot_s if e.slo else None,
                    start=_moment(e.start),
                    end=_moment(e.end),
                )
            )
    return out


def _moment(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text)
