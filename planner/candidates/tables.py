"""Candidate tables: records as a table, a workload's Pareto front, and the classes of workloads alike
stacked into one table with each member's name."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def pareto(
    frame: pd.DataFrame,
    signature: np.ndarray,
    units: np.ndarray,
    anywhere: bool = False,
) -> pd.DataFrame:
    """Keep, within each signature, the candidates on the (cost, quota GPUs) Pareto front.

    A dominated candidate costs no less and draws no fewer quota GPUs than another of the same
    workload with the same provider/region/offer-limit signature, or (`anywhere`: no group ties the workload
    to a provider or region) than one drawing on no limit at all; wall time does not enter any
    constraint, so it only breaks ties (shorter first, then fewer nodes to run, then name). Removing such
    candidates never changes the optimum. `signature` and `units` (limited GPUs) come with the rows, so a
    what-if point does not derive them again."""
    cents, wall, nodes, cid = (
        frame[c].tolist() for c in ("cost_cents", "wall_h", "nodes", "cid")
    )
    order = sorted(
        range(len(cid)),
        key=lambda i: (
            cents[i],
            wall[i] != wall[i],
            wall[i] if wall[i] == wall[i] else 0,
            nodes[i],
            cid[i],
        ),
    )  # as pandas sorts: NaN last
    keep, fewest = [], {}
    for i in order:
        if units[i] < fewest.get(
            signature[i], math.inf
        ):  # every cheaper one before it draws more limited GPUs
            keep.append(i)
            fewest[signature[i]] = units[i]
            # one drawing on no limit beats every later one
            if anywhere and units[i] == 0:
                break
    return frame.iloc[np.sort(np.array(keep, dtype=np.int64))]


def records_table(records: list[dict]) -> pd.DataFrame:
    """Candidate records as a table, one row each (empty without records)."""
    return (
        pd.DataFrame({name: [r[name] for r in records] for name in records[0]})
        if records
        else pd.DataFrame()
    )


def with_rows(frame: pd.DataFrame, more: pd.DataFrame) -> pd.DataFrame:
    return more if frame.empty else pd.concat([frame, more], ignore_index=True)


def stacked(
    classes: list[tuple[pd.DataFrame, str]], members: list[tuple[int, str]]
) -> pd.DataFrame:
    """One table of every member's candidates, each a copy of its class's (a table and the class's first
    workload's name) renamed to it: the candidate id is the workload's name and what follows it."""
    if not members:
        return pd.DataFrame()
    used = sorted({c for c, _ in members})
    frames = {c: classes[c][0] for c in used}
    starts = dict(zip(used, np.cumsum([0] + [len(frames[c]) for c in used[:-1]])))
    stack = pd.concat([frames[c] for c in used], ignore_index=True)
    suffix = [cid[len(classes[c][1]) :] for c in used for cid in frames[c]["cid"]]
    at = np.concatenate([starts[c] + np.arange(len(frames[c])) for c, _ in members])
    names = [name for c, name in members for _ in range(len(frames[c]))]
    out = stack.take(at).reset_index(drop=True)
    out["workload"] = names
    out["cid"] = [name + suffix[i] for name, i in zip(names, at)]
    return out
