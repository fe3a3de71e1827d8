"""What a user who installs the planner gets: package data, examples, prices with a date, per-offer billing,
the conventions of the field (`planner gpus`, `H100:8`, money to the cent, atomic CSV columns)."""

import csv
import io
import json
from datetime import date

import pytest
from conftest import SCENARIOS

from planner.load.catalog import (
    CATALOG_DIR,
    EXAMPLES_DIR,
    load_catalog,
    price_age_warning,
    shipped_catalog_names,
)
from planner.load.scenario import load_scenario
from planner.solve.pipeline import make_plan


def test_shipped_data_is_package_data():
    # the editable install maps the checkout's folders; a wheel carries the same files (.ci/wheel-check)
    assert (CATALOG_DIR / "gpus.csv").exists() and (
        CATALOG_DIR / "offers" / "aws.csv"
    ).exists()
    assert (EXAMPLES_DIR / "team-quarter-mix.yaml").exists()
    assert len(shipped_catalog_names()) == 12


def test_examples_are_copied_and_never_overwritten(run, tmp_path):
    target = tmp_path / "mine"
    first = run("examples", "--dir", target)
    assert first.exit_code == 0 and (target / "team-quarter-mix.yaml").exists()
    assert (target / "catalogs" / "acme-negotiated.csv").exists()
    edited = target / "lora-finetune.yaml"
    edited.write_text("name: mine\n")
    again = run("examples", "lora-finetune", "--dir", target)
    assert (
        again.exit_code == 0
        and "kept" in again.output
        and edited.read_text() == "name: mine\n"
    )
    unknown = run("examples", "nope", "--dir", target)
    assert unknown.exit_code == 2
    # a copied example plans from its new folder (its negotiated catalog sits next to it)
    assert (
        make_plan(load_scenario(target / "team-quarter-mix.yaml")).status == "OPTIMAL"
    )


