"""A workload as a scenario writes it: its work (training, generation or serving), GPU count, checkpointing, data,
placement and risk preferences, and what it allows of offers and markets.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from planner.schema.catalog import ModelSpec
from planner.schema.endpoint import MeasuredCapacity, Slo, Traffic
from planner.schema.fields import (
    MAX_CHECKPOINTS_KEPT,
    MEGATRON_RECIPES,
    RECIPE_METHODS,
    STAGED_RECIPES,
    Count,
    Fraction,
    GiB,
    GiBOrZero,
    Hours,
    HoursOrZero,
    Name,
    Recipe,
    Share,
    Strict,
    Tolerance,
    WeightPrecision,
)
from planner.schema.units import parse_hours, parse_share


class MemoryNeed(Strict):
    """Memory stated directly: either the whole per-GPU figure, or parts of which
    `model_states` can be sharded over the job's GPUs (ZeRO-3/FSDP) when `shardable`."""

    per_gpu: GiB | None = Field(None, description="memory each GPU needs, as measured")
    model_states: GiB | None = Field(
        None, description="weights, gradients and optimizer state in all"
    )
    activations: GiBOrZero = Field(0.0, description="activation memory per GPU")
    shardable: bool = Field(
        True, description="whether ZeRO/FSDP may divide the model states"
    )

    @model_validator(mode="after")
    def _one_form(self) -> MemoryNeed:
        if (self.per_gpu is None) == (self.model_states is None):
            raise ValueError(
                "give either per_gpu, or model_states (with optional activations)"
            )
        return self


class Work(Strict):
    """How much computing: reference-GPU hours, or tokens (with the workload's model)."""

    gpu_hours: Hours | None = Field(None, description="GPU-hours on reference_gpu")
    reference_gpu: str | None = Field(
        None, description="the GPU the gpu_hours were measured on"
    )
    tokens: Count | None = Field(
        None, description="training tokens (6 x params x tokens FLOPs)"
    )

    @model_validator(mode="after")
    def _one_form(self) -> Work:
        if (self.gpu_hours is None) == (self.tokens is None):
            raise ValueError("give either gpu_hours (with reference_gpu) or tokens")
        if self.gpu_hours is not None and not self.reference_gpu:
            raise ValueError(
                "gpu_hours needs reference_gpu (the GPU those hours were measured on)"
            )
        return self


class Generation(Strict):
    """Batch generation: how many sequences, how long, how batched."""

    sequences: Count = Field(description="prompts to generate for")
    prompt_tokens: int = Field(512, gt=0, description="tokens per prompt")
    output_tokens: int = Field(256, gt=0, description="tokens generated per prompt")
    batch: int = Field(64, gt=0, description="concurrent sequences per model replica")
    kv_precision: Literal["fp16", "bf16", "fp8"] = Field(
        "bf16", description="KV-cache precision"
    )


MAX_GPUS = 1_000_000
"""A million GPUs: above any job or endpoint, and the bound on a node count read back from a plan."""


class GpuCount(Strict):
    min: int = Field(1, gt=0, le=MAX_GPUS, description="fewest GPUs")
    max: int = Field(64, gt=0, le=MAX_GPUS, description="most GPUs")

    @model_validator(mode="after")
    def _ordered(self) -> GpuCount:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


