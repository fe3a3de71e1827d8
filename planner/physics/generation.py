"""Productive time W of generation (inference) jobs: prefill and decode FLOPs, the bandwidth bound on decode,
the precision generation computes in, and a floor on W for screening.
"""

from __future__ import annotations

from planner.physics.collectives import ALLREDUCE_LATENCY_S, intra_bus_gbs
from planner.physics.gpus import (
    GpuPerf,
    Topology,
    UnsupportedPrecision,
    default_mfu,
    effective_precision,
)
from planner.physics.memory import ModelShape
from planner.physics.memory_inference import (
    WEIGHT_BYTES_PER_PARAM,
    kv_bytes_per_token,
    weight_bytes,
)
from planner.physics.speed import SpeedResult

# Decode streams weights + KV at 60-80 % of HBM/GDDR peak (judgement; the published batch-1 decode figures in docs/validation.md check it).
DECODE_BW_EFFICIENCY = 0.70
# Context length at which KV reads run at half the weight-streaming rate (see kv_read_efficiency).
# The published cases up to 22K context (benchmarks/published.py) fit best with no fall at all
# (20K-context TensorRT-LLM runs: 1.02-1.28 flat, 1.13-1.75 at 32K); 128K keeps a fall where the
# cases say nothing (judgement).
KV_CONTEXT_HALF_TOKENS = 131072.0


# ---------------------------------------------------------------------------
# Generation (inference)
# ---------------------------------------------------------------------------


def decode_tokens_per_s_bound(
    weight_bytes: float, kv_bytes: float, bandwidth_gbs: float
) -> float:
    """Upper bound for one sequence: bandwidth / (weights + KV bytes read per token)."""
    return bandwidth_gbs * 1e9 / (weight_bytes + kv_bytes)


def generation_precision(
    gpu: GpuPerf, weight_precision: str, fallback_to_bf16: bool = True
) -> str:
    """The precision generation computes in: fp8 weights on fp8 tensor cores where present, fp32 weights in
    fp32, the rest in bf16 (weight-only int4/int8, and fp8 without support, when `fallback_to_bf16`)."""
    want = (
        "fp8"
        if weight_precision == "fp8"
        else ("fp32" if weight_precision == "fp32" else "bf16")
    )
    prec = effective_precision(gpu, want, fallback_to_bf16)
    if prec is None:
        raise UnsupportedPrecision(
            f"{gpu.name} has no {want} support (set fallback_to_bf16)"
        )
    return prec


def prefill_flops(shape: ModelShape, prompt_tokens: int) -> float:
    """FLOPs of one sequence's prefill: 2·P_active per prompt token and the attention's 2·L·s²·h."""
    return (
        2.0 * shape.active_params * prompt_tokens
        + 2.0 * shape.layers * prompt_tokens**2 * shape.hidden
    )


def decode_flops(shape: ModelShape, context_tokens: float) -> float:
    """FLOPs of one sequence's decode step at a context length: 2·P_active and the attention's 4·L·h·ctx."""
    return (
        2.0 * shape.active_params + 4.0 * shape.layers * shape.hidden * context_tokens
    )


