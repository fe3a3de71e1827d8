"""The shipped catalogs and the `planner catalog` commands."""

import json
import os
from pathlib import Path

import pytest
from conftest import MINIMAL, SCENARIOS
from test_bad_input import assert_one_line_error

from planner.load.catalog import (
    CATALOG_DIR,
    _header_comments,
    load_catalog,
    shipped_catalog_names,
)


@pytest.fixture(scope="module")
def everything():
    return load_catalog(shipped_catalog_names())


def test_at_least_the_big_three_and_two_gpu_clouds_are_shipped():
    assert {"aws", "gcp", "azure", "lambda", "runpod"} <= set(shipped_catalog_names())


@pytest.mark.parametrize("name", shipped_catalog_names())
def test_every_offer_file_records_source_and_as_of(name):
    meta, _ = _header_comments(
        (CATALOG_DIR / "offers" / f"{name}.csv").read_text(encoding="utf-8")
    )
    assert meta.get("source") and meta.get("as_of")


def test_providers_carry_billing_source_and_date(everything):
    for provider in everything.providers.values():
        assert provider.billing_granularity_h > 0 and provider.source and provider.as_of
    aws = everything.providers["aws"]
    assert aws.billing_granularity_h == pytest.approx(
        1 / 3600
    ) and aws.billing_minimum_h == pytest.approx(1 / 60)


def test_every_offer_names_a_known_gpu_and_has_a_price(everything):
    offers = everything.offers
    assert set(offers["gpu"]) <= set(everything.gpus)
    assert (offers["on_demand_usd_h"].notna() | offers["spot_usd_h"].notna()).all()
    assert offers["key"].is_unique


def test_spot_offers_get_a_preemption_rate(everything):
    spot = everything.offers[everything.offers["spot_usd_h"].notna()]
    assert spot["spot_preemption_per_h"].notna().all()
    assert (spot["spot_preemption_per_h"] > 0).all()


def test_data_oddities_are_handled_deliberately(everything):
    offers = everything.offers.set_index("key")
    # Azure ND H100 v5 lists spot == on-demand: no useful spot, and the catalog says so.
    nd = offers.loc["azure/eastus/Standard_ND96isr_H100_v5"]
    assert nd["spot_usd_h"] != nd["spot_usd_h"] and "spot_no_discount" in nd["notes"]
    # Spot can never be dearer than on-demand in the shipped data.
    both = everything.offers.dropna(subset=["spot_usd_h", "on_demand_usd_h"])
    assert (both["spot_usd_h"] < both["on_demand_usd_h"]).all()


def test_interconnects_are_real_where_known(everything):
    p5 = everything.offer_models["aws/us-east-1/p5.48xlarge"]
    assert (
        p5.gpu,
        p5.gpus_per_node,
        p5.intra_node,
        p5.inter_node,
        p5.inter_node_gbps,
    ) == ("H100-SXM", 8, "nvlink", "efa", 3200)
    nd = everything.offer_models["azure/eastus/Standard_ND96amsr_A100_v4"]
    assert nd.inter_node == "infiniband"


def test_models_table_knows_common_architectures(everything):
    for name in (
        "llama-2-7b",
        "llama-3.1-70b",
        "mixtral-8x7b",
        "mistral-7b",
        "qwen2.5-72b",
        "gemma-2-9b",
    ):
        assert everything.model(name).params > 1e9
    assert everything.model("Llama-3.1-70B").layers == 80  # case-insensitive


