"""Benchmark endpoint plans: every shipped serving example solved as `planner solve` does (one search per
provider where the endpoint may use one, `max_providers: 1`) against one CP-SAT search of the whole model,
in the same run, on 1 and 2 workers.

    python benchmarks/bench_endpoints.py                # every shipped scenario with an endpoint
    python benchmarks/bench_endpoints.py serving-rag    # some of them
    python benchmarks/bench_endpoints.py --copies 20,200,1000   # N copies of serving-chat's endpoint

Prints per example and workers: endpoint options, providers, status, cost, seconds (wall and CP-SAT's
deterministic) for both, and the ratio whole/split. The target (#42): OPTIMAL in under 10 s on 2 cores.
`--copies` plans N endpoints alike but for their names (#44): options built and solved as `planner solve` does
(one build and one search for all), against one CP-SAT search of the whole model with a 5 s limit, as
`--time-limit 5` gave before.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.candidates.generate import generate  # noqa: E402
from planner.candidates.limits import limits_of  # noqa: E402
from planner.load.scenario import load_scenario  # noqa: E402
from planner.solve.cpsat_search import search  # noqa: E402
from planner.solve.model import build_model  # noqa: E402
from planner.solve.search import solve_model  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def serving_examples(names: list[str]) -> list[Path]:
    paths = sorted(
        p
        for p in SCENARIOS.glob("*.yaml")
        if "kind: serving" in p.read_text() and "\nhorizon:" not in "\n" + p.read_text()
    )
    return [p for p in paths if not names or p.stem in names]


def measure(path: Path, workers: int) -> dict:
    loaded = load_scenario(path)
    started = time.perf_counter()
    found = generate(loaded.scenario, loaded.catalog)
    candidates_s = time.perf_counter() - started
    limits = limits_of(loaded.scenario)
    plan = build_model(
        found.pruned, limits, serving=(found.endpoints, found.traffic), constrain=False
    )
    started = time.perf_counter()
    split = solve_model(plan, 60.0, workers)
    split_s = time.perf_counter() - started
    started = time.perf_counter()
    plan.constrained()
    whole = search(
        plan.model, plan.pick, None, 60.0, workers, 0, None, serving=plan.serving
    )
    whole_s = time.perf_counter() - started
    whole_cost = (
        float(whole.serving["cost_usd"].sum())
        + float(plan.candidates.loc[whole.values, "cost_usd"].sum())
        if whole.values is not None
        else float("nan")
    )
    return {
        "example": path.stem,
        "workers": workers,
        "options": len(found.endpoints),
        "providers": found.endpoints["provider"].nunique(),
        "candidates_s": round(candidates_s, 2),
        "status": split.status,
        "cost_usd": round(split.objective_usd, 2),
        "solve_s": round(split_s, 2),
        "det_s": round(split.deterministic_seconds, 2),
        "whole_status": whole.status,
        "whole_cost_usd": round(whole_cost, 2),
        "whole_s": round(whole_s, 2),
        "whole_det_s": round(whole.deterministic, 2),
        "whole/split": round(whole_s / split_s, 1),
    }


def copies(count: int, folder: Path) -> dict:
    """`count` copies of serving-chat's endpoint: built and solved as `planner solve` does, then as one model."""
    raw = yaml.safe_load((SCENARIOS / "serving-chat.yaml").read_text())
    raw["workloads"] = [
        dict(raw["workloads"][0], name=f"chat-{k}") for k in range(count)
    ]
    path = folder / f"copies-{count}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    loaded = load_scenario(path)
    started = time.perf_counter()
    found = generate(loaded.scenario, loaded.catalog)
    candidates_s = time.perf_counter() - started
    plan = build_model(
        found.pruned,
        limits_of(loaded.scenario),
        serving=(found.endpoints, found.traffic),
        constrain=False,
    )
    started = time.perf_counter()
    split = solve_model(plan, 5.0, 2)
    split_s = time.perf_counter() - started
    started = time.perf_counter()
    plan.constrained()
    whole = search(plan.model, plan.pick, None, 5.0, 2, 0, None, serving=plan.serving)
    whole_s = time.perf_counter() - started
    whole_cost = (
        float(whole.serving["cost_usd"].sum())
        if whole.values is not None
        else float("nan")
    )
    return {
        "copies": count,
        "options": len(found.endpoints),
        "candidates_s": round(candidates_s, 2),
        "status": split.status,
        "cost_usd": round(split.objective_usd, 2),
        "solve_s": round(split_s, 2),
        "whole_status": whole.status,
        "whole_cost_usd": round(whole_cost, 2),
        "whole_s": round(whole_s, 2),
    }


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--copies":
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            rows = [copies(int(n), Path(folder)) for n in sys.argv[2].split(",")]
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(pd.DataFrame(rows).to_string(index=False))
        return
    rows = [
        measure(path, workers)
        for path in serving_examples(sys.argv[1:])
        for workers in (1, 2)
    ]
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
