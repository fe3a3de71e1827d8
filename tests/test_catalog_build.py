"""Tests of planner.load.skypilot on small inline frames (no shared data)."""

import math
from pathlib import Path

import pandas as pd
import pytest

from planner.load.skypilot import OFFER_COLUMNS, import_skypilot, interconnect_defaults

ALIASES = {
    "A10G": "A10G",
    "H100": "H100-SXM",
    "A100": "A100-40GB",
    "A100-80GB": "A100-80GB",
}


def sky(rows):
    cols = [
        "InstanceType",
        "AcceleratorName",
        "AcceleratorCount",
        "vCPUs",
        "MemoryGiB",
        "GpuInfo",
        "Price",
        "SpotPrice",
        "Region",
        "AvailabilityZone",
    ]
    return pd.DataFrame(rows, columns=cols)


GI = "{'Gpus': [{'Name': 'A10G', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 22888}}], 'TotalGpuMemoryInMiB': 22888}"


def test_zone_collapse_takes_min_spot_and_parses_gpuinfo():
    df = sky(
        [
            ["g5.xlarge", "A10G", 1, 4, 16, GI, 1.006, 0.45, "us-east-1", "us-east-1a"],
            ["g5.xlarge", "A10G", 1, 4, 16, GI, 1.006, 0.40, "us-east-1", "us-east-1b"],
            ["g5.xlarge", "A10G", 1, 4, 16, GI, 1.006, None, "us-east-1", "us-east-1c"],
            ["g5.xlarge", "A10G", 1, 4, 16, GI, 1.2, 0.5, "eu-west-1", "eu-west-1a"],
        ]
    )
    out = import_skypilot(df, "aws", ALIASES)
    assert list(out.columns) == OFFER_COLUMNS
    assert len(out) == 2
    r = out.set_index("region").loc["us-east-1"]
    assert r.spot_usd_h == 0.40 and r.on_demand_usd_h == 1.006
    assert r.gpu_vram_gib == 22.35 and r.gpu == "A10G"
    assert r.intra_node == "pcie" and "spot_preemption_per_h" in r.defaults.split(";")
    assert r.spot_preemption_per_h > 0
    assert r.notes == ""  # zones are not duplicates


def test_drops_rows_without_gpus_and_fractional_counts():
    df = sky(
        [
            ["m5.large", None, None, 2, 8, None, 0.1, 0.03, "us-east-1", "us-east-1a"],
            ["g6f.large", "L4", 0.125, 2, 8, None, 0.2, 0.1, "us-east-1", "us-east-1a"],
            [
                "p5.48xlarge",
                "H100",
                8,
                192,
                2048,
                None,
                98.32,
                40.0,
                "us-east-1",
                "us-east-1a",
            ],
        ]
    )
    out = import_skypilot(df, "aws", ALIASES)
    assert list(out.instance_type) == ["p5.48xlarge"]
    r = out.iloc[0]
    assert r.gpu == "H100-SXM" and r.intra_node == "nvlink" and r.intra_node_gbs == 900


def test_alias_mapping_is_case_insensitive_and_resolver_wins():
    df = sky(
        [
            ["x", "h100", 1, 8, 32, None, 2.0, None, "r", None],
            ["y", "A100", 1, 8, 32, None, 2.0, None, "r", None],
        ]
    )
    out = import_skypilot(
        df,
        "runpod",
        ALIASES,
        resolve_gpu=lambda it, name, mib: "H100-PCIe" if it == "x" else None,
    )
    assert dict(zip(out.instance_type, out.gpu)) == {"x": "H100-PCIe", "y": "A100-40GB"}
    assert (out.inter_node == "none").all()


def test_unknown_gpu_raises_with_name_and_row():
    df = sky(
        [
            [
                "g4ad.xlarge",
                "Radeon Pro V520",
                1,
                4,
                16,
                None,
                0.38,
                0.1,
                "us-east-1",
                "a",
            ]
        ]
    )
    with pytest.raises(ValueError, match=r"Radeon Pro V520") as raised:
        import_skypilot(df, "aws", ALIASES)
    # the frame's index: the file's line where `read_vms` read it
    assert raised.value.row == 0


