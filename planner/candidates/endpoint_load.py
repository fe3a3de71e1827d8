"""What a planned pool's replicas see at the load routed to them: the share of their capacity within the SLO that
load uses (the rest is the headroom left for bursts) and the latency percentiles of the step-by-step replay of
continuous batching (`physics/batching.py`) at that rate, Poisson arrivals.

`planner solve` reports it per pool; `planner estimate --plan` shows it for a plan read back.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.candidates.endpoints import endpoint_options, replica_of
from planner.errors import PlannerError
from planner.physics import batching
from planner.schema.plan import EndpointRecord

PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class PoolLoad:
    """One pool in one period. `load_share`: the planned load over the capacity within the SLO of the nodes it
    counts (1 − it is the headroom left); `ttft_s`/`tpot_s`: per percentile (PERCENTILES, plus the SLO's), the
    worst bucket's; `slo_ttft_s`: TTFT at the SLO's quantile, `mean_tpot_s`: mean TPOT (what the SLO states).
    The latencies are None for a measured capacity (no model to replay) or where the replay saturates."""

    load_share: float
    ttft_s: dict[float, float] | None
    tpot_s: dict[float, float] | None
    slo_ttft_s: float | None
    mean_tpot_s: float | None


def pool_load(
    workload,
    catalog,
    headroom: float,
    option,
    need: float,
    kept: int,
    served: list[bool],
) -> PoolLoad:
    """`option`: an endpoint option (a row of `endpoint_options`); `need`: the load routed to it in nodes of
    capacity; `kept`: the nodes it counts; `served`: per bucket, whether any of its requests come here."""
    load = need / kept if kept else 0.0
    none = PoolLoad(load, None, None, None, None)
    if "measured" in option.limits or not kept:
        return none
    replica = replica_of(workload, catalog, option, int(option.tp), headroom)
    quantile = workload.slo.quantile
    points = sorted(set(PERCENTILES) | {quantile})
    ttft = {q: 0.0 for q in points}
    tpot = {q: 0.0 for q in points}
    slo_ttft = mean_tpot = 0.0
    for b, bucket in enumerate(workload.traffic.buckets):
        rate = load * option.node_rps[b] / option.replicas_per_node
        if not served[b] or rate <= 0:
            continue
        at = batching.simulate(
            replica, bucket.prompt_tokens, bucket.output_tokens, rate=rate
        )
        if at.saturated:
            return none
        for q in points:
            ttft[q] = max(ttft[q], at.ttft(q))
            tpot[q] = max(tpot[q], at.tpot(q))
        slo_ttft, mean_tpot = (
            max(slo_ttft, at.ttft(quantile)),
            max(mean_tpot, at.tpot()),
        )
    return PoolLoad(load, ttft, tpot, slo_ttft, mean_tpot)


def planned_loads(
    scenario, catalog, endpoints: list[EndpointRecord], where
) -> list[dict]:
    """Per endpoint, period and pool of a plan read back (`load.plan_file.load_plan`): its replicas' load,
    headroom left and latency percentiles. `where(loc)` names a place in the plan file for an error."""
    options, _, _ = endpoint_options(scenario, catalog, None)
    by_key = {
        (o.workload, o.provider, o.region, o.instance_type, int(o.tp), o.market): o
        for o in options.itertuples(index=False)
    }
    workloads = {w.name: w for w in scenario.workloads}
    rows = []
    for i, e in enumerate(endpoints):
        workload = workloads[e.workload]
        for j, period in enumerate(e.periods):
            for k, pool in enumerate(period.pools):
                loc = ("endpoints", i, "periods", j, "pools", k)
                key = (
                    pool.provider,
                    pool.region,
                    pool.instance_type,
                    pool.tensor_parallel,
                    pool.market,
                )
                if None in key or pool.nodes_counted is None:
                    raise PlannerError(
                        "expected a pool of `planner solve --format json` (provider, region, "
                        "instance_type, tensor_parallel, market, nodes_counted)",
                        where(loc),
                    )
                option = by_key.get((e.workload, *key))
                if option is None:
                    raise PlannerError(
                        f"no option of the scenario runs {key[0]}/{key[1]}/{key[2]} at TP {key[3]} "
                        f"on {key[4]}",
                        where(loc),
                    )
                at = pool_load(
                    workload,
                    catalog,
                    scenario.defaults.vram_headroom,
                    option,
                    pool.load_nodes,
                    pool.nodes_counted,
                    [share > 0 for share in pool.share_of_requests],
                )
                rows.append(
                    {
                        "workload": e.workload,
                        "days": period.days,
                        "hours": period.hours,
                        "instance": "/".join(key[:3]),
                        "gpu": option.gpu,
                        "tensor_parallel": key[3],
                        "market": key[4],
                        "replicas": pool.nodes * int(option.replicas_per_node),
                        "load_share": at.load_share,
                        "headroom_left": max(0.0, 1 - at.load_share),
                        "ttft_s": named(at.ttft_s),
                        "tpot_s": named(at.tpot_s),
                        "slo_quantile": workload.slo.quantile,
                    }
                )
    return rows


def named(values: dict[float, float] | None) -> dict[str, float] | None:
    """Percentiles keyed as people write them: {0.9: x} -> {"p90": x}."""
    return None if values is None else {f"p{q * 100:g}": v for q, v in values.items()}
