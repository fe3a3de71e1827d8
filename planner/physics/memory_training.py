"""Per-GPU training memory (pure functions, GiB): model states, activations, the busiest GPU's total.

Split from memory.py, which keeps the shape and breakdown both training and inference use: this
is the training side, the ZeRO sharding of weights, gradients and optimizer state and the
activations a layout keeps.

Public API
----------
training_memory(shape, ...)        -> MemoryBreakdown
model_state_bytes(params, ...)     -> (weights, gradients, optimizer) bytes
checkpoint_state_bytes(params, ...) -> bytes a checkpoint saves (weights and optimizer)
activation_bytes_per_layer(...), activation_bytes(...)
lora_params(shape, rank, targets_fraction)
"""

from __future__ import annotations

from math import ceil

from planner.physics.layout import Layout
from planner.physics.memory import (
    FRAMEWORK_OVERHEAD_GIB,
    GIB,
    MemoryBreakdown,
    ModelShape,
    check,
)

# Bytes per parameter of the *model weights* seen by the training recipe.
_TRAIN_WEIGHT_BYTES = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp32": 4.0,
    # fp8 (Transformer Engine): parameters stay bf16 and an
    # fp8 cast of every weight is cached between micro-batches
    # (+1 B/param); grads and optimizer as in bf16 training.
    "fp8": 3.0,
}
_TRAIN_GRAD_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 2.0}

# Optimizer-state bytes per trainable parameter (the ZeRO paper's K, EleutherAI's transformer-math).
# Mixed precision keeps a 4-byte fp32 master copy; pure fp32 does not.
_OPT_BYTES_MIXED = {
    "adamw": 12.0,  # 4 master + 4 m + 4 v (ZeRO K = 12)
    "adamw_8bit": 6.0,  # 4 master + 1 + 1 (bitsandbytes)
    "sgd": 8.0,
}  # 4 master + 4 momentum
_OPT_BYTES_FP32 = {"adamw": 8.0, "adamw_8bit": 2.0, "sgd": 4.0}
# Pure 16-bit training (torchtune's dtype: bf16): no master copy, and the optimizer's states take the
# parameters' dtype (PyTorch's AdamW: m and v in bf16; bitsandbytes' 8-bit states stay 1 byte each).
_OPT_BYTES_PURE16 = {"adamw": 4.0, "adamw_8bit": 2.0, "sgd": 2.0}

# LoRA adapters are kept in fp32 (PEFT's autocast_adapter_dtype=True default),
# so each adapter parameter costs 4 (weight) + 4 (grad) + optimizer state with
# no separate master copy: 16 B/param with AdamW (about 16 B per adapter parameter).
_ADAPTER_WEIGHT_BYTES = 4.0
_ADAPTER_GRAD_BYTES = 4.0
# QLoRA's recipe (qlora.py with --bf16) keeps adapters and their gradients in bf16 and
# steps them with a paged 32-bit AdamW (m and v in fp32, no master copy): 2 + 2 + 8 B.
QLORA_ADAPTER_BYTES = 2.0

# QLoRA base storage: NF4 (4 bit) + double-quantised absmax constants
# (8/64 + 32/(64*256) bit) = 4.127 bit ~= 0.516 B/param (QLoRA paper §3).
NF4_DQ_BYTES_PER_PARAM = (4 + 8 / 64 + 32 / (64 * 256)) / 8

# Bytes per logit (one token, one vocabulary entry) at the loss, by how the recipe computes it
# (physics/recipes.py says which recipe does which).  Megatron's fused, vocab-parallel cross-entropy keeps
# the fp32 logits (4, Korthikanti §4.3).  Hugging Face Transformers (PEFT, TRL, axolotl's default) keeps
# the 16-bit LM-head output (2), its fp32 upcast held by the model output (4), the log-softmax saved for
# backward (4) and the loss gradient (4): 14; this is what makes long-context fine-tunes run out of memory,
# and with it Unsloth's published Hugging Face maximum contexts are reproduced.  torchtune's
# CEWithChunkedOutputLoss keeps the bf16 LM-head output in 8 chunks (2) and upcasts one chunk at a time
# for the loss, its log-softmax and gradient (3 x 4 / 8): 3.5.  A fused cross-entropy kernel (Liger)
# writes the gradient in place into the bf16 logits, never holding an fp32 copy: 2.  Cut Cross-Entropy
# (Wijmans et al. 2024, which Unsloth runs) computes the loss block by block from the hidden states and
# never holds the logits at all: 0.
FUSED_LOGIT_BYTES = 4.0
UNFUSED_LOGIT_BYTES = 14.0
CHUNKED_LOGIT_BYTES = 2.0 + 3 * 4.0 / 8
CUT_LOGIT_BYTES = 0.0