def test_price_oddities():
    df = sky(
        [
            ["a", "A10G", 1, 4, 16, None, 1.0, 1.0, "r1", "z"],  # spot == on-demand
            ["a", "A10G", 1, 4, 16, None, 1.0, 0.995, "r2", "z"],  # >= 99 %
            ["a", "A10G", 1, 4, 16, None, 1.0, 0.1, "r3", "z"],  # AWS 10 % floor
            ["a", "A10G", 1, 4, 16, None, None, 0.3, "r4", "z"],  # no on-demand: kept
            ["a", "A10G", 1, 4, 16, None, 1.0, 0.0, "r5", "z"],  # placeholder 0 spot
            ["a", "A10G", 1, 4, 16, None, 1.0, 0.3, "r6", "z"],  # normal
        ]
    )
    out = import_skypilot(df, "aws", ALIASES).set_index("region")
    assert (
        math.isnan(out.loc["r1", "spot_usd_h"])
        and "spot_no_discount" in out.loc["r1", "notes"]
    )
    assert (
        math.isnan(out.loc["r2", "spot_usd_h"])
        and "spot_no_discount" in out.loc["r2", "notes"]
    )
    assert (
        math.isnan(out.loc["r3", "spot_usd_h"])
        and "spot_price_floor" in out.loc["r3", "notes"]
    )
    assert (
        math.isnan(out.loc["r4", "on_demand_usd_h"])
        and out.loc["r4", "spot_usd_h"] == 0.3
    )
    assert "no_on_demand_price" in out.loc["r4", "notes"]
    assert (
        math.isnan(out.loc["r5", "spot_usd_h"])
        and "spot_zero" in out.loc["r5", "notes"]
    )
    assert math.isnan(out.loc["r5", "spot_preemption_per_h"])
    assert out.loc["r6", "spot_usd_h"] == 0.3 and out.loc["r6", "notes"] == ""
    # the 10 % floor rule is AWS-only: elsewhere a deep discount is a real price
    out_az = import_skypilot(df, "azure", ALIASES).set_index("region")
    assert out_az.loc["r3", "spot_usd_h"] == 0.1


def test_lowercase_shared_layout_and_duplicates():
    df = pd.DataFrame(
        {
            "instance_type": ["2x_B200_SECURE", "2x_B200_SECURE"],
            "accelerator_name": ["B200", "B200"],
            "accelerator_count": [2, 2],
            "vcpus": [72.0, 72.0],
            "memory_gib": [None, None],
            "gpu_memory_mib_per_gpu": [184320, 184320],
            "region": ["US", "US"],
            "price_usd_per_hour": [11.98, 11.98],
            "spot_price_usd_per_hour": [None, None],
            "spot_price_max_across_azs": [None, None],
            "n_azs_listed": [14, 14],
            "n_azs_with_spot": [0, 0],
        }
    )
    out = import_skypilot(df, "runpod", {"B200": "B200"})
    assert len(out) == 1
    r = out.iloc[0]
    assert (
        r.gpu_vram_gib == 180.0
        and r.intra_node == "nvlink"
        and r.intra_node_gbs == 1800
    )
    assert "duplicate_rows_merged" in r.notes and math.isnan(r.spot_preemption_per_h)


def test_interconnect_defaults_rule():
    assert interconnect_defaults("aws", "L4", 8)["intra_node_gbs"] == 64
    assert interconnect_defaults("aws", "H100-PCIe", 2)["intra_node"] == "pcie"
    assert interconnect_defaults("gcp", "T4", 1) == {
        "intra_node": "pcie",
        "intra_node_gbs": 32,
        "inter_node": "ethernet",
        "inter_node_gbps": 25,
    }
    assert interconnect_defaults("vast", "H200", 8)["inter_node"] == "none"


CATALOGS = Path(__file__).resolve().parents[1] / "catalogs"


@pytest.mark.skipif(not (CATALOGS / "gpus.csv").exists(), reason="catalogs not built")
def test_shipped_offers_reference_known_gpus():
    gpus = pd.read_csv(CATALOGS / "gpus.csv")
    names = set(gpus.name)
    for f in sorted((CATALOGS / "offers").glob("*.csv")):
        off = pd.read_csv(f, comment="#")
        assert set(off.gpu) <= names, f.name
        assert set(off.intra_node) <= {"nvlink", "pcie"}
        assert set(off.inter_node) <= {"infiniband", "efa", "roce", "ethernet", "none"}
        has_rate = off.spot_preemption_per_h.notna()
        assert (off.spot_usd_h.notna() == has_rate).all(), f.name
