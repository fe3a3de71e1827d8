"""Productive wall-clock time W for training and generation (pure functions).

Physics layer: plain numbers and frozen dataclasses only.  W is the time of
useful work with no failures and no checkpoints; the cost model adds those.
The formulas are described in docs/physics.md; the published runs each is held to are in docs/validation.md
(``benchmarks/published.py``), with their sources.

Units: bandwidths in GB/s (1e9 B/s) unless named ``*_gbps`` (Gbit/s);
peak throughput in TFLOP/s (dense, no sparsity); times in seconds, ``work_h``
in hours; token rates in tokens/s.

Public API
----------
GpuPerf, Topology, SpeedResult
default_mfu(generation, precision, micro_batch_tokens, hidden, gpu_name) -> float
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

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from planner.physics.memory import (
    NF4_DQ_BYTES_PER_PARAM,
    WEIGHT_BYTES_PER_PARAM,
    ModelShape,
    check_expert_parallel,
    kv_bytes_per_token,
    lora_params,
    params_per_gpu,
    weight_bytes,
)

GENERATIONS = ("volta", "turing", "ampere", "ada", "hopper", "blackwell",
               "cdna2", "cdna3", "pascal", "maxwell", "other")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8")

# ---------------------------------------------------------------------------
# Constants (sources in comments)
# ---------------------------------------------------------------------------

# Kernel efficiency of wide models by GPU generation: the share of the dense bf16 peak the model FLOPs
# reach with large micro-batches, before the pipeline bubble and exposed communication that
# training_time adds, and before default_mfu's width and micro-batch factors.  Each is the figure that
# fits its generation's throughput runs in benchmarks/published_cases.yaml best (docs/recipes.md has
# the table with every source and ratio), not any one run.
MFU_TABLE: Mapping[str, float] = MappingProxyType({
    # LLM Foundry MPT 760M-70B on 8-512 H100 (35-46 % MFU), fms-fsdp Llama 2 7B/70B on 96 H100 (46 %,
    # 38 %), Megatron-core GPT-3 175B (47 % at 96 GPUs), NeMo AutoModel LoRA on H100, llm.c GPT-2 1.5B.
    "hopper": 0.53,
    # The same Foundry configurations on A100 reach 45-64 % (MPT-7B: 64 % against 46 % on H100), fms-fsdp
    # 68 % and 55 %, Megatron's A100 papers 52-54 % hardware FLOPs; Answer.AI's FSDP-QLoRA on A5000s and
    # A100-40GB and torchtune's 70B LoRA agree.  Model-card GPU-hours (Llama 2, Pythia, BLOOM) sit lower:
    # they hold failures, restarts and evaluations that the cost model adds on its own.
    "ampere": 0.62,
    # Blackwell: no published training run in the set; stas00's MAMF 1745/2250 = 78 % matmul ceiling (H100
    # 80 %) and young software stacks: hopper's figure times the earlier 0.88 (judgement).
    "blackwell": 0.47,
    # Ada's datacenter parts (L4, L40S, RTX 6000 Ada): no published training run in the set; the earlier
    # ratio to hopper (judgement).  TensorRT-LLM's 20K-token prefills on L40S sit within 1.4x with it.
    "ada": 0.5,
    # V100: Megatron-LM (Shoeybi et al. 2019) sustained 39 TFLOP/s on one V100 = 31 % of 125
    # end to end.
    "volta": 0.37,
    "turing": 0.31,     # T4: 70 W part, throttles under sustained tensor load; judgement
    "cdna3": 0.37,      # MI300X: stas00 MAMF 668/1300 = 51 % matmul ceiling; judgement
    "cdna2": 0.35,     # MI250X; judgement
    "pascal": 0.31,     # no tensor cores; judgement
    "maxwell": 0.25,
    "other": 0.31,
})

# Tokens per micro-batch at which the GEMMs run at half their large-batch rate
# (judgement: a 4K-token micro-batch runs at 94 % of the large-GEMM rate, 512 tokens at 67 %).
MICRO_BATCH_HALF_TOKENS = 256.0

# GPUs whose own published runs set their efficiency apart from their generation's.  The RTX 4090's
# whitepaper peak (165 TFLOP/s bf16 with fp32 accumulate) is GeForce's half-rate path, which the card
# sustains at its 450 W where the full-rate datacenter Ada parts are power-bound: torchtune's Llama 3.1 8B
# LoRA and QLoRA on one (3,083 and 2,413 tokens/s) and Answer.AI's Yi-34B FSDP-QLoRA on two (2,072 s for
# 2.1M tokens) need 0.75 of it (docs/recipes.md).
MFU_BY_GPU: Mapping[str, float] = MappingProxyType({"RTX4090": 0.75})

# Model width at which the GEMMs of a layer run at half the wide-model rate: narrow models have small
# matrices, more of their time in norms, activations and launches.  Fitted to LLM Foundry's A100-80GB rows
# at 2,048 tokens on 8 GPUs (MFU 45 % at d_model 768, 52 % at 1,024, 57 % at 1,536, 60 % at 2,048, 64 % at
# 4,096: h / (h + 440) within 0.03 of each), scripts/train/benchmarking/README.md, commit 4952183.
WIDTH_HALF = 440.0

# Extra time of QLoRA over LoRA on the same base: bitsandbytes de-quantises each NF4 weight to bf16 in
# every forward, recomputed forward and backward.  torchtune's README measured Llama 3.1 8B on one RTX
# 4090 (batch 2 x 2,048 tokens, the same recipe): LoRA 3,083 tokens/s, QLoRA 2,413: 1.28x.
QLORA_DEQUANT_FACTOR = 3083 / 2413

# MFU against the *fp8* (or int8) peak is lower than bf16 MFU against the bf16
# peak: end-to-end fp8 training speedups over bf16 are ~1.3-1.5x, not 2x
# (Transformer Engine / NeMo reports; judgement).  0.7 * 2 = 1.4x.
PRECISION_FACTOR: Mapping[str, float] = MappingProxyType({
    "bf16": 1.0, "fp16": 1.0, "fp32": 1.0, "fp8": 0.70, "int8": 0.70})

# Fraction of gradient communication hidden behind the backward pass
# (DDP bucketing / FSDP prefetch).  Backward is 2/3 of a step, so at most
# ~2/3 could hide; 0.5 is a stated judgement, overridable per call.
DEFAULT_OVERLAP = 0.5

# Achievable all-reduce bus bandwidth as a fraction of the unidirectional link
# figure (nccl-tests' busbw definition).
LINK_EFFICIENCY: Mapping[str, float] = MappingProxyType({
    # A100 NVLink: nccl all_reduce ~235 of 300 GB/s; H200 copy 396/450 (stas00).
    "nvlink": 0.80,
    "infinity_fabric": 0.70,   # MI300X xGMI: 313 busbw of 448 GB/s at 8 GPUs (stas00)
    # PCIe: all-reduce crosses CPU root complexes; nccl-tests on PCIe servers give ~20-25 GB/s of
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

# Decode streams weights + KV at 60-80 % of HBM/GDDR peak (judgement; the published batch-1 decode figures in docs/validation.md check it).
DECODE_BW_EFFICIENCY = 0.70
# Context length at which KV reads run at half the weight-streaming rate (see kv_read_efficiency).
# The published cases up to 22K context (benchmarks/published.py) fit best with no fall at all
# (20K-context TensorRT-LLM runs: 1.02-1.28 flat, 1.13-1.75 at 32K); 128K keeps a fall where the
# cases say nothing (judgement).
KV_CONTEXT_HALF_TOKENS = 131072.0

# Tokens per optimizer step when the workload gives none (see default_global_batch_tokens).
PRETRAIN_GLOBAL_BATCH_TOKENS = 4 * 2**20
FINETUNE_GLOBAL_BATCH_TOKENS = 2**19
DEFAULT_SEQ_LEN = 2048

# Gradient buckets: PyTorch DDP's bucket_cap_mb = 25 (Megatron and FSDP use similar sizes).
BUCKET_BYTES = 25 * 2**20

# Per-hop latency of a collective across nodes (judgement from NCCL small-message
# figures: a few us on InfiniBand, tens of us on EFA's SRD and on TCP sockets).
NETWORK_LATENCY_S: Mapping[str, float] = MappingProxyType({
    "infiniband": 5e-6, "roce": 8e-6, "efa": 15e-6, "ethernet": 50e-6, "none": 0.0})

# Trainable fraction for LoRA when only a parameter count is known.
DEFAULT_LORA_TRAINABLE_FRACTION = 0.01

_INTRA = ("nvlink", "pcie", "infinity_fabric", "none")
_INTER = ("infiniband", "efa", "roce", "ethernet", "none")
_SHARDINGS = ("none", "zero1", "zero2", "zero3", "hybrid")


# ---------------------------------------------------------------------------
# Data classes
# ---------------------------------------------------------------------------

class UnsupportedPrecision(ValueError):
    """The GPU cannot run the precision asked for, and falling back to bf16 is not allowed."""


@dataclass(frozen=True)
class GpuPerf:
    """Throughput figures of one GPU model.

    mem_bandwidth_gbs: memory bandwidth, GB/s.  tflops: dense peak TFLOP/s
    (TOP/s for int8) by precision, keys from PRECISIONS; a missing key means
    the GPU has no fast path for that precision.  memory_type: 'hbm' | 'gddr'
    (gpus.csv memory_type HBM*/GDDR*).
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
    decode_step_s: float = 0.0  # generation: one decode step of a replica's batch
    prefill_s: float = 0.0      # generation: prefill of one batch (compute-bound; the time to first token)
    # generation: time between a sequence's tokens under continuous batching, where the prefills of the
    # other batch - 1 sequences are interleaved with its decode steps: ((b-1)/b * prefill + n * step) / n
    time_per_output_token_s: float = 0.0


