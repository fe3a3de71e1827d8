"""A hardware shape, the estimate of a workload on it, and what a workload's estimates on every shape share.

Split from estimate.py, which works the estimate out: this module holds the records it reads and
returns (Shape, Estimate, Prepared), the workload's model and GPU in physics terms, what one
checkpoint stores, its training job and the layout fields it pins, and the layout as text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from planner.load.catalog import Catalog
from planner.physics import memory as mem
from planner.physics import parallelism
from planner.physics.gpus import (
    GENERATIONS,
    PRECISIONS,
    GpuPerf,
    Topology,
)
from planner.physics.layout import Layout
from planner.physics.memory_training import checkpoint_state_bytes, lora_params
from planner.schema.catalog import Gpu, ModelArch
from planner.schema.workload import Workload

GIB = 2**30

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
    # stateless jobs: the time of one item (one batch per replica)
    item_h: float | None = None
    reason: str = ""  # why the shape is ruled out ('' when feasible)
    layout: Layout | None = None  # training: the layout chosen (or tried) on this shape
    # generation: concurrent sequences per replica whose KV cache fits
    batch: int | None = None
    # "vram" or "precision" when that alone rules the shape out (reports say so)
    ruled_out_by: str = ""

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
    """What one checkpoint stores: stated, else the weights and optimizer states (adapters only for LoRA)."""
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
        checkpoint_state_bytes(
            arch.params,
            precision=train_precision(workload.precision),
            optimizer=workload.optimizer,
        )
        / GIB
    )


def train_precision(precision: str) -> str:
    return precision if precision in ("fp32", "fp16", "bf16", "fp8") else "bf16"


def mfu_kind(workload: Workload) -> str:
    if workload.kind == "training" and workload.training_method == "full":
        return "pretrain"
    return _MFU_KIND[workload.training_method]


@dataclass(frozen=True)
class Prepared:
    """A workload with what its estimate on every shape shares, worked out once rather than per shape:
    its model from the catalog (None: it states its memory), the layout fields it pins, and its
    training job per memory precision (the GPU decides the precision, so there are few)."""

    workload: Workload
    arch: ModelArch | None
    model: mem.ModelShape | None
    pinned: parallelism.Pinned
    # memory precision -> parallelism.Job
    jobs: dict = field(default_factory=dict, compare=False, repr=False)

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
        kind=mfu_kind(workload),
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


def layout_text(est: Estimate) -> str:
    """How the job runs on the shape: the training layout, or the replicas' TP degree and batch."""
    if est.layout is not None:
        return est.layout.label
    if est.batch is not None:
        return f"TP{est.tensor_parallel} x{max(1, est.shape.gpus // est.tensor_parallel)} batch {est.batch}"
    return ""
