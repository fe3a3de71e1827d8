"""Glue from a workload and a hardware shape to the physics: does it fit, and how long is W?

A *shape* is what the physics depends on: GPU model, GPUs per node, node count and the
links between them. Many offers share a shape (the same instance in twenty regions), so
estimates are computed once per (workload, shape) and cached.

The records it reads and returns (Shape, Estimate, Prepared) are in hardware_shape.py; the
`planner estimate` table built from it is in estimate_table.py.
"""

from __future__ import annotations

import dataclasses
import math

from planner.load.catalog import Catalog
from planner.physics import memory as mem
from planner.physics import parallelism, speed
from planner.physics.generation import generation_floor_h, generation_time
from planner.physics.gpus import (
    GpuPerf,
    Topology,
    UnsupportedPrecision,
    effective_precision,
)
from planner.physics.hardware_shape import (
    GIB,
    Estimate,
    Prepared,
    Shape,
    gpu_perf,
    mfu_kind,
    prepare,
    train_precision,
)
from planner.physics.layout import Layout
from planner.physics.memory_inference import (
    inference_memory,
    kv_batch_that_fits,
    serving_need_gib,
)
from planner.schema.workload import Workload

STATELESS_ITEM_H = 5 / 60
"""Item time of a stateless job stated in GPU-hours (no batch structure known): 5 minutes."""


def _ruled_out(
    shape: Shape,
    breakdown: mem.MemoryBreakdown,
    reason: str,
    precision=None,
    tp: int = 1,
    layout=None,
    by: str = "",
) -> Estimate:
    return Estimate(
        shape,
        breakdown,
        False,
        precision,
        math.inf,
        0.0,
        0.0,
        tp,
        None,
        reason,
        layout,
        ruled_out_by=by,
    )


def _failed(
    shape: Shape,
    breakdown: mem.MemoryBreakdown,
    exc: ValueError,
    precision=None,
    tp: int = 1,
    layout=None,
) -> Estimate:
    """Ruled out by what the speed model refused."""
    by = "precision" if isinstance(exc, UnsupportedPrecision) else ""
    return _ruled_out(shape, breakdown, str(exc), precision, tp, layout, by)


def _vram_reason(
    breakdown: mem.MemoryBreakdown, shape: Shape, headroom: float, serving: bool = False
) -> str:
    if serving:
        need = serving_need_gib(breakdown, headroom)
        return (
            f"needs {need:.1f} GiB per GPU for one sequence (with {headroom:.0%} headroom outside the KV cache), "
            f"{shape.gpu} has {shape.vram_gib:.1f} GiB"
        )
    need = breakdown.total * (1 + headroom)
    return f"needs {need:.1f} GiB per GPU (with {headroom:.0%} headroom), {shape.gpu} has {shape.vram_gib:.1f} GiB"


def estimate(
    workload: Workload, catalog: Catalog, shape: Shape, headroom: float
) -> Estimate:
    """Memory per GPU, fit, and W for `workload` on `shape`."""
    return estimate_prepared(prepare(workload, catalog), catalog, shape, headroom)


def estimate_prepared(
    prepared: Prepared, catalog: Catalog, shape: Shape, headroom: float
) -> Estimate:
    """`estimate` of a workload prepared once for the many shapes it is estimated on."""
    workload = prepared.workload
    perf = gpu_perf(catalog.gpus[shape.gpu])
    if shape.gpus < workload.gpus.min or shape.gpus > workload.gpus.max:
        return _ruled_out(
            shape,
            mem.MemoryBreakdown(0, 0, 0, 0, 0, 0),
            f"{shape.gpus} GPUs is outside the workload's range {workload.gpus.min}-{workload.gpus.max}",
        )
    if workload.training_method == "inference":
        return _estimate_inference(prepared, catalog, perf, shape, headroom)
    return _calibrated(
        _estimate_training(prepared, catalog, perf, shape, headroom), catalog
    )


