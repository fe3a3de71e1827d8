"""Spot as the traces show it (cost model §3, §4): preemption events that take many of a zone's nodes at once,
and a wait for capacity after each; fitted to the shipped public traces statistic by statistic, checked on a
trace the fit did not use, the cost model against its Monte-Carlo, and a stateless job on several nodes
against an independent replay of its item queue."""

from __future__ import annotations

import importlib.util
import json
import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import MINIMAL

from planner.economics.candidate import (
    CandidateInputs,
    event_sizes,
    events_per_loss,
    spot_event_rate,
    wait_phases,
)
from planner.economics.costmodel import expected
from planner.economics.segment_plans import segment_plan
from planner.economics.simulate import simulate
from planner.economics.wall_time import WallLaw
from planner.load.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "fit_spot", ROOT / "tools" / "fit_spot.py"
)
fit_spot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fit_spot)


FIT = fit_spot.fit(pd.read_csv(ROOT / "catalogs" / "spot_trace_rates.csv"))
SIZES = np.arange(1, 17)


def test_shipped_providers_carry_the_fit():
    catalog = load_catalog(["aws", "gcp"])
    for cloud in ("aws", "gcp"):
        provider = catalog.providers[cloud]
        print(
            f"{cloud}: c {FIT[cloud]['spot_correlation']:.3f} (shipped {provider.spot_correlation}), "
            f"m {FIT[cloud]['spot_capacity_wait_h']:.2f} h (shipped {provider.spot_capacity_wait_h})"
        )
        assert provider.spot_correlation == pytest.approx(
            FIT[cloud]["spot_correlation"], abs=0.005
        )
        assert provider.spot_capacity_wait_h == pytest.approx(
            FIT[cloud]["spot_capacity_wait_h"], abs=0.005
        )
        assert provider.spot_capacity_wait_cv == pytest.approx(
            FIT[cloud]["spot_capacity_wait_cv"], abs=0.005
        )
    offers = catalog.offers
    spot = offers["spot_usd_h"].notna()
    assert (
        offers.loc[spot & (offers["provider"] == "aws"), "spot_correlation"] == 0.42
    ).all()
    assert (offers.loc[~spot, "spot_capacity_wait_h"] == 0).all()


# The fitted c against each statistic of the traces it was fitted to (tools/fit_spot.py; sources: Can't Be Late's
# AWS p3 preemption runs of 4 running nodes, skypilot-org/spot-traces@221da1ab; SkyNomad's 16 x H100 GCP probes,
# andylizf/skynomad-artifact@62b9aaa1). One parameter per cloud carries all three.


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_the_fit_reproduces_how_many_nodes_each_event_takes(cloud):
    """Share of events by size: total variation within 0.12 (AWS 0.05 on 179 events; GCP 0.11 on 1,373, where
    the traces have a bump at half the pool the one-parameter law smooths over)."""
    f = FIT[cloud]
    distance = 0.5 * float(np.abs(f["shares"] - f["model_shares"]).sum())
    print(
        f"{cloud}: measured {np.round(f['shares'], 2)}, model {np.round(f['model_shares'], 2)}, "
        f"total variation {distance:.3f}"
    )
    assert distance < 0.12
    # single-node events
    assert f["model_shares"][0] == pytest.approx(f["shares"][0], abs=0.05)
    # events taking every node
    assert f["model_shares"][-1] == pytest.approx(f["shares"][-1], abs=0.03)


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_the_fit_reproduces_the_mean_event_size(cloud):
    """Node losses per event within 3 % (AWS 1.71 measured, 1.73 model; GCP 7.06 and 6.98)."""
    f = FIT[cloud]
    sizes = SIZES[: f["nodes"]]
    measured, model = (
        float(np.dot(sizes, f["shares"])),
        float(np.dot(sizes, f["model_shares"])),
    )
    print(
        f"{cloud}: mean event size measured {measured:.2f}, model {model:.2f}, ratio {model / measured:.3f}"
    )
    assert model == pytest.approx(measured, rel=0.03)
    assert model == pytest.approx(
        f["nodes"] / spot_event_rate(1.0, f["nodes"], f["spot_correlation"])
    )


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_the_fit_reproduces_the_rate_of_events_a_gang_sees(cloud):
    """Events that end the all-up state of the trace's gang (4 AWS nodes, 16 GCP nodes) per hour, against
    λ·g(n) at the node-loss rate λ measured while all are up: within 3 % (0.244 and 0.241/h; 0.692 and 0.700/h).
    Independent losses would say 1.7x and 7x as many."""
    f = FIT[cloud]
    ratio = f["model_rate_all"] / f["rate_all"]
    print(
        f"{cloud}: all-{f['nodes']}-up ends {f['rate_all']:.3f}/h measured, {f['model_rate_all']:.3f}/h model "
        f"(ratio {ratio:.3f}); independent {f['nodes'] * f['lam'] / f['rate_all']:.1f}x"
    )
    assert ratio == pytest.approx(1.0, abs=0.03)
    assert f["nodes"] * f["lam"] > 1.5 * f["rate_all"]


