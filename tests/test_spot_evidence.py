"""Spot promises held to measured availability (economics/spot_evidence.py, docs/cost-model.md §11): every spot
and spot_fallback candidate is replayed on the traces that speak for its offer before it is offered."""

from __future__ import annotations

import json
import math
import sys
import warnings
from dataclasses import replace

import numpy as np
import pytest
from conftest import REPO, SCENARIOS

from planner.economics import spot_evidence, trace_replay
from planner.economics.candidate import CandidateInputs
from planner.economics.inputs import inputs_from_assignment
from planner.load.scenario import load_scenario
from planner.load.traces import Trace, load_traces
from planner.schema.plan import AssignmentRecord
from planner.solve.pipeline import assignments, make_plan


def _markov_up(
    rng, samples: int, steps: int, availability: float, flips: float
) -> np.ndarray:
    up = np.zeros((samples, steps), dtype=bool)
    state = rng.random(samples) < availability
    for t in range(steps):
        state ^= (
            rng.random(samples)
            < np.where(state, 1 - availability, availability) * flips
        )
        up[:, t] = state
    return up


def _random_job(rng) -> CandidateInputs:
    work = rng.uniform(0.5, 60)
    return CandidateInputs(
        work_h=work,
        checkpoint_write_h=rng.uniform(0, 0.3),
        restart_h=rng.uniform(0, 1.5),
        nodes=int(rng.integers(1, 5)),
        price_per_node_h=1.3,
        checkpoint_interval_h=rng.uniform(0.1, 10),
        time_budget_h=work * rng.uniform(1, 4),
    )


