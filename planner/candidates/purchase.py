"""A workload's candidates on the scenario's purchase options (`purchase_options:`, cost-model §13).

Each option is its offer as a one-row catalog at the option's rate, priced by the same generation as on demand
(every node count and storage option, exactly), then repriced with the option's terms: billing by the term
(reserved, capacity_block) and the start a fixed delay or a queue's wait away (capacity_block, flex_start), which
P(deadline) reads (`economics.purchase`). Each option is its own offer to the solver (`offer_key`
`provider/region/instance_type@name`), so its node limit is its own: a block's nodes, a commitment's most.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from planner.candidates.cache import CandidateCache
from planner.candidates.limits import Limits, to_cents
from planner.economics import costmodel
from planner.economics.inputs import cost_inputs, estimate_error
from planner.economics.purchase import Terms
from planner.load.catalog import Catalog, offer_mask
from planner.schema.purchase import CapacityBlock, FlexStart, Reserved
from planner.schema.scenario import Scenario
from planner.schema.workload import Workload

PRICED_PARTS = (
    "compute",
    "checkpointing",
    "startup",
    "preemption_rework",
    "rounding_waste",
)


def option_terms(option, offer) -> tuple[float, Terms, float]:
    """(rate per node-hour, terms, node cap) of `option` on its catalog `offer` row."""
    on_demand = float(offer["on_demand_usd_h"])
    if isinstance(option, Reserved):
        return (
            option.rate_per_node_h,
            Terms("reserved", term_h=option.term, renewable=True),
            option.max_nodes or math.inf,
        )
    if isinstance(option, CapacityBlock):
        rate = option.fee_usd / (option.nodes * option.duration)
        return (
            rate,
            Terms(
                "capacity_block",
                term_h=option.duration,
                start_h=option.starts_in,
                run_cap_h=option.usable_h,
                overrun_usd_per_node_h=on_demand if on_demand == on_demand else rate,
            ),
            option.nodes,
        )
    assert isinstance(option, FlexStart)
    rate = (
        option.price_per_node_h
        if option.price_per_node_h is not None
        else on_demand * (1 - float(option.discount))
    )
    return (
        float(rate),
        Terms(
            "flex_start",
            wait_h=option.wait,
            wait_cv=option.wait_cv,
            run_cap_h=option.max_run,
        ),
        math.inf,
    )


def purchase_records(
    workload: Workload,
    catalog: Catalog,
    scenario: Scenario,
    offers: pd.DataFrame,
    limits: Limits,
    cache: CandidateCache,
) -> list[dict]:
    """The workload's candidates on every purchase option it may use that holds its deadline promise."""
    from planner.candidates.generate import candidate_records

    out: list[dict] = []
    for option in scenario.purchase_options:
        if not workload.allows_market(option.kind):
            continue
        frame = offers[offers["key"] == option.offer]
        if (
            frame.empty
            or not offer_mask(catalog, workload.allow, workload.forbid, frame).all()
        ):
            continue
        offer = frame.iloc[0]
        rate, terms, cap = option_terms(option, offer)
        g = int(offer["gpus_per_node"])
        unpinned = workload.model_copy(
            update={
                "time_budget": None,  # P(deadline) is taken below, with the option's start
                "allow": workload.allow.model_copy(update={"markets": ()}),
                "forbid": workload.forbid.model_copy(update={"markets": ()}),
            }
        )
        if isinstance(option, CapacityBlock):  # one job on all the block's nodes
            gpus = option.nodes * g
            if not workload.gpus.min <= gpus <= workload.gpus.max:
                continue
            unpinned = unpinned.model_copy(
                update={
                    "gpus": workload.gpus.model_copy(update={"min": gpus, "max": gpus})
                }
            )
        single = frame.assign(
            spot_usd_h=np.nan,
            on_demand_usd_h=rate,
            max_nodes=_finite(min(cap, _max_nodes(offer))),
            **_billing(terms, offer),
        )
        records, _, _ = candidate_records(
            unpinned, catalog, scenario, single, limits, exhaustive=True, cache=cache
        )
        for record in records:
            priced = _repriced(
                record, workload, scenario, terms, option, single.iloc[0]
            )
            if priced is not None:
                out.append(priced)
    return out


def _max_nodes(offer) -> float:
    value = offer.get("max_nodes")
    return math.inf if value is None or pd.isna(value) else float(value)


