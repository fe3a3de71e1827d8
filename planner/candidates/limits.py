"""Shared limits of a plan and the cost resolution: plain data both the candidate generator and
the CP-SAT models read, kept apart so that candidate generation never imports OR-Tools."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.schema.scenario import Scenario

COST_RESOLUTION_USD = 0.01  # one cent
MAX_CANDIDATE_USD = 1e10
"""A candidate whose expected cost is above this ($10 billion) never finishes in practice (an
uncheckpointed months-long job on many GPUs: e^(λW) restarts); it is ruled out, which also keeps the
integer objective far inside CP-SAT's 64-bit range."""


@dataclass(frozen=True)
class Limits:
    """The shared limits of a scenario, in solver terms."""

    # 'provider' or 'provider/GPU' -> GPUs
    gpu_quotas: dict[str, int] = field(default_factory=dict)
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
        mask &= (frame["gpu_family"].str.lower() == gpu) | (
            frame["gpu"].str.lower() == gpu
        )
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
    caps = [
        c
        for c in (
            scenario_limit,
            None if pd.isna(catalog_max_nodes) else int(catalog_max_nodes),
        )
        if c is not None
    ]
    return min(caps) if caps else None


def limits_of(scenario: Scenario) -> Limits:
    c = scenario.constraints
    return Limits(
        gpu_quotas=dict(c.gpu_quotas),
        node_limits=dict(c.node_limits),
        node_limits_per_market=c.node_limits_per_market,
        budget_usd=c.budget,
        same_region=c.same_region,
        same_provider=c.same_provider,
    )


def limit_keys(
    table, limits: Limits, offer_column: str
) -> tuple[list[str], list[str], list[int]]:
    """Per row of `table` (a DataFrame, or columns as lists): the quotas that cover it (`key;key;`), its capped
    offer (and market, when node limits are per market; "" when uncapped), and the GPUs it draws from them
    (on lists: `planner batch` asks this of every run's few candidates). Worked out per distinct hardware, then
    mapped onto the rows: a workload has some 30,000 rows of a few hundred."""
    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(table)
    if frame.empty:
        return [], [], []
    hardware = ["provider", "gpu", "gpu_family"]
    quotas = tuple(sorted(limits.gpu_quotas))
    distinct = frame[hardware].drop_duplicates()
    keys = _covering(quotas, distinct)[
        frame.groupby(hardware, sort=False, dropna=False).ngroup().to_numpy()
    ]
    offers = frame[offer_column].to_numpy(dtype=object)
    capped = (
        frame["max_nodes"].notna() | frame[offer_column].isin(list(limits.node_limits))
    ).to_numpy()
    named = (
        offers + "|" + frame["market"].to_numpy(dtype=object)
        if limits.node_limits_per_market
        else offers
    )
    capped_offer = np.where(capped, named, "")
    units = np.where((keys != "") | capped, frame["gpus"].to_numpy(), 0)
    return keys.tolist(), capped_offer.tolist(), units.tolist()


_COVERING: dict[tuple, str] = {}
"""(quotas, provider, GPU, family) -> the quotas that cover it, as `_covering` found them (at most 4,096 kept)."""


def _covering(quotas: tuple[str, ...], hardware: pd.DataFrame) -> np.ndarray:
    """Per row of `hardware` (provider, gpu, gpu_family), which of `quotas` cover it, as `key;key;` (the rule is
    `quota_mask`'s), for every row not seen before at once."""
    rows = [(quotas, *h) for h in hardware.itertuples(index=False, name=None)]
    new = [i for i, row in enumerate(rows) if row not in _COVERING]
    if len(_COVERING) + len(new) > 4096:
        _COVERING.clear()
        new = list(range(len(rows)))
    if new:
        masks = [quota_mask(hardware.iloc[new], key).to_numpy() for key in quotas]
        for j, i in enumerate(new):
            _COVERING[rows[i]] = "".join(
                key + ";" for key, mask in zip(quotas, masks) if mask[j]
            )
    return np.array([_COVERING[row] for row in rows], dtype=object)
