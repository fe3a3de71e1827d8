"""`NAME:COUNT` (SkyPilot's accelerator syntax: nodes of COUNT GPUs) wherever a GPU is named: scenario files'
allow/forbid, and every `--gpu` option on the command line."""

from __future__ import annotations

import json

import pytest
from conftest import SCENARIOS

from planner.load.scenario import load_scenario
from planner.solve.checker import check_plan


def test_catalog_list_takes_name_and_count(run):
    result = run("catalog", "list", "--gpu", "H100:8", "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows and all(
        r["gpus_per_node"] == 8 and r["gpu"].startswith("H100") for r in rows
    )
    every = json.loads(
        run("catalog", "list", "--gpu", "H100", "--format", "json").stdout
    )
    assert len(every) > len(rows)


def test_gpus_and_estimate_take_name_and_count(run):
    gpus = json.loads(run("gpus", "--gpu", "H100:8", "--format", "json").stdout)
    assert gpus and all(str(g["gpus_per_node"]) == "8" for g in gpus)
    result = run(
        "estimate",
        SCENARIOS / "lora-finetune.yaml",
        "--gpu",
        "H100:8",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    rows = [r for r in json.loads(result.stdout) if "gpus_per_node" in r]
    assert rows and all(r["gpus_per_node"] == 8 for r in rows)


@pytest.mark.parametrize("query", ["H100:x", "H100:0", "H100:"])
def test_a_bad_count_is_one_line(run, query):
    result = run("catalog", "list", "--gpu", query)
    assert (
        result.exit_code == 2
        and "--gpu" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_a_plan_on_nodes_of_eight_passes_the_checker(run, tmp_path):
    """allow.gpus [H100:8]: the checker reads the count too (it once compared `H100:8` with the GPU's name)."""
    path = tmp_path / "eight.yaml"
    path.write_text(
        "name: eight\ncatalogs: [aws, gcp]\nworkloads:\n  - name: tune\n    kind: fine_tuning\n"
        "    model: llama-3.1-8b\n    method: lora\n    work: {tokens: 200M}\n    time_budget: 12h\n"
        '    allow: {gpus: ["H100:8"]}\n'
    )
    plan = json.loads(run("solve", path, "--format", "json").stdout)
    assert plan["status"] == "OPTIMAL" and plan["assignments"][0]["gpus_per_node"] == 8
    assert check_plan(load_scenario(path), plan) == []
