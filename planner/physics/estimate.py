"""Glue from a workload and a hardware shape to the physics: does it fit, and how long is W?

A *shape* is what the physics depends on: GPU model, GPUs per node, node count and the
links between them. Many offers share a shape (the same instance in twenty regions), so
estimates are computed once per (workload, shape) and cached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

from planner.load.catalog import Catalog
from planner.physics import memory as mem
from planner.physics import parallelism, speed
from planner.physics.generation import generation_floor_h, generation_time
from planner.physics.gpus import (
    GENERATIONS,
    PRECISIONS,
    GpuPerf,
    Topology,
    UnsupportedPrecision,
    effective_precision,
)
from planner.physics.memory_inference import (
    inference_memory,
    kv_batch_that_fits,
    serving_need_gib,
)
from planner.physics.memory_training import lora_params, model_state_bytes
from planner.schema.catalog import Gpu, ModelArch
from planner.schema.workload import Workload

GIB = 2**30
STATELESS_ITEM_H = 5 / 60
"""Item time of a stateless job stated in GPU-hours (no batch structure known): 5 minutes."""

_MFU_KIND = {
    "full": "finetune",
    "lora": "lora",
    "qlora": "qlora",
    "inference": "inference",
}


@dataclass(frozen=True)
class Shape:
    gpu: str
    gpus_per_node: int
    nodes: int
    vram_gib: float
    intra_node: str
    intra_node_gbs: float
    inter_node: str
    inter_node_gbps: float

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    def topology(self) -> Topology:
        return Topology(
            gpus_per_node=self.gpus_per_node,
            nodes=self.nodes,
            intra_node=self.intra_node if self.gpus_per_node > 1 else "none",
            intra_node_gbs=self.intra_node_gbs or None,
            inter_node=self.inter_node if self.nodes > 1 else "none",
            inter_node_gbps=self.inter_node_gbps or None,
        )


@dataclass(frozen=True)
class Estimate:
    """What the physics says about one workload on one shape."""

    shape: Shape
    memory: mem.MemoryBreakdown
    fits: bool
    precision: str | None
    work_h: float  # W: productive hours; inf when not feasible
    tokens_per_s: float
    scaling_efficiency: float
    tensor_parallel: int = 1
    item_h: float | None = (
        None  # stateless jobs: the time of one item (one batch per replica)
    )
    reason: str = ""  # why the shape is ruled out ('' when feasible)
    layout: parallelism.Layout | None = (
        None  # training: the layout chosen (or tried) on this shape
    )
    batch: int | None = (
        None  # generation: concurrent sequences per replica whose KV cache fits
    )
    ruled_out_by: str = (
        ""  # "vram" or "precision" when that alone rules the shape out (reports say so)
    )

    @property
    def feasible(self) -> bool:
        return not self.reason


def model_shape(arch: ModelArch) -> mem.ModelShape:
    return mem.ModelShape(
        params=int(arch.params),
        active_params=int(arch.active_params),
        layers=arch.layers,
        hidden=arch.hidden,
        heads=arch.heads,
        kv_heads=int(arch.kv_heads),
        head_dim=int(arch.head_dim),
        ffn=int(arch.ffn),
        vocab=arch.vocab,
        tied_embeddings=arch.tied_embeddings,
        experts=arch.experts or 0,
        experts_per_token=arch.experts_per_token or 0,
        expert_params=int(arch.expert_params or 0),
    )


@cache
def gpu_perf(gpu: Gpu) -> GpuPerf:
    tflops = {p: gpu.tflops(p) for p in PRECISIONS if gpu.tflops(p)}
    generation = gpu.generation if gpu.generation in GENERATIONS else "other"
    memory_type = "gddr" if gpu.memory_type.upper().startswith("GDDR") else "hbm"
    return GpuPerf(gpu.name, generation, gpu.mem_bandwidth_gbs, tflops, memory_type)


def resolve_model(workload: Workload, catalog: Catalog) -> ModelArch | None:
    if isinstance(workload.model, str):
        return catalog.model(workload.model)
    return workload.model


def checkpoint_size_gib(workload: Workload, catalog: Catalog) -> float:
    """What one checkpoint stores: stated, else the model states (adapters only for LoRA)."""
    if workload.checkpoint.size is not None:
        return workload.checkpoint.size
    if (
        workload.interruption_tolerance == "stateless"
        or workload.training_method == "inference"
    ):
        return 0.0
    arch = resolve_model(workload, catalog)
    if arch is None:
        stated = workload.memory
        return (
            stated.model_states if stated.model_states is not None else stated.per_gpu
        )
    if workload.training_method in ("lora", "qlora"):
        return lora_params(model_shape(arch), workload.lora_rank) * 16 / GIB
    return (
        sum(
            model_state_bytes(
                arch.params,
                precision=_train_precision(workload.precision),
                optimizer=workload.optimizer,
            )
        )
        / GIB
    )


def _train_precision(precision: str) -> str:
    return precision if precision in ("fp32", "fp16", "bf16", "fp8") else "bf16"


def _mfu_kind(workload: Workload) -> str:
    if workload.kind == "training" and workload.training_method == "full":
        return "pretrain"
    return _MFU_KIND[workload.training_method]


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


@dataclass(frozen=True)
class Prepared:
    """A workload with what its estimate on every shape shares, worked out once rather than per shape:
    its model from the catalog (None: it states its memory), the layout fields it pins, and its
    training job per memory precision (the GPU decides the precision, so there are few)."""

    workload: Workload
    arch: ModelArch | None
    model: mem.ModelShape | None
    pinned: parallelism.Pinned
    jobs: dict = field(
        default_factory=dict, compare=False, repr=False
    )  # memory precision -> parallelism.Job

    def job(self, precision: str) -> parallelism.Job:
        found = self.jobs.get(precision)
        if found is None:
            found = self.jobs[precision] = training_job(
                self.workload, self.arch, precision
            )
        return found


def prepare(workload: Workload, catalog: Catalog) -> Prepared:
    """The workload ready to be estimated on shape after shape."""
    arch = resolve_model(workload, catalog)
    return Prepared(
        workload,
        arch,
        model_shape(arch) if arch is not None else None,
        pinned(workload),
    )


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
    return _estimate_training(prepared, catalog, perf, shape, headroom)


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
            perf, _train_precision(workload.precision), workload.fp8_fallback
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
        return floor * FLOOR_MARGIN
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
        perf, _train_precision(workload.precision), workload.fp8_fallback
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
        job, perf, shape.topology(), shape.vram_gib, headroom, prepared.pinned
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
    layout: parallelism.Layout,
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


def training_job(
    workload: Workload, arch: ModelArch, precision: str
) -> parallelism.Job:
    """The workload's training physics apart from tokens and hardware (what a layout search depends on)."""
    return parallelism.Job(
        shape=model_shape(arch),
        method=workload.training_method,
        precision=precision,
        optimizer=workload.optimizer,
        seq_len=workload.sequence_length,
        global_batch_tokens=workload.global_batch_tokens,
        kind=_mfu_kind(workload),
        mfu=workload.mfu,
        overlap=workload.comm_overlap,
        lora_rank=workload.lora_rank,
        paged_optimizer=workload.paged_optimizer,
        fallback_to_bf16=workload.fp8_fallback,
        recipe=workload.recipe,
    )


