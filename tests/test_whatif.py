"""`planner whatif`: ranges, monotone optimal cost, switch points confirmed by solving either
side, the JSON contract, plots, and that reusing work between points changes no result."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from planner.candidates import generate as C
from planner.candidates.cache import CandidateCache
from planner.candidates.offers import apply_overrides
from planner.errors import PlannerError
from planner.load.scenario import load_scenario
from planner.whatif import sweep as W
from planner.whatif.points import (
    PointResult,
    PointTask,
    endpoint_placements,
    solve_point,
)
from planner.whatif.result import SweepResult, point_rows, sweep_text
from planner.whatif.spec import PARAMETERS, SweepSpec, parse_range, parse_where

TWO_JOBS = """\
name: whatif-small
catalogs: [lambda, runpod]
defaults: {spot_evidence: fitted}  # the sweep's mechanics, on the fitted process (RunPod has no traces of its own)
workloads:
  - name: train
    kind: training
    memory: {per_gpu: 30GiB}
    work: {gpu_hours: 40, reference_gpu: A100-80GB}
    gpus: {min: 1, max: 8}
    time_budget: 3d
  - name: infer
    kind: batch_inference
    memory: {per_gpu: 20GiB}
    work: {gpu_hours: 10, reference_gpu: A100-80GB}
    interruption_tolerance: stateless