def test_spot_window_by_window_is_the_step_by_step_replay():
    """The planner replays every spot candidate window by window; `planner simulate --traces` ran it step by step
    before: the two agree to rounding on random jobs and random availability."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        inputs = _random_job(rng)
        up = _markov_up(
            rng, 20, int(rng.integers(50, 2000)), rng.uniform(0.3, 0.98), 0.1
        )
        job = trace_replay.TraceJob(inputs, 2.0)
        steps, windows = (
            trace_replay._replay_steps(job, up, 1 / 12, "spot"),
            trace_replay.replay(job, up, 1 / 12, "spot"),
        )
        assert np.array_equal(np.isnan(steps.wall_h), np.isnan(windows.wall_h))
        np.testing.assert_allclose(windows.wall_h, steps.wall_h, atol=1e-9)
        np.testing.assert_allclose(windows.spot_node_h, steps.spot_node_h, atol=1e-9)
        np.testing.assert_allclose(windows.cost_usd, steps.cost_usd, atol=1e-9)


def test_fallback_without_stepping_is_the_step_by_step_replay():
    """spot_fallback is replayed from spot alone's windows and the step its switch rule fires; step by step it
    gives the same walls, node-hours and costs on random jobs, availability from sparse to steady, and
    horizons that cut some replays short."""
    rng = np.random.default_rng(11)
    switched = unfinished = 0
    where = {True: 0, False: 0}  # switches inside a spot window, between windows
    for _ in range(120):
        inputs = _random_job(rng)
        up = _markov_up(
            rng, 20, int(rng.integers(50, 2000)), rng.uniform(0.1, 0.98), 0.2
        )
        job = trace_replay.TraceJob(inputs, 2.0)
        steps = trace_replay._replay_steps(job, up, 1 / 12, "spot_fallback")
        direct = trace_replay.replay(job, up, 1 / 12, "spot_fallback")
        assert np.array_equal(np.isnan(steps.wall_h), np.isnan(direct.wall_h))
        for a, b in (
            (steps.wall_h, direct.wall_h),
            (steps.spot_node_h, direct.spot_node_h),
            (steps.on_demand_node_h, direct.on_demand_node_h),
            (steps.cost_usd, direct.cost_usd),
        ):
            np.testing.assert_allclose(b, a, atol=1e-9)
        switched += int((steps.on_demand_node_h > 0).sum())
        unfinished += int(np.isnan(steps.wall_h).sum())
        done = (steps.on_demand_node_h > 0) & np.isfinite(steps.wall_h)
        at = np.rint(
            (steps.wall_h[done] - steps.on_demand_node_h[done] / inputs.nodes) * 12
        ).astype(int)
        for inside in up[np.flatnonzero(done), at]:
            where[bool(inside)] += 1
    # the switch inside windows and between them, and the cut horizon, were all exercised
    assert switched > 100 and unfinished > 10
    assert where[True] > 20 and where[False] > 20, where


def _trace(name: str, cloud: str | None, nodes: int, up: list[int]) -> Trace:
    return Trace(name, 5 / 60, np.array(up), cloud, "x1", nodes)


def test_which_traces_speak_for_an_offer():
    traces = (
        _trace("a1", "aws", 4, [4, 3]),
        _trace("a2", "aws", 16, [16, 9]),
        _trace("g", "gcp", 16, [16, 0]),
    )
    assert [t.name for t in spot_evidence.covering(traces, "aws", "x9", 2)[0]] == [
        "a1",
        "a2",
    ]
    assert [t.name for t in spot_evidence.covering(traces, "aws", "x9", 8)[0]] == ["a2"]
    assert spot_evidence.covering(traces, "aws", "x9", 17) == (
        [],
        False,
    )  # a gang no trace of aws ever held
    # no traces of its own: all stand in
    found, stand_in = spot_evidence.covering(traces, "runpod", "x9", 8)
    assert [t.name for t in found] == ["a2", "g"] and stand_in
    assert (
        spot_evidence.largest_gang(traces, "aws") == 16
        and spot_evidence.largest_gang(traces, "runpod") == 16
    )


def test_verdict_names_what_failed():
    evidence = spot_evidence.Replayed(
        0.8, 0.75, 10.0, 0.0, 10.0, 0.0, 20.0, ("a", "b"), False
    )
    assert (
        "met its deadline in 80% of replays on 2 measured availability traces (75% in a zone not measured, for "
        "how much the traces differ), below the 90% asked"
        in spot_evidence.verdict(evidence, 0.9, 10.0)
    )
    ok = replace(evidence, p_deadline=0.97, p_deadline_low=0.95)
    # 10 node-hours replayed against 10 fitted
    assert spot_evidence.verdict(ok, 0.9, 10.0) == ""
    assert (
        "its spot node-hours on replays on 2 measured availability traces are 10.0 (1.25x the fitted figure"
        in (spot_evidence.verdict(ok, 0.9, 8.0))
    )
    assert spot_evidence.verdict(ok, 0.9, 10 / (1 + spot_evidence.COST_SLACK)) == ""
    # held to the lower figure
    assert "below the 96% asked" in spot_evidence.verdict(ok, 0.96, 10.0)
    # each market on its own: cheap spot cannot hide dear on-demand
    fell_back = replace(ok, on_demand_node_h=3.0)
    assert "on-demand node-hours" in spot_evidence.verdict(fell_back, 0.9, 20.0, 2.0)
    assert "(none fitted;" in spot_evidence.verdict(fell_back, 0.9, 20.0, 0.0)
    assert spot_evidence.verdict(fell_back, 0.9, 10.0, 3.0) == ""


def test_it_refuses_before_pricing_only_what_the_verdict_turns_down_whatever_is_fitted():
    ok = spot_evidence.Replayed(
        0.97, 0.95, 10.0, 3.0, 10.5, 4.0, 20.0, ("a", "b"), False
    )
    # spot alone is held on its spot node-hours, known once priced
    assert not spot_evidence.refuses(ok, 0.9)
    # a deadline its replays miss, whatever it costs
    assert spot_evidence.refuses(ok, 0.96) and spot_evidence.verdict(ok, 0.96, 1e9, 1e9)
    # more on-demand node-hours than the most it could be fitted allows
    most = 3.0 / (1 + spot_evidence.COST_SLACK)
    assert spot_evidence.refuses(ok, 0.9, most - 0.01)
    assert spot_evidence.verdict(ok, 0.9, 1e9, most - 0.01)
    assert not spot_evidence.refuses(ok, 0.9, most + 0.01)
    # a stand-in at what one more zone may cost
    assert spot_evidence.refuses(replace(ok, stand_in=True), 0.9, 3.5)
    assert not spot_evidence.refuses(ok, 0.9, 3.5)


FALLBACK_ONLY = """\
name: fallback-only
catalogs: [aws]
workloads:
  - name: job
    kind: training
    memory: {{per_gpu: 30GiB}}
    work: {{gpu_hours: 16, reference_gpu: A100-80GB}}
    gpus: {{min: 1, max: 1}}
    time_budget: {budget}
    forbid: {{markets: [spot, on_demand]}}
