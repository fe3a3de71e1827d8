"""The analytic cost model (cost-model §4–§7) against hand cases and the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from planner.economics.candidate import CandidateInputs, billed_hours
from planner.economics.costmodel import best_interval, expected, p_deadline
from planner.economics.segment_plans import segment_moments, segment_plan, segments
from planner.economics.simulate import simulate
from planner.schema.plan import BREAKDOWN_KEYS

SEC = 1.0 / 3600.0
MIN = 60.0 * SEC


def make(**kw) -> CandidateInputs:
    base = dict(work_h=10.0, price_per_node_h=2.0, hw_failure_per_gpu_h=0.0)
    base.update(kw)
    return CandidateInputs(**base)


# ------------------------------------------------------------ segments


@pytest.mark.parametrize(
    "W, tau, k, last",
    [
        (1.0, 0.1, 10, 0.1),
        (1.1, 0.1, 11, 0.1),
        (0.7, 0.1, 7, 0.1),
        (1.0, 0.3, 4, 0.1),
        (5.0, 10.0, 1, 5.0),
        (3.0, math.inf, 1, 3.0),
    ],
)
def test_segments_float_safe_ceil(W, tau, k, last):
    seg = segments(W, tau)
    assert seg.size == k
    assert seg[-1] == pytest.approx(last)
    assert seg.sum() == pytest.approx(W)


# ------------------------------------------------------------ hand-worked


def test_hourly_job_of_3_2_hours_is_billed_4():
    r = expected(
        make(
            work_h=3.0,
            restart_h=0.2,
            billing_granularity_h=1.0,
            interruption_tolerance="none",
        )
    )
    assert r.wall_h == pytest.approx(3.2)
    assert r.billed_node_h == pytest.approx(4.0)
    assert r.rounding_waste_node_h == pytest.approx(0.8)


def test_per_second_job_of_20s_with_minute_minimum_is_billed_60s():
    r = expected(
        make(
            work_h=20 * SEC,
            billing_granularity_h=SEC,
            billing_minimum_h=MIN,
            interruption_tolerance="none",
        )
    )
    assert r.billed_node_h == pytest.approx(MIN)
    assert float(billed_hours(20 * SEC, SEC, MIN)) == pytest.approx(MIN)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much],
)
@given(
    n=st.sampled_from([1, 2, 3, 8, 16]),
    gran=st.sampled_from([SEC, MIN, 0.1, 1 / 6]),
    restart=st.sampled_from([0.0, 0.05, 0.1667, 0.5]),
    short_minimum=st.booleans(),
    log_w=st.floats(math.log(0.2), math.log(200)),
    k=st.sampled_from([1, 2, 5, 20, 100]),
    C=st.sampled_from([0.0, 0.01, 0.05]),
    log_rate=st.floats(math.log(1e-4), math.log(2)),
    market=st.sampled_from(["spot", "hardware", "both"]),
)
def test_half_a_granule_per_session_is_within_its_bound_of_the_grid(
    n, gran, restart, short_minimum, log_w, k, C, log_rate, market
):
    """The continuous sessions' waste taken as γ/2 each (`expected_waste` without its grid) is never further from the
    grid's than `_half_granule_error` says: the bound the planner relies on to skip the grid."""
    from planner.economics import rounding_waste

    W, rate = math.exp(log_w), math.exp(log_rate)
    # a minimum of up to the restart never binds the sessions that fail or pass
    R = max(restart, gran)
    inputs = CandidateInputs(
        work_h=W,
        checkpoint_write_h=C,
        restart_h=R,
        nodes=n,
        gpus_per_node=8,
        spot_rate_per_node_h=rate if market != "hardware" else 0.0,
        hw_failure_per_gpu_h=rate / 8 if market != "spot" else 0.0,
        billing_granularity_h=gran,
        billing_minimum_h=min(R, MIN) if short_minimum else 0.0,
        interruption_tolerance="checkpointed" if k > 1 else "none",
        checkpoint_interval_h=W / k,
    )
    p = segment_plan(inputs)
    ET, EF, sd = segment_moments(p)
    assume(math.isfinite(ET) and EF < 50)
    waste = {}
    for name, rel in (("grid", -1.0), ("half", math.inf)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rounding_waste, "SMOOTH_WASTE_REL", rel)
            waste[name] = rounding_waste.expected_waste(
                p, gran, inputs.billing_minimum_h, ET, EF, sd
            ).total
    bound = rounding_waste._half_granule_error(p, gran, EF)
    event(
        "bound within 1 % of the gap"
        if abs(waste["grid"] - waste["half"]) > 0.99 * bound
        else "looser"
    )
    assert abs(waste["grid"] - waste["half"]) <= 1.001 * bound + 1e-12 * n * ET, (
        waste,
        bound,
    )


