"""Timing: 10,000 simulated trials of a 500-segment job, and p_deadline rate.

Run: python benchmarks/bench_simulate.py
"""

from __future__ import annotations

import time

from planner.economics.candidate import CandidateInputs
from planner.economics.costmodel import best_interval, expected, p_deadline
from planner.economics.simulate import simulate


def main() -> None:
    inp = CandidateInputs(
        work_h=50.0,
        checkpoint_write_h=0.02,
        restart_h=0.1,
        nodes=4,
        gpus_per_node=8,
        spot_rate_per_node_h=0.1,
        checkpoint_interval_h=0.1,
        billing_granularity_h=1.0,
        price_per_node_h=30.0,
        time_budget_h=66.0,
    )
    r = expected(inp)
    t = time.perf_counter()
    sim = simulate(inp, trials=10_000, seed=0)
    dt = time.perf_counter() - t
    print(
        f"simulate: 10,000 trials x {r.segments} segments "
        f"(E[F]={r.failures:.1f}, max F={sim.failures.max()}): {dt:.3f} s"
    )
    print(
        f"  E[T] analytic {r.wall_h:.3f} h, sim {sim.mean('wall_h'):.3f} h; "
        f"billed {r.billed_node_h:.2f} vs {sim.mean('billed_node_h'):.2f} node-h; "
        f"P(T<=D) {r.p_deadline:.4f} vs {sim.p_deadline:.4f}"
    )

    cases = [
        inp,
        CandidateInputs(
            work_h=1.5,
            restart_h=0.25,
            nodes=2,
            spot_rate_per_node_h=1.0,
            interruption_tolerance="none",
            time_budget_h=4.0,
        ),
        CandidateInputs(
            work_h=400.0,
            checkpoint_write_h=0.1,
            nodes=16,
            gpus_per_node=8,
            spot_rate_per_node_h=0.02,
            checkpoint_interval_h=0.7,
            restart_h=0.3,
            time_budget_h=460.0,
        ),
    ]
    for c in cases:
        reps = 200
        t = time.perf_counter()
        for _ in range(reps):
            p_deadline(c)
        dp = (time.perf_counter() - t) / reps
        t = time.perf_counter()
        for _ in range(reps // 4):
            expected(c)
        de = (time.perf_counter() - t) / (reps // 4)
        print(
            f"W={c.work_h:g} h n={c.nodes}: p_deadline {dp * 1e3:.2f} ms "
            f"({1 / dp:.0f}/s), expected() {de * 1e3:.2f} ms"
        )
    t = time.perf_counter()
    tau = best_interval(inp)
    print(f"best_interval: tau={tau:.4f} h in {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
