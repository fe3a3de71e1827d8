"""Price refresh from the Azure / AWS public price lists, and keeping the shipped facts
(planner.offer_facts) when prices come from a source that does not know them.

All responses are recorded, hand-written files in tests/data/refresh/ (see its README);
fetch functions get fake session objects, so nothing here touches the network.
"""

from __future__ import annotations

import io
import json
import math
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from planner.errors import PlannerError
from planner.load.catalog import (
    CATALOG_DIR,
    load_catalog,
    load_gpus,
    load_providers,
    read_offers,
)
from planner.load.offer_facts import (
    OTHER_REGION_TAG,
    SAME_REGION_TAG,
    keep_known_facts,
    load_shipped_offers,
)
from planner.load.refresh import write_offers_csv
from planner.load.refresh_aws import aws_offers, aws_spot_prices, fetch_aws_offer_file
from planner.load.refresh_azure import (
    AZURE_FILTER,
    AZURE_PRICES_URL,
    azure_offers,
    fetch_azure,
)
from planner.load.skypilot import gpu_aliases, import_skypilot

DATA = Path(__file__).resolve().parent / "data" / "refresh"
AWS_FILE = DATA / "aws_ec2_us-east-1.json"


def azure_pages() -> list[dict]:
    return [json.loads((DATA / f"azure_page{i}.json").read_text()) for i in (1, 2)]


@pytest.fixture(scope="module")
def gpus():
    return load_gpus()


@pytest.fixture(scope="module")
def azure(gpus):
    return azure_offers(azure_pages(), gpus)


@pytest.fixture(scope="module")
def aws(gpus):
    return aws_offers(AWS_FILE, gpus)


def row(frame: pd.DataFrame, region: str, instance_type: str) -> pd.Series:
    hit = frame[(frame.region == region) & (frame.instance_type == instance_type)]
    assert len(hit) == 1, (region, instance_type, frame[["region", "instance_type"]])
    return hit.iloc[0]


# ---------------------------------------------------------------- fakes (no network)


class FakeResponse:
    def __init__(self, status: int = 200, payload=None, body: bytes = b""):
        self.status_code, self.payload, self.body, self.closed = (
            status,
            payload,
            body,
            False,
        )

    @property
    def text(self) -> str:
        return (
            json.dumps(self.payload) if self.payload is not None else self.body.decode()
        )

    def json(self):
        if self.payload is None:
            raise ValueError("not JSON")
        return self.payload

    def iter_content(self, chunk_size: int = 1):
        for i in range(0, len(self.body), chunk_size):
            yield self.body[i : i + chunk_size]

    def close(self) -> None:
        self.closed = True


