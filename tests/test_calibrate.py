"""From runs back to the plan: run logs drawn event by event hold to the vectorised Monte-Carlo, `planner calibrate`
finds a known truth again from runs drawn from it (`planner simulate --runs-out --truth`), and a scenario that
names the fit is planned with it."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from conftest import REPO, SCENARIOS
from test_bad_input import assert_one_line_error

from planner.economics.candidate import CandidateInputs
from planner.economics.run_log import draw_runs, useful_hours
from planner.economics.simulate import simulate
from planner.load.calibration import load_calibration

GOLDEN = REPO / "tests" / "golden"
TRUTH = SCENARIOS / "calibrations" / "lora-finetune-truth.yaml"

SPOT = CandidateInputs(
    work_h=40.0,
    checkpoint_write_h=0.1,
    restart_h=0.3,
    nodes=4,
    gpus_per_node=8,
    spot_rate_per_node_h=0.05,
    price_per_node_h=20.0,
    checkpoint_interval_h=2.0,
    capacity_wait_h=0.5,
    capacity_wait_cv=2.0,
)


def test_run_logs_hold_to_the_monte_carlo_of_the_same_process():
    logs = draw_runs(SPOT, 4000, seed=3)
    sim = simulate(SPOT, trials=40_000, seed=3)
    walls = np.array([log.wall_h for log in logs])
    standard_error = walls.std() / math.sqrt(len(walls))
    assert abs(walls.mean() - sim.wall_h.mean()) < 4 * standard_error
    stops = np.array([len(log.interruptions) for log in logs])
    assert abs(stops.mean() - sim.failures.mean()) < 4 * stops.std() / math.sqrt(
        len(stops)
    )
    waits = np.array([log.waiting_h for log in logs])
    assert abs(waits.mean() - sim.waiting_h.mean()) < 4 * waits.std() / math.sqrt(
        len(waits)
    )


@pytest.mark.parametrize(
    "inputs",
    [
        SPOT,
        dataclasses.replace(
            SPOT, interruption_tolerance="none", checkpoint_write_h=0.0
        ),
        dataclasses.replace(SPOT, checkpoint_interval_h=7.0, work_h=40.0),
        dataclasses.replace(SPOT, checkpoint_interval_h=math.inf),
    ],
)
def test_a_logs_useful_hours_are_the_work_it_did(inputs):
    """`useful_hours` inverts the process exactly: from a log alone (stops, wall time, τ, C, R) it recovers W."""
    for log in draw_runs(inputs, 300, seed=5):
        tau = (
            math.inf
            if inputs.interruption_tolerance == "none"
            else inputs.checkpoint_interval_h
        )
        work = useful_hours(
            log.wall_h,
            [(i.at_h, i.back_h) for i in log.interruptions],
            interval_h=tau,
            checkpoint_h=0.0
            if inputs.interruption_tolerance == "none"
            else inputs.checkpoint_write_h,
            restart_h=inputs.restart_h,
        )
        assert work == pytest.approx(inputs.work_h, rel=1e-9)


def _round_trip(run, tmp_path, scenario, truth, trials=200, seed=0, plan=None):
    plan = plan or GOLDEN / f"{scenario.stem}.json"
    runs = tmp_path / f"runs-{seed}.csv"
    fit = tmp_path / f"fit-{seed}.yaml"
    drawn = run(
        "simulate",
        scenario,
        "--plan",
        plan,
        "--trials",
        trials,
        "--seed",
        seed,
        "--runs-out",
        runs,
        "--truth",
        truth,
    )
    assert drawn.exit_code == 0, drawn.stderr
    done = run(
        "calibrate", scenario, runs, "--plan", plan, "--fit", fit, "--format", "json"
    )
    assert done.exit_code == 0, done.stderr
    return load_calibration(fit), json.loads(done.stdout), runs


def test_calibrate_finds_a_known_spot_truth_again(run, tmp_path):
    """Throughput, preemption rate, capacity wait, checkpoint and restart times of checkpoint-70b's two jobs
    (spot on local NVMe, on demand on EBS), drawn from a truth unlike the catalog's."""
    truth = tmp_path / "truth.yaml"
    truth.write_text(
        "efficiency: [{gpu: B200, recipe: megatron, factor: 0.8}]\n"
        "preemption: [{provider: aws, instance_type: p6-b200.48xlarge, rate_per_node_h: 0.5,"
        " capacity_wait_h: 2.0, capacity_wait_cv: 2.0}]\n"
        "storage: [{storage: local-nvme, checkpoint_factor: 1.5, restart_factor: 1.2},"
        " {storage: ebs-gp3, checkpoint_factor: 1.3}]\n"
    )
    fit, report, _ = _round_trip(
        run, tmp_path, SCENARIOS / "checkpoint-70b.yaml", truth
    )
    (efficiency,) = fit.efficiency
    # no run-to-run spread in this truth: only the records' whole seconds stand between the runs and the truth
    assert efficiency.factor == pytest.approx(0.8, rel=1e-3)
    assert efficiency.runs == 400
    (preemption,) = fit.preemption
    assert preemption.interval.low <= 0.5 <= preemption.interval.high
    assert preemption.rate_per_node_h == pytest.approx(0.5, rel=0.05)
    assert preemption.events > 1000
    assert preemption.capacity_wait_h == pytest.approx(2.0, rel=0.1)
    assert preemption.capacity_wait_cv == pytest.approx(2.0, rel=0.15)
    factors = {s.storage: s for s in fit.storage}
    assert factors["local-nvme"].checkpoint_factor == pytest.approx(1.5, rel=1e-3)
    assert factors["local-nvme"].restart_factor == pytest.approx(1.2, rel=1e-3)
    assert factors["ebs-gp3"].checkpoint_factor == pytest.approx(1.3, rel=1e-3)
    # the report: every run against its plan
    assert len(report["runs"]) == 400 and report["wall_error"]["median"] > 0.2


