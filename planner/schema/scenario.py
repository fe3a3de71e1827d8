"""The domain model: GPUs, offers, providers, workloads and scenarios (pydantic v2, no solver).

Units inside the model: hours, GiB, USD, and seconds for latency targets. Scenario files may write units
(`90s`, `30m`, `2h`, `3d`; `80GiB`, `1.5TiB`; `$2.50/h`); a bare number means the unit in the field's name or
description, except a latency, which must name its unit (`500ms`, `2s`).
"""
from __future__ import annotations

import math
import types
import typing
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationInfo,
                      field_validator, model_validator)

from planner.schema.units import (MAX_GIB, parse_count, parse_gib, parse_hours, parse_seconds, parse_share,
                                  parse_usd)

# Upper bounds far above any real job keep every number the user gives finite through the cost
# model (1e308 as a multiplier or budget would overflow to inf): a century, an exabyte (units.MAX_GIB), a trillion
# dollars, 1e18 tokens, a million-fold multiplier; ten thousand checkpoints kept (one an hour for
# over a year: 1e10 of them made a 0.2 GiB LoRA's storage $50,000), and a run's priority up to a
# thousand (the batch model weighs each unit of priority above every dollar, in 64-bit integers).
MAX_HOURS, MAX_USD, MAX_COUNT, MAX_MULTIPLIER = 1e6, 1e12, 1e18, 1e6
MAX_CHECKPOINTS_KEPT, MAX_PRIORITY = 10_000, 1_000
MAX_LAYERS, MAX_WIDTH = 100_000, 10_000_000
"""A model's layers, and its widths and counts (hidden, heads, FFN, vocabulary, experts, context): far above any
published model (hundreds of layers, widths of tens of thousands), low enough that a per-layer loop stays quick."""
Width = Annotated[int, Field(gt=0, le=MAX_WIDTH)]


def _written(parse) -> BeforeValidator:
    """A quantity a file may write with its unit (`24h`, `80GiB`): a number or a string in the JSON Schema."""
    return BeforeValidator(parse, json_schema_input_type=float | str)


Hours = Annotated[float, _written(parse_hours), Field(gt=0, le=MAX_HOURS)]
HoursOrZero = Annotated[float, _written(parse_hours), Field(ge=0, le=MAX_HOURS)]
MIN_BILLING_H = 1 / 3.6e6
"""The finest billing step: a millisecond (clouds bill by the second at the finest); a step of 1e-310 h took the
rounding waste's grid past floating point (NaN, or an overflow)."""


def _billing_step(hours: float) -> float:
    if not MIN_BILLING_H <= hours <= MAX_HOURS:
        raise ValueError(f"expected a billing step from 1 ms to {MAX_HOURS:,.0f} h, got {hours:g} h")
    return hours


BillingStep = Annotated[float, _written(parse_hours), AfterValidator(_billing_step)]
GiB = Annotated[float, _written(parse_gib), Field(gt=0, le=MAX_GIB)]
GiBOrZero = Annotated[float, _written(parse_gib), Field(ge=0, le=MAX_GIB)]
USD = Annotated[float, _written(parse_usd), Field(gt=0, le=MAX_USD)]
Count = Annotated[float, _written(parse_count), Field(gt=0, le=MAX_COUNT)]
Fraction = Annotated[float, Field(gt=0, lt=1)]
Multiplier = Annotated[float, Field(gt=0, le=MAX_MULTIPLIER)]
def _printable_name(value: str) -> str:
    """Names are data that reach terminals, spreadsheets and plots: a control character (an escape sequence, a
    newline, a bell) would act there instead of being shown, so it is refused where it is written."""
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise ValueError(f"a name may not hold control or other non-printing characters; found {bad!r}")
    return value


Name = Annotated[str, AfterValidator(_printable_name)]
"""A name people and reports read: printable characters only (spaces allowed)."""
PricePerHour = Annotated[float, Field(gt=0, le=1e6)]
Rate = Annotated[float, Field(ge=0, le=1e4)]
MAX_WAIT_CV = 100
"""The largest coefficient of variation of a wait for spot capacity (the traces' are 2 to 6)."""

Precision = Literal["fp32", "fp16", "bf16", "fp8"]
WeightPrecision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
IntraNode = Literal["nvlink", "pcie"]
InterNode = Literal["infiniband", "efa", "roce", "ethernet", "none"]
Market = Literal["on_demand", "spot"]
Tolerance = Literal["none", "checkpointed", "stateless"]
Recipe = Literal["auto", "hf", "axolotl", "fsdp-qlora", "torchtune", "unsloth", "deepspeed", "megatron", "nemo"]
RECIPE_METHODS: dict[str, tuple[str, ...]] = {
    # the training methods each framework runs (physics/recipes.py has what else each decides)
    "hf": ("full", "lora", "qlora"), "axolotl": ("full", "lora", "qlora"), "fsdp-qlora": ("lora", "qlora"),
    "torchtune": ("full", "lora", "qlora"), "unsloth": ("full", "lora", "qlora"), "deepspeed": ("full", "lora"),
    "megatron": ("full", "lora"), "nemo": ("full", "lora"),
}
MEGATRON_RECIPES = ("megatron", "nemo")
"""The recipes with tensor, sequence and context parallelism."""
STAGED_RECIPES = MEGATRON_RECIPES + ("hf", "axolotl")
"""The recipes with pipeline stages: Megatron's schedules, or Accelerate's device_map run one stage at a time."""