_METHODS = ("full", "lora", "qlora")
_PRECISIONS = ("bf16", "fp16", "fp32", "fp8")
_OPTIMIZERS = ("adamw", "adamw_8bit", "sgd")
_SHARDINGS = ("none", "zero1", "zero2", "zero3", "hybrid")
_RECOMPUTE = ("none", "selective", "full")


# ---------------------------------------------------------------------------
# Model states
# ---------------------------------------------------------------------------


def model_state_bytes(
    params: float,
    *,
    precision: str = "bf16",
    optimizer: str = "adamw",
    sharding: str = "none",
    dp_degree: int = 1,
    tensor_parallel: int = 1,
) -> tuple[float, float, float]:
    """Per-GPU (weights, gradients, optimizer) bytes of full training, without ZeRO-3 live params.

    ZeRO paper Fig. 1 / EleutherAI: zero1 divides optimizer by N, zero2 also
    gradients, zero3 (and 'hybrid') also weights; tensor parallelism t divides
    all three first.  N = ``dp_degree``.  7.5B, N=64: 120 / 31.4 / 16.6 / 1.9 GB.
    """
    check("precision", precision, _PRECISIONS)
    check("optimizer", optimizer, _OPTIMIZERS)
    check("sharding", sharding, _SHARDINGS)
    per_gpu = params / tensor_parallel
    w = per_gpu * _TRAIN_WEIGHT_BYTES[precision]
    g = per_gpu * _TRAIN_GRAD_BYTES[precision]
    o = (
        per_gpu
        * (_OPT_BYTES_FP32 if precision == "fp32" else _OPT_BYTES_MIXED)[optimizer]
    )
    n = max(int(dp_degree), 1)
    if sharding in ("zero1", "zero2", "zero3", "hybrid"):
        o /= n
    if sharding in ("zero2", "zero3", "hybrid"):
        g /= n
    if sharding in ("zero3", "hybrid"):
        w /= n
    return w, g, o


def checkpoint_state_bytes(
    params: float, *, precision: str = "bf16", optimizer: str = "adamw"
) -> float:
    """Bytes one full-training checkpoint saves: the weights and the optimizer states (with the fp32 master copy),
    not the gradients, which the next step rebuilds. MLPerf Storage's Llama 3 70B checkpoint is 912 GiB, 13.9
    bytes per parameter; bf16 AdamW here is 14."""
    weights, _, optimizer_bytes = model_state_bytes(
        params, precision=precision, optimizer=optimizer
    )
    return weights + optimizer_bytes


def lora_params(
    shape: ModelShape, rank: int = 16, targets_fraction: float = 1.0
) -> float:
    """Trainable LoRA parameters: r*(d_in + d_out) summed over adapted linears.

    Counts all seven linears of a Llama-style block (q, k, v, o, gate, up,
    down) with GQA-aware k/v widths; ``targets_fraction`` scales that count
    (1.0 = all linear layers, as QLoRA recommends; q,v only on Llama-2-7B is
    ~0.21).  MoE experts are not multiplied (dense approximation).
    """
    h, q_out, kv_out, f = (
        shape.hidden,
        shape.heads * shape.head_dim,
        shape.kv_heads * shape.head_dim,
        shape.ffn,
    )
    per_layer = (h + q_out) + 2 * (h + kv_out) + (q_out + h) + 2 * (h + f) + (f + h)
    return rank * per_layer * shape.layers * targets_fraction


# ---------------------------------------------------------------------------
# Activations (Korthikanti et al. 2022; EleutherAI Transformer Math 101)
# ---------------------------------------------------------------------------


def activation_bytes_per_layer(
    *,
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    ffn: float | None = None,
    tensor_parallel: int = 1,
    recompute: str = "selective",
    flash_attention: bool = True,
    sequence_parallel: bool = False,
) -> float:
    """Activation bytes stored by one transformer layer on one GPU (16-bit activations).

    Korthikanti (TP without sequence parallelism):
      none:      s*b*h*(10 + 24/t + 5*a*s/(h*t))
      selective: s*b*h*(10 + 24/t)      (also 'none' with FlashAttention: no s^2 term)
      full:      2*s*b*h                (layer input only)
    Sequence parallelism splits the 10 (norms, dropout, residual) over t as well:
    s*b*h*34/t, and 2*s*b*h/t with full recompute.  ``ffn`` is the MLP width a token
    passes through; for ffn != 4h the 24 becomes 8 + 4*ffn/h (Megatron's 18 + 4*ffn/h).
    """
    check("recompute", recompute, _RECOMPUTE)
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tensor_parallel
    sp = t if sequence_parallel and t > 1 else 1
    if recompute == "full":
        return 2.0 * s * b * h / sp
    split = 24.0 if ffn is None else 8.0 + 4.0 * ffn / h
    coeff = 10.0 / sp + split / t
    if recompute == "none" and not flash_attention:
        coeff += 5.0 * a * s / (h * t)
    return s * b * h * coeff


