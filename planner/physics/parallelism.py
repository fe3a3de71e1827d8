"""How a training job is laid out over a shape's GPUs, and the search for the fastest layout that fits.

Physics layer: plain numbers and frozen dataclasses.  A layout is what Megatron-LM,
DeepSpeed and FSDP let a team choose: tensor parallelism inside a node (TP), pipeline
stages (PP), data-parallel replicas (DP), expert parallelism among those replicas (EP,
MoE only), context parallelism for long sequences (CP: each sequence split over GPUs), the
ZeRO stage over DP, activation recomputation, the micro-batch and sequence parallelism.
`best_layout` tries them (Metis and Sailor do this for one job; a rental planner does it for
every hardware shape it prices) and keeps the one that finishes soonest; fields the workload
pins are not searched.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from planner.physics import memory as mem
from planner.physics import recipes, speed, step_many
from planner.physics.gpus import GpuPerf, Topology, effective_precision
from planner.physics.layout import ZERO_STAGES, Layout
from planner.physics.memory_training import training_memory

RECOMPUTE = (
    "selective",
    "full",
)  # 'none' stores what 'selective' does under FlashAttention, so it is never faster
MICRO_BATCHES = (1, 2, 4, 8)
TENSOR_PARALLEL = (1, 2, 4, 8)
PIPELINE_PARALLEL = (1, 2, 4, 8, 16, 32)
VIRTUAL_STAGES = (2, 4)
CONTEXT_PARALLEL = (2, 4, 8, 16, 32)
# searched from this sequence length (Megatron uses CP for long context; below it one sequence
# already fills a GPU's micro-batch); a workload may pin it at any length
CONTEXT_PARALLEL_FROM_TOKENS = 32768


@dataclass(frozen=True)
class Pinned:
    """What the workload fixes; None is searched."""

    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    zero: str | None = None
    recompute: str | None = None
    micro_batch: int | None = None
    sequence_parallel: bool | None = None
    cp: int | None = None


@dataclass(frozen=True)
class Job:
    """A training job's physics inputs apart from its token count and the hardware.

    recipe: the framework that runs it (recipes.RECIPES) or 'auto' (recipes.AUTO: the fastest that fits);
    it decides the layout axes, the ZeRO stages, the loss memory and activation offloading."""

    shape: mem.ModelShape
    method: str = "full"
    precision: str = "bf16"
    optimizer: str = "adamw"
    seq_len: int = 4096
    global_batch_tokens: float | None = None
    kind: str = "pretrain"
    mfu: float | None = None
    overlap: float | None = None
    lora_rank: int = 16
    paged_optimizer: bool | None = None
    fallback_to_bf16: bool = False
    recipe: str = "auto"

    @property
    def candidate_recipes(self) -> tuple[recipes.Recipe, ...]:
        return recipes.candidates(
            self.recipe, self.method, pretrain=self.kind == "pretrain"
        )


@dataclass(frozen=True)
class Choice:
    """The layout chosen on one shape, its memory and the time per token."""

    layout: Layout
    memory: mem.MemoryBreakdown
    seconds_per_token: float
    scaling_efficiency: float
    mfu: float
    precision: str


@lru_cache(maxsize=1 << 16)
def micro_batches(job: Job, layout: Layout) -> int:
    """Micro-batches per optimizer step per data-parallel replica, m = ceil(G / (DP*b*s))."""
    g = job.global_batch_tokens or speed.default_global_batch_tokens(
        job.kind, layout.dp, layout.micro_batch, job.seq_len
    )
    return max(1, math.ceil(g / (layout.dp * layout.micro_batch * job.seq_len) - 1e-9))


def in_flight(job: Job, layout: Layout) -> int:
    """Micro-batches whose activations the first stage holds: p under 1F1B, ceil(p + (p-1)/v)
    interleaved (Megatron's theoretical_memory_usage), never more than the step has."""
    p, v = layout.pp, layout.virtual_stages
    if p > 1 and _naive(layout):
        return 1  # one micro-batch passes through the stages at a time
    return min(micro_batches(job, layout), p if v == 1 else math.ceil(p + (p - 1) / v))


def _moe_overlap(layout: Layout) -> bool:
    """Its recipe hides MoE all-to-alls behind compute (DualPipe, Megatron-core's 1F1B A2A overlap)."""
    return bool(layout.recipe) and recipes.recipe(layout.recipe).moe_overlap


def _naive(layout: Layout) -> bool:
    """Stages run one after another (Accelerate's device_map), not as a pipeline."""
    return bool(layout.recipe) and recipes.recipe(layout.recipe).pipeline == "naive"


@lru_cache(maxsize=1 << 16)
def layout_memory(job: Job, layout: Layout, gpus_per_node: int) -> mem.MemoryBreakdown:
    """Memory of the busiest GPU; the same for every GPU model and network of that node size (so cached)."""
    recipe = recipes.recipe(layout.recipe or "megatron")
    return training_memory(
        job.shape,
        method=job.method,
        precision=job.precision,
        optimizer=job.optimizer,
        layout=layout,
        gpus=layout.gpus,
        gpus_per_node=gpus_per_node,
        seq_len=job.seq_len,
        in_flight=in_flight(job, layout),
        paged_optimizer=job.paged_optimizer,
        logit_bytes=recipe.logit_bytes,
        activation_offload=recipe.activation_offload,
        lora_dropout=recipe.lora_dropout,
        master_weights=recipe.master_weights,
        optimizer_in_backward=recipe.optimizer_in_backward and layout.gpus == 1,
        lora_rank=job.lora_rank,
    )


def _step_inputs(job: Job) -> dict:
    """What the step model reads of the job besides its shape, scalar or over many layouts."""
    return dict(
        precision=job.precision,
        method=job.method,
        mfu=job.mfu,
        kind=job.kind,
        overlap=job.overlap,
        global_batch_tokens=job.global_batch_tokens,
        seq_len=job.seq_len,
        lora_rank=job.lora_rank,
        fallback_to_bf16=job.fallback_to_bf16,
    )


def layout_speed(
    job: Job, layout: Layout, gpu: GpuPerf, topology: Topology
) -> speed.SpeedResult:
    """The step model for one layout, over 1e9 tokens (time is linear in tokens)."""
    return speed.training_time(
        job.shape,
        tokens=1e9,
        gpu=gpu,
        topology=topology,
        layout=layout,
        **_step_inputs(job),
        moe_overlap=_moe_overlap(layout),
        naive_pipeline=_naive(layout),
    )


def step_model(
    job: Job, layouts: list[Layout], gpus: int, gpus_per_node: int
) -> step_many.StepModel:
    """The step model of `layout_speed` over many layouts of `gpus` GPUs at once."""
    return step_many.StepModel(
        job.shape,
        layouts,
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        **_step_inputs(job),
        moe_overlap=[_moe_overlap(layout) for layout in layouts],
        naive_pipeline=[_naive(layout) for layout in layouts],
    )


def layouts(job: Job, gpus: int, gpus_per_node: int, pinned: Pinned):
    """Every layout of `gpus` GPUs the recipes and the pinned fields allow, lightest memory last within each
    group. Recipes without Megatron's axes run whole layers on every GPU (TP, PP and CP 1) and shard only as
    their framework does (recipes.Recipe.shardings)."""
    for recipe in job.candidate_recipes:
        if job.method in recipe.methods:
            yield from _recipe_layouts(job, recipe, gpus, gpus_per_node, pinned)


def _recipe_layouts(
    job: Job, recipe: recipes.Recipe, gpus: int, gpus_per_node: int, pinned: Pinned
):
    shape = job.shape
    axes = recipe.megatron_axes
    tps = (
        [pinned.tp]
        if pinned.tp
        else [
            t
            for t in TENSOR_PARALLEL
            if t <= gpus_per_node
            and gpus_per_node % t == 0
            and shape.heads % t == 0
            and (axes or t == 1)
        ]
    )
    cps = (
        [pinned.cp]
        if pinned.cp
        else [1]
        + [
            c
            for c in CONTEXT_PARALLEL
            if axes
            and job.seq_len >= CONTEXT_PARALLEL_FROM_TOKENS
            and job.seq_len % (2 * c) == 0
        ]
    )
    staged = recipe.pipeline != "none"
    pps = (
        [pinned.pp]
        if pinned.pp
        else [
            p
            for p in PIPELINE_PARALLEL
            if p <= shape.layers
            and (staged or p == 1)
            and (recipe.pipeline != "naive" or p <= gpus_per_node)
        ]
    )
    if (
        not axes
        and (max(tps) > 1 or max(cps) > 1 or pinned.sequence_parallel)
        or not staged
        and max(pps) > 1
    ):
        return  # a pinned axis this framework does not have
    stages = recipe.zero_stages(job.method)
    for tp, pp, cp in itertools.product(tps, pps, cps):
        if gpus % (tp * pp * cp) or (pp > 1 and pinned.zero == "zero3"):
            continue
        dp = gpus // (tp * pp * cp)
        if pp > 1 and recipe.pipeline == "naive" and dp > 1:
            continue  # device_map splits one replica over the GPUs
        eps = (
            [pinned.ep]
            if pinned.ep
            else [1]
            + [
                e
                for e in (2, 4, 8, 16, 32, 64, 128, 256)
                if shape.moe and e <= dp and dp % e == 0 and shape.experts % e == 0
            ]
        )
        for ep in eps:
            zeros = (
                [pinned.zero]
                if pinned.zero
                else [
                    z
                    for z in ZERO_STAGES
                    if (dp * cp > 1 or z == "none")
                    and (pp == 1 or z in ("none", "zero1"))
                ]
            )
            zeros = [z for z in zeros if z in stages or (dp * cp == 1 and z == "none")]
            vs = [1] + [
                v
                for v in VIRTUAL_STAGES
                if pp > 1 and pp * v <= shape.layers and recipe.pipeline == "1f1b"
            ]
            for zero, recompute, v in itertools.product(
                zeros, [pinned.recompute] if pinned.recompute else RECOMPUTE, vs
            ):
                sp = (
                    pinned.sequence_parallel
                    if pinned.sequence_parallel is not None
                    else tp > 1
                )
                yield [
                    Layout(tp, pp, dp, ep, zero, recompute, mb, sp, v, cp, recipe.name)
                    for mb in (
                        [pinned.micro_batch] if pinned.micro_batch else MICRO_BATCHES
                    )
                ]


@dataclass(frozen=True)
class _Space:
    """The layouts of one (job, GPU count, node size, pins) with what does not depend on the GPU model:
    which group each layout is in, each group's lightest layout and its memory, and the step model over
    every layout, so a search on one GPU model is a few array operations.
    What a search works out that depends on no more than that is kept here for the next one."""

    layouts: tuple  # every layout, group by group
    # per layout: the index of its group's lightest layout in `lights`
    light_of: np.ndarray
    lights: tuple  # the distinct lightest layouts, first seen first, with their memory (None: not buildable)
    reason: str  # the last reason a lightest layout could not be built
    # (total GiB, layout, memory) of the least memory among `lights`
    lightest: tuple | None
    step: step_many.StepModel  # every layout's time on any GPU model and network
    recipes: np.ndarray  # per layout: its recipe's name
    families: tuple  # per layout: the layout but its micro-batch (one too big rules out the larger ones)
    memories: list  # per layout: its memory once a search needed it (None: not yet; a ValueError: not buildable)


@lru_cache(maxsize=1 << 14)
def _space(job: Job, gpus: int, gpus_per_node: int, pinned: Pinned) -> _Space | None:
    groups = _layout_groups(job, gpus, gpus_per_node, pinned)
    if not groups:
        return None
    index, lights, reason, lightest = {}, [], "", None
    layouts, light_of, families = [], [], []
    for group in groups:
        light = _lightest(group[0], pinned, job.method)
        if light not in index:
            index[light] = len(lights)
            try:
                memory = layout_memory(job, light, gpus_per_node)
            except ValueError as exc:
                reason, memory = str(exc), None
            lights.append((light, memory))
            if memory is not None and (lightest is None or memory.total < lightest[0]):
                lightest = (memory.total, light, memory)
        for layout in group:
            layouts.append(layout)
            light_of.append(index[light])
            families.append(
                (
                    layout.tp,
                    layout.cp,
                    layout.pp,
                    layout.dp,
                    layout.ep,
                    layout.zero,
                    layout.recompute,
                    layout.sequence_parallel,
                    layout.virtual_stages,
                    layout.recipe,
                )
            )
    return _Space(
        tuple(layouts),
        np.array(light_of),
        tuple(lights),
        reason,
        lightest,
        step_model(job, layouts, gpus, gpus_per_node),
        np.array([layout.recipe for layout in layouts]),
        tuple(families),
        [None] * len(layouts),
    )


# ~170 distinct jobs x ~600 shapes of a varied 10,000-workload scenario
@lru_cache(maxsize=1 << 17)
def best_layout(
    job: Job,
    gpu: GpuPerf,
    topology: Topology,
    vram_gib: float,
    headroom: float,
    pinned: Pinned = Pinned(),
    efficiency: tuple[tuple[str, float], ...] = (),
) -> tuple[Choice | None, str]:
    """The layout that finishes soonest among those that fit; (None, why) when none does. `efficiency`: the
    measured throughput factor of recipes on this GPU (a calibration; `*` for any other recipe), which the
    comparison applies; the choice's own time is the model's, which the caller scales.

    Exact, but it evaluates few layouts: each group's lightest layout (its largest ZeRO stage, full
    recomputation, one sequence per micro-batch) shows whether any of the group can fit, and the rest
    are tried in order of their time from the step model over all layouts at once (`step_many`, within
    rounding of the scalar model; less a margin, a lower bound), stopping once the best found is faster
    than every bound left. Ties go to the smaller memory, then to the label.
    """
    space = _space(job, topology.n_gpus, topology.gpus_per_node, pinned)
    if space is None:
        return None, "no layout divides these GPUs"
    light_fits = np.array(
        [
            memory is not None and mem.fits(memory, vram_gib, headroom)
            for _, memory in space.lights
        ]
    )
    candidates = np.flatnonzero(light_fits[space.light_of])
    if not len(candidates):
        if space.lightest is None:
            return None, space.reason or "no layout divides these GPUs"
        total, light, memory = space.lightest
        return Choice(light, memory, math.inf, 0.0, 0.0, job.precision), (
            f"needs {total * (1 + headroom):.1f} GiB per GPU (with {headroom:.0%} headroom) even as {light.label}, "
            f"{gpu.name} has {vram_gib:.1f} GiB"
        )
    factors = dict(efficiency)
    floors = _bounds(space, candidates, gpu, topology)
    if factors:
        floors = floors / np.array(
            [
                factors.get(name, factors.get("*", 1.0))
                for name in space.recipes[candidates].tolist()
            ]
        )
    order = np.argsort(floors, kind="stable")  # ties in the layouts' order
    best, too_big = (
        None,
        {},
    )  # too_big: layout without its micro-batch -> the smallest micro-batch that did not fit
    for floor, number in zip(floors[order].tolist(), candidates[order].tolist()):
        if best is not None and floor > best[0][0]:
            break  # no layout left can be faster
        layout, family = space.layouts[number], space.families[number]
        if too_big.get(family, math.inf) <= layout.micro_batch:
            continue  # a smaller micro-batch of the same layout did not fit
        memory = space.memories[number]
        if memory is None:
            try:
                memory = layout_memory(job, layout, topology.gpus_per_node)
            except ValueError as exc:
                memory = exc
            space.memories[number] = memory
        if isinstance(memory, ValueError):
            continue
        if not mem.fits(memory, vram_gib, headroom):
            too_big[family] = min(too_big.get(family, math.inf), layout.micro_batch)
            continue
        try:
            result = layout_speed(job, layout, gpu, topology)
        except ValueError:
            continue
        key = (
            result.work_h / factors.get(layout.recipe, factors.get("*", 1.0)),
            memory.total,
            layout.label,
        )
        if best is None or key < best[0]:
            best = (
                key,
                Choice(
                    layout,
                    memory,
                    result.work_h * 3600 / 1e9,
                    result.scaling_efficiency,
                    result.mfu,
                    result.precision,
                ),
            )
    if best is None:
        return None, "no layout both fits and divides these GPUs"
    return best[1], ""


# step_many's times differ from the scalar model's in rounding (~1e-15 of them): less this share, they bound it
BOUND_MARGIN = 1e-9


def _bounds(
    space: _Space, candidates: np.ndarray, gpu: GpuPerf, topology: Topology
) -> np.ndarray:
    """A lower bound on each candidate's `layout_speed(...).work_h`: the step model over all layouts at
    once, less BOUND_MARGIN (0 where the GPU lacks the precision, so that every layout is tried)."""
    with np.errstate(all="ignore"):
        hours = space.step.work_h(gpu, topology)[candidates]
    return np.where(np.isnan(hours), 0.0, hours * (1 - BOUND_MARGIN))


def work_floor_seconds_per_token(
    job: Job, gpu: GpuPerf, gpus: int, pinned: Pinned = Pinned()
) -> float:
    """Seconds per token that no layout `best_layout` can choose on `gpus` GPUs beats: the compute floor at the
    least work (selective recomputation), the best MFU (the largest micro-batch, no context parallelism) and no
    pipeline bubble, within the pins. Far cheaper than the search, so a planner runs the search only on shapes
    this does not already rule out."""
    precision = _compute_precision(job, gpu)
    return speed.compute_floor_seconds_per_token(
        job.shape,
        gpu=gpu,
        n_gpus=gpus,
        precision=precision,
        method=job.method,
        seq_len=job.seq_len,
        kind=job.kind,
        micro_batches=1,
        layout=Layout(  # the least any layout the pins allow can take
            recompute=pinned.recompute or "selective",
            micro_batch=pinned.micro_batch or max(MICRO_BATCHES),
            cp=pinned.cp or 1,
        ),
        mfu=job.mfu,
    )


def _compute_precision(job: Job, gpu: GpuPerf) -> str:
    """The precision the job's GEMMs run in on `gpu` (its memory precision where the GPU lacks a faster path)."""
    return (
        effective_precision(gpu, job.precision, job.fallback_to_bf16) or job.precision
    )


@lru_cache(maxsize=1 << 12)
def _layout_groups(job: Job, gpus: int, gpus_per_node: int, pinned: Pinned) -> tuple:
    return tuple(tuple(g) for g in layouts(job, gpus, gpus_per_node, pinned) if g)


@lru_cache(maxsize=1 << 16)
def _lightest(layout: Layout, pinned: Pinned, method: str) -> Layout:
    """The layout of the same recipe, TP, PP, DP and EP that needs the least memory (within the pins and the
    ZeRO stages its recipe offers)."""
    replicas = layout.dp * layout.cp  # GPUs holding the same parameters
    stages = (
        recipes.recipe(layout.recipe).zero_stages(method)
        if layout.recipe
        else ZERO_STAGES
    )
    want = (
        ("zero3", "zero2", "zero1", "none")
        if layout.pp == 1 and replicas > 1
        else ("zero1", "none")
        if replicas > 1
        else ("none",)
    )
    zero = pinned.zero or next(z for z in want if z in stages or z == "none")
    return dataclasses.replace(
        layout,
        zero=zero,
        recompute=pinned.recompute or "full",
        micro_batch=pinned.micro_batch or 1,
        virtual_stages=1,
    )