Seconds = Annotated[float, BeforeValidator(parse_seconds, json_schema_input_type=str), Field(gt=0, le=3600)]

HARDWARE_FAILURE_PER_GPU_H = 2e-5
"""Llama 3 (arXiv:2407.21783): 419 unexpected interruptions in 54 days on 16,384 H100s."""


class Strict(BaseModel):
    """Unknown keys are errors (a typo must not be silently ignored), and so is true or false for a number
    (pydantic's lax mode reads them as 1 and 0; `lora_rank: true` is a slip, not a rank)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_truth_for_a_number(cls, value, info: ValidationInfo):
        if isinstance(value, bool) and _numeric(cls.model_fields[info.field_name].annotation):
            raise ValueError(f"expected a number, got {str(value).lower()}")
        return value


def _numeric(annotation) -> bool:
    """A number field (int or float, optional or not) that takes no bool."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    options = set(typing.get_args(annotation) if union else (annotation,))
    return bool(options & {int, float}) and bool not in options


# ---------------------------------------------------------------- catalog facts


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
        return {"fp32": self.fp32_tflops, "fp16": self.fp16_tflops, "bf16": self.bf16_tflops,
                "fp8": self.fp8_tflops, "int8": self.int8_tops}.get(precision)


class Provider(Strict):
    name: str
    billing_granularity_h: Annotated[float, AfterValidator(_billing_step)]
    billing_minimum_h: float = Field(ge=0, le=MAX_HOURS)
    storage_usd_per_gib_month: float = Field(ge=0)
    egress_usd_per_gib: float = Field(ge=0)
    spot_preemption_per_node_h: float | None = Field(None, ge=0)
    spot_correlation: float | None = Field(None, ge=0, le=1, description="share of the preemption events "
                                                                        "taking one node that also take any other "
                                                                        "(fitted to traces)")
    spot_capacity_wait_h: float | None = Field(None, ge=0, description="mean hours until spot capacity returns")
    spot_capacity_wait_cv: float | None = Field(None, ge=1, description="coefficient of variation of that wait")
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
    intra_node_gbs: float = Field(gt=0, le=MAX_INTRA_NODE_GBS, description="GB/s per GPU")
    inter_node: InterNode
    inter_node_gbps: float = Field(0.0, ge=0, le=MAX_INTER_NODE_GBPS,
                                   description="Gbit/s per node (0 with inter_node none)")
    on_demand_usd_h: PricePerHour | None = Field(None, description="USD per node-hour")
    spot_usd_h: PricePerHour | None = Field(None, description="USD per node-hour")
    spot_preemption_per_h: Rate | None = Field(None, description="per node-hour")
    max_nodes: int | None = Field(None, gt=0)
    billing_granularity_h: BillingStep | None = Field(None, description="blank: the provider's rule (e.g. `1h`, `60s`)")
    billing_minimum_h: HoursOrZero | None = Field(None, description="blank: the provider's rule")
    defaults: tuple[str, ...] = ()
    notes: str = ""

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.region}/{self.instance_type}"


