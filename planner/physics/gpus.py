"""A GPU and a candidate's links in the physics' terms: what a GPU model can do (`GpuPerf`), how a
candidate's GPUs are joined (`Topology`), the precision it computes in, and the kernel efficiency (MFU) its
generation reaches. The constants' sources are in their comments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

GENERATIONS = (
    "volta",
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
    "cdna2",
    "cdna3",
    "pascal",
    "maxwell",
    "other",
)
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8")

# ---------------------------------------------------------------------------
# Constants (sources in comments)
# ---------------------------------------------------------------------------

# Kernel efficiency of wide models by GPU generation: the share of the dense bf16 peak the model FLOPs
# reach with large micro-batches, before the pipeline bubble and exposed communication that
# training_time adds, and before default_mfu's width and micro-batch factors.  Each is the figure that
# fits its generation's throughput runs in benchmarks/published_cases.yaml best (docs/recipes.md has
# the table with every source and ratio), not any one run.
MFU_TABLE: Mapping[str, float] = MappingProxyType(
    {
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
        "turing": 0.31,  # T4: 70 W part, throttles under sustained tensor load; judgement
        "cdna3": 0.37,  # MI300X: stas00 MAMF 668/1300 = 51 % matmul ceiling; judgement
        "cdna2": 0.35,  # MI250X; judgement
        "pascal": 0.31,  # no tensor cores; judgement
        "maxwell": 0.25,
        "other": 0.31,
    }
)

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


# MFU against the *fp8* (or int8) peak is lower than bf16 MFU against the bf16
# peak: end-to-end fp8 training speedups over bf16 are ~1.3-1.5x, not 2x
# (Transformer Engine / NeMo reports; judgement).  0.7 * 2 = 1.4x.
PRECISION_FACTOR: Mapping[str, float] = MappingProxyType(
    {"bf16": 1.0, "fp16": 1.0, "fp32": 1.0, "fp8": 0.70, "int8": 0.70}
)


_INTRA = ("nvlink", "pcie", "infinity_fabric", "none")
_INTER = ("infiniband", "efa", "roce", "ethernet", "none")


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
            raise ValueError(
                f"generation={self.generation!r}: expected one of {', '.join(GENERATIONS)}"
            )
        if self.memory_type not in ("hbm", "gddr"):
            raise ValueError(f"memory_type={self.memory_type!r}: expected hbm or gddr")
        bad = set(self.tflops) - set(PRECISIONS)
        if bad:
            raise ValueError(
                f"tflops keys {sorted(bad)}: expected {', '.join(PRECISIONS)}"
            )
        object.__setattr__(
            self,
            "tflops",
            MappingProxyType({k: float(v) for k, v in self.tflops.items() if v}),
        )

    def __hash__(self) -> int:
        return hash(
            (
                self.name,
                self.generation,
                self.mem_bandwidth_gbs,
                self.memory_type,
                tuple(sorted(self.tflops.items())),
            )
        )

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
            raise ValueError(
                f"gpus_per_node={self.gpus_per_node}, nodes={self.nodes}: must be >= 1"
            )
        if self.intra_node not in _INTRA:
            raise ValueError(
                f"intra_node={self.intra_node!r}: expected one of {', '.join(_INTRA)}"
            )
        if self.inter_node not in _INTER:
            raise ValueError(
                f"inter_node={self.inter_node!r}: expected one of {', '.join(_INTER)}"
            )

    @property
    def n_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


# ---------------------------------------------------------------------------
# Precision and MFU
# ---------------------------------------------------------------------------


def default_mfu(
    generation: str,
    precision: str = "bf16",
    micro_batch_tokens: float | None = None,
    hidden: int | None = None,
    gpu_name: str = "",
) -> float:
    """Default kernel MFU = MFU_TABLE[generation] (MFU_BY_GPU[gpu_name] where a GPU has its own) * PRECISION_FACTOR[precision] * x / (x + MICRO_BATCH_HALF_TOKENS)
    for x = tokens per micro-batch (GEMMs with few rows run below the large-GEMM rate) * h / (h + WIDTH_HALF)
    for a model of width h (narrow GEMMs likewise).

    This is the efficiency of the compute alone: the pipeline bubble and exposed communication of
    training_time come on top, so a large run's end-to-end MFU is lower.  It is the same for pre-training,
    full fine-tuning, LoRA and QLoRA (their FLOPs differ: flops_per_token) and on GDDR cards: the published
    fine-tuning runs of docs/recipes.md show no lower efficiency for any of them.
    """
    if generation not in MFU_TABLE:
        raise ValueError(
            f"generation={generation!r}: expected one of {', '.join(MFU_TABLE)}"
        )
    if precision not in PRECISION_FACTOR:
        raise ValueError(
            f"precision={precision!r}: expected one of {', '.join(PRECISION_FACTOR)}"
        )
    rows = (
        1.0
        if micro_batch_tokens is None
        else micro_batch_tokens / (micro_batch_tokens + MICRO_BATCH_HALF_TOKENS)
    )
    width = 1.0 if hidden is None else hidden / (hidden + WIDTH_HALF)
    return (
        MFU_BY_GPU.get(gpu_name, MFU_TABLE[generation])
        * PRECISION_FACTOR[precision]
        * rows
        * width
    )


def effective_precision(
    gpu: GpuPerf, precision: str, fallback_to_bf16: bool = False
) -> str | None:
    """Compute precision actually used on ``gpu``, or None when infeasible.

    Supported -> unchanged.  fp8/int8 unsupported -> None, or the bf16 path
    when ``fallback_to_bf16``.  bf16 unsupported (V100, T4) -> fp16 (same
    memory; needs loss scaling).  fp16 unsupported -> fp32.  fp32 missing -> None.
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision={precision!r}: expected one of {', '.join(PRECISIONS)}"
        )
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
