"""Hyperbolic's prices: the catalog endpoint Hyperbolic serves for SkyPilot (an API key needed)
read into offer rows.

``GET https://api.dev-hyperbolic.xyz/v2/skypilot/catalog`` answers ``{"vms": [...]}`` with
SkyPilot's catalog columns per VM: ``InstanceType`` (``1x-H100-75-722``), ``Region``,
``Price`` and ``SpotPrice`` (USD per hour), ``vCPUs``, ``MemoryGiB``, ``AcceleratorName`` and
``AcceleratorCount`` -- as SkyPilot's fetch_hyperbolic reads it.  The key is HYPERBOLIC_API_KEY,
else the file ~/.hyperbolic/api_key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from planner.load import refresh
from planner.load.offer_facts import load_shipped_offers
from planner.schema.catalog import Gpu

HYPERBOLIC_URL = "https://api.dev-hyperbolic.xyz/v2/skypilot/catalog"
HYPERBOLIC_KEY_ENV = "HYPERBOLIC_API_KEY"
HYPERBOLIC_KEY_FILE = ".hyperbolic/api_key"


def fetch_hyperbolic(
    session: Any = None, api_key: str | None = None, timeout: float = refresh.TIMEOUT_S
) -> dict:
    """Hyperbolic's VMs in SkyPilot's catalog columns (one GET with the API key)."""
    key = api_key or refresh.api_key(
        "Hyperbolic API key", (HYPERBOLIC_KEY_ENV,), HYPERBOLIC_KEY_FILE
    )
    what = "the Hyperbolic catalog API"
    return refresh.get_json(
        refresh.session(session),
        HYPERBOLIC_URL,
        what,
        lambda a: isinstance(a, dict) and isinstance(a.get("vms"), list),
        "without a 'vms' list",
        headers={"Authorization": f"Bearer {key}"},
        timeout=timeout,
        auth_hint=f"check {HYPERBOLIC_KEY_ENV}",
    )


def hyperbolic_offers(
    answer: Mapping[str, Any],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Hyperbolic VMs -> offers: ``Price`` on-demand, ``SpotPrice`` spot where given, vCPUs and
    memory from the answer; VMs of sizes the shipped catalog lacks are counted in
    ``attrs["unknown_instance_types"]``."""
    if shipped is None:
        shipped = load_shipped_offers("hyperbolic")
    rows = [
        refresh.price_row(
            "hyperbolic",
            vm.get("Region") or "default",
            vm.get("InstanceType"),
            vm.get("Price"),
            vm.get("SpotPrice"),
            vcpus=vm.get("vCPUs"),
            ram_gib=vm.get("MemoryGiB"),
        )
        for vm in answer.get("vms") or []
        if isinstance(vm, Mapping) and vm.get("InstanceType")
    ]
    return refresh.offers_frame(rows, "hyperbolic", gpus, shipped)