class ModelArch(Strict):
    """A transformer's shape: enough to size memory, FLOPs and the KV cache."""

    name: Name = "custom"
    params: Count
    active_params: Count | None = Field(None, description="MoE: parameters used per token")
    layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden: Width
    heads: Width
    kv_heads: Width | None = Field(None, description="grouped-query attention; default = heads")
    head_dim: Width | None = Field(None, description="default hidden / heads")
    ffn: Width | None = Field(None, description="MLP width; default 4 x hidden")
    vocab: Width = 32000
    max_context: int | None = Field(None, gt=0, le=MAX_COUNT)
    tied_embeddings: bool = False
    experts: Width | None = Field(None, description="MoE: routed experts per MoE layer")
    experts_per_token: Width | None = Field(None, description="MoE: routed experts each token uses")
    expert_params: Count | None = Field(None, description="MoE: parameters in routed experts, all layers")
    hf_repo: str = ""
    source: str = ""

    @model_validator(mode="after")
    def _fill(self) -> "ModelArch":
        object.__setattr__(self, "kv_heads", self.kv_heads or self.heads)
        object.__setattr__(self, "head_dim", self.head_dim or self.hidden // self.heads)
        object.__setattr__(self, "ffn", self.ffn or 4 * self.hidden)
        object.__setattr__(self, "active_params", self.active_params or self.params)
        moe = (self.experts, self.experts_per_token, self.expert_params)
        if any(v is not None for v in moe) and any(v is None for v in moe):
            raise ValueError("an MoE model gives experts, experts_per_token and expert_params together")
        if self.experts is not None:
            if self.experts_per_token > self.experts:
                raise ValueError(f"experts_per_token ({self.experts_per_token}) is above experts ({self.experts})")
            if self.expert_params >= self.params:
                raise ValueError("expert_params must be below params (attention and embeddings are not experts)")
        return self


class HfConfigFile(Strict):
    """`model: {hf_config: path/to/config.json}`: a Hugging Face config read from disk (relative to the file)."""

    hf_config: str = Field(min_length=1)


def _model_form(value: object) -> str:
    """Which form of `model` a value is, so errors come from that form alone (pydantic would
    otherwise report every branch of the union, and the wrong one first)."""
    if isinstance(value, dict):
        return "<hf_config>" if "hf_config" in value else "<shape>"
    return {ModelArch: "<shape>", HfConfigFile: "<hf_config>"}.get(type(value), "<name>")  # built, when serialized


ModelSpec = Annotated[Annotated[str, Tag("<name>")] | Annotated[ModelArch, Tag("<shape>")]
                      | Annotated[HfConfigFile, Tag("<hf_config>")], Discriminator(_model_form)]
"""Tags in <> so they never match a key of the file when the loader drops them from error paths."""


# ---------------------------------------------------------------- workloads


class MemoryNeed(Strict):
    """Memory stated directly: either the whole per-GPU figure, or parts of which
    `model_states` can be sharded over the job's GPUs (ZeRO-3/FSDP) when `shardable`."""

    per_gpu: GiB | None = Field(None, description="memory each GPU needs, as measured")
    model_states: GiB | None = Field(None, description="weights, gradients and optimizer state in all")
    activations: GiBOrZero = Field(0.0, description="activation memory per GPU")
    shardable: bool = Field(True, description="whether ZeRO/FSDP may divide the model states")

    @model_validator(mode="after")
    def _one_form(self) -> "MemoryNeed":
        if (self.per_gpu is None) == (self.model_states is None):
            raise ValueError("give either per_gpu, or model_states (with optional activations)")
        return self


class Work(Strict):
    """How much computing: reference-GPU hours, or tokens (with the workload's model)."""

    gpu_hours: Hours | None = Field(None, description="GPU-hours on reference_gpu")
    reference_gpu: str | None = Field(None, description="the GPU the gpu_hours were measured on")
    tokens: Count | None = Field(None, description="training tokens (6 x params x tokens FLOPs)")

    @model_validator(mode="after")
    def _one_form(self) -> "Work":
        if (self.gpu_hours is None) == (self.tokens is None):
            raise ValueError("give either gpu_hours (with reference_gpu) or tokens")
        if self.gpu_hours is not None and not self.reference_gpu:
            raise ValueError("gpu_hours needs reference_gpu (the GPU those hours were measured on)")
        return self


class Generation(Strict):
    """Batch generation: how many sequences, how long, how batched."""

    sequences: Count = Field(description="prompts to generate for")
    prompt_tokens: int = Field(512, gt=0, description="tokens per prompt")
    output_tokens: int = Field(256, gt=0, description="tokens generated per prompt")
    batch: int = Field(64, gt=0, description="concurrent sequences per model replica")
    kv_precision: Literal["fp16", "bf16", "fp8"] = Field("bf16", description="KV-cache precision")


# ---------------------------------------------------------------- serving endpoints


class RequestBucket(Strict):
    """One request size of an endpoint's mix and its share of the requests (Mélange's histogram cell)."""

    prompt_tokens: int = Field(gt=0, le=10_000_000, description="tokens per prompt")
    output_tokens: int = Field(gt=0, le=10_000_000, description="tokens generated per request")
    share: Annotated[float, Field(gt=0, le=1)] = Field(
        1.0, description="share of requests of this size (the shares add up to 1)")


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_REQUESTS_PER_S = 1e7
"""A generous bound on any request rate (ten million a second), so a typo cannot ask for a billion nodes."""


def weekdays_of(days: str) -> tuple[int, ...]:
    """"mon-fri", "sat-sun", "fri-mon" (wrapping), "mon,wed" or "daily" -> weekday numbers (Monday 0)."""
    found: list[int] = []
    for part in days.lower().replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if part == "daily":
            found += range(7)
            continue
        if first not in WEEKDAYS or (dash and last not in WEEKDAYS):
            raise ValueError(f"days {days!r}: expected weekdays such as \"mon-fri\", \"sat-sun\" or \"mon,wed\"")
        a, b = WEEKDAYS.index(first), WEEKDAYS.index(last) if dash else WEEKDAYS.index(first)
        found += [(a + k) % 7 for k in range((b - a) % 7 + 1)]
    if len(set(found)) != len(found):
        raise ValueError(f"days {days!r} names a weekday twice")
    return tuple(sorted(found))


class TrafficPeriod(Strict):
    """`{hours: "8-20", requests_per_s: 40}`: the rate during those hours of every day, or, with
    `days: mon-fri`, of those days only (a weekly profile)."""

    hours: str = Field(description="span of hours of the day: \"8-20\"")
    days: str = Field("daily", description="weekdays the period applies to: mon-fri, sat-sun, mon,wed, daily")
    requests_per_s: Annotated[float, Field(ge=0, le=MAX_REQUESTS_PER_S)] = Field(
        description="the rate during those hours")

    @field_validator("days")
    @classmethod
    def _weekdays(cls, days: str) -> str:
        weekdays_of(days)
        return days

    @property
    def weekdays(self) -> tuple[int, ...]:
        return weekdays_of(self.days)

    @field_validator("hours")
    @classmethod
    def _span(cls, hours: str) -> str:
        start, dash, end = hours.partition("-")
        try:
            a, b = float(start), float(end)
        except ValueError:
            raise ValueError(f"hours {hours!r}: expected START-END in hours of the day, e.g. \"8-20\"") from None
        if not dash or not 0 <= a < b <= 24:
            raise ValueError(f"hours {hours!r}: expected START-END with 0 <= START < END <= 24")
        return hours

    @property
    def span(self) -> tuple[float, float]:
        start, _, end = self.hours.partition("-")
        return float(start), float(end)


class Traffic(Strict):
    """A steady rate or a daily profile, and the mix of request sizes (one bucket by default)."""

    requests_per_s: Annotated[float, Field(gt=0, le=MAX_REQUESTS_PER_S)] | None = Field(
        None, description="a steady rate all day")
    profile: tuple[TrafficPeriod, ...] = Field((), description="or a rate per span of hours (and weekdays)")
    buckets: tuple[RequestBucket, ...] = Field(
        (RequestBucket(prompt_tokens=512, output_tokens=256),),
        description="request sizes and their shares (default: one of 512 prompt and 256 output tokens)")
    slices: int = Field(4, ge=1, le=64, description="parts each bucket's rate may be split into across GPU types "
                                                   "(Mélange's slice_factor)")

    @model_validator(mode="after")
    def _one_form(self) -> "Traffic":
        if (self.requests_per_s is None) == (not self.profile):
            raise ValueError("give either requests_per_s or a daily profile of {hours, requests_per_s}")
        for day in range(7) if self.profile else ():
            spans = sorted(p.span for p in self.profile if day in p.weekdays)
            if not spans or spans[0][0] != 0 or spans[-1][1] != 24 or any(
                    a[1] != b[0] for a, b in zip(spans, spans[1:])):
                on = "" if all(p.days == "daily" for p in self.profile) else f" on {WEEKDAYS[day]}"
                raise ValueError(f"the profile's hours{on} must cover 0-24 once, without gaps or overlaps")
        total = sum(b.share for b in self.buckets)
        if abs(total - 1) > 1e-6:
            raise ValueError(f"bucket shares add up to {total:g}, expected 1")
        return self

    @property
    def periods(self) -> tuple[TrafficPeriod, ...]:
        """The profile's periods by first weekday, then time of day (one all-day period for a steady rate)."""
        if not self.profile:
            return (TrafficPeriod(hours="0-24", requests_per_s=self.requests_per_s),)
        return tuple(sorted(self.profile, key=lambda p: (p.weekdays[0], p.span)))

    @property
    def weekly(self) -> bool:
        return any(p.days != "daily" for p in self.profile)

    @property
    def peak(self) -> float:
        return max(p.requests_per_s for p in self.periods)

    def scaled(self, factor: float) -> "Traffic":
        """The same profile and request sizes at `factor` times every period's rate (`whatif --rate`)."""
        return self.model_copy(update={
            "requests_per_s": None if self.requests_per_s is None else self.requests_per_s * factor,
            "profile": tuple(p.model_copy(update={"requests_per_s": p.requests_per_s * factor}) for p in self.profile)})


class Slo(Strict):
    """Latency targets: time to first token at `quantile`, and the mean time per output token."""

    ttft: Seconds | None = Field(None, description="time to first token at `quantile` (`500ms`, `2s`); none: no "
                                                   "target")
    tpot: Seconds | None = Field(None, description="mean time per output token (`50ms`); none: no target")
    quantile: Fraction = Field(0.9, description="the share of requests that must meet the TTFT target")

    @model_validator(mode="after")
    def _a_target(self) -> "Slo":
        if self.ttft is None and self.tpot is None:
            raise ValueError("give a latency target: ttft, tpot or both, e.g. {ttft: 500ms, tpot: 50ms}")
        return self

    @property
    def ttft_s(self) -> float:
        """The TTFT target in seconds; no target is no limit."""
        return math.inf if self.ttft is None else self.ttft

    @property
    def tpot_s(self) -> float:
        return math.inf if self.tpot is None else self.tpot


class MeasuredCapacity(Strict):
    """A profiled figure: one replica of `tensor_parallel` GPUs of `gpu` serves `max_requests_per_s`
    of this size within the SLO (what Mélange profiles; replaces the physics for that GPU)."""

    gpu: str = Field(description="GPU name or family it was measured on")
    tensor_parallel: int = Field(1, gt=0, le=64, description="GPUs per replica")
    prompt_tokens: int = Field(gt=0, description="the request size it was measured at")
    output_tokens: int = Field(gt=0, description="the request size it was measured at")
    max_requests_per_s: Annotated[float, Field(gt=0, le=MAX_REQUESTS_PER_S)] = Field(
        description="the most requests/s one replica served within the SLO")


MAX_GPUS = 1_000_000
"""A million GPUs: above any job or endpoint, and the bound on a node count read back from a plan."""


class GpuCount(Strict):
    min: int = Field(1, gt=0, le=MAX_GPUS, description="fewest GPUs")
    max: int = Field(64, gt=0, le=MAX_GPUS, description="most GPUs")

    @model_validator(mode="after")
    def _ordered(self) -> "GpuCount":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


def _gpu_count(value: object) -> object:
    """`gpus: 8` is shorthand for exactly eight."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"min": value, "max": value}
    if not isinstance(value, (dict, GpuCount)):
        raise ValueError(f"expected a number of GPUs (gpus: 8) or a range (gpus: {{min: 1, max: 8}}), got {value!r}")
    return value


class Checkpointing(Strict):
    every: Hours | Literal["auto"] = Field(
        "auto", description="hours of work between checkpoints, or auto (Young/Daly's optimum)")
    write_time: HoursOrZero = Field(2 / 60, description="hours to write one checkpoint")
    size: GiBOrZero | None = Field(
        None, description="default: the model states' size")
    keep: int = Field(2, ge=1, le=MAX_CHECKPOINTS_KEPT, description="checkpoints kept in storage")

    @field_validator("every", mode="before")
    @classmethod
    def _auto_or_duration(cls, value: object) -> object:
        return value if value == "auto" else parse_hours(value)


class Data(Strict):
    size: GiBOrZero = Field(0.0, description="the dataset's size (read once per run; egress where it lives elsewhere)")
    location: str | None = Field(None, description="'provider' or 'provider/region' where it lives")


class Placement(Strict):
    providers: tuple[str, ...] = Field((), description="provider names")
    regions: tuple[str, ...] = Field((), description="region names (as the catalogs spell them)")
    gpus: tuple[str, ...] = Field((), description="GPU names or families; `H100:8` = nodes of 8 (SkyPilot syntax)")
    instance_types: tuple[str, ...] = Field((), description="instance type names")
    markets: tuple[Literal["on_demand", "spot", "spot_fallback"], ...] = Field(
        (), description="spot_fallback: spot that moves to on-demand to hold the deadline (cost-model §10)")

    @field_validator("gpus")
    @classmethod
    def _accelerator_syntax(cls, gpus: tuple[str, ...]) -> tuple[str, ...]:
        for gpu in gpus:
            name, colon, count = gpu.partition(":")
            if colon and not (count.isdigit() and int(count) > 0):
                raise ValueError(f"{gpu!r}: expected NAME or NAME:COUNT with COUNT a whole number of GPUs per node")
        return gpus


MAX_POOLS, MAX_PROVIDERS = 2, 1
"""An endpoint's defaults: what one team runs without a fleet manager (a main pool and one other, say a cheaper
GPU for short prompts or a spot pool, at one provider)."""
Share = Annotated[float, _written(parse_share), Field(ge=0, lt=1)]


class Risk(Strict):
    """How much spot risk a workload takes for a saving (unset: any). A workload's own fields win over
    `defaults.risk`'s."""

    min_spot_saving: Share | None = Field(
        None, description="keep a spot candidate only if it costs this share less than the workload's cheapest safer "
                          "one (spot_fallback or on-demand; a spot_fallback against on-demand), e.g. 10%")
    max_expected_preemptions: Annotated[float, Field(ge=0, le=1e9)] | None = Field(
        None, description="keep a spot or spot_fallback candidate only if it expects at most this many preemption "
                          "events")
    min_placement_score: Annotated[int, Field(ge=1, le=10)] | None = Field(
        None, description="keep a spot or spot_fallback candidate only if its region's spot placement score "
                          "(defaults.spot_placement_scores) for its node count is at least this (1-10)")

    def over(self, fallback: "Risk") -> "Risk":
        """These preferences, each unset one taken from `fallback`."""
        return Risk(**{name: getattr(self, name) if getattr(self, name) is not None else getattr(fallback, name)
                       for name in type(self).model_fields})


