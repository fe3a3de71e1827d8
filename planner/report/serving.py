"""An endpoint's plan as people read it (the figures are `solve/endpoint_report.py`'s): nodes and replicas by GPU
type and market in each traffic period, latency at the peak, cost per hour, month and million output tokens, and
the share of time below capacity; and the endpoints' replay beside the plan."""

from __future__ import annotations

import pandas as pd

ENDPOINT_DROP = (
    "gpu",
    "TP",
    "tpot_ms",
    "ttft_ms",
    "load",
    "req/s",
    "replicas",
    "market",
)
"""An endpoint table's columns left out first in a narrow terminal: it keeps the period, the offer, the market,
the nodes and the cost."""


def endpoint_frame(reports: list[dict]) -> pd.DataFrame:
    """One row per (endpoint, period, pool) for the table."""
    rows = []
    for e in reports:
        for period in e["periods"]:
            for pool in period["pools"]:
                rows.append(
                    {
                        "endpoint": e["workload"],
                        **({"days": period["days"]} if "days" in period else {}),
                        "hours": period["hours"],
                        "req/s": period["requests_per_s"],
                        "instance": f"{pool['provider']}/{pool['region']}/{pool['instance_type']}",
                        "gpu": pool["gpu"],
                        "market": pool["market"],
                        "TP": pool["tensor_parallel"],
                        "nodes": pool["nodes"],
                        "replicas": pool["replicas"],
                        "load": f"{pool['load_share']:.0%}",
                        "ttft_ms": _ms(pool["ttft_s"]),
                        "tpot_ms": _ms(pool["tpot_s"]),
                        "usd_per_h": round(pool["usd_per_h"], 2),
                    }
                )
    return pd.DataFrame(rows)


def endpoint_footer(reports: list[dict]) -> list[str]:
    return [
        f"{e['workload']}"
        + (f" ({e['start'][:10]} to {e['end'][:10]})" if "start" in e else "")
        + f": ${e['usd_per_h']:,.2f}/h, ${e['usd_per_month']:,.0f}/month, "
        + (
            f"${e['usd_per_million_output_tokens']:,.3f} per million output tokens, "
            if e["usd_per_million_output_tokens"]
            else ""
        )
        + f"below capacity {e['below_capacity_share']:.3%} of the time (target ≤ {1 - e['availability']:.3%}); "
        f"${e['cost_usd']:,.2f} over {e['duration_h'] / 24:g} days"
        + (
            f" (${e['operating_usd']:,.2f} of it operating its pools)"
            if e["operating_usd"]
            else ""
        )
        + (
            " beside the reservations"
            if any(
                p.get("reservation") and not p.get("usd_per_h")  # a quarter's, prepaid
                for period in e["periods"]
                for p in period["pools"]
            )
            else ""
        )
        + f"; the busiest pool carries {e['busiest_load_share']:.0%} of its capacity within the SLO"
        + _slo_note(e)
        for e in reports
    ]


def _slo_note(e: dict) -> str:
    """The replayed latency at the planned load against the SLO, worst pool and period."""
    worst, slo = e["worst"], e["slo"]
    if worst["ttft_s"] is None:
        return ""
    over = [
        name.upper()
        for name in ("ttft", "tpot")
        if slo[f"{name}_s"] is not None
        and worst[f"{name}_s"] > slo[f"{name}_s"] + 1e-12
    ]
    targets = " and ".join(
        f"{slo[key] * 1e3:,.{digits}f} ms" if slo[key] is not None else "none"
        for key, digits in (("ttft_s", 0), ("tpot_s", 1))
    )
    return (
        f"; replayed at the planned load, p{slo['quantile'] * 100:g} TTFT {worst['ttft_s'] * 1e3:,.0f} ms and "
        f"mean TPOT {worst['tpot_s'] * 1e3:,.1f} ms at worst (targets {targets})"
        + (
            f": {' and '.join(over)} above target, where the capacity model is optimistic"
            if over
            else ""
        )
    )


def _ms(seconds: float | None):
    return None if seconds is None else round(seconds * 1000, 1)