def test_billed_hours_is_not_fooled_by_float_noise():
    assert float(billed_hours(0.1 + 0.2 + 2.7, 1.0, 0.0)) == 3.0  # 3.0000000000000004
    assert float(billed_hours(3.01, 1.0, 0.0)) == 4.0


def test_spot_reports_rework_and_rounding_separately():
    r = expected(
        make(
            work_h=6.0,
            checkpoint_write_h=0.05,
            restart_h=0.1,
            nodes=2,
            spot_rate_per_node_h=0.3,
            checkpoint_interval_h=0.5,
            billing_granularity_h=1.0,
        )
    )
    assert r.breakdown["preemption_rework"] > 0
    assert r.breakdown["rounding_waste"] > 0
    assert r.breakdown["preemption_rework"] == pytest.approx(
        2.0 * 2 * (r.wall_h - 6.0 - r.segments * 0.05 - 0.1)
    )
    assert r.breakdown["rounding_waste"] == pytest.approx(2.0 * r.rounding_waste_node_h)


def test_breakdown_keys_and_sum():
    r = expected(
        make(
            nodes=3,
            spot_rate_per_node_h=0.2,
            checkpoint_write_h=0.1,
            checkpoint_interval_h=1.0,
            restart_h=0.3,
            storage_usd_per_h=0.7,
            egress_usd=12.0,
            billing_granularity_h=MIN,
        )
    )
    assert tuple(r.breakdown) == BREAKDOWN_KEYS
    assert math.fsum(r.breakdown.values()) == pytest.approx(r.cost_usd, rel=1e-12)
    assert r.breakdown["storage"] == pytest.approx(0.7 * r.wall_h)
    assert r.breakdown["egress"] == 12.0


def test_tolerance_rules():
    none = segment_plan(
        make(
            interruption_tolerance="none",
            checkpoint_write_h=0.3,
            checkpoint_interval_h=0.5,
        )
    )
    assert (none.k, none.C) == (1, 0.0)
    stateless = segment_plan(
        make(
            interruption_tolerance="stateless",
            checkpoint_write_h=0.3,
            checkpoint_interval_h=0.5,
        )
    )
    assert (stateless.k, stateless.C) == (20, 0.0)


def test_p_deadline_k1_exact_small_case():
    # k = 1, R = 0: T = s + Σ X_j; P(T <= s) = P(no failure) = e^(−λs)
    inp = make(
        work_h=2.0,
        spot_rate_per_node_h=0.5,
        interruption_tolerance="none",
        time_budget_h=2.0,
    )
    assert p_deadline(inp) == pytest.approx(math.exp(-1.0), abs=1e-6)
    assert p_deadline(make(work_h=2.0, time_budget_h=1.99)) == 0.0


# ------------------------------------------------------ monotonicity & λ = 0

params = st.fixed_dictionaries(
    dict(
        work_h=st.floats(0.05, 200),
        checkpoint_write_h=st.floats(0, 0.5),
        restart_h=st.floats(0, 1),
        nodes=st.integers(1, 16),
        gpus_per_node=st.integers(1, 8),
        spot_rate_per_node_h=st.floats(0, 0.3),
        billing_granularity_h=st.sampled_from([SEC, MIN, 1.0]),
        billing_minimum_h=st.sampled_from([0.0, MIN, 1.0]),
        interruption_tolerance=st.sampled_from(["none", "checkpointed", "stateless"]),
        tau_frac=st.floats(0.01, 1.5),
    )
)


def build(d: dict, **over) -> CandidateInputs:
    d = dict(d)
    d["checkpoint_interval_h"] = d.pop("tau_frac") * d["work_h"]
    d.update(over)
    return CandidateInputs(price_per_node_h=d.pop("price_per_node_h", 3.0), **d)


def finite_and_small(inp: CandidateInputs) -> bool:
    ET, EF, _ = segment_moments(segment_plan(inp))
    return math.isfinite(ET) and EF < 1e4