def _estimate_error(value: object) -> object:
    """`published`, or a spread read as a share (a bare 10 is not 10 %)."""
    if value == "published":
        return value
    try:
        share = parse_share(value)
    except ValueError as e:
        raise ValueError(f"expected published or a spread such as 5% ({e})") from None
    if not 0 <= share < 1:
        raise ValueError(f"expected published or a spread from 0% to under 100%, got {value!r}")
    return share


EstimateErrorSetting = Annotated[Literal["published"] | float,
                                 BeforeValidator(_estimate_error, json_schema_input_type=float | str)]
"""`published`: the physics' measured error against published runs; or the spread (one standard deviation of the
log) of a throughput the user measured, such as 5%, centred on it; 0: taken as exact."""


class Workload(Strict):
    name: Name = Field(min_length=1, description="unique within the scenario")
    kind: Literal["training", "fine_tuning", "batch_inference", "serving"] = Field(
        description="what the job is; serving is an endpoint")
    description: str = Field("", description="one line on what it is")
    model: ModelSpec | None = Field(
        None, description="catalog name, Hugging Face id (org/name), {hf_config: path} or an inline shape")
    method: Literal["full", "lora", "qlora", "inference"] | None = Field(
        None, description="default: inference for batch_inference, else full")
    precision: WeightPrecision = Field("bf16", description="weights and compute precision")
    fp8_fallback: bool = Field(False, description="fp8 on a GPU without it: run at bf16 instead of ruling it out")
    optimizer: Literal["adamw", "adamw_8bit", "sgd"] = Field(
        "adamw", description="its state sets the memory per parameter")
    recipe: Recipe = Field("auto", description="the framework that runs the training (docs/recipes.md); auto: the "
                                               "fastest that fits on each shape")
    parallelism: Literal["auto", "fixed"] = Field(
        "auto", description="auto: the planner picks every layout field not given; fixed: unset fields take "
                            "tensor_parallel 1, pipeline_parallel 1, zero3, selective, micro_batch 1")
    sharding: Literal["none", "zero1", "zero2", "zero3"] | None = Field(
        None, description="ZeRO stage (default: searched)")
    tensor_parallel: int | None = Field(None, gt=0, description="inside one node")
    pipeline_parallel: int | None = Field(None, gt=0, description="pipeline stages (1F1B)")
    expert_parallel: int | None = Field(None, gt=0, description="MoE: GPUs the routed experts are spread over")
    sequence_parallel: bool | None = Field(None, description="divide the TP-replicated activations (Megatron)")
    context_parallel: int | None = Field(None, gt=0, description="GPUs each sequence is split over (Megatron's CP; "
                                                                 "searched from 32K-token sequences)")
    sequence_length: int = Field(4096, gt=0, description="tokens per training sequence")
    micro_batch: int | None = Field(None, gt=0, description="sequences per GPU per micro-step")
    global_batch_tokens: Count | None = Field(None, description="tokens per optimizer step; default by kind")
    activation_checkpointing: Literal["none", "selective", "full"] | None = Field(
        None, description="recomputation (default: searched)")
    paged_optimizer: bool | None = Field(None, description="optimizer state in paged memory, off the card "
                                                           "(default: true for qlora)")
    lora_rank: int = Field(16, gt=0, description="adapters' rank (lora, qlora)")
    mfu: Fraction | None = Field(None, description="model FLOPs utilisation; default by GPU generation")
    comm_overlap: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, description="share of gradient communication hidden behind compute (default by recipe)")
    memory: MemoryNeed | None = Field(None, description="stated memory need, instead of a model's")
    work: Work | None = Field(None, description="stated work: GPU-hours on a reference GPU, or tokens")
    generation: Generation | None = Field(None, description="batch_inference: how many sequences of which size")
    traffic: Traffic | None = Field(None, description="serving: the request rate (or daily profile) and sizes")
    slo: Slo | None = Field(None, description="serving: latency targets")
    availability: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.99, description="serving: share of time the capacity must cover the rate")
    duration: Hours = Field(720.0, description="serving: how long the endpoint runs, for totals (default 30d)")
    autoscale: bool = Field(False, description="serving: replicas may differ per traffic period")
    kv_precision: Literal["fp16", "bf16", "fp8"] = Field("bf16", description="serving: KV-cache precision")
    headroom: Share = Field(0.0, description="serving: share of each replica's capacity within the SLO kept free "
                                             "for bursts above the profile's rates (default 0%)")
    max_pools: Annotated[int, Field(ge=1, le=10_000)] = Field(
        MAX_POOLS, description="serving: at most this many pools (an offer, market and layout each) over all periods")
    max_providers: Annotated[int, Field(ge=1, le=1_000)] = Field(
        MAX_PROVIDERS, description="serving: at most this many providers over all periods")
    pool_usd_per_h: Annotated[float, Field(ge=0, le=1e6)] = Field(
        0.0, description="serving: what running one more pool costs the team, in dollars per hour over the "
                         "endpoint's duration (monitoring, on-call, a second provider's account); with it, a plan "
                         "spreads over another pool only where that saves more (default 0)")
    measured: tuple[MeasuredCapacity, ...] = Field((), description="serving: profiled capacity per replica")
    gpus: Annotated[GpuCount, BeforeValidator(_gpu_count, json_schema_input_type=int | GpuCount)] = Field(
        GpuCount(), description="GPUs the job may use: `8` or `{min: 4, max: 32}`")
    time_budget: Hours | None = Field(None, description="hours; none = no deadline")
    risk: Risk = Field(Risk(), description="spot risk it takes for a saving (over defaults.risk)")
    estimate_error: EstimateErrorSetting | None = Field(
        None, description="how far its real throughput may be from the estimate, in P(deadline) (default: "
                          "defaults.estimate_error)")
    checkpoint: Checkpointing = Field(
        Checkpointing(), description="how often it saves, how long that takes, what is kept")
    restart_overhead: HoursOrZero = Field(10 / 60, description="hours per (re)start")
    interruption_tolerance: Tolerance = Field(
        "checkpointed", description="none: a preemption restarts from scratch; checkpointed: from the last "
                                    "checkpoint; stateless: nothing lost")
    data: Data = Field(Data(), description="the dataset: its size and where it lives (egress if elsewhere)")
    allow: Placement = Field(Placement(), description="only these providers, regions, GPUs, instance types, markets")
    forbid: Placement = Field(Placement(), description="never these")

    @field_validator("method")
    @classmethod
    def _method_fits_kind(cls, method: str | None, info: ValidationInfo) -> str | None:
        """Training has no inference method: caught here, where the key is known, not in the estimate."""
        if method == "inference" and info.data.get("kind") in ("training", "fine_tuning"):
            raise ValueError(f"method inference is for batch_inference and serving; a {info.data['kind']} "
                             "workload uses full, lora or qlora")
        return method

    @model_validator(mode="after")
    def _has_memory_and_work(self) -> "Workload":
        if self.kind == "serving":
            return self._serving_fields()
        if self.traffic is not None or self.slo is not None or self.measured:
            raise ValueError("traffic, slo and measured are for kind: serving")
        if (self.max_pools, self.max_providers) != (MAX_POOLS, MAX_PROVIDERS) or self.headroom or self.pool_usd_per_h:
            raise ValueError("headroom, max_pools, max_providers and pool_usd_per_h are for kind: serving")
        missing_memory = self.memory is None and self.model is None
        missing_work = self.work is None and self.generation is None
        if missing_memory and missing_work:
            raise ValueError("both memory and work are missing: give `memory` (or `model`) and `work`")
        if missing_memory:
            raise ValueError("memory is missing: give `memory: {per_gpu: ...}` or a `model`")
        if missing_work:
            need = "`generation`" if self.kind == "batch_inference" else "`work: {gpu_hours, reference_gpu}` or `work: {tokens}`"
            raise ValueError(f"work is missing: give {need}")
        self._recipe_runs_it()
        if self.precision in ("int8", "int4") and self.training_method != "inference":
            raise ValueError(f"precision {self.precision} is for inference weights; "
                             "training runs at fp32, fp16, bf16 or fp8")
        if self.work is not None and self.work.tokens is not None and self.model is None:
            raise ValueError("work.tokens needs a `model` to turn tokens into FLOPs")
        if self.generation is not None and self.model is None and self.work is None:
            raise ValueError("generation needs a `model` (or state `work` directly)")
        return self

    def _recipe_runs_it(self) -> None:
        """A recipe that cannot run the method or the pinned axes is a slip to catch here, not a plan with no rows."""
        if self.recipe == "auto" or self.training_method == "inference":
            return
        methods = RECIPE_METHODS[self.recipe]
        if self.training_method not in methods:
            raise ValueError(f"recipe {self.recipe} runs {', '.join(methods)}, not {self.training_method}")
        pinned = [f"{key} {value}" for key, value in (("tensor_parallel", self.tensor_parallel),
                                                      ("context_parallel", self.context_parallel))
                  if value is not None and value > 1] + (["sequence_parallel"] if self.sequence_parallel else [])
        if pinned and self.recipe not in MEGATRON_RECIPES:
            raise ValueError(f"recipe {self.recipe} has no tensor, sequence or context parallelism: "
                             f"{', '.join(pinned)} needs recipe {' or '.join(MEGATRON_RECIPES)}")
        if (self.pipeline_parallel or 1) > 1 and self.recipe not in STAGED_RECIPES:
            raise ValueError(f"recipe {self.recipe} has no pipeline stages: pipeline_parallel "
                             f"{self.pipeline_parallel} needs recipe {', '.join(STAGED_RECIPES)}")

    def _serving_fields(self) -> "Workload":
        if self.traffic is None or self.slo is None:
            raise ValueError("a serving workload needs `traffic` (requests_per_s or a profile) and `slo` "
                             "(ttft and tpot)")
        if self.model is None and not self.measured:
            raise ValueError("a serving workload needs a `model` (capacity from first principles) or `measured` "
                             "capacities")
        if self.work is not None or self.generation is not None or self.memory is not None:
            raise ValueError("a serving workload has no `work`, `generation` or `memory`: its size is its traffic")
        if self.method not in (None, "inference"):
            raise ValueError(f"method {self.method} is for training; a serving workload runs inference")
        return self

    @property
    def serving(self) -> bool:
        return self.kind == "serving"

    def at_rate(self, factor: float) -> "Workload":
        """An endpoint with its traffic scaled by `factor`; any other workload as it is."""
        if not self.serving:
            return self
        return self.model_copy(update={"traffic": self.traffic.scaled(factor)})

    def allows_market(self, market: str) -> bool:
        """The market passes `allow.markets` (all when empty) and `forbid.markets`."""
        return (not self.allow.markets or market in self.allow.markets) and market not in self.forbid.markets

    @property
    def training_method(self) -> str:
        return self.method or ("inference" if self.kind in ("batch_inference", "serving") else "full")


