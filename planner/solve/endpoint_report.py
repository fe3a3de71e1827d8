"""What an endpoint's plan says, per endpoint (the JSON contract's `endpoints`): nodes and replicas by GPU type
and market in each traffic period, predicted latency at the peak, cost per hour, month and million output tokens,
and the expected share of time below capacity; computed here so the reports only format it."""

from __future__ import annotations

import pandas as pd

from planner.candidates.endpoint_load import named, pool_load
from planner.candidates.pool_availability import below_capacity
from planner.schema.units import HOURS_PER_MONTH
from planner.solve.pipeline import Plan
from planner.solve.serving import LOAD_SCALE, slice_load


def endpoint_reports(plan: Plan) -> list[dict]:
    """The JSON contract's `endpoints`, one per serving workload (in scenario order)."""
    chosen = plan.result.serving if plan.result is not None else pd.DataFrame()
    loaded = plan.loaded
    return serving_reports(
        chosen,
        plan.candidates.endpoints,
        plan.candidates.traffic,
        loaded.scenario.workloads,
        loaded.catalog,
        loaded.scenario.defaults.vram_headroom,
    )


def serving_reports(
    chosen: pd.DataFrame | None,
    options: pd.DataFrame,
    traffic: dict,
    workloads,
    catalog,
    headroom: float,
    reservations: list[str] = (),
) -> list[dict]:
    """Per endpoint of `workloads` (in their order) with nodes in `chosen` (`ServingVars.chosen` over
    `options`): its periods' pools, peak latency, and costs; `catalog` and `headroom` size the replicas.
    A pool on a reservation (an option's `pool`, in a quarter) names it from `reservations`."""
    if chosen is None or chosen.empty:
        return []
    by_name = {w.name: w for w in workloads}
    by_workload = chosen.groupby("workload", sort=False)
    alike: dict[
        tuple, dict
    ] = {}  # pools of endpoints alike but for their names, replayed once (`pool_load`)
    out = []
    for name in [w.name for w in workloads if w.name in traffic]:
        endpoint, workload = traffic[name], by_name[name]
        mine = (
            by_workload.get_group(name)
            if name in by_workload.groups
            else chosen.iloc[0:0]
        )
        shape = workload.model_dump_json(exclude={"name", "description"})
        periods, below, tokens = [], 0.0, 0.0
        for period, hours in enumerate(endpoint.hours):
            rows = mine[mine["period"] == period]
            pools, short = [], 1.0
            for r in rows.itertuples(index=False):
                option = options.iloc[r.option]
                need = (
                    sum(
                        slice_load(endpoint, period, b, option.node_rps[b]) * n
                        for b, n in enumerate(r.slices)
                        if n
                    )
                    / LOAD_SCALE
                )
                short *= 1 - below_capacity(
                    int(r.nodes), float(option.away), need, float(option.zone_away)
                )
                key = (
                    shape,
                    option.oid[len(name) :],
                    period,
                    need,
                    int(r.nodes),
                    int(r.kept),
                    tuple(r.slices),
                    float(r.cost_usd),
                    float(r.operating_usd),
                )
                if key not in alike:
                    alike[key] = _pool(
                        catalog, headroom, workload, option, endpoint, period, r, need
                    )
                pools.append(dict(alike[key]))
                if getattr(option, "pool", -1) >= 0:
                    pools[-1]["reservation"] = reservations[option.pool]
                elif getattr(option, "purchase", ""):  # a commitment of the scenario's
                    pools[-1]["reservation"] = option.purchase
            rate = float(endpoint.rates[period].sum())
            below += (1 - short) * endpoint.time_share[period]
            tokens += (
                float(endpoint.rates[period] @ endpoint.output_tokens)
                * hours
                * 3600
                * endpoint.day_share[period]
            )
            days = (
                {"days": workload.traffic.periods[period].days}
                if workload.traffic.weekly
                else {}
            )
            periods.append(
                {
                    "hours": workload.traffic.periods[period].hours,
                    **days,
                    "requests_per_s": rate,
                    "bucket_requests_per_s": [float(x) for x in endpoint.rates[period]],
                    "below_capacity_share": 1 - short,
                    "pools": pools,
                    "usd_per_h": sum(p["usd_per_h"] for p in pools),
                }
            )
        total = float(mine["cost_usd"].sum())
        operating = float(mine["operating_usd"].sum())
        per_day = total / endpoint.days
        peak = max(periods, key=lambda p: p["requests_per_s"])
        out.append(
            {
                "workload": name,
                "autoscale": endpoint.autoscale,
                "availability": endpoint.availability,
                "duration_h": endpoint.days * 24,
                "periods": periods,
                "peak": {
                    "hours": peak["hours"],
                    "ttft_s": _worst(peak, "ttft_s"),
                    "tpot_s": _worst(peak, "tpot_s"),
                },
                "slo": {
                    "ttft_s": workload.slo.ttft,
                    "tpot_s": workload.slo.tpot,
                    "quantile": workload.slo.quantile,
                },  # none: no target
                "worst": {
                    key: max(
                        (v for p in periods if (v := _worst(p, key)) is not None),
                        default=None,
                    )
                    for key in ("ttft_s", "tpot_s")
                },
                "busiest_load_share": max(
                    (pool["load_share"] for p in periods for pool in p["pools"]),
                    default=0.0,
                ),
                "cost_usd": total,
                "operating_usd": operating,
                "usd_per_h": per_day / 24,
                "usd_per_month": per_day / 24 * HOURS_PER_MONTH,
                "usd_per_million_output_tokens": per_day / tokens * 1e6
                if tokens
                else None,
                "below_capacity_share": below,
            }
        )
    return out


def _pool(
    catalog, headroom: float, workload, option, endpoint, period: int, r, need: float
) -> dict:
    """One option's nodes in one period, with the share of its capacity the load routed to it uses and its
    replicas' latency there (`endpoint_load`)."""
    at = pool_load(
        workload,
        catalog,
        headroom,
        option,
        need,
        int(r.kept),
        [bool(n) for n in r.slices],
    )
    hours = endpoint.hours[period]
    return {
        "provider": option.provider,
        "region": option.region,
        "instance_type": option.instance_type,
        "gpu": option.gpu,
        "market": option.market,
        "tensor_parallel": int(option.tp),
        "nodes": int(r.nodes),
        "replicas": int(r.nodes) * int(option.replicas_per_node),
        "nodes_counted": int(r.kept),
        "load_nodes": need,
        "load_share": at.load_share,
        "share_of_requests": [n / endpoint.slices for n in r.slices],
        "node_requests_per_s": [float(x) for x in option.node_rps],
        "preemptions_per_node_h": float(option.spot_rate_per_node_h),
        "away_share": float(option.away),
        "zone_away_share": float(option.zone_away),
        "correlation": float(option.correlation),
        "capacity_wait_h": float(option.capacity_wait_h),
        "replace_h": float(workload.restart_overhead),
        "usd_per_h": (r.cost_usd - r.operating_usd)
        / (endpoint.days * endpoint.day_share[period] * hours),
        "ttft_s": at.slo_ttft_s,
        "tpot_s": at.mean_tpot_s,
        "ttft_percentiles_s": named(at.ttft_s),
        "tpot_percentiles_s": named(at.tpot_s),
    }


def _worst(period: dict, key: str) -> float | None:
    values = [p[key] for p in period["pools"] if p[key] is not None]
    return max(values) if values else None
