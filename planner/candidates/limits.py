"""Shared limits of a plan and the cost resolution: plain data both the candidate generator and
the CP-SAT models read, kept apart so that candidate generation never imports OR-Tools."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

COST_RESOLUTION_USD = 0.01  # one cent
MAX_CANDIDATE_USD = 1e10
"""A candidate whose expected cost is above this ($10 billion) never finishes in practice (an
uncheckpointed months-long job on many GPUs: e^(λW) restarts); it is ruled out, which also keeps the
integer objective far inside CP-SAT's 64-bit range."""


@dataclass(frozen=True)
class Limits:
    """The shared limits of a scenario, in solver terms."""

    gpu_quotas: dict[str, int] = field(default_factory=dict)  # 'provider' or 'provider/GPU' -> GPUs
    node_limits: dict[str, int] = field(default_factory=dict)  # offer key -> nodes
    node_limits_per_market: bool = False
    budget_usd: float | None = None
    same_region: tuple[tuple[str, ...], ...] = ()
    same_provider: tuple[tuple[str, ...], ...] = ()


def quota_mask(frame: pd.DataFrame, key: str) -> pd.Series:
    """Rows a quota key covers: 'provider', or 'provider/GPU' with GPU a family (H100) or a name (H100-SXM)."""
    provider, _, gpu = key.partition("/")
    mask = frame["provider"] == provider
    if gpu:
        gpu = gpu.lower()
        mask &= (frame["gpu_family"].str.lower() == gpu) | (frame["gpu"].str.lower() == gpu)
    return mask


def to_cents(usd):
    """Dollars as whole cents, to the nearest (how costs enter both CP-SAT models); arrays element-wise."""
    if isinstance(usd, (pd.Series, np.ndarray)):
        return (usd / COST_RESOLUTION_USD).round().astype(int)
    return int(round(usd / COST_RESOLUTION_USD))


def budget_cents(usd: float) -> int:
    """A budget in whole cents, rounded down ($0.29 is 29 cents, not int(28.999...))."""
    return math.floor(usd / COST_RESOLUTION_USD + 1e-6)


def node_cap(scenario_limit: int | None, catalog_max_nodes) -> int | None:
    """Nodes of one offer that may run at once: the smaller of the scenario's limit and the catalog's
    `max_nodes` (None when neither says)."""
    caps = [c for c in (scenario_limit, None if pd.isna(catalog_max_nodes) else int(catalog_max_nodes))
            if c is not None]
    return min(caps) if caps else None