"""
SLACK = 0.02  # CP-SAT optimises whole cents per workload; reported objectives are float sums
PRECISION = 0.01


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("whatif") / "small.yaml"
    path.write_text(TWO_JOBS)
    return str(path)


@pytest.fixture(scope="module")
def spot_sweep(small) -> SweepResult:
    spec = SweepSpec(
        small,
        {"spot_price_multiplier": parse_range("0.4:2.4:6", "--spot-price")},
        precision=PRECISION,
    )
    return W.run_sweep(spec)


# ---------------------------------------------------------------- ranges


def test_ranges_parse_as_start_stop_points_or_a_list():
    assert parse_range("0.5:2.0:4", "--x") == (0.5, 1.0, 1.5, 2.0)
    assert parse_range("1.2, 0.8,1", "--x") == (0.8, 1.0, 1.2)
    assert parse_range("1.5", "--x") == (1.5,)
    assert parse_where(["provider=aws,gpu=H100", "region=us-east-1"]) == {
        "provider": "aws",
        "gpu": "H100",
        "region": "us-east-1",
    }


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--spot-price", "0.5:2.0"],
            "error: --spot-price: expected start:stop:points (e.g. 0.5:2.0:16)",
        ),
        (["--spot-price", "a:b:c"], "error: --spot-price: expected start:stop:points"),
        (
            ["--spot-price", "0:2:3"],
            "error: --spot-price: multipliers must be finite, greater than 0 and at most 1,000,000, got 0",
        ),
        (
            ["--preemption", "-1,1"],
            "error: --preemption: multipliers must be finite, greater than 0 and at most 1,000,000, got -1",
        ),
        (
            ["--spot-price", "1:1e9:3"],
            "error: --spot-price: multipliers must be finite, greater than 0 and at most 1,000,000, got 1e+09",
        ),
        (
            ["--preemption", "1,inf"],
            "error: --preemption: multipliers must be finite, greater than 0 and at most 1,000,000, got inf",
        ),
        (
            ["--spot-price", "0.5:2:1"],
            "error: --spot-price: points must be between 2 and",
        ),
        (
            ["--spot-price", "2:1:3"],
            "error: --spot-price: stop must be greater than start",
        ),
        (
            ["--spot-price", "0.5:2:3.5"],
            "error: --spot-price: the number of points must be a whole number",
        ),
        (
            ["--spot-price", "1e-13:2e-13:3"],
            "error: --spot-price: 3 points from 1e-13 to 2e-13 are not distinct",
        ),
        (
            ["--preemption", "1:1.0000000000001:3"],
            "error: --preemption: 3 points from 1 to 1 are not distinct",
        ),
        (
            ["--spot-price", "1,2", "--where", "colour=red"],
            "error: --where: unknown key 'colour'",
        ),
        (
            ["--spot-price", "1,2", "--where", "provider=awz"],
            "error: --where: unknown provider 'awz'",
        ),
        (
            ["--spot-price", "1,2", "--where", "gpu"],
            "error: --where: expected key=value pairs",
        ),
        (
            [],
            "error: whatif: give at least one of --spot-price, --preemption, --on-demand-price",
        ),
        (
            ["--spot-price", "1,2", "--preemption", "1,2", "--on-demand-price", "1,2"],
            "error: whatif: at most two of",
        ),
        (
            ["--spot-price", "1,2", "--plot", "out.jpg"],
            "error: --plot: expected a .png or .html file name",
        ),
    ],
)
def test_bad_options_give_one_line_and_exit_2(run, small, args, message):
    result = run("whatif", small, *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


# ---------------------------------------------------------------- properties of the optimum


def test_cost_never_falls_as_the_spot_price_rises(spot_sweep):
    costs = [p.objective_usd for p in spot_sweep.points]
    assert all(p.status == "OPTIMAL" for p in spot_sweep.points)
    assert all(b >= a - SLACK for a, b in zip(costs, costs[1:])), costs
    assert costs[-1] > costs[0]


def test_cost_never_falls_as_preemption_rises(small):
    spec = SweepSpec(
        small,
        {
            "preemption_multiplier": (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0),
            "spot_price_multiplier": (0.7,),
        },
        precision=1.0,
    )
    costs = [p.objective_usd for p in W.run_sweep(spec).points]
    assert all(b >= a - SLACK for a, b in zip(costs, costs[1:])), costs
    assert costs[-1] > costs[0]


def test_a_high_enough_spot_price_leaves_no_workload_on_spot(small, spot_sweep):
    assert any("/spot/" in p for p in spot_sweep.points[0].placements.values())
    for multiplier in (
        spot_sweep.points[-1].multipliers["spot_price_multiplier"],
        50.0,
    ):
        point = solve_point(PointTask(small, spot_price_multiplier=multiplier))
        assert point.status == "OPTIMAL"
        assert point.spend_usd["spot"] == 0.0
        assert not any("/spot/" in p for p in point.placements.values()), (
            point.placements
        )


def test_every_switch_is_confirmed_by_solving_either_side(small, spot_sweep):
    assert {s["workload"] for s in spot_sweep.switches} == {"train", "infer"}
    for switch in spot_sweep.switches:
        assert switch["from"] != switch["to"]
        below = solve_point(
            PointTask(small, spot_price_multiplier=switch["at"] - PRECISION)
        )
        above = solve_point(
            PointTask(small, spot_price_multiplier=switch["at"] + PRECISION)
        )
        assert below.placements[switch["workload"]] == switch["from"], switch
        assert above.placements[switch["workload"]] == switch["to"], switch


def test_where_limits_the_offers_a_multiplier_touches(small):
    """Cheaper spot GH200s (none of which runs spot here) leave the plan as it is; dearer spot L40S, which the
    plan runs on, move work off them."""
    unscaled = solve_point(PointTask(small))
    only_gh200 = solve_point(
        PointTask(small, spot_price_multiplier=0.5, where=(("gpu", "GH200"),))
    )
    only_l40s = solve_point(
        PointTask(small, spot_price_multiplier=4.0, where=(("gpu", "L40S"),))
    )
    assert any("L40S" in p and "/spot" in p for p in unscaled.placements.values())
    assert only_gh200.placements == unscaled.placements
    assert not any("L40S" in p and "/spot" in p for p in only_l40s.placements.values())


# ---------------------------------------------------------------- the runner


SWITCH_AT = 1.2345


def fake_solve(task: PointTask) -> PointResult:
    """A stand-in "solve one point": job moves to on-demand above SWITCH_AT x spot price."""
    x = task.spot_price_multiplier
    market = "spot" if x < SWITCH_AT else "on_demand"
    return PointResult(
        task.multipliers,
        "OPTIMAL",
        10 * min(x, SWITCH_AT),
        {"job": f"p/r/i/{market}/1"},
        {"job": market},
        {market: 10 * min(x, SWITCH_AT)},
    )


def test_bisection_finds_the_switch_to_the_stated_precision_with_any_solve_function():
    spec = SweepSpec(
        "unused.yaml",
        {"spot_price_multiplier": parse_range("0.5:2.0:7", "--x")},
        precision=0.001,
    )
    result = W.run_sweep(spec, solve=fake_solve)
    assert len(result.points) == 7
    [switch] = result.switches
    assert abs(switch["at"] - SWITCH_AT) <= 0.0005
    assert (switch["from"], switch["to"]) == ("p/r/i/spot/1", "p/r/i/on_demand/1")
    assert result.solves == 7 + 8  # an interval of 0.25 halved 8 times is below 0.001


def test_a_single_point_shows_the_parameter_it_was_given():
    """One point of another parameter than the spot price: its table column is that parameter at its value (it
    was labelled `spot` and showed the spot multiplier, 1)."""
    spec = SweepSpec("unused.yaml", {"rate_multiplier": (3.0,)})
    result = W.run_sweep(spec, solve=fake_solve)
    [row] = point_rows(result)
    assert row["rate"] == 3.0 and "spot" not in row
    both = W.run_sweep(
        SweepSpec(
            "unused.yaml",
            {"on_demand_price_multiplier": (2.0,), "rate_multiplier": (3.0,)},
        ),
        solve=fake_solve,
    )
    assert {
        k: v for k, v in point_rows(both)[0].items() if k in ("on_demand", "rate")
    } == {"on_demand": 2.0, "rate": 3.0}


def test_bisection_splits_only_between_proven_points():
    """Where the time limit leaves a scenario's point unproven, its placements are where the search stopped:
    serving-chat at --rate 1,2 --preemption 0.1 --time-limit 2 kept splitting on such noise (48 solves, 136 s).
    An unproven midpoint ends the bisection there, the switch said on the interval around it (`within`); an
    unproven grid end is not split at all; proven points bisect to the precision as before."""

    def unproven_near(low: float, high: float):
        def solve(task: PointTask) -> PointResult:
            found = fake_solve(task)
            return (
                replace(found, status="FEASIBLE", settled=False)
                if low < task.spot_price_multiplier < high
                else found
            )

        return solve

    axis = {
        "spot_price_multiplier": parse_range("0.5:2.0:7", "--x")
    }  # the switch lies in the grid's 1..1.25
    spec = SweepSpec("unused.yaml", axis, precision=0.001)
    # the first midpoint, 1.125, is unproven
    result = W.run_sweep(spec, solve=unproven_near(1.1, 1.2))
    [switch] = result.switches
    assert result.solves == 7 + 1 and (switch["at"], switch["within"]) == (1.125, 0.125)
    assert (switch["from"], switch["to"]) == ("p/r/i/spot/1", "p/r/i/on_demand/1")
    assert "within" in sweep_text(result, "table") and '"within": 0.125' in sweep_text(
        result, "json"
    )

    # 1.125, 1.1875, 1.21875 proven; 1.234375 not
    deeper = W.run_sweep(spec, solve=unproven_near(1.23, 1.24))
    [switch] = deeper.switches
    assert (
        switch["at"] - switch["within"] <= SWITCH_AT <= switch["at"] + switch["within"]
    )
    assert switch["within"] == 1 / 64 and deeper.solves == 7 + 4

    # the grid point 1.0 itself
    at_the_grid = W.run_sweep(spec, solve=unproven_near(0.99, 1.01))
    [switch] = at_the_grid.switches
    assert at_the_grid.solves == 7 and switch["within"] == 0.125

    proven = W.run_sweep(spec, solve=fake_solve)
    assert proven.switches[0]["within"] <= 0.0005 and "within" not in sweep_text(
        proven, "table"
    )


def test_two_ranges_sweep_the_grid_and_bisect_along_both(small):
    spec = SweepSpec(
        small,
        {"spot_price_multiplier": (0.5, 1.5), "preemption_multiplier": (0.5, 8.0)},
        precision=0.05,
    )
    result = W.run_sweep(spec)
    assert [
        (p.multipliers["spot_price_multiplier"], p.multipliers["preemption_multiplier"])
        for p in result.points
    ] == [(0.5, 0.5), (1.5, 0.5), (0.5, 8.0), (1.5, 8.0)]
    assert {s["parameter"] for s in result.switches} <= {
        "spot_price_multiplier",
        "preemption_multiplier",
    }
    assert any(s["parameter"] == "spot_price_multiplier" for s in result.switches)


def test_process_pool_gives_the_inline_results(small, spot_sweep):
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=2) as pool:
        parallel = W.run_sweep(spot_sweep.spec, pool)
    assert [p.record() for p in parallel.points] == [
        p.record() for p in spot_sweep.points
    ]
    assert parallel.switches == spot_sweep.switches


def test_reusing_work_between_points_changes_no_candidate(monkeypatch):
    loaded = load_scenario(
        Path(__file__).resolve().parent.parent / "scenarios" / "team-quarter-mix.yaml"
    )
    kept = CandidateCache()  # what a sweep worker keeps from point to point
    C.generate(loaded.scenario, loaded.catalog, cache=kept)
    for kwargs in (
        {"spot_mult": 1.7},
        {"preempt_mult": 2.5},
        {"spot_mult": 0.6, "where": {"provider": "gcp"}},
    ):
        offers = apply_overrides(
            loaded.catalog.offers, loaded.scenario.overrides, loaded.catalog, **kwargs
        )
        reused = C.generate(loaded.scenario, loaded.catalog, offers, cache=kept)
        assert kept.rows and kept.exact and kept.estimates
        with monkeypatch.context() as patch:
            patch.setattr(C, "offers_token", lambda offers: None)
            fresh = C.generate(
                loaded.scenario, loaded.catalog, offers, cache=CandidateCache()
            )
        pd.testing.assert_frame_equal(reused.all, fresh.all)
        pd.testing.assert_frame_equal(reused.pruned, fresh.pruned)
        assert (
            reused.infeasible == fresh.infeasible
            and reused.considered == fresh.considered
        )


@pytest.mark.slow  # 18 s; test_reusing_work_between_points_changes_no_candidate stays in the default run
def test_kept_physics_and_screening_follow_preemption_and_scenario_defaults(
    monkeypatch,
):
    """The rows cache keeps physics per VRAM headroom and screening per (headroom, hardware
    failure rate, preemption state): going back and forth between preemption rates, and to a
    scenario with other defaults on the same offers, gives what a fresh generation gives."""
    loaded = load_scenario(
        Path(__file__).resolve().parent.parent / "scenarios" / "team-quarter-mix.yaml"
    )

    def changed(**defaults):
        return loaded.scenario.model_copy(
            update={"defaults": loaded.scenario.defaults.model_copy(update=defaults)}
        )

    failing, roomy = (
        changed(hardware_failure_per_gpu_h=1e-3),
        changed(vram_headroom=0.3),
    )
    kept = CandidateCache()
    for scenario, kwargs in (
        (loaded.scenario, {"preempt_mult": 2.5}),
        (loaded.scenario, {"spot_mult": 1.3}),
        (loaded.scenario, {"preempt_mult": 2.5}),
        (failing, {"preempt_mult": 2.5}),
        (roomy, {"preempt_mult": 2.5}),
        (failing, {"spot_mult": 0.5}),
    ):
        offers = apply_overrides(
            loaded.catalog.offers, scenario.overrides, loaded.catalog, **kwargs
        )
        reused = C.generate(scenario, loaded.catalog, offers, cache=kept)
        with monkeypatch.context() as patch:
            patch.setattr(C, "offers_token", lambda offers: None)
            fresh = C.generate(scenario, loaded.catalog, offers, cache=CandidateCache())
        pd.testing.assert_frame_equal(reused.all, fresh.all)
        pd.testing.assert_frame_equal(reused.pruned, fresh.pruned)
        assert reused.infeasible == fresh.infeasible


def test_a_sweep_needs_at_most_two_ranges(small):
    with pytest.raises(PlannerError):
        W.run_sweep(SweepSpec(small, {p: (1.0, 2.0) for p in PARAMETERS}))


# ---------------------------------------------------------------- the command


def test_json_contract(run, small):
    result = run(
        "whatif",
        small,
        "--spot-price",
        "0.5,1.5",
        "--processes",
        "1",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"points", "switches"} <= set(data)
    for point in data["points"]:
        assert {
            "spot_price_multiplier",
            "preemption_multiplier",
            "on_demand_price_multiplier",
            "status",
            "objective_usd",
            "placements",
        } <= set(point)
        assert set(point["placements"]) == {"train", "infer"}
        for placement in point["placements"].values():
            provider, region, instance, market, nodes = placement.split("/")
            assert market in ("spot", "on_demand", "spot_fallback") and int(nodes) >= 1
    assert data["switches"]
    for switch in data["switches"]:
        assert {"workload", "parameter", "at", "from", "to"} <= set(switch)
        assert (
            switch["parameter"] == "spot_price_multiplier" and 0.5 < switch["at"] < 1.5
        )


def test_table_output_and_plots(run, small, tmp_path):
    png, page = tmp_path / "sweep.png", tmp_path / "sweep.html"
    result = run(
        "whatif", small, "--spot-price", "0.5:1.5:3", "--processes", "1", "--plot", png
    )
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith(
        "what-if sweep: spot x0.5..1.5 (3 points); multipliers apply to all offers"
    )
    for text in (
        "objective_usd",
        "spot_share",
        "switch points (bisected to",
        "placements between switch points",
        "train",
        "infer",
        "OPTIMAL",
    ):
        assert text in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = run(
        "whatif",
        small,
        "--spot-price",
        "0.5,1.5",
        "--preemption",
        "1,2",
        "--processes",
        "1",
        "--plot",
        page,
        "--format",
        "csv",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith(
        "spot_price_multiplier,preemption_multiplier,"
    )
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "</html>" in text
    assert "http" not in text.split("<svg", 1)[0]  # self-contained: nothing fetched


def test_plot_refuses_to_overwrite_the_scenario(run, scenario_file):
    path = scenario_file(TWO_JOBS, name="same.png")
    result = run(
        "whatif", path, "--spot-price", "1,2", "--processes", "1", "--plot", path
    )
    assert result.exit_code == 2
    assert "refusing to overwrite an input file" in result.stderr
    assert path.read_text() == textwrap.dedent(TWO_JOBS)


TINY_QUARTER = """\
name: tiny-quarter
catalogs: [aws, lambda]
horizon: {start: 2027-01-04, end: 2027-01-18, step: 12h}
runs:
  - name: train
    kind: training
    memory: {per_gpu: 40GiB}
    work: {gpu_hours: 300, reference_gpu: A100-80GB}
    gpus: {min: 8, max: 16}
  - name: evals
    kind: batch_inference
    memory: {per_gpu: 30GiB}
    work: {gpu_hours: 40, reference_gpu: A10G}
    gpus: 4
    interruption_tolerance: stateless
    after: [train]
