"""Productive wall-clock time W for training and generation (pure functions).

Physics layer: plain numbers and frozen dataclasses only.  W is the time of
useful work with no failures and no checkpoints; the cost model adds those.
Formulas and sources: ``shared/MEMORY-AND-SPEED.md`` (§ numbers below).

Units: bandwidths in GB/s (1e9 B/s) unless named ``*_gbps`` (Gbit/s);
peak throughput in TFLOP/s (dense, no sparsity); times in seconds, ``work_h``
in hours; token rates in tokens/s.

Public API
----------
GpuPerf, Topology, SpeedResult
default_mfu(generation, precision, kind) -> float
effective_precision(gpu, precision, fallback_to_bf16=False) -> str | None
bus_bandwidth_gbs(topology) -> float
allreduce_seconds(nbytes, topology, sharding='none') -> float
scaling_efficiency(step_compute_s, comm_s, overlap=DEFAULT_OVERLAP, unoverlapped_s=0.0)
training_time(model, *, tokens, gpu, topology, ...) -> SpeedResult
generation_time(shape, *, gpu, topology, ...) -> SpeedResult
decode_tokens_per_s_bound(weight_bytes, kv_bytes, bandwidth_gbs) -> float
reference_scaled_hours(gpu_hours, ref_gpu, gpu, n_gpus, precision, scaling_eff) -> float
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from .memory import (ModelShape, kv_bytes_per_token, lora_params, weight_bytes,
                     WEIGHT_BYTES_PER_PARAM)

GENERATIONS = ("volta", "turing", "ampere", "ada", "hopper", "blackwell",
               "cdna2", "cdna3", "pascal", "maxwell", "other")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8")

# ---------------------------------------------------------------------------
# Constants (sources in comments)
# ---------------------------------------------------------------------------

# Base MFU for large dense bf16/fp16 pre-training with a good interconnect,
# model FLOPs 6*P*D against dense peak (§5.2).
MFU_TABLE: Mapping[str, float] = MappingProxyType({
    # Llama 3.1 405B on 16K H100: 38-43 % BF16 MFU (arXiv:2407.21783 Table 4).
    "hopper": 0.40,
    # Llama 2: 8.09e22 FLOPs / 184,320 A100-h ~= 39 % (arXiv:2307.09288 Table 2);
    # GPT-NeoX 48-58 % (EleutherAI Transformer Math 101); Megatron 530B 54 %
    # (Korthikanti et al.).  We take the low-middle of that spread.
    "ampere": 0.42,
    # Blackwell: stas00 MAMF 1745/2250 = 78 % ceiling (vs 80 % H100) but young
    # software stacks; judgement.
    "blackwell": 0.35,
    # Ada (L4, L40S, RTX 4090/6000 Ada): all GDDR parts, so GDDR_MFU_FACTOR
    # applies on top: 0.40 * 0.8 = 0.32 (judgement; MEMORY-AND-SPEED §5.2:
    # 25-40 % for consumer/PCIe, unsourced).
    "ada": 0.40,
    # V100: Megatron-LM (Shoeybi et al. 2019) sustained 39 TFLOP/s on one V100
    # = 31 % of 125; 30 TFLOP/s/GPU (24 %) at 512 GPUs.
    "volta": 0.30,
    # T4: 70 W part, throttles under sustained tensor load; judgement.
    "turing": 0.25,
    # MI300X: stas00 MAMF 668/1300 = 51 % matmul ceiling; judgement.
    "cdna3": 0.30,
    "cdna2": 0.28,     # MI250X; judgement
    "pascal": 0.25,    # no tensor cores; judgement
    "maxwell": 0.20,
    "other": 0.25,
})

# Multiplier on MFU_TABLE by job kind (judgement; §5.2 "25-40 % for
# fine-tuning small models").  'inference' applies to prefill / compute-bound
# decode, whose GEMMs are large and need no backward pass.
KIND_FACTOR: Mapping[str, float] = MappingProxyType({
    "pretrain": 1.00,
    "finetune": 0.85,   # full fine-tune: shorter sequences, HF/FSDP stacks
    "lora": 0.75,       # small adapter GEMMs and frozen-base bookkeeping
    "qlora": 0.75,      # plus the dequantisation factor below (applied to FLOPs)
    "inference": 1.00,
})

# MFU against the *fp8* (or int8) peak is lower than bf16 MFU against the bf16
# peak: end-to-end fp8 training speedups over bf16 are ~1.3-1.5x, not 2x
# (Transformer Engine / NeMo reports; judgement).  0.7 * 2 = 1.4x.
PRECISION_FACTOR: Mapping[str, float] = MappingProxyType({
    "bf16": 1.0, "fp16": 1.0, "fp32": 1.0, "fp8": 0.70, "int8": 0.70})

# GDDR (workstation/consumer-class: A10G, L4, L40S, RTX) parts: lower
# sustained clocks and memory bandwidth per FLOP keep MFU below the HBM
# flagships (judgement, §5.2 "25-40 % for consumer/PCIe").
GDDR_MFU_FACTOR = 0.80

# QLoRA: bitsandbytes de-quantises each NF4 weight to bf16 in every forward and
# backward, making steps ~30-50 % slower than LoRA on a bf16 base (commonly
# reported, e.g. S. Raschka, "Practical Tips for Finetuning LLMs Using LoRA",
# 2023: ~39 % longer; not verified against a stored source).  Judgement: 1.4.
QLORA_DEQUANT_FACTOR = 1.4

# Fraction of gradient communication hidden behind the backward pass
# (DDP bucketing / FSDP prefetch).  Backward is 2/3 of a step, so at most
# ~2/3 could hide; 0.5 is a stated judgement, overridable per call.
DEFAULT_OVERLAP = 0.5

# Achievable all-reduce bus bandwidth as a fraction of the unidirectional link
# figure (nccl-tests busbw definition, §5.4).
LINK_EFFICIENCY: Mapping[str, float] = MappingProxyType({
    # A100 NVLink: nccl all_reduce ~235 of 300 GB/s; H200 copy 396/450 (stas00).
    "nvlink": 0.80,
    "infinity_fabric": 0.70,   # MI300X xGMI: 313 busbw of 448 GB/s at 8 GPUs (stas00)
    # PCIe: all-reduce crosses CPU root complexes; §5.4 gives ~20-25 GB/s of
    # 31.5 (PCIe 4), ~40-50 of 63 (PCIe 5).
    "pcie": 0.70,
    # Inter-node, fraction of the per-GPU NIC share (judgement):
    "infiniband": 0.85,   # RDMA + GPUDirect; NDR busbw close to line rate
    "roce": 0.80,         # RDMA over converged Ethernet
    "efa": 0.70,          # AWS SRD via aws-ofi-nccl; somewhat below IB
    # NCCL socket transport over TCP: kernel copies, no GPUDirect, a fraction
    # of line rate (judgement; GCP TCPX/TCPXO do better but are listed here).
    "ethernet": 0.40,
    "none": 0.0,
})

# When a PCIe topology gives no bandwidth: PCIe 4.0 x16, 2 x 31.5 GB/s.
DEFAULT_PCIE_BIDIR_GBS = 64.0

# Per all-reduce launch latency for tensor-parallel decode (judgement;
# NCCL small-message latency ~5-10 us on NVLink, tens of us across PCIe).
ALLREDUCE_LATENCY_S: Mapping[str, float] = MappingProxyType({
    "nvlink": 8e-6, "infinity_fabric": 10e-6, "pcie": 25e-6, "none": 0.0})

# Decode streams weights + KV at 60-80 % of HBM/GDDR peak (§5.3, judgement).
DECODE_BW_EFFICIENCY = 0.70

# Global batch (tokens per optimizer step) when not given: judgement between
# fine-tuning (64K-512K) and Llama-2 pre-training (4M).
DEFAULT_GLOBAL_BATCH_TOKENS = 2**20

# Trainable fraction for LoRA when only a parameter count is known.
DEFAULT_LORA_TRAINABLE_FRACTION = 0.01

_INTRA = ("nvlink", "pcie", "infinity_fabric", "none")
_INTER = ("infiniband", "efa", "roce", "ethernet", "none")
_SHARDINGS = ("none", "zero1", "zero2", "zero3", "hybrid")


# ---------------------------------------------------------------------------
# Data classes
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuPerf:
    """Throughput figures of one GPU model.

    mem_bandwidth_gbs: memory bandwidth, GB/s.  tflops: dense peak TFLOP/s
    (TOP/s for int8) by precision, keys from PRECISIONS; a missing key means
    the GPU has no fast path for that precision.  memory_type: 'hbm' | 'gddr'
    (gpus.csv memory_type HBM*/GDDR*); GDDR parts get GDDR_MFU_FACTOR.
    """

    name: str
    generation: str
    mem_bandwidth_gbs: float
    tflops: Mapping[str, float] = field(default_factory=dict)
    memory_type: str = "hbm"

    def __post_init__(self) -> None:
        if self.generation not in GENERATIONS:
            raise ValueError(f"generation={self.generation!r}: expected one of {', '.join(GENERATIONS)}")
        if self.memory_type not in ("hbm", "gddr"):
            raise ValueError(f"memory_type={self.memory_type!r}: expected hbm or gddr")
        bad = set(self.tflops) - set(PRECISIONS)
        if bad:
            raise ValueError(f"tflops keys {sorted(bad)}: expected {', '.join(PRECISIONS)}")
        object.__setattr__(self, "tflops", MappingProxyType(
            {k: float(v) for k, v in self.tflops.items() if v}))

    def __hash__(self) -> int:
        return hash((self.name, self.generation, self.mem_bandwidth_gbs, self.memory_type,
                     tuple(sorted(self.tflops.items()))))

    def peak(self, precision: str) -> float:
        """Dense peak in FLOP/s (not TFLOP/s) at ``precision``; KeyError if unsupported."""
        return self.tflops[precision] * 1e12


@dataclass(frozen=True)
class Topology:
    """GPUs and links of a candidate.

    intra_node: 'nvlink' | 'pcie' | 'infinity_fabric' | 'none' (single GPU).
    intra_node_gbs: bidirectional GB/s per GPU (datasheet NVLink figure, e.g.
      900 for H100 SXM); None/0 with 'pcie' means PCIe 4.0 x16 (64).
    inter_node: 'infiniband' | 'efa' | 'roce' | 'ethernet' | 'none'.
    inter_node_gbps: Gbit/s per node (all NICs together, e.g. 3200 for p5).
    """

    gpus_per_node: int
    nodes: int = 1
    intra_node: str = "nvlink"
    intra_node_gbs: float | None = None
    inter_node: str = "none"
    inter_node_gbps: float | None = None

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1 or self.nodes < 1:
            raise ValueError(f"gpus_per_node={self.gpus_per_node}, nodes={self.nodes}: must be >= 1")
        if self.intra_node not in _INTRA:
            raise ValueError(f"intra_node={self.intra_node!r}: expected one of {', '.join(_INTRA)}")
        if self.inter_node not in _INTER:
            raise ValueError(f"inter_node={self.inter_node!r}: expected one of {', '.join(_INTER)}")

    @property
    def n_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


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


# ---------------------------------------------------------------------------
# Precision and MFU
# ---------------------------------------------------------------------------

def default_mfu(generation: str, precision: str = "bf16", kind: str = "pretrain",
                memory_type: str = "hbm") -> float:
    """Default MFU = MFU_TABLE[generation] * KIND_FACTOR[kind] * PRECISION_FACTOR[precision]
    (* GDDR_MFU_FACTOR when memory_type == 'gddr')."""
    if generation not in MFU_TABLE:
        raise ValueError(f"generation={generation!r}: expected one of {', '.join(MFU_TABLE)}")
    if kind not in KIND_FACTOR:
        raise ValueError(f"kind={kind!r}: expected one of {', '.join(KIND_FACTOR)}")
    if precision not in PRECISION_FACTOR:
        raise ValueError(f"precision={precision!r}: expected one of {', '.join(PRECISION_FACTOR)}")
    mem = GDDR_MFU_FACTOR if memory_type == "gddr" else 1.0
    return MFU_TABLE[generation] * KIND_FACTOR[kind] * PRECISION_FACTOR[precision] * mem


def effective_precision(gpu: GpuPerf, precision: str,
                        fallback_to_bf16: bool = False) -> str | None:
    """Compute precision actually used on ``gpu``, or None when infeasible.

    Supported -> unchanged.  fp8/int8 unsupported -> None, or the bf16 path
    when ``fallback_to_bf16``.  bf16 unsupported (V100, T4) -> fp16 (same
    memory; needs loss scaling).  fp16 unsupported -> fp32.  fp32 missing -> None.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: expected one of {', '.join(PRECISIONS)}")
    t = gpu.tflops
    if precision in t:
        return precision
    if precision in ("fp8", "int8"):
        return effective_precision(gpu, "bf16") if fallback_to_bf16 else None
    if precision == "bf16":
        return effective_precision(gpu, "fp16")
    if precision == "fp16":
        return "fp32" if "fp32" in t else None
    return None


