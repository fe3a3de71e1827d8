"""Serving endpoints end to end: the file format's errors, the capacity model against published serving
benchmarks, Mélange's published allocation, optimality against brute force, and determinism."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import statistics
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from families.factories import endpoint, option
from scipy import stats

from planner.candidates import pool_availability
from planner.candidates.limits import Limits
from planner.candidates.pool_availability import (
    below_capacity,
    kept_counts,
    kept_nodes,
    pool_table,
)
from planner.solve.model import build_model
from planner.solve.search import solve_model

ROOT = Path(__file__).resolve().parents[1]
PLANNER = [sys.executable, "-m", "planner.cli"]
_spec = importlib.util.spec_from_file_location(
    "serving_published", ROOT / "benchmarks" / "serving_published.py"
)
published = importlib.util.module_from_spec(_spec)
sys.modules["serving_published"] = published  # its dataclasses look their module up
_spec.loader.exec_module(published)


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*PLANNER, *args], capture_output=True, text=True, cwd=cwd)


# ---------------------------------------------------------------- the capacity model against published runs


@pytest.mark.parametrize("case", published.CASES, ids=lambda c: c.name)
def test_serving_model_is_within_1_5x_of_published_serving_benchmarks(case):
    """Every case within 1.5x but the misses listed with their reason, and each listed miss still a miss (a fix
    must take it off the list)."""
    planner = published.planner_figure(case)
    ratio = published.ratio(case, planner)
    print(
        f"{case.name}: published {case.published:.4g}, planner {planner:.4g}, ratio {ratio:.2f} ({case.source})"
    )
    assert (1 / published.TARGET_EACH <= ratio <= published.TARGET_EACH) == (
        case.name not in published.MISSES
    )


def test_published_serving_table_meets_its_median_and_size():
    ratios = [published.ratio(c, published.planner_figure(c)) for c in published.CASES]
    assert len(ratios) >= 30 and statistics.median(ratios) <= published.TARGET_MEDIAN
    # time to first token under load included
    assert sum(c.metric == "ttft_ms" for c in published.CASES) >= 10
    assert set(published.MISSES) <= {c.name for c in published.CASES}


def test_capacity_falls_as_the_tpot_target_tightens_and_grows_with_fp8_kv():
    from planner.physics import serving

    case = published.CASES[1]
    r = published.replica(case)
    loose = serving.capacity(r, 512, 256, ttft_s=1.0, tpot_s=0.06)
    tight = serving.capacity(r, 512, 256, ttft_s=1.0, tpot_s=0.02)
    assert 0 < tight.max_requests_per_s < loose.max_requests_per_s
    at = serving.latency(r, 512, 256, loose.max_requests_per_s)
    assert (
        at.tpot_s <= 0.06 + 1e-9
        and at.ttft_s <= 1.0 + 1e-9
        and at.batch <= loose.max_batch
    )
    assert (
        serving.capacity(r, 512, 256, ttft_s=1.0, tpot_s=0.001).max_requests_per_s == 0
    )


def test_the_capacity_is_the_largest_rate_within_the_slo_to_a_ten_thousandth():
    """By its definition, read off `latency`: within the SLO at the capacity, past it a ten-thousandth above
    (the search's tolerance), on every published case's replica at two request sizes and two SLOs."""
    from planner.physics import batching, serving

    checked = 0
    for case in published.CASES[::3]:
        replica = published.replica(case)
        for prompt, output in ((512, 256), (3072, 384)):
            for ttft, tpot in ((1.0, 0.05), (0.3, 0.03)):
                cap = serving.capacity(replica, prompt, output, ttft, tpot)
                if not cap.max_requests_per_s or cap.limit == "prefill":
                    continue
                seats = min(
                    cap.max_batch,
                    batching.default_scheduler(
                        replica.gpu.name, replica.vram_gib
                    ).max_seqs,
                )

                def within(rate: float) -> bool:
                    at = serving.latency(replica, prompt, output, rate)
                    return (
                        at is not None
                        and at.batch <= seats
                        and at.tpot_s <= tpot
                        and at.ttft_s <= ttft
                    )

                assert within(cap.max_requests_per_s), (case.name, prompt, ttft)
                assert not within(cap.max_requests_per_s * (1 + 2e-4)), (
                    case.name,
                    prompt,
                    ttft,
                )
                checked += 1
    assert checked >= 20, checked


# ---------------------------------------------------------------- Mélange's published example

MELANGE_CATALOG = """# source: Mélange example prices (tyler-griggs/melange-release melange/config/example.json @ebba701)
# as_of: 2024-04-22
provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes
aws,test-1,melange-a10g,A10G,1,4,16,24,pcie,32,none,0,1.01,,,,,
aws,test-1,melange-a100,A100-80GB,1,12,85,80,pcie,32,none,0,3.67,,,,,
"""


def melange_scenario(slices: int) -> str:
    """Mélange's example.json: two input x two output size buckets, shares [[0.2, 0.1], [0.5, 0.2]], 30
    requests/s, profiled max requests/s per GPU A10G [[2, 1], [5, 2]] and A100 [[20, 20], [40, 20]]."""
    sizes = [
        (100, 100),
        (100, 1000),
        (1000, 100),
        (1000, 1000),
    ]  # abstract buckets: (input i, output j)
    shares = [0.2, 0.1, 0.5, 0.2]
    tputs = {"A10G": [2, 1, 5, 2], "A100-80GB": [20, 20, 40, 20]}
    buckets = "\n".join(
        f"        - {{prompt_tokens: {p}, output_tokens: {o}, share: {s}}}"
        for (p, o), s in zip(sizes, shares)
    )
    measured = "\n".join(
        f"      - {{gpu: {g}, prompt_tokens: {p}, output_tokens: {o}, max_requests_per_s: {t}}}"
        for g, ts in tputs.items()
        for (p, o), t in zip(sizes, ts)
    )
    return f"""name: melange-example
catalogs: [melange.csv]
workloads:
  - name: melange
    kind: serving
    traffic:
      requests_per_s: 30
      slices: {slices}
      buckets:
{buckets}
    slo: {{ttft: 1s, tpot: 120ms}}
    measured:
{measured}
    duration: 24h
    interruption_tolerance: none
"""


@pytest.mark.parametrize(
    "slices, a10g, a100, usd_per_h",
    [
        (
            1,
            3,
            1,
            6.70,
        ),  # published: README {"A10G": 3, "A100-80GB": 1, "cost": 6.7}, with example.json's slice_factor 1
        (
            4,
            2,
            1,
            5.69,
        ),  # finer slices route part of a bucket to each type (our own enumeration of the same ILP)
    ],
)
def test_melange_published_allocation_is_reproduced(
    tmp_path, slices, a10g, a100, usd_per_h
):
    (tmp_path / "melange.csv").write_text(MELANGE_CATALOG)
    (tmp_path / "melange.yaml").write_text(melange_scenario(slices))
    out = run(
        "solve",
        str(tmp_path / "melange.yaml"),
        "--format",
        "json",
        "--no-timings",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    (report,) = plan["endpoints"]
    counts = {}
    for pool in report["periods"][0]["pools"]:
        counts[pool["gpu"]] = counts.get(pool["gpu"], 0) + pool["nodes"]
    assert counts == {"A10G": a10g, "A100-80GB": a100}
    assert report["usd_per_h"] == pytest.approx(usd_per_h, abs=0.005)
    assert plan["objective_usd"] == pytest.approx(24 * usd_per_h, abs=0.01)


# ---------------------------------------------------------------- optimality against brute force


def brute_force(options: list[dict], ep) -> float:
    """Cheapest plan by enumeration, with exact fractions (no rounded loads): nodes per option and period,
    the base of each option, and every routing of each period's slices."""
    periods, buckets = ep.rates.shape
    best = math.inf
    ranges = [range(o["most_nodes"] + 1) for o in options]
    for per_period in itertools.product(itertools.product(*ranges), repeat=periods):
        spot_used = {
            i
            for i, o in enumerate(options)
            if o["market"] == "spot" and any(p[i] for p in per_period)
        }
        if len(spot_used) > 1:
            continue
        if not ep.autoscale and any(p != per_period[0] for p in per_period):
            continue
        ok = True
        for period, nodes in enumerate(per_period):
            kept = [
                o["kept"][n] if o["market"] == "spot" else n
                for o, n in zip(options, nodes)
            ]
            ok &= _routable(options, ep, period, kept)
        if not ok:
            continue
        cost = 0.0
        for i, o in enumerate(options):
            base = min(p[i] for p in per_period)
            cost += base * o["node_usd_h"] * 24 * ep.days
            if ep.autoscale:
                cost += sum(
                    (p[i] - base) * o["node_usd_h"] * o["session_h"][k] * ep.days
                    for k, p in enumerate(per_period)
                )
        best = min(best, cost)
    return best


def _routable(options, ep, period, kept) -> bool:
    slices = ep.slices
    for split in itertools.product(
        *[
            [
                c
                for c in itertools.product(range(slices + 1), repeat=len(options))
                if sum(c) == slices
            ]
            for _ in range(ep.rates.shape[1])
        ]
    ):
        load = [Fraction(0)] * len(options)
        feasible = True
        for bucket, counts in enumerate(split):
            for i, n in enumerate(counts):
                if n:
                    rps = options[i]["node_rps"][bucket]
                    if rps <= 0:
                        feasible = False
                        break
                    load[i] += (
                        Fraction(ep.rates[period, bucket]) * n / slices / Fraction(rps)
                    )
        if feasible and all(load[i] <= kept[i] for i in range(len(options))):
            return True
    return False


@pytest.mark.parametrize("autoscale", [False, True])
def test_endpoint_plan_is_optimal_against_brute_force(autoscale):
    options = [
        option(
            oid="small",
            node_usd_h=1.0,
            node_rps=(2.0, 0.5),
            most_nodes=3,
            session_h=(8.5, 16.5),
        ),
        option(
            oid="big",
            offer_key="aws/us-east-1/g6.12xlarge",
            gpus_per_node=4,
            node_usd_h=3.5,
            node_rps=(7.0, 3.0),
            most_nodes=2,
            session_h=(8.5, 16.5),
        ),
        option(
            oid="spot",
            offer_key="aws/us-west-2/g6.xlarge",
            market="spot",
            node_usd_h=0.4,
            node_rps=(2.0, 0.5),
            most_nodes=3,
            kept=(0, 0, 1, 2),
            session_h=(8.5, 16.5),
        ),
    ]
    ep = endpoint(
        rates=((1.0, 0.5), (5.0, 1.5)), hours=(8, 16), slices=2, autoscale=autoscale
    )
    model = build_model(
        pd.DataFrame(), Limits(), serving=(pd.DataFrame(options), {ep.name: ep})
    )
    result = solve_model(model, time_limit_s=30, workers=1)
    assert result.status == "OPTIMAL"
    assert result.objective_usd == pytest.approx(brute_force(options, ep), abs=0.02)


# ---------------------------------------------------------------- the binomial floor


def test_kept_nodes_is_the_binomial_quantile():
    away = 0.05
    for n in range(0, 12):
        k = kept_nodes(n, away, 0.999)
        # keeps k with the availability asked
        assert 1 - below_capacity(n, away, k) >= 0.999 - 1e-12
        if k < n:
            assert 1 - below_capacity(n, away, k + 1) < 0.999  # and not one more
    assert kept_nodes(5, 0.0, 0.999) == 5


def _exact_kept(n: int, away: float, availability: float, zone: float) -> int:
    """The definition in rational arithmetic: n − d for the smallest d with
    (1 − z)·P(Binomial(n, away) <= d) (+ z when d = n) >= availability (less the 1e-12 allowance)."""
    if away <= 0 and zone <= 0 or n == 0:
        return n
    a, cdf = Fraction(away), Fraction(0)
    for d in range(n + 1):
        cdf += math.comb(n, d) * a**d * (1 - a) ** (n - d)
        if (1 - Fraction(zone)) * cdf + (Fraction(zone) if d == n else 0) >= Fraction(
            availability
        ) - Fraction(1e-12):
            return n - d
    return 0


@pytest.mark.parametrize(
    "away, availability, zone",
    [
        (0.2, 0.999, 0.001),
        (0.01, 0.999, 0.001),
        (0.05, 0.9999, 0.0),
        (0.5, 0.99, 0.0),
        (0.0, 0.999, 0.0001),
        (0.3, 0.9, 0.05),
    ],
)
def test_kept_counts_are_exact_for_large_pools(away, availability, zone):
    """Pools of hundreds of nodes, where summing the binomial's terms one by one came out a node off
    (0.2 away, 271 nodes: 167 kept for the exact 166)."""
    sizes = np.array([0, 1, 2, 7, 40, 271, 285, 600])
    got = kept_counts(sizes, away, availability, zone).tolist()
    assert got == [_exact_kept(int(n), away, availability, zone) for n in sizes]
    assert [kept_nodes(int(n), away, availability, zone) for n in sizes] == got


def _counted(sizes: np.ndarray, kept: np.ndarray, n: np.ndarray) -> np.ndarray:
    """What the model counts of a pool of n nodes from an option's table: kept at a listed size; else n less
    the absences of the first listed size above (never below zero)."""
    at = np.searchsorted(sizes, n)
    return np.maximum(n - (sizes[at] - kept[at]), 0)


@pytest.mark.parametrize(
    "away, availability, zone",
    [(0.03, 0.99, 0.0), (0.0078, 0.999, 0.0005), (0.3, 0.9, 0.05), (0.07, 0.9999, 0.0)],
)
def test_spot_pool_tables_stay_small_and_never_count_more_than_a_pool_keeps(
    away, availability, zone
):
    """A table listed every pool size up to the largest (hundreds of thousands of entries for an endpoint of a
    million requests a second, and as many in CP-SAT's element constraint): now a few hundred sizes, exact up
    to EXACT_POOL_NODES, conservative by at most 1/64 of the pool above it."""
    small, small_kept = pool_table(300, away, availability, zone)
    assert small.tolist() == list(range(301))
    assert small_kept.tolist() == kept_counts(small, away, availability, zone).tolist()
    sizes, kept = pool_table(6000, away, availability, zone)
    every = np.arange(6001)
    exact = kept_counts(every, away, availability, zone)
    counted = _counted(sizes, kept, every)
    # never more than the pool keeps at the availability
    assert np.all(counted <= exact)
    exact_part = every <= pool_availability.EXACT_POOL_NODES
    assert np.array_equal(counted[exact_part], exact[exact_part])
    assert np.all(exact - counted <= every / 64 + 1)
    huge, huge_kept = pool_table(4_000_000, away, availability, zone)
    assert len(huge) < 2000 and huge[-1] == 4_000_000
    assert huge_kept[-1] == kept_nodes(4_000_000, away, availability, zone)


def _most_by_scan(need: float, away: float, availability: float, zone: float) -> int:
    """The definition: the smallest pool of want .. 4·want + 16 nodes that keeps want, else the largest."""
    want = max(1, math.ceil(need - 1e-9))
    sizes = np.arange(want, 4 * want + 17)
    enough = np.flatnonzero(kept_counts(sizes, away, availability, zone) >= want)
    return int(sizes[enough[0]]) if len(enough) else int(sizes[-1])


@pytest.mark.parametrize("need", [0.4, 3, 120.5, 171, 900, 4000])
@pytest.mark.parametrize(
    "away, availability, zone",
    [(0.0, 0.99, 0.0), (0.05, 0.999, 0.0), (0.2, 0.99, 0.005)],
)
def test_largest_pool_is_found_by_search_as_by_scanning_every_size(
    need, away, availability, zone
):
    assert pool_availability.most_nodes(
        need, away, availability, None, zone
    ) == _most_by_scan(need, away, availability, zone)
    assert pool_availability.most_nodes(need, away, availability, 7, zone) == min(
        7, _most_by_scan(need, away, availability, zone)
    )


def test_a_spot_pool_beyond_its_exact_sizes_counts_the_absences_of_the_next_listed_size():
    """A pool of 3 keeps 3; of 4 to 7 counts its size less 2; of 8 to 12, less 3: carrying 6 nodes of load
    alone takes 9 nodes (8 would count 5)."""
    spot = option(
        oid="spot", market="spot", node_usd_h=0.4, node_rps=(2.0,), most_nodes=12
    ) | {"pool_sizes": [3, 7, 12], "kept": [3, 5, 9]}
    model = build_model(
        pd.DataFrame(),
        Limits(),
        serving=(pd.DataFrame([spot]), {"chat": endpoint(rates=((12.0,),))}),
    )
    result = solve_model(model, time_limit_s=30, workers=1)
    assert result.status == "OPTIMAL"
    (row,) = result.serving.itertuples(index=False)
    assert (row.nodes, row.kept) == (9, 6)


MILLION_CATALOG = """# source: test
# as_of: 2025-07-01
provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes
aws,test-1,big-l4,L4,1,4,16,24,pcie,32,none,0,1.00,0.40,0.05,,,
aws,test-1,big-a100,A100-80GB,1,12,85,80,pcie,32,none,0,3.00,1.20,0.05,,,
"""
MILLION = """name: million
catalogs: [million.csv]
workloads:
  - name: chat
    kind: serving
    traffic:
      requests_per_s: 1000000
      buckets:
        - {prompt_tokens: 512, output_tokens: 256}
    slo: {ttft: 1s, tpot: 100ms}
    measured:
      - {gpu: L4, prompt_tokens: 512, output_tokens: 256, max_requests_per_s: 7}
      - {gpu: A100-80GB, prompt_tokens: 512, output_tokens: 256, max_requests_per_s: 25}
    availability: 0.99
    duration: 24h
overrides:
  - {spot_correlation: 0, spot_capacity_wait: 0}
"""


@pytest.mark.slow  # 4 s: a scale test
def test_an_endpoint_of_a_million_requests_a_second_plans_in_bounded_memory(tmp_path):
    """Pools of 40,000 spot or 140,000 on-demand nodes: the options held a table entry per node count and
    CP-SAT an element constraint as long, and the cost times the tie-break left 64-bit integers (MODEL_INVALID
    after half a minute and 1.3 GB here; 3.5 GB at 1e5 requests a second of a shipped model, out of memory at
    1e6). Now it plans within 2 GB of address space, the spot pool counting no more than it keeps."""
    import resource

    (tmp_path / "million.csv").write_text(MILLION_CATALOG)
    (tmp_path / "million.yaml").write_text(MILLION)

    def two_gib() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    out = subprocess.run(
        [*PLANNER, "solve", "million.yaml", "--format", "json", "--no-timings"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        preexec_fn=two_gib,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["status"] == "OPTIMAL"
    (e,) = plan["endpoints"]
    (pool,) = e["periods"][0]["pools"]
    assert pool["market"] == "spot" and pool["nodes"] > 40_000
    assert (
        pool["load_nodes"]
        <= pool["nodes_counted"]
        <= kept_nodes(pool["nodes"], pool["away_share"], 0.99)
    )
    assert e["below_capacity_share"] <= 0.01
    from planner.load.scenario import load_scenario
    from planner.solve.checker import check_plan

    # its binomial tail summed term by term passed floats' range on a pool of 40,000 nodes
    assert check_plan(load_scenario(tmp_path / "million.yaml"), plan) == []


def test_a_tie_break_that_would_overflow_follows_the_cost():
    """Cost x tie-break past 2^60: the cost is minimised alone, then the tie-break among plans of that cost,
    so of two options of one price the one first in (price, name) order serves."""
    from planner.solve.model import OBJECTIVE_LIMIT

    options = [
        option(
            oid=name,
            offer_key=f"aws/us-east-1/{name}",
            node_usd_h=1.0,
            most_nodes=2_000_000,
        )
        for name in ("b-node", "a-node")
    ]
    traffic = {"chat": endpoint(rates=((1_000_000.0,),), days=30.0)}
    model = build_model(
        pd.DataFrame(), Limits(), serving=(pd.DataFrame(options), traffic)
    )
    assert model.later_ties and model.tie_scale == 1 and model.model.validate() == ""
    result = solve_model(model, time_limit_s=30, workers=1)
    assert result.status == "OPTIMAL" and result.objective_usd == pytest.approx(
        500_000 * 24 * 30
    )
    (row,) = result.serving.itertuples(index=False)
    assert row.oid == "a-node" and row.nodes == 500_000
    assert OBJECTIVE_LIMIT < 2**62


@pytest.mark.slow  # 8 s: a scale test
def test_a_quarter_endpoint_of_ten_million_requests_a_second_beside_optional_runs_plans(
    tmp_path,
):
    """The launch quarter's endpoint at 1e7 requests a second with two optional runs of priority 1,000: each
    priority point outweighed the endpoints' cost with every option at the most nodes of all its endpoint's
    options together ($5.4e13), 2,000 points passed 64-bit integers and CP-SAT refused the model (MODEL_INVALID).
    Each option counted at its own most nodes the weight is 155 times smaller, and the quarter plans."""
    from conftest import SCENARIOS

    text = (SCENARIOS / "quarter-launch.yaml").read_text()
    for old, new in [
        ("requests_per_s: 150}", "requests_per_s: 10000000}"),
        ("requests_per_s: 60}", "requests_per_s: 5000000}"),
        (
            "    due: 2027-01-22\n",
            "    due: 2027-01-22\n    required: false\n    priority: 1000\n",
        ),
        (
            "    due: 2027-02-26\n",
            "    due: 2027-02-26\n    required: false\n    priority: 1000\n",
        ),
        ("allow: {gpus: [H100], regions: [us-east-1", "allow: {regions: [us-east-1"),
        ("  gpu_quotas: {aws/H100: 16}", "  gpu_quotas: {}"),
    ]:
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "launch.yaml").write_text(text)
    out = subprocess.run(
        [*PLANNER, "batch", "launch.yaml", "--format", "json", "--no-timings"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["status"] == "OPTIMAL" and plan["unscheduled"] == []
    assert (
        max(p["requests_per_s"] for p in plan["endpoints"][0]["periods"]) == 10_000_000
    )


def test_priorities_that_would_pass_64_bits_are_refused_saying_how_much_fits():
    """Past the limit the quarter is refused in one line that says which sum of priorities fits; at that sum the
    objective's terms (the costs below one weight, the priorities at a weight each) stay within OBJECTIVE_LIMIT."""
    from planner.batch.model import PrioritiesTooHeavy, _check_priorities_fit
    from planner.solve.model import OBJECTIVE_LIMIT

    weight = 34_667_959_169_310  # the quarter above with 42 optional runs (its endpoint at the most nodes, in cents)
    fits = OBJECTIVE_LIMIT // weight - 1
    _check_priorities_fit(weight, fits)
    assert weight * (fits + 1) < OBJECTIVE_LIMIT
    with pytest.raises(
        PrioritiesTooHeavy, match=f"add up to {fits + 1:,} .* at most {fits:,} fit"
    ):
        _check_priorities_fit(weight, fits + 1)
    with pytest.raises(PrioritiesTooHeavy, match="make the optional runs required"):
        _check_priorities_fit(OBJECTIVE_LIMIT, 1)


# ---------------------------------------------------------------- end to end


@pytest.mark.parametrize("name", ["serving-chat", "serving-70b", "serving-team"])
def test_shipped_serving_examples_plan_with_every_reported_figure(name):
    out = run("solve", f"scenarios/{name}.yaml", "--format", "json", "--no-timings")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["status"] == "OPTIMAL"
    for e in plan["endpoints"]:
        assert e["below_capacity_share"] <= 1 - e["availability"] + 1e-12
        assert e["usd_per_month"] == pytest.approx(e["usd_per_h"] * 730)
        assert e["peak"]["tpot_s"] is not None
        for period in e["periods"]:
            for b in range(len(period["pools"][0]["share_of_requests"])):
                assert sum(
                    p["share_of_requests"][b] for p in period["pools"]
                ) == pytest.approx(1.0)
    total = sum(e["cost_usd"] for e in plan["endpoints"]) + sum(
        a["expected"]["cost_usd"] for a in plan["assignments"]
    )
    assert plan["objective_usd"] == pytest.approx(total, abs=0.01)
    again = run("solve", f"scenarios/{name}.yaml", "--format", "json", "--no-timings")
    assert again.stdout == out.stdout  # the same input gives the same plan


def test_team_endpoint_and_fine_tunes_share_one_quota():
    plan = json.loads(
        run(
            "solve", "scenarios/serving-team.yaml", "--format", "json", "--no-timings"
        ).stdout
    )
    jobs = sum(a["gpus"] for a in plan["assignments"])
    endpoint_gpus = max(
        sum(p["nodes"] * 1 for p in period["pools"])
        for period in plan["endpoints"][0]["periods"]
    )
    assert jobs + endpoint_gpus <= 16


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            "traffic: {requests_per_s: 5}",
            "needs `traffic` (requests_per_s or a profile) and `slo`",
        ),
        (
            "traffic: {requests_per_s: 5}\n    slo: {ttft: 5 parsecs, tpot: 50ms}",
            "unknown time unit 'parsecs'",
        ),
        (
            'traffic: {profile: [{hours: "0-8", requests_per_s: 5}]}\n    slo: {ttft: 1s, tpot: 50ms}',
            "must cover 0-24 once",
        ),
        (
            "traffic: {requests_per_s: 5, buckets: [{prompt_tokens: 10, output_tokens: 10, share: 0.5}]}\n"
            "    slo: {ttft: 1s, tpot: 50ms}",
            "bucket shares add up to 0.5, expected 1",
        ),
        (
            'traffic: {profile: [{hours: "8-2", requests_per_s: 5}]}\n    slo: {ttft: 1s, tpot: 50ms}',
            "expected START-END with 0 <= START < END <= 24",
        ),
        (
            "traffic: {requests_per_s: 5}\n    slo: {ttft: 500, tpot: 50ms}",
            "a latency needs its unit: write 500ms or 500s",
        ),
        (
            'traffic: {requests_per_s: 5}\n    slo: {ttft: 1s, tpot: "0.05"}',
            "a latency needs its unit",
        ),
        (
            "traffic: {requests_per_s: 5}\n    slo: {quantile: 0.9}",
            "give a latency target: ttft, tpot or both",
        ),
    ],
)
def test_bad_serving_fields_get_one_located_line(tmp_path, body, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"name: bad\nworkloads:\n  - name: chat\n    kind: serving\n    model: llama-3.1-8b\n    {body}\n"
    )
    out = run("solve", str(path))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], (
        out.stderr
    )


