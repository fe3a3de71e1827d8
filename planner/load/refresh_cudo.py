"""Cudo Compute's prices: the public machine-type list (no account needed) read into offer rows.

``GET https://rest.compute.cudo.org/v1/vms/machine-types-2`` answers ``{"machineTypes": [...]}``,
one per machine type and data center: ``machineType`` (``epyc-genoa-a100-pcie``),
``dataCenterId`` (``no-kristiansand-1``), ``gpuModel``, and USD-per-hour unit prices
``vcpuPriceHr``, ``memoryGibPriceHr``, ``gpuPriceHr`` (each ``{"value": "..."}``), with what is
free now (``maxGpuFree``) -- the fields SkyPilot's fetch_cudo (through Cudo's SDK) and dstack's
gpuhunt read.  A VM is priced by its parts: vCPUs x vcpuPriceHr + GiB x memoryGibPriceHr + GPUs
x gpuPriceHr (disk and IPv4 left out, as SkyPilot leaves them).  SkyPilot names each size of a
machine type ``{machineType}_{GPUs}x{vCPUs}v{GiB}gb``; the sizes priced are the shipped
catalog's, in every data center that lists their machine type.
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

CUDO_URL = "https://rest.compute.cudo.org/v1/vms/machine-types-2"
_SIZE = re.compile(r"(?P<type>.+)_(?P<gpus>\d+)x(?P<vcpus>\d+)v(?P<gib>\d+)gb")


def fetch_cudo(session: Any = None, timeout: float = refresh.TIMEOUT_S) -> dict:
    """Cudo Compute's machine types with their unit prices (one GET, no account needed)."""
    what = "the Cudo Compute API"
    response = refresh.get(refresh.session(session), CUDO_URL, what, timeout=timeout)
    answer = refresh.json_of(response, what, CUDO_URL)
    if not isinstance(answer, dict) or not isinstance(answer.get("machineTypes"), list):
        raise PlannerError(
            f"{what} answered JSON without a 'machineTypes' list ({CUDO_URL})"
        )
    return answer


def _unit(entry: Mapping[str, Any], field: str) -> float:
    value = entry.get(field)
    if isinstance(value, Mapping):
        value = value.get("value")
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def cudo_offers(
    answer: Mapping[str, Any],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Cudo machine types -> offers: each shipped size of a machine type, priced from its parts
    in every data center listing the type; ``notes`` says ``capacity_available`` when the data
    center has that many GPUs free now (``maxGpuFree``), else ``capacity_unavailable``.  GPU
    machine types the shipped catalog lacks are counted in ``attrs["unknown_instance_types"]``."""
    if shipped is None:
        shipped = load_shipped_offers("cudo")
    sizes: dict[str, set[tuple[str, int, int, int]]] = {}
    for name in map(str, shipped["instance_type"]):
        m = _SIZE.fullmatch(name)
        if m:
            spec = (name, int(m["gpus"]), int(m["vcpus"]), int(m["gib"]))
            sizes.setdefault(m["type"], set()).add(spec)
    rows, unknown = [], []
    for entry in answer.get("machineTypes") or []:
        if not isinstance(entry, Mapping) or not entry.get("gpuModel"):
            continue
        machine, place = str(entry.get("machineType")), str(entry.get("dataCenterId"))
        if machine not in sizes:
            unknown.append(machine)
            continue
        vcpu, gib, gpu = (
            _unit(entry, f) for f in ("vcpuPriceHr", "memoryGibPriceHr", "gpuPriceHr")
        )
        free = entry.get("maxGpuFree")
        for name, count, vcpus, ram in sorted(sizes[machine]):
            usd = round(vcpus * vcpu + ram * gib + count * gpu, 6)
            tags = []
            if isinstance(free, (int, float)):
                enough = free >= count
                tags = ["capacity_available" if enough else "capacity_unavailable"]
            rows.append(refresh.price_row("cudo", place, name, usd, notes=tags))
    return refresh.offers_frame(rows, "cudo", gpus, shipped, unknown=unknown)
