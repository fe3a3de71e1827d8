"""Google Cloud's prices: the Cloud Billing Catalog API's Compute Engine SKUs (an API key needed)
read into offer rows.

``GET https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus`` lists every Compute
Engine SKU in pages of up to 5,000 (``skus``, ``nextPageToken``): a description ("Nvidia Tesla
T4 GPU running in Americas", "N1 Predefined Instance Core running in Americas"), a category
(``resourceFamily`` Compute, ``resourceGroup`` GPU/CPU/RAM/N1Standard, ``usageType`` OnDemand
or Preemptible = spot), the ``serviceRegions`` it is sold in and its ``pricingInfo`` (a unit
price in ``units`` + ``nanos``).  A machine costs its vCPUs x the series' core price + its GiB x
the series' RAM price + its GPUs x the GPU price, as SkyPilot's fetch_gcp and dstack's gpuhunt
compute it; A4's B200s are sold as whole "(1 gpu slice)" SKUs that include the host.

The SKUs name no machine types, so the offers priced are those of the shipped catalog (same
region, same size: vCPUs and RAM from there); a size whose parts have no SKU in a region is
left out and counted (``attrs["unpriced_offers"]``), never priced from the shipped file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pandas as pd

from planner.errors import PlannerError
from planner.load import refresh
from planner.load.offer_facts import load_shipped_offers, missing
from planner.schema.catalog import Gpu

GCP_SKUS_URL = "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"
GCP_KEY_ENV = "GOOGLE_API_KEY"
PAGE_SIZE = 5000
# the machine series' SKU description stem (lower case), by instance type prefix
GCP_SERIES = {
    "a2": "a2 instance",
    "a3-megagpu": "a3plus instance",
    "a3-ultragpu": "a3ultra instance",
    "a3": "a3 instance",
    "g2": "g2 instance",
    "n1": "n1 predefined instance",
}
# the GPU SKU description stem (lower case, without "nvidia "/"tesla "), by catalog GPU name
GCP_GPU_SKUS = {
    "A100-40GB": ("a100",),
    "A100-80GB": ("a100 80gb",),
    "H100-SXM": ("h100 80gb",),
    "H200": ("h200 141gb",),
    "L4": ("l4",),
    "P4": ("p4",),
    "P100": ("p100",),
    "T4": ("t4",),
    "V100-16GB": ("v100",),
}
# a3-megagpu's H100s have SKUs of their own, named more than one way
GCP_MEGA_H100 = ("h100 80gb mega", "h100 mega 80gb", "h100 80gb plus")
GCP_SLICE_SKUS = {"B200": "b200 (1 gpu slice)"}
_SKIP = (
    "custom",
    "premium",
    "reserved",
    "sole tenancy",
    "commitment",
    "dws",
    "calendar",
)


def fetch_gcp(
    session: Any = None,
    api_key: str | None = None,
    max_pages: int = 50,
    timeout: float = refresh.TIMEOUT_S,
) -> Iterator[dict]:
    """Pages of Compute Engine SKUs from the Cloud Billing Catalog API (public prices; the key is
    ``api_key``, else GOOGLE_API_KEY, sent in the X-Goog-Api-Key header, never in the URL).

    Follows ``nextPageToken``; raises PlannerError (one line) when offline, on an HTTP error, on
    an answer without a ``skus`` list, or after ``max_pages`` pages.
    """
    key = api_key or refresh.api_key(
        "Google Cloud API key (Cloud Billing Catalog API)", (GCP_KEY_ENV,)
    )
    session = refresh.session(session)
    what = "the Cloud Billing Catalog API"
    params: dict[str, Any] = {"pageSize": PAGE_SIZE, "currencyCode": "USD"}
    for _ in range(max_pages):
        response = refresh.get(
            session,
            GCP_SKUS_URL,
            what,
            params=params,
            headers={"X-Goog-Api-Key": key},
            timeout=timeout,
            auth_hint=f"check {GCP_KEY_ENV} (an API key with the Cloud Billing API enabled)",
        )
        page = refresh.json_of(response, what, GCP_SKUS_URL)
        if not isinstance(page, dict) or not isinstance(page.get("skus"), list):
            raise PlannerError(
                f"{what} answered JSON without a 'skus' list ({GCP_SKUS_URL})"
            )
        yield page
        token = page.get("nextPageToken")
        if not token:
            return
        params = {**params, "pageToken": str(token)}
    raise PlannerError(
        f"{what} has more than {max_pages} pages of SKUs; stopped (raise max_pages)"
    )


def _unit_price(sku: Mapping[str, Any]) -> float:
    """USD per unit of the SKU's first tier (the one starting at no usage); NaN if none."""
    for info in sku.get("pricingInfo") or []:
        rates = (info.get("pricingExpression") or {}).get("tieredRates") or []
        for rate in rates:
            if float(rate.get("startUsageAmount") or 0) > 0:
                continue
            price = rate.get("unitPrice") or {}
            if price.get("currencyCode", "USD") != "USD":
                return math.nan
            try:
                return (
                    float(price.get("units") or 0)
                    + float(price.get("nanos") or 0) / 1e9
                )
            except (TypeError, ValueError):
                return math.nan
    return math.nan