def _finite(nodes: float) -> float:
    return nodes if math.isfinite(nodes) else math.nan


def _billing(terms: Terms, offer) -> dict:
    """A term-billed option's billing as the catalog states it (the term), so generation's checkpoint search and
    bounds see coarse billing; flex-start keeps the offer's."""
    if not terms.by_term:
        return {}
    return {"billing_granularity_h": terms.term_h, "billing_minimum_h": terms.term_h}


def _repriced(
    record: dict, workload: Workload, scenario: Scenario, terms: Terms, option, offer
) -> dict | None:
    """The on-demand record repriced with the option's terms, or None where it misses the deadline promise."""
    defaults = scenario.defaults
    inputs = cost_inputs(
        workload,
        work_h=record["work_h"],
        nodes=int(record["nodes"]),
        gpus_per_node=int(record["gpus_per_node"]),
        spot_rate_per_node_h=0.0,
        price=float(record["price_per_node_h"]),
        granularity_h=float(record["billing_granularity_h"]),
        minimum_h=float(record["billing_minimum_h"]),
        hw_rate=defaults.hardware_failure_per_gpu_h,
        checkpoint_interval_h=record["checkpoint_interval_h"],
        checkpoint_write_h=record["checkpoint_write_h"],
        restart_h=record["restart_h"],
        storage_usd_per_h=record["storage_usd_per_h"],
        egress_usd=record["usd_egress"],
        error=estimate_error(workload, defaults),
    )
    inputs = dataclasses.replace(inputs, terms=terms)
    unit = costmodel.expected(inputs)
    if unit.p_deadline < defaults.deadline_confidence - 1e-12:
        return None
    cid = record["cid"].replace("|on_demand|", f"|{option.kind}@{option.label}|")
    out = dict(record)
    out.update(
        cid=cid,
        offer_key=f"{option.offer}@{option.label}",
        market=option.kind,
        purchase=option.label,
        wall_h=unit.wall_h,
        failures=unit.failures,
        billed_node_h=unit.billed_node_h,
        rounding_waste_node_h=unit.rounding_waste_node_h,
        p_deadline=unit.p_deadline,
        p_deadline_on_estimate=unit.p_deadline_on_estimate,
        cost_usd=unit.cost_usd,
        cost_cents=to_cents(unit.cost_usd),
        **{f"usd_{k}": unit.breakdown[k] for k in (*PRICED_PARTS, "storage", "egress")},
    )
    return out


def purchase_json(scenario: Scenario, offers: pd.DataFrame, row) -> dict | None:
    """A planned job's `purchase` record (the JSON contract's): the option, its terms, and what to buy when."""
    if not getattr(row, "purchase", ""):
        return None
    option = next(o for o in scenario.purchase_options if o.label == row.purchase)
    offer = offers[offers["key"] == option.offer].iloc[0]
    rate, terms, _ = option_terms(option, offer)
    nodes = int(row.nodes)
    what = f"{nodes} x {option.offer}"
    upfront = None
    if isinstance(option, Reserved):
        upfront = option.upfront_per_node_usd * nodes or None
        buy = (
            f"commit {what} for terms of {option.term:g} h at ${rate:,.4g}/node-h "
            f"when the job starts, renewed while it runs"
        )
    elif isinstance(option, CapacityBlock):
        upfront = option.fee_usd
        buy = (
            f"buy the capacity block {what} now, for {option.duration:g} h from "
            f"+{option.starts_in:g} h, ${option.fee_usd:,.2f} up front"
        )
    else:
        buy = (
            f"queue a flex-start request for {what} now (mean wait {option.wait:g} h), "
            f"all nodes at once, at ${rate:,.4g}/node-h"
        )
    return {
        "name": option.label,
        "kind": option.kind,
        "offer": option.offer,
        "buy": buy,
        "term_h": terms.term_h if terms.by_term else None,
        "renewable": terms.renewable,
        "start_h": terms.start_h,
        "wait_h": terms.wait_h,
        "wait_cv": terms.wait_cv,
        "run_cap_h": terms.run_cap_h if math.isfinite(terms.run_cap_h) else None,
        "overrun_price_per_node_h": terms.overrun_usd_per_node_h or None,
        "upfront_usd": upfront,
    }