STATED_RECIPE = "stated"
"""The recipe a calibration names for training whose memory the workload states (no layout searched)."""


def recipe_of(layout) -> str:
    """The recipe a calibration and a plan's runs name a layout by."""
    return (layout.recipe if layout is not None else "") or STATED_RECIPE


ANY_RECIPE = "*"
"""In `_efficiency`'s pairs: the factor of a recipe the runs did not measure on that GPU."""


def _efficiency(catalog: Catalog, gpu: str) -> tuple[tuple[str, float], ...]:
    """The calibration's throughput factors of `gpu`, per recipe and for any other (`ANY_RECIPE`); empty where
    it measured none."""
    calibration = catalog.calibration
    if calibration is None or not any(e.gpu == gpu for e in calibration.efficiency):
        return ()
    return tuple(
        (e.recipe, e.factor) for e in calibration.efficiency if e.gpu == gpu
    ) + ((ANY_RECIPE, calibration.gpu_factor(gpu)),)


def _calibrated(estimate: Estimate, catalog: Catalog) -> Estimate:
    """A training estimate with the measured throughput of its GPU and recipe (`catalog.calibration`), where
    runs measured it: the time divided by the factor."""
    if catalog.calibration is None:
        return estimate
    factor = catalog.calibration.efficiency_factor(
        estimate.shape.gpu, recipe_of(estimate.layout)
    )
    if factor == 1.0 or not estimate.feasible:
        return estimate
    return dataclasses.replace(
        estimate,
        work_h=estimate.work_h / factor,
        tokens_per_s=estimate.tokens_per_s * factor,
    )


FLOOR_MARGIN = 1 - 1e-9
"""`work_floor_h` (and the cost floors candidate generation builds on it) are shaded by this, so that rounding
never lifts a floor above what it bounds."""


def work_floor_h(prepared: Prepared, catalog: Catalog, shape: Shape) -> float:
    """A lower bound on `estimate_prepared(...).work_h` (inf where the shape cannot run the workload at all),
    for a small part of its cost: compute (and, generating, weight streaming) at the best rate any layout or
    batch could reach. A planner estimates a shape in full only where this bound does not already rule it out.
    0 where no cheap bound is worked out (work stated in tokens over stated memory)."""
    workload = prepared.workload
    if shape.gpus < workload.gpus.min or shape.gpus > workload.gpus.max:
        return math.inf
    perf = gpu_perf(catalog.gpus[shape.gpu])
    try:
        if workload.training_method == "inference":
            if prepared.model is not None and workload.generation is not None:
                gen = workload.generation
                floor = generation_floor_h(
                    prepared.model,
                    gpu=perf,
                    n_gpus=shape.gpus,
                    weight_precision=workload.precision,
                    batch=gen.batch,
                    prompt_tokens=gen.prompt_tokens,
                    output_tokens=gen.output_tokens,
                    sequences=gen.sequences,
                )
            else:
                floor = _reference_floor_h(
                    workload,
                    catalog,
                    perf,
                    shape,
                    _stated_inference_precision(workload),
                    True,
                )
            return floor * FLOOR_MARGIN
        precision = effective_precision(
            perf, train_precision(workload.precision), workload.fp8_fallback
        )
        tp = workload.tensor_parallel or 1
        if precision is None or not _tp_fits(tp, shape):
            return math.inf
        if workload.work.tokens is None:
            floor = _reference_floor_h(
                workload, catalog, perf, shape, precision, workload.fp8_fallback
            )
        elif workload.memory is not None:
            return 0.0
        else:
            floor = (
                workload.work.tokens
                * parallelism.work_floor_seconds_per_token(
                    prepared.job(_memory_precision(workload, precision)),
                    perf,
                    shape.gpus,
                    prepared.pinned,
                )
                / 3600
            )
        fastest = max([1.0, *dict(_efficiency(catalog, shape.gpu)).values()])
        return floor / fastest * FLOOR_MARGIN
    except ValueError:  # the estimate says why
        return 0.0