# ---------------------------------------------------------------------------
# Precision and MFU
# ---------------------------------------------------------------------------

def default_mfu(generation: str, precision: str = "bf16", micro_batch_tokens: float | None = None,
                hidden: int | None = None, gpu_name: str = "") -> float:
    """Default kernel MFU = MFU_TABLE[generation] (MFU_BY_GPU[gpu_name] where a GPU has its own) * PRECISION_FACTOR[precision] * x / (x + MICRO_BATCH_HALF_TOKENS)
    for x = tokens per micro-batch (GEMMs with few rows run below the large-GEMM rate) * h / (h + WIDTH_HALF)
    for a model of width h (narrow GEMMs likewise).

    This is the efficiency of the compute alone: the pipeline bubble and exposed communication of
    training_time come on top, so a large run's end-to-end MFU is lower.  It is the same for pre-training,
    full fine-tuning, LoRA and QLoRA (their FLOPs differ: flops_per_token) and on GDDR cards: the published
    fine-tuning runs of docs/recipes.md show no lower efficiency for any of them.
    """
    if generation not in MFU_TABLE:
        raise ValueError(f"generation={generation!r}: expected one of {', '.join(MFU_TABLE)}")
    if precision not in PRECISION_FACTOR:
        raise ValueError(f"precision={precision!r}: expected one of {', '.join(PRECISION_FACTOR)}")
    rows = 1.0 if micro_batch_tokens is None else micro_batch_tokens / (micro_batch_tokens + MICRO_BATCH_HALF_TOKENS)
    width = 1.0 if hidden is None else hidden / (hidden + WIDTH_HALF)
    return MFU_BY_GPU.get(gpu_name, MFU_TABLE[generation]) * PRECISION_FACTOR[precision] * rows * width


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
    """Seconds for one all-reduce of ``nbytes`` over all GPUs of ``topology``.

    nccl-tests: time = 2(n-1)/n * S / busbw inside a node; across nodes see
    collective_seconds.  ZeRO-1/2 move the same volume as DDP; ZeRO-3 / hybrid
    1.5x (ZeRO paper §7).
    """
    if sharding not in _SHARDINGS:
        raise ValueError(f"sharding={sharding!r}: expected one of {', '.join(_SHARDINGS)}")
    volume = nbytes * (1.5 if sharding in ("zero3", "hybrid") else 1.0)
    return collective_seconds(volume, topology.n_gpus, topology.gpus_per_node, topology, factor=2.0)


