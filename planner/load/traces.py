"""Spot availability traces for `planner simulate --traces`: Can't Be Late's JSON format
(`{"metadata": {"gap_seconds": G}, "data": [n0, n1, ...]}`, n = spot nodes up at each tick), with
optional metadata the replay matches on (cloud, instance_type, nodes, zone, kind, source). The
shipped ones are in catalogs/spot_traces/ (tools/import_traces.py, sources there)."""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner.errors import PlannerError
from planner.load.catalog import CATALOG_DIR
from planner.load.yaml import parse_json, read_capped
from planner.schema.fields import MAX_HOURS
from planner.schema.workload import MAX_GPUS

SHIPPED_TRACES = CATALOG_DIR / "spot_traces"
REPLAY_STEP_S = 300
"""The replay resamples a trace to steps of five minutes (economics/trace_replay.py, STEP_H) or its own gap if
coarser: a trace must span at least one."""
MAX_TRACE_FILES = 10_000
"""Trace files one folder may hold (the shipped folder has 23; Can't Be Late's repository 34, in subfolders)."""


@dataclass(frozen=True)
class Trace:
    name: str
    gap_h: float
    up: np.ndarray  # spot nodes up at each tick
    cloud: str | None = None  # None: stands in for any provider
    instance_type: str | None = None
    nodes: int = 1  # the most nodes the collector asked for
    source: str = ""

    @functools.cached_property
    def key(self) -> tuple:
        """What a replay on it depends on, hashed once: replays are kept per trace (`spot_evidence.replayed`)."""
        return self.name, self.gap_h, hashlib.sha1(self.up.tobytes()).hexdigest()


def load_traces(folder: Path | None = None) -> list[Trace]:
    """Every trace in `folder` (default: the shipped ones), by file name; one located line on a bad file."""
    folder = SHIPPED_TRACES if folder is None else Path(folder)
    if not folder.is_dir():
        raise PlannerError("no such folder of spot traces", str(folder))
    traces = []
    for path in _trace_files(folder):
        if len(traces) == MAX_TRACE_FILES:
            raise PlannerError(
                f"more than {MAX_TRACE_FILES:,} *.json files below it; expected a folder of spot "
                "traces",
                str(folder),
            )
        traces.append(_trace(path))
    if not traces:
        raise PlannerError(
            "no trace files (*.json in Can't Be Late's format) in it", str(folder)
        )
    return traces


def _trace_files(folder: Path):
    """The *.json files in `folder` and its subfolders (Can't Be Late's repository nests them), in name order, a
    folder's own before its subfolders', found as they are read: given a folder that holds other things (a home,
    `/`), the first file that is not a trace stops the reading, not a walk of everything below it first."""
    for root, subfolders, names in os.walk(folder):
        subfolders.sort()
        yield from (
            Path(root) / name for name in sorted(names) if name.endswith(".json")
        )


def _trace(path: Path) -> Trace:
    # like every input: no folder, device or pipe, nothing above the cap
    text = read_capped(path, "trace file")
    try:
        raw = parse_json(text.decode("utf-8"), path, "trace file")
    except UnicodeDecodeError as exc:
        raise PlannerError(f"not a trace file: {exc}", str(path)) from None
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("metadata"), dict)
        or not isinstance(raw.get("data"), list)
    ):
        raise PlannerError(
            'expected {"metadata": {"gap_seconds": ...}, "data": [nodes up per tick, ...]}',
            str(path),
        )
    meta, data = raw["metadata"], raw["data"]
    gap = meta.get("gap_seconds")
    if (
        not isinstance(gap, (int, float))
        or isinstance(gap, bool)
        or not 0 < gap <= MAX_HOURS * 3600
    ):
        raise PlannerError(
            f"metadata.gap_seconds: expected a number of seconds > 0 and at most {MAX_HOURS * 3600:g} "
            f"(a century), got {gap!r}",
            str(path),
        )

    def whole(n) -> bool:
        return isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_GPUS

    # checked at C speed (the types, then the range by min and max): traces run to 100,000s of ticks
    if (
        not data
        or set(map(type, data)) != {int}
        or not 0 <= min(data) <= max(data) <= MAX_GPUS
    ):
        where = next((i for i, n in enumerate(data) if not whole(n)), 0)
        raise PlannerError(
            f"data[{where}]: expected a whole number of nodes up, 0 to {MAX_GPUS:,}",
            str(path),
        )
    if len(data) * gap < REPLAY_STEP_S:
        raise PlannerError(
            f"data: {len(data)} tick(s) of {gap:g} s span less than the replay's {REPLAY_STEP_S} s step; "
            "expected a longer trace",
            str(path),
        )
    up = np.asarray(data, dtype=np.int64)
    nodes = meta.get("nodes", int(up.max()) or 1)
    if (
        not isinstance(nodes, int)
        or isinstance(nodes, bool)
        or not 1 <= nodes <= MAX_GPUS
    ):
        raise PlannerError(
            f"metadata.nodes: expected a whole number from 1 to {MAX_GPUS:,}, got {nodes!r}",
            str(path),
        )
    return Trace(
        path.stem,
        float(gap) / 3600,
        up,
        meta.get("cloud"),
        meta.get("instance_type"),
        nodes,
        str(meta.get("source", "")),
    )