@settings(max_examples=40, deadline=None, derandomize=True)
@given(params, st.floats(1.01, 3.0))
def test_cost_non_decreasing_in_price_rate_and_restart(d, factor):
    inp = build(d)
    assume(
        finite_and_small(
            build(d, spot_rate_per_node_h=d["spot_rate_per_node_h"] * factor + 0.01)
        )
    )
    base = expected(inp).cost_usd
    assert expected(build(d, price_per_node_h=3.0 * factor)).cost_usd >= base
    slower = build(d, restart_h=d["restart_h"] * factor + 0.01)
    assume(finite_and_small(slower))
    assert expected(slower).cost_usd >= base * (1 - 1e-9)
    riskier = build(d, spot_rate_per_node_h=d["spot_rate_per_node_h"] * factor + 0.01)
    assert expected(riskier).cost_usd >= base * (1 - 1e-9)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(params)
def test_no_failures_wall_time_is_R_plus_W_plus_kC(d):
    inp = build(d, spot_rate_per_node_h=0.0, hw_failure_per_gpu_h=0.0)
    p = segment_plan(inp)
    r = expected(inp)
    assert r.wall_h == pytest.approx(inp.restart_h + inp.work_h + p.k * p.C, rel=1e-12)
    assert r.failures == 0
    assert r.breakdown["preemption_rework"] == 0
    assert r.billed_node_h == pytest.approx(
        inp.nodes
        * float(billed_hours(p.T0, inp.billing_granularity_h, inp.billing_minimum_h)),
        rel=1e-12,
    )


# ------------------------------------------------------ auto cadence


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    work=st.floats(0.5, 200),
    C=st.floats(0.005, 0.5),
    R=st.floats(0, 1),
    n=st.integers(1, 16),
    rate=st.floats(0.001, 1.0),
    gran=st.sampled_from([SEC, MIN, 1.0]),
)
def test_auto_cadence_never_worse_than_fixed(work, C, R, n, rate, gran):
    inp = CandidateInputs(
        work_h=work,
        checkpoint_write_h=C,
        restart_h=R,
        nodes=n,
        gpus_per_node=8,
        spot_rate_per_node_h=rate,
        price_per_node_h=10.0,
        billing_granularity_h=gran,
    )
    assume(
        finite_and_small(
            CandidateInputs(**{**inp.__dict__, "checkpoint_interval_h": 0.05})
        )
    )
    tau = best_interval(inp)
    best = expected(inp, tau).cost_usd
    lam = inp.failure_rate_per_h
    fixed = [
        0.02,
        0.05,
        0.1,
        0.25,
        0.5,
        1.0,
        2.0,
        4.0,
        work,
        math.sqrt(2 * C / lam),
        work / 3.3,
    ]
    for t in fixed:
        assert best <= expected(inp, t).cost_usd * (1 + 1e-9), t


# ------------------------------------------------------ against simulation

TRIALS = 20000

sim_params = st.fixed_dictionaries(
    dict(
        log_w=st.floats(math.log(0.01), math.log(500)),
        log_tau_frac=st.floats(math.log(0.002), math.log(1.2)),
        checkpoint_write_h=st.one_of(st.just(0.0), st.floats(0, 0.5)),
        restart_h=st.one_of(st.just(0.0), st.floats(0, 1)),
        nodes=st.integers(1, 16),
        gpus_per_node=st.integers(1, 8),
        spot_rate_per_node_h=st.one_of(st.just(0.0), st.floats(0.01, 2)),
        billing_granularity_h=st.sampled_from([SEC, MIN, 1.0]),
        billing_minimum_h=st.sampled_from([0.0, MIN, 1.0]),
        interruption_tolerance=st.sampled_from(["none", "checkpointed", "stateless"]),
        deadline_frac=st.floats(0, 2.5),
        capacity_wait_h=st.sampled_from([0.0, 0.5, 2.0]),
        capacity_wait_cv=st.sampled_from(
            [1.0, 2.31, 5.56]
        ),  # exponential, and the AWS and GCP trace fits
    )
)


def sim_inputs(d: dict) -> CandidateInputs | None:
    W = math.exp(d["log_w"])
    inp = CandidateInputs(
        work_h=W,
        checkpoint_interval_h=W * math.exp(d["log_tau_frac"]),
        checkpoint_write_h=d["checkpoint_write_h"],
        restart_h=d["restart_h"],
        nodes=d["nodes"],
        gpus_per_node=d["gpus_per_node"],
        spot_rate_per_node_h=d["spot_rate_per_node_h"],
        billing_granularity_h=d["billing_granularity_h"],
        billing_minimum_h=d["billing_minimum_h"],
        interruption_tolerance=d["interruption_tolerance"],
        price_per_node_h=1.0,
        capacity_wait_h=d.get("capacity_wait_h", 0.0),
        capacity_wait_cv=d.get("capacity_wait_cv", 1.0),
    )
    p = segment_plan(inp)
    ET, EF, _ = segment_moments(p)
    # keep the simulation cheap: bounded failures and segments
    if not (EF <= 40 and p.k <= 5000):
        return None
    D = p.T0 + d["deadline_frac"] * (ET - p.T0)
    return CandidateInputs(**{**inp.__dict__, "time_budget_h": D})