# ---------------------------------------------------------------- scenarios


class PlacementScore(Strict):
    """One spot placement score: how likely `region` is to grant a spot request for `nodes` nodes of
    `instance_type`, 1 (not likely) to 10 (highly likely), as AWS's get-spot-placement-scores reports it."""

    provider: str = Field(min_length=1, description="the offer's provider, e.g. aws")
    region: str = Field(min_length=1, description="the offer's region, e.g. us-east-1")
    instance_type: str = Field(min_length=1, description="the offer's instance type, e.g. p5.48xlarge")
    nodes: Annotated[int, Field(ge=1, le=MAX_GPUS)] = Field(description="the target capacity scored, in nodes")
    score: Annotated[int, Field(ge=1, le=10)] = Field(description="1 (not likely) to 10 (highly likely)")


def check_placement_scores(defaults: "Defaults", workloads) -> None:
    """Scores and the preference that reads them come together: either alone would silently do nothing."""
    wanted = defaults.risk.min_placement_score is not None or any(
        w.risk.min_placement_score is not None for w in workloads)
    if wanted and not defaults.spot_placement_scores:
        raise ValueError("risk.min_placement_score is set but defaults.spot_placement_scores is empty; list the "
                         "scores it reads")
    if defaults.spot_placement_scores and not wanted:
        raise ValueError("defaults.spot_placement_scores are given but no risk.min_placement_score reads them; set "
                         "it in defaults.risk or a workload's risk")