@pytest.mark.parametrize(
    "folder, blocked", [("afile/sub", "afile/sub"), ("mine", "mine/catalogs")]
)
def test_examples_into_a_folder_that_cannot_be_made_is_one_line(
    run, tmp_path, folder, blocked
):
    """A file where a folder must go (the --dir's parent, or its catalogs/) was a FileExistsError traceback."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "catalogs").write_text("x")
    result = run("examples", "--dir", tmp_path / folder)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith(
        f"error: {tmp_path / blocked}: cannot make the folder: "
    ), lines


def test_prices_carry_a_date_and_old_ones_warn():
    catalog = load_catalog(["aws", "lambda"])
    as_of = catalog.prices_as_of()
    assert isinstance(as_of, date)
    assert price_age_warning(catalog, today=as_of) is None
    line = price_age_warning(catalog, today=date(as_of.year + 1, as_of.month, 1))
    assert line and "days old" in line and "\n" not in line


def test_solve_reports_the_price_date(run):
    result = run("solve", SCENARIOS / "lora-finetune.yaml", "--format", "json")
    data = json.loads(result.stdout)
    assert data["prices_as_of"] == load_catalog(["azure"]).prices_as_of().isoformat()


def test_hourly_billing_per_offer_changes_the_plan(tmp_path):
    hourly = make_plan(load_scenario(SCENARIOS / "hourly-billing.yaml"))
    eval_row = hourly.chosen.set_index("workload").loc["nightly-eval"]
    sft_row = hourly.chosen.set_index("workload").loc["sft-8b"]
    # the contract: long job
    assert sft_row.region == "us-east-1" and sft_row.billing_granularity_h == 1.0
    # a quarter-hour job would pay a whole hour there
    assert eval_row.region != "us-east-1"
    # the same contract without its billing rule takes the short job as well
    source = SCENARIOS / "catalogs" / "lambda-contract-hourly.csv"
    (tmp_path / "catalogs").mkdir()
    (tmp_path / "catalogs" / source.name).write_text(
        source.read_text().replace(",2,1h,1h,,", ",2,,,,")
    )
    (tmp_path / "s.yaml").write_text((SCENARIOS / "hourly-billing.yaml").read_text())
    per_minute = make_plan(load_scenario(tmp_path / "s.yaml"))
    assert (
        per_minute.chosen.set_index("workload").loc["nightly-eval"].region
        == "us-east-1"
    )


def test_gpus_command_lists_cheapest_prices(run):
    result = run("gpus", "--gpu", "H100", "--format", "json")
    rows = json.loads(result.stdout)
    assert {r["gpu"] for r in rows} == {"H100-SXM", "H100-PCIe", "H100-NVL"}
    sxm = next(r for r in rows if r["gpu"] == "H100-SXM")
    offers = load_catalog(shipped_catalog_names()).offers
    h100 = offers[offers["gpu"] == "H100-SXM"]
    assert sxm["on_demand_usd_per_gpu_h"] == pytest.approx(
        (h100["on_demand_usd_h"] / h100["gpus_per_node"]).min(), abs=1e-4
    )
    assert sxm["fp8"] == "yes" and "8" in sxm["gpus_per_node"].split(",")
    assert run("gpus", "--gpu", "H1000").exit_code == 2


def test_skypilot_accelerator_syntax_pins_the_node_size(scenario_file):
    path = scenario_file("""\
        name: acc
        catalogs: [aws, lambda]
        workloads:
          - name: ft
            kind: fine_tuning
            model: llama-3.1-8b
            work: {tokens: 100M}
            gpus: {min: 1, max: 16}
            allow: {gpus: ["H100:8"]}
        """)
    plan = make_plan(load_scenario(path))
    row = plan.chosen.iloc[0]
    assert row.gpu.startswith("H100") and row.gpus_per_node == 8


def test_money_to_the_cent_and_atomic_csv_columns(run):
    table = run("solve", SCENARIOS / "team-quarter-mix.yaml").stdout
    data = json.loads(
        run("solve", SCENARIOS / "team-quarter-mix.yaml", "--format", "json").stdout
    )
    ranker = next(a for a in data["assignments"] if a["workload"] == "ranker-train")
    assert f"{ranker['expected']['cost_usd']:,.2f}" in table
    rows = list(
        csv.DictReader(
            io.StringIO(
                run(
                    "solve", SCENARIOS / "team-quarter-mix.yaml", "--format", "csv"
                ).stdout
            )
        )
    )
    assert {"gpu", "gpus_per_node", "nodes", "gpus"} <= set(rows[0])
    assert all(
        int(r["gpus"]) == int(r["gpus_per_node"]) * int(r["nodes"]) for r in rows
    )


def test_batch_csv_carries_runs_reservations_and_months(run):
    result = run("batch", SCENARIOS / "quarter-budget.yaml", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    sections = {r["section"] for r in rows}
    assert {"run", "month"} <= sections
    data = json.loads(
        run("batch", SCENARIOS / "quarter-budget.yaml", "--format", "json").stdout
    )
    months = [r for r in rows if r["section"] == "month"]
    assert [float(m["cost_usd"]) for m in months] == [
        m["cost_usd"] for m in data["months"]
    ]
    scheduled = [r for r in rows if r["section"] == "run" and r["scheduled"] == "True"]
    assert all(r["nodes"].isdigit() for r in scheduled)


# ---------------------------------------------------------------- models from Hugging Face configs

HF = __import__("pathlib").Path(__file__).parent / "data" / "hf"


def test_a_hugging_face_id_the_catalog_knows_needs_no_network(scenario_file):
    path = scenario_file("""\
        name: hf-id
        catalogs: [lambda]
        workloads:
          - name: ft
            kind: fine_tuning
            model: meta-llama/Llama-3.1-8B
            method: lora
            work: {tokens: 50M}
        """)
    loaded = load_scenario(path)
    assert loaded.catalog.model("meta-llama/Llama-3.1-8B").name == "llama-3.1-8b"
    assert make_plan(loaded).status == "OPTIMAL"


def test_solve_a_model_given_by_a_local_config_json(scenario_file, tmp_path):
    config = tmp_path / "cfg" / "config.json"
    config.parent.mkdir()
    config.write_text((HF / "Qwen__Qwen3-30B-A3B.json").read_text())
    path = scenario_file("""\
        name: hf-file
        catalogs: [lambda]
        workloads:
          - name: moe-lora
            kind: fine_tuning
            model: {hf_config: cfg/config.json}
            method: lora
            work: {tokens: 50M}
        """)
    loaded = load_scenario(path)
    arch = loaded.scenario.workloads[0].model
    catalog_row = loaded.catalog.model("qwen3-30b-a3b")
    assert (arch.params, arch.experts, arch.expert_params) == (
        catalog_row.params,
        catalog_row.experts,
        catalog_row.expert_params,
    )
    assert make_plan(loaded).status == "OPTIMAL"


def test_an_unknown_hugging_face_id_offline_is_one_located_line(
    run, scenario_file, monkeypatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = scenario_file("""\
        name: hf-missing
        catalogs: [lambda]
        workloads:
          - name: ft
            kind: fine_tuning
            model: acme/secret-7b
            work: {tokens: 50M}
        """)
    result = run("validate", path)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and ":6 (workloads[0].model)" in lines[0]
        and "hf_config" in lines[0]
    )
