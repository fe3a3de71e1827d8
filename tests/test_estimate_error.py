"""The error of the throughput estimate in P(deadline) (docs/cost-model.md §12): its fit to the published runs,
the mixture against Monte-Carlo, and what it rules out."""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import replace

import numpy as np
import pytest
from conftest import REPO

from planner.economics import costmodel, fallback, segment_plans, wall_time
from planner.economics.candidate import CandidateInputs
from planner.economics.estimate_error import EXACT, PUBLISHED, EstimateError
from planner.economics.inputs import inputs_from_assignment
from planner.economics.simulate import simulate, simulate_fallback
from planner.schema.plan import AssignmentRecord, Process


def test_published_is_the_robust_fit_to_the_published_training_runs():
    """Median and 1.4826 x MAD of ln(published time / planner time) over every training figure compared."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import published

    outcomes = published.evaluate(
        [c for c in published.load_cases() if c["kind"] == "training"]
    )
    errors = [
        -math.log(o.ratio) for o in outcomes if o.ratio
    ]  # ratio: planner time over published time
    median = statistics.median(errors)
    spread = 1.4826 * statistics.median(abs(e - median) for e in errors)
    print(f"{len(errors)} figures: median {median:.4f}, spread {spread:.4f}")
    assert len(errors) >= 60
    assert PUBLISHED.median == pytest.approx(median, abs=5e-4)
    assert PUBLISHED.sigma == pytest.approx(spread, abs=5e-4)


CASES = {
    "on demand, 1.5 % slack": CandidateInputs(
        work_h=94, time_budget_h=95.5, restart_h=0.0, interruption_tolerance="none"
    ),
    "spot with waits": CandidateInputs(
        work_h=10,
        time_budget_h=14,
        spot_rate_per_node_h=0.2,
        capacity_wait_h=1.0,
        checkpoint_interval_h=1,
        restart_h=0.2,
    ),
    "spot gang, heavy-tailed waits": CandidateInputs(
        work_h=30,
        checkpoint_write_h=0.1,
        restart_h=0.5,
        nodes=2,
        gpus_per_node=8,
        spot_rate_per_node_h=0.2,
        capacity_wait_h=1.24,
        capacity_wait_cv=5.56,
        time_budget_h=45,
        checkpoint_interval_h=1,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    "error", [PUBLISHED, EstimateError(0.0, 0.05)], ids=["published", "5%"]
)
def test_p_deadline_with_the_estimate_s_error_agrees_with_monte_carlo(name, error):
    inputs = replace(CASES[name], estimate_error=error)
    planned, sim = costmodel.p_deadline(inputs), simulate(inputs, 40_000, seed=7)
    spread = 4 * math.sqrt(
        max(sim.p_deadline * (1 - sim.p_deadline), 1e-4) / sim.trials
    )
    print(
        f"{name}: P {planned:.4f} planned, {sim.p_deadline:.4f} simulated (exact estimate: "
        f"{costmodel.p_deadline(CASES[name]):.4f})"
    )
    assert abs(planned - sim.p_deadline) <= spread
    q = costmodel.completion_quantile(inputs, 0.9)
    assert np.mean(sim.actual_h <= q) == pytest.approx(
        0.9, abs=4 * math.sqrt(0.09 / sim.trials)
    )
    law = wall_time.WallLaw(segment_plans.segment_plan(inputs))
    assert law.p_met(q, error) == pytest.approx(0.9, abs=1e-6)


def test_a_non_resumable_job_with_little_slack_is_no_sure_thing():
    """The issue's case: 94 h of work against 96 h. As estimated it is certain; the estimate is not."""
    inputs = CandidateInputs(work_h=94, time_budget_h=96, interruption_tolerance="none")
    assert costmodel.p_deadline(inputs) > 0.99
    assert 0.5 < costmodel.p_deadline(replace(inputs, estimate_error=PUBLISHED)) < 0.75
    assert (
        costmodel.p_deadline(replace(inputs, estimate_error=EstimateError(0.0, 0.01)))
        > 0.9
    )


def test_a_fallback_slower_than_estimated_holds_its_deadline_when_on_demand_alone_could():
    inputs = CandidateInputs(
        work_h=30,
        checkpoint_write_h=0.1,
        restart_h=0.5,
        nodes=2,
        gpus_per_node=8,
        spot_rate_per_node_h=0.2,
        capacity_wait_h=2.0,
        time_budget_h=40,
        checkpoint_interval_h=1,
        price_per_node_h=10.0,
    )
    slower = replace(inputs, estimate_error=PUBLISHED)
    exact, with_error = fallback.unit(inputs), fallback.unit(slower)
    t0 = segment_plans.segment_plan(inputs).T0
    assert with_error.p_deadline == pytest.approx(
        exact.p_deadline * float(PUBLISHED.cdf(40 / t0))
    )
    sim = simulate_fallback(slower, 30.0, trials=8000, seed=3)
    print(
        f"fallback: P {with_error.p_deadline:.4f} planned, {sim.p_deadline:.4f} simulated"
    )
    assert abs(with_error.p_deadline - sim.p_deadline) <= 0.02
    assert with_error.billed_node_h == exact.billed_node_h  # costs are the estimate's


