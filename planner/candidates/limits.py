"""Shared limits of a plan and the cost resolution: plain data both the candidate generator and
the CP-SAT models read, kept apart so that candidate generation never imports OR-Tools."""
from __future__ import annotations

from dataclasses import dataclass, field

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