class FakeSession:
    """Answers GETs from a list of responses (or raises an exception), recording each call."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def get(self, url, **kwargs):
        self.calls.append((url, kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


# ---------------------------------------------------------------- Azure


def test_azure_prices_parsed_and_variants_skipped(azure):
    nd = row(azure, "eastus", "Standard_ND96asr_v4")
    assert nd.on_demand_usd_h == 27.197  # Linux, not Windows (31.613) or DevTest (20.0)
    assert nd.spot_usd_h == 2.95  # " Spot" meter, not Low Priority (5.4394)
    nc = row(azure, "westus3", "Standard_NC24ads_A100_v4")
    assert (nc.on_demand_usd_h, nc.spot_usd_h) == (3.673, 0.40403)
    # spot == on-demand is no spot market (the importer's rule), and then no preemption rate
    h100 = row(azure, "eastus", "Standard_ND96isr_H100_v5")
    assert math.isnan(h100.spot_usd_h) and "spot_no_discount" in h100.notes
    assert math.isnan(h100.spot_preemption_per_h)
    assert (
        len(azure) == 4
        and azure[["region", "instance_type"]].drop_duplicates().shape[0] == 4
    )


def test_azure_unknown_sizes_are_dropped_and_counted(azure):
    assert "Standard_ND96isr_H200_v5" not in set(azure.instance_type)
    assert azure.attrs["unknown_instance_types"] == ["Standard_ND96isr_H200_v5"]
    assert azure.attrs["dropped_rows"] == 1


def test_azure_nd96asr_v4_keeps_infiniband_and_gpu_facts(azure):
    nd = row(azure, "eastus", "Standard_ND96asr_v4")
    assert (nd.gpu, nd.gpus_per_node, nd.vcpus, nd.ram_gib) == ("A100-40GB", 8, 96, 900)
    assert (nd.intra_node, nd.intra_node_gbs, nd.inter_node, nd.inter_node_gbps) == (
        "nvlink",
        600,
        "infiniband",
        1600,
    )
    assert SAME_REGION_TAG in nd.notes.split(";")
    # the shipped tag explaining the VRAM it took
    assert "gpu_vram_from_model" in nd.notes
    # ND H100 v5 keeps the shipped 12 -> 8 GPU correction, and says so
    h100 = row(azure, "eastus", "Standard_ND96isr_H100_v5")
    assert h100.gpus_per_node == 8 and "gpu_count_corrected_12_to_8" in h100.notes


def test_azure_region_not_shipped_borrows_facts_but_not_the_regional_rate(azure):
    sweden = row(azure, "swedencentral", "Standard_ND96asr_v4")
    assert sweden.inter_node == "infiniband" and OTHER_REGION_TAG in sweden.notes.split(
        ";"
    )
    # the provider default ...
    assert sweden.spot_usd_h == 3.5 and sweden.spot_preemption_per_h == 0.24
    assert "spot_preemption_per_h" in sweden.defaults.split(";")  # ... marked as one


def test_fetch_azure_follows_next_page_link():
    first, second = azure_pages()
    session = FakeSession(FakeResponse(payload=first), FakeResponse(payload=second))
    pages = list(fetch_azure(session=session))
    assert [len(p["Items"]) for p in pages] == [6, 6]
    (url1, kw1), (url2, kw2) = session.calls
    assert (
        url1 == AZURE_PRICES_URL
        and kw1["params"] == {"$filter": AZURE_FILTER}
        and kw1["timeout"] > 0
    )
    assert url2 == first["NextPageLink"] and "params" not in kw2
    assert (
        "startswith(armSkuName, 'Standard_N')" in AZURE_FILTER
        and "priceType eq 'Consumption'" in AZURE_FILTER
    )


def test_fetch_azure_offline_is_one_clear_line():
    session = FakeSession(
        ConnectionError(
            "[Errno -3] Temporary failure in name resolution\n  (more detail)"
        )
    )
    with pytest.raises(PlannerError) as err:
        list(fetch_azure(session=session))
    text = str(err.value)
    assert "\n" not in text
    assert (
        text.startswith("cannot reach the Azure Retail Prices API")
        and "network" in text
    )


def test_fetch_azure_api_error_and_bad_answers():
    with pytest.raises(PlannerError, match="answered HTTP 400"):
        list(
            fetch_azure(
                session=FakeSession(
                    FakeResponse(400, payload={"Error": {"Message": "Invalid filter"}})
                )
            )
        )
    with pytest.raises(PlannerError, match="not JSON"):
        list(fetch_azure(session=FakeSession(FakeResponse(200, body=b"<html>"))))
    looping = {"Items": [], "NextPageLink": AZURE_PRICES_URL + "?$skip=1000"}
    with pytest.raises(PlannerError, match="more than 2 pages"):
        list(
            fetch_azure(
                session=FakeSession(*[FakeResponse(payload=looping)] * 3), max_pages=2
            )
        )
    elsewhere = {"Items": [], "NextPageLink": "https://example.com/steal"}
    with pytest.raises(PlannerError, match="off prices.azure.com"):
        list(fetch_azure(session=FakeSession(FakeResponse(payload=elsewhere))))


# ---------------------------------------------------------------- AWS


def test_aws_prices_parsed_and_variants_skipped(aws):
    p5 = row(aws, "us-east-1", "p5.48xlarge")
    # Linux/Shared/Used/OnDemand only: not Windows 62.153, Dedicated 60.544, Capacity Block 31.464, reservation 0
    assert p5.on_demand_usd_h == 54.321
    assert (p5.vcpus, p5.ram_gib) == (192, 2048)  # from the offer file itself
    assert set(aws.instance_type) == {
        "p5.48xlarge",
        "g5.xlarge",
    }  # m7i.large: not a shipped GPU type


def test_aws_refreshed_p5_keeps_efa_and_h100s(aws):
    p5 = row(aws, "us-east-1", "p5.48xlarge")
    assert (p5.gpu, p5.gpus_per_node) == ("H100-SXM", 8)
    assert (p5.intra_node, p5.intra_node_gbs, p5.inter_node, p5.inter_node_gbps) == (
        "nvlink",
        900,
        "efa",
        3200,
    )
    assert "inter_node" not in p5.defaults.split(";")


def test_aws_without_spot_api_keeps_shipped_spot_and_says_so(aws):
    shipped = load_shipped_offers("aws")
    old = shipped[
        (shipped.region == "us-east-1") & (shipped.instance_type == "p5.48xlarge")
    ].iloc[0]
    p5 = row(aws, "us-east-1", "p5.48xlarge")
    assert (
        p5.spot_usd_h == old.spot_usd_h
        and p5.spot_preemption_per_h == old.spot_preemption_per_h
    )
    assert "spot_price_from_shipped_catalog" in p5.notes.split(";")


def test_aws_spot_prices_given_are_used(gpus):
    spot = pd.DataFrame(
        [{"region": "us-east-1", "instance_type": "p5.48xlarge", "spot_usd_h": 12.5}]
    )
    out = aws_offers(AWS_FILE, gpus, spot_prices=spot)
    p5 = row(out, "us-east-1", "p5.48xlarge")
    assert p5.spot_usd_h == 12.5 and "spot_price_from_shipped_catalog" not in p5.notes
    # no spot price given for it
    assert math.isnan(row(out, "us-east-1", "g5.xlarge").spot_usd_h)
    # an empty answer (no spot market for these types) is not "no source": spot stays blank
    none = aws_offers(AWS_FILE, gpus, spot_prices=spot.iloc[:0])
    p5 = row(none, "us-east-1", "p5.48xlarge")
    assert math.isnan(p5.spot_usd_h) and math.isnan(p5.spot_preemption_per_h)


def test_aws_offer_file_is_read_as_a_stream_in_any_order(gpus):
    """Tiny read chunks and `terms` before `products` give the same result as one read."""
    doc = json.loads(AWS_FILE.read_text())
    reordered = json.dumps(
        {"terms": doc["terms"], "formatVersion": 1.0, "products": doc["products"]},
        indent=1,
    )
    whole = aws_offers(AWS_FILE, gpus)
    streamed = aws_offers(io.StringIO(reordered), gpus, chunk_chars=5)
    pd.testing.assert_frame_equal(whole, streamed)
    with pytest.raises(PlannerError, match="not an AWS price-list JSON file"):
        aws_offers(io.StringIO('{"products": {"x": [1, 2'), gpus)


def test_fetch_aws_offer_file_streams_to_a_temp_file(tmp_path, gpus):
    body = AWS_FILE.read_bytes()
    response = FakeResponse(body=body)
    session = FakeSession(response)
    path = fetch_aws_offer_file(
        "us-east-1", session=session, directory=tmp_path, chunk_bytes=1000
    )
    assert path.parent == tmp_path and path.read_bytes() == body and response.closed
    url, kwargs = session.calls[0]
    assert (
        url.endswith("/AmazonEC2/current/us-east-1/index.json")
        and kwargs["stream"]
        and kwargs["timeout"] > 0
    )
    assert (
        row(aws_offers(path, gpus), "us-east-1", "p5.48xlarge").on_demand_usd_h
        == 54.321
    )


def test_fetch_aws_offer_file_errors(tmp_path):
    with pytest.raises(PlannerError, match="HTTP 404"):
        fetch_aws_offer_file(
            "xx-nowhere-9", session=FakeSession(FakeResponse(404)), directory=tmp_path
        )
    with pytest.raises(PlannerError) as err:
        fetch_aws_offer_file(
            "us-east-1",
            session=FakeSession(OSError("Network is unreachable")),
            directory=tmp_path,
        )
    assert "\n" not in str(err.value) and str(err.value).startswith(
        "cannot reach the AWS price list"
    )
    with pytest.raises(PlannerError, match="not an AWS region"):
        fetch_aws_offer_file("../../etc", session=FakeSession(), directory=tmp_path)
    assert list(tmp_path.iterdir()) == []  # no half-downloaded file left behind


class FakeEc2:
    def __init__(self, history):
        self.history, self.kwargs = history, None

    def get_paginator(self, name):
        assert name == "describe_spot_price_history"
        return self

    def paginate(self, **kwargs):
        self.kwargs = kwargs
        return [
            {"SpotPriceHistory": self.history[:2]},
            {"SpotPriceHistory": self.history[2:]},
        ]


class FakeBotoSession:
    def __init__(self, credentials, history):
        self.credentials, self.ec2 = credentials, FakeEc2(history)

    def get_credentials(self):
        return self.credentials

    def client(self, service, region_name):
        assert service == "ec2"
        return self.ec2


def test_aws_spot_prices_latest_per_zone_then_cheapest_zone():
    now = datetime(2025, 6, 1, tzinfo=UTC)
    history = [
        {
            "InstanceType": "p5.48xlarge",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "20.0",
            "Timestamp": now - timedelta(hours=5),
        },
        {
            "InstanceType": "p5.48xlarge",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "16.0",
            "Timestamp": now,
        },
        {
            "InstanceType": "p5.48xlarge",
            "AvailabilityZone": "us-east-1b",
            "SpotPrice": "18.0",
            "Timestamp": now,
        },
        {
            "InstanceType": "g5.xlarge",
            "AvailabilityZone": "us-east-1b",
            "SpotPrice": "0.41",
            "Timestamp": now,
        },
    ]
    session = FakeBotoSession(object(), history)
    out = aws_spot_prices(["us-east-1"], ["p5.48xlarge", "g5.xlarge"], session=session)
    assert dict(zip(out.instance_type, out.spot_usd_h)) == {
        "g5.xlarge": 0.41,
        "p5.48xlarge": 16.0,
    }
    assert session.ec2.kwargs["ProductDescriptions"] == ["Linux/UNIX"]
    assert (
        aws_spot_prices(
            ["us-east-1"], ["p5.48xlarge"], session=FakeBotoSession(None, history)
        )
        is None
    )


def test_aws_spot_prices_without_boto3_is_none(monkeypatch):
    # `import boto3` now fails, as when not installed
    monkeypatch.setitem(sys.modules, "boto3", None)
    assert aws_spot_prices(["us-east-1"], ["p5.48xlarge"]) is None


# ---------------------------------------------------------------- writing, loading, solving


def test_written_csv_loads_and_a_plan_solves_on_it(tmp_path, aws, run, scenario_file):
    path = tmp_path / "aws-refreshed.csv"
    today = date.today().isoformat()
    write_offers_csv(aws, path, source=f"AWS price list {AWS_FILE.name}", as_of=today)
    lines = path.read_text().splitlines()
    assert (
        lines[0] == f"# source: AWS price list {AWS_FILE.name}"
        and lines[1] == f"# as_of: {today}"
    )
    assert lines[3].startswith("provider,region,instance_type,gpu,")
    assert (
        "p5.48xlarge,H100-SXM,8,192,2048,80,nvlink,900,efa,3200,54.321,"
        in path.read_text()
    )
    assert [p.name for p in tmp_path.iterdir()] == [
        path.name
    ]  # the temp file was renamed, not left
    frame, meta = read_offers(path, load_gpus(), load_providers())
    assert meta["as_of"] == today and len(frame) == 2
    catalog = load_catalog([str(path)])
    assert catalog.offer_models["aws/us-east-1/p5.48xlarge"].inter_node_gbps == 3200
    scenario = scenario_file(
        "name: refreshed\ncatalogs: [aws-refreshed.csv]\nworkloads:\n  - name: job\n"
        "    kind: training\n    memory: {per_gpu: 20GiB}\n"
        "    work: {gpu_hours: 10, reference_gpu: H100-SXM}\n"
    )
    assert scenario.parent == tmp_path
    result = run("solve", scenario, "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["status"] in ("OPTIMAL", "FEASIBLE") and plan["assignments"]


def test_written_azure_csv_loads(tmp_path, azure):
    path = tmp_path / "azure.csv"
    write_offers_csv(azure, path, source="Azure Retail Prices API", as_of="2025-06-01")
    frame, _ = read_offers(path, load_gpus(), load_providers())
    nd = frame[
        (frame.region == "eastus") & (frame.instance_type == "Standard_ND96asr_v4")
    ].iloc[0]
    assert nd.inter_node == "infiniband" and nd.spot_usd_h == 2.95


def test_write_rejects_a_non_iso_as_of(tmp_path, aws):
    for bad in ("01/06/2025", "2025-06-01T10:00:00Z", "e385a0d3"):
        with pytest.raises(PlannerError, match="ISO date"):
            write_offers_csv(aws, tmp_path / "x.csv", source="s", as_of=bad)
    assert not (tmp_path / "x.csv").exists()


# ---------------------------------------------------------------- keep_known_facts and the importer


SKYPILOT_P5 = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone
p5.48xlarge,H100,8,192,2048,,98.32,40.0,us-east-1,us-east-1a
p5.48xlarge,H100,8,192,2048,,98.32,38.0,us-east-1,us-east-1b
g5.xlarge,A10G,1,4,16,,1.006,0.40,us-east-1,us-east-1a
"""


