"""An endpoint an operator can run: at most `max_pools` pools and `max_providers` providers over all its periods
(defaults 2 and 1), and `headroom` for bursts. The plan at one provider is the best of each provider alone, found
by solving each apart."""

from __future__ import annotations

import json

import pytest
import yaml

from planner.load.scenario import load_scenario
from planner.solve.checker import check_plan

SPREAD = {
    "name": "spread",
    "catalogs": ["aws", "gcp", "lambda"],
    "constraints": {
        "gpu_quotas": {"lambda": 1}
    },  # one cheap GH200 at Lambda, the rest elsewhere
    "workloads": [
        {
            "name": "chat-8b",
            "kind": "serving",
            "model": "llama-3.1-8b",
            "traffic": {
                "profile": [
                    {"hours": "0-7", "requests_per_s": 20},
                    {"hours": "7-19", "requests_per_s": 120},
                    {"hours": "19-24", "requests_per_s": 60},
                ],
                "buckets": [
                    {"prompt_tokens": 512, "output_tokens": 256, "share": 0.7},
                    {"prompt_tokens": 2048, "output_tokens": 512, "share": 0.3},
                ],
            },
            "slo": {"ttft": "500ms", "tpot": "50ms", "quantile": 0.9},
            "availability": 0.999,
            "autoscale": True,
            "duration": "30d",
        }
    ],
}


def _plan(run, tmp_path, name: str = "spread", **endpoint) -> tuple[dict, object]:
    scenario = json.loads(json.dumps(SPREAD))
    scenario["workloads"][0].update(endpoint)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run("solve", path, "--format", "json", "--workers", "1")
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout), load_scenario(path)


def _spread(plan: dict) -> tuple[set, set]:
    (e,) = plan["endpoints"]
    pools = {
        (
            p["provider"],
            p["region"],
            p["instance_type"],
            p["market"],
            p["tensor_parallel"],
        )
        for period in e["periods"]
        for p in period["pools"]
        if p["nodes"]
    }
    return pools, {pool[0] for pool in pools}


def test_the_default_endpoint_runs_two_pools_at_one_provider_the_best_of_each_provider_alone(
    run, tmp_path
):
    plan, loaded = _plan(run, tmp_path)
    pools, providers = _spread(plan)
    assert plan["status"] == "OPTIMAL" and len(pools) <= 2 and len(providers) == 1
    assert check_plan(loaded, plan) == []
    alone = {}
    for provider in ("aws", "gcp", "lambda"):
        each, _ = _plan(run, tmp_path, provider, allow={"providers": [provider]})
        if each["status"] == "OPTIMAL":
            alone[provider] = each["objective_usd"]
    print(f"one provider: ${plan['objective_usd']:,.2f}; each alone: {alone}")
    assert plan["objective_usd"] == pytest.approx(min(alone.values()), abs=0.01)


def test_a_wider_spread_where_allowed_and_the_checker_holds_the_limits(run, tmp_path):
    narrow, loaded = _plan(run, tmp_path)
    wide, _ = _plan(run, tmp_path, "wide", max_pools=10, max_providers=5)
    pools, providers = _spread(wide)
    assert len(pools) > 2 and len(providers) > 1
    # Lambda's one GH200 beside AWS is cheaper
    assert wide["objective_usd"] < narrow["objective_usd"]
    problems = check_plan(loaded, wide)  # the wide plan against the default limits
    assert any(f"{len(pools)} pools, max_pools is 2" in p for p in problems)
    assert any(f"{len(providers)} providers, max_providers is 1" in p for p in problems)
    one, _ = _plan(run, tmp_path, "one", max_pools=1)
    assert len(_spread(one)[0]) == 1 and one["objective_usd"] >= narrow["objective_usd"]


def test_max_pools_is_for_endpoints(run, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: j\ncatalogs: [aws]\nworkloads:\n  - name: t\n    kind: training\n"
        "    memory: {per_gpu: 20GiB}\n    work: {gpu_hours: 10, reference_gpu: A100-80GB}\n"
        "    max_pools: 3\n"
    )
    result = run("solve", path)
    assert (
        result.exit_code == 2
        and "headroom, max_pools, max_providers and pool_usd_per_h are for kind: serving"
        in result.stderr
    )


