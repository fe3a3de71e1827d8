"""`planner estimate --plan`: each endpoint pool of a plan at its planned load, the headroom left and the
latency percentiles of the step replay there; the same figures `planner solve` reports per pool."""

from __future__ import annotations

import json

import pytest
from conftest import SCENARIOS
from test_bad_input import assert_one_line_error

from planner.candidates.endpoints import replica_of
from planner.load.scenario import load_scenario
from planner.physics import batching


@pytest.fixture(scope="module")
def chat_plan(tmp_path_factory):
    from click.testing import CliRunner

    from planner.cli import main

    path = tmp_path_factory.mktemp("plan") / "plan.json"
    result = CliRunner().invoke(
        main,
        [
            "solve",
            str(SCENARIOS / "serving-chat.yaml"),
            "--format",
            "json",
            "-o",
            str(path),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return path


def test_each_pool_at_its_planned_load_matches_the_plan_and_a_direct_replay(
    run, chat_plan
):
    plan = json.loads(chat_plan.read_text())
    result = run(
        "estimate",
        SCENARIOS / "serving-chat.yaml",
        "--plan",
        chat_plan,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    pools = [
        (period, pool)
        for period in plan["endpoints"][0]["periods"]
        for pool in period["pools"]
    ]
    assert len(rows) == len(pools) >= 3
    loaded = load_scenario(SCENARIOS / "serving-chat.yaml")
    workload = loaded.scenario.workloads[0]
    for row, (period, pool) in zip(rows, pools):
        assert row["hours"] == period["hours"] and row["replicas"] == pool["replicas"]
        assert row["load_share"] == pytest.approx(
            pool["load_nodes"] / pool["nodes_counted"], rel=1e-9
        )
        assert 0 < row["load_share"] <= 1 and row["headroom_left"] == pytest.approx(
            1 - row["load_share"]
        )
        assert row["load_share"] == pytest.approx(pool["load_share"], rel=1e-6)
        assert row["ttft_s"] == pytest.approx(pool["ttft_percentiles_s"], rel=1e-6)
        assert row["ttft_s"]["p50"] <= row["ttft_s"]["p90"] <= row["ttft_s"]["p99"]
        assert row["tpot_s"]["p50"] <= row["tpot_s"]["p90"] <= row["tpot_s"]["p99"]
        # the SLO's quantile is p90
        assert row["ttft_s"]["p90"] == pytest.approx(pool["ttft_s"], rel=1e-6)
        # the worst request size replayed directly at the rate one replica carries there
        offer = loaded.catalog.offers.query(
            "provider == @pool['provider'] and region == @pool['region'] "
            "and instance_type == @pool['instance_type']"
        ).iloc[0]
        replica = replica_of(
            workload,
            loaded.catalog,
            offer,
            pool["tensor_parallel"],
            loaded.scenario.defaults.vram_headroom,
        )
        per_node = pool["replicas"] // pool["nodes"]
        worst = max(
            batching.simulate(
                replica,
                b.prompt_tokens,
                b.output_tokens,
                rate=row["load_share"] * pool["node_requests_per_s"][i] / per_node,
            ).ttft(0.99)
            for i, b in enumerate(workload.traffic.buckets)
            if pool["share_of_requests"][i] > 0
        )
        assert row["ttft_s"]["p99"] == pytest.approx(worst)


def test_the_table_names_load_headroom_and_percentiles(run, chat_plan):
    result = run("estimate", SCENARIOS / "serving-chat.yaml", "--plan", chat_plan)
    assert result.exit_code == 0, result.stderr
    for column in ("load", "headroom", "ttft_p50", "ttft_p99", "tpot_p90"):
        assert column in result.stdout
    assert "at the planned load" in result.stdout


def test_a_plan_without_the_pool_fields_or_endpoints_is_one_clear_error(
    run, chat_plan, tmp_path
):
    plan = json.loads(chat_plan.read_text())
    del plan["endpoints"][0]["periods"][1]["pools"][0]["instance_type"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan))
    assert_one_line_error(
        run("estimate", SCENARIOS / "serving-chat.yaml", "--plan", bad),
        "bad.json: endpoints[0].periods[1].pools[0]",
        "instance_type",
    )
    plan = json.loads(chat_plan.read_text())
    plan["endpoints"][0]["periods"][0]["pools"][0]["instance_type"] = "nothing-like-it"
    bad.write_text(json.dumps(plan))
    assert_one_line_error(
        run("estimate", SCENARIOS / "serving-chat.yaml", "--plan", bad),
        "endpoints[0].periods[0].pools[0]",
        "no option of the scenario runs",
    )
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"assignments": [{"workload": "x"}], "endpoints": []}))
    result = run("estimate", SCENARIOS / "serving-chat.yaml", "--plan", jobs)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