def test_runs_as_planned_find_the_plans_own_assumptions(run, tmp_path):
    """No truth: the runs are the plan's own process, so the fit is the catalog's (the rate inside its interval)."""
    scenario = SCENARIOS / "checkpoint-70b.yaml"
    plan = GOLDEN / "checkpoint-70b.json"
    runs = tmp_path / "runs.csv"
    assert (
        run(
            "simulate", scenario, "--plan", plan, "--trials", 300, "--runs-out", runs
        ).exit_code
        == 0
    )
    fit_file = tmp_path / "fit.yaml"
    assert (
        run("calibrate", scenario, runs, "--plan", plan, "--fit", fit_file).exit_code
        == 0
    )
    fit = load_calibration(fit_file)
    assert fit.efficiency[0].factor == pytest.approx(1.0, abs=1e-3)
    (spot,) = [
        a for a in json.loads(plan.read_text())["assignments"] if a["market"] == "spot"
    ]
    from planner.load.scenario import load_scenario

    catalog = load_scenario(scenario).catalog
    offer = catalog.offers.set_index("key").loc[
        f"{spot['provider']}/{spot['region']}/{spot['instance_type']}"
    ]
    (preemption,) = fit.preemption
    assert (
        preemption.interval.low
        <= offer["spot_preemption_per_h"]
        <= preemption.interval.high
    )
    for s in fit.storage:
        assert (s.checkpoint_factor or 1.0) == pytest.approx(1.0, abs=1e-3)
        assert (s.restart_factor or 1.0) == pytest.approx(1.0, abs=1e-3)


def test_the_interval_covers_the_truth_as_often_as_it_says(run, tmp_path):
    """Runs that vary 8 % from run to run: the 90 % interval of the throughput holds the truth in about 9 of
    10 samples of 100 runs (binomial: 14 or more of 20 unless something is wrong)."""
    covered = 0
    for seed in range(20):
        fit, _, _ = _round_trip(
            run,
            tmp_path,
            SCENARIOS / "lora-finetune.yaml",
            TRUTH,
            trials=100,
            seed=seed,
        )
        (efficiency,) = fit.efficiency
        covered += efficiency.interval.low <= 0.6 <= efficiency.interval.high
        assert efficiency.sigma == pytest.approx(0.08, rel=0.3)
    assert covered >= 14


