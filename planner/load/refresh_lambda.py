"""Lambda's prices: the Lambda Cloud API's instance types (an API key needed) read into offer rows.

``GET /api/v1/instance-types`` answers ``{"data": {NAME: {"instance_type": {"name",
"price_cents_per_hour", "specs": {"vcpus", "memory_gib", ...}, ...},
"regions_with_capacity_available": [{"name": REGION, ...}, ...]}}}``: one price per size for
every region, and the regions that have capacity right now (SkyPilot's and dstack's fetchers
read the same fields).  Names are already SkyPilot's (``gpu_1x_a10``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from planner.load import refresh
from planner.load.offer_facts import load_shipped_offers
from planner.schema.catalog import Gpu

LAMBDA_URL = "https://cloud.lambda.ai/api/v1/instance-types"
LAMBDA_KEY_ENV = "LAMBDA_API_KEY"
# where SkyPilot's `sky check` and fetcher keep the key: a line `api_key = KEY`
LAMBDA_KEY_FILE = ".lambda_cloud/lambda_keys"
CAPACITY_TAGS = ("capacity_available", "capacity_unavailable")


def fetch_lambda(
    session: Any = None, api_key: str | None = None, timeout: float = refresh.TIMEOUT_S
) -> dict:
    """The Lambda Cloud API's instance types (prices and regions with capacity now).

    The key is ``api_key``, else LAMBDA_API_KEY, else the ``api_key = ...`` line of
    ~/.lambda_cloud/lambda_keys; none is one line naming LAMBDA_API_KEY.
    """
    key = api_key or refresh.api_key(
        "Lambda Cloud API key",
        (LAMBDA_KEY_ENV,),
        LAMBDA_KEY_FILE,
        r"^\s*api_key\s*=\s*(\S+)",
    )
    what = "the Lambda Cloud API"
    return refresh.get_json(
        refresh.session(session),
        LAMBDA_URL,
        what,
        lambda a: isinstance(a, dict) and isinstance(a.get("data"), dict),
        "without a 'data' object",
        headers={"Authorization": f"Bearer {key}"},
        timeout=timeout,
        auth_hint=f"check {LAMBDA_KEY_ENV}",
    )


def lambda_offers(
    answer: Mapping[str, Any],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Lambda instance types -> offers: one row per size and region, the size's price in every
    region the shipped catalog lists it in and every region with capacity now; ``notes`` says
    ``capacity_available`` where the answer lists the region, else ``capacity_unavailable``.
    vCPUs and memory come from the answer, GPUs and links from the shipped catalog; sizes it
    lacks are dropped and named in ``attrs["unknown_instance_types"]``."""
    if shipped is None:
        shipped = load_shipped_offers("lambda")
    shipped_regions: dict[str, set[str]] = {}
    for region, name in zip(shipped["region"], shipped["instance_type"]):
        shipped_regions.setdefault(str(name), set()).add(str(region))
    rows, unknown = [], []
    for key, entry in sorted((answer.get("data") or {}).items()):
        if not isinstance(entry, Mapping):
            continue
        size = entry.get("instance_type") or {}
        name = str(size.get("name") or key)
        specs = size.get("specs") or {}
        try:
            usd = float(size.get("price_cents_per_hour")) / 100
        except (TypeError, ValueError):
            continue
        capacity = {
            str(r.get("name"))
            for r in entry.get("regions_with_capacity_available") or []
            if isinstance(r, Mapping) and r.get("name")
        }
        if name not in shipped_regions:
            unknown.append(name)
            continue
        for region in sorted(shipped_regions[name] | capacity):
            tag = CAPACITY_TAGS[0] if region in capacity else CAPACITY_TAGS[1]
            rows.append(
                refresh.price_row(
                    "lambda",
                    region,
                    name,
                    usd,
                    notes=[tag],
                    vcpus=specs.get("vcpus"),
                    ram_gib=specs.get("memory_gib"),
                )
            )
    return refresh.offers_frame(rows, "lambda", gpus, shipped, unknown=unknown)
