"""Availability signals as inputs (`signals:` in a scenario, `planner catalog signals`): what the providers say
about how often spot is taken back and whether nodes can be had at all, mapped to the spot model's parameters.

A signals file is a CSV with one signal per row: `provider, region, instance_type, kind, value, nodes, as_of,
source`. The kinds and their rules (docs/catalogs.md, "Availability signals"):

* `interruption_bucket` (AWS Spot Instance Advisor's monthly interruption frequency, Azure's spot eviction rate):
  `<5%`, `5-10%`, `10-15%`, `15-20%`, `>20%` (Azure writes `0-5`, ..., `20+`) set the offer's spot preemption
  rate to `INTERRUPTION_BUCKET_RATE`, the rule the shipped AWS catalog is built with: linear in the bucket's
  mid-point, anchored so the top bucket is the 0.47 per node-hour measured on p3.2xlarge traces.
* `placement_score` (AWS spot placement scores, 1-10 for `nodes` nodes in a region): joins the scenario's
  `defaults.spot_placement_scores`, which `risk.min_placement_score` reads.
* `stock` (RunPod's stock status, Lambda's regions with capacity, a refreshed catalog's `notes`): `none` or
  `unavailable` leaves the offer out; `low` lets a job have one node of it at most.

Every signal applied is kept beside the catalog (`Catalog.signals`), so a plan shows what it rests on.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import PlannerError
from planner.files import write_atomic

INTERRUPTION_BUCKET_RATE = {0: 0.047, 1: 0.141, 2: 0.235, 3: 0.329, 4: 0.47}
"""Spot preemptions per node-hour per interruption bucket (<5 %, 5-10 %, 10-15 %, 15-20 %, >20 % a month): linear in
the bucket's mid-point (2.5, 7.5, 12.5, 17.5, 25 %), anchored so the top bucket, where every p3.2xlarge region sits,
is 0.47, the pooled measured p3.2xlarge rate (docs/cost-model.md §3)."""
BUCKET_LABELS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
_BUCKET_ALIASES = {
    **{label: i for i, label in enumerate(BUCKET_LABELS)},
    **{label: i for i, label in enumerate(("0-5", "5-10", "10-15", "15-20", "20+"))},
    **{str(i): i for i in range(5)},
}
KINDS = ("interruption_bucket", "placement_score", "stock")
STOCK = {
    "none": 0,
    "unavailable": 0,
    "low": 1,
    "medium": None,
    "high": None,
    "available": None,
}
"""Nodes of an offer a job may have per stock level (None: no limit from the signal)."""
COLUMNS = [
    "provider",
    "region",
    "instance_type",
    "kind",
    "value",
    "nodes",
    "as_of",
    "source",
]
NOTE_STOCK = {
    "stock_none": "none",
    "capacity_unavailable": "unavailable",
    "stock_low": "low",
}
"""A refreshed catalog's `notes` tags (`planner catalog refresh`) read as stock signals."""


@dataclass(frozen=True)
class Signal:
    provider: str
    region: str
    instance_type: str
    kind: str
    value: str
    nodes: int | None = None
    as_of: str = ""
    source: str = ""

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.region}/{self.instance_type}"

    def words(self) -> str:
        when = f", {self.as_of}" if self.as_of else ""
        what = {
            "interruption_bucket": f"spot interrupted {self.value} a month",
            "placement_score": f"spot placement score {self.value} for {self.nodes} nodes",
            "stock": f"stock {self.value}",
        }[self.kind]
        return f"{what} ({self.source or 'signals file'}{when})"


def bucket_index(value: str) -> int | None:
    return _BUCKET_ALIASES.get(str(value).strip().replace(" ", ""))


def read_signals(path: Path) -> list[Signal]:
    """A signals CSV; one line at `path:row` for what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlannerError(
            f"cannot read the signals file: {exc.strerror}", str(path)
        ) from None
    rows = csv.DictReader(
        line for line in io.StringIO(text) if not line.startswith("#")
    )
    missing = [c for c in COLUMNS[:5] if c not in (rows.fieldnames or [])]
    if missing:
        raise PlannerError(
            f"a signals file needs the columns {', '.join(COLUMNS)}; missing {', '.join(missing)}",
            str(path),
        )
    out = []
    for number, row in enumerate(rows, start=2):
        where = f"{path}: row {number}"
        kind, value = (row.get("kind") or "").strip(), (row.get("value") or "").strip()
        if kind not in KINDS:
            raise PlannerError(
                f"kind {kind!r}: expected one of {', '.join(KINDS)}", where
            )
        nodes = (row.get("nodes") or "").strip()
        if kind == "interruption_bucket" and bucket_index(value) is None:
            raise PlannerError(
                f"interruption bucket {value!r}: expected one of {', '.join(BUCKET_LABELS)}",
                where,
            )
        if kind == "placement_score" and not (
            value.isdigit() and 1 <= int(value) <= 10 and nodes.isdigit()
        ):
            raise PlannerError(
                f"placement score {value!r} for nodes {nodes!r}: expected 1-10 and a node count",
                where,
            )
        if kind == "stock" and value.lower() not in STOCK:
            raise PlannerError(
                f"stock {value!r}: expected one of {', '.join(STOCK)}", where
            )
        out.append(
            Signal(
                row["provider"].strip(),
                row["region"].strip(),
                row["instance_type"].strip(),
                kind,
                value.lower() if kind == "stock" else value,
                int(nodes) if nodes.isdigit() else None,
                (row.get("as_of") or "").strip(),
                (row.get("source") or "").strip(),
            )
        )
    return out


def write_signals(signals: list[Signal], path: Path) -> None:
    frame = pd.DataFrame(
        [[getattr(s, c) for c in COLUMNS] for s in signals], columns=COLUMNS
    )
    write_atomic(path, frame.to_csv(index=False, lineterminator="\n"))


def apply_signals(catalog, signals: list[Signal]) -> list[Signal]:
    """Lay `signals` and the catalogs' own stock tags over `catalog.offers` (in place); returns the placement
    scores, for the scenario's defaults. What was applied is kept in `catalog.signals` by offer key."""
    offers = catalog.offers
    stock = [
        Signal(p, r, i, "stock", NOTE_STOCK[tag], source="catalog notes")
        for p, r, i, notes in zip(
            offers["provider"],
            offers["region"],
            offers["instance_type"],
            offers["notes"],
        )
        for tag in str(notes).split(";")
        if tag in NOTE_STOCK
    ]
    keys = offers["key"].to_numpy()
    scores = []
    for signal in [*stock, *signals]:
        mask = keys == signal.key
        if not mask.any():
            continue
        if signal.kind == "interruption_bucket":
            spot = mask & offers["spot_usd_h"].notna().to_numpy()
            offers.loc[spot, "spot_preemption_per_h"] = INTERRUPTION_BUCKET_RATE[
                bucket_index(signal.value)
            ]
        elif signal.kind == "placement_score":
            scores.append(signal)
        else:
            cap = STOCK[signal.value]
            if cap is not None:
                current = offers.loc[mask, "max_nodes"].astype(float).fillna(np.inf)
                offers.loc[mask, "max_nodes"] = np.minimum(current, cap)
        catalog.signals.setdefault(signal.key, []).append((signal.kind, signal.words()))
    return scores
