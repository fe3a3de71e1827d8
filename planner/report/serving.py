"""What an endpoint's plan says, per endpoint: nodes and replicas by GPU type and market in each traffic
period, predicted latency at the peak, cost per hour, month and million output tokens, and the expected
share of time below capacity."""
from __future__ import annotations

import json

import pandas as pd

from planner.candidates.endpoint_load import named, pool_load
from planner.candidates.endpoints import below_capacity
from planner.candidates.expand import HOURS_PER_MONTH
from planner.report.render import render_table, to_csv, to_json
from planner.schema.endpoint import weekdays_of
from planner.solve.pipeline import Plan
from planner.solve.serving import LOAD_SCALE, slice_load


def endpoint_reports(plan: Plan) -> list[dict]:
    """The JSON contract's `endpoints`, one per serving workload (in scenario order)."""
    chosen = plan.result.serving if plan.result is not None else pd.DataFrame()
    loaded = plan.loaded
    return serving_reports(chosen, plan.candidates.endpoints, plan.candidates.traffic, loaded.scenario.workloads,
                           loaded.catalog, loaded.scenario.defaults.vram_headroom)


def serving_reports(chosen: pd.DataFrame | None, options: pd.DataFrame, traffic: dict, workloads, catalog,
                    headroom: float, reservations: list[str] = ()) -> list[dict]:
    """Per endpoint of `workloads` (in their order) with nodes in `chosen` (`ServingVars.chosen` over
    `options`): its periods' pools, peak latency, and costs; `catalog` and `headroom` size the replicas.
    A pool on a reservation (an option's `pool`, in a quarter) names it from `reservations`."""
    if chosen is None or chosen.empty:
        return []
    by_name = {w.name: w for w in workloads}
    by_workload = chosen.groupby("workload", sort=False)
    alike: dict[tuple, dict] = {}  # pools of endpoints alike but for their names, replayed once (`pool_load`)
    out = []
    for name in [w.name for w in workloads if w.name in traffic]:
        endpoint, workload = traffic[name], by_name[name]
        mine = by_workload.get_group(name) if name in by_workload.groups else chosen.iloc[0:0]
        shape = workload.model_dump_json(exclude={"name", "description"})
        periods, below, tokens = [], 0.0, 0.0
        for period, hours in enumerate(endpoint.hours):
            rows = mine[mine["period"] == period]
            pools, short = [], 1.0
            for r in rows.itertuples(index=False):
                option = options.iloc[r.option]
                need = sum(slice_load(endpoint, period, b, option.node_rps[b]) * n
                           for b, n in enumerate(r.slices) if n) / LOAD_SCALE
                short *= 1 - below_capacity(int(r.nodes), float(option.away), need, float(option.zone_away))
                key = (shape, option.oid[len(name):], period, need, int(r.nodes), int(r.kept), tuple(r.slices),
                       float(r.cost_usd), float(r.operating_usd))
                if key not in alike:
                    alike[key] = _pool(catalog, headroom, workload, option, endpoint, period, r, need)
                pools.append(dict(alike[key]))
                if getattr(option, "pool", -1) >= 0:
                    pools[-1]["reservation"] = reservations[option.pool]
            rate = float(endpoint.rates[period].sum())
            below += (1 - short) * endpoint.time_share[period]
            tokens += float(endpoint.rates[period] @ endpoint.output_tokens) * hours * 3600 * endpoint.day_share[period]
            days = {"days": workload.traffic.periods[period].days} if workload.traffic.weekly else {}
            periods.append({"hours": workload.traffic.periods[period].hours, **days, "requests_per_s": rate,
                            "bucket_requests_per_s": [float(x) for x in endpoint.rates[period]],
                            "below_capacity_share": 1 - short,
                            "pools": pools, "usd_per_h": sum(p["usd_per_h"] for p in pools)})
        total = float(mine["cost_usd"].sum())
        operating = float(mine["operating_usd"].sum())
        per_day = total / endpoint.days
        peak = max(periods, key=lambda p: p["requests_per_s"])
        out.append({
            "workload": name, "autoscale": endpoint.autoscale, "availability": endpoint.availability,
            "duration_h": endpoint.days * 24, "periods": periods,
            "peak": {"hours": peak["hours"], "ttft_s": _worst(peak, "ttft_s"), "tpot_s": _worst(peak, "tpot_s")},
            "slo": {"ttft_s": workload.slo.ttft, "tpot_s": workload.slo.tpot, "quantile": workload.slo.quantile},  # none: no target
            "worst": {key: max((v for p in periods if (v := _worst(p, key)) is not None), default=None)
                      for key in ("ttft_s", "tpot_s")},
            "busiest_load_share": max((pool["load_share"] for p in periods for pool in p["pools"]), default=0.0),
            "cost_usd": total, "operating_usd": operating, "usd_per_h": per_day / 24, "usd_per_month": per_day / 24 * HOURS_PER_MONTH,
            "usd_per_million_output_tokens": per_day / tokens * 1e6 if tokens else None,
            "below_capacity_share": below,
        })
    return out