# ---------------------------------------------------------------------------
# Communication
# ---------------------------------------------------------------------------

def _intra_bus_gbs(topo: Topology) -> float:
    if topo.intra_node == "none" or topo.gpus_per_node == 1:
        return float("inf")
    bidir = topo.intra_node_gbs or (DEFAULT_PCIE_BIDIR_GBS if topo.intra_node == "pcie" else 0.0)
    if bidir <= 0:
        raise ValueError(f"intra_node={topo.intra_node!r} needs intra_node_gbs")
    return bidir / 2.0 * LINK_EFFICIENCY[topo.intra_node]


def _inter_bus_gbs(topo: Topology) -> float:
    if topo.nodes == 1:
        return float("inf")
    if topo.inter_node == "none" or not topo.inter_node_gbps:
        raise ValueError("multi-node topology needs inter_node and inter_node_gbps")
    return topo.inter_node_gbps / 8.0 / topo.gpus_per_node * LINK_EFFICIENCY[topo.inter_node]


def bus_bandwidth_gbs(topology: Topology) -> float:
    """Achievable all-reduce bus bandwidth per GPU, GB/s (inf for one GPU).

    min(intra: bidirectional/2 * eff, inter: Gbit/s per node / 8 / gpus_per_node * eff).
    """
    return min(_intra_bus_gbs(topology), _inter_bus_gbs(topology))