def _tp_fits(tp: int, shape: Shape) -> bool:
    """Tensor parallelism stays inside a node: `tp` must divide its GPUs."""
    return tp <= shape.gpus_per_node and shape.gpus_per_node % tp == 0


def _memory_precision(workload: Workload, precision: str) -> str:
    """The precision a training job's states are kept in, given the one it computes in (bf16 states on fp16
    compute, where the GPU lacks bf16)."""
    return "bf16" if precision == "fp16" and workload.precision == "bf16" else precision


def _stated_inference_precision(workload: Workload) -> str:
    """Inference stated in reference GPU-hours runs weight-only int8/int4 at bf16 speed."""
    return "bf16" if workload.precision in ("int8", "int4") else workload.precision


def _reference_floor_h(
    workload: Workload,
    catalog: Catalog,
    perf: GpuPerf,
    shape: Shape,
    precision: str,
    fallback_to_bf16: bool,
) -> float:
    """W of reference GPU-hours at perfect scaling (scaling efficiency only lengthens it)."""
    return speed.reference_scaled_hours(
        workload.work.gpu_hours,
        gpu_perf(catalog.gpu(workload.work.reference_gpu)),
        perf,
        shape.gpus,
        precision,
        1.0,
        fallback_to_bf16,
    )


def _estimate_training(
    prepared: Prepared, catalog: Catalog, perf: GpuPerf, shape: Shape, headroom: float
) -> Estimate:
    workload = prepared.workload
    precision = effective_precision(
        perf, train_precision(workload.precision), workload.fp8_fallback
    )
    if precision is None:
        return _ruled_out(
            shape,
            mem.MemoryBreakdown(0, 0, 0, 0, 0, 0),
            f"{shape.gpu} has no {workload.precision} support (set fp8_fallback: true to run bf16)",
            by="precision",
        )
    tp = workload.tensor_parallel or 1
    if not _tp_fits(tp, shape):
        return _ruled_out(
            shape,
            mem.MemoryBreakdown(0, 0, 0, 0, 0, 0),
            f"tensor_parallel {tp} must divide the GPUs of one node (tensor parallelism stays inside a node)",
            precision,
            tp,
        )
    if workload.memory is not None:
        return _estimate_stated_training(
            prepared, catalog, perf, shape, headroom, precision, tp
        )
    job = prepared.job(_memory_precision(workload, precision))
    choice, reason = parallelism.best_layout(
        job,
        perf,
        shape.topology(),
        shape.vram_gib,
        headroom,
        prepared.pinned,
        _efficiency(catalog, shape.gpu),
    )
    if choice is None:
        return _ruled_out(
            shape, mem.MemoryBreakdown(0, 0, 0, 0, 0, 0), reason, precision, tp
        )
    if reason:
        return _ruled_out(
            shape,
            choice.memory,
            reason,
            precision,
            choice.layout.tp,
            choice.layout,
            by="vram",
        )
    if workload.work.tokens is not None:
        hours = workload.work.tokens * choice.seconds_per_token / 3600
        return Estimate(
            shape,
            choice.memory,
            True,
            precision,
            hours,
            1 / choice.seconds_per_token,
            choice.scaling_efficiency,
            choice.layout.tp,
            layout=choice.layout,
        )
    return _from_reference_hours(
        workload,
        catalog,
        perf,
        shape,
        precision,
        choice.memory,
        choice.scaling_efficiency,
        choice.layout,
    )


def _from_reference_hours(
    workload: Workload,
    catalog: Catalog,
    perf: GpuPerf,
    shape: Shape,
    precision: str,
    breakdown: mem.MemoryBreakdown,
    scaling: float,
    layout: Layout,
) -> Estimate:
    """W of work stated as GPU-hours on a reference GPU: scaled by relative throughput and by this
    shape's scaling efficiency."""
    ref = gpu_perf(catalog.gpu(workload.work.reference_gpu))
    try:
        hours = speed.reference_scaled_hours(
            workload.work.gpu_hours,
            ref,
            perf,
            shape.gpus,
            precision,
            scaling,
            workload.fp8_fallback,
        )
    except ValueError as exc:
        return _failed(shape, breakdown, exc, precision, layout.tp, layout)
    return Estimate(
        shape, breakdown, True, precision, hours, 0.0, scaling, layout.tp, layout=layout
    )