def down_runs(pattern: str) -> np.ndarray:
    """Hours from each loss of the last node until one is back, read off the shipped traces themselves."""
    runs = []
    for path in sorted((ROOT / "catalogs" / "spot_traces").glob(pattern)):
        trace = json.loads(path.read_text())
        up, step, run = trace["data"], trace["metadata"]["gap_seconds"] / 3600, None
        for a, b in zip(up, up[1:]):
            run = 0 if run is None and a > 0 and b == 0 else run
            if run is not None:
                if b == 0:
                    run += 1
                else:
                    runs.append(run * step)
                    run = None
    return np.array(runs)


WAITS = [("aws", "aws_*1node*"), ("gcp", "gcp_*16node*")]


@pytest.mark.parametrize("cloud, pattern", WAITS)
def test_the_fit_reproduces_the_mean_time_capacity_takes_to_return(cloud, pattern):
    """The mean wait m against the down runs in the traces themselves (AWS: 200 losses of a running p3 node, GCP:
    829 times no H100 could be had): within 3 % (1.36 h and 1.23 h measured)."""
    runs = down_runs(pattern)
    m = FIT[cloud]["spot_capacity_wait_h"]
    print(
        f"{cloud}: {runs.size} waits, mean {runs.mean():.3f} h against m {m:.3f} h (ratio {m / runs.mean():.3f})"
    )
    assert runs.size > 100
    assert m == pytest.approx(runs.mean(), rel=0.03)


def wait_tail(cloud: str, level: float) -> float:
    """P(W > level) under the shipped wait law (`wait_phases`)."""
    provider = load_catalog([cloud]).providers[cloud]
    return sum(
        share * math.exp(-level / mean)
        for share, mean in wait_phases(
            provider.spot_capacity_wait_h, provider.spot_capacity_wait_cv
        )
    )


@pytest.mark.parametrize("cloud, pattern", WAITS)
def test_the_fit_reproduces_how_spread_the_waits_are(cloud, pattern):
    """Most capacity comes back within minutes, some after a day: the traces' waits have a coefficient of
    variation of 2.3 (AWS) and 5.6 (GCP), not an exponential's 1. The shipped law (two exponential phases with
    that mean and cv) reproduces the cv within 5 % and the share of waits longer than 2m within 2 points
    (AWS 0.090 measured, 0.085 model; GCP 0.048 and 0.034; an exponential says 0.135). Still missed: the
    median (AWS 0.40 h measured, 0.57 h model) and, for GCP, the share beyond 4m (0.033 and 0.015)."""
    runs = down_runs(pattern)
    provider = load_catalog([cloud]).providers[cloud]
    m, cv = provider.spot_capacity_wait_h, provider.spot_capacity_wait_cv
    measured_cv = float(runs.std() / runs.mean())
    for k in (2, 4):
        print(
            f"{cloud}: P(W > {k}m) measured {np.mean(runs > k * m):.3f}, model {wait_tail(cloud, k * m):.3f}, "
            f"exponential {math.exp(-k):.3f}"
        )
    print(f"{cloud}: cv measured {measured_cv:.2f}, shipped {cv:.2f}")
    assert cv == pytest.approx(measured_cv, rel=0.05)
    assert wait_tail(cloud, 2 * m) == pytest.approx(
        float(np.mean(runs > 2 * m)), abs=0.02
    )
    # what the exponential law missed
    assert abs(math.exp(-2) - float(np.mean(runs > 2 * m))) > 0.04


