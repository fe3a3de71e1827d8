"""The scenario file's root: its workloads, defaults (risk, spot evidence, placement scores), shared constraints,
price and preemption overrides, and the catalogs it reads (pydantic v2, no solver). The models it is made of have a
home each: `fields` (field types), `catalog` (catalogs' rows), `workload`, `endpoint` and `purchase`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from planner.schema.fields import (
    HARDWARE_FAILURE_PER_GPU_H,
    MAX_MULTIPLIER,
    MAX_WAIT_CV,
    USD,
    Fraction,
    HoursOrZero,
    Multiplier,
    Name,
    Strict,
)
from planner.schema.purchase import PurchaseOption, check_unique
from planner.schema.workload import MAX_GPUS, EstimateErrorSetting, Risk, Workload


class PlacementScore(Strict):
    """One spot placement score: how likely `region` is to grant a spot request for `nodes` nodes of
    `instance_type`, 1 (not likely) to 10 (highly likely), as AWS's get-spot-placement-scores reports it."""

    provider: str = Field(min_length=1, description="the offer's provider, e.g. aws")
    region: str = Field(min_length=1, description="the offer's region, e.g. us-east-1")
    instance_type: str = Field(
        min_length=1, description="the offer's instance type, e.g. p5.48xlarge"
    )
    nodes: Annotated[int, Field(ge=1, le=MAX_GPUS)] = Field(
        description="the target capacity scored, in nodes"
    )
    score: Annotated[int, Field(ge=1, le=10)] = Field(
        description="1 (not likely) to 10 (highly likely)"
    )


def check_placement_scores(defaults: Defaults, workloads) -> None:
    """Scores and the preference that reads them come together: either alone would silently do nothing."""
    wanted = defaults.risk.min_placement_score is not None or any(
        w.risk.min_placement_score is not None for w in workloads
    )
    if wanted and not defaults.spot_placement_scores:
        raise ValueError(
            "risk.min_placement_score is set but defaults.spot_placement_scores is empty; list the "
            "scores it reads"
        )
    if defaults.spot_placement_scores and not wanted:
        raise ValueError(
            "defaults.spot_placement_scores are given but no risk.min_placement_score reads them; set "
            "it in defaults.risk or a workload's risk"
        )


class Defaults(Strict):
    vram_headroom: Annotated[float, Field(ge=0, lt=1)] = Field(
        0.10, description="share of each GPU's memory kept free (fragmentation, spikes)"
    )
    deadline_confidence: Fraction = Field(
        0.9, description="P(deadline) every job with a time budget must reach"
    )
    hardware_failure_per_gpu_h: Annotated[float, Field(ge=0, le=10)] = Field(
        HARDWARE_FAILURE_PER_GPU_H,
        description="hardware failures per GPU-hour, on every market (each one a restart)",
    )
    spot_evidence: Literal["traces", "fitted"] = Field(
        "traces",
        description="traces: a spot candidate is offered only if it keeps its promise replayed on measured "
        "availability (cost model §11); fitted: on the fitted process alone",
    )
    risk: Risk = Field(
        Risk(),
        description="spot risk a workload takes for a saving, unless it says otherwise",
    )
    spot_placement_scores: tuple[PlacementScore, ...] = Field(
        (),
        description="spot placement scores where you have them (AWS get-spot-placement-scores): how likely a "
        "region is to grant a spot request of so many nodes, 1-10; read under risk.min_placement_score",
    )
    estimate_error: EstimateErrorSetting = Field(
        "published",
        description="how far real throughput may be from the estimate, in P(deadline): published (the "
        "physics' error against published runs, cost model §12) or a spread such as 5%",
    )


def _group(names: tuple[str, ...]) -> tuple[str, ...]:
    """A placement group keeps workloads together: an empty one would reach the solver as nothing to place."""
    if len(set(names)) < 2:
        raise ValueError(
            f"a group keeps two or more workloads together; this one names {len(set(names))}"
        )
    return names