def close(
    analytic: float, sample: np.ndarray, rel: float, se_floor: float = 0.0
) -> bool:
    """|analytic − mean| within `rel` of the mean plus 4 standard errors."""
    m = float(sample.mean())
    se = max(float(sample.std(ddof=1) / math.sqrt(sample.size)), se_floor)
    return abs(analytic - m) <= rel * abs(m) + 4.0 * se


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(sim_params)
def test_analytic_matches_simulation(d):
    inp = sim_inputs(d)
    assume(inp is not None)
    event("failure-prone" if expected(inp).failures > 0.5 else "rare failures")
    r = expected(inp)
    sim = simulate(inp, trials=TRIALS, seed=7)
    # 2 % is the contract; the MC noise allowance is on top of a tighter 1 %; rare heavy-tailed waits: a sample
    # may hold none of the long ones, so floor the wall's error at the waits' own spread (compound Poisson)
    plan = segment_plan(inp)
    waits_sd = math.sqrt(
        r.failures
        / plan.streams
        * plan.rho
        * plan.wait**2
        * (1 + plan.wait_cv**2)
        / TRIALS
    )
    assert close(r.wall_h, sim.wall_h, 0.01, waits_sd), (r.wall_h, sim.mean("wall_h"))
    assert close(r.billed_node_h, sim.billed_node_h, 0.01), (
        r.billed_node_h,
        sim.mean("billed_node_h"),
    )
    # rare failures: a sample may hold none, so floor the error at Poisson's (a stateless job's count is one
    # node's, times its nodes)
    streams = plan.streams
    assert close(
        r.failures,
        sim.failures.astype(float),
        0.01,
        math.sqrt(r.failures * streams / TRIALS),
    )
    se_p = math.sqrt(max(r.p_deadline * (1 - r.p_deadline), 1e-4) / TRIALS)
    assert abs(r.p_deadline - sim.p_deadline) <= 0.01 + 4 * se_p, (
        r.p_deadline,
        sim.p_deadline,
    )


