"""A calibration file (`planner calibrate`'s fit) read and laid over a scenario's catalog: measured throughput per
GPU and recipe for the physics, measured preemption rates in the offers table, measured capacity waits as
overrides (the scenario's own overrides still apply after them), measured checkpoint and restart times per storage
option. The file is one of the scenario's inputs, never written over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.errors import PlannerError
from planner.load.catalog import Catalog
from planner.load.yaml import load_yaml, where
from planner.schema.calibration import Calibration
from planner.schema.scenario import Override


def load_calibration(path: Path) -> Calibration:
    from planner.load.scenario import validate_model

    raw = load_yaml(path, "calibration file")
    if not isinstance(raw, dict):
        raise PlannerError(
            "expected a calibration from `planner calibrate` (efficiency, preemption, storage)",
            where(path, raw, ()),
        )
    calibration = validate_model(Calibration, raw, path)
    return calibration


def calibrate_catalog(
    named: str, base_dir: Path, catalog: Catalog, source: Path, raw: Any, loc: tuple
) -> tuple[Override, ...]:
    """Lay the calibration file `named` (relative to `base_dir`) over `catalog`; returns the overrides that set
    its capacity waits, to go before the scenario's own. An unknown GPU is one line at its place."""
    path = Path(named) if Path(named).is_absolute() else base_dir / named
    if not path.is_file():
        raise PlannerError(
            f"calibration file {named!r} not found (write one with `planner calibrate`)",
            where(source, raw, loc),
        )
    calibration = load_calibration(path)
    for index, entry in enumerate(calibration.efficiency):
        if entry.gpu not in catalog.gpus:
            raise PlannerError(
                f"unknown GPU {entry.gpu!r}; a calibration names the catalog's GPUs (planner gpus)",
                f"{path}: efficiency[{index}].gpu",
            )
    offers = catalog.offers
    waits = []
    for entry in calibration.preemption:
        mask = (
            (offers["provider"] == entry.provider)
            & (offers["instance_type"] == entry.instance_type)
            & offers["spot_usd_h"].notna()
        )
        if entry.rate_per_node_h is not None:
            offers.loc[mask, "spot_preemption_per_h"] = entry.rate_per_node_h
        if entry.capacity_wait_h is not None:
            waits.append(
                Override(
                    provider=entry.provider,
                    instance_type=entry.instance_type,
                    spot_capacity_wait=entry.capacity_wait_h,
                    spot_capacity_wait_cv=entry.capacity_wait_cv,
                )
            )
    catalog.calibration = calibration
    catalog.files = (*catalog.files, path)
    return tuple(waits)