def generation_time(
    shape: ModelShape,
    *,
    gpu: GpuPerf,
    topology: Topology,
    weight_precision: str = "bf16",
    kv_precision: str = "bf16",
    batch: int = 1,
    prompt_tokens: int = 512,
    output_tokens: int = 256,
    sequences: float = 1.0,
    tensor_parallel: int | None = None,
    bw_efficiency: float = DECODE_BW_EFFICIENCY,
    prefill_mfu: float | None = None,
    decode_mfu: float | None = None,
    fallback_to_bf16: bool = True,
) -> SpeedResult:
    """Productive hours to generate ``output_tokens`` for each of ``sequences`` prompts.

    tensor_parallel: GPUs per model replica, inside one node (default: all
      GPUs of a node); replicas = n_gpus // t serve in parallel (data parallel).
    batch: concurrent sequences per replica (continuous batching).
    Decode step (per replica) = max(memory, compute) + TP communication:
      memory  = (weights/t + batch * KV(avg context)/t) / (bandwidth * bw_efficiency)
      compute = (2*P_active*batch + 4*L*h*ctx*batch) / t / (peak * decode_mfu)
      MoE: bytes streamed per step = min(total, active * batch) weights.
    Prefill (compute-bound) = batch*(2*P_active*prompt + 2*L*prompt^2*h) / (t*peak*prefill_mfu).
    Compute precision: fp8 weights use fp8 tensor cores when present; int4/int8
    weights and fp8 without hardware support are weight-only (bf16 compute,
    bytes still at the weight precision) when ``fallback_to_bf16``.
    Returns tokens_per_s = generated tokens/s over all replicas; bound says
    which decode term dominates.
    """
    t = int(tensor_parallel or topology.gpus_per_node)
    if t < 1 or t > topology.gpus_per_node or topology.n_gpus % t:
        raise ValueError(
            f"tensor_parallel={t} must divide gpus_per_node={topology.gpus_per_node}"
        )
    if weight_precision not in WEIGHT_BYTES_PER_PARAM:
        raise ValueError(
            f"weight_precision={weight_precision!r}: expected one of "
            f"{', '.join(WEIGHT_BYTES_PER_PARAM)}"
        )
    prec = generation_precision(gpu, weight_precision, fallback_to_bf16)
    peak = gpu.peak(prec)
    if prefill_mfu is None:
        prefill_mfu = default_mfu(
            gpu.generation, prec, hidden=shape.hidden, gpu_name=gpu.name
        )
    if decode_mfu is None:
        decode_mfu = prefill_mfu
    replicas = topology.n_gpus // t

    w_total = weight_bytes(shape, weight_precision)
    frac = min(1.0, shape.active_params * batch / shape.params) if shape.params else 1.0
    w_streamed = w_total * frac / t
    avg_ctx = prompt_tokens + output_tokens / 2.0
    kv_step = kv_bytes_per_token(shape, kv_precision, t) * batch * avg_ctx
    bw = gpu.mem_bandwidth_gbs * 1e9 * bw_efficiency
    t_mem = w_streamed / bw + kv_step / (bw * kv_read_efficiency(avg_ctx))
    dec_flops = decode_flops(shape, avg_ctx) * batch
    t_comp = dec_flops / t / (peak * decode_mfu)
    t_comm = 0.0
    if t > 1:
        lat = ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6)
        vol = batch * shape.hidden * 2.0 * 2.0 * (t - 1) / t
        t_comm = 2 * shape.layers * (lat + vol / (intra_bus_gbs(topology) * 1e9))
    step = max(t_mem, t_comp) + t_comm
    bound = "memory" if t_mem >= t_comp else "compute"
    if t_comm > max(t_mem, t_comp):
        bound = "communication"

    pre_flops = batch * prefill_flops(shape, prompt_tokens)
    t_prefill = pre_flops / (t * peak * prefill_mfu)
    batch_s = t_prefill + output_tokens * step
    waves = sequences / (replicas * batch)  # continuous batching: fractional waves
    seconds = waves * batch_s
    gen_tokens = sequences * output_tokens
    flops = sequences * (pre_flops / batch + output_tokens * dec_flops / batch)
    tps = gen_tokens / seconds if seconds > 0 else float("inf")
    achieved = flops / (seconds * topology.n_gpus * peak) if seconds > 0 else 0.0
    return SpeedResult(
        work_h=seconds / 3600.0,
        tokens_per_s=tps,
        scaling_efficiency=max(t_mem, t_comp) / step,
        mfu=achieved,
        flops=flops,
        precision=prec,
        tokens_per_s_per_gpu=tps / topology.n_gpus,
        bound=bound,
        decode_step_s=step,
        prefill_s=t_prefill,
        time_per_output_token_s=((batch - 1) / batch * t_prefill + output_tokens * step)
        / output_tokens,
    )


def generation_floor_h(
    shape: ModelShape,
    *,
    gpu: GpuPerf,
    n_gpus: int,
    weight_precision: str = "bf16",
    batch: int = 1,
    prompt_tokens: int = 512,
    output_tokens: int = 256,
    sequences: float = 1.0,
    bw_efficiency: float = DECODE_BW_EFFICIENCY,
    fallback_to_bf16: bool = True,
) -> float:
    """A lower bound on generation_time's work_h on `n_gpus` GPUs at any tensor-parallel degree and any batch up
    to `batch`, for a fraction of its cost: each sequence's prefill at the compute rate, and each decode step
    at the compute rate or streaming its share of the weights, whichever is slower (no KV reads, no TP
    communication). A planner prices a shape's physics only when this does not already rule it out."""
    prec = generation_precision(gpu, weight_precision, fallback_to_bf16)
    rate = gpu.peak(prec) * default_mfu(
        gpu.generation, prec, hidden=shape.hidden, gpu_name=gpu.name
    )
    shared = (
        min(1.0 / batch, shape.active_params / shape.params)
        if shape.params
        else 1.0 / batch
    )  # weights/sequence
    bw = gpu.mem_bandwidth_gbs * 1e9 * bw_efficiency
    step = max(
        decode_flops(shape, prompt_tokens + output_tokens / 2.0) / rate,
        weight_bytes(shape, weight_precision) * shared / bw,
    )
    return (
        sequences
        * (prefill_flops(shape, prompt_tokens) / rate + output_tokens * step)
        / n_gpus
        / 3600.0
    )


def kv_read_efficiency(context_tokens: float) -> float:
    """Share of the streaming rate that attention kernels reach on KV reads at a context length.

    Paged-attention decode reads each sequence's KV blocks with one query token, so long
    contexts run below the weight-streaming rate: KV_CONTEXT_HALF / (KV_CONTEXT_HALF + ctx)
    of it, on top of bw_efficiency.
    """
    return KV_CONTEXT_HALF_TOKENS / (KV_CONTEXT_HALF_TOKENS + context_tokens)
