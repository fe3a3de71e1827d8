"""`planner estimate`'s two tables, for the command and the Python API alike: per workload, GPU and count
(physics/estimate_table.py), and per endpoint, GPU, TP degree and request size, one replica's capacity.

Split from endpoints.py, which builds the options the solver plans with: this is what the command
prints about endpoints, one replica at a time.
"""

from __future__ import annotations

from planner.candidates.endpoints import (
    TENSOR_PARALLEL,
    capacities_or_reason,
    replica_of,
)
from planner.load.catalog import Catalog, offers_for
from planner.physics import batching
from planner.schema.scenario import Scenario


def estimate_tables(
    loaded,
    workload_name: str | None = None,
    gpu_queries: tuple[str, ...] = (),
    top: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """`planner estimate`'s two tables: per workload, GPU and count (`estimate_rows`), and per endpoint, GPU, TP
    and request size (`capacity_rows`); `gpu_queries` as `--gpu` (a name, a family or `NAME:COUNT`), `top` the
    best few of each."""
    from planner.load.catalog import split_accelerator
    from planner.physics.estimate_table import best_rows, estimate_rows

    names = tuple(dict.fromkeys(split_accelerator(q)[0] for q in gpu_queries))
    rows = [
        r
        # H100:8: the rows on nodes of 8
        for r in estimate_rows(loaded, workload_name, names)
        if not gpu_queries
        or any(
            loaded.catalog.accelerator_matches(r["gpu"], r["gpus_per_node"], q)
            for q in gpu_queries
        )
    ]
    capacity = capacity_rows(loaded.scenario, loaded.catalog, workload_name, names)
    if top:
        rows, capacity = best_rows(rows, top), best_rows(capacity, top)
    return rows, capacity


def capacity_rows(
    scenario: Scenario,
    catalog: Catalog,
    workload_name: str | None = None,
    gpu_queries: tuple[str, ...] = (),
) -> list[dict]:
    """`planner estimate` for endpoints: per serving workload, GPU model, TP degree and request size, one
    replica's weights and KV room, the batch that fits, the most requests/s it serves within the SLO, and its
    TTFT (at the SLO's quantile) and mean TPOT at that rate replayed step by step."""
    rows = []
    headroom = scenario.defaults.vram_headroom
    for workload in scenario.workloads:
        if not workload.serving or (workload_name and workload.name != workload_name):
            continue
        offers = offers_for(catalog, workload.allow, workload.forbid).sort_values(
            ["gpu", "gpus_per_node", "key"],
            ascending=[True, False, True],
            kind="stable",
        )
        for gpu_name, on_gpu in offers.groupby("gpu", sort=True):
            if gpu_queries and not any(
                catalog.gpu_matches(gpu_name, q) for q in gpu_queries
            ):
                continue
            # the largest node: every TP degree it offers
            offer = next(on_gpu.itertuples(index=False))
            for tp in (
                [workload.tensor_parallel]
                if workload.tensor_parallel
                else TENSOR_PARALLEL
            ):
                if tp > offer.gpus_per_node or offer.gpus_per_node % tp:
                    continue
                caps = capacities_or_reason(workload, catalog, offer, tp, headroom)
                if caps is None:
                    continue
                replica = replica_of(workload, catalog, offer, tp, headroom)
                for bucket, cap in zip(workload.traffic.buckets, caps):
                    at = cap.at_max
                    replayed = (
                        batching.simulate(
                            replica,
                            bucket.prompt_tokens,
                            bucket.output_tokens,
                            rate=cap.max_requests_per_s,
                        )
                        if cap.serves and cap.limit != "measured"
                        else None
                    )
                    if replayed is not None and replayed.saturated:
                        replayed = None
                    rows.append(
                        {
                            "workload": workload.name,
                            "gpu": gpu_name,
                            "tensor_parallel": tp,
                            "prompt_tokens": bucket.prompt_tokens,
                            "output_tokens": bucket.output_tokens,
                            "max_batch": cap.max_batch,
                            "max_requests_per_s": round(cap.max_requests_per_s, 3),
                            "ttft_ms": round(at.ttft_s * 1e3, 1) if at else None,
                            "tpot_ms": round(at.tpot_s * 1e3, 2) if at else None,
                            "batch_at_max": round(at.batch, 1) if at else None,
                            # the same rate replayed step by step (physics/batching.py): where the two
                            # disagree, the closed form's capacity is off
                            "replayed_ttft_ms": round(
                                replayed.ttft(workload.slo.quantile) * 1e3, 1
                            )
                            if replayed
                            else None,
                            "replayed_tpot_ms": round(replayed.tpot() * 1e3, 2)
                            if replayed
                            else None,
                            "limit": cap.limit if cap.serves else "",
                            "reason": "" if cap.serves else cap.limit,
                        }
                    )
    return rows
