"""Carry the facts the shipped catalog knows into offers built from a price-only source.

A SkyPilot ``vms.csv`` or a provider price API gives prices (and sometimes vCPUs/RAM) but
no interconnect: the importer can only fill a default rule (``ethernet`` 25 Gbit/s), which
skews every multi-node plan (an AWS p5.48xlarge really has EFA at 3200 Gbit/s).  The
shipped catalog already holds those facts (from provider docs and the build's rules), so
a fresh source row takes them from there instead of from a default.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from planner.load.catalog import CATALOG_DIR, OFFER_COLUMNS, read_table_file

# Facts taken from the shipped row when the source lacks them or only defaulted them.
# A tuple is a group: the first column says what the second one measures (`inter_node`
# `none` has no Gbit/s), so the second follows the first when the first is taken.
FACT_GROUPS: tuple[tuple[str, ...], ...] = (
    ("gpu",),
    ("gpus_per_node",),
    ("vcpus",),
    ("ram_gib",),
    ("gpu_vram_gib",),
    ("intra_node", "intra_node_gbs"),
    ("inter_node", "inter_node_gbps"),
    ("spot_preemption_per_h",),
    ("max_nodes",),
    ("billing_granularity_h",),
    ("billing_minimum_h",),
)
FACT_COLUMNS = tuple(c for group in FACT_GROUPS for c in group)
# Facts that differ by region (the AWS Spot Advisor rate): never borrowed from another region.
REGIONAL_FACTS = frozenset({"spot_preemption_per_h"})
# Shipped `notes` tags that explain a fact (not a price): carried with the column they explain.
FACT_TAGS = {
    "ib_from_provider_docs": "inter_node",
    "amd_infinity_fabric_as_pcie": "intra_node",
    "gpu_vram_from_model": "gpu_vram_gib",
    "vram_differs_from_model": "gpu_vram_gib",
    "gpu_count_corrected_12_to_8": "gpus_per_node",
    "gpu_variant_assumed_sxm": "gpu",
    "gpu_variant_assumed_pcie": "gpu",
    "vcpus_not_credible_blanked": "vcpus",
}
SAME_REGION_TAG = "facts_from_shipped_catalog"
OTHER_REGION_TAG = "facts_from_shipped_catalog_other_region"
_NUMERIC = (
    "gpus_per_node",
    "vcpus",
    "ram_gib",
    "gpu_vram_gib",
    "intra_node_gbs",
    "inter_node_gbps",
    "on_demand_usd_h",
    "spot_usd_h",
    "spot_preemption_per_h",
    "max_nodes",
)


def missing(value: Any) -> bool:
    """Blank cell: None, NaN/NA or an empty string."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def split_tags(value: Any) -> list[str]:
    """`a;b` (or a tuple from a validated frame) -> ['a', 'b']."""
    if isinstance(value, (tuple, list)):
        return [str(v) for v in value if v]
    return [] if missing(value) else [t for t in str(value).split(";") if t]


def join_tags(tags: Iterable[str]) -> str:
    """Tags without repeats, in first-seen order, `;`-separated."""
    return ";".join(dict.fromkeys(t for t in tags if t))


def order_defaults(tags: Iterable[str]) -> str:
    """`defaults` in column order (as the build script writes it), unknown names last."""
    tags = list(dict.fromkeys(tags))
    rank = {c: i for i, c in enumerate(OFFER_COLUMNS)}
    return ";".join(sorted(tags, key=lambda t: (rank.get(t, len(rank)), tags.index(t))))


def load_shipped_offers(provider: str, directory: Path | None = None) -> pd.DataFrame:
    """The shipped offers of one provider as a frame (numbers typed, `defaults` a `;` string).

    Empty (with the offer columns) when the provider has no shipped catalog: then there is
    nothing to keep, which is not an error.
    """
    path = (directory or CATALOG_DIR / "offers") / f"{provider}.csv"
    if not path.exists():
        return pd.DataFrame(columns=OFFER_COLUMNS)
    frame = read_table_file(path, "offers catalog")[0].reset_index(drop=True)
    for col in _NUMERIC:
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame.astype(object).where(frame.notna(), None)


def _same(a: Any, b: Any) -> bool:
    if missing(a) and missing(b):
        return True
    if missing(a) or missing(b):
        return False
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _shipped_rows(
    shipped: pd.DataFrame | None, providers: Iterable[str]
) -> dict[str, dict[str, list[dict]]]:
    """provider -> instance_type -> shipped rows as dicts, by region (read from catalogs/offers/
    unless given)."""
    out: dict[str, dict[str, list[dict]]] = {}
    for provider in sorted(set(providers)):
        if shipped is None:
            frame = load_shipped_offers(provider)
        else:
            frame = (
                shipped[shipped["provider"] == provider]
                if "provider" in shipped
                else shipped
            )
        rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
        by_type: dict[str, list[dict]] = {}
        for r in sorted(rows, key=lambda r: str(r.get("region"))):
            by_type.setdefault(str(r.get("instance_type")), []).append(r)
        out[provider] = by_type
    return out


