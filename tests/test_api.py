"""The Python API (`import planner`): each function takes a path, YAML text or a dict, runs the command's own
pipeline and returns a typed result whose JSON is the command's to the byte and whose frame is its CSV."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
import yaml
from conftest import SCENARIOS

import planner

LORA = SCENARIOS / "lora-finetune.yaml"


@pytest.fixture(scope="module")
def lora() -> planner.SolvedPlan:
    return planner.solve(LORA, timings=False)


def test_the_public_names_are_stable():
    assert planner.__all__ == [
        "Assignment",
        "EndpointPlan",
        "Estimates",
        "PlannerError",
        "Schedule",
        "ScheduledRun",
        "Simulation",
        "SolvedPlan",
        "batch",
        "estimate",
        "simulate",
        "solve",
    ]


def test_solve_is_the_command_to_the_byte(run, lora):
    assert (
        lora.to_json() == run("solve", LORA, "--format", "json", "--no-timings").stdout
    )
    csv = pd.read_csv(io.StringIO(run("solve", LORA, "--format", "csv").stdout))
    pd.testing.assert_frame_equal(
        lora.to_frame().reset_index(drop=True), csv, check_dtype=False
    )


def test_solve_gives_typed_assignments(lora):
    (a,) = lora.assignments
    assert (
        lora.solved
        and lora.status == "OPTIMAL"
        and lora.objective_usd == pytest.approx(a.cost_usd, abs=0.01)
    )
    assert (a.workload, a.nodes, a.gpus) == ("support-lora", 1, 1) and isinstance(
        a.wall_h, float
    )
    assert (
        a.market in ("on_demand", "spot", "spot_fallback")
        and a.parallelism
        and "TP1" in a.parallelism
    )
    assert sum(a.breakdown_usd.values()) == pytest.approx(a.cost_usd, rel=1e-9)
    assert (
        lora.to_dict() == json.loads(lora.to_json())
        and lora.to_dict() is not lora.to_dict()
    )


def test_solve_without_alternatives_plans_the_same_for_less_work():
    """`alternatives=0` prices no runner-up (as the command's table report): the same plan, empty
    `alternatives`, fewer rows priced exactly; the default is the command's count."""
    import inspect

    from planner.candidates.generate import RUNNER_UPS

    path = SCENARIOS / "qlora-70b.yaml"
    full, lean = planner.solve(path), planner.solve(path, alternatives=0)
    assert lean.status == full.status == "OPTIMAL"
    assert (lean.objective_usd, lean.assignments) == (
        full.objective_usd,
        full.assignments,
    )
    assert any(a["alternatives"] for a in full.to_dict()["assignments"])
    assert all(a["alternatives"] == [] for a in lean.to_dict()["assignments"])
    priced = [p.to_dict()["solve_report"]["candidates_priced"] for p in (full, lean)]
    assert priced[1] < priced[0], priced
    from planner import api

    assert inspect.signature(api.solve).parameters["alternatives"].default == (
        RUNNER_UPS
    )


def test_a_path_yaml_text_and_a_dict_are_one_scenario(lora):
    text = LORA.read_text()
    as_text = planner.solve(text, timings=False, base_dir=SCENARIOS)
    as_dict = planner.solve(yaml.safe_load(text), timings=False, base_dir=SCENARIOS)
    assert as_text.to_dict() == as_dict.to_dict() == lora.to_dict()


def test_bad_input_raises_the_command_s_line(tmp_path):
    scenario = yaml.safe_load(LORA.read_text())
    scenario["workloads"][0]["kind"] = "trainingz"
    with pytest.raises(planner.PlannerError) as raised:
        planner.solve(scenario, base_dir=tmp_path)
    assert str(raised.value).startswith(
        f"{tmp_path / '<scenario>'}:"
    ) and "workloads[0].kind" in str(raised.value)
    with pytest.raises(TypeError, match="expected a path, YAML text or a dict"):
        planner.solve(42)
    with pytest.raises(planner.PlannerError, match="no such scenario file"):
        planner.solve(tmp_path / "missing.yaml")


def test_an_infeasible_scenario_says_why():
    scenario = yaml.safe_load(LORA.read_text())
    # 300M tokens in five minutes: no GPU is that fast
    scenario["workloads"][0]["time_budget"] = "5m"
    plan = planner.solve(scenario, base_dir=SCENARIOS)
    assert not plan.solved and plan.status == "INFEASIBLE" and plan.assignments == ()
    assert "support-lora" in plan.infeasible and plan.to_frame().empty


def test_endpoints_come_typed():
    plan = planner.solve(SCENARIOS / "serving-chat.yaml")
    (e,) = plan.endpoints
    assert e.workload == "chat-8b" and e.cost_usd == pytest.approx(
        plan.objective_usd, abs=0.01
    )
    assert (
        e.worst_ttft_s is not None
        and 0 < e.worst_ttft_s < 0.5
        and e.usd_per_month > e.usd_per_h
    )


def test_batch_is_the_command_to_the_byte(run):
    quarter = SCENARIOS / "quarter-launch.yaml"
    schedule = planner.batch(quarter, timings=False)
    assert (
        schedule.to_json()
        == run("batch", quarter, "--format", "json", "--no-timings").stdout
    )
    assert schedule.solved and {r.run for r in schedule.runs} == set(
        schedule.to_frame()["run"]
    )
    assert all(r.start and r.provider for r in schedule.runs if r.scheduled)


def test_estimate_and_simulate_are_the_commands(run, lora):
    scenario = SCENARIOS / "full-finetune-70b.yaml"
    estimates = planner.estimate(scenario, gpus=("H100",))
    assert (
        estimates.to_json()
        == run("estimate", scenario, "--gpu", "H100", "--format", "json").stdout
    )
    assert estimates.rows and all(r["gpu"].startswith("H100") for r in estimates.rows)
    simulated = planner.simulate(LORA, lora, trials=500, seed=3)
    assert (
        simulated.to_json()
        == run(
            "simulate", LORA, "--trials", "500", "--seed", "3", "--format", "json"
        ).stdout
    )
    (job,) = simulated.jobs
    assert (
        job.workload == "support-lora"
        and "cost_usd.mean" in simulated.to_frame().columns
    )


def test_the_schedule_confidence_replay_runs_once_with_a_chart(
    run, tmp_path, monkeypatch
):
    """`batch --schedule-confidence --gantt` replayed the schedule's 2,000 trials twice (once per output)."""
    from planner.batch import contract

    calls = []
    real = contract.replay_record
    monkeypatch.setattr(
        contract, "replay_record", lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    )
    result = run(
        "batch",
        SCENARIOS / "quarter-launch.yaml",
        "--schedule-confidence",
        "0.9",
        "--gantt",
        tmp_path / "g.png",
    )
    assert result.exit_code == 0, result.stderr
    assert (
        len(calls) == 1
        and "schedule confidence: every run's slot sized at" in result.stdout
    )
    schedule = planner.batch(SCENARIOS / "quarter-launch.yaml", schedule_confidence=0.9)
    assert schedule.to_dict()["schedule_confidence"]["target"] == 0.9


def test_the_type_stub_says_what_the_package_does():
    """`planner/__init__.pyi` repeats `solve` and `batch` (mypy reads the callable packages as modules without it)
    and the public names: it must say what `planner.api` and `planner.__all__` say."""
    import ast
    import inspect
    from pathlib import Path

    import planner.api

    stub = ast.parse((Path(planner.__file__).parent / "__init__.pyi").read_text())
    functions = {f.name: f for f in stub.body if isinstance(f, ast.FunctionDef)}
    for name in ("solve", "batch"):
        real = inspect.signature(getattr(planner.api, name))
        args = functions[name].args
        stated = [a.arg for a in args.args + args.kwonlyargs]
        defaults = [ast.literal_eval(d) for d in args.kw_defaults]
        assert stated == list(real.parameters), name
        assert defaults == [
            p.default for p in real.parameters.values() if p.kind is p.KEYWORD_ONLY
        ], name
    (listed,) = [
        n.value
        for n in stub.body
        if isinstance(n, ast.Assign) and n.targets[0].id == "__all__"
    ]
    assert ast.literal_eval(listed) == planner.__all__