def activation_bytes(
    shape: ModelShape,
    *,
    seq_len: int,
    micro_batch: int,
    recompute: str = "selective",
    tensor_parallel: int = 1,
    flash_attention: bool = True,
    pipeline_parallel: int = 1,
    in_flight: int = 1,
    sequence_parallel: bool = False,
    logit_bytes: float = FUSED_LOGIT_BYTES,
) -> float:
    """Activation bytes on the busiest GPU: the first pipeline stage.

    ceil(L/p) layers per stage times the micro-batches in flight there (1F1B keeps
    min(p, m) of them; Korthikanti §4.3: about L layers' worth at p = m), plus with
    full recompute one layer's working set (recomputed during its backward), plus the
    output-layer term 4*s*b*h + logit_bytes*s*b*V/t (vocab-parallel logits and their
    gradient) and embedding input 8*s*b.  MoE layers store the activations of the
    experts_per_token experts.
    """
    s, b, t = seq_len, micro_batch, tensor_parallel
    kw = dict(
        seq_len=s,
        micro_batch=b,
        hidden=shape.hidden,
        heads=shape.heads,
        ffn=shape.mlp_width,
        tensor_parallel=t,
        flash_attention=flash_attention,
        sequence_parallel=sequence_parallel,
    )
    stage_layers = ceil(shape.layers / max(pipeline_parallel, 1))
    total = (
        stage_layers
        * max(in_flight, 1)
        * activation_bytes_per_layer(recompute=recompute, **kw)
    )
    if recompute == "full":
        total += activation_bytes_per_layer(recompute="none", **kw)
    total += (
        4.0 * s * b * shape.hidden + logit_bytes * s * b * shape.vocab / t + 8.0 * s * b
    )
    return total


def lora_dropout_bytes(
    shape: ModelShape,
    *,
    seq_len: int,
    micro_batch: int,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    in_flight: int = 1,
) -> float:
    """Activations LoRA adds: PEFT applies dropout to the input of every adapted linear before its
    A matrix, so each keeps its own 16-bit copy of that input: 2 * (3h + q_out + 2h + ffn) bytes per
    token per layer for q, k, v, o, gate, up and down (litgpt's Llama 2 7B LoRA at 1,304 tokens:
    7.8 GB per sequence measured, 7.9 GB with this term on top of activation_bytes)."""
    q_out = shape.heads * shape.head_dim
    widths = 3 * shape.hidden + q_out + 2 * shape.hidden + shape.mlp_width
    layers = ceil(shape.layers / max(pipeline_parallel, 1)) * max(in_flight, 1)
    return 2.0 * seq_len * micro_batch * widths / tensor_parallel * layers


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


def params_per_gpu(
    shape: ModelShape,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    expert_parallel: int = 1,
) -> tuple[float, float]:
    """(dense, expert) parameters one GPU holds before ZeRO sharding.

    Transformer blocks split over t*p (the busiest stage also holds one embedding
    matrix, or both when p = 1); routed experts over p*e*t (expert parallelism
    places whole experts, tensor parallelism splits each).
    """
    t, p, e = tensor_parallel, pipeline_parallel, expert_parallel
    emb_all = min(shape.embedding_params, shape.dense_params)
    emb = emb_all if p == 1 else min(shape.vocab * shape.hidden, emb_all)
    dense = (shape.dense_params - emb_all) / (t * p) + emb / t
    return dense, shape.expert_params / (p * e * t)


def check_expert_parallel(ep: int, dp: int, moe: bool) -> None:
    """Experts are split over the data-parallel replicas, so EP must divide DP, and only an MoE has experts."""
    if ep > 1 and not moe:
        raise ValueError(
            f"expert_parallel={ep} needs a mixture-of-experts model; this one is dense"
        )
    if ep < 1 or dp % ep:
        raise ValueError(
            f"expert_parallel={ep} must divide the data-parallel degree {dp}"
        )