"""


@pytest.mark.parametrize(
    "source", ["image-training", "pretrain-deadline", "24h", "40h"]
)
def test_fallbacks_refused_unpriced_are_what_pricing_them_would_find(
    source, scenario_file, monkeypatch
):
    """A held spot_fallback row whose replays turn it down whatever it costs is not priced, nor one that is spot
    alone in effect: the plan, or the reason there is none (a fallback-only job whose every row fails its
    replays), is the one of pricing every row."""
    from planner.candidates import generate, price
    from planner.report.solve import plan_json

    path = (
        SCENARIOS / f"{source}.yaml"
        if source[0].isalpha()
        else scenario_file(FALLBACK_ONLY.format(budget=source))
    )

    def report() -> dict:
        plan = make_plan(load_scenario(path), time_limit_s=30)
        return json.loads(json.dumps(plan_json(plan, timings=False), default=float))

    refused = []
    judge = generate.refused_unpriced
    monkeypatch.setattr(
        generate,
        "refused_unpriced",
        lambda *a: refused.append(judge(*a)) or refused[-1],
    )
    unpriced = report()
    assert any(refused), "no row was refused unpriced: the test proves nothing"
    monkeypatch.setattr(generate, "refused_unpriced", lambda *a: False)
    monkeypatch.setattr(price._Exact, "switches", lambda *a: True)
    assert unpriced == report()


def test_a_stand_in_provider_is_held_at_what_one_more_zone_may_cost():
    """A provider with no traces of its own is one zone not measured: its node-hours are held at the traces'
    mean plus one more zone's spread (an Azure fallback within 1.10x on the mean replayed at 1.32x held out)."""
    own = spot_evidence.Replayed(
        0.97, 0.95, 10.0, 2.0, 10.5, 4.0, 20.0, ("a", "b"), False
    )
    # own traces: the mean decides
    assert spot_evidence.verdict(own, 0.9, 10.0, 2.0) == ""
    stand_in = replace(own, stand_in=True)
    assert (
        "its on-demand node-hours on replays on 2 measured stand-in availability traces are 4.0 in a zone not "
        "measured (2.00x the fitted figure"
        in spot_evidence.verdict(stand_in, 0.9, 10.0, 2.0)
    )
    assert spot_evidence.verdict(stand_in, 0.9, 10.0, 4.0) == ""
    # one zone says nothing of others
    assert spot_evidence._new_zone_spread(np.array([3.0]), binomial=False) == 0


def test_the_error_over_traces_is_what_a_new_zone_must_allow_for():
    assert spot_evidence._new_zone_spread(np.array([1.0, 1.0, 1.0])) == 0
    # one more zone, not the mean of these: sd * sqrt(1 + 1/n), never less than the mean's own error
    assert spot_evidence._new_zone_spread(np.array([1.0, 0.5])) == pytest.approx(
        np.std([1, 0.5], ddof=1) * 1.5**0.5
    )
    assert spot_evidence._new_zone_spread(np.array([0.9])) == pytest.approx(
        (0.9 * 0.1 / 40) ** 0.5
    )


