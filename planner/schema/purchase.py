"""A scenario's purchase options besides the catalogs' on-demand and spot prices (`purchase_options:`): a
commitment (`reserved`), an AWS-style capacity block, and a queued flex-start. Each names one offer of the
catalogs; its prices are the user's (a quote, a price list, a provider's API), never the planner's guess.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from planner.schema.fields import (
    MAX_WAIT_CV,
    USD,
    Hours,
    HoursOrZero,
    Name,
    Strict,
)
from planner.schema.workload import MAX_GPUS

FLEX_START_MAX_RUN_H = 168.0
"""GCP's flex-start VMs run for at most seven days (cloud.google.com/compute/docs/instances/about-flex-start-vms)."""
CAPACITY_BLOCK_END_MARGIN_H = 0.5
"""AWS begins terminating a Capacity Block's instances 30 minutes before it ends
(docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html)."""

Nodes = Annotated[int, Field(gt=0, le=MAX_GPUS)]


class _Option(Strict):
    name: Name | None = Field(
        None, description="how plans and reports name it (default: kind:offer)"
    )
    offer: str = Field(description="provider/region/instance_type of a catalog offer")

    @property
    def label(self) -> str:
        return self.name or f"{self.kind}:{self.offer}"  # type: ignore[attr-defined]


class Reserved(_Option):
    """A commitment: each node paid for whole terms from the job's start (or all day for an endpoint), used
    or not, at a lower rate; never preempted."""

    kind: Literal["reserved"]
    term: Hours = Field(
        description="the commitment's length: 1w, 30d, 90d, 8760h (a job longer than a term renews it)"
    )
    price_per_node_h: USD = Field(
        description="hourly part of the committed price per node"
    )
    upfront_per_node_usd: Annotated[float, Field(ge=0, le=1e12)] = Field(
        0.0,
        description="upfront part per node for one term (spread over the term's hours)",
    )
    max_nodes: Nodes | None = Field(
        None, description="nodes that may be committed (default: the offer's limit)"
    )

    @property
    def rate_per_node_h(self) -> float:
        """Upfront and hourly parts as one rate over the term's hours."""
        return self.price_per_node_h + self.upfront_per_node_usd / self.term


class CapacityBlock(_Option):
    """Nodes booked ahead for a fixed window, paid up front (AWS EC2 Capacity Blocks for ML): there from its
    start, gone at its end; one job runs on all its nodes."""

    kind: Literal["capacity_block"]
    nodes: Nodes = Field(description="instances in the block")
    starts_in: HoursOrZero = Field(
        description="hours from when the plan starts until the block does (0: now)"
    )
    duration: Hours = Field(description="the block's length (AWS: 1 to 182 days)")
    price_usd: USD | None = Field(
        None, description="the upfront fee for the whole block"
    )
    price_per_node_h: USD | None = Field(
        None,
        description="or its effective hourly rate per instance, as AWS's pricing page lists it",
    )
    end_margin: HoursOrZero = Field(
        CAPACITY_BLOCK_END_MARGIN_H,
        description="hours before the end at which instances are stopped (AWS: 30 minutes)",
    )

    @model_validator(mode="after")
    def _priced_once(self) -> CapacityBlock:
        if (self.price_usd is None) == (self.price_per_node_h is None):
            raise ValueError(
                "give the block's price_usd (its fee) or price_per_node_h, one of them"
            )
        if self.end_margin >= self.duration:
            raise ValueError(
                f"end_margin ({self.end_margin:g} h) leaves nothing of a {self.duration:g} h block"
            )
        return self

    @property
    def fee_usd(self) -> float:
        if self.price_usd is not None:
            return self.price_usd
        return float(self.price_per_node_h) * self.nodes * self.duration

    @property
    def usable_h(self) -> float:
        return self.duration - self.end_margin


class FlexStart(_Option):
    """A queued request (GCP Dynamic Workload Scheduler flex-start): it waits for capacity, then every node starts
    at once, at a discount, for a limited run; never preempted."""

    kind: Literal["flex_start"]
    price_per_node_h: USD | None = Field(
        None, description="the flex-start price per node-hour"
    )
    discount: Annotated[float, Field(gt=0, lt=1)] | None = Field(
        None,
        description="or its discount off the offer's on-demand price (0.4: 40 % off)",
    )
    wait: HoursOrZero = Field(
        description="mean hours the request waits in the queue before its nodes start"
    )
    wait_cv: Annotated[float, Field(ge=1, le=MAX_WAIT_CV)] = Field(
        1.0, description="the wait's coefficient of variation (1: exponential)"
    )
    max_run: Hours = Field(
        FLEX_START_MAX_RUN_H, description="longest a run may last (GCP: seven days)"
    )

    @model_validator(mode="after")
    def _priced_once(self) -> FlexStart:
        if (self.price_per_node_h is None) == (self.discount is None):
            raise ValueError("give price_per_node_h or discount, one of them")
        return self


def _kind(value) -> str | None:
    return (
        value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    )


PurchaseOption = Annotated[
    Annotated[Reserved, Tag("reserved")]
    | Annotated[CapacityBlock, Tag("capacity_block")]
    | Annotated[FlexStart, Tag("flex_start")],
    Discriminator(
        _kind,
        custom_error_type="purchase_kind",
        custom_error_message="kind must be reserved, capacity_block or flex_start",
    ),
]


def check_unique(options: tuple) -> tuple:
    seen: set[str] = set()
    for option in options:
        if option.label in seen:
            raise ValueError(f"two purchase options are named {option.label!r}")
        seen.add(option.label)
    return options