def test_import_skypilot_keeps_efa_for_p5(tmp_path):
    source = tmp_path / "vms.csv"
    source.write_text(SKYPILOT_P5)
    aliases = gpu_aliases(pd.read_csv(CATALOG_DIR / "gpus.csv", keep_default_na=False))
    plain = import_skypilot(pd.read_csv(source), "aws", aliases)
    # the default rule alone
    assert row(plain, "us-east-1", "p5.48xlarge").inter_node == "ethernet"
    kept = import_skypilot(pd.read_csv(source), "aws", aliases, keep_facts=True)
    p5 = row(kept, "us-east-1", "p5.48xlarge")
    assert (
        p5.gpu,
        p5.gpus_per_node,
        p5.intra_node,
        p5.inter_node,
        p5.inter_node_gbps,
    ) == ("H100-SXM", 8, "nvlink", "efa", 3200)
    # prices stay the source's
    assert p5.on_demand_usd_h == 98.32 and p5.spot_usd_h == 38.0
    assert not {"intra_node", "inter_node", "inter_node_gbps"} & set(
        p5.defaults.split(";")
    )
    assert SAME_REGION_TAG in p5.notes.split(";")
    # the shipped g5 interconnect is itself a default: still listed
    g5 = row(kept, "us-east-1", "g5.xlarge")
    assert g5.inter_node == "ethernet" and "inter_node" in g5.defaults.split(";")


