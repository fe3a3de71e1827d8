"""Per-GPU memory estimates for training and inference (pure functions, GiB): the shared parts.

Physics layer: plain numbers and frozen dataclasses only, no pydantic, pandas,
solver or CLI imports.  The formulas are described in docs/physics.md; the published memory
figures each is held to are in docs/validation.md, with their sources.

Units: every ``MemoryBreakdown`` field is GiB (2**30 bytes) *per GPU*.  The
helpers whose names end in ``_bytes`` return bytes.  Parameter counts are plain
numbers of parameters (not billions).

This module holds what training and inference memory share: the model's shape, the breakdown
by part, the fit test and the memory a workload states itself.  Training memory is in
memory_training.py, inference memory (weights at serving precision, KV cache) in
memory_inference.py.

Public API
----------
ModelShape, MemoryBreakdown
stated_memory(...)                 -> MemoryBreakdown
fits(breakdown, vram_gib, headroom=0.10) -> bool
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

GIB = 2**30

# CUDA context + cuBLAS/NCCL workspaces + caching-allocator slack, per GPU process.
# The CUDA context alone is ~0.3-2 GiB per process
# (vram.asmirnov.xyz note); we take the middle of that range.  Fragmentation
# beyond this is covered by the ``fits`` headroom (default 10 %).
FRAMEWORK_OVERHEAD_GIB = 1.5

# Default headroom used by ``fits``: need * (1 + headroom) <= vram.  10 % mirrors
# vLLM's default gpu_memory_utilization = 0.9 (vLLM's engine arguments) and the EleutherAI
# "inference ~= 1.2 x weights" rule leaving ~10-20 % for the runtime.
DEFAULT_HEADROOM = 0.10


@dataclass(frozen=True)
class ModelShape:
    """Transformer shape (HF config.json names in brackets).

    params: total parameters (MoE: all experts; what must be resident).
    active_params: parameters used per token (= params for dense models).
    layers [num_hidden_layers], hidden [hidden_size], heads
    [num_attention_heads], kv_heads [num_key_value_heads], head_dim,
    ffn [intermediate_size], vocab [vocab_size].
    tied_embeddings: input embedding shared with the LM head (default False,
    as for Llama); only affects the embedding-parameter estimate.
    MoE: experts (routed experts per MoE layer), experts_per_token, expert_params
    (parameters inside routed experts, all layers); ffn is one expert's width.
    """

    params: int
    active_params: int
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool = False
    experts: int = 0
    experts_per_token: int = 0
    expert_params: int = 0

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def dense_params(self) -> int:
        """Parameters every GPU of a pipeline stage keeps whatever the expert parallelism."""
        return self.params - self.expert_params

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts: expert_params / (experts * 3*h*ffn), ffn being one expert's width."""
        if not self.moe:
            return 0
        return min(
            self.layers,
            max(
                1,
                round(self.expert_params / (self.experts * 3 * self.hidden * self.ffn)),
            ),
        )

    @property
    def mlp_width(self) -> float:
        """MLP width a token passes through (MoE: experts_per_token experts of width ffn)."""
        return self.ffn * (self.experts_per_token if self.moe else 1)

    @property
    def embedding_params(self) -> int:
        """Input embedding + LM head parameters (V*h, twice unless tied)."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def layer_params(self) -> float:
        """Parameters of one transformer block, (P - embeddings) / L."""
        return max(self.params - self.embedding_params, 0) / max(self.layers, 1)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory need in GiB, by part: weights (with a cached low-precision copy and ZeRO-3's
    gathered unit where they apply), gradients, optimizer state, activations (the busiest pipeline
    stage's), the KV cache of generation, and the framework's fixed overhead (CUDA context, allocator)."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    kv_cache: float = 0.0
    overhead: float = 0.0

    @property
    def total(self) -> float:
        return (
            self.weights
            + self.gradients
            + self.optimizer
            + self.activations
            + self.kv_cache
            + self.overhead
        )

    def as_dict(self) -> dict[str, float]:
        d = asdict(self)
        d["total"] = self.total
        return d


def check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(allowed)}")


# ---------------------------------------------------------------------------
# Workloads that state memory directly
# ---------------------------------------------------------------------------


def stated_memory(
    *,
    per_gpu_gib: float | None = None,
    model_states_gib: float | None = None,
    activations_gib: float | None = None,
    shardable: bool = True,
    sharding_gpus: int = 1,
    overhead_gib: float = 0.0,
) -> MemoryBreakdown:
    """Breakdown for a workload that states its memory instead of a model shape.

    Either ``per_gpu_gib`` (a fixed per-GPU total, reported under ``weights``
    because its split is unknown) or ``model_states_gib`` (whole-job weights +
    grads + optimizer, divided by ``sharding_gpus`` when ``shardable``) plus
    ``activations_gib`` (per GPU, never divided).  ``overhead_gib`` is added as is.
    """
    if per_gpu_gib is not None and (
        model_states_gib is not None or activations_gib is not None
    ):
        raise ValueError(
            "give per_gpu_gib or model_states_gib/activations_gib, not both"
        )
    if per_gpu_gib is not None:
        return MemoryBreakdown(weights=float(per_gpu_gib), overhead=overhead_gib)
    states = float(model_states_gib or 0.0)
    if shardable:
        states /= max(int(sharding_gpus), 1)
    return MemoryBreakdown(
        weights=states, activations=float(activations_gib or 0.0), overhead=overhead_gib
    )


def fits(
    breakdown: MemoryBreakdown, vram_gib: float, headroom: float = DEFAULT_HEADROOM
) -> bool:
    """True when breakdown.total * (1 + headroom) <= vram_gib (both GiB per GPU).

    The overhead part is already inside ``total``; headroom covers allocator
    fragmentation and estimate error (1e-9 GiB tolerance for float noise).
    """
    return breakdown.total * (1.0 + headroom) <= vram_gib + 1e-9
