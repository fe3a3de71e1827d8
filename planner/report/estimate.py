"""The `planner estimate` table: per workload, memory per GPU by part against VRAM, the layout chosen
and the productive hours W on each GPU model and count (columns that are zero everywhere left out)."""

from __future__ import annotations

import math

import pandas as pd

from planner.report.render import render_table, to_csv


def estimate_text(
    rows: list[dict], order: list[str], errors: dict | None = None
) -> str:
    """`rows` from `physics.estimate_table.estimate_rows`; one table per workload, in the scenario's `order`, each
    with what its deadlines allow for the estimate's error (`errors`: workload -> `EstimateError`)."""
    out = []
    for name in sorted({r["workload"] for r in rows}, key=order.index):
        table = pd.DataFrame(
            [
                {
                    "gpu": r["gpu"],
                    "gpus": r["gpus"],
                    "nodes": r["nodes"],
                    "link": r["interconnect"],
                    "weights": r["memory_gib"]["weights"],
                    "grads": r["memory_gib"]["gradients"],
                    "optim": r["memory_gib"]["optimizer"],
                    "activ": r["memory_gib"]["activations"],
                    "kv": r["memory_gib"]["kv_cache"],
                    "ovh": r["memory_gib"]["overhead"],
                    "total_gib": r["memory_gib"]["total"],
                    "vram": r["vram_gib"],
                    "fits": "yes" if r["fits"] else "no",
                    "parallelism": r["parallelism"] if r["fits"] else "",
                    "work_h": r["work_h"],
                    "tok_per_s": r["tokens_per_s"] or None,
                    "scaling": r["scaling_efficiency"] or None,
                    "note": r["reason"],
                }
                for r in rows
                if r["workload"] == name
            ]
        )
        table = table.loc[
            :,
            [
                c
                for c in table.columns
                if c not in ("grads", "optim", "kv", "activ", "tok_per_s")
                or table[c].fillna(0).astype(bool).any()
            ],
        ]
        error = (errors or {}).get(name)
        footer = [_error_line(error)] if error is not None else None
        out.append(
            render_table(
                table,
                title=f"workload {name}: memory per GPU (GiB) and productive hours W",
                footer=footer,
            )
            + "\n"
        )
    return "".join(out)


def _error_line(error) -> str:
    """How far deadlines allow real runs to be from W (docs/cost-model.md §12)."""
    if error.exact:
        return "W is taken as exact in P(deadline) (estimate_error: 0)"
    spread = f"{math.exp(error.sigma):.2f}x either way for one standard deviation"
    if error.median:
        return (
            f"W is an estimate: P(deadline) allows for real runs taking {math.exp(error.median):.2f}x it in the "
            f"median and {spread}, as published runs did (estimate_error, docs/cost-model.md §12)"
        )
    return f"W is an estimate: P(deadline) allows for real runs taking {spread} (estimate_error)"


REPLAYED = (
    "replayed_*: the same rate replayed step by step through continuous batching (TTFT at the SLO's "
    "quantile, mean TPOT; '-' where the replay's queue grows without end); above a target, the capacity is "
    "optimistic there, well below, pessimistic"
)


def capacity_text(rows: list[dict], order: list[str]) -> str:
    """`rows` from `candidates.estimate_tables.capacity_rows`: one table per endpoint."""
    out = []
    for name in sorted({r["workload"] for r in rows}, key=order.index):
        table = pd.DataFrame(
            [
                {
                    "gpu": r["gpu"],
                    "TP": r["tensor_parallel"],
                    "prompt": r["prompt_tokens"],
                    "output": r["output_tokens"],
                    "max_batch": r["max_batch"],
                    "max_req_per_s": r["max_requests_per_s"],
                    "ttft_ms": r["ttft_ms"],
                    "tpot_ms": r["tpot_ms"],
                    "batch": r["batch_at_max"],
                    "replayed_ttft_ms": r["replayed_ttft_ms"],
                    "replayed_tpot_ms": r["replayed_tpot_ms"],
                    "limited_by": r["limit"] or r["reason"],
                }
                for r in rows
                if r["workload"] == name
            ]
        )
        out.append(
            render_table(
                table,
                title=f"endpoint {name}: one replica's capacity within the SLO",
                footer=[REPLAYED],
            )
            + "\n"
        )
    return "".join(out)


def planned_load_text(rows: list[dict], order: list[str]) -> str:
    """`rows` from `candidates.endpoint_load.planned_loads`: one table per endpoint of the plan."""
    out = []
    for name in sorted({r["workload"] for r in rows}, key=order.index):
        mine = [r for r in rows if r["workload"] == name]
        weekly = any(r["days"] != "daily" for r in mine)
        table = pd.DataFrame(
            [
                {
                    **({"days": r["days"]} if weekly else {}),
                    "hours": r["hours"],
                    "instance": r["instance"],
                    "gpu": r["gpu"],
                    "TP": r["tensor_parallel"],
                    "market": r["market"],
                    "replicas": r["replicas"],
                    "load": f"{r['load_share']:.0%}",
                    "headroom": f"{r['headroom_left']:.0%}",
                    **{
                        f"ttft_p{q * 100:g}": _ms(r["ttft_s"], q)
                        for q in (0.5, 0.9, 0.99)
                    },
                    **{
                        f"tpot_p{q * 100:g}": _ms(r["tpot_s"], q)
                        for q in (0.5, 0.9, 0.99)
                    },
                }
                for r in mine
            ]
        )
        out.append(
            render_table(
                table,
                title=f"endpoint {name}: each pool's replicas at the planned load (ms)",
                footer=[PLANNED],
            )
            + "\n"
        )
    return "".join(out)


def _ms(values: dict | None, q: float):
    return None if values is None else round(values[f"p{q * 100:g}"] * 1e3, 1)


PLANNED = (
    "load: the planned requests over what the nodes counted serve within the SLO; headroom: what is left for "
    "bursts; percentiles of the step replay at that rate (Poisson arrivals), worst request size; '-' where "
    "there is no model (measured capacity) or the replay's queue grows without end"
)


def rows_csv(rows: list[dict]) -> str:
    """The rows as CSV, nested figures flattened (`memory_gib.weights`, `ttft_s.p90`)."""
    return to_csv(pd.json_normalize(rows)) if rows else ""
