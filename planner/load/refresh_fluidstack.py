"""Fluidstack's prices: the platform API's available configurations (an API key needed) read
into offer rows.

``GET https://platform.fluidstack.io/list_available_configurations`` (header ``api-key``)
answers a list of plans: ``gpu_type`` (``A100_PCIE_80GB``), ``gpu_counts`` ([1, 2, 4, 8]),
``price_per_gpu_hr`` (USD) and ``regions`` -- as SkyPilot's fetch_fluidstack reads it, naming
each size ``{gpu_type}::{count}``.  The key is FLUIDSTACK_API_KEY, else the file
~/.fluidstack/api_key (where SkyPilot keeps it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from planner.load import refresh
from planner.load.offer_facts import load_shipped_offers
from planner.schema.catalog import Gpu

FLUIDSTACK_URL = "https://platform.fluidstack.io/list_available_configurations"
FLUIDSTACK_KEY_ENV = "FLUIDSTACK_API_KEY"
FLUIDSTACK_KEY_FILE = ".fluidstack/api_key"


def fetch_fluidstack(
    session: Any = None, api_key: str | None = None, timeout: float = refresh.TIMEOUT_S
) -> list:
    """Fluidstack's plans with their prices and regions (one GET with the API key)."""
    key = api_key or refresh.api_key(
        "Fluidstack API key", (FLUIDSTACK_KEY_ENV,), FLUIDSTACK_KEY_FILE
    )
    what = "the Fluidstack API"
    return refresh.get_json(
        refresh.session(session),
        FLUIDSTACK_URL,
        what,
        lambda a: isinstance(a, list),
        "that is not a list of plans",
        headers={"api-key": key},
        timeout=timeout,
        auth_hint=f"check {FLUIDSTACK_KEY_ENV}",
    )


def fluidstack_offers(
    plans: list,
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Fluidstack plans -> offers: count x ``price_per_gpu_hr`` for each count and region of a
    plan; sizes the shipped catalog lacks are counted in ``attrs["unknown_instance_types"]``."""
    if shipped is None:
        shipped = load_shipped_offers("fluidstack")
    rows = []
    for plan in plans:
        if not isinstance(plan, Mapping):
            continue
        try:
            per_gpu = float(plan.get("price_per_gpu_hr"))
        except (TypeError, ValueError):
            continue
        for count in plan.get("gpu_counts") or []:
            name = f"{plan.get('gpu_type')}::{count}"
            rows += [
                refresh.price_row(
                    "fluidstack", region, name, round(int(count) * per_gpu, 6)
                )
                for region in sorted(map(str, plan.get("regions") or []))
            ]
    return refresh.offers_frame(rows, "fluidstack", gpus, shipped)