def test_a_trace_the_fit_did_not_use():
    """AWS's c comes from the 4-node preemption runs; the 16-node availability probes (other zones, other
    weeks) say how often all 16 nodes stop being there: 0.544 events an hour at 0.388 node losses per node-hour
    while all are up. The runs' c predicts about 2.9x that (the probes' events are larger: half take all 16, where
    their own fit says c = 0.90); independent preemptions 11 times. Pessimistic for large AWS gangs, and says so."""
    probe = FIT["aws-16-node-probe"]
    predicted = spot_event_rate(probe["lam"], 16, FIT["aws"]["spot_correlation"])
    independent = 16 * probe["lam"]
    ratio, ratio_independent = (
        predicted / probe["rate_all"],
        independent / probe["rate_all"],
    )
    print(
        f"16-node events per hour: measured {probe['rate_all']:.3f}, model {predicted:.3f} (ratio {ratio:.2f}), "
        f"independent {independent:.3f} (ratio {ratio_independent:.1f}); the probes' own c "
        f"{probe['spot_correlation']:.2f} gives {probe['model_rate_all']:.3f}"
    )
    assert 1.0 <= ratio < 3.5 and ratio_independent > 10
    assert probe["model_rate_all"] / probe["rate_all"] == pytest.approx(1.0, abs=0.05)


def test_a_gang_sees_fewer_events_and_waits_after_each():
    one = spot_event_rate(0.47, 1, 0.42)
    four = spot_event_rate(0.47, 4, 0.42)
    assert one == pytest.approx(0.47) and four == pytest.approx(
        0.47 * (1 + 0.58 / 1 + 0.58 / 1.42 + 0.58 / 1.84)
    )
    assert (
        spot_event_rate(0.47, 4, 0.0) == pytest.approx(4 * 0.47)
        and spot_event_rate(0.47, 4, 1.0) == 0.47
    )
    base = dict(
        work_h=40.0,
        checkpoint_write_h=0.05,
        restart_h=0.3,
        nodes=4,
        gpus_per_node=8,
        hw_failure_per_gpu_h=2e-5,
        price_per_node_h=10.0,
        checkpoint_interval_h=2.0,
    )
    still = expected(CandidateInputs(**base, spot_rate_per_node_h=four / 4))
    waiting = expected(
        CandidateInputs(**base, spot_rate_per_node_h=four / 4, capacity_wait_h=1.35)
    )
    # the waits are not billed
    assert waiting.billed_node_h == pytest.approx(still.billed_node_h)
    assert waiting.wall_h == pytest.approx(
        still.wall_h + 1.35 * still.failures * (four / (four + 32 * 2e-5))
    )
    assert waiting.breakdown["compute"] == still.breakdown["compute"]