def _estimate_stated_training(
    prepared: Prepared,
    catalog: Catalog,
    perf: GpuPerf,
    shape: Shape,
    headroom: float,
    precision: str,
    tp: int,
) -> Estimate:
    """Memory stated by the workload: data parallelism over every GPU (the layout is the user's)."""
    workload, arch = prepared.workload, prepared.arch
    breakdown = _stated(workload, shape)
    if not mem.fits(breakdown, shape.vram_gib, headroom):
        return _ruled_out(
            shape,
            breakdown,
            _vram_reason(breakdown, shape, headroom),
            precision,
            tp,
            by="vram",
        )
    sharding = workload.sharding or ("zero3" if workload.memory.shardable else "none")
    layout = Layout(
        tp=tp,
        dp=shape.gpus // tp,
        zero=sharding,
        recompute=workload.activation_checkpointing or "selective",
        micro_batch=workload.micro_batch or 1,
        recipe="" if workload.recipe == "auto" else workload.recipe,
    )
    common = dict(
        gpu=perf,
        topology=shape.topology(),
        precision=precision,
        kind=mfu_kind(workload),
        overlap=workload.comm_overlap,
        seq_len=workload.sequence_length,
        global_batch_tokens=workload.global_batch_tokens,
        fallback_to_bf16=workload.fp8_fallback,
    )
    if workload.work.tokens is not None:
        result = speed.training_time(
            prepared.model,
            tokens=workload.work.tokens,
            method=workload.training_method,
            mfu=workload.mfu,
            layout=layout,
            lora_rank=workload.lora_rank,
            **common,
        )
        return Estimate(
            shape,
            breakdown,
            True,
            precision,
            result.work_h,
            result.tokens_per_s,
            result.scaling_efficiency,
            tp,
            layout=layout,
        )
    params = arch.params if arch is not None else _params_from_stated(workload)
    probe = speed.training_time(  # the scaling of the layout, at the default recompute
        float(params),
        tokens=1e9,
        layout=dataclasses.replace(layout, recompute="selective"),
        **common,
    )
    return _from_reference_hours(
        workload,
        catalog,
        perf,
        shape,
        precision,
        breakdown,
        probe.scaling_efficiency,
        layout,
    )


def _params_from_stated(workload: Workload) -> float:
    """No model given: guess parameters from the stated model states (16 B/param, mixed-precision Adam)
    or, failing that, from the per-GPU figure. Only the gradient all-reduce size depends on it."""
    stated = workload.memory
    gib = stated.model_states if stated.model_states is not None else stated.per_gpu
    return gib * GIB / 16


def _stated(workload: Workload, shape: Shape) -> mem.MemoryBreakdown:
    stated = workload.memory
    shards = shape.gpus if stated.shardable else 1
    return mem.stated_memory(
        per_gpu_gib=stated.per_gpu,
        model_states_gib=stated.model_states,
        activations_gib=stated.activations if stated.model_states is not None else None,
        shardable=stated.shardable,
        sharding_gpus=shards,
    )


