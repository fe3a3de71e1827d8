"""Spot with an on-demand fallback (cost-model §10): the fast numeric price against a trial-by-trial
replay of the same policy (`simulate_fallback`). The issue's bar: within 2 % on cost and 2 points on
P(deadline)."""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import replace

import pytest
from conftest import SCENARIOS

from planner.economics import costmodel, fallback, segment_plans, wall_time
from planner.economics.candidate import CandidateInputs
from planner.economics.inputs import inputs_from_process
from planner.economics.simulate import simulate, simulate_fallback
from planner.schema.plan import Process

# p5.48xlarge on demand (us-east-1); the spot price below is a third of it
ON_DEMAND = 98.32

CASES = {
    # a 4-node pretrain at the fitted AWS rates (0.05 preemptions per node-hour, 1.35 h capacity waits)
    "4 nodes, loose deadline": dict(
        work_h=100,
        checkpoint_write_h=0.05,
        restart_h=0.25,
        nodes=4,
        gpus_per_node=8,
        spot_rate_per_node_h=0.05,
        capacity_wait_h=1.35,
        time_budget_h=140,
        checkpoint_interval_h=2,
    ),
    "4 nodes, tight deadline": dict(
        work_h=100,
        checkpoint_write_h=0.05,
        restart_h=0.25,
        nodes=4,
        gpus_per_node=8,
        spot_rate_per_node_h=0.05,
        capacity_wait_h=1.35,
        time_budget_h=115,
        checkpoint_interval_h=2,
    ),
    "busy spot market": dict(
        work_h=30,
        checkpoint_write_h=0.1,
        restart_h=0.5,
        nodes=2,
        gpus_per_node=8,
        spot_rate_per_node_h=0.2,
        capacity_wait_h=2.0,
        time_budget_h=45,
        checkpoint_interval_h=1,
    ),
    "stateless items": dict(
        work_h=10,
        restart_h=0.1,
        nodes=1,
        gpus_per_node=4,
        spot_rate_per_node_h=0.1,
        capacity_wait_h=0.5,
        time_budget_h=14,
        interruption_tolerance="stateless",
        checkpoint_interval_h=0.05,
    ),
    "stateless items on 3 nodes": dict(
        work_h=10,
        restart_h=0.1,
        nodes=3,
        gpus_per_node=4,
        spot_rate_per_node_h=0.3,
        capacity_wait_h=1.35,
        time_budget_h=14,
        interruption_tolerance="stateless",
        checkpoint_interval_h=0.05,
    ),
    "heavy-tailed waits": dict(
        work_h=30,
        checkpoint_write_h=0.1,
        restart_h=0.5,
        nodes=2,
        gpus_per_node=8,
        spot_rate_per_node_h=0.2,
        capacity_wait_h=1.24,
        capacity_wait_cv=5.56,
        time_budget_h=45,
        checkpoint_interval_h=1,
    ),
    # the batch job of the shipped examples whose failure count was 31 % low: stateless items on 2 nodes, AWS's waits
    "stateless items, heavy-tailed waits": dict(
        work_h=9.41,
        restart_h=1 / 6,
        nodes=2,
        gpus_per_node=1,
        spot_rate_per_node_h=0.48,
        capacity_wait_h=1.24,
        capacity_wait_cv=5.56,
        time_budget_h=24,
        interruption_tolerance="stateless",
        checkpoint_interval_h=0.0024,
    ),
    "16 nodes": dict(
        work_h=200,
        checkpoint_write_h=0.1,
        restart_h=0.75,
        nodes=16,
        gpus_per_node=8,
        spot_rate_per_node_h=0.02,
        capacity_wait_h=1.35,
        time_budget_h=260,
        checkpoint_interval_h=1.5,
    ),
    "hourly billing": dict(
        work_h=50,
        checkpoint_write_h=0.1,
        restart_h=0.5,
        nodes=2,
        gpus_per_node=8,
        spot_rate_per_node_h=0.05,
        capacity_wait_h=1.0,
        time_budget_h=70,
        checkpoint_interval_h=2,
        billing_granularity_h=1.0,
        billing_minimum_h=1.0,
    ),
}