def _gpu_count(value: object) -> object:
    """`gpus: 8` is shorthand for exactly eight."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"min": value, "max": value}
    if not isinstance(value, (dict, GpuCount)):
        raise ValueError(
            f"expected a number of GPUs (gpus: 8) or a range (gpus: {{min: 1, max: 8}}), got {value!r}"
        )
    return value


class Checkpointing(Strict):
    every: Hours | Literal["auto"] = Field(
        "auto",
        description="hours of work between checkpoints, or auto (Young/Daly's optimum)",
    )
    write_time: HoursOrZero | None = Field(
        None,
        description="hours to write one checkpoint; default: its size over the chosen storage's write "
        "bandwidth",
    )
    asynchronous: bool = Field(
        False,
        description="the write runs behind training (PyTorch DCP async_save): the GPUs pause only to copy "
        "their shard to host memory, and a restart may lose the checkpoint in flight",
    )
    size: GiBOrZero | None = Field(None, description="default: the model states' size")
    keep: int = Field(
        2, ge=1, le=MAX_CHECKPOINTS_KEPT, description="checkpoints kept in storage"
    )

    @field_validator("every", mode="before")
    @classmethod
    def _auto_or_duration(cls, value: object) -> object:
        return value if value == "auto" else parse_hours(value)


class Data(Strict):
    size: GiBOrZero = Field(
        0.0,
        description="the dataset's size (read once per run; egress where it lives elsewhere)",
    )
    location: str | None = Field(
        None, description="'provider' or 'provider/region' where it lives"
    )
    epochs: Annotated[float, Field(gt=0, le=1e6)] = Field(
        1.0, description="passes over the data set: the run reads size times this"
    )
    sample_size: GiBOrZero | None = Field(
        None,
        description="one sample as the loader reads it (an image of 115KB): small objects read from a "
        "bucket wait on each request; default: large shards (WebDataset, Megatron .bin), read at full rate",
    )


class Placement(Strict):
    providers: tuple[str, ...] = Field((), description="provider names")
    regions: tuple[str, ...] = Field(
        (), description="region names (as the catalogs spell them)"
    )
    gpus: tuple[str, ...] = Field(
        (), description="GPU names or families; `H100:8` = nodes of 8 (SkyPilot syntax)"
    )
    instance_types: tuple[str, ...] = Field((), description="instance type names")
    storage: tuple[str, ...] = Field(
        (),
        description="storage options or classes (local, block, shared_fs, object, network_volume) for its "
        "data and checkpoints",
    )
    markets: tuple[
        Literal[
            "on_demand",
            "spot",
            "spot_fallback",
            "reserved",
            "capacity_block",
            "flex_start",
        ],
        ...,
    ] = Field(
        (),
        description="spot_fallback: spot that moves to on-demand to hold the deadline (cost-model §10); "
        "reserved, capacity_block, flex_start: the scenario's purchase_options (§13)",
    )

    @field_validator("gpus")
    @classmethod
    def _accelerator_syntax(cls, gpus: tuple[str, ...]) -> tuple[str, ...]:
        for gpu in gpus:
            name, colon, count = gpu.partition(":")
            if colon and not (count.isdigit() and int(count) > 0):
                raise ValueError(
                    f"{gpu!r}: expected NAME or NAME:COUNT with COUNT a whole number of GPUs per node"
                )
        return gpus


MAX_POOLS, MAX_PROVIDERS = 2, 1
"""An endpoint's defaults: what one team runs without a fleet manager (a main pool and one other, say a cheaper
GPU for short prompts or a spot pool, at one provider)."""


class Risk(Strict):
    """How much spot risk a workload takes for a saving (unset: any). A workload's own fields win over
    `defaults.risk`'s."""

    min_spot_saving: Share | None = Field(
        None,
        description="keep a spot candidate only if it costs this share less than the workload's cheapest safer "
        "one (spot_fallback or on-demand; a spot_fallback against on-demand), e.g. 10%",
    )
    max_expected_preemptions: Annotated[float, Field(ge=0, le=1e9)] | None = Field(
        None,
        description="keep a spot or spot_fallback candidate only if it expects at most this many preemption "
        "events",
    )
    min_placement_score: Annotated[int, Field(ge=1, le=10)] | None = Field(
        None,
        description="keep a spot or spot_fallback candidate only if its region's spot placement score "
        "(defaults.spot_placement_scores) for its node count is at least this (1-10)",
    )

    def over(self, fallback: Risk) -> Risk:
        """These preferences, each unset one taken from `fallback`."""
        return Risk(
            **{
                name: getattr(self, name)
                if getattr(self, name) is not None
                else getattr(fallback, name)
                for name in type(self).model_fields
            }
        )


def _estimate_error(value: object) -> object:
    """`published`, or a spread read as a share (a bare 10 is not 10 %)."""
    if value == "published":
        return value
    try:
        share = parse_share(value)
    except ValueError as e:
        raise ValueError(f"expected published or a spread such as 5% ({e})") from None
    if not 0 <= share < 1:
        raise ValueError(
            f"expected published or a spread from 0% to under 100%, got {value!r}"
        )
    return share


EstimateErrorSetting = Annotated[
    Literal["published"] | float,
    BeforeValidator(_estimate_error, json_schema_input_type=float | str),
]
"""`published`: the physics' measured error against published runs; or the spread (one standard deviation of the
log) of a throughput the user measured, such as 5%, centred on it; 0: taken as exact."""


