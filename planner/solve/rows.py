"""The shared limits of `planner solve` as linear rows over the candidate table.

One home for which limits can bind and with what coefficients: the CP-SAT model (`model.py`)
adds them as constraints and its LP relaxation (`bound.py`) as rows, so the two always
constrain the same thing. Rows that cannot bind are left out: a quota that holds even if every
candidate on it is picked, a node limit that holds even if every workload takes its largest
candidate on it (sound only beside one candidate per workload, which both models always have).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.candidates.limits import Limits, budget_cents, node_cap, quota_mask


@dataclass(frozen=True)
class LinearRow:
    """Σ coef[k] · pick[index[k]] ≤ upper, named in domain words."""

    name: str
    index: np.ndarray  # positions of candidates in the table
    coef: np.ndarray
    upper: int


def quota_rows(
    cands: pd.DataFrame, limits: Limits, skip: set[str] = frozenset()
) -> list[LinearRow]:
    """Σ_{c on provider p [and family f]} gpus_c · pick_c ≤ quota[p(/f)] (`skip`: keys the model adds with
    endpoint terms)."""
    rows = []
    for key, quota in sorted(limits.gpu_quotas.items()):
        if key in skip:
            continue
        index = np.flatnonzero(quota_mask(cands, key).to_numpy())
        gpus = cands["gpus"].to_numpy()[index].astype(np.int64)
        if len(index) and gpus.sum() > quota:
            rows.append(LinearRow(f"quota[{key}]", index, gpus, int(quota)))
    return rows


def node_limit_rows(
    cands: pd.DataFrame, limits: Limits, skip: set[str] = frozenset()
) -> list[LinearRow]:
    """Σ_{c on offer o [and market m]} nodes_c · pick_c ≤ limit[o] (scenario limit or catalog max_nodes;
    `skip`: offers the model adds with endpoint terms)."""
    groups = ["offer_key", "market"] if limits.node_limits_per_market else ["offer_key"]
    rows = []
    if cands.empty:
        return rows
    for key, index in sorted(cands.groupby(groups, sort=True).indices.items()):
        offer_key = key[0] if isinstance(key, tuple) else key
        if offer_key in skip:
            continue
        cap = node_cap(
            limits.node_limits.get(offer_key), cands["max_nodes"].iat[index[0]]
        )
        if cap is None:
            continue
        nodes = cands["nodes"].to_numpy()[index].astype(np.int64)
        if (
            pd.Series(nodes).groupby(cands["workload"].to_numpy()[index]).max().sum()
            <= cap
        ):
            continue
        label = "/".join(key) if isinstance(key, tuple) else key
        rows.append(LinearRow(f"nodes[{label}]", np.asarray(index), nodes, int(cap)))
    return rows


def budget_rows(cands: pd.DataFrame, limits: Limits) -> list[LinearRow]:
    """Σ_c cost_cents_c · pick_c ≤ budget (in cents, rounded down)."""
    if limits.budget_usd is None:
        return []
    return [
        LinearRow(
            "budget",
            np.arange(len(cands)),
            cands["cost_cents"].to_numpy().astype(np.int64),
            budget_cents(limits.budget_usd),
        )
    ]


def group_members(
    cands: pd.DataFrame, groups, column: str
) -> list[tuple[list[int], dict[str, list[int]]]]:
    """Per same-region/same-provider group: its candidate positions, and those per value of `column`."""
    out = []
    for group in groups:
        members = np.flatnonzero(cands["workload"].isin(group).to_numpy())
        values = cands[column].to_numpy()[members]
        out.append(
            (
                list(members),
                {v: list(members[values == v]) for v in sorted(set(values))},
            )
        )
    return out


def coupling_rows(cands: pd.DataFrame, limits: Limits) -> list[LinearRow]:
    """Every row that can bind, quotas then node limits then the budget (the LP's, and a plan's check)."""
    return (
        quota_rows(cands, limits)
        + node_limit_rows(cands, limits)
        + budget_rows(cands, limits)
    )


def coupling_groups(
    cands: pd.DataFrame, limits: Limits
) -> list[tuple[list[int], dict[str, list[int]]]]:
    """The same-region groups, then the same-provider ones (`group_members`)."""
    return group_members(cands, limits.same_region, "provider_region") + group_members(
        cands, limits.same_provider, "provider"
    )


def admits(cands: pd.DataFrame, limits: Limits, picks: np.ndarray) -> bool:
    """Whether these picks (one per workload, a mask over the table) keep every limit, in whole numbers."""
    if any(
        int(row.coef[picks[row.index]].sum()) > row.upper
        for row in coupling_rows(cands, limits)
    ):
        return False
    return all(
        sum(bool(picks[members].any()) for members in by_value.values()) <= 1
        for _, by_value in coupling_groups(cands, limits)
    )