def test_keep_known_facts_never_overwrites_a_real_source_value():
    frame = pd.DataFrame(
        [
            # the source really says RoCE 400 (not in defaults): kept; intra-node unknown: taken
            {
                "provider": "aws",
                "region": "us-east-1",
                "instance_type": "p5.48xlarge",
                "inter_node": "roce",
                "inter_node_gbps": 400,
                "spot_usd_h": 20.0,
                "defaults": "",
                "notes": "",
            },
            # another region than any shipped one: facts borrowed, the regional preemption rate not
            {
                "provider": "aws",
                "region": "mars-north-1",
                "instance_type": "p5.48xlarge",
                "spot_usd_h": 20.0,
                "defaults": "",
                "notes": "mine",
            },
            {
                "provider": "aws",
                "region": "us-east-1",
                "instance_type": "p5.48xlarge",
                "gpu": "A10G",
                "defaults": "",
                "notes": "",
            },  # a different GPU: not the same offer
            {
                "provider": "aws",
                "region": "us-east-1",
                "instance_type": "nope.big",
                "defaults": "",
                "notes": "",
            },
        ]
    )
    out = keep_known_facts(frame)
    real, far, other_gpu, unknown = (out.iloc[i] for i in range(4))
    assert (real.inter_node, real.inter_node_gbps) == ("roce", 400)
    assert (real.intra_node, real.intra_node_gbs, real.gpu) == (
        "nvlink",
        900,
        "H100-SXM",
    )
    assert real.spot_preemption_per_h == 0.47 and real.defaults == ""
    assert far.inter_node == "efa" and math.isnan(far.spot_preemption_per_h)
    assert far.notes.split(";") == ["mine", OTHER_REGION_TAG]
    assert pd.isna(other_gpu.inter_node) and pd.isna(unknown.gpu)
    assert out.attrs["unmatched"] == [
        ("aws", "us-east-1", "p5.48xlarge"),
        ("aws", "us-east-1", "nope.big"),
    ]