def collective_seconds(nbytes: float, ranks: int, local: int, topology: Topology, factor: float = 2.0,
                       bucket_bytes: float = float("inf")) -> float:
    """Seconds for a hierarchical collective of ``nbytes`` per rank over ``ranks`` GPUs.

    The ``local`` ranks of a node reduce-scatter (and all-gather) over NVLink/PCIe,
    then each GPU exchanges its 1/local share with its peers in the other nodes over
    its share of the node's NICs (what NCCL's rings and trees achieve across nodes):
      factor * ((g-1)/g * S / B_intra + (N-1)/N * S/g / B_nic)   with g = local, N = ranks/g;
    factor 2 for an all-reduce, 1 for a reduce-scatter or an all-gather (nccl-tests
    PERFORMANCE.md).  Each bucket of ``bucket_bytes`` pays a launch latency
    2(g-1) * a_intra + 2 log2(N) * a_inter.
    """
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    g = max(1, min(local, ranks))
    nodes = ranks / g
    seconds = 0.0
    latency = 0.0
    if g > 1:
        seconds += factor * (g - 1) / g * nbytes / (_intra_bus_gbs(topology) * 1e9)
        latency += 2 * (g - 1) * ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6)
    if nodes > 1:
        seconds += factor * (nodes - 1) / nodes * (nbytes / g) / (_inter_bus_gbs(topology) * 1e9)
        latency += 2 * math.log2(nodes) * NETWORK_LATENCY_S.get(topology.inter_node, 50e-6)
    return seconds + latency * max(1, math.ceil(nbytes / bucket_bytes))


