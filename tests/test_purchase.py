"""Purchase options (cost model §13): the analytic terms against a Monte-Carlo of the same process, the shipped
examples' decisions, the checker's restatement, and bad input."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.cli import main
from planner.economics import costmodel, purchase, simulate
from planner.economics.candidate import CandidateInputs
from planner.economics.estimate_error import PUBLISHED
from planner.economics.segment_plans import segment_plan
from planner.economics.wall_time import WallLaw
from planner.load.scenario import load_scenario
from planner.solve.checker import check_plan
from planner.solve.pipeline import assignments, make_plan

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

BASE = CandidateInputs(
    work_h=40,
    checkpoint_write_h=0.05,
    restart_h=0.2,
    nodes=4,
    gpus_per_node=8,
    hw_failure_per_gpu_h=2e-4,
    price_per_node_h=30,
    billing_granularity_h=1 / 3600,
    checkpoint_interval_h=2,
    time_budget_h=60,
    estimate_error=PUBLISHED,
)
TERMS = {
    "flex_start": purchase.Terms("flex_start", wait_h=6, wait_cv=2, run_cap_h=168),
    "capacity_block": purchase.Terms(
        "capacity_block",
        term_h=44,
        start_h=8,
        run_cap_h=43.5,
        overrun_usd_per_node_h=55,
    ),
    "reserved": purchase.Terms("reserved", term_h=24, renewable=True),
}


@pytest.mark.parametrize("kind", sorted(TERMS))
def test_the_terms_priced_agree_with_a_monte_carlo_of_the_same_process(kind):
    inputs = replace(BASE, terms=TERMS[kind])
    analytic = costmodel.expected(inputs)
    drawn = simulate.simulate(inputs, trials=40_000, seed=7)
    p = analytic.p_deadline
    assert 0.5 < p < 0.999  # the deadline binds: the check can fail
    assert abs(drawn.p_deadline - p) <= 4 * math.sqrt(p * (1 - p) / 40_000)
    # a reservation's third term is paid one run in 70,000: the draws may see none
    assert (
        abs(drawn.mean() - analytic.cost_usd)
        <= 4 * drawn.stderr() + 1e-4 * analytic.cost_usd
    )
    assert math.isclose(sum(analytic.breakdown.values()), analytic.cost_usd)


def test_a_start_without_a_queue_is_the_law_read_at_the_deadline_it_leaves():
    law = WallLaw(segment_plan(BASE))
    block = TERMS["capacity_block"]
    want = law.p_met(min(60 - 8, 43.5), PUBLISHED)
    assert purchase.p_met(law, 60, PUBLISHED, block) == pytest.approx(want)
    # a longer wait never helps
    slow = replace(TERMS["flex_start"], wait_h=12)
    assert purchase.p_met(law, 60, PUBLISHED, slow) < purchase.p_met(
        law, 60, PUBLISHED, TERMS["flex_start"]
    )


def test_a_commitment_pays_whole_terms_and_a_block_its_fee_plus_the_overrun():
    inputs = replace(BASE, terms=TERMS["reserved"])
    law = WallLaw(segment_plan(inputs))
    paid, _ = purchase.term_billing(law, 4, TERMS["reserved"])
    # about 41-42 h: two terms nearly always, a third when T passes 48 h
    assert 4 * 48 <= paid < 4 * 72
    block = TERMS["capacity_block"]
    paid, over = purchase.term_billing(law, 4, block)
    assert paid == 4 * 44 and over > 0


def _plan(path: Path):
    loaded = load_scenario(path)
    plan = make_plan(loaded)
    record = {
        "status": plan.status,
        "objective_usd": plan.result.objective_usd,
        "assignments": assignments(plan),
    }
    return loaded, plan, record


def test_the_capacity_block_example_buys_the_block_and_keeps_every_rule():
    loaded, plan, record = _plan(SCENARIOS / "pretrain-capacity-block.yaml")
    (a,) = record["assignments"]
    assert a["market"] == "capacity_block" and a["nodes"] == 8
    assert a["purchase"]["upfront_usd"] == pytest.approx(8 * 96 * 39.33)
    assert check_plan(loaded, record) == []
    others = plan.candidates.all
    on_demand = others[others["market"] == "on_demand"]["cost_usd"].min()
    assert a["expected"]["cost_usd"] < 0.9 * on_demand
    # tampering with what the option says is caught
    bad = json.loads(json.dumps(record))
    bad["assignments"][0]["inputs"]["price_per_node_h"] *= 0.9
    bad["assignments"][0]["purchase"]["start_h"] = 0.0
    problems = check_plan(loaded, bad)
    assert any("price_per_node_h" in p for p in problems)
    assert any("purchase.start_h" in p for p in problems)


def test_flex_start_wins_when_the_deadline_leaves_room_for_the_queue(tmp_path):
    loaded, plan, record = _plan(SCENARIOS / "finetune-flex-start.yaml")
    (a,) = record["assignments"]
    assert a["market"] == "flex_start"
    assert check_plan(loaded, record) == []
    tight = yaml.safe_load((SCENARIOS / "finetune-flex-start.yaml").read_text())
    tight["workloads"][0]["time_budget"] = "14h"
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(tight))
    _, _, record = _plan(path)
    assert record["assignments"][0]["market"] != "flex_start"


def test_a_steady_endpoint_commits_its_base_nodes(tmp_path):
    loaded, plan, record = _plan(SCENARIOS / "serving-commitment.yaml")
    committed = plan.result.objective_usd
    bare = yaml.safe_load((SCENARIOS / "serving-commitment.yaml").read_text())
    bare.pop("purchase_options")
    path = tmp_path / "bare.yaml"
    path.write_text(yaml.safe_dump(bare))
    _, on_demand, _ = _plan(path)
    assert committed < 0.8 * on_demand.result.objective_usd
    # two nodes for three 30-day terms at the quoted rate
    assert committed == pytest.approx(2 * 3 * 720 * 1.05, abs=0.01)


def test_an_option_on_an_unknown_offer_is_one_line(tmp_path):
    scenario = yaml.safe_load((SCENARIOS / "finetune-flex-start.yaml").read_text())
    scenario["purchase_options"][0]["offer"] = "gcp/asia-northeast1/a4-highgpu-9g"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error")]
    assert (
        len(lines) == 1
        and "purchase_options" in lines[0]
        and "unknown offer" in lines[0]
    )
