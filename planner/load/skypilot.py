"""Convert SkyPilot ``vms.csv``-style catalogs into the planner's offers format.

Used by ``tools/build_catalogs.py`` (shipped catalogs) and by the CLI (user files),
so that both paths apply the same zone collapse, GPU naming, price-oddity and
interconnect-default rules.  Pure pandas; no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from planner.schema.catalog import MAX_GPUS_PER_NODE

OFFER_COLUMNS = [
    "provider",
    "region",
    "instance_type",
    "gpu",
    "gpus_per_node",
    "vcpus",
    "ram_gib",
    "gpu_vram_gib",
    "intra_node",
    "intra_node_gbs",
    "inter_node",
    "inter_node_gbps",
    "on_demand_usd_h",
    "spot_usd_h",
    "spot_preemption_per_h",
    "max_nodes",
    "defaults",
    "notes",
]

# SkyPilot column -> our lower-case layout (the layout of catalogs/offers/*.csv).
_SKYPILOT_COLUMNS = {
    "InstanceType": "instance_type",
    "AcceleratorName": "accelerator_name",
    "AcceleratorCount": "accelerator_count",
    "vCPUs": "vcpus",
    "MemoryGiB": "memory_gib",
    "Price": "price_usd_per_hour",
    "SpotPrice": "spot_price_usd_per_hour",
    "Region": "region",
    "AvailabilityZone": "zone",
    "GpuInfo": "gpu_info",
}

# GPUs sold only on NVLink/NVSwitch baseboards (SXM): a multi-GPU node of them is
# assumed NVLink-connected.  Value = NVIDIA's bidirectional GB/s per GPU.
NVLINK_BASEBOARD_GBS = {
    "B200": 1800,
    "H200": 900,
    "H100-SXM": 900,
    "A100-40GB": 600,
    "A100-80GB": 600,
    "V100-16GB": 300,
    "V100-32GB": 300,
    "H800": 400,
    "H20": 900,
}
# Bidirectional GB/s of a x16 slot: Gen3 32, Gen4 64, Gen5 128.  GPUs not listed: Gen4.
_PCIE_GEN3 = {
    "V100-16GB-PCIe",
    "V100-32GB-PCIe",
    "V100-16GB",
    "V100-32GB",
    "T4",
    "T4G",
    "P4",
    "P100",
    "M60",
    "M4000",
    "P4000",
    "RTX6000",
}
_PCIE_GEN5 = {
    "H100-PCIe",
    "H100-NVL",
    "H100-SXM",
    "H200",
    "B200",
    "GH200",
    "MI300X",
    "RTX5090",
    "RTXPRO6000-WS",
    "H800",
    "H20",
    "MI325X",
    "Gaudi3",
}
# Providers whose offers are single rented machines/pods that cannot be placed on a
# shared cluster network: inter_node = none.  Everyone else: 25 Gbit/s Ethernet,
# a typical (conservative) figure for a general-purpose VM NIC.
NO_CLUSTER_PROVIDERS = {"runpod", "vast", "hyperbolic"}
DEFAULT_ETHERNET_GBPS = 25

# Spot preemptions per node-hour when nothing better is known (calibrated on
# shared/data/spot_trace_rates.csv; see catalogs/README.md).
SPOT_PREEMPTION_DEFAULT = {
    "aws": 0.47,
    "gcp": 0.24,
    "azure": 0.24,
    "nebius": 0.24,
    "runpod": 0.5,
}
SPOT_PREEMPTION_FALLBACK = 0.5


def pcie_gbs(gpu: str) -> int:
    """Bidirectional GB/s per GPU of its PCIe x16 link (Gen3 32 / Gen4 64 / Gen5 128)."""
    if gpu in _PCIE_GEN3:
        return 32
    if gpu in _PCIE_GEN5:
        return 128
    return 64


def interconnect_defaults(provider: str, gpu: str, gpus_per_node: int) -> dict:
    """Default interconnect when the source says nothing (shared with the build script).

    Multi-GPU nodes of baseboard-only GPUs -> NVLink at the NVIDIA figure; otherwise
    PCIe at the slot bandwidth.  Inter-node: none for pod marketplaces, else Ethernet.
    """
    if gpus_per_node > 1 and gpu in NVLINK_BASEBOARD_GBS:
        intra, intra_gbs = "nvlink", NVLINK_BASEBOARD_GBS[gpu]
    else:
        intra, intra_gbs = "pcie", pcie_gbs(gpu)
    if provider in NO_CLUSTER_PROVIDERS:
        inter, inter_gbps = "none", None
    else:
        inter, inter_gbps = "ethernet", DEFAULT_ETHERNET_GBPS
    return {
        "intra_node": intra,
        "intra_node_gbs": intra_gbs,
        "inter_node": inter,
        "inter_node_gbps": inter_gbps,
    }


_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?"
"""A number as GpuInfo writes one, exponent included (`2.4576e4` MiB is 24 GiB, not 2.4576 MiB)."""


class RowError(ValueError):
    """A bad row, with the frame's index of it (`read_vms` makes that the file's line)."""

    def __init__(self, message: str, row) -> None:
        super().__init__(message)
        self.row = row


def read_vms(file: Path, **options) -> pd.DataFrame:
    """A vms.csv with each row indexed by its line in the file (the header is line 1; blank lines count), so
    every error names `file:LINE` as the user's editor shows it."""
    frame = pd.read_csv(file, skip_blank_lines=False, **options)
    frame.index = frame.index + 2
    return frame.dropna(how="all")


