"""Per-GPU inference memory (pure functions, GiB): weights at serving precision, KV cache, the batch that fits.

Split from memory.py, which keeps the shape and breakdown both training and inference use: this
is the inference side, what a tensor-parallel replica holds and how many sequences its KV cache
takes.

Public API
----------
inference_memory(shape, ...)       -> MemoryBreakdown
kv_bytes_per_token(shape, kv_precision, tensor_parallel=1)
weight_bytes(shape, precision)
serving_need_gib(breakdown, headroom), kv_batch_that_fits(shape, vram_gib, ...)
"""

from __future__ import annotations

from functools import lru_cache
from math import ceil

from planner.physics.memory import (
    DEFAULT_HEADROOM,
    FRAMEWORK_OVERHEAD_GIB,
    GIB,
    MemoryBreakdown,
    ModelShape,
    check,
)

# Inference weight storage per parameter of quantised linear layers.
WEIGHT_BYTES_PER_PARAM = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
# int4 group-quantisation scales: ~0.25 bit/param at group 128 with fp16 scales.
INT4_SCALE_BYTES_PER_PARAM = 0.25 / 8
KV_BYTES_PER_ELEM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}

# Inference activation working set: tokens processed in one forward pass are
# capped by the scheduler's token budget (vLLM chunked prefill,
# max_num_batched_tokens ~ 8192); judgement, small next to weights + KV.
INFERENCE_MAX_BATCHED_TOKENS = 8192


# ---------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------


def kv_bytes_per_token(
    shape: ModelShape, kv_precision: str = "bf16", tensor_parallel: int = 1
) -> float:
    """KV-cache bytes per token on one GPU: 2 * L * ceil(kv_heads/t) * head_dim * bytes.

    GQA-aware; with t > kv_heads each GPU keeps one (replicated) KV head.
    Llama-2-70B bf16, t=1: 327,680 B (R12).
    """
    check("kv_precision", kv_precision, tuple(KV_BYTES_PER_ELEM))
    heads_per_gpu = max(ceil(shape.kv_heads / tensor_parallel), 1)
    return (
        2.0
        * shape.layers
        * heads_per_gpu
        * shape.head_dim
        * KV_BYTES_PER_ELEM[kv_precision]
    )


def weight_bytes(shape: ModelShape, precision: str = "bf16") -> float:
    """Bytes of all resident weights (MoE: total params) at ``precision``.

    16/32-bit: P * bytes.  fp8/int8/int4 quantise the linear layers only;
    embeddings and LM head stay bf16 (vLLM/AWQ/GPTQ practice); int4 adds
    ~0.25 bit/param of group scales.  Raw P*bytes is WEIGHT_BYTES_PER_PARAM.
    """
    check("weight_precision", precision, tuple(WEIGHT_BYTES_PER_PARAM))
    bpp = WEIGHT_BYTES_PER_PARAM[precision]
    if bpp >= 2.0:
        return shape.params * bpp
    if precision == "int4":
        bpp += INT4_SCALE_BYTES_PER_PARAM
    emb = min(shape.embedding_params, shape.params)
    return (shape.params - emb) * bpp + emb * 2.0


def inference_memory(
    shape: ModelShape,
    *,
    weight_precision: str = "bf16",
    kv_precision: str = "bf16",
    batch: int = 1,
    context_tokens: int = 4096,
    tensor_parallel: int = 1,
    prompt_tokens: int | None = None,
    overhead_gib: float = FRAMEWORK_OVERHEAD_GIB,
) -> MemoryBreakdown:
    """Per-GPU serving memory (GiB) of one tensor-parallel replica.

    weights = weight_bytes / t; kv_cache = kv_bytes_per_token(t) * batch *
    context_tokens (context_tokens = prompt + generated tokens per sequence,
    batch = concurrent sequences); activations = working set of one forward
    pass: prefill runs the prompts (``prompt_tokens`` each, default the whole
    context) and decode one token per sequence, so min(batch*prompt, 8192) tokens
    at 2 B * (4h + 3*ffn/t) each, plus fp32 logits 4*V/t per sequence.
    """
    t = int(tensor_parallel)
    if t < 1:
        raise ValueError(f"tensor_parallel={t} must be >= 1")
    w = weight_bytes(shape, weight_precision) / t
    kv = kv_bytes_per_token(shape, kv_precision, t) * batch * context_tokens
    tokens = min(
        batch * (prompt_tokens or context_tokens), INFERENCE_MAX_BATCHED_TOKENS
    )
    act = (
        tokens * 2.0 * (4 * shape.hidden + 3 * shape.ffn / t)
        + batch * 4.0 * shape.vocab / t
    )
    return MemoryBreakdown(
        weights=w / GIB, activations=act / GIB, kv_cache=kv / GIB, overhead=overhead_gib
    )


def serving_need_gib(
    breakdown: MemoryBreakdown, headroom: float = DEFAULT_HEADROOM
) -> float:
    """GiB per GPU an inference engine needs: headroom on everything but the KV cache it sizes itself
    (vLLM's gpu_memory_utilization and TensorRT-LLM's free_gpu_memory_fraction leave the margin outside the pool)."""
    return (breakdown.total - breakdown.kv_cache) * (
        1.0 + headroom
    ) + breakdown.kv_cache


# the same model on every shape of one VRAM size: a few dozen distinct per scenario
@lru_cache(maxsize=1 << 14)
def kv_batch_that_fits(
    shape: ModelShape,
    vram_gib: float,
    headroom: float = DEFAULT_HEADROOM,
    *,
    weight_precision: str = "bf16",
    kv_precision: str = "bf16",
    context_tokens: int = 4096,
    tensor_parallel: int = 1,
    prompt_tokens: int | None = None,
    most: int = 1 << 16,
) -> int:
    """The most concurrent sequences of ``context_tokens`` (at most ``most``) that fit; 0: not even one.

    Fits means serving_need_gib <= vram: the KV cache whole, headroom on the rest.  The need
    grows with the batch, so a bisection finds the largest.
    """

    def fits_with(batch: int) -> bool:
        need = inference_memory(
            shape,
            weight_precision=weight_precision,
            kv_precision=kv_precision,
            batch=batch,
            context_tokens=context_tokens,
            tensor_parallel=tensor_parallel,
            prompt_tokens=prompt_tokens,
        )
        return serving_need_gib(need, headroom) <= vram_gib + 1e-9

    if not fits_with(1):
        return 0
    low, high = 1, most
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits_with(mid) else (low, mid - 1)
    return low
