"""RunPod's prices: the GraphQL API's GPU types (secure cloud) read into offer rows.

One POST to ``https://api.runpod.io/graphql`` asks every ``gpuTypes`` entry for its
``displayName``, ``secureCloud``, ``securePrice`` and ``secureSpotPrice`` (USD per GPU-hour,
on-demand and spot) and, per GPU count of the shipped catalog, ``lowestPrice(input:
{gpuCount: N, secureCloud: true}) { stockStatus }`` (High, Medium, Low; null: none), under the
aliases ``c1``, ``c2``... -- the fields SkyPilot's fetch_runpod and dstack's gpuhunt read.  The
key (RUNPOD_API_KEY, else ~/.runpod/config.toml) goes in the ``api_key`` query parameter as
RunPod's GraphQL API takes it; these prices are public, so without one the query is sent
without it (as gpuhunt sends it).

Prices are not regional: each size is priced in the regions the shipped catalog lists it in
(tagged ``regions_from_shipped_catalog``).  Names follow SkyPilot: ``{N}x_{GPU}_SECURE`` with
the GPU named from ``displayName`` ("RTX A6000" -> RTXA6000, "H100 SXM" -> H100-SXM).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from planner.errors import PlannerError
from planner.load import refresh
from planner.load.offer_facts import load_shipped_offers
from planner.schema.catalog import Gpu

RUNPOD_URL = "https://api.runpod.io/graphql"
RUNPOD_KEY_ENV = "RUNPOD_API_KEY"
RUNPOD_KEY_FILE = (
    ".runpod/config.toml"  # runpodctl's and the runpod SDK's: api_key = "..."
)
RUNPOD_COUNTS = (1, 2, 4, 8)
# SkyPilot's renames, kept so names match its catalogs (and the shipped one)
RUNPOD_NAME_OVERRIDES = {
    "A100-PCIe": "A100-80GB",
    "A100-SXM": "A100-80GB-SXM",
    "H100-PCIe": "H100",
}
STOCK_TAGS = {"High": "stock_high", "Medium": "stock_medium", "Low": "stock_low"}


def runpod_query(counts: Iterable[int] = RUNPOD_COUNTS) -> str:
    """The GraphQL query: prices per GPU type and, per GPU count, the stock status."""
    stock = " ".join(
        f"c{n}: lowestPrice(input: {{gpuCount: {int(n)}, secureCloud: true}}) "
        "{ stockStatus }"
        for n in sorted(set(counts))
    )
    return (
        "query GpuTypes { gpuTypes { id displayName memoryInGb secureCloud "
        f"securePrice secureSpotPrice {stock} }} }}"
    )


def fetch_runpod(
    session: Any = None,
    api_key: str | None = None,
    counts: Iterable[int] = RUNPOD_COUNTS,
    timeout: float = refresh.TIMEOUT_S,
) -> dict:
    """RunPod's GPU types with prices and stock (one GraphQL POST).  GraphQL errors, which come
    with HTTP 200, are one line like HTTP errors."""
    key = api_key or refresh.api_key(
        "RunPod API key",
        (RUNPOD_KEY_ENV,),
        RUNPOD_KEY_FILE,
        r"^\s*api_key\s*=\s*[\"']?([^\"'\s]+)",
        required=False,
    )
    what = "the RunPod GraphQL API"
    response = refresh.post(
        refresh.session(session),
        RUNPOD_URL,
        what,
        json={"query": runpod_query(counts)},
        params={"api_key": key} if key else None,
        timeout=timeout,
        auth_hint=f"set {RUNPOD_KEY_ENV} to a valid key",
    )
    answer = refresh.json_of(response, what, RUNPOD_URL)
    if not isinstance(answer, dict):
        raise PlannerError(f"{what} answered JSON that is not an object ({RUNPOD_URL})")
    errors = answer.get("errors")
    if errors:
        first = errors[0] if isinstance(errors, list) and errors else errors
        message = first.get("message") if isinstance(first, Mapping) else first
        raise PlannerError(
            f"{what} answered an error: {refresh.one_line(message, 160)}"
        )
    gpu_types = (answer.get("data") or {}).get("gpuTypes")
    if not isinstance(gpu_types, list):
        raise PlannerError(f"{what} answered JSON without data.gpuTypes ({RUNPOD_URL})")
    return answer


def runpod_gpu_name(display_name: str) -> str:
    """RunPod's display name as SkyPilot's catalogs name the GPU ("RTX 4000 Ada" -> RTX4000-Ada)."""
    name = str(display_name).replace("RTX PRO ", "RTXPRO").replace("RTX ", "RTX")
    name = re.sub(r"\s+", "-", name.strip())
    return RUNPOD_NAME_OVERRIDES.get(name, name)


def _per_gpu(value: Any) -> float:
    try:
        usd = float(value)
    except (TypeError, ValueError):
        return math.nan
    return usd if usd > 0 else math.nan


def runpod_offers(
    answer: Mapping[str, Any],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """RunPod GPU types -> secure-cloud offers: N x ``securePrice`` on-demand and N x
    ``secureSpotPrice`` spot for each count N asked about, in every region the shipped catalog
    lists that size in; ``notes`` carries the count's stock (``stock_high``/``_medium``/``_low``,
    ``stock_none`` when RunPod reports none).  Sizes the shipped catalog lacks are counted in
    ``attrs["unknown_instance_types"]``."""
    if shipped is None:
        shipped = load_shipped_offers("runpod")
    regions_of: dict[str, set[str]] = {}
    for region, name in zip(shipped["region"], shipped["instance_type"]):
        regions_of.setdefault(str(name), set()).add(str(region))
    rows, unknown = [], []
    for gpu_type in (answer.get("data") or {}).get("gpuTypes") or []:
        if not isinstance(gpu_type, Mapping) or gpu_type.get("secureCloud") is False:
            continue
        base = runpod_gpu_name(gpu_type.get("displayName") or gpu_type.get("id") or "")
        on_demand = _per_gpu(gpu_type.get("securePrice"))
        spot = _per_gpu(gpu_type.get("secureSpotPrice"))
        if math.isnan(on_demand) and math.isnan(spot):
            continue
        for alias in sorted(k for k in gpu_type if re.fullmatch(r"c\d+", str(k))):
            count = int(alias[1:])
            name = f"{count}x_{base}_SECURE"
            if name not in regions_of:
                unknown.append(name)
                continue
            stock = (gpu_type.get(alias) or {}).get("stockStatus")
            tags = ["regions_from_shipped_catalog", STOCK_TAGS.get(stock, "stock_none")]
            for region in sorted(regions_of[name]):
                rows.append(
                    refresh.price_row(
                        "runpod",
                        region,
                        name,
                        round(count * on_demand, 6),
                        round(count * spot, 6),
                        notes=tags,
                    )
                )
    return refresh.offers_frame(rows, "runpod", gpus, shipped, unknown=unknown)