class Workload(Strict):
    name: Name = Field(min_length=1, description="unique within the scenario")
    kind: Literal["training", "fine_tuning", "batch_inference", "serving"] = Field(
        description="what the job is; serving is an endpoint"
    )
    description: str = Field("", description="one line on what it is")
    model: ModelSpec | None = Field(
        None,
        description="catalog name, Hugging Face id (org/name), {hf_config: path} or an inline shape",
    )
    method: Literal["full", "lora", "qlora", "inference"] | None = Field(
        None, description="default: inference for batch_inference, else full"
    )
    precision: WeightPrecision = Field(
        "bf16", description="weights and compute precision"
    )
    fp8_fallback: bool = Field(
        False,
        description="fp8 on a GPU without it: run at bf16 instead of ruling it out",
    )
    optimizer: Literal["adamw", "adamw_8bit", "sgd"] = Field(
        "adamw", description="its state sets the memory per parameter"
    )
    recipe: Recipe = Field(
        "auto",
        description="the framework that runs the training (docs/recipes.md); auto: the "
        "fastest that fits on each shape",
    )
    parallelism: Literal["auto", "fixed"] = Field(
        "auto",
        description="auto: the planner picks every layout field not given; fixed: unset fields take "
        "tensor_parallel 1, pipeline_parallel 1, zero3, selective, micro_batch 1",
    )
    sharding: Literal["none", "zero1", "zero2", "zero3"] | None = Field(
        None, description="ZeRO stage (default: searched)"
    )
    tensor_parallel: int | None = Field(None, gt=0, description="inside one node")
    pipeline_parallel: int | None = Field(
        None, gt=0, description="pipeline stages (1F1B)"
    )
    expert_parallel: int | None = Field(
        None, gt=0, description="MoE: GPUs the routed experts are spread over"
    )
    sequence_parallel: bool | None = Field(
        None, description="divide the TP-replicated activations (Megatron)"
    )
    context_parallel: int | None = Field(
        None,
        gt=0,
        description="GPUs each sequence is split over (Megatron's CP; "
        "searched from 32K-token sequences)",
    )
    sequence_length: int = Field(4096, gt=0, description="tokens per training sequence")
    micro_batch: int | None = Field(
        None, gt=0, description="sequences per GPU per micro-step"
    )
    global_batch_tokens: Count | None = Field(
        None, description="tokens per optimizer step; default by kind"
    )
    activation_checkpointing: Literal["none", "selective", "full"] | None = Field(
        None, description="recomputation (default: searched)"
    )
    paged_optimizer: bool | None = Field(
        None,
        description="optimizer state in paged memory, off the card "
        "(default: true for qlora)",
    )
    lora_rank: int = Field(16, gt=0, description="adapters' rank (lora, qlora)")
    mfu: Fraction | None = Field(
        None, description="model FLOPs utilisation; default by GPU generation"
    )
    comm_overlap: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None,
        description="share of gradient communication hidden behind compute (default by recipe)",
    )
    memory: MemoryNeed | None = Field(
        None, description="stated memory need, instead of a model's"
    )
    work: Work | None = Field(
        None, description="stated work: GPU-hours on a reference GPU, or tokens"
    )
    generation: Generation | None = Field(
        None, description="batch_inference: how many sequences of which size"
    )
    traffic: Traffic | None = Field(
        None, description="serving: the request rate (or daily profile) and sizes"
    )
    slo: Slo | None = Field(None, description="serving: latency targets")
    availability: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.99, description="serving: share of time the capacity must cover the rate"
    )
    duration: Hours = Field(
        720.0,
        description="serving: how long the endpoint runs, for totals (default 30d)",
    )
    autoscale: bool = Field(
        False, description="serving: replicas may differ per traffic period"
    )
    kv_precision: Literal["fp16", "bf16", "fp8"] = Field(
        "bf16", description="serving: KV-cache precision"
    )
    headroom: Share = Field(
        0.0,
        description="serving: share of each replica's capacity within the SLO kept free "
        "for bursts above the profile's rates (default 0%)",
    )
    max_pools: Annotated[int, Field(ge=1, le=10_000)] = Field(
        MAX_POOLS,
        description="serving: at most this many pools (an offer, market and layout each) over all periods",
    )
    max_providers: Annotated[int, Field(ge=1, le=1_000)] = Field(
        MAX_PROVIDERS,
        description="serving: at most this many providers over all periods",
    )
    pool_usd_per_h: Annotated[float, Field(ge=0, le=1e6)] = Field(
        0.0,
        description="serving: what running one more pool costs the team, in dollars per hour over the "
        "endpoint's duration (monitoring, on-call, a second provider's account); with it, a plan "
        "spreads over another pool only where that saves more (default 0)",
    )
    measured: tuple[MeasuredCapacity, ...] = Field(
        (), description="serving: profiled capacity per replica"
    )
    gpus: Annotated[
        GpuCount, BeforeValidator(_gpu_count, json_schema_input_type=int | GpuCount)
    ] = Field(
        GpuCount(), description="GPUs the job may use: `8` or `{min: 4, max: 32}`"
    )
    time_budget: Hours | None = Field(None, description="hours; none = no deadline")
    risk: Risk = Field(
        Risk(), description="spot risk it takes for a saving (over defaults.risk)"
    )
    estimate_error: EstimateErrorSetting | None = Field(
        None,
        description="how far its real throughput may be from the estimate, in P(deadline) (default: "
        "defaults.estimate_error)",
    )
    checkpoint: Checkpointing = Field(
        Checkpointing(),
        description="how often it saves, how long that takes, what is kept",
    )
    restart_overhead: HoursOrZero = Field(10 / 60, description="hours per (re)start")
    interruption_tolerance: Tolerance = Field(
        "checkpointed",
        description="none: a preemption restarts from scratch; checkpointed: from the last "
        "checkpoint; stateless: nothing lost",
    )
    data: Data = Field(
        Data(),
        description="the dataset: its size and where it lives (egress if elsewhere)",
    )
    allow: Placement = Field(
        Placement(),
        description="only these providers, regions, GPUs, instance types, markets",
    )
    forbid: Placement = Field(Placement(), description="never these")

    @field_validator("method")
    @classmethod
    def _method_fits_kind(cls, method: str | None, info: ValidationInfo) -> str | None:
        """Training has no inference method: caught here, where the key is known, not in the estimate."""
        if method == "inference" and info.data.get("kind") in (
            "training",
            "fine_tuning",
        ):
            raise ValueError(
                f"method inference is for batch_inference and serving; a {info.data['kind']} "
                "workload uses full, lora or qlora"
            )
        return method

    @model_validator(mode="after")
    def _has_memory_and_work(self) -> Workload:
        if self.kind == "serving":
            return self._serving_fields()
        if self.traffic is not None or self.slo is not None or self.measured:
            raise ValueError("traffic, slo and measured are for kind: serving")
        if (
            (self.max_pools, self.max_providers) != (MAX_POOLS, MAX_PROVIDERS)
            or self.headroom
            or self.pool_usd_per_h
        ):
            raise ValueError(
                "headroom, max_pools, max_providers and pool_usd_per_h are for kind: serving"
            )
        missing_memory = self.memory is None and self.model is None
        missing_work = self.work is None and self.generation is None
        if missing_memory and missing_work:
            raise ValueError(
                "both memory and work are missing: give `memory` (or `model`) and `work`"
            )
        if missing_memory:
            raise ValueError(
                "memory is missing: give `memory: {per_gpu: ...}` or a `model`"
            )
        if missing_work:
            need = (
                "`generation`"
                if self.kind == "batch_inference"
                else "`work: {gpu_hours, reference_gpu}` or `work: {tokens}`"
            )
            raise ValueError(f"work is missing: give {need}")
        self._recipe_runs_it()
        if self.precision in ("int8", "int4") and self.training_method != "inference":
            raise ValueError(
                f"precision {self.precision} is for inference weights; "
                "training runs at fp32, fp16, bf16 or fp8"
            )
        if (
            self.work is not None
            and self.work.tokens is not None
            and self.model is None
        ):
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
            raise ValueError(
                f"recipe {self.recipe} runs {', '.join(methods)}, not {self.training_method}"
            )
        pinned = [
            f"{key} {value}"
            for key, value in (
                ("tensor_parallel", self.tensor_parallel),
                ("context_parallel", self.context_parallel),
            )
            if value is not None and value > 1
        ] + (["sequence_parallel"] if self.sequence_parallel else [])
        if pinned and self.recipe not in MEGATRON_RECIPES:
            raise ValueError(
                f"recipe {self.recipe} has no tensor, sequence or context parallelism: "
                f"{', '.join(pinned)} needs recipe {' or '.join(MEGATRON_RECIPES)}"
            )
        if (self.pipeline_parallel or 1) > 1 and self.recipe not in STAGED_RECIPES:
            raise ValueError(
                f"recipe {self.recipe} has no pipeline stages: pipeline_parallel "
                f"{self.pipeline_parallel} needs recipe {', '.join(STAGED_RECIPES)}"
            )

    def _serving_fields(self) -> Workload:
        if self.traffic is None or self.slo is None:
            raise ValueError(
                "a serving workload needs `traffic` (requests_per_s or a profile) and `slo` "
                "(ttft and tpot)"
            )
        if self.model is None and not self.measured:
            raise ValueError(
                "a serving workload needs a `model` (capacity from first principles) or `measured` "
                "capacities"
            )
        if (
            self.work is not None
            or self.generation is not None
            or self.memory is not None
        ):
            raise ValueError(
                "a serving workload has no `work`, `generation` or `memory`: its size is its traffic"
            )
        if self.method not in (None, "inference"):
            raise ValueError(
                f"method {self.method} is for training; a serving workload runs inference"
            )
        return self

    @property
    def serving(self) -> bool:
        return self.kind == "serving"

    def at_rate(self, factor: float) -> Workload:
        """An endpoint with its traffic scaled by `factor`; any other workload as it is."""
        if not self.serving:
            return self
        return self.model_copy(update={"traffic": self.traffic.scaled(factor)})

    def allows_market(self, market: str) -> bool:
        """The market passes `allow.markets` (all when empty) and `forbid.markets`."""
        return (
            not self.allow.markets or market in self.allow.markets
        ) and market not in self.forbid.markets

    @property
    def training_method(self) -> str:
        return self.method or (
            "inference" if self.kind in ("batch_inference", "serving") else "full"
        )
