"""Physics per hardware shape, for candidate generation: the workload's floor on W on every shape of its rows,
and the full estimate of a shape once a row of it is still in the running (kept for every workload of the same
physics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.candidates.cache import CandidateCache
from planner.candidates.expand import Rows
from planner.load.catalog import Catalog
from planner.physics.estimate import estimate_prepared, work_floor_h
from planner.physics.hardware_shape import Estimate, Prepared, Shape, prepare
from planner.schema.workload import Workload

_PHYSICS_IRRELEVANT = {
    "name",
    "description",
    "time_budget",
    "checkpoint",
    "restart_overhead",
    "interruption_tolerance",
    "data",
    "allow",
    "forbid",
}


def _estimate(
    prepared: Prepared,
    physics: str,
    catalog: Catalog,
    shape: Shape,
    headroom: float,
    cache: CandidateCache,
) -> Estimate:
    """Physics shared by workloads that differ only in name, deadline, data or placement."""
    key = (physics, shape, headroom)
    found = cache.estimates.get(key)
    return (
        found
        if found is not None
        else cache.keep(
            cache.estimates, key, estimate_prepared(prepared, catalog, shape, headroom)
        )
    )


def physics_of(
    rows: Rows, workload: Workload, catalog: Catalog, headroom: float
) -> Physics:
    """The workload's physics on its rows' shapes, kept with the rows for every workload of the same physics:
    shapes never depend on prices, so what-if points reuse them. Only the cheap floor on W is worked out here;
    a shape is estimated in full when a row of it is still in the running (`Physics.estimated`)."""
    physics = workload.model_dump_json(exclude=_PHYSICS_IRRELEVANT)
    key = (physics, headroom)
    if key not in rows.physics:
        prepared = prepare(workload, catalog)
        floor_h = np.array(
            [work_floor_h(prepared, catalog, shape) for shape in rows.shapes],
            dtype=float,
        )
        count = len(rows.shapes)
        rows.physics[key] = Physics(
            key,
            prepared,
            floor_h,
            np.full(count, math.inf),
            np.full(count, math.nan),
            np.zeros(count, dtype=bool),
            [None] * count,
        )
    return rows.physics[key]


@dataclass
class Physics:
    """Physics of one workload on each of its rows' shapes (`Rows.shapes`) at one VRAM headroom: a floor on W
    for every shape, the full estimate for those a row needed."""

    key: tuple  # (the workload's physics fields, headroom): what the screening depends on besides λ
    prepared: Prepared
    floor_h: np.ndarray  # per shape: a lower bound on W (`work_floor_h`)
    work_h: np.ndarray  # per shape (inf: does not fit, or not estimated yet)
    item_h: np.ndarray  # per shape (NaN: no item time)
    done: np.ndarray  # per shape: estimated
    estimates: list  # per shape: its Estimate once estimated

    def estimated(
        self, shapes: np.ndarray, rows: Rows, catalog: Catalog, cache: CandidateCache
    ) -> None:
        """Estimate the shapes numbered `shapes` that are not yet."""
        physics, headroom = self.key
        for number in np.unique(shapes[~self.done[shapes]]).tolist():
            estimate = _estimate(
                self.prepared, physics, catalog, rows.shapes[number], headroom, cache
            )
            self.estimates[number], self.done[number] = estimate, True
            self.work_h[number], self.item_h[number] = (
                estimate.work_h,
                estimate.item_h or math.nan,
            )