# ---------------------------------------------------------------- the commands as a user runs them


def test_catalog_refresh_azure_writes_a_catalog_solve_uses(
    run, tmp_path, monkeypatch, scenario_file
):
    import planner.load.refresh_azure as refresh_azure

    monkeypatch.setattr(
        refresh_azure, "fetch_azure", lambda *a, **k: iter(azure_pages())
    )
    out = tmp_path / "azure-today.csv"
    result = run("catalog", "refresh", "azure", "-o", out)
    assert result.exit_code == 0, result.output
    assert f"offers to {out}" in result.stdout
    frame, meta = read_offers(out, load_gpus(), load_providers())
    assert date.fromisoformat(meta["as_of"]) == date.today()
    nd = frame[frame["instance_type"] == "Standard_ND96asr_v4"].iloc[0]
    assert nd["inter_node"] == "infiniband"
    path = scenario_file(f"""\
        name: fresh
        catalogs: [{out}]
        workloads:
          - name: a
            kind: training
            memory: {{per_gpu: 20GiB}}
            work: {{gpu_hours: 10, reference_gpu: A100-80GB}}
        """)
    assert run("solve", path).exit_code == 0


def test_catalog_refresh_aws_keeps_efa_for_p5(run, tmp_path, monkeypatch):
    import planner.load.refresh_aws as refresh_aws

    monkeypatch.setattr(
        refresh_aws, "fetch_aws_offer_file", lambda region, **k: AWS_FILE
    )
    monkeypatch.setattr(refresh_aws, "aws_spot_prices", lambda *a, **k: None)
    out = tmp_path / "aws-today.csv"
    result = run("catalog", "refresh", "aws", "-o", out)
    assert result.exit_code == 0, result.output
    assert "kept the shipped prices" in result.stdout
    frame, _ = read_offers(out, load_gpus(), load_providers())
    p5 = frame[
        (frame["instance_type"] == "p5.48xlarge") & (frame["region"] == "us-east-1")
    ].iloc[0]
    assert (
        p5["inter_node"],
        p5["inter_node_gbps"],
        p5["gpu"],
        p5["gpus_per_node"],
    ) == ("efa", 3200, "H100-SXM", 8)
    assert p5["on_demand_usd_h"] == pytest.approx(54.321)


