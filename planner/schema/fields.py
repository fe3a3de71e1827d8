"""The field types the file models share: quantities with their units and bounds (`Hours`, `GiB`, `USD`, ...),
names, the enumerations (precisions, links, markets, recipes), and `Strict`, the base of every model.

Units inside the model: hours, GiB, USD, and seconds for latency targets. Files may write units (`90s`, `30m`, `2h`,
`3d`; `80GiB`, `1.5TiB`; `$2.50/h`); a bare number means the unit in the field's name or description, except a
latency, which must name its unit (`500ms`, `2s`).
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from planner.schema.units import (
    MAX_GIB,
    parse_count,
    parse_gib,
    parse_hours,
    parse_seconds,
    parse_share,
    parse_usd,
)

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


def billing_step(hours: float) -> float:
    if not MIN_BILLING_H <= hours <= MAX_HOURS:
        raise ValueError(
            f"expected a billing step from 1 ms to {MAX_HOURS:,.0f} h, got {hours:g} h"
        )
    return hours


BillingStep = Annotated[float, _written(parse_hours), AfterValidator(billing_step)]
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
        raise ValueError(
            f"a name may not hold control or other non-printing characters; found {bad!r}"
        )
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
Recipe = Literal[
    "auto",
    "hf",
    "axolotl",
    "fsdp-qlora",
    "torchtune",
    "unsloth",
    "deepspeed",
    "megatron",
    "nemo",
]
RECIPE_METHODS: dict[str, tuple[str, ...]] = {
    # the training methods each framework runs (physics/recipes.py has what else each decides)
    "hf": ("full", "lora", "qlora"),
    "axolotl": ("full", "lora", "qlora"),
    "fsdp-qlora": ("lora", "qlora"),
    "torchtune": ("full", "lora", "qlora"),
    "unsloth": ("full", "lora", "qlora"),
    "deepspeed": ("full", "lora"),
    "megatron": ("full", "lora"),
    "nemo": ("full", "lora"),
}
MEGATRON_RECIPES = ("megatron", "nemo")
"""The recipes with tensor, sequence and context parallelism."""
STAGED_RECIPES = MEGATRON_RECIPES + ("hf", "axolotl")
"""The recipes with pipeline stages: Megatron's schedules, or Accelerate's device_map run one stage at a time."""

Seconds = Annotated[
    float,
    BeforeValidator(parse_seconds, json_schema_input_type=str),
    Field(gt=0, le=3600),
]

HARDWARE_FAILURE_PER_GPU_H = 2e-5
"""Llama 3 (arXiv:2407.21783): 419 unexpected interruptions in 54 days on 16,384 H100s."""


class Strict(BaseModel):
    """Unknown keys are errors (a typo must not be silently ignored), and so is true or false for a number
    (pydantic's lax mode reads them as 1 and 0; `lora_rank: true` is a slip, not a rank)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_truth_for_a_number(cls, value, info: ValidationInfo):
        if isinstance(value, bool) and _numeric(
            cls.model_fields[info.field_name].annotation
        ):
            raise ValueError(f"expected a number, got {str(value).lower()}")
        return value


def _numeric(annotation) -> bool:
    """A number field (int or float, optional or not) that takes no bool."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    options = set(typing.get_args(annotation) if union else (annotation,))
    return bool(options & {int, float}) and bool not in options


Share = Annotated[float, _written(parse_share), Field(ge=0, lt=1)]