@pytest.mark.parametrize("rate", [0.3, 1.0, 2.0])
@pytest.mark.parametrize("frac", [0.5, 1.0, 1.5, 3.0])
def test_p_deadline_single_segment_failure_prone(rate, frac):
    """k = 1 on a failure-prone market: where a normal approximation fails."""
    inp = CandidateInputs(
        work_h=1.5,
        restart_h=0.25,
        nodes=2,
        spot_rate_per_node_h=rate,
        interruption_tolerance="none",
        price_per_node_h=1.0,
    )
    r = expected(inp)
    D = r.wall_h * frac
    inp = CandidateInputs(**{**inp.__dict__, "time_budget_h": D})
    sim = simulate(inp, trials=40000, seed=3)
    assert abs(p_deadline(inp) - sim.p_deadline) <= 0.01


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(sim_params, st.floats(0.05, 3.0))
def test_analytic_matches_simulation_failure_prone(d, per_segment):
    """Same check, with λ set so that each segment fails `per_segment` times on average (no capacity waits: the
    waste is read off billed node-hours less the wall time)."""
    d = {**d, "capacity_wait_h": 0.0}
    base = sim_inputs(
        {**d, "spot_rate_per_node_h": 0.0, "log_w": min(d["log_w"], math.log(50))}
    )
    assume(base is not None)
    p = segment_plan(base)
    lam = math.log1p(per_segment) / max(p.s, p.s_k)
    spot = (lam - base.gpus * base.hw_failure_per_gpu_h) / base.nodes
    assume(0 < spot <= 2)
    inp = sim_inputs(
        {**d, "spot_rate_per_node_h": spot, "log_w": min(d["log_w"], math.log(50))}
    )
    assume(inp is not None)
    r = expected(inp)
    sim = simulate(inp, trials=TRIALS, seed=11)
    assert close(r.wall_h, sim.wall_h, 0.01), (r.wall_h, sim.mean("wall_h"))
    assert close(r.billed_node_h, sim.billed_node_h, 0.01), (
        r.billed_node_h,
        sim.mean("billed_node_h"),
    )
    waste = sim.billed_node_h - inp.nodes * sim.wall_h
    # rounding waste on its own (a few % of billed at most), within 2 % of billed
    assert close(r.rounding_waste_node_h, waste, 0.0, 0.005 * r.billed_node_h / 4)
    se_p = math.sqrt(max(r.p_deadline * (1 - r.p_deadline), 1e-4) / TRIALS)
    assert abs(r.p_deadline - sim.p_deadline) <= 0.01 + 4 * se_p, (
        r.p_deadline,
        sim.p_deadline,
    )


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    work=st.floats(0.5, 100),
    rate=st.floats(0.0, 1.5),
    n=st.integers(1, 8),
    q=st.floats(0.5, 0.99),
    tolerance=st.sampled_from(["checkpointed", "none"]),
)
def test_completion_quantile_inverts_p_deadline(work, rate, n, q, tolerance):
    """`planner batch` books the q-quantile: P(T <= quantile) >= q, and just below it < q."""
    from planner.economics.costmodel import completion_quantile, p_deadline

    inp = CandidateInputs(
        work_h=work,
        checkpoint_write_h=0.02,
        restart_h=0.1,
        nodes=n,
        gpus_per_node=8,
        spot_rate_per_node_h=rate,
        checkpoint_interval_h=1.0,
        interruption_tolerance=tolerance,
    )
    d = completion_quantile(inp, q)
    assume(math.isfinite(d))
    at = p_deadline(
        CandidateInputs(**{**inp.__dict__, "time_budget_h": d * (1 + 1e-3) + 1e-6})
    )
    below = p_deadline(
        CandidateInputs(**{**inp.__dict__, "time_budget_h": d * (1 - 2e-3) - 1e-6})
    )
    assert at >= q - 2e-3
    assert below <= q + 2e-3


# ---------------------------------------------------------------- the vectorised forms (economics/screen.py)


def _random_keys(seed: int, count: int = 400):
    rng = np.random.default_rng(seed)
    W = np.exp(rng.uniform(np.log(0.05), np.log(5000), count))
    n = rng.integers(1, 64, count).astype(float)
    lam = n * np.exp(rng.uniform(np.log(1e-5), np.log(2), count))
    gran = rng.choice([1 / 3600, 1 / 60, 1.0], count)
    return W, float(rng.uniform(0, 0.5)), float(rng.uniform(0, 0.5)), lam, n, gran


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_screen_forms_equal_the_scalar_cost_model(seed):
    from planner.economics import costmodel as cm
    from planner.economics import screen, segment_plans
    from planner.economics.candidate import CandidateInputs

    W, C, R, lam, n, gran = _random_keys(seed)
    lam[:5] = 0.0  # the λ → 0 limits too
    s = W / 3 + C
    # beyond, the scalar form overflows and the screen caps e^(λs) (a hopeless key either way)
    inside = lam * s < 600
    assert inside.sum() > len(W) / 2
    seg = screen.segment_time(lam[inside], s[inside], R)
    assert seg == pytest.approx(
        [segment_plans.seg_time(a, b, R) for a, b in zip(lam[inside], s[inside])],
        rel=1e-12,
    )
    ks = np.array([[1.0, 2.0, 7.0, 40.0]] * len(W))
    et, ef = screen.expected_time(W, C, R, lam, ks)
    for i in range(len(W)):
        want_et, want_ef = cm.expected_time(W[i], C, R, lam[i], ks[i])
        assert et[i] == pytest.approx(want_et, rel=1e-12) and ef[i] == pytest.approx(
            want_ef, rel=1e-12, abs=1e-300
        )
    # the screen's k is quick_interval's k, key for key, all keys at once
    quick = screen.quick_k(W, C, R, lam, n, gran)
    for i in range(len(W)):
        inputs = CandidateInputs(
            work_h=W[i],
            checkpoint_write_h=C,
            restart_h=R,
            nodes=int(n[i]),
            gpus_per_node=1,
            spot_rate_per_node_h=lam[i] / n[i],
            hw_failure_per_gpu_h=0.0,
            price_per_node_h=1.0,
            billing_granularity_h=gran[i],
            billing_minimum_h=0.0,
            interruption_tolerance="checkpointed",
            checkpoint_interval_h=W[i],
        )
        assert quick[i] == round(W[i] / cm.quick_interval(inputs)), i