ONE = """\
name: slack
catalogs: [aws]
defaults: {{deadline_confidence: 0.9{error}}}
workloads:
  - name: eval
    kind: fine_tuning
    memory: {{per_gpu: 20GiB}}
    work: {{gpu_hours: 94, reference_gpu: H100-SXM}}
    gpus: 8
    allow: {{instance_types: [p5.48xlarge], regions: [us-east-1]}}
    interruption_tolerance: none
    time_budget: {budget}
"""


def _solve(run, tmp_path, budget: str, error: str = "") -> dict:
    path = tmp_path / "slack.yaml"
    path.write_text(ONE.format(budget=budget, error=error))
    result = run("solve", path, "--format", "json", "--workers", "1")
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_solve_refuses_a_promise_the_estimate_cannot_keep_and_says_why(run, tmp_path):
    exact = _solve(run, tmp_path, "12.2h", ", estimate_error: 0")
    (a,) = exact["assignments"]
    t0 = a["inputs"]["work_h"] + a["inputs"]["restart_h"]
    assert 12.2 / t0 < 1.1 and a["expected"]["p_deadline"] > 0.99
    refused = _solve(run, tmp_path, "12.2h")
    assert refused["status"] == "INFEASIBLE"
    (why,) = [entry["reason"] for entry in refused["infeasible"]]
    print(why)
    assert (
        "real runs take up to 1.25x the estimate at confidence 90%" in why
        and "estimate_error" in why
    )
    roomy = _solve(run, tmp_path, "18h")
    (a,) = roomy["assignments"]
    assert a["inputs"]["estimate_error"] == {
        "median": PUBLISHED.median,
        "sigma": PUBLISHED.sigma,
    }
    assert (
        0.9
        <= a["expected"]["p_deadline"]
        < 0.999
        < a["expected"]["p_deadline_on_estimate"]
    )
    assert a["expected"]["p_deadline"] == pytest.approx(
        costmodel.p_deadline(
            inputs_from_assignment(AssignmentRecord.model_validate(a))
        ),
        abs=1e-9,
    )
    explained = run(
        "solve", tmp_path / "slack.yaml", "--explain", "--workers", "1"
    ).stdout
    p, on = a["expected"]["p_deadline"], a["expected"]["p_deadline_on_estimate"]
    assert (
        f"deadline met with P {p:.1%} allowing for the error of the throughput estimate, {on:.1%} on the "
        f"estimate alone"
    ) in explained


def test_the_checker_restates_the_error_and_bounds_p_deadline_by_it(run, tmp_path):
    from planner.load.scenario import load_scenario
    from planner.solve.checker import check_plan

    plan = _solve(run, tmp_path, "18h")
    loaded = load_scenario(tmp_path / "slack.yaml")
    assert check_plan(loaded, plan) == []
    plan["assignments"][0]["inputs"]["estimate_error"] = {"median": 0.0, "sigma": 0.0}
    assert any("not a fit to published runs" in p for p in check_plan(loaded, plan))
    plan["assignments"][0]["inputs"]["estimate_error"] = {
        "median": PUBLISHED.median,
        "sigma": PUBLISHED.sigma,
    }
    plan["assignments"][0]["expected"]["p_deadline"] = 1.0
    assert any("p_deadline 1.0000 above" in p for p in check_plan(loaded, plan))


def test_a_plan_written_before_the_error_replays_as_exact():
    from planner.economics.inputs import inputs_from_process

    process = {
        "work_h": 10.0,
        "checkpoint_write_h": 0.0,
        "restart_h": 0.1,
        "failure_rate_per_h": 0.0,
        "interruption_tolerance": "none",
    }
    assert (
        inputs_from_process(
            Process.model_validate(process),
            nodes=1,
            gpus_per_node=1,
            checkpoint_interval_h=None,
        ).estimate_error
        == EXACT
    )
    process["estimate_error"] = {"median": -0.1, "sigma": 0.2}
    assert inputs_from_process(
        Process.model_validate(process),
        nodes=1,
        gpus_per_node=1,
        checkpoint_interval_h=None,
    ).estimate_error == EstimateError(-0.1, 0.2)


@pytest.mark.parametrize(
    "value, fragment",
    [("10", "a percentage needs its % sign"), ("1.5", "% sign"), ("wide", "published")],
)
def test_a_bad_estimate_error_is_one_line(run, tmp_path, value, fragment):
    path = tmp_path / "slack.yaml"
    path.write_text(ONE.format(budget="18h", error=f", estimate_error: {value}"))
    result = run("solve", path)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "estimate_error" in result.stderr and fragment in result.stderr, (
        result.stderr
    )


@pytest.mark.parametrize(
    "setting, line",
    [
        (
            "",
            "W is an estimate: P(deadline) allows for real runs taking 0.91x it in the median and 1.28x either way "
            "for one standard deviation, as published runs did",
        ),
        (
            ", estimate_error: 5%",
            "W is an estimate: P(deadline) allows for real runs taking 1.05x either way for one "
            "standard deviation (estimate_error)",
        ),
        (
            ", estimate_error: 0",
            "W is taken as exact in P(deadline) (estimate_error: 0)",
        ),
    ],
)
def test_planner_estimate_says_what_deadlines_allow_for(run, tmp_path, setting, line):
    path = tmp_path / "slack.yaml"
    path.write_text(ONE.format(budget="18h", error=setting))
    result = run("estimate", path)
    assert result.exit_code == 0 and line in " ".join(result.stdout.split())