"""


def test_quarter_files_sweep_batch_schedules(run, scenario_file):
    """On a quarter file every point is a `planner batch` schedule; placements are per run, and
    dearer spot never makes the quarter cheaper."""
    path = scenario_file(TINY_QUARTER, "quarter.yaml")
    result = run(
        "whatif",
        path,
        "--spot-price",
        "0.5,1,4",
        "--processes",
        "1",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert all(set(p["placements"]) == {"train", "evals"} for p in data["points"])
    costs = [p["objective_usd"] for p in data["points"]]
    assert costs == sorted(costs)


def test_endpoints_switch_market_where_planner_solve_says(tmp_path):
    """The shipped endpoint plus fine-tunes, with spot preempted node by node: the endpoint's spot pool gives way
    to on-demand nodes as spot gets dearer, and `planner solve` with the multiplier as an override agrees on
    either side of the switch."""
    from pathlib import Path

    from planner.solve.pipeline import make_plan

    shipped = Path(__file__).resolve().parents[1] / "scenarios" / "serving-team.yaml"
    # spot preempted node by node, so the endpoint can use it
    source = str(tmp_path / "independent.yaml")
    Path(source).write_text(
        shipped.read_text() + "overrides:\n  - {provider: aws, spot_correlation: 0, "
        "spot_capacity_wait: 0h}\n"
    )
    result = W.run_sweep(
        SweepSpec(source, {"spot_price_multiplier": (0.5, 2.0)}, precision=0.05)
    )
    switch = next(s for s in result.switches if s["workload"] == "support-bot")
    assert "/spot/" in switch["from"] and "/on_demand/" in switch["to"]
    for side, multiplier in (
        ("from", switch["at"] - 0.05),
        ("to", switch["at"] + 0.05),
    ):
        text = (
            Path(source).read_text()
            + f"  - {{spot_price_multiplier: {multiplier!r}}}\n"
        )
        path = tmp_path / f"{side}.yaml"
        path.write_text(text)
        plan = make_plan(load_scenario(path), time_limit_s=30.0, workers=1)
        pools = plan.result.serving.join(
            plan.candidates.endpoints[["offer_key", "market", "tp"]], on="option"
        )
        assert endpoint_placements(pools)["support-bot"] == switch[side], (
            side,
            multiplier,
        )


# ---------------------------------------------------------------- endpoint traffic (--rate)

TWO_GPUS = """\
# source: Mélange's example prices (tyler-griggs/melange-release melange/config/example.json @ebba701)
# as_of: 2024-04-22
provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes
aws,test-1,small-a10g,A10G,1,4,16,24,pcie,32,none,0,1.01,,,,,
aws,test-1,big-a100,A100-80GB,1,12,85,80,pcie,32,none,0,3.67,,,,,
"""
ENDPOINT = """\
name: rate-sweep
catalogs: [two.csv]
workloads:
  - name: chat
    kind: serving
    traffic:
      requests_per_s: {rate}
      buckets:
        - {{prompt_tokens: 100, output_tokens: 100, share: 0.6}}
        - {{prompt_tokens: 1000, output_tokens: 100, share: 0.4}}
    slo: {{ttft: 1s, tpot: 120ms}}
    measured:
      - {{gpu: A10G, prompt_tokens: 100, output_tokens: 100, max_requests_per_s: 2}}
      - {{gpu: A10G, prompt_tokens: 1000, output_tokens: 100, max_requests_per_s: 5}}
      - {{gpu: A100-80GB, prompt_tokens: 100, output_tokens: 100, max_requests_per_s: 20}}
      - {{gpu: A100-80GB, prompt_tokens: 1000, output_tokens: 100, max_requests_per_s: 40}}
    duration: 24h
    interruption_tolerance: none