def _inputs(case: dict) -> CandidateInputs:
    return CandidateInputs(
        price_per_node_h=ON_DEMAND / 3, storage_usd_per_h=0.5, egress_usd=10.0, **case
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_price_agrees_with_the_replayed_policy(name):
    inputs = _inputs(CASES[name])
    priced = fallback.expected(inputs, ON_DEMAND)
    replayed = simulate_fallback(inputs, ON_DEMAND, trials=8000, seed=3)
    ratio = priced.cost_usd / replayed.mean()
    failures = priced.failures / replayed.mean("failures")
    billed = priced.billed_node_h / replayed.mean("billed_node_h")
    print(
        f"{name}: analytic ${priced.cost_usd:,.2f} vs replay ${replayed.mean():,.2f} (ratio {ratio:.4f}); "
        f"P(deadline) {priced.p_deadline:.3f} vs {replayed.p_deadline:.3f}; failures ratio {failures:.4f}, "
        f"node-hours ratio {billed:.4f}"
    )
    assert abs(ratio - 1) < 0.02
    # failures (preemption events and capacity waits in the report) and node-hours: while the failure the switch
    # cuts was taken for one mean lump, failures before the switch were 8-31 % off and, with heavy-tailed waits,
    # node-hours 1.3 % high (a switch mostly cuts a long wait, which had long still to run)
    assert abs(failures - 1) < 0.02
    assert abs(billed - 1) < 0.006
    assert abs(priced.p_deadline - replayed.p_deadline) < 0.02
    assert abs(priced.wall_h / replayed.mean("wall_h") - 1) < 0.02
    assert math.isclose(sum(priced.breakdown.values()), priced.cost_usd, rel_tol=1e-12)


def test_what_it_costs_beyond_spot_alone_holds_in_the_replay():
    """`excess_over_spot` proves how much more than spot alone the policy costs at least, so that screening can
    leave a spot_fallback row unpriced beside its spot twin. Both replays (`simulate`, `simulate_fallback`) must
    show at least that much, and so must the numeric price; the bound must say something on most cases."""
    proven = {}
    for name, case in sorted(CASES.items()):
        inputs = _inputs(case)
        alone = costmodel.expected(replace(inputs, time_budget_h=math.inf))
        law = wall_time.WallLaw(segment_plans.segment_plan(inputs))
        excess = fallback.excess_over_spot(
            law,
            inputs.time_budget_h,
            alone,
            inputs.price_per_node_h,
            ON_DEMAND,
            inputs.storage_usd_per_h,
        )
        spot, policy = (
            simulate(inputs, trials=4000, seed=5),
            simulate_fallback(inputs, ON_DEMAND, trials=4000, seed=5),
        )
        replayed = policy.mean() - spot.mean()
        noise = 3 * math.hypot(policy.stderr(), spot.stderr())
        priced = fallback.expected(inputs, ON_DEMAND).cost_usd - alone.cost_usd
        print(
            f"{name}: proven ${excess:,.2f}, priced ${priced:,.2f}, replayed ${replayed:,.2f} ± {noise:,.2f}"
        )
        assert replayed >= excess - noise, name
        assert priced >= excess, name
        proven[name] = excess
    assert sum(excess > 0 for excess in proven.values()) >= 4, proven


@pytest.mark.parametrize(
    "name, within",
    [("hourly billing", 0.01), ("an hourly-billed gang that mostly switches", 0.025)],
)
def test_the_on_demand_phase_agrees_with_the_replay(name, within):
    """The phase after the switch was priced at the mean work left, which rounded its checkpoint count and its
    billing there: 1.2 % and 3.5 % of its node-hours low on these two. It is now the segments left after the two
    checkpoints around the mean switch checkpoint, weighted to it (exact for all but the rounding waste, which is
    read at those two: 0.3 % and 1.6 % high here, the second on a bill by the hour)."""
    case = CASES.get(name) or dict(
        work_h=5.0,
        checkpoint_write_h=0.05,
        restart_h=0.2,
        nodes=4,
        gpus_per_node=8,
        spot_rate_per_node_h=0.4,
        checkpoint_interval_h=0.5,
        billing_granularity_h=1.0,
        capacity_wait_h=0.5,
        time_budget_h=12.0,
    )
    inputs = replace(
        _inputs(case), price_per_node_h=1.0, storage_usd_per_h=0.0, egress_usd=0.0
    )
    # on-demand free: the cost is spot's hours
    replayed = simulate_fallback(inputs, 0.0, trials=40_000, seed=11)
    on_demand = replayed.mean("billed_node_h") - replayed.mean()
    priced = fallback.unit(inputs)
    ratio = math.fsum(priced.on_demand.values()) / on_demand
    print(
        f"{name}: on-demand node-hours {math.fsum(priced.on_demand.values()):.3f} vs replay {on_demand:.3f} "
        f"(ratio {ratio:.4f}), switching in {priced.p_switch:.0%} of runs"
    )
    assert priced.p_switch > 0.5 and abs(ratio - 1) < within


def test_the_price_does_not_follow_round_off():
    """The overshoot past the switch level is read where the grid holds the law (its mass and mean exact, from the
    lump's law), not summed over the grid's far end, whose round-off the damping's untilt amplifies up to e^18. A
    processor's rounding is noise of about 1e-14: on this batch job (the worst of the shipped examples' fallbacks:
    stateless items on 2 nodes, heavy-tailed waits) such noise moved the lost work's cost by 4e-3."""
    inputs = CandidateInputs(
        work_h=9.412915046834819,
        restart_h=1 / 6,
        nodes=2,
        gpus_per_node=1,
        spot_rate_per_node_h=0.48,
        price_per_node_h=1.0,
        billing_granularity_h=1 / 3600,
        billing_minimum_h=1 / 60,
        interruption_tolerance="stateless",
        checkpoint_interval_h=0.0024092436772036904,
        time_budget_h=24.0,
        capacity_wait_h=1.24,
        capacity_wait_cv=5.56,
    )
    base = fallback.unit(inputs)
    # the overshoot matters here
    assert 0.01 < base.p_switch < 0.1 and base.spot["preemption_rework"] > 1
    for eps in (1e-14, 3e-14, -2e-14):
        moved = fallback.unit(
            replace(
                inputs,
                time_budget_h=inputs.time_budget_h * (1 + eps),
                work_h=inputs.work_h * (1 - eps),
            )
        )
        for part in fallback.PRICED:
            assert math.isclose(moved.spot[part], base.spot[part], rel_tol=1e-9), (
                part,
                eps,
            )
        assert math.isclose(moved.failures, base.failures, rel_tol=1e-9)


def test_it_meets_deadlines_spot_alone_misses_for_less_than_on_demand():
    inputs = _inputs(CASES["4 nodes, loose deadline"])
    alone = costmodel.expected(inputs)
    on_demand = costmodel.expected(
        replace(
            inputs,
            spot_rate_per_node_h=0.0,
            capacity_wait_h=0.0,
            price_per_node_h=ON_DEMAND,
        )
    )
    policy = fallback.expected(inputs, ON_DEMAND)
    assert (
        alone.p_deadline < 0.1
        and policy.p_deadline > 0.99
        and on_demand.p_deadline > 0.99
    )
    assert alone.cost_usd < policy.cost_usd < on_demand.cost_usd


def test_without_preemptions_it_is_spot():
    inputs = replace(
        _inputs(CASES["4 nodes, loose deadline"]),
        spot_rate_per_node_h=0.0,
        hw_failure_per_gpu_h=0.0,
    )
    policy = fallback.unit(inputs)
    assert policy.p_switch == 0 and policy.p_deadline == 1
    assert math.isclose(
        fallback.expected(inputs, ON_DEMAND).cost_usd,
        costmodel.expected(inputs).cost_usd,
        rel_tol=1e-9,
    )


def test_a_generous_deadline_rarely_switches():
    inputs = replace(_inputs(CASES["4 nodes, loose deadline"]), time_budget_h=400)
    policy = fallback.expected(inputs, ON_DEMAND)
    assert fallback.unit(inputs).p_switch < 1e-3
    assert math.isclose(
        policy.cost_usd, costmodel.expected(inputs).cost_usd, rel_tol=0.01
    )


def test_no_room_for_spot_is_no_candidate():
    inputs = _inputs(CASES["4 nodes, tight deadline"])
    assert fallback.unit(replace(inputs, time_budget_h=inputs.work_h + 2)) is None
    assert fallback.unit(replace(inputs, time_budget_h=math.inf)) is None


def test_the_replay_switches_exactly_at_the_switch_point():
    """With no failures on demand, a switched trial ends at L_J + R + (work left): D − margin."""
    inputs = replace(_inputs(CASES["busy spot market"]), hw_failure_per_gpu_h=0.0)
    replayed = simulate_fallback(inputs, ON_DEMAND, trials=2000, seed=5)
    p = segment_plans.segment_plan(inputs)
    late = replayed.wall_h[
        replayed.wall_h > inputs.time_budget_h - fallback.margin_h(p.R, p.tau) - 1e-6
    ]
    assert late.size > 100  # the busy market switches often
    assert late.max() == pytest.approx(
        inputs.time_budget_h - fallback.margin_h(p.R, p.tau), abs=1e-6
    )
    alone = simulate(inputs, trials=2000, seed=5)
    assert replayed.p_deadline == 1.0 > alone.p_deadline


# ---------------------------------------------------------------- in plans


def _plan(run, path, *options):
    result = run("solve", path, "--format", "json", "--no-timings", *options)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_solve_chooses_the_fallback_where_spot_alone_misses_and_the_checker_restates_it(
    run,
):
    from planner.load.scenario import load_scenario
    from planner.solve.checker import check_plan

    path = SCENARIOS / "pretrain-deadline.yaml"
    plan = _plan(run, path)
    chosen = plan["assignments"][0]
    assert (
        chosen["market"] == "spot_fallback" and 0 < chosen["inputs"]["p_fallback"] < 1
    )
    assert chosen["expected"]["p_deadline"] >= 0.95
    loaded = load_scenario(path)
    assert check_plan(loaded, plan) == []
    chosen["inputs"]["fallback_price_per_node_h"] *= (
        0.5  # not the offer's on-demand price
    )
    assert any("fallback_price_per_node_h" in p for p in check_plan(loaded, plan))


def test_markets_can_be_ruled_in_and_out(run, tmp_path):
    from planner.load.scenario import load_scenario
    from planner.solve.checker import check_plan

    text = (SCENARIOS / "pretrain-deadline.yaml").read_text()
    forbid = tmp_path / "no-fallback.yaml"
    forbid.write_text(
        text.replace(
            "      gpus: [H100, H200, B200, A100-80GB]",
            "      gpus: [H100, H200, B200, A100-80GB]\n    forbid: {markets: [spot_fallback]}",
        )
    )
    plan = _plan(run, forbid)
    # spot alone misses 0.99 on every offer within 128 GPUs
    assert plan["assignments"][0]["market"] == "on_demand"
    assert (
        plan["objective_usd"]
        > _plan(run, SCENARIOS / "pretrain-deadline.yaml")["objective_usd"]
    )
    only = tmp_path / "on-demand.yaml"
    only.write_text(
        text.replace(
            "      gpus: [H100, H200, B200, A100-80GB]",
            "      gpus: [H100, H200, B200, A100-80GB]\n      markets: [on_demand]",
        )
    )
    plan = _plan(run, only)
    assert {a["market"] for a in plan["assignments"]} == {"on_demand"}
    chosen = _plan(run, SCENARIOS / "pretrain-deadline.yaml")
    assert any(
        "ruled out by allow.markets" in p
        for p in check_plan(load_scenario(only), chosen)
    )


QUARTER = """\
name: deadline-quarter
catalogs: [aws]
defaults: {spot_evidence: fitted, estimate_error: 0}  # the booking rule of the fitted policy, on the estimate
horizon: {start: 2027-01-04, end: 2027-01-20, step: 6h}
runs:
  - name: sft
    kind: fine_tuning
    memory: {per_gpu: 60GiB}
    work: {gpu_hours: 400, reference_gpu: H100-SXM}
    gpus: 8
    checkpoint: {every: auto, write_time: 2m, size: 30GiB}
    restart_overhead: 15m
    allow: {gpus: [H100]}
    release: 2027-01-05
    due: 2027-01-07T12:00
"""


def test_batch_books_a_fallback_run_at_its_quantile_and_the_replay_uses_the_policy(
    run, tmp_path
):
    path = tmp_path / "quarter.yaml"
    path.write_text(QUARTER)
    out = tmp_path / "schedule.json"
    result = run(
        "batch",
        path,
        "--format",
        "json",
        "--no-timings",
        "-o",
        out,
        "--time-limit",
        "10",
    )
    assert result.exit_code == 0, result.output
    runs = json.loads(out.read_text())["runs"]
    fallback_runs = [r for r in runs if r["market"] == "spot_fallback"]
    assert fallback_runs, [(r["run"], r["market"]) for r in runs]
    r = fallback_runs[0]
    start, end = (dt.datetime.fromisoformat(r[k]) for k in ("start", "end"))
    slot_h, budget = (end - start).total_seconds() / 3600, r["inputs"]["time_budget_h"]
    # spot alone's 0.9-quantile while below the switch level (the laws agree there), else the budget
    inputs = replace(
        inputs_from_process(
            Process.model_validate(r["inputs"]),
            nodes=r["nodes"],
            gpus_per_node=r["gpus_per_node"],
            checkpoint_interval_h=r["checkpoint_interval_h"],
        ),
        time_budget_h=budget,
    )
    spot_q = costmodel.completion_quantile(inputs, 0.9)
    booked = fallback.completion_quantile(inputs, 0.9, spot_q)
    assert booked in (spot_q, budget) and slot_h == pytest.approx(
        math.ceil(booked / 6 - 1e-9) * 6
    )
    replay = run(
        "simulate", path, "--plan", out, "--trials", "2000", "--format", "json"
    )
    assert replay.exit_code == 0, replay.output
    data = json.loads(
        replay.stdout[replay.stdout.index("{") : replay.stdout.rindex("}") + 1]
    )
    assert data["holds"] >= 0.9


def test_a_hopeless_spot_market_is_no_fallback_not_a_traceback(run, tmp_path):
    """A spot market whose preemptions outrun a long checkpoint interval (e^600 failures a segment and more) made
    Chernoff's bound take log(0) and the overhead's mean overflow: `planner solve` died with a math domain error.
    Such a fallback is none (on-demand alone does better), as the cost model's spot alone costs inf."""
    hopeless = CandidateInputs(
        work_h=200,
        checkpoint_interval_h=80,
        nodes=64,
        gpus_per_node=8,
        price_per_node_h=1.0,
        spot_rate_per_node_h=0.85,
        capacity_wait_h=0.01,
        time_budget_h=480,
    )
    assert (
        fallback.unit(hopeless) is None
        and fallback.unit(hopeless, min_switch=1e-3) is None
    )
    # ~37 failures a segment
    plan = segment_plans.segment_plan(replace(hopeless, spot_rate_per_node_h=0.01))
    assert wall_time.overhead_tail_bound(replace(plan, lam=40.0), 10.0) == 1.0
    text = (
        (SCENARIOS / "pretrain-deadline.yaml")
        .read_text()
        .replace("every: auto", "every: 20h")
    )
    path = tmp_path / "hopeless.yaml"
    path.write_text(
        text.replace("time_budget: 84h", "time_budget: 400h")
        + "overrides:\n  - {preemption_rate_multiplier: 50}\n"
    )
    result = run("solve", path, "--format", "json")
    assert result.exit_code == 0, result.output
    [assignment] = json.loads(result.stdout)["assignments"]
    assert assignment["market"] == "on_demand"


def _fallback_job(scenario_file, budget: str, forbid: str) -> dict:
    from planner.load.scenario import load_scenario
    from planner.solve.pipeline import make_plan

    plan = make_plan(
        load_scenario(
            scenario_file(f"""\
        name: fallback-only
        catalogs: [aws]
        defaults: {{spot_evidence: fitted}}  # the pricing rule of the fitted process
        workloads:
          - name: job
            kind: training
            memory: {{per_gpu: 30GiB}}
            work: {{gpu_hours: 16, reference_gpu: A100-80GB}}
            gpus: {{min: 1, max: 1}}
            time_budget: {budget}
            forbid: {{markets: [{forbid}]}}
        """)
        )
    )
    assert plan.status in ("OPTIMAL", "FEASIBLE"), plan.infeasible
    row = plan.chosen.iloc[0]
    return {"market": row.market, "cost": float(row.cost_usd), "key": row.instance_type}


@pytest.mark.parametrize("forbid", ["spot", "spot, on_demand"])
def test_a_looser_deadline_never_loses_the_fallback_where_spot_alone_is_forbidden(
    scenario_file, forbid
):
    # A fallback that practically never switches is priced as spot alone when spot alone may not be bought:
    # before, it vanished (on-demand at 2.7x the cost, or a ValueError when on-demand was forbidden too)
    costs = [
        _fallback_job(scenario_file, budget, forbid)
        for budget in ("40h", "60h", "100h", "200h", "400h")
    ]
    assert all(c["market"] == "spot_fallback" for c in costs), costs
    assert all(
        later["cost"] <= earlier["cost"] + 0.01
        for earlier, later in zip(costs, costs[1:])
    ), costs
    spot_alone = _fallback_job(scenario_file, "400h", "on_demand")
    assert spot_alone["market"] == "spot" and costs[-1]["cost"] == pytest.approx(
        spot_alone["cost"], abs=0.02
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_waiting_for_capacity_is_what_the_replay_waits_with_the_switch_cutting_waits_short(
    name,
):
    # expected.waiting_h of a fallback was events x mean wait, as if every wait ran to its end: 1.8x the
    # replayed waiting under heavy-tailed waits, where a switch mostly cuts a long wait
    inputs = _inputs(CASES[name])
    tau = CASES[name].get("checkpoint_interval_h")
    priced = fallback.unit(inputs, tau)
    replayed = simulate_fallback(inputs, ON_DEMAND, trials=20000, seed=1, tau=tau).mean(
        "waiting_h"
    )
    assert priced.waiting_h == pytest.approx(replayed, rel=0.05, abs=0.05), (
        priced.waiting_h,
        replayed,
    )
    assert (
        priced.waiting_h
        <= priced.spot_failures * inputs.spot_share * inputs.capacity_wait_h + 1e-9
    )


@pytest.mark.parametrize("work, lam", [(1.0, 0.5), (1.0, 0.2), (0.8, 0.5), (3.0, 0.3)])
def test_the_on_demand_phase_is_billed_over_the_law_of_the_switch_checkpoint(work, lam):
    """#41's second defect, its on-demand half: under a 1-hour minimum and 15-minute steps the on-demand phase's
    bill is not linear in the checkpoint J it starts from (an early switch leaves a phase past the minimum, a
    late one a phase the minimum rounds up), so the mean over J's law, not the two checkpoints around E[J], is
    what the replay pays: 6-7 % low before, within 2 % now."""
    inputs = CandidateInputs(
        price_per_node_h=1.2,
        work_h=work,
        checkpoint_write_h=0.02,
        restart_h=1 / 6,
        spot_rate_per_node_h=lam,
        capacity_wait_h=0.5,
        time_budget_h=2.5 if work < 2 else 5.0,
        billing_granularity_h=0.25,
        billing_minimum_h=1.0,
        checkpoint_interval_h=0.25,
    )
    planned = math.fsum(fallback.unit(inputs).on_demand.values())
    replayed = simulate_fallback(inputs, 4.0, trials=40_000, seed=1).on_demand_node_h
    spread = 4 * replayed.std() / math.sqrt(replayed.size)
    print(
        f"W {work} h, λ {lam}: on-demand node-hours {planned:.4f} planned, {replayed.mean():.4f} replayed"
    )
    assert abs(planned - replayed.mean()) <= max(spread, 0.02 * replayed.mean())


@pytest.mark.parametrize(
    "work, lam, wait",
    [(1.0, 1.0, 0.3), (1.0, 0.5, 0.3), (0.5, 1.0, 1.35), (1.0, 1.0, 1.35)],
)
def test_the_spot_phase_is_billed_session_by_session_under_a_minimum(work, lam, wait):
    """#41's second defect, its spot half: one A100 on spot, 15-minute steps and a 1-hour minimum, 2.5 h to go.
    Spot alone's waste per session, scaled to the fallback's session count, priced the long-wait cases 5 % high
    (a switch during a capacity wait ends no session); session by session (`fallback._spot_waste`: one during a
    restart ends a young one, billed the minimum) they are within 1 %. Where waits are short it is still 2.5-3 %
    low, as it was: the sessions the switch cuts while working are younger than spot alone's last ones, which
    the price still reads them as."""
    inputs = CandidateInputs(
        price_per_node_h=1.6,
        work_h=work,
        checkpoint_write_h=0.02,
        restart_h=1 / 6,
        spot_rate_per_node_h=lam,
        capacity_wait_h=wait,
        time_budget_h=2.5,
        billing_granularity_h=0.25,
        billing_minimum_h=1.0,
        checkpoint_interval_h=0.25,
    )
    planned = fallback.expected(inputs, 4.0).cost_usd
    replayed = simulate_fallback(inputs, 4.0, trials=20_000, seed=1)
    print(
        f"W {work} h, λ {lam}, m {wait} h: ${planned:.3f} planned, ${replayed.mean():.3f} replayed "
        f"({planned / replayed.mean():.4f})"
    )
    assert abs(planned / replayed.mean() - 1) <= 0.035


@pytest.mark.parametrize(
    "name",
    sorted(n for n, c in CASES.items() if c.get("interruption_tolerance") is None),
)
def test_what_a_replay_needs_before_pricing_bounds_the_priced_policy(name):
    """A held fallback is turned down unpriced where its replays show more on-demand node-hours than it could be
    fitted (`on_demand_at_most`) and skipped where it is spot alone in effect (`switches`): the bound is never below
    what `unit` prices, by Chernoff's bound or by spot alone's law, from tight deadlines to loose ones."""
    base = _inputs(CASES[name])
    for scale in (0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0):
        inputs = replace(base, time_budget_h=base.time_budget_h * scale)
        law = wall_time.WallLaw(segment_plans.segment_plan(inputs))
        for min_switch in (0.0, 1e-3):
            assert fallback.switches(inputs, law, min_switch) == (
                fallback.unit(inputs, None, min_switch, law) is not None
            )
        priced = fallback.unit(inputs, law=wall_time.WallLaw(law.plan))
        if priced is None:
            continue
        fitted = sum(priced.on_demand.values())
        by_bound = fallback.on_demand_at_most(inputs, wall_time.WallLaw(law.plan))
        by_law = fallback.on_demand_at_most(inputs, law.compute())
        assert fitted <= min(by_law, by_bound), (scale, fitted, by_law, by_bound)