SPOT_ONLY = """\
name: spot-only
catalogs: [aws]
defaults: {{deadline_confidence: {confidence}}}
workloads:
  - name: job
    kind: training
    memory: {{per_gpu: 12GiB}}
    work: {{gpu_hours: {gpu_hours}, reference_gpu: V100-16GB}}
    gpus: {{min: {gpus}, max: {gpus}}}
    time_budget: {budget}
    restart_overhead: 10m
    checkpoint: {{every: 30m, write_time: 1m}}
    allow: {{markets: [spot], instance_types: [p3.2xlarge], regions: [us-east-1]}}
"""


def test_a_promise_the_traces_do_not_keep_is_not_offered(run, scenario_file):
    """One p3.2xlarge on spot, about 6 h of work in 24 h: the fitted process gives it P(deadline) 0.98, but on
    the measured p3 traces it finishes in time in about 80 % of replays, so at 0.95 nothing is offered, and at a
    confidence the traces do meet the plan's replays meet it."""
    path = scenario_file(
        SPOT_ONLY.format(confidence=0.95, gpu_hours=3, gpus=1, budget="24h")
    )
    result = run("solve", path, "--format", "json")
    [reason] = [i["reason"] for i in json.loads(result.stdout)["infeasible"]]
    assert reason.startswith(
        "no candidate keeps its promise on measured spot availability: the cheapest, 1 x "
        "aws/us-east-1/p3.2xlarge (spot), met its deadline in "
    )
    assert (
        "% of replays on 10 measured availability traces (" in reason
        and reason.endswith(
            "% in a zone not measured, for how much the traces differ), below the 95% asked"
        )
    )
    loaded = load_scenario(
        scenario_file(
            SPOT_ONLY.format(confidence=0.5, gpu_hours=3, gpus=1, budget="24h")
        )
    )
    plan = make_plan(loaded, time_limit_s=10)
    [a] = assignments(plan, alternatives=0)
    assert a["expected"]["p_deadline"] >= 0.95 > a["replayed"]["p_deadline"]
    found, _ = spot_evidence.covering(tuple(load_traces()), "aws", "p3.2xlarge", 1)
    evidence = spot_evidence.replayed(
        inputs_from_assignment(AssignmentRecord.model_validate(a)), "spot", found
    )
    assert evidence.p_deadline >= 0.5 and a["replayed"]["p_deadline"] == pytest.approx(
        evidence.p_deadline
    )


def test_a_gang_larger_than_any_measured_is_ruled_out_with_its_reason(
    run, scenario_file
):
    """144 H100s on GCP spot are 18 nodes of 8; the GCP probes held 16 nodes at most."""
    path = scenario_file(GANG)
    result = run("solve", path, "--format", "json")
    [reason] = [i["reason"] for i in json.loads(result.stdout)["infeasible"]]
    assert reason.startswith(
        "no candidate keeps its promise on measured spot availability: the cheapest, 18 x gcp/"
    )
    assert reason.endswith(
        "(spot), is a larger spot gang than any measured: no availability trace of gcp shows 18 "
        "nodes held at once (the most: 16)"
    )


GANG = """\
name: gang
catalogs: [gcp]
defaults: {deadline_confidence: 0.5}
workloads:
  - name: job
    kind: training
    memory: {per_gpu: 12GiB}
    work: {gpu_hours: 300, reference_gpu: H100-SXM}
    gpus: {min: 144, max: 144}
    time_budget: 2d
    restart_overhead: 10m
    checkpoint: {every: 30m, write_time: 1m}
    allow: {markets: [spot]}
"""


def test_every_shipped_spot_plan_keeps_its_promise_on_its_traces():
    """In sample: what the planner offers meets its deadline confidence on the traces it was held to, and its
    replayed compute is within COST_SLACK of its plan (what `planner simulate --traces` shows)."""
    loaded = load_scenario(SCENARIOS / "pretrain-multinode.yaml")
    plan = make_plan(loaded, time_limit_s=20)
    spot = [
        a
        for a in assignments(plan, alternatives=0)
        if a["market"] in ("spot", "spot_fallback")
    ]
    assert spot
    traces = tuple(load_traces())
    for a in spot:
        found, stand_in = spot_evidence.covering(
            traces, a["provider"], a["instance_type"], a["nodes"]
        )
        evidence = spot_evidence.replayed(
            inputs_from_assignment(AssignmentRecord.model_validate(a)),
            a["market"],
            found,
            stand_in,
        )
        assert (
            evidence.p_deadline
            >= evidence.p_deadline_low
            >= a["inputs"]["deadline_confidence"]
        )
        fitted = (
            a["expected"]["cost_usd"]
            - a["breakdown_usd"]["storage"]
            - a["breakdown_usd"]["egress"]
        )
        replayed = evidence.compute_usd(
            a["inputs"]["price_per_node_h"],
            a["inputs"].get("fallback_price_per_node_h", 0),
        )
        assert replayed <= (1 + spot_evidence.COST_SLACK) * fitted + 1e-6
        assert a["replayed"]["traces"] == len(found)