def all_to_all_seconds(nbytes: float, ranks: int, local: int, topology: Topology) -> float:
    """Seconds for an all-to-all of ``nbytes`` per rank (MoE token dispatch or combine).

    Each rank keeps 1/ranks, sends (local-1)/ranks of its bytes over NVLink/PCIe and
    (ranks-local)/ranks over its NIC share, both at once (nccl-tests factor (n-1)/n).
    """
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    g = max(1, min(local, ranks))
    intra = (g - 1) / ranks * nbytes / (_intra_bus_gbs(topology) * 1e9) if g > 1 else 0.0
    inter = (ranks - g) / ranks * nbytes / (_inter_bus_gbs(topology) * 1e9) if ranks > g else 0.0
    latency = ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6) + (
        NETWORK_LATENCY_S.get(topology.inter_node, 50e-6) if ranks > g else 0.0)
    return max(intra, inter) + latency


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

def default_global_batch_tokens(kind: str, dp: int, micro_batch: int, seq_len: int) -> float:
    """Tokens per optimizer step when the workload gives none.

    Pre-training: 4M tokens (Llama 2: 4M; Llama 3 405B: 4M rising to 16M; OLMo 4M);
    fine-tuning: 512K (128 sequences of 4K, as SFT recipes such as Tulu use).  Never
    below one micro-batch per data-parallel rank.
    """
    base = PRETRAIN_GLOBAL_BATCH_TOKENS if kind == "pretrain" else FINETUNE_GLOBAL_BATCH_TOKENS
    return float(max(base, dp * micro_batch * seq_len))


def flops_per_token(model: ModelShape | float, method: str, recompute: str, seq_len: int | None) -> float:
    """Hardware FLOPs per trained token: 6·N (8· with full recompute) for N the parameters a token multiplies
    (the active ones less an untied input embedding, a lookup); LoRA 4·N (no weight gradients for the frozen
    base; +2N with full recompute), QLoRA times QLORA_DEQUANT_FACTOR; with a shape and `seq_len`, PaLM's
    attention 12·L·h·s."""
    shape = model if isinstance(model, ModelShape) else None
    n = float(shape.active_params - (0 if shape.tied_embeddings else shape.vocab * shape.hidden) if shape else model)
    if method == "full":
        per_token = (8.0 if recompute == "full" else 6.0) * n
    else:
        per_token = (6.0 if recompute == "full" else 4.0) * n
    if shape is not None and seq_len:
        per_token += 12.0 * shape.layers * shape.hidden * seq_len * (4 / 3 if recompute == "full" else 1)
    if method == "qlora":
        per_token *= QLORA_DEQUANT_FACTOR
    return per_token


