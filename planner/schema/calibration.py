"""A calibration: what the runs that happened say about the planner's assumptions (`planner calibrate` writes
it, a scenario names it with `calibration: ./fit.yaml`). Each entry replaces one assumption of the catalog for
the offers, GPUs or storage it names, and says how many runs it rests on and how sure it is.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field, model_validator

from planner.schema.fields import MAX_WAIT_CV, Strict

Factor = Annotated[float, Field(gt=0, le=100)]
Count = Annotated[int, Field(ge=0, le=10**9)]


class Interval(Strict):
    """A two-sided interval of the fitted value at `level` (0.9: the true value lies in it 9 times in 10)."""

    low: float = Field(ge=0)
    high: float = Field(ge=0)
    level: float = Field(0.9, gt=0, lt=1)

    @model_validator(mode="after")
    def _ordered(self) -> Interval:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) is above high ({self.high})")
        return self


class Efficiency(Strict):
    """Measured throughput over the planner's estimate for training on one GPU with one recipe: the estimated
    time of every layout of that recipe on that GPU is divided by `factor`."""

    gpu: str = Field(min_length=1, description="the catalog's GPU name, e.g. H100-SXM")
    recipe: str = Field(
        min_length=1,
        description="the layout's recipe as the plan names it (megatron, fsdp, unsloth, ...)",
    )
    factor: Factor = Field(description="measured throughput / estimated throughput")
    runs: Count = Field(0, description="runs it was fitted from")
    interval: Interval | None = Field(None, description="the factor's interval")
    sigma: float | None = Field(
        None, ge=0, description="run-to-run spread of ln(measured/estimated)"
    )


class Preemption(Strict):
    """Measured spot preemptions and capacity waits of one instance type at one provider (every region)."""

    provider: str = Field(min_length=1)
    instance_type: str = Field(min_length=1)
    rate_per_node_h: float | None = Field(
        None, ge=0, le=100, description="preemptions per node-hour on spot"
    )
    events: Count = Field(0, description="preemption events seen")
    node_h: float = Field(
        0.0, ge=0, description="spot node-hours the runs were exposed"
    )
    interval: Interval | None = Field(None, description="the rate's interval")
    capacity_wait_h: float | None = Field(
        None, ge=0, le=10_000, description="mean hours until spot capacity came back"
    )
    capacity_wait_cv: float | None = Field(
        None, ge=1, le=MAX_WAIT_CV, description="that wait's coefficient of variation"
    )
    waits: Count = Field(0, description="waits measured")


class StorageTimes(Strict):
    """Measured checkpoint and restart times on one storage option, over the planner's."""

    storage: str = Field(min_length=1, description="the storage option's name")
    checkpoint_factor: Factor | None = Field(
        None, description="measured checkpoint write time / the planner's"
    )
    restart_factor: Factor | None = Field(
        None, description="measured restart time / the planner's"
    )
    runs: Count = 0


class Calibration(Strict):
    """`planner calibrate`'s fit, as a scenario reads it."""

    fitted_on: str | None = Field(None, description="when it was fitted (ISO date)")
    runs: Count = Field(0, description="run records it was fitted from")
    efficiency: tuple[Efficiency, ...] = ()
    preemption: tuple[Preemption, ...] = ()
    storage: tuple[StorageTimes, ...] = ()

    def efficiency_factor(self, gpu: str, recipe: str) -> float:
        """The measured factor of `recipe` on `gpu`; for a recipe not measured there, the GPU's over the recipes
        that were (a geometric mean weighted by runs: the GPU's own evidence); 1 for a GPU never measured."""
        entries = [e for e in self.efficiency if e.gpu == gpu]
        for entry in entries:
            if entry.recipe == recipe:
                return entry.factor
        return self.gpu_factor(gpu)

    def gpu_factor(self, gpu: str) -> float:
        """`gpu`'s factor pooled over its measured recipes (1 where none was)."""
        entries = [e for e in self.efficiency if e.gpu == gpu]
        if not entries:
            return 1.0
        weights = [max(e.runs, 1) for e in entries]
        return math.exp(
            math.fsum(w * math.log(e.factor) for w, e in zip(weights, entries))
            / sum(weights)
        )

    def storage_factors(self, name: str) -> tuple[float, float]:
        """(checkpoint, restart) time factors of a storage option (1 where not measured)."""
        for entry in self.storage:
            if entry.storage == name:
                return entry.checkpoint_factor or 1.0, entry.restart_factor or 1.0
        return 1.0, 1.0