def test_the_shipped_fit_is_what_calibrate_writes_and_changes_the_plan(run, tmp_path):
    """docs/calibrate.md's round trip: the shipped fit is calibrate's output on the runs drawn from the shipped
    truth; planned with it, the GH200 (61 % of its estimate) loses the job to the next cheapest offer."""
    scenario = SCENARIOS / "lora-finetune.yaml"
    fit, _, _ = _round_trip(run, tmp_path, scenario, TRUTH, trials=100, seed=0)
    shipped = load_calibration(SCENARIOS / "calibrations" / "lora-finetune-fit.yaml")
    assert fit == shipped
    before = json.loads((GOLDEN / "lora-finetune.json").read_text())["assignments"][0]
    after = json.loads((GOLDEN / "lora-finetune-calibrated.json").read_text())[
        "assignments"
    ][0]
    assert before["gpu"] == "GH200" and after["gpu"] != "GH200"
    assert after["expected"]["cost_usd"] > before["expected"]["cost_usd"]
    # what the GH200 costs with the fit: its time over the measured factor, more than the new plan
    gh200 = run(
        "solve",
        SCENARIOS / "lora-finetune-calibrated.yaml",
        "--format",
        "json",
    )
    assert gh200.exit_code == 0
    plan = json.loads(gh200.stdout)
    assert plan["assignments"][0]["instance_type"] == after["instance_type"]


def test_a_calibration_divides_the_estimate_and_the_checker_restates_it(tmp_path):
    """The fit reaches the physics (W over the factor, on every recipe of that GPU) and the storage (restart
    times), and the independent plan checker accepts the calibrated plan."""
    from planner.load.scenario import load_scenario
    from planner.solve.checker import check_plan

    plan = json.loads((GOLDEN / "lora-finetune-calibrated.json").read_text())
    loaded = load_scenario(SCENARIOS / "lora-finetune-calibrated.yaml")
    assert check_plan(loaded, plan) == []
    uncalibrated = tmp_path / "plain.yaml"
    uncalibrated.write_text(
        (SCENARIOS / "lora-finetune-calibrated.yaml")
        .read_text()
        .replace("calibration: calibrations/lora-finetune-fit.yaml\n", "")
    )
    plain = load_scenario(uncalibrated)
    # the plan made without the fit, on Lambda's file system: its restart time is not the calibrated one
    before = json.loads((GOLDEN / "lora-finetune.json").read_text())
    assert check_plan(plain, before) == []
    assert any("restart_h" in p for p in check_plan(loaded, before))
    from planner.physics.estimate import estimate
    from planner.physics.hardware_shape import Shape

    workload = loaded.scenario.workloads[0]
    shape = Shape("GH200", 1, 1, 96.0, "none", 0.0, "none", 0.0)
    calibrated = estimate(workload, loaded.catalog, shape, 0.1)
    base = estimate(workload, plain.catalog, shape, 0.1)
    factor = loaded.catalog.calibration.efficiency[0].factor
    assert calibrated.work_h == pytest.approx(base.work_h / factor, rel=1e-12)


def test_calibrate_refuses_runs_that_do_not_match_the_plan(run, tmp_path):
    scenario = SCENARIOS / "lora-finetune.yaml"
    plan = GOLDEN / "lora-finetune.json"
    runs = tmp_path / "runs.csv"
    assert (
        run(
            "simulate", scenario, "--plan", plan, "--trials", 100, "--runs-out", runs
        ).exit_code
        == 0
    )
    lines = runs.read_text().splitlines()
    moved = tmp_path / "moved.csv"
    moved.write_text(
        "\n".join([lines[0], lines[1].replace("gpu_1x_gh200", "gpu_8x_h100_sxm5")])
    )
    assert_one_line_error(
        run("calibrate", scenario, moved, "--plan", plan),
        "the plan placed",
        "support-lora",
    )
    other = tmp_path / "other.csv"
    other.write_text(
        "\n".join([lines[0], lines[1].replace("support-lora,", "nightly,", 1)])
    )
    assert_one_line_error(run("calibrate", scenario, other, "--plan", plan), "nightly")
    twice = tmp_path / "twice.csv"
    twice.write_text("\n".join([lines[0], lines[1], lines[1]]))
    assert_one_line_error(
        run("calibrate", scenario, twice, "--plan", plan), "twice.csv:3"
    )
    backwards = tmp_path / "backwards.csv"
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("preemptions")] = (
        "2027-01-04T03:00:00+00:00/2027-01-04T02:00:00+00:00"
    )
    backwards.write_text("\n".join([lines[0], ",".join(cells)]))
    assert_one_line_error(
        run("calibrate", scenario, backwards, "--plan", plan),
        "backwards.csv:2",
        "preemptions",
    )