def _estimate_inference(
    prepared: Prepared, catalog: Catalog, perf: GpuPerf, shape: Shape, headroom: float
) -> Estimate:
    """Generation on one shape: per tensor-parallel degree the batch whose KV cache fits the engine's pool
    (at most `generation.batch`), and the degree that finishes soonest."""
    workload, model = prepared.workload, prepared.model
    if model is None or workload.generation is None:
        return _estimate_stated_inference(workload, catalog, perf, shape, headroom)
    gen = workload.generation
    choices = (
        [workload.tensor_parallel]
        if workload.tensor_parallel
        else [
            t
            for t in (1, 2, 4, 8, 16)
            if t <= shape.gpus_per_node and shape.gpus_per_node % t == 0
        ]
    )
    if any(t > shape.gpus_per_node for t in choices):
        return _ruled_out(
            shape,
            mem.MemoryBreakdown(0, 0, 0, 0, 0, 0),
            f"tensor_parallel {workload.tensor_parallel} exceeds {shape.gpus_per_node} GPUs per node",
        )
    topology = Topology(
        gpus_per_node=shape.gpus_per_node,
        nodes=shape.nodes,
        intra_node=shape.intra_node if shape.gpus_per_node > 1 else "none",
        intra_node_gbs=shape.intra_node_gbs or None,
    )
    context = gen.prompt_tokens + gen.output_tokens
    best, closest = None, None
    for tp in choices:
        batch = kv_batch_that_fits(
            model,
            shape.vram_gib,
            headroom,
            weight_precision=workload.precision,
            kv_precision=gen.kv_precision,
            context_tokens=context,
            tensor_parallel=tp,
            prompt_tokens=gen.prompt_tokens,
            most=gen.batch,
        )
        breakdown = inference_memory(
            model,
            weight_precision=workload.precision,
            kv_precision=gen.kv_precision,
            batch=max(batch, 1),
            context_tokens=context,
            tensor_parallel=tp,
            prompt_tokens=gen.prompt_tokens,
        )
        if batch < 1:
            closest = closest or (breakdown, tp)
            continue
        try:
            result = generation_time(
                model,
                gpu=perf,
                topology=topology,
                weight_precision=workload.precision,
                kv_precision=gen.kv_precision,
                batch=batch,
                prompt_tokens=gen.prompt_tokens,
                output_tokens=gen.output_tokens,
                sequences=gen.sequences,
                tensor_parallel=tp,
            )
        except ValueError as exc:
            return _failed(shape, breakdown, exc, workload.precision, tp)
        if best is None or result.work_h < best[0].work_h:
            best = (result, breakdown, tp, batch)
    if best is None:
        breakdown, tp = closest
        return _ruled_out(
            shape,
            breakdown,
            _vram_reason(breakdown, shape, headroom, serving=True)
            + f" even at tensor_parallel {tp}",
            workload.precision,
            tp,
            by="vram",
        )
    result, breakdown, tp, batch = best
    replicas = max(1, shape.gpus // tp)
    rounds = max(1, math.ceil(gen.sequences / (batch * replicas)))
    return Estimate(
        shape,
        breakdown,
        True,
        result.precision or workload.precision,
        result.work_h,
        result.tokens_per_s,
        1.0,
        tp,
        result.work_h / rounds,
        batch=batch,
    )


def _estimate_stated_inference(
    workload: Workload, catalog: Catalog, perf: GpuPerf, shape: Shape, headroom: float
) -> Estimate:
    """Inference stated as memory + reference GPU-hours: independent replicas, ideal scaling."""
    breakdown = _stated(workload, shape)
    if not mem.fits(breakdown, shape.vram_gib, headroom):
        return _ruled_out(
            shape, breakdown, _vram_reason(breakdown, shape, headroom), by="vram"
        )
    precision = _stated_inference_precision(workload)
    ref = gpu_perf(catalog.gpu(workload.work.reference_gpu))
    try:
        hours = speed.reference_scaled_hours(
            workload.work.gpu_hours, ref, perf, shape.gpus, precision, 1.0, True
        )
    except ValueError as exc:
        return _failed(shape, breakdown, exc)
    item = (
        workload.checkpoint.every
        if isinstance(workload.checkpoint.every, float)
        else STATELESS_ITEM_H
    )
    return Estimate(
        shape, breakdown, True, precision, hours, 0.0, 1.0, 1, min(item, hours)
    )
