"""Azure's prices: the Retail Prices API (no account needed) read into offer rows.

Split from ``refresh`` so that each provider's price API, its filters and its quirks, sits in
a module of its own; the shared HTTP, joining to the shipped facts and writing stay there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from planner.errors import PlannerError
from planner.load import refresh
from planner.load.offer_facts import join_tags, load_shipped_offers
from planner.load.skypilot import clean_prices
from planner.schema.catalog import Gpu

# ---------------------------------------------------------------- Azure

AZURE_PRICES_URL = "https://prices.azure.com/api/retail/prices"
# OData filter of the Retail Prices API (values are case-sensitive): VM pay-as-you-go meters
# of the N-series (every Azure GPU size is Standard_N*).  Linux/Windows and spot/low priority
# share this price type; they are told apart by productName / skuName below.
AZURE_FILTER = (
    "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
    "and startswith(armSkuName, 'Standard_N')"
)


def fetch_azure(
    session: Any = None, max_pages: int = 200, timeout: float = refresh.TIMEOUT_S
) -> Iterator[dict]:
    """Pages of the Azure Retail Prices API for GPU VM consumption prices (no account needed).

    Follows ``NextPageLink`` (the API answers in pages of at most 1,000 items), and only to
    prices.azure.com.  Raises PlannerError (one line) when offline, on an HTTP error, on a
    non-JSON answer, or after ``max_pages`` pages (rather than silently truncating).
    """
    session = refresh.session(session)
    url: str | None = AZURE_PRICES_URL
    params: dict | None = {"$filter": AZURE_FILTER}
    what = "the Azure Retail Prices API"
    for _ in range(max_pages):
        response = refresh.get(session, url, what, params=params, timeout=timeout)
        try:
            page = response.json()
        except ValueError:
            raise PlannerError(
                f"{what} answered something that is not JSON ({url.split('?')[0]})"
            ) from None
        if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
            raise PlannerError(
                f"{what} answered JSON without an 'Items' list ({url.split('?')[0]})"
            )
        yield page
        url, params = page.get("NextPageLink"), None
        if not url:
            return
        link = urlsplit(str(url))
        if (
            link.scheme != "https" or link.hostname != "prices.azure.com"
        ):  # it may say ':443'
            raise PlannerError(
                f"{what} sent a next-page link off prices.azure.com; refusing it: {refresh.one_line(url, 80)}"
            )
    raise PlannerError(
        f"{what} has more than {max_pages} pages for {AZURE_FILTER!r}; stopped (raise max_pages)"
    )


def _azure_family(sku: str) -> str:
    """`Standard_ND96asr_v4` -> `Standard_N`: Azure's size family letter (N = GPU sizes)."""
    m = re.match(r"Standard_[A-Za-z]", sku)
    return m.group(0) if m else sku


def _azure_kind(item: Mapping[str, Any]) -> str | None:
    """'on_demand', 'spot', or None for an item that is not a Linux pay-as-you-go hourly VM price."""
    if (
        item.get("serviceName") != "Virtual Machines"
        or item.get("type") != "Consumption"
    ):
        return None
    if (
        item.get("unitOfMeasure") != "1 Hour"
        or item.get("currencyCode", "USD") != "USD"
    ):
        return None
    if (
        item.get("isPrimaryMeterRegion") is False
        or float(item.get("tierMinimumUnits") or 0) > 0
    ):
        return None
    sku_name, meter = str(item.get("skuName", "")), str(item.get("meterName", ""))
    if (
        "Windows" in str(item.get("productName", ""))
        or "Low Priority" in sku_name
        or "Low Priority" in meter
    ):
        return None
    return "spot" if sku_name.endswith(" Spot") else "on_demand"


def azure_offers(
    pages: Iterable[dict],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Azure Retail Prices API pages -> offers (one row per region and size, shipped format).

    Keeps Linux consumption prices per hour of sizes in the shipped catalog's families
    (Standard_N*: NC, ND, NV...); Windows and Low Priority meters are skipped; a skuName ending
    " Spot" is the spot price.  Where a meter repeats, the latest effectiveStartDate wins
    (then the lower price).  Prices get the importer's rules (``clean_prices``: e.g. spot
    equal to on-demand is no spot).  GPU, counts, memory and links come from the shipped
    catalog; ``attrs["unknown_instance_types"]`` names the sizes of those families it lacks
    (dropped), ``attrs["dropped_rows"]`` counts their rows.
    """
    if shipped is None:
        shipped = load_shipped_offers("azure")
    families = {_azure_family(str(t)) for t in shipped["instance_type"]}
    best: dict[tuple[str, str, str], tuple[str, float]] = {}
    for page in pages:
        for item in page.get("Items") or []:
            sku = str(item.get("armSkuName") or "")
            kind = _azure_kind(item)
            if kind is None or _azure_family(sku) not in families:
                continue
            try:
                price = float(item.get("retailPrice", item.get("unitPrice")))
            except (TypeError, ValueError):
                continue
            key = (str(item.get("armRegionName")), sku, kind)
            start = str(item.get("effectiveStartDate") or "")
            old = best.get(key)
            if old is None or (start, -price) > (old[0], -old[1]):
                best[key] = (start, price)
    offers: dict[tuple[str, str], dict[str, float]] = {}
    for (region, sku, kind), (_, price) in best.items():
        offers.setdefault((region, sku), {})[kind] = price
    rows = []
    for (region, sku), found in sorted(offers.items()):
        od, spot, notes = clean_prices(
            found.get("on_demand", math.nan), found.get("spot", math.nan), "azure"
        )
        rows.append(
            {
                "provider": "azure",
                "region": region,
                "instance_type": sku,
                "vcpus": math.nan,
                "ram_gib": math.nan,
                "on_demand_usd_h": od,
                "spot_usd_h": spot,
                "defaults": "",
                "notes": join_tags(notes),
            }
        )
    return refresh.with_facts(
        pd.DataFrame(rows, columns=refresh.PRICE_COLUMNS), "azure", gpus, shipped
    )