def _pool(catalog, headroom: float, workload, option, endpoint, period: int, r, need: float) -> dict:
    """One option's nodes in one period, with the share of its capacity the load routed to it uses and its
    replicas' latency there (`endpoint_load`)."""
    at = pool_load(workload, catalog, headroom, option, need, int(r.kept), [bool(n) for n in r.slices])
    hours = endpoint.hours[period]
    return {"provider": option.provider, "region": option.region, "instance_type": option.instance_type,
            "gpu": option.gpu, "market": option.market, "tensor_parallel": int(option.tp), "nodes": int(r.nodes),
            "replicas": int(r.nodes) * int(option.replicas_per_node), "nodes_counted": int(r.kept),
            "load_nodes": need, "load_share": at.load_share,
            "share_of_requests": [n / endpoint.slices for n in r.slices],
            "node_requests_per_s": [float(x) for x in option.node_rps], "preemptions_per_node_h": float(option.lam_spot),
            "away_share": float(option.away), "zone_away_share": float(option.zone_away),
            "correlation": float(option.correlation), "capacity_wait_h": float(option.capacity_wait_h),
            "replace_h": float(workload.restart_overhead),
            "usd_per_h": (r.cost_usd - r.operating_usd) / (endpoint.days * endpoint.day_share[period] * hours),
            "ttft_s": at.slo_ttft_s, "tpot_s": at.mean_tpot_s,
            "ttft_percentiles_s": named(at.ttft_s), "tpot_percentiles_s": named(at.tpot_s)}


def _worst(period: dict, key: str) -> float | None:
    values = [p[key] for p in period["pools"] if p[key] is not None]
    return max(values) if values else None


ENDPOINT_DROP = ("gpu", "TP", "tpot_ms", "ttft_ms", "load", "req/s", "replicas", "market")
"""An endpoint table's columns left out first in a narrow terminal: it keeps the period, the offer, the market,
the nodes and the cost."""


def endpoint_frame(reports: list[dict]) -> pd.DataFrame:
    """One row per (endpoint, period, pool) for the table."""
    rows = []
    for e in reports:
        for period in e["periods"]:
            for pool in period["pools"]:
                rows.append({"endpoint": e["workload"], **({"days": period["days"]} if "days" in period else {}),
                             "hours": period["hours"], "req/s": period["requests_per_s"],
                             "instance": f"{pool['provider']}/{pool['region']}/{pool['instance_type']}",
                             "gpu": pool["gpu"], "market": pool["market"], "TP": pool["tensor_parallel"],
                             "nodes": pool["nodes"], "replicas": pool["replicas"],
                             "load": f"{pool['load_share']:.0%}",
                             "ttft_ms": _ms(pool["ttft_s"]), "tpot_ms": _ms(pool["tpot_s"]),
                             "usd_per_h": round(pool["usd_per_h"], 2)})
    return pd.DataFrame(rows)