def test_a_refresh_that_would_not_load_leaves_the_catalog_as_it_was(
    run, tmp_path, monkeypatch
):
    """`catalog refresh` wrote the file first and loaded it after: a price the catalog refuses (here $5M an hour,
    above any offer's bound) replaced a good catalog with one no scenario can load. Now it is checked as
    `catalog import` checks, before the atomic write."""
    import planner.load.refresh_azure as refresh_azure

    monkeypatch.setattr(
        refresh_azure, "fetch_azure", lambda *a, **k: iter(azure_pages())
    )
    out = tmp_path / "azure-today.csv"
    assert run("catalog", "refresh", "azure", "-o", out).exit_code == 0
    good = out.read_bytes()
    pages = azure_pages()
    nd = next(
        item
        for item in pages[0]["Items"]
        if item["armSkuName"] == "Standard_ND96asr_v4"
        and item["armRegionName"] == "eastus"
        and not item["skuName"].endswith(" Spot")
    )
    nd["retailPrice"] = nd["unitPrice"] = 5e6
    monkeypatch.setattr(refresh_azure, "fetch_azure", lambda *a, **k: iter(pages))
    result = run("catalog", "refresh", "azure", "-o", out)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {out}: not written")
    assert (
        "on_demand_usd_h" in lines[0] and "(Standard_ND96asr_v4 in eastus)" in lines[0]
    )
    assert out.read_bytes() == good and [p.name for p in tmp_path.iterdir()] == [
        out.name
    ]
    fresh = tmp_path / "never.csv"
    with pytest.raises(PlannerError, match="not written"):
        write_offers_csv(
            refresh_azure.azure_offers(pages), fresh, source="s", as_of="2025-06-01"
        )
    assert not fresh.exists()


def test_catalog_import_cli_keeps_efa_for_p5(run, tmp_path):
    source = tmp_path / "vms.csv"
    source.write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
        "Region,AvailabilityZone\n"
        "p5.48xlarge,H100,8,192,2048,,98.32,40.1,us-east-1,us-east-1a\n"
    )
    out = tmp_path / "aws-import.csv"
    result = run(
        "catalog",
        "import",
        "--from",
        "skypilot",
        source,
        "--provider",
        "aws",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.output
    frame, _ = read_offers(out, load_gpus(), load_providers())
    assert (frame.iloc[0]["inter_node"], frame.iloc[0]["inter_node_gbps"]) == (
        "efa",
        3200,
    )
