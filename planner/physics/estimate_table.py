"""`planner estimate` for workloads: per GPU model and sensible GPU count, the estimate on the offered
shape where the workload finishes soonest, and the best few of them (`--top`).

Split from estimate.py: the command's rows from the estimates, not the estimate itself.
"""

from __future__ import annotations

import math

from planner.physics.estimate import estimate
from planner.physics.hardware_shape import Estimate, Shape, layout_text


def sensible_counts(low: int, high: int) -> list[int]:
    """1, 2, 4, 8, ... within [low, high], plus the bounds themselves."""
    counts = {low, high} | {2**k for k in range(0, 20) if low <= 2**k <= high}
    return sorted(counts)


def shapes_for(offers, gpus: int) -> list[Shape]:
    """Every distinct hardware shape the offers can host `gpus` GPUs on (node size and links)."""
    fitting = offers[
        (gpus % offers["gpus_per_node"] == 0)
        & ((offers["gpus_per_node"] == gpus) | (offers["inter_node"] != "none"))
    ]
    columns = [
        "gpu",
        "gpus_per_node",
        "gpu_vram_gib",
        "intra_node",
        "intra_node_gbs",
        "inter_node",
        "inter_node_gbps",
    ]
    distinct = fitting[columns].drop_duplicates().sort_values(columns, kind="stable")
    return [
        Shape(
            r.gpu,
            int(r.gpus_per_node),
            gpus // int(r.gpus_per_node),
            float(r.gpu_vram_gib),
            r.intra_node,
            float(r.intra_node_gbs),
            r.inter_node,
            float(r.inter_node_gbps),
        )
        for r in distinct.itertuples(index=False)
    ]


def fastest(estimates: list[Estimate]) -> Estimate:
    """The shape the workload finishes soonest on; when none fits, the one closest to fitting."""
    feasible = [e for e in estimates if e.feasible]
    if feasible:
        return min(
            feasible,
            key=lambda e: (e.work_h, -e.shape.inter_node_gbps, e.shape.gpus_per_node),
        )
    return min(
        estimates,
        key=lambda e: (e.memory.total - e.shape.vram_gib, -e.shape.inter_node_gbps),
    )


def estimate_rows(
    loaded, workload_name: str | None = None, gpu_queries: tuple[str, ...] = ()
) -> list[dict]:
    """`planner estimate`: for each workload, GPU model and sensible GPU count, the physics verdict on the
    offered shape (node size, NVLink or PCIe, network) where the workload finishes soonest, as `solve` prices it."""
    from planner.load.catalog import offers_for

    scenario, catalog = loaded.scenario, loaded.catalog
    headroom = scenario.defaults.vram_headroom
    rows = []
    for workload in scenario.workloads:
        if (workload_name and workload.name != workload_name) or workload.serving:
            continue  # endpoints: `candidates.estimate_tables.capacity_rows`
        offers = offers_for(catalog, workload.allow, workload.forbid)
        for gpu_name in sorted(offers["gpu"].unique()):
            if gpu_queries and not any(
                catalog.gpu_matches(gpu_name, q) for q in gpu_queries
            ):
                continue
            on_gpu = offers[offers["gpu"] == gpu_name]
            for count in sensible_counts(workload.gpus.min, workload.gpus.max):
                shapes = shapes_for(on_gpu, count)
                if shapes:
                    rows.append(
                        _row(
                            workload.name,
                            fastest(
                                [
                                    estimate(workload, catalog, s, headroom)
                                    for s in shapes
                                ]
                            ),
                        )
                    )
    return rows


def _row(workload: str, est: Estimate) -> dict:
    parts = {k: round(v, 2) for k, v in est.memory.as_dict().items()}
    return {
        "workload": workload,
        "gpu": est.shape.gpu,
        "gpus": est.shape.gpus,
        "nodes": est.shape.nodes,
        "gpus_per_node": est.shape.gpus_per_node,
        "interconnect": f"{est.shape.intra_node}"
        + (
            f" + {est.shape.inter_node} {est.shape.inter_node_gbps:g}G"
            if est.shape.nodes > 1
            else ""
        ),
        "memory_gib": parts,
        "vram_gib": round(est.shape.vram_gib, 2),
        "fits": est.fits,
        "precision": est.precision,
        "work_h": None if math.isinf(est.work_h) else round(est.work_h, 3),
        "tokens_per_s": round(est.tokens_per_s, 1),
        "scaling_efficiency": round(est.scaling_efficiency, 3),
        "tensor_parallel": est.tensor_parallel,
        "parallelism": layout_text(est),
        "recipe": (est.layout.recipe if est.layout is not None else "") or None,
        "batch": est.batch,
        "reason": est.reason,
    }


def best_rows(rows: list[dict], n: int) -> list[dict]:
    """`planner estimate --top N`: per workload, its N fastest shapes that fit (least work_h); per endpoint, the N
    (GPU, TP) replicas that serve the most requests/s per GPU over its request sizes, each with all its sizes.
    Rows keep their order."""
    keep: set[int] = set()
    for name in dict.fromkeys(r["workload"] for r in rows):
        mine = [i for i, r in enumerate(rows) if r["workload"] == name]
        if "max_requests_per_s" in rows[mine[0]]:
            per_gpu: dict[tuple, float] = {}
            for i in mine:
                shape = (rows[i]["gpu"], rows[i]["tensor_parallel"])
                per_gpu[shape] = (
                    per_gpu.get(shape, 0.0)
                    + rows[i]["max_requests_per_s"] / rows[i]["tensor_parallel"]
                )
            best = sorted(
                (s for s, v in per_gpu.items() if v > 0), key=lambda s: (-per_gpu[s], s)
            )[:n]
            keep.update(
                i for i in mine if (rows[i]["gpu"], rows[i]["tensor_parallel"]) in best
            )
        else:
            keep.update(
                sorted(
                    (i for i in mine if rows[i]["fits"]),
                    key=lambda i: (rows[i]["work_h"], i),
                )[:n]
            )
    return [r for i, r in enumerate(rows) if i in keep]