def _gpu_mib(gpu_info, count) -> float:
    """Per-GPU MiB from SkyPilot's GpuInfo (a Python-dict-like string)."""
    if not isinstance(gpu_info, str):
        return math.nan
    m = re.search(rf"SizeInMiB['\"]?\s*:\s*({_NUMBER})", gpu_info)
    if m:
        return float(m.group(1))
    m = re.search(rf"TotalGpuMemoryInMiB['\"]?\s*:\s*({_NUMBER})", gpu_info)
    return float(m.group(1)) / count if m and count else math.nan


def _join(*parts: str) -> str:
    return ";".join(p for p in parts if p)


def clean_prices(
    on_demand: float, spot: float, provider: str
) -> tuple[float, float, list[str]]:
    """Blank prices that are not usable as prices; return the tags explaining why.

    - spot 0: a placeholder (Vast), not a free machine;
    - spot >= 99% of on-demand: no spot discount offered, not a real spot market;
    - AWS spot at exactly 10% of on-demand: a regional price floor, not a capacity signal.
    """
    notes = []
    if not (on_demand > 0):
        if not (isinstance(on_demand, float) and math.isnan(on_demand)):
            notes.append("price_nonpositive")
        on_demand = math.nan
        notes.append("no_on_demand_price")
    if not (spot > 0):
        if spot == 0:
            notes.append("spot_zero")
        spot = math.nan
    elif on_demand > 0 and spot >= 0.99 * on_demand:
        spot, notes = math.nan, notes + ["spot_no_discount"]
    elif provider == "aws" and on_demand > 0 and abs(spot / on_demand - 0.1) < 1e-3:
        spot, notes = math.nan, notes + ["spot_price_floor"]
    return on_demand, spot, notes