def _find(row: dict, candidates: list[dict]) -> tuple[dict | None, bool]:
    """The shipped row for `row` among the rows of its instance type (same GPU/count when the
    source names them): same region first, else the first other region.  (row, same_region)."""
    hits = list(candidates)
    for col in ("gpu", "gpus_per_node"):
        if not missing(row.get(col)):
            hits = [c for c in hits if _same(c.get(col), row.get(col))]
    for hit in hits:
        if hit.get("region") == row.get("region"):
            return hit, True
    return (hits[0], False) if hits else (None, False)


def _take(row: dict, ship: dict, same_region: bool, has_spot_column: bool) -> list[str]:
    """Copy into `row` every fact the source lacks or only defaulted; returns the columns taken."""
    row_defaults = split_tags(row.get("defaults"))
    ship_defaults = set(split_tags(ship.get("defaults")))
    taken: list[str] = []

    def open_to_shipped(col: str) -> bool:
        return missing(row.get(col)) or col in row_defaults

    def copy(col: str) -> None:
        new_default = col in ship_defaults
        if _same(row.get(col), ship.get(col)) and (col in row_defaults) == new_default:
            return  # the source already says the same thing, with the same standing
        row[col] = ship.get(col)
        if col in row_defaults:
            row_defaults.remove(col)
        if new_default:
            row_defaults.append(col)
        taken.append(col)

    for lead, *rest in FACT_GROUPS:
        if lead not in ship or (lead in REGIONAL_FACTS and not same_region):
            continue
        if (
            lead == "spot_preemption_per_h"
            and has_spot_column
            and missing(row.get("spot_usd_h"))
        ):
            continue  # no spot price, no preemption rate
        if open_to_shipped(lead) and not missing(ship.get(lead)):
            copy(lead)
            lead_agrees = True
        else:
            lead_agrees = _same(row.get(lead), ship.get(lead))
        for (
            col
        ) in rest:  # the measure follows its kind (never over a real source value)
            if col in ship and lead_agrees and open_to_shipped(col):
                copy(col)
    row["defaults"] = order_defaults(row_defaults)
    return taken


def keep_known_facts(
    frame: pd.DataFrame, shipped: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Give each offer of `frame` the facts its shipped-catalog row knows.

    For every row whose (provider, instance_type) - and gpu/gpus_per_node when the row names
    them - is in the shipped catalog (`shipped`, else catalogs/offers/<provider>.csv), each
    fact of FACT_COLUMNS that the row lacks or lists in `defaults` is taken from the shipped
    row of the same region, else of another region (then not the region-specific
    spot_preemption_per_h).  A value the source really had is never overwritten.  A taken
    column leaves `defaults` unless it was a default in the shipped row too; `notes` gains
    ``facts_from_shipped_catalog`` (``..._other_region`` when borrowed from another region)
    plus the shipped tags that explain a taken fact (e.g. ``ib_from_provider_docs``).

    Returns a new frame with the fact columns present; ``attrs["unmatched"]`` lists the
    (provider, region, instance_type) rows the shipped catalog does not know (kept unchanged).
    """
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    has_spot_column = "spot_usd_h" in frame.columns
    shipped_by_provider = _shipped_rows(shipped, (str(r.get("provider")) for r in rows))
    unmatched: list[tuple[str, str, str]] = []
    for row in rows:
        by_type = shipped_by_provider.get(str(row.get("provider")), {})
        ship, same_region = _find(row, by_type.get(str(row.get("instance_type")), []))
        if ship is None:
            unmatched.append(
                (
                    str(row.get("provider")),
                    str(row.get("region")),
                    str(row.get("instance_type")),
                )
            )
            continue
        taken = _take(row, ship, same_region, has_spot_column)
        if taken:
            carried = [
                t for t in split_tags(ship.get("notes")) if FACT_TAGS.get(t) in taken
            ]
            tag = SAME_REGION_TAG if same_region else OTHER_REGION_TAG
            row["notes"] = join_tags([*split_tags(row.get("notes")), tag, *carried])
    # the frame's own columns, plus the facts it gained, in the catalog's column order
    gained = {
        c
        for c in FACT_COLUMNS
        if c not in frame.columns and any(not missing(r.get(c)) for r in rows)
    }
    wanted = set(frame.columns) | gained | {"defaults", "notes"}
    columns = [c for c in OFFER_COLUMNS if c in wanted] + [
        c for c in frame.columns if c not in OFFER_COLUMNS
    ]
    out = pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame(columns=columns)
    for col in ("defaults", "notes"):
        out[col] = out[col].map(lambda v: "" if missing(v) else v)
    for col in _NUMERIC:
        if col in out:
            out[col] = pd.to_numeric(out[col], errors="coerce")
    out.attrs["unmatched"] = unmatched
    return out