def test_promises_hold_on_held_out_zones():
    """Out of sample: planned with two thirds of the zones' traces, replayed on the other third, on the examples
    where that holds (benchmarks/spot_holdout.py and docs/validation.md list the ones where it does not)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from spot_holdout import run as holdout

    rows = [
        r
        for name in ("qlora-70b.yaml", "serving-team.yaml")
        for r in holdout(SCENARIOS / name, 3)
    ]
    checked = [r for r in rows if "kept" in r]
    assert checked and all(r["kept"] for r in checked), json.dumps(rows, default=str)


@pytest.mark.slow  # about a minute: every shipped example planned three times
def test_every_shipped_spot_promise_holds_on_held_out_zones():
    """What #41 asks, on every shipped example: planned with two thirds of the zones' traces and replayed on
    the third, each spot or spot_fallback job meets its deadline in at least its confidence less 3 points, a
    fallback's replayed compute is within 15 % of its plan, and none costs over 1.10x its on-demand
    alternative (the stand-in Azure fallback that replayed at 1.32x failed this before stand-ins were held at
    one more zone's cost)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from spot_holdout import run as holdout
    from spot_holdout import shipped_examples

    rows = [r for path in shipped_examples() for r in holdout(path, 3)]
    checked = [r for r in rows if "kept" in r]
    assert len(checked) >= 5 and all(r["kept"] for r in checked), json.dumps(
        rows, default=str
    )


def test_a_fallback_without_a_deadline_never_switches():
    """With no deadline §10's switch point is never reached: replayed directly, as step by step, spot_fallback
    is spot alone."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        inputs = replace(_random_job(rng), time_budget_h=math.inf)
        up = _markov_up(rng, 10, 400, rng.uniform(0.2, 0.9), 0.2)
        job = trace_replay.TraceJob(inputs, 2.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            direct = trace_replay.replay(job, up, 1 / 12, "spot_fallback")
        steps = trace_replay._replay_steps(job, up, 1 / 12, "spot_fallback")
        assert not direct.on_demand_node_h.any()
        np.testing.assert_allclose(direct.wall_h, steps.wall_h, atol=1e-9)
        np.testing.assert_allclose(direct.spot_node_h, steps.spot_node_h, atol=1e-9)


def test_a_shorter_horizon_reads_the_first_steps_of_a_longer_one():
    """Replays over a shorter horizon read the first steps of a longer one's availability and windows
    (`Spans.first`): the same as finding the windows of those steps alone, for spot and spot_fallback."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        inputs = _random_job(rng)
        up = _markov_up(rng, 12, 900, rng.uniform(0.2, 0.95), 0.2)
        job = trace_replay.TraceJob(inputs, 2.0)
        whole = trace_replay.spans(up)
        steps = int(rng.integers(1, 900))
        for policy in ("spot", "spot_fallback"):
            alone = trace_replay.replay(job, up[:, :steps], 1 / 12, policy)
            cropped = trace_replay.replay(
                job, up[:, :steps], 1 / 12, policy, whole.first(steps)
            )
            for a, b in (
                (alone.wall_h, cropped.wall_h),
                (alone.spot_node_h, cropped.spot_node_h),
                (alone.on_demand_node_h, cropped.on_demand_node_h),
            ):
                np.testing.assert_array_equal(a, b)
