"""Catalogs' rows as the schema reads them: GPUs, providers, offers and model architectures (inline, by name or
from a Hugging Face config), with the physical bounds an offer must stay within.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag, model_validator

from planner.schema.fields import (
    MAX_COUNT,
    MAX_HOURS,
    MAX_LAYERS,
    BillingStep,
    Count,
    HoursOrZero,
    InterNode,
    IntraNode,
    Name,
    PricePerHour,
    Rate,
    Strict,
    Width,
    billing_step,
)


class Gpu(Strict):
    name: str
    family: str
    vendor: str = "NVIDIA"
    vram_gib: float = Field(gt=0)
    memory_type: str = ""
    mem_bandwidth_gbs: float = Field(gt=0, description="GB/s")
    fp32_tflops: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = Field(None, description="absent when unsupported")
    int8_tops: float | None = Field(None, description="absent when unsupported")
    nvlink_gbs: float | None = Field(None, description="bidirectional GB/s per GPU")
    generation: str = "other"
    source: str = ""

    def tflops(self, precision: str) -> float | None:
        """Dense peak at a precision; None where the GPU has no such tensor math."""
        return {
            "fp32": self.fp32_tflops,
            "fp16": self.fp16_tflops,
            "bf16": self.bf16_tflops,
            "fp8": self.fp8_tflops,
            "int8": self.int8_tops,
        }.get(precision)


StorageClass = Literal["local", "block", "shared_fs", "object", "network_volume"]
"""Where a job's data and checkpoints can live: instance-attached NVMe (lost with the node), a network block
volume per node, a shared file system (Lustre/Filestore class), an object store (S3 class), a GPU cloud's
persistent network volume."""


class StorageOffer(Strict):
    """One storage option of a provider (catalogs/storage.csv): its bandwidth, persistence and price."""

    provider: str
    name: Name
    storage_class: StorageClass
    scope: Literal["node", "tib"] = Field(
        description="node: read_mbs/write_mbs per node (its own disk, volume or client); tib: per "
        "provisioned TiB of a shared file system"
    )
    read_mbs: float = Field(
        gt=0, le=1e7, description="MB/s (1e6 bytes) per node or per TiB"
    )
    write_mbs: float = Field(gt=0, le=1e7, description="MB/s per node or per TiB")
    node_max_mbs: float | None = Field(
        None, gt=0, le=1e7, description="one node's most, whatever the provisioned size"
    )
    max_mbs: float | None = Field(
        None,
        gt=0,
        le=1e9,
        description="the volume's or file system's most, all nodes together",
    )
    min_gib: float = Field(0.0, ge=0, le=1e9, description="smallest provisioned size")
    persistent: bool = Field(description="survives losing the node")
    shared: bool = Field(
        description="one copy all nodes read (false: one volume or disk per node, each with the data set)"
    )
    usd_per_gib_month: float = Field(ge=0, le=1e3)
    source: str = ""
    as_of: str = ""


class LocalDisk(Strict):
    """An instance type's local NVMe (catalogs/local_disks.csv): what a data set staged onto it may take."""

    provider: str
    instance_type: str
    local_gib: float = Field(gt=0, le=1e7)
    source: str = ""
    as_of: str = ""


class Provider(Strict):
    name: str
    billing_granularity_h: Annotated[float, AfterValidator(billing_step)]
    billing_minimum_h: float = Field(ge=0, le=MAX_HOURS)
    storage_usd_per_gib_month: float = Field(ge=0)
    egress_usd_per_gib: float = Field(ge=0)
    spot_preemption_per_node_h: float | None = Field(None, ge=0)
    spot_correlation: float | None = Field(
        None,
        ge=0,
        le=1,
        description="share of the preemption events "
        "taking one node that also take any other "
        "(fitted to traces)",
    )
    spot_capacity_wait_h: float | None = Field(
        None, ge=0, description="mean hours until spot capacity returns"
    )
    spot_capacity_wait_cv: float | None = Field(
        None, ge=1, description="coefficient of variation of that wait"
    )
    source: str = ""
    as_of: str = ""
    defaults: tuple[str, ...] = ()


MAX_GPUS_PER_NODE, MAX_GPU_VRAM_GIB = 1024, 1024
MAX_VCPUS, MAX_RAM_GIB = 16_384, 131_072
MAX_INTRA_NODE_GBS, MAX_INTER_NODE_GBPS = 100_000, 1_000_000
"""Physical bounds on an offer, each far above anything sold (2026: 72 GPUs in an NVL72 rack, 288 GB on a B300 or
MI355X, 1.8 TB/s of NVLink 5 per GPU, 28.8 Tbit/s of EFA on a p6e-gb200 node, 896 vCPUs and 32 TiB on the largest
instances): a value past one is a typo or a bad import, which would otherwise plan a 100,000,000 GiB job on one
A10G and call it optimal."""