"""


@pytest.fixture(scope="module")
def endpoint_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rate")
    (folder / "two.csv").write_text(TWO_GPUS)

    def write(rate: float, name: str = "endpoint.yaml") -> str:
        (folder / name).write_text(ENDPOINT.format(rate=rate))
        return str(folder / name)

    return write


def _pools(path: str) -> tuple[float, str]:
    """`planner solve`'s cost and the endpoint's pools (offer/market/TP, no node counts) for a file."""
    from planner.solve.pipeline import make_plan

    plan = make_plan(load_scenario(path), time_limit_s=30.0, workers=1)
    pools = plan.result.serving.join(
        plan.candidates.endpoints[["offer_key", "market", "tp"]], on="option"
    )
    return plan.result.objective_usd, endpoint_placements(pools, nodes=False)["chat"]


def test_rate_sweep_switches_gpu_types_where_planner_solve_says(endpoint_file):
    """Along the traffic the cost never falls, the point at x1 is `planner solve`'s plan, and every switch of
    the endpoint's GPU mix is confirmed by solving the file with its rate written in, on either side."""
    base = 10.0
    source = endpoint_file(base)
    result = W.run_sweep(
        SweepSpec(source, {"rate_multiplier": (0.5, 1.0, 2.0, 4.0)}, precision=0.02)
    )
    costs = [p.objective_usd for p in result.points]
    assert all(p.status == "OPTIMAL" for p in result.points)
    assert all(b >= a - SLACK for a, b in zip(costs, costs[1:])), costs
    assert costs[1] == pytest.approx(_pools(source)[0], abs=SLACK)
    assert result.switches, "the mix of A10G and A100 nodes changes with the load"
    for switch in result.switches:
        assert switch["parameter"] == "rate_multiplier" and switch["workload"] == "chat"
        assert switch["held_from"] != switch["held_to"]
        for side, multiplier in (
            ("held_from", switch["at"] - 0.01),
            ("held_to", switch["at"] + 0.01),
        ):
            path = endpoint_file(base * multiplier, f"{side}-{multiplier:.4f}.yaml")
            assert _pools(path)[1] == switch[side], (side, multiplier)


def test_rate_sweep_needs_an_endpoint_and_a_rate_in_bounds(run, small, endpoint_file):
    result = run("whatif", small, "--rate", "0.5,2")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "error: --rate: multiplies the traffic of serving endpoints"
    ), result.stderr
    result = run("whatif", endpoint_file(10.0), "--rate", "1,2000000")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "error: --rate: x2e+06 takes 'chat' from 10 to 2e+07 requests/s"
    ), result.stderr


def test_rate_sweep_json_carries_the_multiplier(run, endpoint_file):
    result = run(
        "whatif",
        endpoint_file(10.0),
        "--rate",
        "1,3",
        "--processes",
        "1",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [p["rate_multiplier"] for p in data["points"]] == [1.0, 3.0]
    assert data["swept"] == ["rate_multiplier"]
    assert all(
        p["placements"]["chat"].startswith("aws/test-1/") for p in data["points"]
    )