def test_headroom_keeps_a_share_of_every_replica_free_for_bursts(run, tmp_path):
    plain, _ = _plan(run, tmp_path)
    roomy, loaded = _plan(run, tmp_path, "roomy", headroom="30%")
    assert check_plan(loaded, roomy) == []

    def carried(plan):
        return {
            (p["instance_type"], p["tensor_parallel"], p["market"]): p[
                "node_requests_per_s"
            ]
            for period in plan["endpoints"][0]["periods"]
            for p in period["pools"]
        }

    both = set(carried(plain)) & set(carried(roomy))
    assert both
    for pool in both:
        assert carried(roomy)[pool] == pytest.approx(
            [0.7 * r for r in carried(plain)[pool]]
        )
    assert roomy["objective_usd"] > plain["objective_usd"]


@pytest.mark.parametrize(
    "quotas", [{"lambda": 1}, {}], ids=["lambda-quota", "no-quota"]
)
def test_one_search_per_provider_finds_the_optimum_of_the_whole_model(tmp_path, quotas):
    """The split is exact: the whole model (every provider's options at once, one CP-SAT search to proof)
    has the same optimal cost."""
    from planner.candidates.generate import generate
    from planner.candidates.limits import limits_of
    from planner.solve.cpsat_search import search
    from planner.solve.model import build_model
    from planner.solve.search import solve_model

    scenario = json.loads(json.dumps(SPREAD)) | {"constraints": {"gpu_quotas": quotas}}
    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(scenario))
    loaded = load_scenario(path)
    found = generate(loaded.scenario, loaded.catalog)
    assert found.endpoints["provider"].nunique() == 3
    plan = build_model(
        found.pruned,
        limits_of(loaded.scenario),
        serving=(found.endpoints, found.traffic),
    )
    split = solve_model(plan, 60.0, 1)
    whole = search(plan.model, plan.pick, None, 60.0, 1, 0, None, serving=plan.serving)
    assert split.status == whole.status == "OPTIMAL"
    assert split.objective_usd == pytest.approx(
        whole.serving["cost_usd"].sum(), abs=0.01
    )
    assert (
        found.endpoints["oid"].iloc[split.serving["option"]].to_numpy()
        == split.serving["oid"].to_numpy()
    ).all()


def test_a_priced_pool_is_kept_only_where_it_saves_more_than_it_costs(run, tmp_path):
    """With `pool_usd_per_h` c, the optimum is min over k of (the optimum on at most k pools, unpriced) + k·c·hours:
    each plan of j pools costs its nodes plus j pools, and the best on at most k pools uses at most k."""
    wide = dict(max_pools=6, max_providers=3)
    by_pools = {}
    for k in range(1, 7):
        plan, _ = _plan(run, tmp_path, f"k{k}", **{**wide, "max_pools": k})
        assert plan["status"] == "OPTIMAL"
        by_pools[k] = (plan["objective_usd"], len(_spread(plan)[0]))
    # spreading saves, unpriced
    assert by_pools[1][0] > by_pools[6][0] and by_pools[6][1] > 2
    hours, used = 30 * 24, []
    for price in (0.05, 0.5, 5.0):
        priced, loaded = _plan(
            run, tmp_path, f"priced{price}", **wide, pool_usd_per_h=price
        )
        assert priced["status"] == "OPTIMAL" and check_plan(loaded, priced) == []
        best = min(cost + used * price * hours for cost, used in by_pools.values())
        pools = len(_spread(priced)[0])
        (e,) = priced["endpoints"]
        assert e["operating_usd"] == pytest.approx(pools * price * hours)
        assert priced["objective_usd"] == pytest.approx(best, abs=0.02), (
            price,
            by_pools,
        )
        used.append(pools)
    # dearer pools, fewer of them
    assert used == sorted(used, reverse=True) and used[0] > used[-1]


def test_the_checker_recounts_the_pools_operating_cost(run, tmp_path):
    plan, loaded = _plan(run, tmp_path, "priced", pool_usd_per_h=1.0)
    assert check_plan(loaded, plan) == []
    plan["endpoints"][0]["operating_usd"] += 1.0
    assert any("operating_usd" in p for p in check_plan(loaded, plan))


