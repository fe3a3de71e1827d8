"""Training recipes: what a fine-tuning or training framework lets a job do on its GPUs.

Physics layer: plain frozen dataclasses.  The same model, method and GPUs need different memory
and run different layouts depending on the framework that runs them: bitsandbytes QLoRA under
Hugging Face PEFT has no tensor or pipeline parallelism, FSDP-QLoRA shards the quantised base
ZeRO-3 style, torchtune and Unsloth never hold the whole vocabulary's fp32 logits, Megatron-LM and
NeMo have every axis.  A workload names its recipe (`recipe:`), or leaves it to `auto`, which tries
the recipes in `AUTO` and keeps the fastest that fits on each hardware shape (on one shape, the
fastest is the cheapest).  Sources and assumptions per recipe: docs/recipes.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from planner.physics.memory_training import (
    CHUNKED_LOGIT_BYTES,
    CUT_LOGIT_BYTES,
    FUSED_LOGIT_BYTES,
    UNFUSED_LOGIT_BYTES,
)
from planner.schema.fields import MEGATRON_RECIPES, RECIPE_METHODS


@dataclass(frozen=True)
class Recipe:
    """What one framework allows and keeps.

    methods: the training methods it runs.  megatron_axes: tensor, pipeline, sequence and context
    parallelism exist (else data parallelism only, every GPU running whole layers).  shardings: the
    ZeRO stages it offers over the data-parallel GPUs (per method: bitsandbytes 4-bit weights shard only
    with FSDP-QLoRA-aware stacks).  logit_bytes: memory per logit at the loss.  activation_offload: with
    full recomputation the checkpointed layer inputs live in host memory (Unsloth's offloaded gradient
    checkpointing), so the GPU holds one layer's working set.  moe_overlap: MoE all-to-alls hidden behind
    the compute of other micro-batches (DualPipe, Megatron-core's 1F1B A2A overlap) rather than exposed.
    master_weights: mixed-precision full training with an fp32 master copy (False: pure bf16 training,
    optimizer states in bf16).  optimizer_in_backward: on one GPU, each parameter is stepped and its
    gradient freed in the backward pass.
    lora_dropout: LoRA adapters take a dropout of their inputs by default (PEFT-based recipes as their
    published configs run: QLoRA's qlora.py 0.05-0.1, fsdp_qlora 0.1, litgpt 0.05), so each keeps a copy.
    pipeline: 'none'; 'naive' (Accelerate's device_map: consecutive layers on consecutive GPUs of one node,
    one micro-batch passing through them in turn, so no GPU works while another does); '1f1b' (Megatron's
    pipeline schedules, interleaved or not).
    """

    name: str
    shardings: Mapping[str, tuple[str, ...]]
    logit_bytes: float
    activation_offload: bool = False
    moe_overlap: bool = False
    pipeline: str = "none"
    lora_dropout: bool = False
    master_weights: bool = True
    optimizer_in_backward: bool = False
    source: str = ""

    @property
    def methods(self) -> tuple[str, ...]:
        return RECIPE_METHODS[self.name]

    @property
    def megatron_axes(self) -> bool:
        return self.name in MEGATRON_RECIPES

    def zero_stages(self, method: str) -> tuple[str, ...]:
        return self.shardings.get(method, ())


_ALL_ZERO = ("none", "zero1", "zero2", "zero3")
_DDP = ("none",)


def _shardings(**by_method: tuple[str, ...]) -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType(by_method)


RECIPES: Mapping[str, Recipe] = MappingProxyType(
    {
        r.name: r
        for r in (
            Recipe(
                "hf",
                _shardings(full=_ALL_ZERO, lora=_ALL_ZERO, qlora=_DDP),
                UNFUSED_LOGIT_BYTES,
                pipeline="naive",
                lora_dropout=True,
                source="Transformers Trainer + PEFT + bitsandbytes (QLoRA paper's qlora.py): DDP, or FSDP/DeepSpeed "
                "through accelerate for 16-bit weights; 4-bit weights are replicated (DDP) or split over the "
                "GPUs of one node with device_map='auto'",
            ),
            Recipe(
                "axolotl",
                _shardings(full=_ALL_ZERO, lora=_ALL_ZERO, qlora=("none", "zero3")),
                UNFUSED_LOGIT_BYTES,
                pipeline="naive",
                lora_dropout=True,
                source="axolotl on Transformers: DeepSpeed ZeRO or FSDP, FSDP-QLoRA for 4-bit bases; HF loss",
            ),
            Recipe(
                "fsdp-qlora",
                _shardings(lora=("zero3",), qlora=("zero3",)),
                UNFUSED_LOGIT_BYTES,
                lora_dropout=True,
                source="Answer.AI fsdp_qlora train.py: FSDP FULL_SHARD of the NF4 base (bnb quant_storage), HF loss",
            ),
            Recipe(
                "torchtune",
                _shardings(
                    full=("none", "zero3"),
                    lora=("none", "zero3"),
                    qlora=("none", "zero3"),
                ),
                CHUNKED_LOGIT_BYTES,
                master_weights=False,
                optimizer_in_backward=True,
                source="torchtune single-device and FSDP2 distributed recipes; CEWithChunkedOutputLoss; lora_dropout "
                "0.0; dtype bf16 (no fp32 master copy); optimizer_in_bwd in its single-device full fine-tunes",
            ),
            Recipe(
                "unsloth",
                _shardings(full=_DDP, lora=_DDP, qlora=_DDP),
                CUT_LOGIT_BYTES,
                activation_offload=True,
                source="Unsloth: Cut Cross-Entropy, use_gradient_checkpointing='unsloth' offloads layer inputs to "
                "host memory, LoRA dropout 0; multi-GPU as DDP",
            ),
            Recipe(
                "deepspeed",
                _shardings(full=_ALL_ZERO, lora=_ALL_ZERO),
                UNFUSED_LOGIT_BYTES,
                lora_dropout=True,
                source="DeepSpeed ZeRO 0-3 with Transformers models (HF loss)",
            ),
            Recipe(
                "megatron",
                _shardings(
                    full=("none", "zero1", "zero2", "zero3"),
                    lora=("none", "zero1", "zero2", "zero3"),
                ),
                FUSED_LOGIT_BYTES,
                moe_overlap=True,
                pipeline="1f1b",
                source="Megatron-LM / Megatron-core: TP, SP, PP (interleaved), CP, EP, distributed optimizer; fused "
                "vocab-parallel cross-entropy; EP all-to-all overlapped with 1F1B",
            ),
            Recipe(
                "nemo",
                _shardings(
                    full=("none", "zero1", "zero2", "zero3"),
                    lora=("none", "zero1", "zero2", "zero3"),
                ),
                FUSED_LOGIT_BYTES,
                moe_overlap=True,
                pipeline="1f1b",
                source="NeMo 2.0 / Megatron-Bridge: Megatron-core's axes and loss, LoRA through its PEFT",
            ),
        )
    }
)

RECIPE_NAMES = tuple(RECIPES)

# What `recipe: auto` tries, by method: the recipes the others do not beat.  hf, axolotl and deepspeed
# need more memory at the loss than megatron with fewer axes (full, LoRA) or than torchtune (QLoRA, where
# FSDP sharding beats device_map stages run one at a time); nemo has megatron's axes and memory;
# fsdp-qlora is torchtune's FSDP2 QLoRA with the Hugging Face loss.  Pre-training runs on Megatron's axes.
AUTO: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "pretrain": ("megatron",),
        "full": ("megatron", "torchtune", "unsloth"),
        "lora": ("megatron", "torchtune", "unsloth"),
        "qlora": ("torchtune", "unsloth"),
    }
)


def recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(
            f"recipe={name!r}: expected one of {', '.join(RECIPE_NAMES)}"
        ) from None


def candidates(name: str, method: str, pretrain: bool = False) -> tuple[Recipe, ...]:
    """The recipes a job with `recipe: name` may run as: the named one, or auto's set for its method."""
    if name == "auto":
        return tuple(
            RECIPES[n]
            for n in AUTO["pretrain" if pretrain and method == "full" else method]
        )
    return (recipe(name),)