def test_catalog_list_h100_json_spans_providers(run):
    result = run("catalog", "list", "--gpu", "H100", "--format", "json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert len({r["provider"] for r in rows}) >= 4
    assert all(r["gpu"].startswith("H100") for r in rows)
    prices = [r["usd_per_gpu_h"] for r in rows]
    assert prices == sorted(prices) and all(p > 0 for p in prices)


def test_catalog_list_filters(run):
    rows = json.loads(
        run(
            "catalog",
            "list",
            "--provider",
            "aws",
            "--min-vram",
            "40GiB",
            "--spot",
            "--format",
            "json",
        ).stdout
    )
    assert rows and all(
        r["provider"] == "aws" and r["gpu_vram_gib"] >= 40 and r["spot_usd_h"]
        for r in rows
    )


def test_catalog_list_csv_and_table(run):
    csv = run(
        "catalog", "list", "--provider", "lambda", "--format", "csv"
    ).stdout.splitlines()
    assert csv[0].startswith("provider,region,instance_type,gpu")
    table = run("catalog", "list", "--provider", "lambda", "--limit", "3").stdout
    assert "gpu_1x" in table and "3 offers" in table


def test_catalog_list_rejects_unknown_names(run):
    assert_one_line_error(
        run("catalog", "list", "--gpu", "H1000"), "unknown GPU 'H1000'"
    )
    assert_one_line_error(
        run("catalog", "list", "--provider", "awz"),
        "unknown provider 'awz'",
        "did you mean 'aws'?",
    )
    assert_one_line_error(
        run("catalog", "list", "--min-vram", "lots"), "--min-vram", "expected a size"
    )


def test_catalog_show_marks_defaults(run):
    result = run("catalog", "show", "gcp/us-central1/a2-highgpu-1g")
    assert result.exit_code == 0
    assert "inter_node" in result.stdout and "(default)" in result.stdout
    billing = run("catalog", "show", "aws/us-east-1/p5.48xlarge").stdout
    assert (
        "billing_granularity_h        1s" in billing
        and "billing_minimum_h            1m" in billing
    )
    assert "0.000277" not in billing  # hours of billing as people write them
    details = json.loads(
        run("catalog", "show", "aws/us-east-1/p5.48xlarge", "--format", "json").stdout
    )
    assert details["gpu"]["name"] == "H100-SXM" and details["provider"]["name"] == "aws"


def test_catalog_show_unknown_and_ambiguous(run):
    assert_one_line_error(
        run("catalog", "show", "aws/us-east-1/p5.48xlage"),
        "unknown offer",
        "did you mean",
    )
    assert_one_line_error(
        run("catalog", "show", "p5.48xlarge"), "offered in", "name one"
    )


SKYPILOT = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone
g5.xlarge,A10G,1,4,16,,1.006,0.45,us-east-1,us-east-1a
g5.xlarge,A10G,1,4,16,,1.006,0.40,us-east-1,us-east-1b
m5.large,,,2,8,,0.096,,us-east-1,us-east-1a
"""


def test_catalog_import_round_trips_into_a_scenario(run, tmp_path, scenario_file):
    source = tmp_path / "vms.csv"
    source.write_text(SKYPILOT)
    out = tmp_path / "mine.csv"
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
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    # spot = min over zones
    assert text.startswith("# source: ") and "A10G" in text and "0.4," in text
    assert "m5.large" not in text
    scenario = scenario_file(
        "name: x\ncatalogs: [mine.csv]\nworkloads:\n  - name: j\n    kind: training\n"
        "    memory: {per_gpu: 10GiB}\n    work: {gpu_hours: 1, reference_gpu: A10G}\n"
    )
    (scenario.parent / "mine.csv").write_text(text)
    assert run("validate", scenario).exit_code == 0


def test_catalog_import_never_overwrites_its_input(run, tmp_path):
    source = tmp_path / "vms.csv"
    source.write_text(SKYPILOT)
    assert_one_line_error(
        run(
            "catalog",
            "import",
            "--from",
            "skypilot",
            source,
            "--provider",
            "aws",
            "-o",
            source,
        ),
        "refusing to overwrite an input file",
    )
    assert source.read_text() == SKYPILOT


@pytest.mark.parametrize(
    "args, table",
    [
        (
            ("import", "--from", "skypilot", "{source}", "--provider", "aws"),
            "offers/aws.csv",
        ),
        (("import", "--from", "skypilot", "{source}", "--provider", "aws"), "gpus.csv"),
        (("refresh", "azure"), "offers/azure.csv"),
        (
            ("import", "--from", "skypilot", "{source}", "--provider", "aws"),
            "models.csv",
        ),
        (
            ("import", "--from", "skypilot", "{source}", "--provider", "aws"),
            "spot_trace_rates.csv",
        ),
    ],
)
def test_catalog_import_and_refresh_never_overwrite_the_shipped_tables_they_read(
    run, tmp_path, args, table
):
    """`-o catalogs/offers/aws.csv` replaced the shipped AWS catalog (600 offers, whose facts the import reads)
    with the one imported row."""
    source = tmp_path / "vms.csv"
    source.write_text(SKYPILOT)
    target = CATALOG_DIR / table
    before = target.read_bytes()
    line = assert_one_line_error(
        run("catalog", *(a.format(source=source) for a in args), "-o", target),
        "refusing to overwrite an input file",
    )
    assert line.startswith(f"error: {target}: ") and target.read_bytes() == before


VMS_HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"


@pytest.mark.parametrize(
    "rows, where, fragment",
    [
        (
            "g5.xlarge,A10G,1,4,16,,1.006,0.45,us-east-1,us-east-1a\ng5.2xlarge,A10G,1,8,32,,,,us-east-1,us-east-1a\n",
            "v.csv:3",
            "neither an on-demand nor a spot price (g5.2xlarge in us-east-1)",
        ),
        (
            "g5.xlarge,A10G,1e20,4,16,,1.006,0.45,us-east-1,us-east-1a\n",
            "v.csv:2",
            "at most 1024 GPUs per node",
        ),
    ],
)
def test_catalog_import_checks_before_writing_and_names_the_input_row(
    run, tmp_path, rows, where, fragment
):
    source, out = tmp_path / "v.csv", tmp_path / "o.csv"
    source.write_text(VMS_HEADER + rows)
    out.write_text("old\n")
    assert_one_line_error(
        run(
            "catalog",
            "import",
            "--from",
            "skypilot",
            source,
            "--provider",
            "aws",
            "-o",
            out,
        ),
        f"{where}: ",
        fragment,
    )
    assert out.read_text() == "old\n" and sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["o.csv", "v.csv"]


def test_catalog_import_unknown_gpu(run, tmp_path):
    source = tmp_path / "vms.csv"
    source.write_text(SKYPILOT.replace("A10G", "Z9000"))
    assert_one_line_error(
        run(
            "catalog",
            "import",
            "--from",
            "skypilot",
            source,
            "--provider",
            "aws",
            "-o",
            tmp_path / "o.csv",
        ),
        "Z9000",
    )


@pytest.mark.parametrize(
    "catalog, fragment",
    [
        ("./mycats", "expected a file (offers catalog), found a directory"),
        (
            "/dev/zero",
            "expected a regular file (offers catalog), found a device, pipe or socket",
        ),
    ],
)
def test_a_catalog_that_is_not_a_file_is_one_line(run, tmp_path, catalog, fragment):
    (tmp_path / "mycats").mkdir()
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL.replace("catalogs: [aws]", f"catalogs: [aws, {catalog}]"))
    result = run("validate", path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert (
        result.stderr.startswith(f"error: {path}:2 (catalogs[1]): ")
        and fragment in result.stderr
    )
    listing = run(
        "catalog",
        "list",
        "--catalog",
        tmp_path / "mycats" if catalog == "./mycats" else catalog,
    )
    assert (
        listing.exit_code == 2
        and listing.stderr.count("\n") == 1
        and fragment in listing.stderr
    )


def test_an_hf_config_that_is_a_device_is_refused(run, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        MINIMAL.replace("memory: {per_gpu: 20GiB}", "model: {hf_config: /dev/zero}")
    )
    result = run("validate", path)
    assert result.exit_code == 2 and result.stderr == (
        f"error: {path}:6 (workloads[0].model): HF config file /dev/zero: expected a regular file (config.json), "
        "found a device, pipe or socket\n"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_catalog_is_one_line(run, tmp_path):
    offers = tmp_path / "locked.csv"
    offers.write_text("provider,region\n")
    offers.chmod(0)
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL.replace("catalogs: [aws]", "catalogs: [aws, ./locked.csv]"))
    result = run("validate", path)
    assert (
        result.exit_code == 2
        and "cannot read offers catalog: Permission denied" in result.stderr
    )


def test_reads_stop_at_the_cap_whatever_size_the_file_reports(monkeypatch):
    from planner.errors import PlannerError
    from planner.load import yaml as yamlio

    monkeypatch.setattr(yamlio, "MAX_FILE_BYTES", 16)
    status = Path("/proc/self/status")  # a regular file that reports size 0
    if not status.exists() or status.stat().st_size:
        pytest.skip("needs a /proc file that reports size 0")
    with pytest.raises(PlannerError, match="refusing input above"):
        yamlio.read_capped(status, "offers catalog")


OFFERS_HEADER = (
    "provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,"
    "inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes\n"
)


@pytest.mark.parametrize("gbps", ["", "0"])
def test_a_cluster_network_without_its_rate_is_refused_at_the_row(run, tmp_path, gbps):
    (tmp_path / "mine.csv").write_text(
        OFFERS_HEADER
        + f"aws,us-east-1,x1,A100-80GB,8,4,16,80,nvlink,600,efa,{gbps},2.5,,,,,\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL.replace("catalogs: [aws]", "catalogs: [aws, ./mine.csv]"))
    assert_one_line_error(
        run("validate", path),
        f"{path}:2 (catalogs[1])",
        "mine.csv:2:",
        "inter_node efa needs inter_node_gbps above 0",
    )


def test_an_empty_catalog_next_to_another_adds_nothing(run, tmp_path):
    (tmp_path / "empty.csv").write_text(OFFERS_HEADER)
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL.replace("catalogs: [aws]", "catalogs: [aws, ./empty.csv]"))
    result = run("solve", path)
    assert result.exit_code == 0 and "OPTIMAL" in result.stdout, result.output


@pytest.mark.parametrize("catalogs", ["[]", "[./empty.csv]"])
@pytest.mark.parametrize("command", ["validate", "solve"])
def test_catalogs_without_offers_are_refused(run, tmp_path, catalogs, command):
    (tmp_path / "empty.csv").write_text(OFFERS_HEADER)
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL.replace("catalogs: [aws]", f"catalogs: {catalogs}"))
    assert_one_line_error(
        run(command, path),
        f"{path}:2 (catalogs): the catalogs hold no offers; name one that does",
    )


@pytest.mark.parametrize(
    "command",
    [
        ("solve", "{scenarios}/lora-finetune.yaml", "-o"),
        ("batch", "{scenarios}/quarter-budget.yaml", "-o"),
        ("whatif", "{scenarios}/lora-finetune.yaml", "--spot-price", "1,2", "-o"),
    ],
)
@pytest.mark.parametrize(
    "table", ["gpus.csv", "providers.csv", "models.csv", "spot_trace_rates.csv"]
)
def test_no_command_writes_over_the_catalog_tables_it_reads(run, command, table):
    """Found by fuzzing: `solve -o catalogs/gpus.csv` replaced the GPU table every later command reads (only the
    offer CSVs a scenario names were protected)."""
    target = CATALOG_DIR / table
    before = target.read_bytes()
    args = [a.format(scenarios=SCENARIOS) for a in command]
    line = assert_one_line_error(
        run(*args, target), "refusing to overwrite an input file"
    )
    assert line.startswith(f"error: {target}: ") and target.read_bytes() == before


def test_a_blank_instance_type_in_a_skypilot_file_is_named_at_its_line(run, tmp_path):
    """Found by fuzzing: the row at fault was looked up by its instance type, which is blank there (NaN), so the
    error said `(nan in us-east-1)` and no line."""
    source = tmp_path / "vms.csv"
    source.write_text(
        VMS_HEADER + "g5.xlarge,A10G,1,4,16,,1.006,0.45,us-east-1,us-east-1a\n"
        ",A10G,1,4,16,,1.0,,us-east-1,us-east-1a\n"
    )
    assert_one_line_error(
        run(
            "catalog",
            "import",
            "--from",
            "skypilot",
            source,
            "--provider",
            "aws",
            "-o",
            tmp_path / "out.csv",
        ),
        f"{source}:3: ",
        "(no InstanceType in us-east-1)",
    )


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("--limit", "-1"), "'--limit': -1 is not in the range x>=0"),
        (("--min-vram", "-5GiB"), "--min-vram: expected a size of 0 or more"),
    ],
)
def test_catalog_list_refuses_negative_limits_and_sizes(run, args, fragment):
    assert_one_line_error(run("catalog", "list", *args), fragment)
