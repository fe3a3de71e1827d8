"""The offers table a call prices: the scenario's and a what-if point's overrides applied, its prices as arrays,
and a fingerprint of everything in it but the prices, so that calls differing only in prices share their work.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from planner.load.catalog import Catalog
from planner.schema.scenario import Override


def apply_overrides(
    offers: pd.DataFrame,
    overrides: tuple[Override, ...],
    catalog: Catalog,
    spot_mult: float = 1.0,
    preempt_mult: float = 1.0,
    on_demand_mult: float = 1.0,
    where: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Scale spot/on-demand prices and preemption rates of the offers each override matches.

    The scenario's overrides apply first; `spot_mult`/`preempt_mult`/`on_demand_mult`
    (what-if sweeps) then apply to the offers `where` selects (all when None).
    """
    offers = offers.copy()
    rules = [
        (
            o,
            o.spot_price_multiplier,
            o.on_demand_price_multiplier,
            o.preemption_rate_multiplier,
        )
        for o in overrides
    ]
    sweep = Override(**(where or {}))
    rules.append((sweep, spot_mult, on_demand_mult, preempt_mult))
    for rule, spot, on_demand, preempt in rules:
        settings = {
            c: v
            for c, v in (
                ("spot_correlation", rule.spot_correlation),
                ("spot_capacity_wait_h", rule.spot_capacity_wait),
                ("spot_capacity_wait_cv", rule.spot_capacity_wait_cv),
            )
            if v is not None
        }
        if spot == on_demand == preempt == 1.0 and not settings:
            continue
        mask = pd.Series(True, index=offers.index)
        if rule.provider:
            mask &= offers["provider"] == rule.provider
        if rule.region:
            mask &= offers["region"] == rule.region
        if rule.instance_type:
            mask &= offers["instance_type"] == rule.instance_type
        if rule.gpu:
            mask &= offers["gpu"].map(lambda g: catalog.gpu_matches(g, rule.gpu))
        offers.loc[mask, "spot_usd_h"] *= spot
        offers.loc[mask, "on_demand_usd_h"] *= on_demand
        offers.loc[mask, "spot_preemption_per_h"] *= preempt
        for (
            column,
            value,
        ) in settings.items():  # set, not scaled, on offers with a spot market
            offers.loc[mask & offers["spot_usd_h"].notna(), column] = float(value)
    return offers


# what-if reuse (planner/whatif/sweep.py): the expanded rows depend on prices only through the
# `price`/`spot_rate_per_node_h` columns and the three price columns copied from the offer, so `generate`
# keeps them per (expansion inputs, limits, offers-without-prices), shared by every
# workload with those inputs, together with everything derived from them that no price touches
# (twin groups, signatures, physics per shape and workload physics) and the screening bounds per
# preemption state; a sweep point only maps its prices in (kept in the caller's CandidateCache).
PRICE_COLUMNS = ("on_demand_usd_h", "spot_usd_h", "spot_preemption_per_h")


def offers_token(offers: pd.DataFrame) -> str:
    """A fingerprint of everything in `offers` except the prices and preemption rates (but
    including which prices exist), so frames that differ only by what-if multipliers share it."""
    rest = offers[[c for c in offers.columns if c not in PRICE_COLUMNS]].astype(str)
    exists = offers[[c for c in PRICE_COLUMNS if c in offers.columns]].notna()
    digest = hashlib.sha1(
        pd.util.hash_pandas_object(rest, index=True).to_numpy().tobytes()
    )
    digest.update(pd.util.hash_pandas_object(exists, index=True).to_numpy().tobytes())
    digest.update(repr(list(offers.columns)).encode())
    return digest.hexdigest()


def offer_prices(offers: pd.DataFrame) -> dict[str, np.ndarray]:
    """The offers' prices and preemption rates as float arrays (NaN where missing)."""
    return {c: offers[c].to_numpy(dtype=float, na_value=np.nan) for c in PRICE_COLUMNS}