def training_memory(
    shape: ModelShape,
    *,
    layout: Layout = Layout(),
    method: str = "full",
    precision: str = "bf16",
    optimizer: str = "adamw",
    gpus: int = 1,
    gpus_per_node: int = 1,
    seq_len: int = 2048,
    in_flight: int | None = None,
    paged_optimizer: bool | None = None,
    logit_bytes: float = FUSED_LOGIT_BYTES,
    activation_offload: bool = False,
    lora_dropout: bool = True,
    master_weights: bool = True,
    optimizer_in_backward: bool = False,
    lora_rank: int = 16,
    lora_targets_fraction: float = 1.0,
    flash_attention: bool = True,
    overhead_gib: float = FRAMEWORK_OVERHEAD_GIB,
) -> MemoryBreakdown:
    """Per-GPU training memory (GiB) of the busiest GPU of one candidate.

    method: 'full' | 'lora' (frozen 16-bit base, fp32 adapters: PEFT's default) |
      'qlora' (frozen NF4+DQ base with bf16 embeddings/LM head, bf16 adapters and
      grads, 32-bit AdamW moments or 8-bit with adamw_8bit: the QLoRA recipe).
    precision: 'bf16'|'fp16'|'fp32'|'fp8'.  fp8 keeps bf16 parameters, grads and
      fp32 optimizer states as Transformer Engine does, plus a cached fp8 copy of
      the weights (+1 B/param).
    optimizer: 'adamw' (16 B/param mixed) | 'adamw_8bit' (10) | 'sgd' (12).
    layout (`physics/layout.py`; its dp is gpus / (t*c*p) here):
      zero: 'none' | 'zero1' | 'zero2' | 'zero3' over the data-parallel degree
      N = gpus / (t*p) (experts over N / e); 'hybrid' (FSDP HYBRID_SHARD) = zero3
      inside a node.  ZeRO-3/hybrid also hold the gathered params + grads of the
      largest unit (4 B * max(block, V*h) params, DeepSpeed's 4*largest_layer_params).
      tp t (inside a node), pp p, ep e: see params_per_gpu; sequence_parallel divides
      the TP-replicated activations; cp c splits every sequence over c GPUs (Megatron's
      CP: each holds the activations of s/c tokens and the same parameters, so ZeRO
      shards over DP x c); recompute and micro_batch as their names say.
    in_flight: micro-batches whose activations the first stage holds (default p).
    logit_bytes: bytes per logit at the loss (the *_LOGIT_BYTES above, by recipe).
    paged_optimizer: optimizer state in paged (unified) memory, which the driver keeps in host memory
      when the GPU is full and pages in for the step (bitsandbytes' paged optimizers, the QLoRA recipe):
      off the GPU for the fit, so 0 here.  Default: True for qlora (paged AdamW), else False.
    activation_offload: with full recomputation, the checkpointed layer inputs go to host memory
      (Unsloth's offloaded gradient checkpointing): the GPU holds two layers' inputs (one in flight to
      or from the host) and one layer's working set, not every layer's input.
    lora_dropout: the recipe applies dropout to the adapters' inputs (lora_dropout_bytes); recipes whose
      default dropout is 0 keep no copy.
    master_weights: full training in mixed precision keeps an fp32 master copy (False: pure 16-bit
      training, optimizer states in the parameters' dtype: _OPT_BYTES_PURE16).
    optimizer_in_backward: each parameter is stepped in its backward hook and its gradient freed, so
      only the largest unit's gradients are held at once (torchtune's optimizer_in_bwd).
    """
    sharding, micro_batch, activation_checkpointing = (
        layout.zero,
        layout.micro_batch,
        layout.recompute,
    )
    tensor_parallel, pipeline_parallel, expert_parallel = (
        layout.tp,
        layout.pp,
        layout.ep,
    )
    sequence_parallel, context_parallel = layout.sequence_parallel, layout.cp
    check("method", method, _METHODS)
    check("precision", precision, _PRECISIONS)
    check("optimizer", optimizer, _OPTIMIZERS)
    check("sharding", sharding, _SHARDINGS)
    check("activation_checkpointing", activation_checkpointing, _RECOMPUTE)
    t, p, e, c = (
        int(tensor_parallel),
        int(pipeline_parallel),
        int(expert_parallel),
        int(context_parallel),
    )
    if gpus < 1 or t < 1 or p < 1 or c < 1 or gpus % (t * p * c):
        raise ValueError(
            f"gpus={gpus} must be a positive multiple of tensor_parallel={t} x pipeline_parallel={p}"
            + (f" x context_parallel={c}" if c != 1 else "")
        )
    if t > max(gpus_per_node, 1):
        raise ValueError(f"tensor_parallel={t} exceeds gpus_per_node={gpus_per_node}")
    dp = gpus // (t * p * c)
    check_expert_parallel(e, dp, shape.moe)
    replicas = dp * c  # GPUs holding the same parameters: ZeRO's sharding group
    n = min(replicas, max(gpus_per_node // t, 1)) if sharding == "hybrid" else replicas
    n_exp = max(n // e, 1)
    zero3 = sharding in ("zero3", "hybrid")
    dense, expert = params_per_gpu(shape, t, p, e)
    emb_all = min(shape.embedding_params, shape.dense_params)
    block = (shape.dense_params - emb_all) / shape.layers + shape.expert_params / max(
        shape.moe_layers, 1
    ) / e
    unit = max(block, shape.vocab * shape.hidden) / t  # largest gathered unit

    def sharded(dense_bytes: float, expert_bytes: float, shard: bool) -> float:
        return (
            dense_bytes / n + expert_bytes / n_exp
            if shard
            else dense_bytes + expert_bytes
        )

    if method == "full":
        wb, gb = _TRAIN_WEIGHT_BYTES[precision], _TRAIN_GRAD_BYTES[precision]
        ob = (
            _OPT_BYTES_FP32
            if precision == "fp32"
            else _OPT_BYTES_MIXED
            if master_weights
            else _OPT_BYTES_PURE16
        )[optimizer]
        w = sharded(dense * wb, expert * wb, zero3)
        g = (
            unit * gb
            if optimizer_in_backward
            else sharded(
                dense * gb, expert * gb, sharding in ("zero2", "zero3", "hybrid")
            )
        )
        o = sharded(dense * ob, expert * ob, sharding != "none")
        if zero3 and n > 1:
            w += 2.0 * unit
            g += 2.0 * unit
    else:
        if method == "lora":
            base = (dense + expert) * (4.0 if precision == "fp32" else 2.0)
            aw, ag, ob = (
                _ADAPTER_WEIGHT_BYTES,
                _ADAPTER_GRAD_BYTES,
                _OPT_BYTES_FP32[optimizer],
            )
        else:
            emb = (
                min(
                    shape.vocab
                    * shape.hidden
                    * (1 if p > 1 else (1 if shape.tied_embeddings else 2)),
                    dense * t,
                )
                / t
            )
            base = (dense - emb + expert) * NF4_DQ_BYTES_PER_PARAM + emb * 2.0
            aw, ag, ob = (
                QLORA_ADAPTER_BYTES,
                QLORA_ADAPTER_BYTES,
                _OPT_BYTES_FP32[optimizer],
            )
        p_lora = lora_params(shape, lora_rank, lora_targets_fraction) / (t * p)
        adapters = p_lora * aw
        g = p_lora * ag
        o = p_lora * ob
        if sharding != "none":
            o /= n
        if sharding in ("zero2", "zero3", "hybrid"):
            g /= n
        if zero3:
            base_bpp = base / max(dense + expert, 1)
            base = base / n + (base_bpp * unit if n > 1 else 0.0)
            adapters /= n
        w = base + adapters

    in_flight = p if in_flight is None else in_flight
    seq_len = seq_len / c  # tokens of each sequence on this GPU
    act = activation_bytes(
        shape,
        seq_len=seq_len,
        micro_batch=micro_batch,
        recompute=activation_checkpointing,
        tensor_parallel=t,
        flash_attention=flash_attention,
        pipeline_parallel=p,
        in_flight=in_flight,
        sequence_parallel=sequence_parallel,
        logit_bytes=logit_bytes,
    )
    if activation_offload and activation_checkpointing == "full":
        # layer inputs activation_bytes counted on the GPU
        kept = ceil(shape.layers / p) * max(in_flight, 1)
        act -= (
            (kept - 2)
            * activation_bytes_per_layer(
                seq_len=seq_len,
                micro_batch=micro_batch,
                hidden=shape.hidden,
                heads=shape.heads,
                ffn=shape.mlp_width,
                tensor_parallel=t,
                recompute="full",
                sequence_parallel=sequence_parallel,
            )
            if kept > 2
            else 0.0
        )
    if method != "full" and activation_checkpointing != "full" and lora_dropout:
        act += lora_dropout_bytes(
            shape,
            seq_len=seq_len,
            micro_batch=micro_batch,
            tensor_parallel=t,
            pipeline_parallel=p,
            in_flight=in_flight,
        )
    if paged_optimizer if paged_optimizer is not None else method == "qlora":
        o = 0.0
    return MemoryBreakdown(
        weights=w / GIB,
        gradients=g / GIB,
        optimizer=o / GIB,
        activations=act / GIB,
        kv_cache=0.0,
        overhead=overhead_gib,
    )
