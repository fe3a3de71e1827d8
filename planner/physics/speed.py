"""Productive wall-clock time W for training (pure functions).

Physics layer: plain numbers and frozen dataclasses only.  W is the time of
useful work with no failures and no checkpoints; the cost model adds those.
The formulas are described in docs/physics.md; the published runs each is held to are in docs/validation.md
(``benchmarks/published.py``), with their sources.

Units: bandwidths in GB/s (1e9 B/s) unless named ``*_gbps`` (Gbit/s);
peak throughput in TFLOP/s (dense, no sparsity); times in seconds, ``work_h``
in hours; token rates in tokens/s.

Public API
----------
SpeedResult
training_time(model, *, tokens, gpu, topology, ...) -> SpeedResult
reference_scaled_hours(gpu_hours, ref_gpu, gpu, n_gpus, precision, scaling_eff) -> float

and, in the modules it reads:

gpus: GpuPerf, Topology
gpus: default_mfu(generation, precision, micro_batch_tokens, hidden, gpu_name) -> float
gpus: effective_precision(gpu, precision, fallback_to_bf16=False) -> str | None
collectives: bus_bandwidth_gbs(topology) -> float
collectives: allreduce_seconds(nbytes, topology, sharding='none') -> float
collectives: scaling_efficiency(step_compute_s, comm_s, overlap=DEFAULT_OVERLAP, unoverlapped_s=0.0)
generation: generation_time(shape, *, gpu, topology, ...) -> SpeedResult
generation: decode_tokens_per_s_bound(weight_bytes, kv_bytes, bandwidth_gbs) -> float
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.physics.collectives import (
    ALLREDUCE_LATENCY_S,
    BUCKET_BYTES,
    NETWORK_LATENCY_S,
    SHARDINGS,
    all_to_all_seconds,
    collective_seconds,
    inter_bus_gbs,
    intra_bus_gbs,
)
from planner.physics.gpus import (
    GpuPerf,
    Topology,
    UnsupportedPrecision,
    default_mfu,
    effective_precision,
)
from planner.physics.layout import Layout
from planner.physics.memory import ModelShape
from planner.physics.memory_training import (
    NF4_DQ_BYTES_PER_PARAM,
    check_expert_parallel,
    lora_params,
    params_per_gpu,
)

# Extra time of QLoRA over LoRA on the same base: bitsandbytes de-quantises each NF4 weight to bf16 in
# every forward, recomputed forward and backward.  torchtune's README measured Llama 3.1 8B on one RTX
# 4090 (batch 2 x 2,048 tokens, the same recipe): LoRA 3,083 tokens/s, QLoRA 2,413: 1.28x.
QLORA_DEQUANT_FACTOR = 3083 / 2413


# Tokens per optimizer step when the workload gives none (see default_global_batch_tokens).
PRETRAIN_GLOBAL_BATCH_TOKENS = 4 * 2**20
FINETUNE_GLOBAL_BATCH_TOKENS = 2**19
DEFAULT_SEQ_LEN = 2048


# Trainable fraction for LoRA when only a parameter count is known.
DEFAULT_LORA_TRAINABLE_FRACTION = 0.01


@dataclass(frozen=True)
class SpeedResult:
    """Productive time of a job on a candidate.

    work_h: wall-clock hours of useful work.  tokens_per_s: job throughput
    across all GPUs (training tokens, or generated tokens for generation);
    tokens_per_s_per_gpu the same divided by GPUs.  scaling_efficiency:
    compute time / (compute + exposed communication).  mfu: the MFU assumed
    (training) or achieved (generation).  flops: total hardware FLOPs.
    precision: effective compute precision.  bound: 'compute' | 'memory' |
    'communication' for the dominant decode term ('' for training).
    """

    work_h: float
    tokens_per_s: float
    scaling_efficiency: float
    mfu: float
    flops: float
    precision: str = ""
    tokens_per_s_per_gpu: float = 0.0
    bound: str = ""
    decode_step_s: float = 0.0  # generation: one decode step of a replica's batch
    # generation: prefill of one batch (compute-bound; the time to first token)
    prefill_s: float = 0.0
    # generation: time between a sequence's tokens under continuous batching, where the prefills of the
    # other batch - 1 sequences are interleaved with its decode steps: ((b-1)/b * prefill + n * step) / n
    time_per_output_token_s: float = 0.0


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


def default_global_batch_tokens(
    kind: str, dp: int, micro_batch: int, seq_len: int
) -> float:
    """Tokens per optimizer step when the workload gives none.

    Pre-training: 4M tokens (Llama 2: 4M; Llama 3 405B: 4M rising to 16M; OLMo 4M);
    fine-tuning: 512K (128 sequences of 4K, as SFT recipes such as Tulu use).  Never
    below one micro-batch per data-parallel rank.
    """
    base = (
        PRETRAIN_GLOBAL_BATCH_TOKENS
        if kind == "pretrain"
        else FINETUNE_GLOBAL_BATCH_TOKENS
    )
    return float(max(base, dp * micro_batch * seq_len))


def flops_per_token(
    model: ModelShape | float, method: str, recompute: str, seq_len: int | None
) -> float:
    """Hardware FLOPs per trained token: 6·N (8· with full recompute) for N the parameters a token multiplies
    (the active ones less an untied input embedding, a lookup); LoRA 4·N (no weight gradients for the frozen
    base; +2N with full recompute), QLoRA times QLORA_DEQUANT_FACTOR; with a shape and `seq_len`, PaLM's
    attention 12·L·h·s."""
    shape = model if isinstance(model, ModelShape) else None
    n = float(
        shape.active_params
        - (0 if shape.tied_embeddings else shape.vocab * shape.hidden)
        if shape
        else model
    )
    if method == "full":
        per_token = (8.0 if recompute == "full" else 6.0) * n
    else:
        per_token = (6.0 if recompute == "full" else 4.0) * n
    if shape is not None and seq_len:
        per_token += (
            12.0
            * shape.layers
            * shape.hidden
            * seq_len
            * (4 / 3 if recompute == "full" else 1)
        )
    if method == "qlora":
        per_token *= QLORA_DEQUANT_FACTOR
    return per_token


def compute_floor_seconds_per_token(
    model: ModelShape | float,
    *,
    gpu: GpuPerf,
    n_gpus: int,
    precision: str,
    method: str,
    seq_len: int,
    kind: str,
    micro_batches: int,
    layout: Layout = Layout(),
    mfu: float | None = None,
    naive_pipeline: bool = False,
) -> float:
    """A lower bound on training_time's seconds per token for a layout: its compute and pipeline bubble
    alone, with no communication (which only adds). Lets a planner skip hardware shapes that cannot win
    (`parallelism.work_floor_seconds_per_token`) before searching their layouts."""
    recompute, micro_batch, context_parallel = (
        layout.recompute,
        layout.micro_batch,
        layout.cp,
    )
    pipeline_parallel, virtual_stages = layout.pp, layout.virtual_stages
    if mfu is None:
        mfu = default_mfu(
            gpu.generation,
            precision,
            gpu_name=gpu.name,
            micro_batch_tokens=micro_batch * seq_len / context_parallel,
            hidden=model.hidden if isinstance(model, ModelShape) else None,
        )
    bubble = (
        float(pipeline_parallel)
        if naive_pipeline
        else 1.0 + (pipeline_parallel - 1) / virtual_stages / micro_batches
    )
    return (
        flops_per_token(model, method, recompute, seq_len)
        / (n_gpus * gpu.peak(precision) * mfu)
        * bubble
    )


def training_time(
    model: ModelShape | float,
    *,
    tokens: float,
    gpu: GpuPerf,
    topology: Topology,
    layout: Layout = Layout(),
    precision: str = "bf16",
    method: str = "full",
    mfu: float | None = None,
    kind: str | None = None,
    overlap: float | None = None,
    global_batch_tokens: float | None = None,
    seq_len: int | None = None,
    lora_rank: int = 16,
    lora_targets_fraction: float = 1.0,
    trainable_params: float | None = None,
    moe_overlap: bool = False,
    naive_pipeline: bool = False,
    fallback_to_bf16: bool = False,
) -> SpeedResult:
    """Productive hours to train on ``tokens`` tokens with every GPU of ``topology``, laid out as
    ``layout`` (`physics/layout.py`: t = tp, p = pp, c = cp, e = ep, b = micro_batch, its ZeRO stage and
    recomputation; DP is what the topology's GPUs leave, not the layout's dp).

    The step model, as Megatron/DeepSpeed/FSDP run it.  DP = n / (t*p) replicas each
    run m = ceil(G / (DP * b * s)) micro-batches of b sequences of s tokens per
    optimizer step of G = ``global_batch_tokens`` tokens (gradient accumulation).
      micro-batch on one stage: FLOPs(b*s tokens) / (t*p) / (peak * MFU)
        + tensor-parallel all-reduces (4 per layer, 6 with full recompute, of b*s*h
        16-bit values; sequence parallelism moves the same volume)
        + MoE all-to-alls (dispatch and combine, forward and backward, per MoE layer); with
        ``moe_overlap`` (DualPipe, Megatron-core's 1F1B A2A overlap) only what outlasts the compute
        + the pipeline send of b*s*h values between stages;
      context parallelism c (Megatron's CP, for long sequences): each sequence split over c
        GPUs that hold the same parameters, so DP = n / (t*c*p); each runs s/c of its tokens
        and passes its K and V chunk around the ring (c-1 times forward, twice that
        backward), hidden behind the attention compute it feeds; gradients reduce over
        DP x c;
      pipeline (1F1B): (m + p - 1) micro-batches, the bubble being (p-1)/(m+p-1) (``naive_pipeline``,
        Accelerate's device_map: m * p, one stage working at a time); with v
        interleaved virtual stages per GPU (Narayanan et al. 2021) (m + (p-1)/v), the
        pipeline sends happening v times as often;
      gradients: none/zero1 reduce once per step, overlapped with the backward of the
        last micro-batch; zero2 reduce-scatters each micro-step (overlapped with its
        backward) and all-gathers once per step; zero3 also all-gathers parameters
        twice per micro-step, prefetched behind its compute (LoRA/QLoRA: the frozen
        base as stored, NF4 for QLoRA, once more with full recompute).  Only the part that
        outlasts the compute it hides behind (and at least the last bucket) counts.
        ``overlap`` (0..1), when given, replaces that with a flat hidden fraction.
    FLOPs per token: full 6*P_active (8* with recompute='full'); lora 4*P_active (no
    weight gradients for the frozen base; +2P with full recompute); qlora times
    QLORA_DEQUANT_FACTOR; with a shape and ``seq_len``, PaLM's attention term 12*L*h*s
    (x4/3 with full recompute).  mfu: None -> default_mfu.
    model: ModelShape, or a plain (dense) parameter count (no TP/EP/PP terms then).
    Raises ValueError when the precision is unsupported or the layout does not divide.
    """
    recompute, sharding, micro_batch = layout.recompute, layout.zero, layout.micro_batch
    tensor_parallel, pipeline_parallel, expert_parallel = (
        layout.tp,
        layout.pp,
        layout.ep,
    )
    virtual_stages, context_parallel = layout.virtual_stages, layout.cp
    if method not in ("full", "lora", "qlora"):
        raise ValueError(f"method={method!r}: expected full, lora or qlora")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute={recompute!r}: expected none, selective or full")
    if sharding not in SHARDINGS:
        raise ValueError(
            f"sharding={sharding!r}: expected one of {', '.join(SHARDINGS)}"
        )
    if overlap is not None and not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap={overlap}: expected 0..1")
    prec = effective_precision(gpu, precision, fallback_to_bf16)
    if prec is None:
        raise UnsupportedPrecision(
            f"{gpu.name} has no {precision} support (set fallback_to_bf16 to run in bf16)"
        )
    shape = model if isinstance(model, ModelShape) else None
    p_total = float(shape.params if shape else model)
    p_active = float(shape.active_params if shape else model)
    n = topology.n_gpus
    t, p, e, b = (
        int(tensor_parallel),
        int(pipeline_parallel),
        int(expert_parallel),
        int(micro_batch),
    )
    c = int(context_parallel)
    if t < 1 or t > topology.gpus_per_node or topology.gpus_per_node % t:
        raise ValueError(
            f"tensor_parallel={t} must divide gpus_per_node={topology.gpus_per_node}"
        )
    if p < 1 or c < 1 or n % (t * p * c):
        raise ValueError(
            f"pipeline_parallel={p} x tensor_parallel={t}"
            + (f" x context_parallel={c}" if c != 1 else "")
            + f" must divide {n} GPUs"
        )
    v = int(virtual_stages)
    if shape is not None and p * v > shape.layers:
        raise ValueError(
            f"pipeline_parallel={p} x virtual_stages={v} exceeds the model's {shape.layers} layers"
        )
    if v < 1 or (v > 1 and p == 1):
        raise ValueError(f"virtual_stages={v} needs pipeline_parallel > 1")
    dp = n // (t * p * c)
    check_expert_parallel(e, dp, shape is not None and shape.moe)
    if sharding in ("zero3", "hybrid") and p > 1:
        raise ValueError(
            "ZeRO-3 shards parameters that pipeline stages already split: use zero1 with pipeline_parallel"
        )
    s = int(seq_len or DEFAULT_SEQ_LEN)
    kind = kind or ("pretrain" if method == "full" else method)

    per_token = flops_per_token(
        shape if shape is not None else p_active, method, recompute, seq_len
    )
    flops = per_token * tokens
    if mfu is None:
        mfu = default_mfu(
            gpu.generation,
            prec,
            gpu_name=gpu.name,
            micro_batch_tokens=b * s / c,
            hidden=shape.hidden if shape is not None else None,
        )
    peak = gpu.peak(prec)

    G = global_batch_tokens or default_global_batch_tokens(kind, dp, b, s)
    m = max(1, math.ceil(G / (dp * b * s) - 1e-9))
    step_tokens = m * dp * b * s
    micro_tokens = b * s
    compute = per_token * micro_tokens / (t * p * c) / (peak * mfu)
    backward = compute * (6 / 8 if recompute == "full" else 4 / 6)
    micro = compute
    local_dp = max(1, min(dp * c, topology.gpus_per_node // t))
    if shape is not None:
        stage_layers = math.ceil(shape.layers / p)
        act_bytes = micro_tokens / c * shape.hidden * 2.0
        if c > 1:
            micro += stage_layers * _context_ring_seconds(
                shape, topology, t, c, micro_tokens / c, recompute, peak * mfu
            )
        if t > 1:
            msgs = 6 if recompute == "full" else 4
            micro += (
                msgs * stage_layers * collective_seconds(act_bytes, t, t, topology, 2.0)
            )
        if e > 1:
            local_ep = max(1, min(e, topology.gpus_per_node // t))
            moe_layers = math.ceil(shape.moe_layers / p)
            msgs = 6 if recompute == "full" else 4
            a2a = (
                msgs
                * moe_layers
                * all_to_all_seconds(
                    act_bytes * shape.experts_per_token / t, e, local_ep, topology
                )
            )
            micro += max(0.0, a2a - compute) if moe_overlap else a2a
        if p > 1:
            cross = t * p > topology.gpus_per_node
            bw = (inter_bus_gbs(topology) if cross else intra_bus_gbs(topology)) * 1e9
            micro += 2 * v * act_bytes / t / bw
    pipeline = m * p * micro if naive_pipeline else (m + (p - 1) / v) * micro

    # Gradient reduction over the data-parallel replicas (experts among their own replicas).
    if method == "full":
        if shape is not None:
            dense, expert = params_per_gpu(shape, t, p, e)
        else:
            dense, expert = p_total / (t * p), 0.0
        grad_b = 4.0 if prec == "fp32" else 2.0
    else:
        if trainable_params is not None:
            trainable = trainable_params
        elif shape is not None:
            trainable = lora_params(shape, lora_rank, lora_targets_fraction)
        else:
            trainable = DEFAULT_LORA_TRAINABLE_FRACTION * p_total
        dense, expert = trainable / (t * p), 0.0
        grad_b = 2.0 if method == "qlora" else 4.0
    local_exp = max(1, min(dp // e, topology.gpus_per_node // (t * e)))

    def collective(factor: float) -> float:
        return collective_seconds(
            dense * grad_b, dp * c, local_dp, topology, factor, BUCKET_BYTES
        ) + collective_seconds(
            expert * grad_b, dp // e * c, local_exp, topology, factor, BUCKET_BYTES
        )

    buckets = max(1, math.ceil((dense + expert) * grad_b / BUCKET_BYTES))

    def exposed(comm: float, window: float) -> float:
        if overlap is not None:
            return (1.0 - overlap) * comm
        return max(comm - window, comm / buckets)

    per_micro = per_step = 0.0
    if sharding in ("none", "zero1"):
        per_step = exposed(collective(2.0), backward)
    elif sharding == "zero2":
        per_micro = exposed(collective(1.0), backward)
        per_step = collective(1.0) * (1.0 - overlap if overlap is not None else 1.0)
    elif (
        method == "full"
    ):  # zero3 / hybrid: gather parameters for forward and backward, reduce-scatter grads
        per_micro = exposed(3.0 * collective(1.0), micro)
    else:  # zero3 LoRA/QLoRA (FSDP-QLoRA): the frozen base is gathered as stored for every pass over it
        base_bytes = (
            (
                NF4_DQ_BYTES_PER_PARAM
                if method == "qlora"
                else (4.0 if prec == "fp32" else 2.0)
            )
            * p_total
            / (t * p)
        )
        passes = 3 if recompute == "full" else 2
        gather = passes * collective_seconds(
            base_bytes, dp * c, local_dp, topology, 1.0, BUCKET_BYTES
        )
        per_micro = exposed(gather + collective(1.0), micro)
    step = pipeline + m * per_micro + per_step
    seconds = flops / per_token / step_tokens * step if step_tokens else 0.0
    eff = m * compute / step if step > 0 else 1.0
    tps = tokens / seconds if seconds > 0 else float("inf")
    return SpeedResult(
        work_h=seconds / 3600.0,
        tokens_per_s=tps,
        scaling_efficiency=eff,
        mfu=mfu * eff,
        flops=flops,
        precision=prec,
        tokens_per_s_per_gpu=tps / n,
    )


def _context_ring_seconds(
    shape: ModelShape,
    topology: Topology,
    t: int,
    c: int,
    local_tokens: float,
    recompute: str,
    flops_per_s: float,
) -> float:
    """Exposed seconds per layer and micro-batch of context parallelism's KV ring (Megatron's CP,
    ring attention): c-1 sends of the local K and V chunk (2 x kv_heads x head_dim 16-bit values per
    token, split over TP) in the forward, twice that in the backward (KV and its gradient), once more
    with full recompute, each overlapped with the attention over the chunk it brings; inside a node
    when the t*c GPUs fit in one, else over the NIC share."""
    chunk = local_tokens * 2 * shape.kv_heads * shape.head_dim * 2.0 / t
    inside = t * c <= topology.gpus_per_node
    bandwidth = (intra_bus_gbs(topology) if inside else inter_bus_gbs(topology)) * 1e9
    latency = (
        ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6)
        if inside
        else NETWORK_LATENCY_S.get(topology.inter_node, 50e-6)
    )
    passes = 4 if recompute == "full" else 3
    attention = (
        12.0
        * shape.hidden
        * local_tokens
        * local_tokens
        / t
        / flops_per_s
        * (4 / 3 if recompute == "full" else 1)
    )  # over one chunk, all passes (flops_per_token's 12*L*h*s)
    return (
        passes * (c - 1) * (max(chunk / bandwidth - attention / passes, 0.0) + latency)
    )


# ---------------------------------------------------------------------------
# Reference benchmarks
# ---------------------------------------------------------------------------


def reference_scaled_hours(
    gpu_hours: float,
    ref_gpu: GpuPerf,
    gpu: GpuPerf,
    n_gpus: int,
    precision: str = "bf16",
    scaling_eff: float = 1.0,
    fallback_to_bf16: bool = False,
) -> float:
    """Wall-clock hours on ``n_gpus`` x ``gpu`` for a job measured as ``gpu_hours`` on ``ref_gpu``.

    hours = gpu_hours * (peak_ref * MFU_ref) / (peak * MFU) / n_gpus / scaling_eff,
    each side at its effective precision with default_mfu(generation, prec).
    """
    thr = []
    for g in (ref_gpu, gpu):
        p = effective_precision(g, precision, fallback_to_bf16)
        if p is None:
            raise UnsupportedPrecision(f"{g.name} has no {precision} support")
        thr.append(g.peak(p) * default_mfu(g.generation, p, gpu_name=g.name))
    if n_gpus < 1 or scaling_eff <= 0:
        raise ValueError(
            f"n_gpus={n_gpus}, scaling_eff={scaling_eff}: must be positive"
        )
    return gpu_hours * thr[0] / thr[1] / n_gpus / scaling_eff
