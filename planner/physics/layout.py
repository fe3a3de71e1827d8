"""One way to lay a training job over GPUs (tensor, context, pipeline and data parallel sizes, the ZeRO stage,
recomputation, the micro-batch): the one object the step model (`speed.training_time`), the memory model
(`memory_training.training_memory`) and the layout search (`parallelism`) all take."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cached_property

ZERO_STAGES = ("none", "zero1", "zero2", "zero3")


@dataclass(frozen=True)
class Layout:
    """One way to lay a training job over GPUs: TP x CP x PP x DP GPUs."""

    tp: int = 1
    """tensor-parallel GPUs, inside one node"""
    pp: int = 1
    """pipeline stages"""
    dp: int = 1
    """data-parallel replicas"""
    ep: int = 1
    """MoE: GPUs the routed experts are spread over, among the replicas"""
    zero: str = "none"
    """ZeRO stage over the replicas: none, zero1, zero2, zero3"""
    recompute: str = "selective"
    """activation recomputation: selective or full"""
    micro_batch: int = 1
    """sequences per GPU per micro-step"""
    sequence_parallel: bool = False
    """divide the TP-replicated activations too (Megatron)"""
    virtual_stages: int = 1
    """interleaved pipeline chunks per GPU"""
    cp: int = 1
    """context parallelism: GPUs each sequence is split over"""
    recipe: str = ""
    """the framework that runs it (recipes.RECIPES); '' where the workload states its own memory"""

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @cached_property  # a search compares labels of the same layouts shape after shape
    def label(self) -> str:
        """`megatron TP8 CP16 PP16 DP8 zero1 SP full mb1`: the layout in one short, parseable string."""
        parts = (
            ([self.recipe] if self.recipe else [])
            + [f"TP{self.tp}"]
            + ([f"CP{self.cp}"] if self.cp > 1 else [])
            + [f"PP{self.pp}"]
            + ([f"VPP{self.virtual_stages}"] if self.virtual_stages > 1 else [])
            + [f"DP{self.dp}"]
        )
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        parts.append(self.zero)
        if self.sequence_parallel:
            parts.append("SP")
        parts += [self.recompute, f"mb{self.micro_batch}"]
        return " ".join(parts)

    def as_dict(self) -> dict:
        return {**asdict(self), "label": self.label}

    @classmethod
    def parse(cls, label: str) -> Layout:
        """The inverse of `label`."""
        from planner.physics.recipes import (
            RECIPES,  # recipes read the memory model, which reads layouts
        )

        num = {
            k: int(v) for k, v in re.findall(r"\b(TP|CP|PP|VPP|DP|EP|mb)(\d+)\b", label)
        }
        words = label.split()
        return cls(
            tp=num.get("TP", 1),
            pp=num.get("PP", 1),
            dp=num.get("DP", 1),
            ep=num.get("EP", 1),
            zero=next(w for w in words if w in ZERO_STAGES),
            recompute=words[-2],
            micro_batch=num.get("mb", 1),
            sequence_parallel="SP" in words,
            virtual_stages=num.get("VPP", 1),
            cp=num.get("CP", 1),
            recipe=words[0] if words[0] in RECIPES else "",
        )
