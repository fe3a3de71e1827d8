"""`planner simulate` as a user runs it: the solved plan by default, or a plan file."""

import json

from conftest import SCENARIOS
from test_bad_input import assert_one_line_error


def test_simulates_the_solved_plan_and_agrees_with_the_analytic_model(run):
    result = run(
        "simulate",
        SCENARIOS / "lora-finetune.yaml",
        "--trials",
        "20000",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["workload"] == "support-lora" and row["trials"] == 20000
    for field in ("wall_h", "cost_usd", "billed_node_h"):
        stats = row[field]
        assert stats["p50"] <= stats["p90"] <= stats["p99"]
        assert abs(stats["relative_difference"]) < 0.02
    assert abs(row["p_deadline"]["difference_pp"]) < 2


def test_plan_file_and_seed_give_identical_numbers(run, tmp_path):
    plan = tmp_path / "plan.json"
    assert (
        run(
            "solve", SCENARIOS / "team-quarter-mix.yaml", "--format", "json", "-o", plan
        ).exit_code
        == 0
    )
    first = run(
        "simulate",
        SCENARIOS / "team-quarter-mix.yaml",
        "--plan",
        plan,
        "--seed",
        "7",
        "--format",
        "json",
    )
    second = run(
        "simulate",
        SCENARIOS / "team-quarter-mix.yaml",
        "--plan",
        plan,
        "--seed",
        "7",
        "--format",
        "json",
    )
    assert first.exit_code == 0 and first.stdout == second.stdout
    rows = json.loads(first.stdout)
    assert {r["workload"] for r in rows} == {
        "ranker-train",
        "eval-harness",
        "mistral-qlora",
        "vision-finetune",
        "embed-corpus",
    }
    other = run(
        "simulate",
        SCENARIOS / "team-quarter-mix.yaml",
        "--plan",
        plan,
        "--seed",
        "8",
        "--format",
        "json",
    )
    assert other.stdout != first.stdout


def test_table_output(run):
    result = run("simulate", SCENARIOS / "batch-generation.yaml", "--trials", "1000")
    assert result.exit_code == 0
    assert (
        "gen-8b" in result.stdout
        and "wall_p99" in result.stdout
        and "cost_analytic" in result.stdout
    )


def test_bad_plan_files(run, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"assignments": [')
    assert_one_line_error(
        run("simulate", SCENARIOS / "lora-finetune.yaml", "--plan", broken),
        "broken.json:1",
        "not valid JSON",
    )
    for name, text, expected in (
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        ("nested.json", "[" * 100 + "]" * 100, "nested deeper than 64 levels"),
        ("digits.json", "[1" + "0" * 5000 + "]", "an integer of thousands of digits"),
    ):
        (tmp_path / name).write_text('{"assignments": ' + text + "}")
        assert_one_line_error(
            run(
                "simulate", SCENARIOS / "lora-finetune.yaml", "--plan", tmp_path / name
            ),
            f"{name}: ",
            expected,
        )
    empty = tmp_path / "empty.json"
    empty.write_text('{"assignments": []}')
    assert_one_line_error(
        run("simulate", SCENARIOS / "lora-finetune.yaml", "--plan", empty),
        "expected a plan",
    )
    stranger = tmp_path / "stranger.json"
    job = {
        "workload": "nobody",
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "g5.xlarge",
        "market": "on_demand",
        "nodes": 1,
        "gpus_per_node": 1,
        "checkpoint_interval_h": 1,
        "inputs": {
            "work_h": 3.0,
            "checkpoint_write_h": 0.05,
            "restart_h": 0.1,
            "failure_rate_per_h": 2e-5,
            "interruption_tolerance": "checkpointed",
            "price_per_node_h": 1.0,
            "billing_granularity_h": 1 / 3600,
            "billing_minimum_h": 0.0,
            "time_budget_h": None,
        },
        "expected": {"wall_h": 3.5, "p_deadline": 1.0, "cost_usd": 3.5},
        "breakdown_usd": {"storage": 0, "egress": 0},
    }
    stranger.write_text(json.dumps({"assignments": [job]}))
    assert_one_line_error(
        run("simulate", SCENARIOS / "lora-finetune.yaml", "--plan", stranger),
        "stranger.json: assignments[0].workload",
        "'nobody' is not in the scenario",
    )
    job["workload"] = "support-lora"
    stranger.write_text(json.dumps({"assignments": [job]}))
    result = run(
        "simulate",
        SCENARIOS / "lora-finetune.yaml",
        "--plan",
        stranger,
        "--trials",
        "100",
    )
    # the fields the replay reads are all it needs
    assert result.exit_code == 0, result.output
    del job["inputs"]["work_h"]
    stranger.write_text(json.dumps({"assignments": [job]}))
    assert_one_line_error(
        run("simulate", SCENARIOS / "lora-finetune.yaml", "--plan", stranger),
        "stranger.json: assignments[0].inputs.work_h",
        "missing required key 'work_h'",
    )


def test_infeasible_scenario_has_nothing_to_simulate(run, scenario_file):
    path = scenario_file("""\
name: x
catalogs: [lambda]
workloads:
  - name: huge
    kind: training
    memory: {per_gpu: 500GiB}
    work: {gpu_hours: 10, reference_gpu: A100-80GB}
""")
    # infeasible, as `planner solve` says of it: exit 1, one line saying why
    result = run("simulate", path)
    assert result.exit_code == 1 and run("solve", path).exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {path}: no plan to simulate"
    ), lines
    assert "no GPU has enough VRAM" in lines[0]


import pytest  # noqa: E402
from conftest import scenario_files  # noqa: E402


@pytest.mark.parametrize("scenario", [p.name for p in scenario_files()])
def test_every_example_plan_agrees_with_simulation(run, scenario):
    """cost-model §5: billed node-hours (and so cost) within 2 % of simulation for the shipped examples."""
    result = run(
        "simulate", SCENARIOS / scenario, "--trials", "20000", "--format", "json"
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    for row in (
        data["workloads"] if isinstance(data, dict) else data
    ):  # with endpoints: {workloads, endpoints}
        for field in ("billed_node_h", "cost_usd", "wall_h"):
            stats = row[field]
            tolerance = 0.02 * stats["analytic"] + 4 * stats["stderr"]
            assert abs(stats["mean"] - stats["analytic"]) <= tolerance, (
                row["workload"],
                field,
                stats,
            )
        assert abs(row["p_deadline"]["difference_pp"]) <= 2