def endpoint_footer(reports: list[dict]) -> list[str]:
    return [f"{e['workload']}" + (f" ({e['start'][:10]} to {e['end'][:10]})" if "start" in e else "")
            + f": ${e['usd_per_h']:,.2f}/h, ${e['usd_per_month']:,.0f}/month, "
            + (f"${e['usd_per_million_output_tokens']:,.3f} per million output tokens, "
               if e["usd_per_million_output_tokens"] else "")
            + f"below capacity {e['below_capacity_share']:.3%} of the time (target ≤ {1 - e['availability']:.3%}); "
            f"${e['cost_usd']:,.2f} over {e['duration_h'] / 24:g} days"
            + (f" (${e['operating_usd']:,.2f} of it operating its pools)" if e["operating_usd"] else "")
            + (" beside the reservations" if any(p.get("reservation") for period in e["periods"]
                                                 for p in period["pools"]) else "")
            + f"; the busiest pool carries {e['busiest_load_share']:.0%} of its capacity within the SLO"
            + _slo_note(e) for e in reports]


def _slo_note(e: dict) -> str:
    """The replayed latency at the planned load against the SLO, worst pool and period."""
    worst, slo = e["worst"], e["slo"]
    if worst["ttft_s"] is None:
        return ""
    over = [name.upper() for name in ("ttft", "tpot")
            if slo[f"{name}_s"] is not None and worst[f"{name}_s"] > slo[f"{name}_s"] + 1e-12]
    targets = " and ".join(f"{slo[key] * 1e3:,.{digits}f} ms" if slo[key] is not None else "none"
                           for key, digits in (("ttft_s", 0), ("tpot_s", 1)))
    return (f"; replayed at the planned load, p{slo['quantile'] * 100:g} TTFT {worst['ttft_s'] * 1e3:,.0f} ms and "
            f"mean TPOT {worst['tpot_s'] * 1e3:,.1f} ms at worst (targets {targets})"
            + (f": {' and '.join(over)} above target, where the capacity model is optimistic" if over else ""))


def _ms(seconds: float | None):
    return None if seconds is None else round(seconds * 1000, 1)





def endpoint_replays(reports: list[dict], seed: int) -> list[dict]:
    """Replay each endpoint of a plan (the JSON contract's `endpoints`) for its duration (7 to 365 days)."""
    from planner.economics.endpoint_sim import PeriodPlan, Pool, replay

    out = []
    for number, e in enumerate(reports):
        periods = []
        for period in e["periods"]:
            start, _, end = period["hours"].partition("-")
            pools = tuple(Pool(p["nodes"], p["load_nodes"], p["preemptions_per_node_h"] * (1 - p["correlation"]),
                               p["replace_h"], tuple(p["node_requests_per_s"]), tuple(p["share_of_requests"]),
                               p["preemptions_per_node_h"] * p["correlation"], p["capacity_wait_h"])
                          for p in period["pools"])
            periods.append(PeriodPlan(float(end) - float(start), tuple(period["bucket_requests_per_s"]), pools,
                                      weekdays_of(period.get("days", "daily"))))
        days = int(min(365, max(7, round(e["duration_h"] / 24))))
        result = replay(periods, days, seed + number)
        out.append({"workload": e["workload"], "days": days,
                    "below_capacity_share": {"simulated": result.below_capacity_share,
                                             "analytic": e["below_capacity_share"]},
                    "requests_within_slo_share": {"simulated": result.within_slo_share}})
    return out


def replay_text(replays: list[dict], fmt: str, jobs: str = "") -> str:
    """The replays after the jobs' Monte-Carlo text (`jobs`); JSON is {"workloads": [...], "endpoints": [...]};
    CSV, the jobs' rows, a blank line and the endpoints' rows."""
    if fmt == "json":
        return to_json({"workloads": json.loads(jobs) if jobs else [], "endpoints": replays})
    if jobs:
        return jobs + ("\n" if fmt == "csv" else "") + replay_text(replays, fmt)
    frame = pd.DataFrame([{"endpoint": r["workload"], "days": r["days"],
                           "below_capacity_sim": f"{r['below_capacity_share']['simulated']:.4%}",
                           "below_capacity_analytic": f"{r['below_capacity_share']['analytic']:.4%}",
                           "requests_within_slo_sim": f"{r['requests_within_slo_share']['simulated']:.4%}"}
                          for r in replays])
    if fmt == "csv":
        return to_csv(frame)
    return render_table(frame, title="endpoints replayed minute by minute (Poisson arrivals, preemptions, "
                                     "replacements) against the plan")
