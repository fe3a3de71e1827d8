"""Vast.ai's prices: the marketplace's offer search (no account needed) read into offer rows.

``POST https://console.vast.ai/api/v0/bundles/`` with a search (rentable, not rented machines)
answers ``{"offers": [...]}``, one machine each: ``num_gpus``, ``gpu_name`` ("RTX 4090",
"H100 SXM"), ``cpu_cores``, ``cpu_ram``, ``geolocation`` ("Florida, US"), ``dph_total`` (USD per
hour, with the default disk) -- the fields dstack's gpuhunt and SkyPilot's fetch_vast read.

A marketplace lists each machine at its owner's price, so an offer here is a GPU model and count
in one place, priced as SkyPilot prices it: the lower median of the machines listed (half of
them ask no more).  SkyPilot names it ``{N}x-{GPU}-{cpu}-{ram}``; the shipped catalog has one
such name per GPU model and count, and a machine joins it by model and count, whatever its CPU
and RAM.  A region joins the shipped one that adds the continent ("Florida, US, NA").  Spot
(interruptible) machines are bid for, with no price to read: none is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from planner.errors import PlannerError
from planner.load import refresh
from planner.load.offer_facts import load_shipped_offers
from planner.schema.catalog import Gpu

VAST_URL = "https://console.vast.ai/api/v0/bundles/"
# the search: machines one can rent now, with SkyPilot's floor on network and disk
VAST_SEARCH: dict[str, Any] = {
    "rentable": {"eq": True},
    "rented": {"eq": False},
    "num_gpus": {"gte": 1},
    "inet_down": {"gte": 100},
    "disk_space": {"gte": 80},
    "order": [["score", "desc"]],
    "limit": 5000,
}


def fetch_vast(
    session: Any = None,
    search: Mapping[str, Any] | None = None,
    timeout: float = refresh.TIMEOUT_S,
) -> dict:
    """Vast.ai's rentable machines (one POST of ``search``, default VAST_SEARCH)."""
    what = "the Vast.ai offer search"
    response = refresh.post(
        refresh.session(session),
        VAST_URL,
        what,
        json=dict(search or VAST_SEARCH),
        timeout=timeout,
    )
    answer = refresh.json_of(response, what, VAST_URL)
    if not isinstance(answer, dict) or not isinstance(answer.get("offers"), list):
        raise PlannerError(
            f"{what} answered JSON without an 'offers' list ({VAST_URL})"
        )
    return answer


def _lower_median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(len(ordered) / 2) - 1]


def vast_offers(
    answer: Mapping[str, Any],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Vast.ai machines -> offers: per shipped size (GPU model and count) and place, the lower
    median ``dph_total`` of the machines listed; ``notes`` keeps ``marketplace_offer`` and says
    how many machines were listed (``machines_listed_N``).  Models and counts the shipped catalog
    lacks are counted in ``attrs["unknown_instance_types"]``."""
    if shipped is None:
        shipped = load_shipped_offers("vast")
    size_of: dict[str, str] = {}
    for name in sorted(map(str, shipped["instance_type"]), reverse=True):
        size_of[name.rsplit("-", 2)[0]] = (
            name  # `1x-H100_SXM` -> `1x-H100_SXM-32-65536`
        )
    place_of: dict[str, str] = {}
    for region in map(str, shipped["region"]):
        place_of.setdefault(region.rsplit(", ", 1)[0], region)
    listed: dict[tuple[str, str], list[float]] = {}
    for offer in answer.get("offers") or []:
        if not isinstance(offer, Mapping) or not offer.get("geolocation"):
            continue
        price = offer.get("dph_total", (offer.get("search") or {}).get("totalHour"))
        try:
            usd, count = float(price), int(offer.get("num_gpus"))
        except (TypeError, ValueError):
            continue
        gpu = re.sub(r"\s", "_", str(offer.get("gpu_name") or ""))
        size = f"{count}x-{gpu}"
        name = size_of.get(
            size, f"{size}-{offer.get('cpu_cores')}-{offer.get('cpu_ram')}"
        )
        place = str(offer["geolocation"])
        if usd > 0:
            listed.setdefault((place_of.get(place, place), name), []).append(usd)
    rows = [
        refresh.price_row(
            "vast",
            region,
            name,
            round(_lower_median(prices), 6),
            notes=["marketplace_offer", f"machines_listed_{len(prices)}"],
        )
        for (region, name), prices in sorted(listed.items())
    ]
    return refresh.offers_frame(rows, "vast", gpus, shipped)