def test_replay_agrees_with_the_analytic_share_below_capacity():
    from planner.economics.endpoint_sim import PeriodPlan, Pool, replay

    nodes, need, lam, replace_h = 3, 2.0, 0.5, 0.25
    away = lam * replace_h / (1 + lam * replace_h)
    analytic = below_capacity(nodes, away, need)
    pool = Pool(nodes, need, lam, replace_h, (10.0,), (1.0,))
    result = replay([PeriodPlan(24.0, (5.0,), (pool,))], days=200, seed=1)
    print(
        f"below capacity: simulated {result.below_capacity_share:.4f}, analytic {analytic:.4f}"
    )
    assert result.below_capacity_share == pytest.approx(analytic, rel=0.15)
    assert 0.9 < result.within_slo_share < 1.0


def test_simulate_replays_a_serving_scenario():
    out = run(
        "simulate", "scenarios/serving-team.yaml", "--trials", "200", "--format", "json"
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    (replay,) = data["endpoints"]
    assert replay["workload"] == "support-bot" and replay["days"] == 7
    assert 0 <= replay["below_capacity_share"]["simulated"] < 0.01
    assert {w["workload"] for w in data["workloads"]} == {"tune-8b", "tune-70b"}


INDEPENDENT_SPOT = (
    "overrides:\n  - {provider: aws, spot_correlation: 0, spot_capacity_wait: 0h}\n"
)
"""Spot preempted node by node and replaced at once (the model before the trace fit): the endpoint takes a
spot pool, so the checks of spot pools have one to check."""


def test_the_checker_catches_spot_nodes_counted_in_full_and_unrouted_requests(tmp_path):
    from planner.load.scenario import load_scenario
    from planner.solve.checker import check_plan

    path = tmp_path / "independent.yaml"
    path.write_text(
        (ROOT / "scenarios" / "serving-team.yaml").read_text() + INDEPENDENT_SPOT
    )
    loaded = load_scenario(path)
    plan = json.loads(
        run("solve", str(path), "--format", "json", "--no-timings").stdout
    )
    assert check_plan(loaded, plan) == []
    pool = plan["endpoints"][0]["periods"][0]["pools"][0]
    assert pool["market"] == "spot" and pool["nodes_counted"] < pool["nodes"]
    pool["nodes_counted"] = pool["nodes"]
    pool["share_of_requests"][0] = 0.5
    problems = check_plan(loaded, plan)
    assert any("more than it keeps" in p for p in problems) and any(
        "routed 0.5000" in p for p in problems
    )


def test_endpoint_alone_over_its_quota_is_explained_not_a_traceback(tmp_path):
    """An endpoint the quota cannot hold: INFEASIBLE (exit 1) with the binding quota named."""
    path = tmp_path / "tight.yaml"
    path.write_text(
        """\
name: tight
catalogs: [aws]
workloads:
  - name: chat
    kind: serving
    model: llama-3.1-8b
    traffic: {requests_per_s: 40, buckets: [{prompt_tokens: 1024, output_tokens: 256}]}
    slo: {ttft: 800ms, tpot: 40ms}
    allow: {gpus: [H100], regions: [us-east-1], instance_types: [p5.4xlarge]}
    duration: 36h
constraints:
  gpu_quotas: {aws/H100: 1}
""",
        encoding="utf-8",
    )
    result = run("solve", str(path), "--format", "json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "INFEASIBLE"
    assert [r["workload"] for r in data["infeasible"]] == ["chat"]
    assert "quota aws/H100 (1 GPUs" in data["infeasible"][0]["reason"]


def test_an_slo_may_name_one_target_and_both_allow_the_least_of_each_alone(tmp_path):
    """`slo: {ttft: 60ms}` holds TTFT only: a replica's capacity under both targets is the lesser of its
    capacities under each alone."""
    from planner.candidates.estimate_tables import capacity_rows
    from planner.load.scenario import load_scenario

    def capacities(slo: str) -> dict:
        path = tmp_path / "one.yaml"
        path.write_text(
            "name: one\ncatalogs: [aws]\nworkloads:\n  - name: chat\n    kind: serving\n"
            f"    model: llama-3.1-8b\n    traffic: {{requests_per_s: 5}}\n    slo: {slo}\n"
        )
        loaded = load_scenario(path)
        return {
            (r["gpu"], r["tensor_parallel"]): r["max_requests_per_s"]
            for r in capacity_rows(loaded.scenario, loaded.catalog, None, ("H100",))
        }

    both, ttft, tpot = (
        capacities("{ttft: 60ms, tpot: 20ms}"),
        capacities("{ttft: 60ms}"),
        capacities("{tpot: 20ms}"),
    )
    assert both.keys() == ttft.keys() == tpot.keys() and len(both) == 4
    for key in both:
        assert both[key] == pytest.approx(min(ttft[key], tpot[key]), rel=1e-3)
    assert any(tpot[k] > both[k] * 1.1 for k in both)  # without the TTFT target, more


def _chat_h100_tp4():
    """serving-chat's workload and its replica on an H100 node at TP 4."""
    from planner.candidates.endpoints import replica_of
    from planner.load.scenario import load_scenario

    loaded = load_scenario(ROOT / "scenarios" / "serving-chat.yaml")
    [workload] = [w for w in loaded.scenario.workloads if w.name == "chat-8b"]
    offer = next(
        o
        for o in loaded.catalog.offers.itertuples(index=False)
        if o.gpu == "H100-SXM" and o.gpus_per_node >= 4
    )
    return workload, replica_of(
        workload, loaded.catalog, offer, 4, loaded.scenario.defaults.vram_headroom
    )


def test_a_secant_jump_past_every_steady_state_does_not_make_the_replica_overloaded():
    """The mean step is a fixed point, found by secant steps from the idle step. On serving-chat's H100 at TP 4
    (2,048 prompt and 512 output tokens) near 30.3 requests/s the secant jumped from 17 ms to 126 ms, a decode
    batch of 1,962 whose steps reach no steady state, and the replica was called overloaded, though stepping up
    from idle meets the fixed point near 44 ms with a steady state at every step on the way. Wherever that
    walk finds the fixed point, `latency` finds it too, between the walk's last two steps."""
    from planner.physics import batching, serving

    workload, replica = _chat_h100_tp4()
    cost = batching.step_cost(replica)
    scheduler = batching.default_scheduler(replica.gpu.name, replica.vram_gib)
    flops = cost.prompt_flops(0, 2048)
    found = 0
    for rate in np.linspace(30.0, 30.45, 10):
        step, walk = float(cost.seconds(1, 2048, 0, 0.0)), []
        while True:  # up from idle by 0.5 ms while the gap (mean - step) stays positive
            state = serving._steps(cost, scheduler, 2048, 512, rate, flops, step)
            if state is None or state.mean <= step:
                break
            walk.append(step)
            step += 5e-4
        if state is None:
            continue  # no steady state on the way up: overloaded either way
        found += 1
        at = serving.latency(replica, 2048, 512, float(rate), workload.slo.quantile)
        assert at is not None, rate
        assert walk[-1] <= at.tpot_s <= step, (rate, walk[-1], at.tpot_s, step)
    assert found >= 6, found


def test_the_prompts_per_step_chain_is_followed_as_far_as_its_law_reaches():
    """A step's prompts follow j -> Poisson(rate x L(j)), L(j) a step carrying j prompts, followed to eight
    spreads past its mean. On serving-chat's H100 at TP 4 (2,048 prompt and 512 output tokens, 30.5 requests/s)
    the first prompt hides under the memory-bound decode step (it adds 4 ms) while each after it adds its
    compute (22 ms): the chain was cut where that first prompt and a Poisson's spread said, its tail held 1e-6 of
    the law, and steps such as 41, 54 and 56 ms were called overloaded between steady ones (the capacity was
    labelled `throughput` at a TPOT of 49.96 ms against a 50 ms target). Every mean step there matches the same
    chain followed to 200 prompts and solved by power iteration."""
    from planner.physics import batching, serving

    _, replica = _chat_h100_tp4()
    cost = batching.step_cost(replica)
    scheduler = batching.default_scheduler(replica.gpu.name, replica.vram_gib)
    prompt, output, rate = 2048, 512, 30.5
    flops = cost.prompt_flops(0, prompt)
    for step in np.arange(0.030, 0.0605, 0.001):
        decodes = 1 + rate * step * (output - 1)
        context = decodes * (prompt + output / 2)
        counts = np.arange(201, dtype=float)
        lengths = cost.seconds(decodes, context, counts * prompt, counts * flops)
        means = rate * lengths
        moves = stats.poisson.pmf(counts[None, :], means[:, None])
        moves[:, -1] += 1 - moves.sum(axis=1)  # the tail folded into the last state
        law = np.zeros(201)
        law[0] = 1.0
        for _ in range(2000):  # power iteration on the long chain
            law = law @ moves
        assert law[-20:].sum() < 1e-12  # the long chain's own tail is empty
        state = serving._steps(cost, scheduler, prompt, output, rate, flops, step)
        assert state is not None, step
        assert state.mean == pytest.approx(float(law @ lengths), rel=1e-6), step
    capacity = serving.capacity(replica, prompt, output, 0.5, 0.05, 0.9)
    assert capacity.limit == "tpot"
    assert capacity.at_max.tpot_s == pytest.approx(0.05, rel=2e-3)


def test_a_replica_is_steady_at_every_load_below_one_where_it_is_steady():
    """Latency grows with load, and a replica that keeps up at a rate keeps up below it. serving-rag's MI300X at
    TP 4 (3,072 prompt and 384 output tokens) was called overloaded at 9.36-9.40 and 9.44 requests/s and steady
    at 9.42: where each prompt's compute nearly fills a step (rho 0.78) and few arrive per idle step, the chain's
    law is skewed, eight spreads past its mean still held 1e-6 of it, and the law was cut there. A law whose tail
    holds mass where it is cut is now followed twice as far."""
    from planner.candidates.endpoints import replica_of
    from planner.load.scenario import load_scenario
    from planner.physics import serving

    loaded = load_scenario(ROOT / "scenarios" / "serving-rag.yaml")
    [workload] = loaded.scenario.workloads
    offer = next(
        o
        for o in loaded.catalog.offers.itertuples(index=False)
        if o.gpu == "MI300X" and o.gpus_per_node >= 4
    )
    replica = replica_of(
        workload, loaded.catalog, offer, 4, loaded.scenario.defaults.vram_headroom
    )
    at = [
        serving.latency(replica, 3072, 384, rate, 0.9)
        for rate in np.linspace(9.2, 9.8, 31)
    ]
    assert all(a is not None for a in at)
    assert all(b.tpot_s > a.tpot_s and b.ttft_s > a.ttft_s for a, b in zip(at, at[1:]))
    capacity = serving.capacity(replica, 3072, 384, 1.0, 0.05, 0.9)
    assert capacity.limit == "tpot"
    assert capacity.at_max.tpot_s == pytest.approx(0.05, rel=2e-3)