class Defaults(Strict):
    vram_headroom: Annotated[float, Field(ge=0, lt=1)] = Field(
        0.10, description="share of each GPU's memory kept free (fragmentation, spikes)")
    deadline_confidence: Fraction = Field(0.9, description="P(deadline) every job with a time budget must reach")
    hardware_failure_per_gpu_h: Annotated[float, Field(ge=0, le=10)] = Field(
        HARDWARE_FAILURE_PER_GPU_H, description="hardware failures per GPU-hour, on every market (each one a restart)")
    spot_evidence: Literal["traces", "fitted"] = Field(
        "traces", description="traces: a spot candidate is offered only if it keeps its promise replayed on measured "
                              "availability (cost model §11); fitted: on the fitted process alone")
    risk: Risk = Field(Risk(), description="spot risk a workload takes for a saving, unless it says otherwise")
    spot_placement_scores: tuple[PlacementScore, ...] = Field(
        (), description="spot placement scores where you have them (AWS get-spot-placement-scores): how likely a "
                        "region is to grant a spot request of so many nodes, 1-10; read under risk.min_placement_score")
    estimate_error: EstimateErrorSetting = Field(
        "published", description="how far real throughput may be from the estimate, in P(deadline): published (the "
                                 "physics' error against published runs, cost model §12) or a spread such as 5%")


