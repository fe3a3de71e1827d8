"""Availability signals: the providers' answers parsed from recorded responses, the rules that map them onto the spot
model, what a plan shows of them, and bad signal files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.cli import main
from planner.load import signals_fetch
from planner.load.scenario import load_scenario
from planner.load.signals import INTERRUPTION_BUCKET_RATE, read_signals, write_signals

DATA = Path(__file__).resolve().parent / "data" / "signals"
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def test_the_advisor_feed_gives_a_bucket_per_region_and_linux_size():
    data = json.loads((DATA / "spot_advisor.json").read_text())
    found = signals_fetch.aws_advisor_signals(
        data, {"p5.48xlarge", "g5.xlarge"}, "2026-12-06"
    )
    assert [(s.region, s.instance_type, s.value) for s in found] == [
        ("us-east-1", "g5.xlarge", "10-15%"),
        ("us-east-1", "p5.48xlarge", "<5%"),
        ("us-west-2", "p5.48xlarge", ">20%"),
    ]  # Windows and sizes not asked for are left out


def test_azure_eviction_rates_and_placement_scores_parse():
    data = json.loads((DATA / "azure_eviction.json").read_text())
    found = signals_fetch.azure_eviction_signals(
        data, {"Standard_ND96asr_v4"}, "2026-12-06"
    )
    assert [(s.region, s.value) for s in found] == [
        ("eastus", "<5%"),
        ("westus2", ">20%"),
    ]
    scores = signals_fetch.aws_placement_signals(
        [
            (
                "p5.48xlarge",
                8,
                {"SpotPlacementScores": [{"Region": "us-east-1", "Score": 3}]},
            )
        ],
        "2026-12-06",
    )
    assert [(s.region, s.value, s.nodes) for s in scores] == [("us-east-1", "3", 8)]


def _scenario_with(tmp_path: Path, rows: str) -> Path:
    (tmp_path / "signals.csv").write_text(
        "provider,region,instance_type,kind,value,nodes,as_of,source\n" + rows
    )
    scenario = yaml.safe_load((SCENARIOS / "pretrain-deadline.yaml").read_text())
    scenario["signals"] = "signals.csv"
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_a_bucket_sets_the_rate_a_score_joins_the_defaults_and_no_stock_leaves_an_offer_out(
    tmp_path,
):
    path = _scenario_with(
        tmp_path,
        "aws,us-east-1,p5.48xlarge,interruption_bucket,15-20%,,2026-12-06,advisor\n"
        "aws,us-east-1,p5.48xlarge,placement_score,2,8,2026-12-06,scores\n"
        "aws,us-east-2,p5.48xlarge,stock,none,,2026-12-06,test\n",
    )
    loaded = load_scenario(path)
    offers = loaded.catalog.offers.set_index("key")
    assert (
        offers.at["aws/us-east-1/p5.48xlarge", "spot_preemption_per_h"]
        == INTERRUPTION_BUCKET_RATE[3]
    )
    assert offers.at["aws/us-east-2/p5.48xlarge", "max_nodes"] == 0
    (score,) = loaded.scenario.defaults.spot_placement_scores
    assert (score.region, score.nodes, score.score) == ("us-east-1", 8, 2)
    assert loaded.catalog.signals["aws/us-east-1/p5.48xlarge"][0][1].startswith(
        "spot interrupted 15-20% a month"
    )


def test_the_signals_round_trip_and_a_bad_row_is_one_line(tmp_path):
    data = json.loads((DATA / "spot_advisor.json").read_text())
    found = signals_fetch.aws_advisor_signals(data, {"p5.48xlarge"}, "2026-12-06")
    write_signals(found, tmp_path / "s.csv")
    assert read_signals(tmp_path / "s.csv") == found
    path = _scenario_with(
        tmp_path, "aws,us-east-1,p5.48xlarge,interruption_bucket,often,,,\n"
    )
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error")]
    assert (
        len(errors) == 1 and "row 2" in errors[0] and "interruption bucket" in errors[0]
    )


def test_the_command_writes_what_the_sources_answer(tmp_path, monkeypatch):
    data = json.loads((DATA / "spot_advisor.json").read_text())
    monkeypatch.setattr(signals_fetch, "fetch_aws_advisor", lambda client=None: data)

    def no_credentials(*args):
        from planner.errors import PlannerError

        raise PlannerError("spot placement scores need boto3 and AWS credentials")

    monkeypatch.setattr(signals_fetch, "fetch_aws_placement_scores", no_credentials)
    out = tmp_path / "signals.csv"
    result = CliRunner().invoke(main, ["catalog", "signals", "aws", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "placement scores skipped" in result.output
    assert {s.instance_type for s in read_signals(out)} == {"p5.48xlarge", "g5.xlarge"}


@pytest.mark.parametrize("market", ["spot", "on_demand"])
def test_the_plan_shows_the_signals_its_market_rests_on(tmp_path, market):
    path = _scenario_with(
        tmp_path,
        "aws,us-east-1,p5.48xlarge,interruption_bucket,<5%,,2026-12-06,advisor\n",
    )
    scenario = yaml.safe_load(path.read_text())
    workload = scenario["workloads"][0]
    workload.update(time_budget="30d", allow={"gpus": ["H100"], "markets": [market]})
    scenario["catalogs"] = ["aws"]
    scenario["constraints"] = {"node_limits": {}}
    path.write_text(yaml.safe_dump(scenario))
    result = CliRunner().invoke(main, ["solve", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.JSONDecoder().raw_decode(result.output[result.output.index("{") :])[0]
    (a,) = plan["assignments"]
    on_it = (
        f"{a['provider']}/{a['region']}/{a['instance_type']}"
        == "aws/us-east-1/p5.48xlarge"
    )
    if (
        market == "spot"
    ):  # the rarer preemptions the signal says make this offer the cheapest spot
        assert on_it and "spot interrupted <5% a month" in a["signals"][0]
    else:  # an on-demand plan does not rest on a spot signal
        assert a["signals"] is None