Group = Annotated[tuple[str, ...], AfterValidator(_group)]


class Constraints(Strict):
    budget: USD | None = Field(None, description="USD, total expected cost")
    gpu_quotas: dict[str, Annotated[int, Field(ge=0, le=10**9)]] = Field(
        default_factory=dict, description="provider (or provider/gpu) -> GPUs at once"
    )
    node_limits: dict[str, Annotated[int, Field(ge=0, le=10**9)]] = Field(
        default_factory=dict, description="'provider/region/instance_type' -> nodes"
    )
    node_limits_per_market: bool = Field(
        False, description="count spot and on-demand nodes against separate limits"
    )
    same_region: tuple[Group, ...] = Field(
        (), description="groups of workloads kept in one region"
    )
    same_provider: tuple[Group, ...] = Field(
        (), description="groups of workloads kept at one provider"
    )


class Override(Strict):
    """Scale prices or preemption rates of the offers it matches (all when no filter)."""

    provider: str | None = Field(
        None, description="offers of this provider (all when unset)"
    )
    gpu: str | None = Field(None, description="offers of this GPU name or family")
    region: str | None = Field(None, description="offers in this region")
    instance_type: str | None = Field(None, description="offers of this instance type")
    spot_price_multiplier: Multiplier = Field(1.0, description="spot prices times this")
    on_demand_price_multiplier: Multiplier = Field(
        1.0, description="on-demand prices times this"
    )
    preemption_rate_multiplier: Annotated[float, Field(ge=0, le=MAX_MULTIPLIER)] = (
        Field(1.0, description="spot preemption rates times this")
    )
    spot_correlation: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None,
        description="set the share of preemption events taking one node that also take any other "
        "(0: independent, 1: every event takes every node)",
    )
    spot_capacity_wait: HoursOrZero | None = Field(
        None, description="set the mean time until spot capacity returns"
    )
    spot_capacity_wait_cv: Annotated[float, Field(ge=1, le=MAX_WAIT_CV)] | None = Field(
        None,
        description="set that wait's coefficient of variation (1: exponential; the traces' are 2-6)",
    )


DEFAULT_CATALOGS = ("aws", "gcp", "azure", "lambda", "runpod")
"""The catalogs a scenario or quarter file that names none (and no team config) is planned on."""


class Scenario(Strict):
    name: Name = Field(min_length=1, description="the scenario's name, in every report")
    description: str = Field("", description="one line on what it plans")
    catalogs: tuple[str, ...] = Field(
        DEFAULT_CATALOGS,
        description="shipped catalog names and/or paths to offer CSV files",
    )
    defaults: Defaults = Field(
        Defaults(), description="settings every workload takes unless it says otherwise"
    )
    workloads: tuple[Workload, ...] = Field(
        min_length=1, description="the jobs and endpoints to place"
    )
    constraints: Constraints = Field(
        Constraints(), description="limits shared by all workloads"
    )
    overrides: tuple[Override, ...] = Field(
        (),
        description="price and preemption changes to the catalogs' offers (what-if by hand)",
    )
    calibration: str | None = Field(
        None,
        min_length=1,
        description="a fit from `planner calibrate` (path relative to this file): measured throughput, "
        "preemptions, capacity waits, checkpoint and restart times over the catalog's",
    )
    signals: str | None = Field(
        None,
        min_length=1,
        description="availability signals (path relative to this file, from `planner catalog signals`): spot "
        "interruption buckets, placement scores and stock, mapped to the spot model",
    )
    purchase_options: Annotated[
        tuple[PurchaseOption, ...], AfterValidator(check_unique)
    ] = Field(
        (),
        description="commitments (reserved), capacity blocks and flex-start requests that may be bought, "
        "each on a catalog offer, planned beside its on-demand and spot prices",
    )

    @model_validator(mode="after")
    def _placement_scores_read(self) -> Scenario:
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
