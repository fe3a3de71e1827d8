"""Lazy exact pricing (`generate(lazy=True)`, `solve/lazy.py`): a plan priced lazily is the plan of pricing every
row, report for report, on the shipped examples and on random fleets whose quotas push workloads off their
cheapest candidates; and the rows it leaves unpriced are ones no cheaper plan could use."""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

import pytest
from conftest import scenario_files

from planner.candidates.generate import generate
from planner.load.catalog import load_catalog
from planner.load.scenario import LoadedScenario, load_scenario
from planner.report.solve import plan_json
from planner.schema.scenario import Scenario
from planner.solve.pipeline import make_plan


def report(plan) -> dict:
    """The JSON contract without its clock readings and counts of effort."""
    return json.loads(json.dumps(plan_json(plan, timings=False), default=float))


def job_scenarios() -> list[Path]:
    """The shipped examples lazy pricing applies to: no endpoint (beside one, jobs are priced in full)."""
    return [
        p
        for p in scenario_files()
        if not any(w.serving for w in load_scenario(p).scenario.workloads)
    ]


@pytest.mark.parametrize("path", job_scenarios(), ids=lambda p: p.stem)
def test_a_shipped_plan_is_the_same_priced_lazily(path: Path):
    loaded = load_scenario(path)
    lazy, every = make_plan(loaded), make_plan(loaded, lazy=False)
    assert report(lazy) == report(every)
    if every.result is not None:
        assert every.result.unpriced == 0


@cache
def catalog():
    return load_catalog(["lambda", "runpod"])


MODELS = ("llama-3.2-1b", "llama-3.2-3b", "qwen2.5-7b", "llama-3.1-8b")


def fleet(seed: int) -> dict:
    rng = random.Random(seed)
    workloads = []
    for n in range(rng.randint(4, 7)):
        low = rng.choice((1, 1, 2, 4))
        workload = {
            "name": f"w{n}",
            "gpus": {"min": low, "max": low * rng.choice((1, 2, 4))},
            "time_budget": f"{rng.choice((12, 24, 48, 96))}h",
        }
        if rng.random() < 0.5:
            workload |= {
                "kind": "fine_tuning",
                "model": rng.choice(MODELS),
                "method": rng.choice(("lora", "qlora")),
                "work": {"tokens": f"{rng.choice((20, 50, 100))}M"},
                "sequence_length": rng.choice((1024, 2048, 4096)),
            }
        else:
            workload |= {
                "kind": "training",
                "memory": {"per_gpu": round(rng.uniform(8, 60), 1)},
                "work": {
                    "gpu_hours": round(rng.uniform(2, 80), 1),
                    "reference_gpu": "A100-80GB",
                },
                "interruption_tolerance": rng.choice(("none", "checkpointed")),
                "checkpoint": {"every": rng.choice(("30m", "2h"))},
            }
        workloads.append(workload)
    return {
        "name": f"fleet-{seed}",
        "catalogs": ["lambda", "runpod"],
        "workloads": workloads,
    }


def loaded_for(spec: dict) -> LoadedScenario:
    return LoadedScenario(
        Path(f"{spec['name']}.yaml"), Scenario.model_validate(spec), catalog(), spec
    )


@cache
def fleet_run(seed: int, runner_ups: int) -> dict:
    """A fleet solved free, then with quotas below what its free plan draws, lazily and in full. Without
    runner-ups (what-if points ask for none) fewer rows are priced at first, and the quotas send the LP back
    for more."""
    rng = random.Random(seed)
    spec = fleet(seed)
    free = make_plan(loaded_for(spec), lazy=False, runner_ups=runner_ups)
    if free.status != "OPTIMAL":
        return {"skipped": free.status}
    used = free.chosen.groupby("provider")["gpus"].sum()
    spec["constraints"] = {
        "gpu_quotas": {
            provider: max(0, int(gpus) - rng.choice((1, 2)))
            for provider, gpus in used.items()
        }
    }
    loaded = loaded_for(spec)
    first = generate(loaded.scenario, loaded.catalog, lazy=True, runner_ups=runner_ups)
    return {
        "lazy": make_plan(loaded, runner_ups=runner_ups),
        "every": make_plan(loaded, lazy=False, runner_ups=runner_ups),
        "first_priced": first.priced,
        "deferred": first.pending.left if first.pending else 0,
    }


def plan_of(plan, runner_ups: int) -> dict:
    """The report, less the runner-ups where none were asked for (then they are whatever was priced)."""
    data = report(plan)
    if not runner_ups:
        for a in data["assignments"]:
            a.pop("alternatives", None)
    return data


SEEDS = range(12)


@pytest.mark.parametrize("runner_ups", [3, 0])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_fleet_under_binding_quotas_is_planned_the_same_priced_lazily(
    seed: int, runner_ups: int
):
    run = fleet_run(seed, runner_ups)
    if "skipped" in run:
        pytest.skip(f"the free fleet is {run['skipped']}")
    assert plan_of(run["lazy"], runner_ups) == plan_of(run["every"], runner_ups)


def test_fleets_leave_rows_unpriced_and_price_more_where_quotas_push():
    """The comparisons above are not vacuous: rows were deferred, a solved fleet had some priced after a first
    solve asked for them, and some were left unpriced to the end."""
    runs = [fleet_run(seed, r) for seed in SEEDS for r in (3, 0)]
    runs = [r for r in runs if "skipped" not in r]
    solved = [r for r in runs if r["lazy"].status == "OPTIMAL"]
    assert len(runs) >= 16 and len(solved) >= 3
    assert sum(r["deferred"] > 0 for r in runs) >= 8
    assert any(r["lazy"].result.priced > r["first_priced"] for r in solved)
    assert any(r["lazy"].result.unpriced > 0 for r in solved)


def test_a_report_without_runner_ups_leaves_them_unpriced_for_the_same_plan(
    run, tmp_path
):
    """`planner solve` prices runner-ups only where its report shows them (JSON's `alternatives`, --explain):
    the table report prices fewer rows exactly and shows the same plan, to the cent, as the JSON one."""
    import re

    from conftest import SCENARIOS

    path = SCENARIOS / "team-quarter-mix.yaml"
    table = run("solve", path)
    out = tmp_path / "plan.json"
    assert run("solve", path, "--format", "json", "-o", out).exit_code == 0
    data = json.loads(out.read_text())
    priced = int(re.search(r"([\d,]+) rows priced exactly", table.output)[1])
    assert priced < data["solve_report"]["candidates_priced"]
    assert f"TOTAL expected cost ${data['objective_usd']:,.2f}" in table.output
    for a in data["assignments"]:
        assert re.search(
            rf"{a['workload']}\s+│ {a['provider']}\s+│ {a['region']}\s+│ {a['instance_type']}\s",
            table.output,
        ), a["workload"]


def test_planning_pauses_the_cycle_collector_and_restores_it_as_it_was():
    """`without_cycle_collection` around a plan: paused inside, enabled after (also when it raises), and left
    off where the caller had it off."""
    import gc

    from planner.candidates.cache import without_cycle_collection

    assert gc.isenabled()
    with without_cycle_collection():
        assert not gc.isenabled()
        with without_cycle_collection():  # nested: the inner one leaves it to the outer
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), without_cycle_collection():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with without_cycle_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