def test_a_scenario_naming_a_missing_or_bad_calibration_is_one_line(
    run, tmp_path, scenario_file
):
    text = (SCENARIOS / "lora-finetune.yaml").read_text()
    missing = scenario_file(
        text.replace("name: lora-support-bot", "name: x\ncalibration: fit.yaml")
    )
    assert_one_line_error(run("validate", missing), "fit.yaml", "calibration")
    (tmp_path / "fit.yaml").write_text(
        "efficiency: [{gpu: H1000, recipe: megatron, factor: 0.9}]\n"
    )
    assert_one_line_error(run("solve", missing), "H1000", "fit.yaml")
    (tmp_path / "fit.yaml").write_text(
        "efficiency: [{gpu: H100-SXM, recipe: megatron, factor: -1}]\n"
    )
    assert_one_line_error(run("solve", missing), "fit.yaml", "factor")


def _runs_without_bills(run, tmp_path):
    scenario = SCENARIOS / "lora-finetune.yaml"
    plan = GOLDEN / "lora-finetune.json"
    runs = tmp_path / "runs.csv"
    assert (
        run(
            "simulate", scenario, "--plan", plan, "--trials", 100, "--runs-out", runs
        ).exit_code
        == 0
    )
    lines = runs.read_text().splitlines()
    header = lines[0].split(",")
    kept = [lines[0]]
    windows = []
    for line in lines[1:4]:
        cells = line.split(",")
        windows.append((cells[header.index("start")], cells[header.index("end")]))
        cells[header.index("billed_usd")] = ""
        kept.append(",".join(cells))
    runs.write_text("\n".join(kept) + "\n")
    return scenario, plan, runs, windows


@pytest.mark.parametrize("layout", ["focus", "cur"])
def test_a_billing_export_says_what_each_run_was_billed(run, tmp_path, layout):
    """FOCUS (AWS, Azure, Google Cloud, OCI) and AWS's legacy CUR, labelled `planner-job` as `planner export`
    labels a job: each run is billed the lines within it; other jobs' and unlabelled lines are not its."""
    scenario, plan, runs, windows = _runs_without_bills(run, tmp_path)
    export = tmp_path / f"{layout}.csv"
    rows = []
    for number, (start, _) in enumerate(windows):
        at = start.replace("+00:00", "Z")
        rows += [
            (at, 10.0 + number, "support-lora"),
            (at, 99.0, "other-job"),
            (at, 50.0, ""),
        ]
    if layout == "focus":
        text = (
            "BillingAccountId,ChargePeriodStart,ChargePeriodEnd,BilledCost,EffectiveCost,Tags\n"
            + "".join(
                f'1,{at},{at},{usd},{usd},"{json.dumps({"user:planner-job": job} if job else {}).replace(chr(34), chr(34) * 2)}"\n'
                for at, usd, job in rows
            )
        )
    else:
        text = (
            "lineItem/UsageStartDate,lineItem/UsageEndDate,lineItem/UnblendedCost,resourceTags/user:planner-job\n"
            + "".join(f"{at},{at},{usd},{job}\n" for at, usd, job in rows)
        )
    export.write_text(text)
    done = run(
        "calibrate",
        scenario,
        runs,
        "--plan",
        plan,
        "--billing",
        export,
        "--format",
        "json",
    )
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert [r["billed_usd"] for r in report["runs"]] == [10.0, 11.0, 12.0]
    planned = report["runs"][0]["planned_cost_usd"]
    assert report["runs"][0]["cost_error"] == pytest.approx(10.0 / planned - 1)