def allreduce_seconds(nbytes: float, topology: Topology, sharding: str = "none") -> float:
    """Seconds for one ring all-reduce of ``nbytes`` over all GPUs of ``topology``.

    nccl-tests: time = 2(n-1)/n * S / busbw; hierarchical runs are limited by
    the slower of the intra-node link and the per-GPU NIC share.  ZeRO-1/2
    move the same volume as DDP; ZeRO-3 / hybrid 1.5x (ZeRO paper §7).
    """
    if sharding not in _SHARDINGS:
        raise ValueError(f"sharding={sharding!r}: expected one of {', '.join(_SHARDINGS)}")
    n = topology.n_gpus
    if n <= 1 or nbytes <= 0:
        return 0.0
    volume = 2.0 * (n - 1) / n * nbytes
    if sharding in ("zero3", "hybrid"):
        volume *= 1.5
    return volume / (bus_bandwidth_gbs(topology) * 1e9)


def scaling_efficiency(step_compute_s: float, comm_s: float, overlap: float = DEFAULT_OVERLAP,
                       unoverlapped_s: float = 0.0) -> float:
    """t_compute / (t_compute + (1 - overlap) * t_comm + unoverlapped_s)."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap={overlap}: expected 0..1")
    denom = step_compute_s + (1.0 - overlap) * comm_s + unoverlapped_s
    return 1.0 if denom <= 0 else step_compute_s / denom


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------

def training_time(model: ModelShape | float, *, tokens: float, gpu: GpuPerf, topology: Topology,
                  precision: str = "bf16", method: str = "full", mfu: float | None = None,
                  kind: str | None = None, recompute: str = "selective",
                  sharding: str = "none", overlap: float = DEFAULT_OVERLAP,
                  global_batch_tokens: float = DEFAULT_GLOBAL_BATCH_TOKENS,
                  tensor_parallel: int = 1, seq_len: int | None = None,
                  lora_rank: int = 16, lora_targets_fraction: float = 1.0,
                  trainable_params: float | None = None,
                  fallback_to_bf16: bool = False) -> SpeedResult:
    """Productive hours to train on ``tokens`` tokens with every GPU of ``topology``.

    model: ModelShape, or a plain (dense) parameter count.
    FLOPs per token: full 6*P_active (8* with recompute='full'); lora 4*P_active
    (forward 2P + activation-gradient backward 2P, no weight gradients for the
    frozen base; +2P with recompute='full'); qlora as lora times
    QLORA_DEQUANT_FACTOR.  With ``seq_len`` and a shape, PaLM's attention term
    12*L*h*s (x4/3 with full recompute) is added per token.
    time = FLOPs / (N * peak * MFU * scaling_efficiency).
    mfu: None -> default_mfu(gpu.generation, precision, kind); kind defaults
      to 'pretrain' (full) or method ('lora' / 'qlora'); GDDR GPUs x0.8.
    Communication per optimizer step (global_batch_tokens tokens): all-reduce
    of trainable grads (2 B, 4 B in fp32) / t over the data-parallel GPUs,
    `overlap` of it hidden; with tensor_parallel > 1 and a shape, 4 (6 with
    full recompute) un-overlapped all-reduces of 2*h B per token per layer
    inside the node (Megatron TP).  ZeRO-3 parameter gathers are counted once
    per step (gradient accumulation would repeat them; ignored).
    Raises ValueError when the precision is unsupported (effective_precision None).
    """
    if method not in ("full", "lora", "qlora"):
        raise ValueError(f"method={method!r}: expected full, lora or qlora")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute={recompute!r}: expected none, selective or full")
    prec = effective_precision(gpu, precision, fallback_to_bf16)
    if prec is None:
        raise ValueError(f"{gpu.name} has no {precision} support (set fallback_to_bf16 to run in bf16)")
    shape = model if isinstance(model, ModelShape) else None
    p_total = float(shape.params if shape else model)
    p_active = float(shape.active_params if shape else model)
    n = topology.n_gpus
    t = int(tensor_parallel)
    if t < 1 or n % t or t > topology.gpus_per_node:
        raise ValueError(f"tensor_parallel={t} must divide gpus_per_node={topology.gpus_per_node}")

    if method == "full":
        per_token = (8.0 if recompute == "full" else 6.0) * p_active
    else:
        per_token = (6.0 if recompute == "full" else 4.0) * p_active
        if method == "qlora":
            per_token *= QLORA_DEQUANT_FACTOR
    if shape is not None and seq_len:
        per_token += 12.0 * shape.layers * shape.hidden * seq_len * (4 / 3 if recompute == "full" else 1)
    flops = per_token * tokens

    if mfu is None:
        mfu = default_mfu(gpu.generation, prec, kind or ("pretrain" if method == "full" else method),
                          gpu.memory_type)
    peak = gpu.peak(prec)

    # per optimizer step
    step_compute = per_token * global_batch_tokens / (n * peak * mfu)
    if method == "full":
        trainable = p_total
    elif trainable_params is not None:
        trainable = trainable_params
    elif shape is not None:
        trainable = lora_params(shape, lora_rank, lora_targets_fraction)
    else:
        trainable = DEFAULT_LORA_TRAINABLE_FRACTION * p_total
    grad_bytes = (4.0 if prec == "fp32" or method != "full" else 2.0) * trainable / t
    dp_comm = _dp_allreduce_seconds(grad_bytes, topology, t, sharding)
    tp_comm = 0.0
    if t > 1 and shape is not None:
        tokens_per_group = global_batch_tokens / (n // t)
        msgs = 6 if recompute == "full" else 4
        vol = msgs * shape.layers * tokens_per_group * 2.0 * shape.hidden * 2.0 * (t - 1) / t
        tp_comm = vol / (_intra_bus_gbs(topology) * 1e9)
    eff = scaling_efficiency(step_compute, dp_comm, overlap, unoverlapped_s=tp_comm)

    seconds = flops / (n * peak * mfu * eff)
    tps = tokens / seconds if seconds > 0 else float("inf")
    return SpeedResult(work_h=seconds / 3600.0, tokens_per_s=tps, scaling_efficiency=eff,
                       mfu=mfu, flops=flops, precision=prec, tokens_per_s_per_gpu=tps / n)


def _dp_allreduce_seconds(grad_bytes: float, topology: Topology, t: int, sharding: str) -> float:
    """Gradient all-reduce over the n/t data-parallel ranks.

    All n GPUs communicate at once (one DP ring per TP rank), so each sees the
    per-GPU bus bandwidth of the full topology; equals allreduce_seconds for t = 1.
    """
    if sharding not in _SHARDINGS:
        raise ValueError(f"sharding={sharding!r}: expected one of {', '.join(_SHARDINGS)}")
    ranks = topology.n_gpus // t
    if ranks <= 1:
        return 0.0
    volume = 2.0 * (ranks - 1) / ranks * grad_bytes * (1.5 if sharding in ("zero3", "hybrid") else 1.0)
    return volume / (bus_bandwidth_gbs(topology) * 1e9)


# ---------------------------------------------------------------------------
# Generation (inference)
# ---------------------------------------------------------------------------

def decode_tokens_per_s_bound(weight_bytes: float, kv_bytes: float, bandwidth_gbs: float) -> float:
    """Upper bound for one sequence: bandwidth / (weights + KV bytes read per token) (§5.3)."""
    return bandwidth_gbs * 1e9 / (weight_bytes + kv_bytes)


def generation_time(shape: ModelShape, *, gpu: GpuPerf, topology: Topology,
                    weight_precision: str = "bf16", kv_precision: str = "bf16",
                    batch: int = 1, prompt_tokens: int = 512, output_tokens: int = 256,
                    sequences: float = 1.0, tensor_parallel: int | None = None,
                    bw_efficiency: float = DECODE_BW_EFFICIENCY,
                    prefill_mfu: float | None = None, decode_mfu: float | None = None,
                    fallback_to_bf16: bool = True) -> SpeedResult:
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
        raise ValueError(f"tensor_parallel={t} must divide gpus_per_node={topology.gpus_per_node}")
    if weight_precision not in WEIGHT_BYTES_PER_PARAM:
        raise ValueError(f"weight_precision={weight_precision!r}: expected one of "
                         f"{', '.join(WEIGHT_BYTES_PER_PARAM)}")
    want = "fp8" if weight_precision == "fp8" else ("fp32" if weight_precision == "fp32" else "bf16")
    prec = effective_precision(gpu, want, fallback_to_bf16)
    if prec is None:
        raise ValueError(f"{gpu.name} has no {want} support (set fallback_to_bf16)")
    peak = gpu.peak(prec)
    if prefill_mfu is None:
        prefill_mfu = default_mfu(gpu.generation, prec, "inference", gpu.memory_type)
    if decode_mfu is None:
        decode_mfu = prefill_mfu
    replicas = topology.n_gpus // t

    w_total = weight_bytes(shape, weight_precision)
    frac = min(1.0, shape.active_params * batch / shape.params) if shape.params else 1.0
    w_streamed = w_total * frac / t
    avg_ctx = prompt_tokens + output_tokens / 2.0
    kv_step = kv_bytes_per_token(shape, kv_precision, t) * batch * avg_ctx
    bw = gpu.mem_bandwidth_gbs * 1e9 * bw_efficiency
    t_mem = (w_streamed + kv_step) / bw
    dec_flops = (2.0 * shape.active_params + 4.0 * shape.layers * shape.hidden * avg_ctx) * batch
    t_comp = dec_flops / t / (peak * decode_mfu)
    t_comm = 0.0
    if t > 1:
        lat = ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6)
        vol = batch * shape.hidden * 2.0 * 2.0 * (t - 1) / t
        t_comm = 2 * shape.layers * (lat + vol / (_intra_bus_gbs(topology) * 1e9))
    step = max(t_mem, t_comp) + t_comm
    bound = "memory" if t_mem >= t_comp else "compute"
    if t_comm > max(t_mem, t_comp):
        bound = "communication"

    pre_flops = batch * (2.0 * shape.active_params * prompt_tokens
                         + 2.0 * shape.layers * prompt_tokens**2 * shape.hidden)
    t_prefill = pre_flops / (t * peak * prefill_mfu)
    batch_s = t_prefill + output_tokens * step
    waves = sequences / (replicas * batch)        # continuous batching: fractional waves
    seconds = waves * batch_s
    gen_tokens = sequences * output_tokens
    flops = sequences * (pre_flops / batch + output_tokens * dec_flops / batch)
    tps = gen_tokens / seconds if seconds > 0 else float("inf")
    achieved = flops / (seconds * topology.n_gpus * peak) if seconds > 0 else 0.0
    return SpeedResult(work_h=seconds / 3600.0, tokens_per_s=tps,
                       scaling_efficiency=max(t_mem, t_comp) / step, mfu=achieved, flops=flops,
                       precision=prec, tokens_per_s_per_gpu=tps / topology.n_gpus, bound=bound)


# ---------------------------------------------------------------------------
# Reference benchmarks
# ---------------------------------------------------------------------------

def reference_scaled_hours(gpu_hours: float, ref_gpu: GpuPerf, gpu: GpuPerf, n_gpus: int,
                           precision: str = "bf16", scaling_eff: float = 1.0,
                           kind: str = "finetune", fallback_to_bf16: bool = False) -> float:
    """Wall-clock hours on ``n_gpus`` x ``gpu`` for a job measured as ``gpu_hours`` on ``ref_gpu``.

    hours = gpu_hours * (peak_ref * MFU_ref) / (peak * MFU) / n_gpus / scaling_eff,
    each side at its effective precision with default_mfu(generation, prec, kind).
    """
    thr = []
    for g in (ref_gpu, gpu):
        p = effective_precision(g, precision, fallback_to_bf16)
        if p is None:
            raise ValueError(f"{g.name} has no {precision} support")
        thr.append(g.peak(p) * default_mfu(g.generation, p, kind, g.memory_type))
    if n_gpus < 1 or scaling_eff <= 0:
        raise ValueError(f"n_gpus={n_gpus}, scaling_eff={scaling_eff}: must be positive")
    return gpu_hours * thr[0] / thr[1] / n_gpus / scaling_eff
