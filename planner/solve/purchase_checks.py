"""A job on a purchase option (reserved, capacity_block, flex_start) against the scenario's option, restated from
the file on purpose (for `checker`): the option exists on that offer, its price, its terms, its billing, and a
block's nodes."""

from __future__ import annotations

import math

from planner.schema.purchase import CapacityBlock, FlexStart, Reserved

PURCHASE_MARKETS = ("reserved", "capacity_block", "flex_start")


def purchase_violations(
    scenario, a: dict, key: str, offer: dict, on_demand_mult: float, close
) -> tuple[list[str], float | None]:
    """(what breaks the option's rules, the price per node-hour it sets)."""
    record = a.get("purchase")
    if not record:
        return [f"market {a['market']} but no purchase record"], None
    option = next(
        (o for o in scenario.purchase_options if o.label == record.get("name")), None
    )
    if option is None:
        return [
            f"purchase {record.get('name')!r} is not one of the scenario's purchase_options"
        ], None
    out = []
    if option.offer != key:
        out.append(f"purchase {option.label} is on {option.offer}, not {key}")
    if option.kind != a["market"]:
        out.append(
            f"purchase {option.label} is {option.kind}, but the market is {a['market']}"
        )
    od = offer.get("on_demand_usd_h")
    od = None if od is None or od != od else float(od) * on_demand_mult
    if isinstance(option, Reserved):
        price = option.price_per_node_h + option.upfront_per_node_usd / option.term
        want = {"term_h": option.term, "renewable": True, "start_h": 0.0, "wait_h": 0.0}
    elif isinstance(option, CapacityBlock):
        price = option.fee_usd / (option.nodes * option.duration)
        want = {
            "term_h": option.duration,
            "renewable": False,
            "start_h": option.starts_in,
            "wait_h": 0.0,
            "run_cap_h": option.duration - option.end_margin,
            "overrun_price_per_node_h": od if od is not None else price,
        }
        if int(a["nodes"]) != option.nodes:
            out.append(
                f"{a['nodes']} nodes on capacity block {option.label} of {option.nodes}"
            )
    else:
        assert isinstance(option, FlexStart)
        price = (
            option.price_per_node_h
            if option.price_per_node_h is not None
            else (od or math.nan) * (1 - float(option.discount))
        )
        want = {
            "term_h": None,
            "start_h": 0.0,
            "wait_h": option.wait,
            "wait_cv": option.wait_cv,
            "run_cap_h": option.max_run,
        }
    for field, value in want.items():
        got = record.get(field)
        same = (
            got == value
            if value is None or got is None or isinstance(value, bool)
            else close(float(got), float(value))
        )
        if not same:
            out.append(f"purchase.{field} is {got!r}, the option says {value!r}")
    inputs = a["inputs"]
    if "term_h" in want and want["term_h"] is not None:
        for field in ("billing_granularity_h", "billing_minimum_h"):
            if not close(float(inputs[field]), want["term_h"]):
                out.append(
                    f"inputs.{field} is {inputs[field]}, a term of {want['term_h']:g} h"
                )
    return out, price


def option_caps(scenario, offers: dict) -> dict[str, int | None]:
    """Nodes each purchase option may hold at once (None: no limit): a block's, a commitment's most, else the
    offer's `max_nodes`."""
    caps = {}
    for option in scenario.purchase_options:
        limit = offers.get(option.offer, {}).get("max_nodes")
        limit = None if limit is None or limit != limit else int(limit)
        if isinstance(option, CapacityBlock):
            limit = option.nodes if limit is None else min(limit, option.nodes)
        elif isinstance(option, Reserved) and option.max_nodes is not None:
            limit = option.max_nodes if limit is None else min(limit, option.max_nodes)
        caps[option.label] = limit
    return caps