def test_a_billing_export_of_another_kind_is_one_line(run, tmp_path):
    scenario, plan, runs, _ = _runs_without_bills(run, tmp_path)
    export = tmp_path / "bill.csv"
    export.write_text("date,amount\n2027-01-04,3\n")
    assert_one_line_error(
        run("calibrate", scenario, runs, "--plan", plan, "--billing", export),
        "FOCUS",
        "bill.csv",
    )


def test_fallback_run_logs_hold_to_its_monte_carlo_and_give_back_their_work():
    """spot_fallback drawn event by event: the wall time, the share that moved to on demand and the on-demand
    node-hours agree with `simulate_fallback`; each log's useful hours (the move a stop with no wait) are W."""
    from planner.economics.simulate import simulate_fallback

    inputs = dataclasses.replace(SPOT, time_budget_h=65.0)
    logs = draw_runs(inputs, 3000, seed=11, fallback=True)
    sim = simulate_fallback(inputs, on_demand_price=40.0, trials=30_000, seed=11)
    walls = np.array([log.wall_h for log in logs])
    assert abs(walls.mean() - sim.wall_h.mean()) < 4 * walls.std() / math.sqrt(
        len(walls)
    )
    moved = np.array([log.fallback_h is not None for log in logs], dtype=float)
    simulated = (sim.on_demand_node_h > 0).mean()
    assert 0.05 < moved.mean() < 0.95
    assert abs(moved.mean() - simulated) < 4 * math.sqrt(
        simulated * (1 - simulated) / len(logs)
    )
    od = np.array([log.on_demand_node_h for log in logs])
    assert abs(od.mean() - sim.on_demand_node_h.mean()) < 4 * od.std() / math.sqrt(
        len(od)
    )
    for log in logs[:300]:
        stops = [(i.at_h, i.back_h) for i in log.interruptions]
        if log.fallback_h is not None:
            stops.append((log.fallback_h, log.fallback_h))
        work = useful_hours(
            log.wall_h,
            stops,
            interval_h=inputs.checkpoint_interval_h,
            checkpoint_h=inputs.checkpoint_write_h,
            restart_h=inputs.restart_h,
        )
        assert work == pytest.approx(inputs.work_h, rel=1e-9)


def test_calibrate_finds_the_preemptions_of_a_spot_fallback_plan(run, tmp_path):
    """pretrain-deadline's spot_fallback job on 6 B200 nodes: runs drawn from a truth with twice the catalog's
    preemptions (the move to on demand in their records) give the rate back within its interval."""
    scenario = SCENARIOS / "pretrain-deadline.yaml"
    plan = json.loads((GOLDEN / "pretrain-deadline.json").read_text())
    (a,) = plan["assignments"]
    assert a["market"] == "spot_fallback"
    from planner.load.scenario import load_scenario

    catalog = load_scenario(scenario).catalog
    rate = catalog.offers.set_index("key").loc[
        f"{a['provider']}/{a['region']}/{a['instance_type']}", "spot_preemption_per_h"
    ]
    truth = tmp_path / "truth.yaml"
    truth.write_text(
        f"preemption: [{{provider: {a['provider']}, instance_type: {a['instance_type']},"
        f" rate_per_node_h: {2 * rate}}}]\n"
    )
    fit, report, runs = _round_trip(run, tmp_path, scenario, truth, trials=300)
    (preemption,) = fit.preemption
    assert preemption.interval.low <= 2 * rate <= preemption.interval.high
    assert preemption.events > 100
    header, *rows = runs.read_text().splitlines()
    column = header.split(",").index("fallback_at")
    moved = sum(bool(row.split(",")[column]) for row in rows)
    assert moved > 0  # the runs that moved to on demand say when
    assert len(report["runs"]) == 300
    (efficiency,) = fit.efficiency
    assert efficiency.factor == pytest.approx(
        1.0, abs=2e-3
    )  # the truth keeps the estimate's throughput


def test_calibrate_takes_a_scenario_not_a_quarter(run, tmp_path):
    runs = tmp_path / "runs.csv"
    runs.write_text("run\n")
    assert_one_line_error(
        run(
            "calibrate",
            SCENARIOS / "quarter-team.yaml",
            runs,
            "--plan",
            GOLDEN / "quarter-team.json",
        ),
        "quarter file",
    )