def _sku_key(sku: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(description stem, 'core'|'ram'|'gpu'|'slice', 'on_demand'|'spot') of a wanted SKU."""
    category = sku.get("category") or {}
    usage = category.get("usageType")
    if category.get("resourceFamily") != "Compute" or usage not in (
        "OnDemand",
        "Preemptible",
    ):
        return None
    description = " ".join(str(sku.get("description") or "").lower().split())
    if any(word in description for word in _SKIP):
        return None
    kind = "spot" if usage == "Preemptible" else "on_demand"
    description = re.sub(r"^(spot )?preemptible ", "", description)
    slice_ = re.search(r"nvidia (\S+ \(1 gpu slice\))", description)
    if slice_:
        return slice_.group(1), "slice", kind
    m = re.match(r"(.+?) (core|ram|gpu)\b", description)
    if not m:
        return None
    stem = (
        re.sub(r"^(nvidia )?(tesla )?", "", m.group(1))
        if m.group(2) == "gpu"
        else m.group(1)
    )
    return stem, m.group(2), kind


def gcp_sku_prices(
    pages: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str, str, str], float]:
    """(stem, resource, kind, region) -> USD per hour (per vCPU, GiB, GPU or slice); where SKUs
    repeat a key, the lower price."""
    prices: dict[tuple[str, str, str, str], float] = {}
    for page in pages:
        for sku in page.get("skus") or []:
            key = _sku_key(sku)
            usd = _unit_price(sku) if key else math.nan
            if not usd > 0:
                continue
            for region in sku.get("serviceRegions") or []:
                full = (*key, str(region))
                prices[full] = min(usd, prices.get(full, math.inf))
    return prices


def _series(instance_type: str) -> str | None:
    for prefix in sorted(GCP_SERIES, key=len, reverse=True):
        if instance_type.startswith(prefix + "-"):
            return GCP_SERIES[prefix]
    return None


def _machine_price(prices: Mapping, row: Mapping[str, Any], kind: str) -> float:
    """One shipped offer's price from the SKUs of its region (NaN when a part has none)."""
    region, name, gpu = str(row["region"]), str(row["instance_type"]), str(row["gpu"])
    count = float(row["gpus_per_node"])
    if gpu in GCP_SLICE_SKUS:
        return count * prices.get(
            (GCP_SLICE_SKUS[gpu], "slice", kind, region), math.nan
        )
    series = _series(name)
    stems = (
        GCP_MEGA_H100 if name.startswith("a3-megagpu-") else GCP_GPU_SKUS.get(gpu, ())
    )
    gpu_usd = min(
        (prices.get((s, "gpu", kind, region), math.inf) for s in stems),
        default=math.inf,
    )
    if series is None or missing(row.get("vcpus")) or missing(row.get("ram_gib")):
        return math.nan
    core = prices.get((series, "core", kind, region), math.nan)
    ram = prices.get((series, "ram", kind, region), math.nan)
    total = float(row["vcpus"]) * core + float(row["ram_gib"]) * ram + count * gpu_usd
    return round(total, 6) if math.isfinite(total) else math.nan


def gcp_offers(
    pages: Iterable[Mapping[str, Any]],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Compute Engine SKU pages -> the shipped GCP offers priced anew: on-demand from OnDemand
    SKUs, spot from Preemptible ones, per region.  Facts (GPUs, vCPUs, RAM, links) are the
    shipped row's; ``attrs["unpriced_offers"]`` names the offers left out for want of a SKU."""
    if shipped is None:
        shipped = load_shipped_offers("gcp")
    prices = gcp_sku_prices(pages)
    rows, unpriced = [], []
    for row in shipped.to_dict("records"):
        on_demand = _machine_price(prices, row, "on_demand")
        spot = _machine_price(prices, row, "spot")
        if math.isnan(on_demand) and math.isnan(spot):
            unpriced.append(f"{row['region']}/{row['instance_type']}")
            continue
        rows.append(
            refresh.price_row(
                "gcp", row["region"], row["instance_type"], on_demand, spot
            )
        )
    return refresh.offers_frame(rows, "gcp", gpus, shipped, unpriced=unpriced)
