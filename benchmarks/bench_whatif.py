"""Benchmark `planner whatif` against independent `planner solve` runs, measured in the same run.

A 50-workload scenario (bench_solve.py's generator, binding quotas) is swept over 41 spot
price multipliers (0.5 to 2.0). The sweep (one process pool over local cores; candidate
rows, physics, screening bounds and exact cost-model results reused between points; hints
from the neighbouring point) is timed on the grid alone and with the bisection of every
switch point. The baseline is 41 independent `planner solve` processes, one per
multiplier, each on a copy of the scenario with `overrides: [{spot_price_multiplier: m}]`;
their objectives must equal the sweep's.

    python benchmarks/bench_whatif.py                # 50 workloads, 41 points, all 41 baseline solves
    python benchmarks/bench_whatif.py --sample 8     # time 8 baseline solves and scale to 41
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import planner.cli  # noqa: E402,F401  (what `planner whatif` holds when it starts its workers, and no more)
from planner.whatif import sweep as whatif  # noqa: E402
from planner.whatif.points import PointTask, loaded_scenario, solve_point  # noqa: E402
from planner.whatif.spec import SweepSpec, parse_range  # noqa: E402

PLANNER = str(Path(sys.executable).with_name("planner"))


def independent(
    folder: Path, text: str, values: list[float]
) -> tuple[float, dict[float, float]]:
    """Seconds for one fresh `planner solve` process per multiplier, and each objective."""
    objectives = {}
    started = time.perf_counter()
    for value in values:
        path = folder / f"solve-{value:.4f}.yaml"
        path.write_text(
            text + f"overrides:\n  - {{spot_price_multiplier: {value!r}}}\n"
        )
        out = subprocess.run(
            [PLANNER, "solve", str(path), "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        objectives[value] = json.loads(out)["objective_usd"]
    return time.perf_counter() - started, objectives


def scenario_yaml(workloads: int) -> str:
    """bench_solve's scenario, written by a child process: importing bench_solve here would load the solver into
    this process, and the workers forked from it would skip the imports a `planner whatif` worker makes."""
    code = f"from bench_solve import scenario_yaml; print(scenario_yaml({workloads}, quotas=True), end='')"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def first_and_warm(source: str, values: list[float]) -> tuple[float, float]:
    """Seconds of a sweep's first point in a fresh worker (the solver's imports, everything built) and of the
    next point in the same worker (candidate rows, physics, screening and exact costs reused; prices mapped in)."""
    task = PointTask(source, time_limit_s=60.0)
    times = []
    for value in values[:2]:
        started = time.perf_counter()
        solve_point(dataclasses.replace(task, spot_price_multiplier=value))
        times.append(time.perf_counter() - started)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=50)
    parser.add_argument("--points", type=int, default=41)
    parser.add_argument(
        "--sample",
        type=int,
        default=None,
        help="time only this many baseline solves, then scale",
    )
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    values = parse_range(f"0.5:2.0:{args.points}", "--spot-price")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = scenario_yaml(args.workloads)
        scenario = folder / "bench.yaml"
        scenario.write_text(text)
        spec = SweepSpec(str(scenario), {"spot_price_multiplier": values})
        # the CLI loads and checks the file before forking workers
        loaded_scenario(str(scenario))
        with ProcessPoolExecutor(
            max_workers=1
        ) as fresh:  # a worker with nothing kept yet
            first_s, warm_s = fresh.submit(
                first_and_warm, str(scenario), values[len(values) // 2 :]
            ).result()
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.processes) as pool:
            timings = {}
            # no bisection below 10x
            grid_only = SweepSpec(spec.source, spec.axes, precision=10.0)
            result = whatif.run_sweep(grid_only, pool)
            timings["grid"] = time.perf_counter() - started
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.processes) as pool:
            full = whatif.run_sweep(spec, pool)
            timings["grid+bisection"] = time.perf_counter() - started
        sample = (
            values
            if not args.sample
            else [
                values[round(i * (len(values) - 1) / max(1, args.sample - 1))]
                for i in range(args.sample)
            ]
        )
        baseline_s, objectives = independent(folder, text, list(dict.fromkeys(sample)))
    baseline_41 = baseline_s * len(values) / len(objectives)
    by_value = {
        p.multipliers["spot_price_multiplier"]: p.objective_usd for p in result.points
    }
    worst = max(abs(by_value[v] - o) for v, o in objectives.items())
    print(
        f"scenario: {args.workloads} workloads (bench_solve generator, binding quotas), every shipped catalog"
    )
    print(
        f"sweep: spot price x0.5..2.0, {len(values)} points, {args.processes} worker processes on {os.cpu_count()} cores"
    )
    print(
        f"  grid only:            {timings['grid']:7.1f} s  ({timings['grid'] / len(values):.2f} s per point)"
    )
    print(
        f"  grid + bisection:     {timings['grid+bisection']:7.1f} s  ({full.solves} solves, "
        f"{len(full.switches)} switches to ±{spec.precision / 2:g})"
    )
    label = (
        ""
        if len(objectives) == len(values)
        else f" (timed {len(objectives)}, scaled to {len(values)})"
    )
    print(
        f"independent `planner solve` x{len(values)}: {baseline_41:7.1f} s  "
        f"({baseline_s / len(objectives):.2f} s each){label}"
    )
    print(f"speed-up, grid only:        {baseline_41 / timings['grid']:5.1f}x")
    print(
        f"speed-up, with bisection:   {baseline_41 / timings['grid+bisection']:5.1f}x  "
        f"(the baseline finds no switch points at all)"
    )
    print(f"largest objective difference sweep vs independent solve: ${worst:.6f}")
    print(
        f"first point in a fresh worker: {first_s:.2f} s; the next point there: {warm_s:.2f} s "
        f"(first / warm: {first_s / warm_s:.1f}x)"
    )


if __name__ == "__main__":
    main()
