"""How many spot nodes of an offer family can be held at once, as measured (docs/cost-model.md §11): for each
(cloud, instance type) and gang size n, the share of time a probe had all n up, zone by zone, how long n stayed
up together and how long a lost gang waited for n again. These are the odds the replay gate
(`spot_evidence`) holds every spot candidate to; a gang larger than any probe held is not offered at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.load.traces import Trace

__all__ = ["GANG_SIZES", "Obtainability", "obtainability"]

GANG_SIZES = (1, 2, 4, 8, 16, 32)
"""Gang sizes reported (those above a family's largest probe are left out: nothing measured them)."""


@dataclass(frozen=True)
class Obtainability:
    """n spot nodes of one offer family over its probes (each a zone and period of its own)."""

    cloud: str
    instance_type: str
    nodes: int
    probes: int  # probes that asked for at least n nodes (each a zone and period)
    p_all_up: float  # the share of time all n were up, mean over the probes
    p_all_up_worst: float  # in the worst probe's zone
    p_all_up_best: float
    hold_h: float | None  # mean unbroken time with all n up; None: never held
    # mean time from losing one of n until all n are up again; None: never lost
    wait_h: float | None


def obtainability(
    traces: tuple[Trace, ...] | list[Trace], sizes: tuple[int, ...] = GANG_SIZES
) -> list[Obtainability]:
    """One row per family and gang size no larger than its largest probe, families in name order."""
    families: dict[tuple[str, str], list[Trace]] = {}
    for trace in traces:
        families.setdefault(
            (trace.cloud or "any", trace.instance_type or "any"), []
        ).append(trace)
    rows = []
    for (cloud, instance_type), found in sorted(families.items()):
        for n in sizes:
            probes = [t for t in found if t.nodes >= n]
            if not probes:
                continue
            shares = [float(np.mean(t.up >= n)) for t in probes]
            holds, waits = [], []
            for t in probes:
                held, waited = _runs(t.up >= n, t.gap_h)
                holds += held
                waits += waited
            rows.append(
                Obtainability(
                    cloud,
                    instance_type,
                    n,
                    len(probes),
                    float(np.mean(shares)),
                    min(shares),
                    max(shares),
                    _mean(holds),
                    _mean(waits),
                )
            )
    return rows


def _runs(up: np.ndarray, gap_h: float) -> tuple[list[float], list[float]]:
    """Lengths in hours of the runs of True (holds) and of the False runs that follow a hold (waits); a trace's
    first and last runs are cut by its ends and left out, unless a run spans the whole trace."""
    edges = np.flatnonzero(np.diff(up.astype(np.int8))) + 1
    starts, ends = np.concatenate(([0], edges)), np.concatenate((edges, [len(up)]))
    if len(starts) == 1:
        return ([len(up) * gap_h], []) if up[0] else ([], [])
    holds, waits = [], []
    for k, (a, b) in enumerate(zip(starts, ends)):
        if 0 < k < len(starts) - 1:
            (holds if up[a] else waits).append((b - a) * gap_h)
    return holds, waits


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None