CASES = {
    "4 nodes, per-second billing": dict(
        work_h=40.0,
        checkpoint_write_h=0.05,
        restart_h=0.3,
        nodes=4,
        gpus_per_node=8,
        spot_rate_per_node_h=0.3,
        hw_failure_per_gpu_h=2e-4,
        price_per_node_h=10.0,
        billing_granularity_h=1 / 3600,
        billing_minimum_h=1 / 60,
        checkpoint_interval_h=2.0,
        capacity_wait_h=1.5,
        capacity_wait_cv=2.31,
        storage_usd_per_h=2.0,
        time_budget_h=580.0,
    ),
    "3 nodes, hourly billing": dict(
        work_h=20.0,
        checkpoint_write_h=0.05,
        restart_h=0.3,
        nodes=3,
        gpus_per_node=1,
        spot_rate_per_node_h=0.2,
        hw_failure_per_gpu_h=1e-2,
        price_per_node_h=3.0,
        billing_granularity_h=1.0,
        billing_minimum_h=1.0,
        checkpoint_interval_h=1.0,
        capacity_wait_h=0.7,
        time_budget_h=35.0,
        capacity_wait_cv=5.56,
    ),
    "stateless, per-minute billing": dict(
        work_h=12.0,
        restart_h=0.1,
        nodes=2,
        gpus_per_node=4,
        spot_rate_per_node_h=0.4,
        hw_failure_per_gpu_h=2e-5,
        price_per_node_h=5.0,
        billing_granularity_h=1 / 60,
        interruption_tolerance="stateless",
        checkpoint_interval_h=0.25,
        capacity_wait_h=2.0,
        time_budget_h=30.0,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_the_cost_model_agrees_with_its_monte_carlo(name):
    inputs = CandidateInputs(**CASES[name])
    want, sim = expected(inputs), simulate(inputs, 40_000, seed=11)
    print(
        f"{name}: wall {want.wall_h:.3f} vs {sim.mean('wall_h'):.3f}, cost {want.cost_usd:.3f} vs "
        f"{sim.mean():.3f}, P(deadline) {want.p_deadline:.4f} vs {sim.p_deadline:.4f}"
    )
    for field, value in (
        ("wall_h", want.wall_h),
        ("billed_node_h", want.billed_node_h),
        ("cost_usd", want.cost_usd),
    ):
        assert abs(value - sim.mean(field)) <= 4 * sim.stderr(field) + 1e-3 * value, (
            field
        )
    assert abs(want.p_deadline - sim.p_deadline) <= 4 * math.sqrt(
        max(sim.p_deadline * (1 - sim.p_deadline), 1e-4) / sim.trials
    )


# ---------------------------------------------------------------- plans that say their risk

ONE_OFFER = """\
# source: a test offer (AWS, so the trace fit's c = 0.42 and m = 1.35 h apply)
# as_of: 2025-07-01
provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes
aws,test-1,eight-a100,A100-80GB,8,96,1152,80,nvlink,600,none,0,30.0,{spot},0.3,,,
"""
NARROW = """\
name: narrow
catalogs: [one.csv]
defaults: {spot_evidence: fitted, estimate_error: 0}  # the risk line of the fitted process on a made-up offer
workloads:
  - name: tune
    kind: fine_tuning
    memory: {per_gpu: 30GiB}
    work: {gpu_hours: 80, reference_gpu: A100-80GB}
    gpus: 8
    time_budget: 30h
    checkpoint: {every: 1h, write_time: 2m}
    forbid: {markets: [spot_fallback]}
"""


def _narrow(tmp_path, spot_price: float) -> Path:
    (tmp_path / "one.csv").write_text(ONE_OFFER.format(spot=spot_price))
    (tmp_path / "narrow.yaml").write_text(NARROW)
    return tmp_path / "narrow.yaml"


def test_a_narrow_spot_win_names_its_risk_and_the_figures_hold_in_simulation(
    run, tmp_path
):
    """Spot at $21.50 against $30 on demand wins by 12 %: --explain says how many preemption events and hours of
    waiting that buys, and how often the deadline slips if capacity is slow to return; each figure is checked by
    Monte-Carlo of the same job (the waits: with and without them; slow capacity: every wait twice as long)."""
    import dataclasses
    import json

    from planner.economics.inputs import inputs_from_assignment
    from planner.schema.plan import AssignmentRecord
    from planner.solve.explain import SLOW_CAPACITY, slow_capacity_p_deadline

    path = _narrow(tmp_path, 21.5)
    explained = run("solve", path, "--explain", "--workers", "1")
    assert explained.exit_code == 0, explained.stderr
    (risk,) = [
        line.strip()
        for line in explained.stdout.splitlines()
        if line.strip().startswith("risk:")
    ]
    print(risk)
    data = json.loads(run("solve", path, "--format", "json", "--workers", "1").stdout)
    (a,) = data["assignments"]
    e = a["expected"]
    assert a["market"] == "spot" and 3 < e["preemption_events"] < e["failures"] + 1e-9
    assert risk.startswith(
        "risk: 12.1% cheaper than on-demand (1 x eight-a100, $316.76) for "
        f"{e['preemption_events']:.1f} expected preemption events and {e['waiting_h']:.1f} h waiting"
    )
    a = AssignmentRecord.model_validate(a)
    inputs = inputs_from_assignment(a)
    fitted = simulate(inputs, 20_000, seed=3)
    still = simulate(dataclasses.replace(inputs, capacity_wait_h=0.0), 20_000, seed=4)
    waited = fitted.mean("wall_h") - still.mean("wall_h")
    spread = 4 * math.hypot(fitted.stderr("wall_h"), still.stderr("wall_h"))
    print(
        f"waiting: {e['waiting_h']:.3f} h planned, {waited:.3f} h simulated (+-{spread:.3f})"
    )
    assert abs(waited - e["waiting_h"]) <= spread
    events = fitted.mean("failures") * inputs.spot_share
    assert abs(events - e["preemption_events"]) <= 4 * fitted.stderr("failures")
    slow = slow_capacity_p_deadline(a)
    replay = simulate(
        dataclasses.replace(
            inputs, capacity_wait_h=inputs.capacity_wait_h * SLOW_CAPACITY
        ),
        20_000,
        seed=5,
    ).p_deadline
    print(f"P(deadline) with slow capacity: {slow:.4f} planned, {replay:.4f} simulated")
    assert abs(slow - replay) <= 4 * math.sqrt(replay * (1 - replay) / 20_000)
    assert (
        f"{1 - slow:.1%} if capacity is slow to return" in risk
        and slow < e["p_deadline"] - 0.1
    )


def test_a_wide_spot_win_needs_no_risk_line(run, tmp_path):
    explained = run("solve", _narrow(tmp_path, 15.0), "--explain", "--workers", "1")
    assert explained.exit_code == 0 and "spot eight-a100:" in explained.stdout
    assert "risk:" not in explained.stdout


# ------------------------------------------------------------------ stateless jobs on several nodes (§4)


def shared_queue(
    rng: random.Random,
    nodes: int,
    items: int,
    item_h: float,
    restart_h: float,
    lam: float,
    correlation: float,
    wait_h: float,
    hw_per_node: float,
) -> tuple[float, float]:
    """One run of a stateless job as it really goes, independently of the cost model's code: `nodes` nodes
    take items of `item_h` hours from one queue. Preemption events come at λ·g(n) and take k of the nodes
    (`event_sizes`), who all wait one Exp(m) for capacity; a hardware failure takes one node, replaced at
    once. A node lost while working puts its item back; a returning node restarts (R, billed) if items are
    left. Restarts do not fail. Returns (wall hours, billed node-hours at per-second billing)."""
    events = spot_event_rate(lam, nodes, correlation)
    total = events + nodes * hw_per_node
    sizes = list(event_sizes(nodes, correlation))
    working, start = (
        [True] * nodes,
        [restart_h] * nodes,
    )  # the current item starts after the restart
    back, since = [math.inf] * nodes, [0.0] * nodes
    queue, done, billed, wall = items - nodes, 0, 0.0, 0.0
    next_event = rng.expovariate(total)
    while done < items:
        ends = (
            min((start[i] + item_h, i) for i in range(nodes) if working[i])
            if any(working)
            else (math.inf, -1)
        )
        returns = min((back[i], i) for i in range(nodes))
        t = min(ends[0], returns[0], next_event)
        if t == ends[0]:
            i = ends[1]
            done, wall = done + 1, t
            if queue:
                queue, start[i] = queue - 1, t
            else:
                working[i], billed = False, billed + t - since[i]
        elif t == returns[0]:
            i = returns[1]
            back[i] = math.inf
            if queue:
                queue, working[i], start[i], since[i] = (
                    queue - 1,
                    True,
                    t + restart_h,
                    t,
                )
        else:
            next_event = t + rng.expovariate(total)
            if rng.random() < events / total:
                hit, wait = (
                    rng.sample(
                        range(nodes), rng.choices(range(1, nodes + 1), weights=sizes)[0]
                    ),
                    rng.expovariate(1 / wait_h),
                )
            else:
                hit, wait = [rng.randrange(nodes)], 0.0
            for i in hit:
                if working[i] and start[i] <= t:
                    working[i], billed, queue, back[i] = (
                        False,
                        billed + t - since[i],
                        queue + 1,
                        t + wait,
                    )
    return wall, billed


def test_a_stateless_job_loses_only_the_nodes_an_event_takes():
    """4 spot nodes at AWS's fitted rates (λ 0.47, c 0.42, m 1.35 h) work through 192 items of 15 minutes from
    one queue. Priced as four one-node streams (cost model §4), the expected cost is within 2 % of 4,000 runs of
    the queue above (0.2 %) and the wall time within 3 % (0.6 %); as a gang that restarts at every event (the
    model before) it was 15 % dearer and 66 % slower. The streams' wall-time law is one node's, wider than
    the queue's (the queue averages its nodes' delays), so P(deadline) errs low: 0.90 at the law's 90 % point
    where the queue holds 0.97."""
    nodes, per_node, item_h, restart_h, lam, c, wait_h, phi = (
        4,
        8,
        0.25,
        0.1,
        0.47,
        0.42,
        1.35,
        2e-5,
    )
    base = dict(
        work_h=12.0,
        restart_h=restart_h,
        nodes=nodes,
        gpus_per_node=per_node,
        hw_failure_per_gpu_h=phi,
        price_per_node_h=10.0,
        billing_granularity_h=1 / 3600,
        checkpoint_interval_h=item_h,
        capacity_wait_h=wait_h,
    )
    streams = CandidateInputs(
        **base, spot_rate_per_node_h=lam, interruption_tolerance="stateless"
    )
    deadline = WallLaw(segment_plan(streams)).quantile(0.9)
    streams = replace(streams, time_budget_h=deadline)
    gang = replace(
        streams,
        spot_rate_per_node_h=spot_event_rate(lam, nodes, c) / nodes,
        interruption_tolerance="checkpointed",
    )
    model, before = expected(streams), expected(gang)
    rng = random.Random(5)
    runs = np.array(
        [
            shared_queue(
                rng, nodes, 192, item_h, restart_h, lam, c, wait_h, per_node * phi
            )
            for _ in range(4000)
        ]
    )
    wall, cost = runs[:, 0], 10.0 * runs[:, 1]
    held = float(np.mean(wall <= deadline))
    print(
        f"cost: streams ${model.cost_usd:.2f}, queue ${cost.mean():.2f} (ratio {model.cost_usd / cost.mean():.4f}), "
        f"gang ${before.cost_usd:.2f} (ratio {before.cost_usd / cost.mean():.3f}); wall: streams {model.wall_h:.2f} h, "
        f"queue {wall.mean():.2f} h (ratio {model.wall_h / wall.mean():.3f}), gang {before.wall_h:.2f} h; "
        f"P(T <= {deadline:.1f} h): streams {model.p_deadline:.3f}, queue {held:.3f}, gang {before.p_deadline:.3f}"
    )
    assert model.cost_usd == pytest.approx(cost.mean(), rel=0.02)
    assert model.wall_h == pytest.approx(wall.mean(), rel=0.03)
    assert before.cost_usd > 1.1 * cost.mean() and before.wall_h > 1.4 * wall.mean()
    assert held >= model.p_deadline - 0.02  # errs low, never high


def test_a_stateless_job_counts_every_node_loss_and_bills_each_node_alone():
    """The streams' figures restated: n times one node's cost and failures, one node's wall time, and
    `planner simulate`'s process (one stream counted n times) agrees."""
    one = CandidateInputs(
        work_h=6.0,
        restart_h=0.2,
        nodes=1,
        gpus_per_node=8,
        spot_rate_per_node_h=0.5,
        price_per_node_h=4.0,
        billing_granularity_h=1 / 60,
        checkpoint_interval_h=0.5,
        capacity_wait_h=1.0,
        interruption_tolerance="stateless",
        time_budget_h=9.0,
    )
    three = replace(one, nodes=3)
    a, b = expected(one), expected(three)
    assert b.cost_usd == pytest.approx(3 * a.cost_usd) and b.failures == pytest.approx(
        3 * a.failures
    )
    assert b.wall_h == pytest.approx(a.wall_h) and b.p_deadline == pytest.approx(
        a.p_deadline
    )
    sim = simulate(three, 20_000, seed=2)
    assert b.cost_usd == pytest.approx(
        sim.mean(), abs=4 * sim.stderr() + 1e-3 * b.cost_usd
    )
    assert b.failures == pytest.approx(
        sim.mean("failures"), abs=4 * sim.stderr("failures") + 1e-3
    )


SPOT_JOB = (
    MINIMAL + "    time_budget: 3d\n    allow: {markets: [spot], providers: [aws]}\n"
)


def test_a_scenario_sets_the_waits_spread_and_the_checker_restates_it(run, tmp_path):
    from planner.load.scenario import load_scenario
    from planner.solve.checker import check_plan

    fitted, exponential = tmp_path / "fitted.yaml", tmp_path / "exponential.yaml"
    fitted.write_text(SPOT_JOB)
    exponential.write_text(
        SPOT_JOB + "overrides:\n  - {provider: aws, spot_capacity_wait_cv: 1}\n"
    )
    plans = {}
    for path in (fitted, exponential):
        result = run("solve", path, "--format", "json")
        assert result.exit_code == 0, result.output
        plans[path] = json.loads(result.stdout)
        assert check_plan(load_scenario(path), plans[path]) == []
    a, b = plans[fitted]["assignments"][0], plans[exponential]["assignments"][0]
    assert (
        a["inputs"]["capacity_wait_cv"] == 2.31
        and b["inputs"]["capacity_wait_cv"] == 1.0
    )
    assert a["expected"]["waiting_h"] == pytest.approx(
        a["expected"]["preemption_events"] * 1.35
    )
    # the plan no longer says what the scenario set
    b["inputs"]["capacity_wait_cv"] = 2.31
    assert any(
        "capacity_wait_cv" in p
        for p in check_plan(load_scenario(exponential), plans[exponential])
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        SPOT_JOB + "overrides:\n  - {provider: aws, spot_capacity_wait_cv: 0.5}\n"
    )
    result = run("solve", bad)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert (
        result.exit_code == 2
        and len(lines) == 1
        and "spot_capacity_wait_cv" in lines[0]
    ), result.output


def test_events_per_loss_is_the_digamma_closed_form_and_sizes_the_beta_binomial():
    """g(n) is summed term by term (exactly rounded), so the solve path needs no SciPy; it is the closed form
    b·(ψ(b + n) − ψ(b)) (b = (1 − c)/c), and `event_sizes` is the beta-binomial with log-gamma weights."""
    from scipy.special import digamma, gammaln

    nodes = np.array([1, 2, 3, 4, 8, 16, 64, 512], dtype=float)
    for c in (1e-6, 1e-3, 0.05, 0.42, 0.9, 0.999999):
        b = (1 - c) / c
        assert events_per_loss(nodes, np.full(len(nodes), c)) == pytest.approx(
            b * (digamma(b + nodes) - digamma(b)), rel=1e-9 if c < 1e-4 else 1e-13
        )
        for n in (2, 16, 300):
            k = np.arange(1, n + 1)
            log_w = (
                gammaln(n + 1)
                - gammaln(k + 1)
                - gammaln(n - k + 1)
                + gammaln(k)
                + gammaln(b + n - k)
            )
            w = np.exp(log_w - log_w.max())
            # both take differences of log-gammas near b·log(b) (1.4e7 at c = 1e-6), which cancel to ~1e-9
            assert event_sizes(n, c) == pytest.approx(
                w / w.sum(), rel=1e-7 if c < 1e-4 else 1e-10, abs=1e-300
            )
            assert (event_sizes(n, c) * k).sum() == pytest.approx(
                n / events_per_loss(n, c), rel=1e-9
            )