def _group(names: tuple[str, ...]) -> tuple[str, ...]:
    """A placement group keeps workloads together: an empty one would reach the solver as nothing to place."""
    if len(set(names)) < 2:
        raise ValueError(f"a group keeps two or more workloads together; this one names {len(set(names))}")
    return names


Group = Annotated[tuple[str, ...], AfterValidator(_group)]


class Constraints(Strict):
    budget: USD | None = Field(None, description="USD, total expected cost")
    gpu_quotas: dict[str, Annotated[int, Field(ge=0, le=10**9)]] = Field(
        default_factory=dict, description="provider (or provider/gpu) -> GPUs at once")
    node_limits: dict[str, Annotated[int, Field(ge=0, le=10**9)]] = Field(
        default_factory=dict, description="'provider/region/instance_type' -> nodes")
    node_limits_per_market: bool = Field(
        False, description="count spot and on-demand nodes against separate limits")
    same_region: tuple[Group, ...] = Field((), description="groups of workloads kept in one region")
    same_provider: tuple[Group, ...] = Field((), description="groups of workloads kept at one provider")


class Override(Strict):
    """Scale prices or preemption rates of the offers it matches (all when no filter)."""

    provider: str | None = Field(None, description="offers of this provider (all when unset)")
    gpu: str | None = Field(None, description="offers of this GPU name or family")
    region: str | None = Field(None, description="offers in this region")
    instance_type: str | None = Field(None, description="offers of this instance type")
    spot_price_multiplier: Multiplier = Field(1.0, description="spot prices times this")
    on_demand_price_multiplier: Multiplier = Field(1.0, description="on-demand prices times this")
    preemption_rate_multiplier: Annotated[float, Field(ge=0, le=MAX_MULTIPLIER)] = Field(
        1.0, description="spot preemption rates times this")
    spot_correlation: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, description="set the share of preemption events taking one node that also take any other "
                    "(0: independent, 1: every event takes every node)")
    spot_capacity_wait: HoursOrZero | None = Field(None, description="set the mean time until spot capacity returns")
    spot_capacity_wait_cv: Annotated[float, Field(ge=1, le=MAX_WAIT_CV)] | None = Field(
        None, description="set that wait's coefficient of variation (1: exponential; the traces' are 2-6)")