def pinned(workload: Workload) -> parallelism.Pinned:
    """The layout fields the workload fixes; with `parallelism: fixed` the unset ones take their old defaults."""
    fixed = workload.parallelism == "fixed"

    def pick(value, default):
        return value if value is not None else (default if fixed else None)

    return parallelism.Pinned(
        tp=pick(workload.tensor_parallel, 1),
        pp=pick(workload.pipeline_parallel, 1),
        ep=pick(workload.expert_parallel, 1),
        zero=pick(workload.sharding, "zero3"),
        recompute=pick(workload.activation_checkpointing, "selective"),
        micro_batch=pick(workload.micro_batch, 1),
        sequence_parallel=pick(workload.sequence_parallel, False),
        cp=pick(workload.context_parallel, 1),
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
    layout = parallelism.Layout(
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
        kind=_mfu_kind(workload),
        sharding=sharding,
        overlap=workload.comm_overlap,
        tensor_parallel=tp,
        micro_batch=layout.micro_batch,
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
            recompute=layout.recompute,
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
    probe = speed.training_time(float(params), tokens=1e9, **common)
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
            continue  # endpoints: `candidates.endpoints.capacity_rows`
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


def layout_text(est: Estimate) -> str:
    """How the job runs on the shape: the training layout, or the replicas' TP degree and batch."""
    if est.layout is not None:
        return est.layout.label
    if est.batch is not None:
        return f"TP{est.tensor_parallel} x{max(1, est.shape.gpus // est.tensor_parallel)} batch {est.batch}"
    return ""


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