def test_a_provider_searched_after_a_cheaper_one_keeps_only_plans_as_cheap(tmp_path):
    """Each provider's search after the first keeps only plans no dearer than the best so far, whatever their
    tie-break: the best provider's own model keeps its optimum under a cutoff at that cost and has no plan
    under one 0.1 % below; the split's plan is the cheapest of the providers searched alone."""
    from planner.candidates.generate import generate
    from planner.candidates.limits import limits_of
    from planner.solve import endpoint_search
    from planner.solve.model import build_model
    from planner.solve.outcome import Clock
    from planner.solve.search import solve_model

    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(SPREAD))
    loaded = load_scenario(path)
    found = generate(loaded.scenario, loaded.catalog)
    limits = limits_of(loaded.scenario)

    def alone(provider, cutoff=None):
        options = found.endpoints[found.endpoints["provider"] == provider]
        part = build_model(found.pruned, limits, serving=(options, found.traffic))
        if cutoff is not None:
            endpoint_search._no_dearer_than(part.constrained(), cutoff)
        return endpoint_search.solve_with_endpoints(part, Clock(60.0), 1, 0, None, None)

    each = {p: alone(p) for p in sorted(found.endpoints["provider"].unique())}
    # lambda alone cannot carry the traffic
    each = {p: r for p, r in each.items() if r.status != "INFEASIBLE"}
    assert len(each) >= 2 and all(r.status == "OPTIMAL" for r in each.values())
    cheapest = min(each, key=lambda p: (round(each[p].objective_usd, 2), p))
    usd = each[cheapest].objective_usd
    kept = alone(cheapest, usd)
    assert kept.status == "OPTIMAL" and kept.objective_usd == pytest.approx(
        usd, abs=0.005
    )
    # its terms' rounding allows a little above the cutoff, never a plan far below the optimum
    assert alone(cheapest, usd * 0.999).status == "INFEASIBLE"
    split = solve_model(
        build_model(found.pruned, limits, serving=(found.endpoints, found.traffic)),
        60.0,
        1,
    )
    assert split.status == "OPTIMAL"
    assert split.objective_usd == pytest.approx(usd, abs=0.005)
    assert set(found.endpoints["provider"].iloc[split.serving["option"]]) == {cheapest}


@pytest.mark.parametrize("source", ["split", "serving-rag"])
def test_a_provider_whose_floor_is_above_the_best_so_far_is_not_searched(
    source, tmp_path, monkeypatch
):
    """`serving.floor_usd` is a lower bound on each provider's own optimum (searched alone, to proof), and the
    split skips the providers it puts above the best plan so far: the same plan as searching every one."""
    from conftest import SCENARIOS

    from planner.candidates.generate import generate
    from planner.candidates.limits import limits_of
    from planner.report.solve import plan_json
    from planner.solve import endpoint_search, serving
    from planner.solve.model import build_model
    from planner.solve.outcome import Clock
    from planner.solve.pipeline import make_plan

    path = tmp_path / "split.yaml"
    if source == "split":
        path.write_text(yaml.safe_dump(SPREAD))
    else:
        path = SCENARIOS / f"{source}.yaml"
    loaded = load_scenario(path)
    found = generate(loaded.scenario, loaded.catalog)
    limits = limits_of(loaded.scenario)
    for provider in sorted(found.endpoints["provider"].unique()):
        options = found.endpoints[found.endpoints["provider"] == provider]
        floor = serving.floor_usd(options, found.traffic)
        part = build_model(found.pruned, limits, serving=(options, found.traffic))
        alone = endpoint_search.solve_with_endpoints(
            part, Clock(60.0), 1, 0, None, None
        )
        assert alone.status in ("OPTIMAL", "INFEASIBLE"), provider
        if alone.status == "OPTIMAL":
            assert floor <= alone.objective_usd, (provider, floor, alone.objective_usd)

    def report() -> str:
        plan = make_plan(load_scenario(path))
        return json.dumps(plan_json(plan, timings=False), default=float)

    skipped = []
    floor_of = serving.floor_usd
    monkeypatch.setattr(
        endpoint_search,
        "floor_usd",
        lambda *a: skipped.append(floor_of(*a)) or skipped[-1],
    )
    pruned = report()
    monkeypatch.setattr(endpoint_search, "floor_usd", lambda *a: 0.0)
    assert pruned == report()
    if (
        source == "serving-rag"
    ):  # twelve providers: most are dearer for sure than the first ones searched
        assert len(skipped) >= 6, skipped
