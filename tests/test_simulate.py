"""The Monte-Carlo simulator: determinism, hand cases, and its own invariants."""

from __future__ import annotations

import numpy as np
import pytest

from planner.economics.candidate import CandidateInputs
from planner.economics.costmodel import expected
from planner.economics.simulate import simulate

SEC = 1.0 / 3600.0


def spot_job(**kw) -> CandidateInputs:
    base = dict(
        work_h=5.0,
        checkpoint_write_h=0.05,
        restart_h=0.2,
        nodes=4,
        gpus_per_node=8,
        spot_rate_per_node_h=0.4,
        checkpoint_interval_h=0.5,
        billing_granularity_h=1.0,
        price_per_node_h=3.0,
        storage_usd_per_h=0.5,
        egress_usd=7.0,
        time_budget_h=9.0,
    )
    base.update(kw)
    return CandidateInputs(**base)


def test_same_seed_same_result_and_different_seed_differs():
    a = simulate(spot_job(), trials=2000, seed=11)
    b = simulate(spot_job(), trials=2000, seed=11)
    c = simulate(spot_job(), trials=2000, seed=12)
    for name in ("wall_h", "billed_node_h", "cost_usd", "failures", "met_deadline"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.wall_h, c.wall_h)


def test_no_failures_is_deterministic_and_hand_billed():
    inp = CandidateInputs(
        work_h=3.0,
        restart_h=0.2,
        nodes=2,
        hw_failure_per_gpu_h=0.0,
        billing_granularity_h=1.0,
        interruption_tolerance="none",
        price_per_node_h=1.5,
        time_budget_h=3.2,
    )
    sim = simulate(inp, trials=50)
    assert np.all(sim.wall_h == pytest.approx(3.2))
    assert np.all(sim.billed_node_h == pytest.approx(8.0))  # 2 nodes × 4 h
    assert np.all(sim.cost_usd == pytest.approx(12.0))
    assert sim.met_deadline.all() and (sim.failures == 0).all()


def test_minimum_billing_for_a_20s_job():
    inp = CandidateInputs(
        work_h=20 * SEC,
        hw_failure_per_gpu_h=0.0,
        billing_granularity_h=SEC,
        billing_minimum_h=60 * SEC,
        interruption_tolerance="none",
    )
    sim = simulate(inp, trials=10)
    assert np.all(sim.billed_node_h == pytest.approx(60 * SEC))


def test_invariants_of_a_spot_run():
    inp = spot_job()
    sim = simulate(inp, trials=5000, seed=1)
    n = inp.nodes
    # every session is billed at least its length; whole granules per session
    assert np.all(sim.billed_node_h >= n * sim.wall_h - 1e-9)
    assert np.allclose(sim.billed_node_h, np.round(sim.billed_node_h))
    # a trial with F failures has at most n·(1 + F) sessions (a preemption event releases every node), each
    # wasting < 1 granule
    assert np.all(sim.billed_node_h - n * sim.wall_h < n * (1 + sim.failures) + 1e-9)
    # wall time is at least the failure-free time, more with each failure
    T0 = 0.2 + 5.0 + 10 * 0.05
    assert np.all(sim.wall_h >= T0 - 1e-9)
    assert np.all(sim.wall_h[sim.failures == 0] == pytest.approx(T0))
    assert np.all(
        sim.wall_h[sim.failures > 0] >= T0 + 0.2 * sim.failures[sim.failures > 0] - 1e-9
    )
    assert np.array_equal(sim.met_deadline, sim.wall_h <= 9.0 + 1e-9)
    assert np.allclose(sim.cost_usd, 3.0 * sim.billed_node_h + 0.5 * sim.wall_h + 7.0)


def test_summary_helpers():
    sim = simulate(spot_job(), trials=3000, seed=2)
    s = sim.summary()
    assert set(s) == {"wall_h", "billed_node_h", "cost_usd", "failures", "p_deadline"}
    for f in ("wall_h", "cost_usd"):
        assert s[f]["p50"] <= s[f]["p90"] <= s[f]["p99"]
        assert s[f]["mean"] == pytest.approx(float(np.mean(getattr(sim, f))))
    assert 0 <= s["p_deadline"] <= 1 and sim.trials == 3000
    assert sim.stderr("wall_h") > 0


def test_progress_reaches_one():
    seen = []
    simulate(spot_job(), trials=500, seed=0, progress=seen.append)
    assert seen and seen[-1] == 1.0 and all(0 <= x <= 1 for x in seen)
    assert seen == sorted(seen)


def test_mean_cost_agrees_with_expected():
    inp = spot_job()
    sim = simulate(inp, trials=20000, seed=4)
    r = expected(inp)
    se = sim.stderr("cost_usd")
    assert abs(sim.mean("cost_usd") - r.cost_usd) <= 0.01 * r.cost_usd + 4 * se


def test_failure_loses_only_current_segment():
    # one tiny segment after many: with huge R, T − T0 is R per failure plus lost work < s
    inp = CandidateInputs(
        work_h=2.0,
        checkpoint_interval_h=0.1,
        restart_h=10.0,
        spot_rate_per_node_h=0.3,
        hw_failure_per_gpu_h=0.0,
    )
    sim = simulate(inp, trials=3000, seed=5)
    T0 = 10.0 + 2.0
    lost = sim.wall_h - T0 - 10.0 * sim.failures
    assert np.all(lost >= -1e-9)
    assert np.all(lost < 0.1 * sim.failures + 1e-9)


def test_trials_too_many_for_memory_run_in_chunks_that_still_agree_with_the_cost_model(
    monkeypatch,
):
    """A plan of 2,500 nodes asked for a million trials allocated trials x nodes session starts at once (18.6 GiB,
    a traceback). Past MAX_NODE_SESSIONS the trials run in chunks, each seeded apart: here 24 of 1,000 node
    sessions for 24,000 trials of a 4-node job, spot alone and the fallback policy alike."""
    from planner.economics import fallback
    from planner.economics import simulate as montecarlo

    monkeypatch.setattr(montecarlo, "MAX_NODE_SESSIONS", 1000)  # 250 trials per chunk
    job = spot_job(capacity_wait_h=0.5, time_budget_h=12.0)
    seen = []
    sim = simulate(job, trials=24_000, seed=5, progress=seen.append)
    again = simulate(job, trials=24_000, seed=5)
    assert sim.trials == 24_000 and np.array_equal(sim.cost_usd, again.cost_usd)
    assert len(np.unique(sim.cost_usd[:250])) > 50 and not np.array_equal(
        sim.cost_usd[:250], sim.cost_usd[250:500]
    )
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0)
    analytic = expected(job)
    assert abs(sim.mean() - analytic.cost_usd) < 4 * sim.stderr(), (
        sim.mean(),
        analytic.cost_usd,
        sim.stderr(),
    )
    assert abs(sim.p_deadline - analytic.p_deadline) < 0.01

    on_demand = 3 * job.price_per_node_h
    policy = montecarlo.simulate_fallback(job, on_demand, trials=24_000, seed=5)
    priced = fallback.expected(job, on_demand)
    assert policy.trials == 24_000
    assert (
        abs(policy.mean() / priced.cost_usd - 1) < 0.02
        and abs(policy.p_deadline - priced.p_deadline) < 0.02
    )