def test_least_expected_time_is_the_minimum_over_every_segment_count():
    from planner.economics import costmodel as cm
    from planner.economics import screen

    W, C, R, lam, _, _ = _random_keys(7, 200)
    least = screen.min_expected_time(W, C, R, lam)
    for i in range(len(W)):
        k_max = int(min(100_000, max(1, math.ceil(W[i] / 1e-3))))
        brute = cm.expected_time(W[i], C, R, lam[i], np.arange(1, k_max + 1))[0].min()
        assert least[i] == pytest.approx(brute, rel=1e-12)


def test_grid_lengths_are_scipys_fast_lengths():
    """The FFT grids are numpy's pocketfft at the lengths SciPy's `next_fast_len` picks (5-smooth), so the
    transforms are the ones `scipy.fft` made, to the bit, without importing SciPy on the solve path."""
    from scipy.fft import irfft, next_fast_len, rfft

    from planner.economics.grids import fast_len

    assert [fast_len(n) for n in range(1, 70_000)] == [
        next_fast_len(n, real=True) for n in range(1, 70_000)
    ]
    x = np.random.default_rng(3).standard_normal(fast_len(9_001))
    assert np.array_equal(np.fft.rfft(x), rfft(x))
    assert np.array_equal(np.fft.irfft(rfft(x), len(x)), irfft(rfft(x), len(x)))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    work=st.floats(0.5, 300),
    per_segment=st.floats(1e-4, 1.5),
    interval=st.floats(0.002, 4.0),
    restart=st.floats(0.0, 0.5),
    n=st.integers(1, 16),
    wait=st.sampled_from([0.0, 0.3, 1.35, 4.0]),
    cv=st.sampled_from([1.0, 2.31, 5.56]),
    tolerance=st.sampled_from(["checkpointed", "stateless"]),
)
def test_the_sized_grid_holds_p_deadline_within_its_error(
    work, per_segment, interval, restart, n, wait, cv, tolerance
):
    """`law_points` sizes each law's grid for P(T <= D) within LAW_ERROR: held against a grid of 2^18 points at
    the law's 1 %-99.9 % quantiles, on laws from a failure in ten thousand segments to dozens with long,
    heavy-tailed capacity waits (the traces' cv of 2.3 and 5.6), and stateless items shorter than the restart,
    read at the edges of their lumps too."""
    from planner.economics import wall_time

    inp = CandidateInputs(
        work_h=work,
        checkpoint_write_h=0.01 if tolerance == "checkpointed" else 0.0,
        restart_h=restart,
        nodes=n,
        hw_failure_per_gpu_h=0.0,
        checkpoint_interval_h=interval,
        interruption_tolerance=tolerance,
        capacity_wait_h=wait,
        capacity_wait_cv=cv,
    )
    p = segment_plan(inp)
    inp = CandidateInputs(
        **{**inp.__dict__, "spot_rate_per_node_h": per_segment / max(p.s, p.s_k) / n}
    )
    p = segment_plan(inp)
    law = wall_time.WallLaw(p)
    assume(law.finite and law.z_max < 1e4)
    points = wall_time.law_points(law)
    assume(points < 65536)  # the most it takes: beyond, the error is what those give
    # where the kinks would need more than KINK_POINTS, the grid stops there, as fine as before (not checked here)
    assume(law.z_max / wall_time.kink_step(law) < wall_time.KINK_POINTS - 2)
    # items narrower than the restart with failures to spare make a comb of near-atoms at multiples of R, read
    # within the mass of an item near z (§6), not within LAW_ERROR; with few, only the first atom (a kink the
    # bound resolves) weighs more than the second's E[F]²/2
    assume(p.s >= p.R or law.failures**2 / 2 <= 2 * wall_time.LAW_ERROR)
    fine = wall_time.WallLaw(p)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wall_time, "law_points", lambda law: 2**18)
        fine.compute()
    edges = [
        p.T0 + j * p.R + i * p.s for j in (1, 2) for i in (0, 1, 2)
    ]  # where an item's lump starts and ends
    for D in [fine.quantile(q) for q in (0.01, 0.1, 0.5, 0.9, 0.99, 0.999)] + edges:
        assert abs(law.p_le(D) - fine.p_le(D)) <= wall_time.LAW_ERROR, (
            D,
            points,
            law.p_le(D),
            fine.p_le(D),
        )