def _as_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def import_skypilot(
    df: pd.DataFrame,
    provider: str,
    gpu_aliases: dict[str, str],
    resolve_gpu: Callable[[str, str, float], str | None] | None = None,
    keep_facts: bool = False,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Convert a SkyPilot vms.csv (or the lower-case shared offers layout) to offers.

    ``gpu_aliases`` maps provider/SkyPilot GPU names to canonical names (matched
    case-insensitively).  ``resolve_gpu(instance_type, accelerator_name, mib_per_gpu)``
    may return a canonical name first, for names whose meaning depends on the
    provider's instance type or memory (e.g. RunPod ``H100`` = PCIe).
    Rows without GPUs or with fractional GPU counts are dropped; zones are
    collapsed per region (spot = min over zones); unknown GPU names raise ValueError.

    ``keep_facts=True`` (user files) then takes interconnect, preemption and other facts the
    shipped catalog knows (``shipped``, else catalogs/offers/<provider>.csv) in place of the
    default rules, so an imported p5.48xlarge keeps EFA 3200 Gbit/s instead of Ethernet 25
    (see ``planner.offer_facts.keep_known_facts``).  Off by default because
    tools/build_catalogs.py builds the shipped catalog itself with this function.
    """
    d = df.rename(columns=_SKYPILOT_COLUMNS).copy()
    for col in ("instance_type", "accelerator_name", "accelerator_count", "region"):
        if col not in d:
            raise ValueError(f"missing column {col!r} (or its SkyPilot equivalent)")
    for col in (
        "vcpus",
        "memory_gib",
        "price_usd_per_hour",
        "spot_price_usd_per_hour",
        "gpu_memory_mib_per_gpu",
        "gpu_info",
    ):
        if col not in d:
            d[col] = math.nan
    d["accelerator_count"] = pd.to_numeric(d["accelerator_count"], errors="coerce")
    d = d[d["accelerator_name"].notna() & (d["accelerator_count"] > 0)]
    d = d[d["accelerator_count"] == d["accelerator_count"].round()]
    d["accelerator_count"] = d["accelerator_count"].astype(int)
    mib = pd.to_numeric(d["gpu_memory_mib_per_gpu"], errors="coerce")
    from_info = [_gpu_mib(i, c) for i, c in zip(d["gpu_info"], d["accelerator_count"])]
    d["gpu_memory_mib_per_gpu"] = mib.fillna(pd.Series(from_info, index=d.index))
    for col in ("vcpus", "memory_gib", "price_usd_per_hour", "spot_price_usd_per_hour"):
        d[col] = pd.to_numeric(d[col], errors="coerce")

    aliases = {k.upper(): v for k, v in gpu_aliases.items()}
    canon = []
    for idx, r in d.iterrows():
        name = str(r["accelerator_name"])
        gpu = (
            resolve_gpu(r["instance_type"], name, r["gpu_memory_mib_per_gpu"])
            if resolve_gpu
            else None
        )
        gpu = gpu or aliases.get(name.upper())
        if gpu is None:
            raise RowError(
                f"unknown GPU name {name!r} (instance_type={r['instance_type']!r}, "
                f"region={r['region']!r}); add it to the aliases of a GPU in catalogs/gpus.csv",
                idx,
            )
        canon.append(gpu)
    d["gpu"] = canon

    key = ["instance_type", "gpu", "accelerator_count", "region"]
    rows = []
    for k, g in d.groupby(key, sort=True, dropna=False):
        it, gpu, n, region = k
        spot_raw = g["spot_price_usd_per_hour"]
        # a 0 spot is a placeholder: ignore it in the min unless it is all there is
        spot = spot_raw[spot_raw > 0].min() if (spot_raw > 0).any() else spot_raw.max()
        od, spot, notes = clean_prices(
            _as_float(g["price_usd_per_hour"].min()), _as_float(spot), provider
        )
        if len(g) > 1 and ("zone" not in g or g["zone"].isna().all()):
            notes.append("duplicate_rows_merged")
        ic = interconnect_defaults(provider, gpu, int(n))
        defaults = ["intra_node", "intra_node_gbs", "inter_node"]
        if ic["inter_node_gbps"] is not None:
            defaults.append("inter_node_gbps")
        preempt = math.nan
        if spot > 0:
            preempt = SPOT_PREEMPTION_DEFAULT.get(provider, SPOT_PREEMPTION_FALLBACK)
            defaults.append("spot_preemption_per_h")
        mib_v = g["gpu_memory_mib_per_gpu"].max()
        rows.append(
            {
                "provider": provider,
                "region": region,
                "instance_type": it,
                "gpu": gpu,
                "gpus_per_node": int(n),
                "vcpus": g["vcpus"].iloc[0],
                "ram_gib": g["memory_gib"].iloc[0],
                "gpu_vram_gib": round(mib_v / 1024, 2) if mib_v == mib_v else math.nan,
                **ic,
                "on_demand_usd_h": od,
                "spot_usd_h": spot,
                "spot_preemption_per_h": preempt,
                "max_nodes": math.nan,
                "defaults": _join(*defaults),
                "notes": _join(*notes),
            }
        )
    out = pd.DataFrame(rows, columns=OFFER_COLUMNS)
    out = out.sort_values(
        ["instance_type", "region", "gpu"], kind="mergesort"
    ).reset_index(drop=True)
    if keep_facts:
        from planner.load.offer_facts import (
            keep_known_facts,  # needs the catalog loader; the build script does not
        )

        out = keep_known_facts(out, shipped)
    return out


def gpu_aliases(gpus: pd.DataFrame) -> dict[str, str]:
    """alias -> canonical name, from gpus.csv's `aliases` column (each name maps to itself too)."""
    out = {}
    for _, row in gpus.iterrows():
        out[row["name"]] = row["name"]
        for alias in str(row.get("aliases") or "").split(";"):
            if alias:
                out[alias] = row["name"]
    return out


def catalog_header(
    source: str, as_of: str, built_by: str = "planner catalog import"
) -> str:
    """The `# key: value` lines every offers catalog starts with (each value kept on one line)."""
    source, as_of, built_by = (
        " ".join(str(v).split()) for v in (source, as_of, built_by)
    )
    return f"# source: {source}\n# as_of: {as_of}\n# built_by: {built_by}\n"


def import_skypilot_file(file: Path, provider: str) -> pd.DataFrame:
    """`catalog import --from skypilot`: a SkyPilot vms.csv as this project's offers, refused like every
    input file, keeping the shipped catalog's facts, with the GPU's marketed memory where the source
    has no GpuInfo (marked as defaulted)."""
    from planner.errors import PlannerError, did_you_mean
    from planner.load.catalog import (
        CATALOG_DIR,
        load_gpus,
        load_providers,
        read_table_file,
    )

    providers = load_providers()
    if provider not in providers:
        raise PlannerError(
            f"unknown provider {provider!r}{did_you_mean(provider, providers)}; "
            f"known: {', '.join(sorted(providers))}",
            "--provider",
        )
    read_table_file(file, "SkyPilot catalog")  # the same refusals as every input file
    frame = read_vms(file)
    if "AcceleratorCount" in frame:
        counts = pd.to_numeric(frame["AcceleratorCount"], errors="coerce")
        absurd = counts[(counts > MAX_GPUS_PER_NODE) | (counts == math.inf)]
        if not absurd.empty:  # a count past int64 would be written as a negative number
            raise PlannerError(
                f"AcceleratorCount {absurd.iloc[0]:g}: expected a whole number of at most "
                f"{MAX_GPUS_PER_NODE} GPUs per node",
                f"{file}:{absurd.index[0]}",
            )
    gpus = load_gpus()
    try:
        converted = import_skypilot(
            frame,
            provider,
            gpu_aliases(pd.read_csv(CATALOG_DIR / "gpus.csv", keep_default_na=False)),
            keep_facts=True,
        )
    except RowError as exc:
        raise PlannerError(str(exc), f"{file}:{exc.row}") from None
    except ValueError as exc:
        raise PlannerError(str(exc), str(file)) from None
    missing_vram = converted["gpu_vram_gib"].isna()
    if missing_vram.any():
        converted.loc[missing_vram, "gpu_vram_gib"] = converted.loc[
            missing_vram, "gpu"
        ].map({name: gpu.vram_gib for name, gpu in gpus.items()})
        converted.loc[missing_vram, "defaults"] = (
            converted.loc[missing_vram, "defaults"]
            .fillna("")
            .map(lambda d: ";".join(filter(None, [d, "gpu_vram_gib"])))
        )
    if converted.empty:
        raise PlannerError(
            "no GPU offers found (expected rows with AcceleratorName and AcceleratorCount)",
            str(file),
        )
    return converted


def check_imported(converted: pd.DataFrame, text: str, file: Path) -> None:
    """What `catalog import` would write must load as a catalog; checked before anything is written, and a row
    that does not load is named at its first line in the input `file` (SkyPilot rows merge per region)."""
    from planner.errors import PlannerError
    from planner.load.catalog import offers_text_error

    found = offers_text_error(text)
    if not found:
        return
    exc, index = found
    if index is None:
        raise PlannerError(exc.message, str(file))
    row = converted.iloc[index]
    source = read_vms(file, dtype=str)

    def same(
        column: str, value
    ) -> pd.Series:  # a blank cell is NaN on both sides: match it as ""
        return source[column].fillna("") == ("" if pd.isna(value) else str(value))

    match = source.index[
        same("InstanceType", row["instance_type"]) & same("Region", row["region"])
    ]
    line = f":{match[0]}" if len(match) else ""
    name = "no InstanceType" if pd.isna(row["instance_type"]) else row["instance_type"]
    region = "no Region" if pd.isna(row["region"]) else row["region"]
    raise PlannerError(f"{exc.message} ({name} in {region})", f"{file}{line}")