DEFAULT_CATALOGS = ("aws", "gcp", "azure", "lambda", "runpod")
"""The catalogs a scenario or quarter file that names none (and no team config) is planned on."""


class Scenario(Strict):
    name: Name = Field(min_length=1, description="the scenario's name, in every report")
    description: str = Field("", description="one line on what it plans")
    catalogs: tuple[str, ...] = Field(DEFAULT_CATALOGS, description="shipped catalog names and/or paths to offer CSV "
                                                                    "files")
    defaults: Defaults = Field(Defaults(), description="settings every workload takes unless it says otherwise")
    workloads: tuple[Workload, ...] = Field(min_length=1, description="the jobs and endpoints to place")
    constraints: Constraints = Field(Constraints(), description="limits shared by all workloads")
    overrides: tuple[Override, ...] = Field(
        (), description="price and preemption changes to the catalogs' offers (what-if by hand)")

    @model_validator(mode="after")
    def _placement_scores_read(self) -> "Scenario":
        check_placement_scores(self.defaults, self.workloads)
        return self

    @field_validator("workloads")
    @classmethod
    def _unique_names(cls, workloads: tuple[Workload, ...]) -> tuple[Workload, ...]:
        seen: set[str] = set()
        for workload in workloads:
            if workload.name in seen:
                raise ValueError(f"duplicate workload name {workload.name!r}")
            seen.add(workload.name)
        return workloads