class Offer(Strict):
    """One instance type in one provider region."""

    provider: Name
    region: Name
    instance_type: Name
    gpu: Name
    gpus_per_node: int = Field(gt=0, le=MAX_GPUS_PER_NODE)
    vcpus: float | None = Field(None, gt=0, le=MAX_VCPUS)
    ram_gib: float | None = Field(None, gt=0, le=MAX_RAM_GIB)
    gpu_vram_gib: float = Field(gt=0, le=MAX_GPU_VRAM_GIB)
    intra_node: IntraNode
    intra_node_gbs: float = Field(
        gt=0, le=MAX_INTRA_NODE_GBS, description="GB/s per GPU"
    )
    inter_node: InterNode
    inter_node_gbps: float = Field(
        0.0,
        ge=0,
        le=MAX_INTER_NODE_GBPS,
        description="Gbit/s per node (0 with inter_node none)",
    )
    on_demand_usd_h: PricePerHour | None = Field(None, description="USD per node-hour")
    spot_usd_h: PricePerHour | None = Field(None, description="USD per node-hour")
    spot_preemption_per_h: Rate | None = Field(None, description="per node-hour")
    max_nodes: int | None = Field(None, gt=0)
    billing_granularity_h: BillingStep | None = Field(
        None, description="blank: the provider's rule (e.g. `1h`, `60s`)"
    )
    billing_minimum_h: HoursOrZero | None = Field(
        None, description="blank: the provider's rule"
    )
    defaults: tuple[str, ...] = ()
    notes: str = ""

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.region}/{self.instance_type}"


class ModelArch(Strict):
    """A transformer's shape: enough to size memory, FLOPs and the KV cache."""

    name: Name = "custom"
    params: Count
    active_params: Count | None = Field(
        None, description="MoE: parameters used per token"
    )
    layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden: Width
    heads: Width
    kv_heads: Width | None = Field(
        None, description="grouped-query attention; default = heads"
    )
    head_dim: Width | None = Field(None, description="default hidden / heads")
    ffn: Width | None = Field(None, description="MLP width; default 4 x hidden")
    vocab: Width = 32000
    max_context: int | None = Field(None, gt=0, le=MAX_COUNT)
    tied_embeddings: bool = False
    experts: Width | None = Field(None, description="MoE: routed experts per MoE layer")
    experts_per_token: Width | None = Field(
        None, description="MoE: routed experts each token uses"
    )
    expert_params: Count | None = Field(
        None, description="MoE: parameters in routed experts, all layers"
    )
    hf_repo: str = ""
    source: str = ""

    @model_validator(mode="after")
    def _fill(self) -> ModelArch:
        object.__setattr__(self, "kv_heads", self.kv_heads or self.heads)
        object.__setattr__(self, "head_dim", self.head_dim or self.hidden // self.heads)
        object.__setattr__(self, "ffn", self.ffn or 4 * self.hidden)
        object.__setattr__(self, "active_params", self.active_params or self.params)
        moe = (self.experts, self.experts_per_token, self.expert_params)
        if any(v is not None for v in moe) and any(v is None for v in moe):
            raise ValueError(
                "an MoE model gives experts, experts_per_token and expert_params together"
            )
        if self.experts is not None:
            if self.experts_per_token > self.experts:
                raise ValueError(
                    f"experts_per_token ({self.experts_per_token}) is above experts ({self.experts})"
                )
            if self.expert_params >= self.params:
                raise ValueError(
                    "expert_params must be below params (attention and embeddings are not experts)"
                )
        return self


class HfConfigFile(Strict):
    """`model: {hf_config: path/to/config.json}`: a Hugging Face config read from disk (relative to the file)."""

    hf_config: str = Field(min_length=1)


def _model_form(value: object) -> str:
    """Which form of `model` a value is, so errors come from that form alone (pydantic would
    otherwise report every branch of the union, and the wrong one first)."""
    if isinstance(value, dict):
        return "<hf_config>" if "hf_config" in value else "<shape>"
    # built, when serialized
    return {ModelArch: "<shape>", HfConfigFile: "<hf_config>"}.get(
        type(value), "<name>"
    )


ModelSpec = Annotated[
    Annotated[str, Tag("<name>")]
    | Annotated[ModelArch, Tag("<shape>")]
    | Annotated[HfConfigFile, Tag("<hf_config>")],
    Discriminator(_model_form),
]
"""Tags in <> so they never match a key of the file when the loader drops them from error paths."""
