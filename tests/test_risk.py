"""Risk preferences (`risk:` per workload or in `defaults`): a spot saving too small for its risk, or too many
preemption events, drops the candidate; the `risk:` line of --explain compares with the cheapest safer plan."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import SCENARIOS

from planner.candidates.generate import generate
from planner.load.scenario import load_scenario
from planner.schema.workload import Risk

OFFER = """\
# source: a test offer
# as_of: 2025-07-01
provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes
aws,test-1,eight-a100,A100-80GB,8,96,1152,80,nvlink,600,none,0,30.0,21.5,0.3,,,
"""
SCENARIO = {
    "name": "narrow",
    "catalogs": ["one.csv"],
    "defaults": {
        "spot_evidence": "fitted"
    },  # a made-up offer, priced by the fitted process
    "workloads": [
        {
            "name": "tune",
            "kind": "fine_tuning",
            "memory": {"per_gpu": "30GiB"},
            "work": {"gpu_hours": 80, "reference_gpu": "A100-80GB"},
            "gpus": 8,
            "time_budget": "30h",
            "checkpoint": {"every": "1h", "write_time": "2m"},
            "forbid": {"markets": ["spot_fallback"]},
        }
    ],
}
"""Spot at $278.42 (3.7 expected preemption events) against $316.75 on demand: a 12.1 % saving."""


def _solve(
    run, tmp_path, defaults: dict | None = None, workload: dict | None = None
) -> dict:
    (tmp_path / "one.csv").write_text(OFFER)
    scenario = json.loads(json.dumps(SCENARIO))
    scenario["defaults"].update(defaults or {})
    scenario["workloads"][0].update(workload or {})
    path = tmp_path / "narrow.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run("solve", path, "--format", "json", "--workers", "1")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _market(data: dict) -> str:
    (a,) = data["assignments"]
    return a["market"]


@pytest.mark.parametrize(
    "saving, market",
    [
        (None, "spot"),
        ("10%", "spot"),
        ("12%", "spot"),
        ("13%", "on_demand"),
        (0.5, "on_demand"),
    ],
)
def test_min_spot_saving_keeps_spot_only_for_a_large_enough_saving(
    run, tmp_path, saving, market
):
    data = _solve(
        run,
        tmp_path,
        {"risk": {"min_spot_saving": saving}} if saving is not None else {},
    )
    assert _market(data) == market


@pytest.mark.parametrize(
    "cap, market", [(None, "spot"), (4, "spot"), (3, "on_demand"), (0, "on_demand")]
)
def test_max_expected_preemptions_drops_a_candidate_that_expects_more(
    run, tmp_path, cap, market
):
    data = _solve(
        run,
        tmp_path,
        {"risk": {"max_expected_preemptions": cap}} if cap is not None else {},
    )
    assert _market(data) == market
    if market == "spot":
        assert data["assignments"][0]["expected"]["preemption_events"] <= (
            cap if cap is not None else 1e9
        )


def test_a_workload_s_own_risk_wins_over_the_default(run, tmp_path):
    data = _solve(
        run,
        tmp_path,
        {"risk": {"min_spot_saving": "50%", "max_expected_preemptions": 1}},
        {"risk": {"min_spot_saving": "5%", "max_expected_preemptions": 10}},
    )
    assert _market(data) == "spot"
    assert Risk(min_spot_saving=0.05).over(
        Risk(min_spot_saving=0.5, max_expected_preemptions=3)
    ) == Risk(min_spot_saving=0.05, max_expected_preemptions=3)


def test_nothing_within_the_risk_says_why(run, tmp_path):
    (tmp_path / "one.csv").write_text(OFFER)
    scenario = json.loads(json.dumps(SCENARIO))
    scenario["defaults"]["risk"] = {"max_expected_preemptions": 1}
    scenario["workloads"][0]["forbid"] = {"markets": ["spot_fallback", "on_demand"]}
    path = tmp_path / "narrow.yaml"
    path.write_text(yaml.safe_dump(scenario))
    data = json.loads(run("solve", path, "--format", "json", "--workers", "1").stdout)
    assert data["status"] == "INFEASIBLE"
    (why,) = [entry["reason"] for entry in data["infeasible"]]
    assert why.startswith(
        "every candidate takes more risk than the workload's risk: allows: the cheapest, 1 x "
    )
    assert why.endswith(
        "(spot), expects 3.7 preemption events, over risk.max_expected_preemptions (1)"
    )


def _scores(*pairs) -> list[dict]:
    return [
        {
            "provider": "aws",
            "region": "test-1",
            "instance_type": "eight-a100",
            "nodes": n,
            "score": score,
        }
        for n, score in pairs
    ]


@pytest.mark.parametrize(
    "scores, least, market",
    [
        ([(1, 9)], 5, "spot"),  # the gang is one node: scored 9
        ([(1, 4)], 5, "on_demand"),  # scored under the minimum asked
        ([(1, 4)], 4, "spot"),
        (
            [(2, 8), (4, 2)],
            5,
            "spot",
        ),  # the smallest scored capacity that holds it speaks for it
    ],
)
def test_a_region_scored_below_min_placement_score_loses_its_spot_candidates(
    run, tmp_path, scores, least, market
):
    data = _solve(
        run,
        tmp_path,
        {
            "risk": {"min_placement_score": least},
            "spot_placement_scores": _scores(*scores),
        },
    )
    assert _market(data) == market


def test_placement_scores_speak_for_the_gang_they_cover():
    from planner.candidates.risk import placement_score
    from planner.schema.scenario import PlacementScore

    scores = tuple(PlacementScore(**s) for s in _scores((2, 8), (8, 3)))
    at = {
        n: placement_score(scores, "aws", "test-1", "eight-a100", n)
        for n in (1, 2, 3, 8, 9)
    }
    assert [at[n].nodes for n in (1, 2, 3, 8, 9)] == [
        2,
        2,
        8,
        8,
        8,
    ]  # beyond the largest: the largest's score
    # not scored: kept
    assert placement_score(scores, "aws", "test-2", "eight-a100", 1) is None


def test_a_placement_score_rules_out_with_its_reason(run, tmp_path):
    (tmp_path / "one.csv").write_text(OFFER)
    scenario = json.loads(json.dumps(SCENARIO))
    scenario["defaults"].update(
        {"risk": {"min_placement_score": 6}, "spot_placement_scores": _scores((1, 2))}
    )
    scenario["workloads"][0]["forbid"] = {"markets": ["spot_fallback", "on_demand"]}
    path = tmp_path / "narrow.yaml"
    path.write_text(yaml.safe_dump(scenario))
    data = json.loads(run("solve", path, "--format", "json", "--workers", "1").stdout)
    (why,) = [entry["reason"] for entry in data["infeasible"]]
    assert why.endswith(
        "(spot), its spot placement score in test-1 is 2 for 1 node(s), under "
        "risk.min_placement_score (6)"
    )


@pytest.mark.parametrize(
    "defaults, workload, error",
    [
        (
            {"risk": {"min_placement_score": 5}},
            {},
            "risk.min_placement_score is set but defaults.spot_placement_scores "
            "is empty",
        ),
        ({}, {"risk": {"min_placement_score": 5}}, "risk.min_placement_score is set"),
        (
            {"spot_placement_scores": _scores((1, 5))},
            {},
            "no risk.min_placement_score reads them",
        ),
        (
            {
                "risk": {"min_placement_score": 11},
                "spot_placement_scores": _scores((1, 5)),
            },
            {},
            "(defaults.risk.min_placement_score): input should be less than or equal to 10",
        ),
    ],
)
def test_scores_and_the_preference_that_reads_them_come_together(
    run, tmp_path, defaults, workload, error
):
    (tmp_path / "one.csv").write_text(OFFER)
    scenario = json.loads(json.dumps(SCENARIO))
    scenario["defaults"].update(defaults)
    scenario["workloads"][0].update(workload)
    path = tmp_path / "narrow.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run("validate", path)
    assert (
        result.exit_code == 2
        and error in result.stderr
        and result.stderr.count("\n") == 1
    )


@pytest.mark.parametrize(
    "text, error",
    [
        ("10", "a percentage needs its % sign"),
        ("ten", "expected a share"),
        ("10 GB", "unknown unit"),
    ],
)
def test_a_share_is_written_with_its_sign(run, tmp_path, text, error):
    (tmp_path / "one.csv").write_text(OFFER)
    scenario = json.loads(json.dumps(SCENARIO))
    scenario["defaults"]["risk"] = {"min_spot_saving": text}
    path = tmp_path / "narrow.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run("solve", path)
    assert result.exit_code == 2
    assert "min_spot_saving" in result.stderr and error in result.stderr
    assert "Traceback" not in result.stderr


def test_the_risk_line_compares_with_the_fallback_on_the_same_nodes(run, tmp_path):
    """Spot beats its own fallback by 0.7 %: the line says so, not the 12 % against on-demand."""
    (tmp_path / "one.csv").write_text(OFFER)
    scenario = json.loads(json.dumps(SCENARIO))
    del scenario["workloads"][0]["forbid"]
    path = tmp_path / "narrow.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run("solve", path, "--explain", "--workers", "1")
    (risk,) = [
        line.strip()
        for line in result.stdout.splitlines()
        if line.strip().startswith("risk:")
    ]
    assert risk.startswith(
        "risk: 0.7% cheaper than spot-fallback (1 x eight-a100, $280.39) for 3.7 expected"
    )
    scenario["defaults"]["risk"] = {
        "min_spot_saving": "5%"
    }  # then the fallback is the plan
    path.write_text(yaml.safe_dump(scenario))
    data = json.loads(run("solve", path, "--format", "json", "--workers", "1").stdout)
    assert _market(data) == "spot_fallback"


@pytest.mark.parametrize(
    "risk",
    [
        {"min_spot_saving": "10%"},
        {"min_spot_saving": "40%"},
        {"max_expected_preemptions": 5},
    ],
)
def test_screening_under_a_risk_preference_keeps_what_pricing_every_row_keeps(risk):
    """A risky candidate beats no safer row under a minimum saving, and one over the preemption cap beats
    nothing: the Pareto fronts of screened and exhaustive pricing agree."""
    loaded = load_scenario(SCENARIOS / "pretrain-deadline.yaml")
    scenario = loaded.scenario.model_copy(
        update={
            "defaults": loaded.scenario.defaults.model_copy(
                update={"risk": Risk(**risk), "spot_evidence": "fitted"}
            )
        }
    )
    full = generate(scenario, loaded.catalog, exhaustive=True)
    screened = generate(scenario, loaded.catalog, runner_ups=0)
    assert sorted(screened.pruned["cid"]) == sorted(full.pruned["cid"])
    kept = full.all
    safest = kept[kept["market"] == "on_demand"]["cost_usd"].min()
    saving = Risk(**risk).min_spot_saving
    for row in kept.itertuples(index=False):
        if saving and row.market != "on_demand":
            assert row.cost_usd <= (1 - saving) * safest
        if "max_expected_preemptions" in risk and row.market != "on_demand":
            assert row.preemption_events <= risk["max_expected_preemptions"]