def compute_floor_seconds_per_token(model: ModelShape | float, *, gpu: GpuPerf, n_gpus: int, precision: str,
                                    method: str, recompute: str, seq_len: int, micro_batch: int, kind: str,
                                    micro_batches: int, pipeline_parallel: int = 1, virtual_stages: int = 1,
                                    mfu: float | None = None, context_parallel: int = 1,
                                    naive_pipeline: bool = False) -> float:
    """A lower bound on training_time's seconds per token for a layout: its compute and pipeline bubble
    alone, with no communication (which only adds). Lets the layout search skip layouts that cannot win."""
    if mfu is None:
        mfu = default_mfu(gpu.generation, precision, gpu_name=gpu.name,
                          micro_batch_tokens=micro_batch * seq_len / context_parallel,
                          hidden=model.hidden if isinstance(model, ModelShape) else None)
    bubble = float(pipeline_parallel) if naive_pipeline else 1.0 + (pipeline_parallel - 1) / virtual_stages / micro_batches
    return flops_per_token(model, method, recompute, seq_len) / (n_gpus * gpu.peak(precision) * mfu) * bubble


def training_time(model: ModelShape | float, *, tokens: float, gpu: GpuPerf, topology: Topology,
                  precision: str = "bf16", method: str = "full", mfu: float | None = None,
                  kind: str | None = None, recompute: str = "selective",
                  sharding: str = "none", overlap: float | None = None,
                  global_batch_tokens: float | None = None,
                  tensor_parallel: int = 1, pipeline_parallel: int = 1, expert_parallel: int = 1,
                  micro_batch: int = 1, seq_len: int | None = None, virtual_stages: int = 1,
                  context_parallel: int = 1, lora_rank: int = 16, lora_targets_fraction: float = 1.0,
                  trainable_params: float | None = None, moe_overlap: bool = False, naive_pipeline: bool = False,
                  fallback_to_bf16: bool = False) -> SpeedResult:
    """Productive hours to train on ``tokens`` tokens with every GPU of ``topology``.

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
    if method not in ("full", "lora", "qlora"):
        raise ValueError(f"method={method!r}: expected full, lora or qlora")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute={recompute!r}: expected none, selective or full")
    if sharding not in _SHARDINGS:
        raise ValueError(f"sharding={sharding!r}: expected one of {', '.join(_SHARDINGS)}")
    if overlap is not None and not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap={overlap}: expected 0..1")
    prec = effective_precision(gpu, precision, fallback_to_bf16)
    if prec is None:
        raise UnsupportedPrecision(f"{gpu.name} has no {precision} support (set fallback_to_bf16 to run in bf16)")
    shape = model if isinstance(model, ModelShape) else None
    p_total = float(shape.params if shape else model)
    p_active = float(shape.active_params if shape else model)
    n = topology.n_gpus
    t, p, e, b = int(tensor_parallel), int(pipeline_parallel), int(expert_parallel), int(micro_batch)
    c = int(context_parallel)
    if t < 1 or t > topology.gpus_per_node or topology.gpus_per_node % t:
        raise ValueError(f"tensor_parallel={t} must divide gpus_per_node={topology.gpus_per_node}")
    if p < 1 or c < 1 or n % (t * p * c):
        raise ValueError(f"pipeline_parallel={p} x tensor_parallel={t}"
                         + (f" x context_parallel={c}" if c != 1 else "") + f" must divide {n} GPUs")
    v = int(virtual_stages)
    if shape is not None and p * v > shape.layers:
        raise ValueError(f"pipeline_parallel={p} x virtual_stages={v} exceeds the model's {shape.layers} layers")
    if v < 1 or (v > 1 and p == 1):
        raise ValueError(f"virtual_stages={v} needs pipeline_parallel > 1")
    dp = n // (t * p * c)
    check_expert_parallel(e, dp, shape is not None and shape.moe)
    if sharding in ("zero3", "hybrid") and p > 1:
        raise ValueError("ZeRO-3 shards parameters that pipeline stages already split: use zero1 with pipeline_parallel")
    s = int(seq_len or DEFAULT_SEQ_LEN)
    kind = kind or ("pretrain" if method == "full" else method)

    per_token = flops_per_token(shape if shape is not None else p_active, method, recompute, seq_len)
    flops = per_token * tokens
    if mfu is None:
        mfu = default_mfu(gpu.generation, prec, gpu_name=gpu.name, micro_batch_tokens=b * s / c,
                          hidden=shape.hidden if shape is not None else None)
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
            micro += stage_layers * _context_ring_seconds(shape, topology, t, c, micro_tokens / c, recompute,
                                                          peak * mfu)
        if t > 1:
            msgs = 6 if recompute == "full" else 4
            micro += msgs * stage_layers * collective_seconds(act_bytes, t, t, topology, 2.0)
        if e > 1:
            local_ep = max(1, min(e, topology.gpus_per_node // t))
            moe_layers = math.ceil(shape.moe_layers / p)
            msgs = 6 if recompute == "full" else 4
            a2a = msgs * moe_layers * all_to_all_seconds(act_bytes * shape.experts_per_token / t, e, local_ep,
                                                         topology)
            micro += max(0.0, a2a - compute) if moe_overlap else a2a
        if p > 1:
            cross = t * p > topology.gpus_per_node
            bw = (_inter_bus_gbs(topology) if cross else _intra_bus_gbs(topology)) * 1e9
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
        return (collective_seconds(dense * grad_b, dp * c, local_dp, topology, factor, BUCKET_BYTES)
                + collective_seconds(expert * grad_b, dp // e * c, local_exp, topology, factor, BUCKET_BYTES))

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
    elif method == "full":  # zero3 / hybrid: gather parameters for forward and backward, reduce-scatter grads
        per_micro = exposed(3.0 * collective(1.0), micro)
    else:  # zero3 LoRA/QLoRA (FSDP-QLoRA): the frozen base is gathered as stored for every pass over it
        base_bytes = (NF4_DQ_BYTES_PER_PARAM if method == "qlora" else (4.0 if prec == "fp32" else 2.0)) \
            * p_total / (t * p)
        passes = 3 if recompute == "full" else 2
        gather = passes * collective_seconds(base_bytes, dp * c, local_dp, topology, 1.0, BUCKET_BYTES)
        per_micro = exposed(gather + collective(1.0), micro)
    step = pipeline + m * per_micro + per_step
    seconds = flops / per_token / step_tokens * step if step_tokens else 0.0
    eff = m * compute / step if step > 0 else 1.0
    tps = tokens / seconds if seconds > 0 else float("inf")
    return SpeedResult(work_h=seconds / 3600.0, tokens_per_s=tps, scaling_efficiency=eff,
                       mfu=mfu * eff, flops=flops, precision=prec, tokens_per_s_per_gpu=tps / n)


def _context_ring_seconds(shape: ModelShape, topology: Topology, t: int, c: int, local_tokens: float,
                          recompute: str, flops_per_s: float) -> float:
    """Exposed seconds per layer and micro-batch of context parallelism's KV ring (Megatron's CP,
    ring attention): c-1 sends of the local K and V chunk (2 x kv_heads x head_dim 16-bit values per
    token, split over TP) in the forward, twice that in the backward (KV and its gradient), once more
    with full recompute, each overlapped with the attention over the chunk it brings; inside a node
    when the t*c GPUs fit in one, else over the NIC share."""
    chunk = local_tokens * 2 * shape.kv_heads * shape.head_dim * 2.0 / t
    inside = t * c <= topology.gpus_per_node
    bandwidth = (_intra_bus_gbs(topology) if inside else _inter_bus_gbs(topology)) * 1e9
    latency = ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6) if inside else \
        NETWORK_LATENCY_S.get(topology.inter_node, 50e-6)
    passes = 4 if recompute == "full" else 3
    attention = 12.0 * shape.hidden * local_tokens * local_tokens / t / flops_per_s \
        * (4 / 3 if recompute == "full" else 1)  # over one chunk, all passes (flops_per_token's 12*L*h*s)
    return passes * (c - 1) * (max(chunk / bandwidth - attention / passes, 0.0) + latency)


# ---------------------------------------------------------------------------
# Generation (inference)
# ---------------------------------------------------------------------------

def decode_tokens_per_s_bound(weight_bytes: float, kv_bytes: float, bandwidth_gbs: float) -> float:
    """Upper bound for one sequence: bandwidth / (weights + KV bytes read per token)."""
    return bandwidth_gbs * 1e9 / (weight_bytes + kv_bytes)


def generation_precision(gpu: GpuPerf, weight_precision: str, fallback_to_bf16: bool = True) -> str:
    """The precision generation computes in: fp8 weights on fp8 tensor cores where present, fp32 weights in
    fp32, the rest in bf16 (weight-only int4/int8, and fp8 without support, when `fallback_to_bf16`)."""
    want = "fp8" if weight_precision == "fp8" else ("fp32" if weight_precision == "fp32" else "bf16")
    prec = effective_precision(gpu, want, fallback_to_bf16)
    if prec is None:
        raise UnsupportedPrecision(f"{gpu.name} has no {want} support (set fallback_to_bf16)")
    return prec


def prefill_flops(shape: ModelShape, prompt_tokens: int) -> float:
    """FLOPs of one sequence's prefill: 2·P_active per prompt token and the attention's 2·L·s²·h."""
    return 2.0 * shape.active_params * prompt_tokens + 2.0 * shape.layers * prompt_tokens**2 * shape.hidden


def decode_flops(shape: ModelShape, context_tokens: float) -> float:
    """FLOPs of one sequence's decode step at a context length: 2·P_active and the attention's 4·L·h·ctx."""
    return 2.0 * shape.active_params + 4.0 * shape.layers * shape.hidden * context_tokens


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
    prec = generation_precision(gpu, weight_precision, fallback_to_bf16)
    peak = gpu.peak(prec)
    if prefill_mfu is None:
        prefill_mfu = default_mfu(gpu.generation, prec, hidden=shape.hidden, gpu_name=gpu.name)
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
        t_comm = 2 * shape.layers * (lat + vol / (_intra_bus_gbs(topology) * 1e9))
    step = max(t_mem, t_comp) + t_comm
    bound = "memory" if t_mem >= t_comp else "compute"
    if t_comm > max(t_mem, t_comp):
        bound = "communication"

    pre_flops = batch * prefill_flops(shape, prompt_tokens)
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
                       precision=prec, tokens_per_s_per_gpu=tps / topology.n_gpus, bound=bound,
                       decode_step_s=step, prefill_s=t_prefill,
                       time_per_output_token_s=((batch - 1) / batch * t_prefill + output_tokens * step)
                       / output_tokens)


def generation_floor_h(shape: ModelShape, *, gpu: GpuPerf, n_gpus: int, weight_precision: str = "bf16",
                       batch: int = 1, prompt_tokens: int = 512, output_tokens: int = 256, sequences: float = 1.0,
                       bw_efficiency: float = DECODE_BW_EFFICIENCY, fallback_to_bf16: bool = True) -> float:
    """A lower bound on generation_time's work_h on `n_gpus` GPUs at any tensor-parallel degree and any batch up
    to `batch`, for a fraction of its cost: each sequence's prefill at the compute rate, and each decode step
    at the compute rate or streaming its share of the weights, whichever is slower (no KV reads, no TP
    communication). A planner prices a shape's physics only when this does not already rule it out."""
    prec = generation_precision(gpu, weight_precision, fallback_to_bf16)
    rate = gpu.peak(prec) * default_mfu(gpu.generation, prec, hidden=shape.hidden, gpu_name=gpu.name)
    shared = min(1.0 / batch, shape.active_params / shape.params) if shape.params else 1.0 / batch  # weights/sequence
    bw = gpu.mem_bandwidth_gbs * 1e9 * bw_efficiency
    step = max(decode_flops(shape, prompt_tokens + output_tokens / 2.0) / rate,
               weight_bytes(shape, weight_precision) * shared / bw)
    return sequences * (prefill_flops(shape, prompt_tokens) / rate + output_tokens * step) / n_gpus / 3600.0


def kv_read_efficiency(context_tokens: float) -> float:
    """Share of the streaming rate that attention kernels reach on KV reads at a context length.

    Paged-attention decode reads each sequence's KV blocks with one query token, so long
    contexts run below the weight-streaming rate: KV_CONTEXT_HALF / (KV_CONTEXT_HALF + ctx)
    of it, on top of bw_efficiency.
    """
    return KV_CONTEXT_HALF_TOKENS / (KV_CONTEXT_HALF_TOKENS + context_tokens)


# ---------------------------------------------------------------------------
# Reference benchmarks
# ---------------------------------------------------------------------------

def reference_scaled_hours(gpu_hours: float, ref_gpu: GpuPerf, gpu: GpuPerf, n_gpus: int,
                           precision: str = "bf16", scaling_eff: float = 1.0,
                           fallback_to_bf16: bool = False) -> float:
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
        raise ValueError(f"n_gpus={n_gpus}, scaling_eff={scaling_eff}: must be positive")
    return gpu_hours * thr[0] / thr[1] / n_gpus / scaling_eff
