"""`planner solve` end to end: CP-SAT against brute force, every plan through the independent
checker, determinism, infeasibility explanations, sensible shipped plans, and the CLI.

Random scenarios are small (2-4 workloads on a few Lambda/RunPod regions and GPUs, stated
memory and reference GPU-hours) so the cartesian product of candidates can be enumerated.
Limits are derived from each scenario's unconstrained optimum so that they bind often.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import subprocess
import sys
from functools import cache, lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SCENARIOS, scenario_files

from planner.candidates.generate import RUNNER_UPS, generate
from planner.load.catalog import load_catalog
from planner.load.scenario import LoadedScenario, load_scenario
from planner.report.solve import plan_json
from planner.schema.scenario import Scenario
from planner.solve.checker import check_plan
from planner.solve.pipeline import make_plan, runner_ups

SOLVED = ("OPTIMAL", "FEASIBLE")
SEEDS = range(48)
MAX_PRODUCT = 400_000
HALF_CENT = 0.005


def as_json(plan) -> dict:
    """The contract exactly as `--format json` writes it (numpy scalars become plain numbers)."""
    return json.loads(json.dumps(plan_json(plan), default=lambda v: v.item()))


def without_timing(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "solve_report"}


# ---------------------------------------------------------------- random scenarios

REGIONS = (
    "us-east-1",
    "us-west-1",
    "CA",
    "US",
)  # two Lambda regions, two RunPod regions
GPUS = (
    "A100-80GB",
    "H100-SXM",
    "L40S",
    "RTXA6000",
    "A10",
    "RTX4090",
    "A100-40GB",
    "H100-PCIe",
    "A40",
    "L40",
)


@lru_cache(maxsize=1)
def small_catalog():
    return load_catalog(["lambda", "runpod"])


def random_workload(rng: random.Random, number: int) -> dict:
    low = rng.choice((1, 1, 2, 4))
    workload = {
        "name": f"w{number}",
        "kind": rng.choice(("training", "fine_tuning", "batch_inference")),
        "work": {
            "gpu_hours": round(rng.uniform(1, 60), 1),
            "reference_gpu": "A100-80GB",
        },
        "gpus": {"min": low, "max": low * rng.choice((1, 2, 4))},
        "interruption_tolerance": rng.choice(
            ("none", "checkpointed", "checkpointed", "stateless")
        ),
        # a fixed cadence: `every: auto` optimises τ per candidate, too slow for 48 scenarios (the
        # shipped team-quarter-mix keeps it covered)
        "checkpoint": {"every": rng.choice(("30m", "1h", "2h"))},
        "allow": {
            "regions": rng.sample(REGIONS, rng.randint(1, 3)),
            "gpus": rng.sample(GPUS, rng.randint(2, 4)),
        },
    }
    if rng.random() < 0.6:
        workload["memory"] = {"per_gpu": round(rng.uniform(6, 45), 1)}
    else:
        workload["memory"] = {
            "model_states": round(rng.uniform(20, 150)),
            "activations": round(rng.uniform(1, 6)),
        }
    if rng.random() < 0.4:
        per_gpu_h = workload["work"]["gpu_hours"] / workload["gpus"]["max"]
        workload["time_budget"] = round(per_gpu_h * rng.uniform(1.0, 4) + 0.5, 2)
    return workload


def loaded_for(spec: dict, catalog) -> LoadedScenario:
    return LoadedScenario(
        Path(f"{spec['name']}.yaml"), Scenario.model_validate(spec), catalog, spec
    )


def brute_force(cands: pd.DataFrame, scenario: Scenario, catalog) -> dict | None:
    """The cheapest feasible combination by enumerating every one; None when none is feasible.

    Written from the scenario's words, not from the solver's code: quotas match GPUs by name
    or family (as every GPU filter does), node limits combine the scenario's and the catalog's.
    """
    names = [w.name for w in scenario.workloads]
    parts = [cands[cands["workload"] == n].reset_index(drop=True) for n in names]
    if any(p.empty for p in parts):
        return None
    shape = [len(p) for p in parts]
    assert math.prod(shape) <= MAX_PRODUCT, f"product {shape} too large to enumerate"
    index = np.indices(shape).reshape(len(shape), -1)

    def total(values_per_workload) -> np.ndarray:
        return sum(
            np.asarray(v, dtype=float)[index[i]]
            for i, v in enumerate(values_per_workload)
        )

    cost = total([p["cost_usd"] for p in parts])
    cents = total([p["cost_cents"] for p in parts])
    ok = np.ones(cost.shape, dtype=bool)
    c = scenario.constraints
    for key, quota in c.gpu_quotas.items():
        provider, _, gpu = key.partition("/")
        use = [
            np.where(
                (p["provider"] == provider)
                & p["gpu"].map(lambda g: not gpu or catalog.gpu_matches(g, gpu)),
                p["gpus"],
                0,
            )
            for p in parts
        ]
        ok &= total(use) <= quota
    max_nodes = catalog.offers.set_index("key")["max_nodes"]
    offer_markets = set()
    for p in parts:
        for key, market in zip(p["offer_key"], p["market"]):
            offer_markets.add((key, market if c.node_limits_per_market else None))
    for key, market in offer_markets:
        caps = [
            x
            for x in (c.node_limits.get(key), max_nodes.get(key))
            if x is not None and not pd.isna(x)
        ]
        if not caps:
            continue
        use = [
            np.where(
                (p["offer_key"] == key) & ((p["market"] == market) if market else True),
                p["nodes"],
                0,
            )
            for p in parts
        ]
        ok &= total(use) <= min(caps)
    if c.budget is not None:
        ok &= cost <= c.budget
    for groups, column in ((c.same_region, "place"), (c.same_provider, "provider")):
        for group in groups:
            members = [names.index(n) for n in group]
            values = [
                parts[i].assign(place=parts[i]["provider"] + "/" + parts[i]["region"])[
                    column
                ]
                for i in members
            ]
            codes = {v: k for k, v in enumerate(sorted(set().union(*map(set, values))))}
            first = np.array([codes[v] for v in values[0]])[index[members[0]]]
            for i, v in zip(members[1:], values[1:]):
                ok &= np.array([codes[x] for x in v])[index[i]] == first
    if not ok.any():
        return None
    best = int(np.flatnonzero(ok)[np.argmin(cost[ok])])
    return {
        "cost_usd": float(cost[best]),
        "cents": int(cents[ok].min()),
        "rows": [parts[i].iloc[index[i][best]] for i in range(len(parts))],
        "all_costs": cost,
    }


def random_limits(
    rng: random.Random, spec: dict, best: dict, catalog
) -> tuple[dict, dict]:
    """Limits that cut into the unconstrained optimum `best` (and catalog max_nodes to match)."""
    rows = best["rows"]
    constraints: dict = {}
    max_nodes: dict[str, int] = {}
    kinds = rng.sample(
        (
            "quota",
            "family_quota",
            "node_limit",
            "max_nodes",
            "budget",
            "same_region",
            "same_provider",
            "per_market",
        ),
        rng.randint(1, 2),
    )
    by_provider: dict[str, int] = {}
    for r in rows:
        by_provider[r["provider"]] = by_provider.get(r["provider"], 0) + int(r["gpus"])
    if "quota" in kinds:
        provider = rng.choice(sorted(by_provider))
        constraints["gpu_quotas"] = {
            provider: max(0, by_provider[provider] - rng.choice((1, 1, 2, 4)))
        }
    if "family_quota" in kinds:
        r = rng.choice(rows)
        family = catalog.gpus[r["gpu"]].family
        used = sum(
            int(x["gpus"])
            for x in rows
            if x["provider"] == r["provider"] and x["gpu_family"] == family
        )
        constraints.setdefault("gpu_quotas", {})[f"{r['provider']}/{family}"] = max(
            0, used - rng.choice((1, 1, 2, 4))
        )
        if rng.random() < 0.5:  # a roomy provider-wide quota beside the family one
            constraints["gpu_quotas"].setdefault(
                r["provider"], by_provider[r["provider"]] + rng.randint(0, 8)
            )
    if "node_limit" in kinds or "max_nodes" in kinds or "per_market" in kinds:
        r = rng.choice(rows)
        used = sum(int(x["nodes"]) for x in rows if x["offer_key"] == r["offer_key"])
        cap = max(0 if "node_limit" in kinds else 1, used - 1)
        # the same instance type in every region: RunPod and Lambda price regions alike, so a
        # limit on one region's offer would only move the job next door at the same cost
        twins = {f"{r['provider']}/{region}/{r['instance_type']}" for region in REGIONS}
        twins &= set(catalog.offers["key"])
        if "max_nodes" in kinds:
            max_nodes.update(dict.fromkeys(twins, cap))
        else:
            constraints["node_limits"] = dict.fromkeys(sorted(twins), cap)
        constraints["node_limits_per_market"] = "per_market" in kinds
    names = [w["name"] for w in spec["workloads"]]
    if "same_region" in kinds:
        constraints["same_region"] = [rng.sample(names, 2)]
    if "same_provider" in kinds:
        constraints["same_provider"] = [rng.sample(names, rng.randint(2, len(names)))]
    if "budget" in kinds:
        # Midway between two distinct combination totals, so half-cent rounding cannot decide feasibility.
        totals = np.unique(np.round(best["all_costs"], 2))
        target = best["cost_usd"] * rng.uniform(0.98, 1.4)
        gaps = [(a + b) / 2 for a, b in zip(totals, totals[1:]) if b - a >= 0.1]
        if gaps:
            constraints["budget"] = round(
                float(min(gaps, key=lambda m: abs(m - target))), 4
            )
    return constraints, max_nodes


@cache
def random_run(seed: int) -> dict:
    """Build one random scenario, bind limits on it, and solve it every way there is."""
    rng = random.Random(seed)
    base = small_catalog()
    wanted = rng.randint(2, 4)
    spec = {
        "name": f"random-{seed}",
        "catalogs": ["lambda", "runpod"],
        "workloads": [random_workload(rng, n) for n in range(wanted + 3)],
    }
    # Every candidate of every workload, no limits involved; keep `wanted` workloads that can run
    # somewhere (and, one scenario in eight, one that cannot).
    universe_set = generate(loaded_for(spec, base).scenario, base, exhaustive=True)
    runnable = [
        w for w in spec["workloads"] if w["name"] not in universe_set.infeasible
    ]
    hopeless = [w for w in spec["workloads"] if w["name"] in universe_set.infeasible]
    keep = (
        runnable[:wanted]
        if seed % 8 or not hopeless
        else runnable[: wanted - 1] + hopeless[:1]
    )
    spec["workloads"] = keep if len(keep) >= 2 else spec["workloads"][:wanted]
    names = {w["name"] for w in spec["workloads"]}
    universe = (
        universe_set.all[universe_set.all["workload"].isin(names)]
        if not universe_set.all.empty
        else universe_set.all
    )
    free = loaded_for(spec, base)
    unconstrained = (
        brute_force(universe, free.scenario, base) if not universe.empty else None
    )
    max_nodes: dict[str, int] = {}
    if unconstrained is not None:
        spec["constraints"], max_nodes = random_limits(rng, spec, unconstrained, base)
    catalog = base
    if max_nodes:
        offers = base.offers.copy()
        offers["max_nodes"] = offers["max_nodes"].astype(object)
        for key, cap in max_nodes.items():
            offers.loc[offers["key"] == key, "max_nodes"] = cap
        catalog = dataclasses.replace(base, offers=offers)
        universe = generate(free.scenario, catalog, exhaustive=True).all
    loaded = loaded_for(spec, catalog)
    exhaustive = generate(loaded.scenario, catalog, exhaustive=True)
    plan = make_plan(loaded, time_limit_s=20.0, workers=1)
    default = plan.candidates  # make_plan's own (non-exhaustive) generation
    reference = (
        brute_force(universe, loaded.scenario, catalog) if not universe.empty else None
    )
    return {
        "spec": spec,
        "loaded": loaded,
        "plan": plan,
        "json": as_json(plan),
        "unconstrained": unconstrained,
        "reference": reference,
        "exhaustive_all": brute_force(exhaustive.all, loaded.scenario, catalog)
        if not exhaustive.infeasible
        else None,
        "exhaustive_pruned": brute_force(exhaustive.pruned, loaded.scenario, catalog)
        if not exhaustive.infeasible
        else None,
        "default_pruned": brute_force(default.pruned, loaded.scenario, catalog)
        if not default.infeasible
        else None,
    }


def _cents(result: dict | None) -> int | None:
    return None if result is None else result["cents"]


# seed 30 has gpu_quotas {runpod/L40S: 2, runpod: 12}
@pytest.mark.parametrize("seed", SEEDS)
def test_cp_sat_matches_brute_force(seed):
    run = random_run(seed)
    reference, plan = run["reference"], run["plan"]
    context = f"seed {seed}: {json.dumps(run['spec'].get('constraints', {}))}"
    if reference is None:
        assert plan.status == "INFEASIBLE", context
        assert run["json"]["infeasible"], context
        return
    assert plan.status == "OPTIMAL", context
    assert int(plan.chosen["cost_cents"].sum()) == reference["cents"], context
    n = len(run["spec"]["workloads"])
    assert (
        abs(run["json"]["objective_usd"] - reference["cost_usd"])
        <= HALF_CENT * n + HALF_CENT
    ), context


@pytest.mark.parametrize("seed", SEEDS)
def test_pruned_and_default_candidates_keep_the_optimum(seed):
    run = random_run(seed)
    want = _cents(run["reference"])
    context = f"seed {seed}: {json.dumps(run['spec'].get('constraints', {}))}"
    assert _cents(run["exhaustive_all"]) == want, context
    assert _cents(run["exhaustive_pruned"]) == want, context
    assert _cents(run["default_pruned"]) == want, context


@pytest.mark.parametrize("seed", SEEDS)
def test_runner_ups_are_those_of_exhaustive_pricing(seed):
    """The report's alternatives: screening prices enough rows that they are the cheapest kinds of all."""
    run = random_run(seed)
    plan = run["plan"]
    if plan.result is None or not plan.result.solved:
        return
    exhaustive = dataclasses.replace(
        plan,
        candidates=generate(
            run["loaded"].scenario, run["loaded"].catalog, exhaustive=True
        ),
    )
    assert runner_ups(plan, RUNNER_UPS) == runner_ups(exhaustive, RUNNER_UPS), (
        f"seed {seed}"
    )


@pytest.mark.parametrize("seed", range(0, 48, 2))
def test_candidates_without_runner_ups_keep_the_optimum(seed):
    """What a what-if point prices (`runner_ups=0`: only what may be on the Pareto front) loses no optimum."""
    run = random_run(seed)
    lean = generate(run["loaded"].scenario, run["loaded"].catalog, runner_ups=0)
    assert len(lean.all) <= len(run["plan"].candidates.all)
    found = (
        brute_force(lean.pruned, run["loaded"].scenario, run["loaded"].catalog)
        if not lean.infeasible
        else None
    )
    assert _cents(found) == _cents(run["reference"]), f"seed {seed}"


def _same_tables(mine: list, theirs: list) -> None:
    """Candidate tables and infeasible reasons, to the bit."""
    for a, b in zip(mine, theirs, strict=True):
        if isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        else:
            assert a == b


@pytest.mark.parametrize(
    "name",
    [
        "batch-generation",
        "lora-finetune",
        "full-finetune-70b",
        "team-quarter-mix",
        "bench_solve-16",
    ],
)
def test_estimating_only_shapes_a_floor_leaves_in_the_running_changes_no_candidate(
    name, monkeypatch, tmp_path
):
    """Without runner-ups (a what-if point, `planner batch`) a shape is estimated in full only while a row of it
    may still be on the front (`screen.unbeaten_rows`), cheapest floor first. The candidates are those of
    estimating every shape up front, to the bit, at prices and preemption rates a sweep moves, and far fewer
    shapes are estimated."""
    from planner.candidates import screen as screening
    from planner.candidates.cache import CandidateCache

    if name.startswith(
        "bench_solve"
    ):  # the benchmark's mix of workloads under binding quotas, every catalog
        sys.path.insert(0, str(SCENARIOS.parent / "benchmarks"))
        from bench_solve import scenario_yaml

        (tmp_path / "bench.yaml").write_text(
            scenario_yaml(int(name.split("-")[1]), quotas=True)
        )
        loaded = load_scenario(tmp_path / "bench.yaml")
    else:
        loaded = load_scenario(SCENARIOS / f"{name}.yaml")

    def tables(first_estimates: int) -> tuple[list, int]:
        monkeypatch.setattr(screening, "FIRST_ESTIMATES", first_estimates)
        cache, out = CandidateCache(), []
        for spot, preemption in ((1.0, 1.0), (0.5, 1.0), (1.0, 3.0)):
            offers = loaded.catalog.offers.assign(
                spot_usd_h=loaded.catalog.offers["spot_usd_h"] * spot,
                spot_preemption_per_h=loaded.catalog.offers["spot_preemption_per_h"]
                * preemption,
            )
            found = generate(
                loaded.scenario, loaded.catalog, offers, cache=cache, runner_ups=0
            )
            out += [found.all, found.pruned, found.infeasible]
        return out, len(cache.estimates)

    lazy, estimated = tables(screening.FIRST_ESTIMATES)
    every, all_shapes = tables(10**9)
    _same_tables(lazy, every)
    assert estimated < all_shapes, (estimated, all_shapes)


@pytest.mark.parametrize(
    "name", ["lora-finetune", "qlora-70b", "full-finetune-70b", "team-quarter-mix"]
)
def test_screening_with_runner_ups_changes_no_candidate(name, monkeypatch):
    """With runner-ups (the JSON's `alternatives`) the screen also keeps every row that may still be one of the
    cheapest other kinds (`screen.past_runner_ups`): the candidates are those of screening nothing, to the bit,
    and fewer shapes are estimated."""
    from planner.candidates import generate as generation
    from planner.candidates.cache import CandidateCache

    loaded = load_scenario(SCENARIOS / f"{name}.yaml")

    def tables() -> tuple[list, int]:
        cache = CandidateCache()
        found = generate(
            loaded.scenario, loaded.catalog, cache=cache, runner_ups=RUNNER_UPS
        )
        return [found.all, found.pruned, found.infeasible], len(cache.estimates)

    screened, estimated = tables()
    monkeypatch.setattr(
        generation, "unbeaten_rows", lambda rows, at, *_: np.ones(len(at), dtype=bool)
    )
    every, all_shapes = tables()
    _same_tables(screened, every)
    assert estimated < all_shapes, (estimated, all_shapes)


def test_past_runner_ups_agrees_with_the_kinds_a_report_prices():
    """A row `past_runner_ups` flags is never needed (`Kinds.needed`) once its dominators are priced at any cost
    up to their hi; a row it keeps is needed when they cost exactly their hi (nothing is kept for nothing)."""
    from planner.candidates.price import Kinds
    from planner.candidates.screen import past_runner_ups

    rng = np.random.default_rng(5)
    for _ in range(300):
        rows, count = int(rng.integers(1, 12)), int(rng.integers(1, 4))
        kind = rng.integers(0, 6, rows)
        lo = rng.uniform(0, 10, rows).round(1)
        dominators = rng.random(rows) < 0.5
        hi = lo + rng.uniform(0, 3, rows).round(1)
        flagged = past_runner_ups(kind, lo, kind[dominators], hi[dominators], count)
        for i in range(rows):
            for share in (0.0, 0.5, 1.0):  # what the dominators turn out to cost
                kinds = Kinds(count, kind)
                for j in np.flatnonzero(dominators):
                    kinds.priced(j, lo[j] + share * (hi[j] - lo[j]))
                needed = kinds.needed(i, lo[i])
                if flagged[i]:
                    assert not needed, (kind, lo, hi, dominators, i)
                elif share == 1.0:
                    assert needed, (kind, lo, hi, dominators, i)


@pytest.mark.parametrize(
    "name",
    ["pretrain-deadline", pytest.param("batch-generation", marks=pytest.mark.slow)],
)
def test_fallback_screening_drops_nothing_exhaustive_pricing_keeps(name):
    """spot_fallback rows are screened with a Wald bound (`screen._fallback_lo`), tight to a few per cent;
    on the shipped deadline scenarios over every catalog, the Pareto fronts and runner-ups match pricing all."""
    loaded = load_scenario(SCENARIOS / f"{name}.yaml")
    full = generate(loaded.scenario, loaded.catalog, exhaustive=True)
    assert (full.all["market"] == "spot_fallback").any()
    for runner_ups_kept in (RUNNER_UPS, 0):
        screened = generate(loaded.scenario, loaded.catalog, runner_ups=runner_ups_kept)
        assert sorted(screened.pruned["cid"]) == sorted(full.pruned["cid"]), (
            runner_ups_kept
        )
    plan = make_plan(loaded, time_limit_s=20.0, workers=1)
    assert runner_ups(plan, RUNNER_UPS) == runner_ups(
        dataclasses.replace(plan, candidates=full), RUNNER_UPS
    )


TWINS = """\
name: twins
catalogs: [aws, gcp, lambda, runpod]
defaults: {spot_evidence: fitted}  # the fitted process's own screening: spot twins priced as it prices them
workloads:
  - name: lora
    kind: fine_tuning
    model: llama-3.1-8b
    method: lora
    activation_checkpointing: full
    work: {tokens: 400M}
    gpus: {min: 1, max: 8}
    time_budget: 24h
  - name: stated
    kind: training
    memory: {model_states: 64GiB, activations: 12GiB}
    work: {gpu_hours: 80, reference_gpu: A100-80GB}
    gpus: {min: 2, max: 16}
    time_budget: 48h
constraints:
  gpu_quotas: {aws: 32, gcp: 16, lambda: 16, runpod: 8}
"""


def test_a_fallback_row_its_spot_twin_beats_for_sure_is_left_unpriced(
    tmp_path, monkeypatch
):
    """A spot_fallback row whose spot twin is a candidate and costs less for sure (`fallback.excess_over_spot`) is
    not priced; the Pareto fronts and runner-ups still match pricing every row."""
    import planner.candidates.generate as generation

    beaten = []
    dearer = generation.dearer_than_twin
    monkeypatch.setattr(
        generation,
        "dearer_than_twin",
        lambda *a: beaten.append(dearer(*a)) or beaten[-1],
    )
    path = tmp_path / "twins.yaml"
    path.write_text(TWINS)
    loaded = load_scenario(path)
    full = generate(loaded.scenario, loaded.catalog, exhaustive=True)
    for runner_ups_kept in (RUNNER_UPS, 0):
        screened = generate(loaded.scenario, loaded.catalog, runner_ups=runner_ups_kept)
        pd.testing.assert_frame_equal(
            screened.pruned.reset_index(drop=True), full.pruned.reset_index(drop=True)
        )
    assert sum(beaten) >= 3, beaten
    plan = make_plan(loaded, time_limit_s=20.0, workers=1)
    assert runner_ups(plan, RUNNER_UPS) == runner_ups(
        dataclasses.replace(plan, candidates=full), RUNNER_UPS
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_random_plans_pass_the_checker(seed):
    run = random_run(seed)
    assert check_plan(run["loaded"], run["json"]) == []


def test_random_scenarios_exercise_binding_limits_and_infeasibility():
    """The brute-force comparison only means something if the limits actually bite."""
    runs = [random_run(s) for s in SEEDS]
    solved = [r for r in runs if r["unconstrained"] is not None]
    binding = [
        r
        for r in solved
        if r["reference"] is not None
        and r["reference"]["cents"] > r["unconstrained"]["cents"]
    ]
    infeasible = [r for r in solved if r["reference"] is None]
    assert len(solved) >= 0.6 * len(runs), f"{len(solved)} of {len(runs)} have any plan"
    assert len(binding) >= 0.25 * len(runs), f"{len(binding)} binding of {len(runs)}"
    assert len(infeasible) >= 3, f"{len(infeasible)} infeasible of {len(runs)}"
    assert any(
        r["plan"].chosen["market"].eq("spot").any()
        for r in runs
        if r["plan"].status in SOLVED
    )


# ---------------------------------------------------------------- regressions (bugs found by the brute-force tests)

FAMILY_QUOTA = """\
name: family-quota
catalogs: [lambda]
workloads:
  - name: job
    kind: training
    memory: {per_gpu: 30GiB}
    work: {gpu_hours: 200, reference_gpu: A100-80GB}
    gpus: 8
    allow: {regions: [us-east-1], gpus: [H100-SXM, A100-80GB]}
constraints:
  gpu_quotas: QUOTAS
"""


def test_family_quota_beside_provider_quota(scenario_file):
    """H100s are barred (lambda/H100: 0), the A100 node is allowed; a roomy `lambda: 16` beside it
    must not change that. Pruning puts both candidates in one 'provider' signature with equal quota
    GPUs, drops the dearer A100 one, and the plan becomes INFEASIBLE."""
    alone = make_plan(
        load_scenario(
            scenario_file(FAMILY_QUOTA.replace("QUOTAS", "{lambda/H100: 0}"), "a.yaml")
        ),
        workers=1,
    )
    assert alone.status == "OPTIMAL" and alone.chosen["gpu"].tolist() == ["A100-80GB"]
    both = make_plan(
        load_scenario(
            scenario_file(
                FAMILY_QUOTA.replace("QUOTAS", "{lambda: 16, lambda/H100: 0}"), "b.yaml"
            )
        ),
        workers=1,
    )
    assert both.status == "OPTIMAL"


def test_quota_keyed_by_canonical_gpu_name(scenario_file):
    text = FAMILY_QUOTA.replace("QUOTAS", "{lambda/H100-SXM: 0}").replace(
        "H100-SXM, A100-80GB", "H100-SXM"
    )
    loaded = load_scenario(scenario_file(text))
    plan = make_plan(loaded, workers=1)
    assert plan.status == "INFEASIBLE"  # the only GPU allowed is the one the quota bars


def test_budget_in_cents_is_not_truncated():
    from planner.solve.model import Limits, build_model
    from planner.solve.search import solve_model

    row = dict(
        workload="w",
        cid="w|p/r/a",
        cost_usd=0.2875,
        cost_cents=29,
        wall_h=1.0,
        provider="p",
        region="r",
        gpus=1,
        nodes=1,
        offer_key="p/r/a",
        market="on_demand",
        max_nodes=None,
        gpu_family="X",
        gpu="X1",
    )
    result = solve_model(
        build_model(pd.DataFrame([row]), Limits(budget_usd=0.29)), workers=1
    )
    assert result.status == "OPTIMAL"  # $0.2875 fits a $0.29 budget


# ---------------------------------------------------------------- shipped scenarios


@pytest.fixture(scope="module")
def shipped():
    """name -> (loaded, plan, plan JSON) for every example scenario, solved once with one worker."""
    out = {}
    for path in scenario_files():
        loaded = load_scenario(path)
        plan = make_plan(loaded, workers=1)
        out[path.stem] = (loaded, plan, as_json(plan))
    return out


def test_shipped_plans_pass_the_checker(shipped):
    assert len(shipped) >= 5
    for name, (loaded, plan, data) in shipped.items():
        assert data["status"] == "OPTIMAL", name
        assert check_plan(loaded, data) == [], name


def test_full_finetune_70b_shards_over_big_gpus(shipped):
    _, _, data = shipped["full-finetune-70b"]
    (a,) = data["assignments"]
    assert a["gpus"] >= 2
    assert a["memory"]["vram_gib"] >= 80
    assert a["gpu"] not in ("A100-40GB",)  # forbidden in the scenario


def test_batch_generation_uses_spot(shipped):
    _, _, data = shipped["batch-generation"]
    (a,) = data["assignments"]
    assert a["market"] == "spot"
    assert a["inputs"]["interruption_tolerance"] == "stateless"


def test_no_spot_for_workloads_that_cannot_be_interrupted(shipped):
    loaded, _, data = shipped["team-quarter-mix"]
    tolerance = {w.name: w.interruption_tolerance for w in loaded.scenario.workloads}
    assert tolerance["eval-harness"] == "none"
    for a in data["assignments"]:
        if tolerance[a["workload"]] == "none":
            assert a["market"] == "on_demand", a["workload"]


def test_determinism_same_input_and_worker_count(shipped):
    loaded, _, first = shipped["team-quarter-mix"]
    again = as_json(make_plan(load_scenario(loaded.path), workers=1))
    two_workers = as_json(make_plan(loaded, workers=2))
    assert without_timing(again) == without_timing(first)
    assert without_timing(two_workers) == without_timing(first)


def test_determinism_on_random_scenarios():
    for seed in (1, 2, 3):
        run = random_run(seed)
        for workers in (1, 2):
            again = as_json(
                make_plan(run["loaded"], time_limit_s=20.0, workers=workers)
            )
            assert without_timing(again) == without_timing(run["json"]), (seed, workers)


# ---------------------------------------------------------------- the checker can fail


def test_checker_catches_violations(shipped):
    loaded, _, data = shipped["team-quarter-mix"]
    names = [a["workload"] for a in data["assignments"]]

    def violations(plan: dict) -> str:
        found = check_plan(loaded, plan)
        assert found, "the checker accepted a broken plan"
        return "\n".join(found)

    # eval-harness (interruption_tolerance: none) moved to spot.
    broken = json.loads(json.dumps(data))
    eval_harness = next(
        a for a in broken["assignments"] if a["workload"] == "eval-harness"
    )
    eval_harness["market"] = "spot"
    assert "interruption_tolerance is none" in violations(broken)
    # A quota exceeded: the ranker scaled past its provider's quota (aws: 12 or gcp: 32).
    broken = json.loads(json.dumps(data))
    ranker = next(a for a in broken["assignments"] if a["workload"] == "ranker-train")
    ranker["nodes"], ranker["gpus"] = 9, 72
    text = violations(broken)
    assert f"quota {ranker['provider']}:" in text and "outside gpus 4..16" in text
    # A workload dropped, a price shaded, a cost left out of the objective, a group split.
    broken = json.loads(json.dumps(data))
    broken["assignments"] = broken["assignments"][1:]
    assert f"{names[0]}: 0 assignments" in violations(broken)
    broken = json.loads(json.dumps(data))
    broken["assignments"][0]["inputs"]["price_per_node_h"] *= 0.9
    assert "price_per_node_h" in violations(broken)
    broken = json.loads(json.dumps(data))
    broken["objective_usd"] -= 1
    assert "objective_usd" in violations(broken)
    broken = json.loads(json.dumps(data))
    vision = next(
        a for a in broken["assignments"] if a["workload"] == "vision-finetune"
    )
    vision["region"] = "us-west-2"
    assert "same_region" in violations(broken)
    # Memory that does not fit, and an offer that does not exist.
    broken = json.loads(json.dumps(data))
    broken["assignments"][0]["memory"]["per_gpu_gib"] = 500.0
    assert "headroom" in violations(broken)
    broken = json.loads(json.dumps(data))
    broken["assignments"][0]["instance_type"] = "no-such-instance"
    assert "not in the scenario's catalogs" in violations(broken)
    # The risk understated: fewer preemption events, or less waiting, than the failures and waits imply.
    loaded, _, data = shipped["pretrain-multinode"]
    broken = json.loads(json.dumps(data))
    spot = next(a for a in broken["assignments"] if a["market"] == "spot")
    spot["expected"]["preemption_events"] /= 2
    assert "expected.preemption_events" in violations(broken)
    broken = json.loads(json.dumps(data))
    spot = next(a for a in broken["assignments"] if a["market"] == "spot")
    spot["expected"]["waiting_h"] = 0.0
    assert "expected.waiting_h" in violations(broken)


def test_checker_catches_budget_and_failure_rate(shipped):
    loaded, _, data = shipped["pretrain-multinode"]
    broken = json.loads(json.dumps(data))
    broken["assignments"][0]["inputs"]["failure_rate_per_h"] *= 0.5
    assert any("failure_rate_per_h" in v for v in check_plan(loaded, broken))
    tight = dataclasses.replace(
        loaded,
        scenario=loaded.scenario.model_copy(
            update={
                "constraints": loaded.scenario.constraints.model_copy(
                    update={"budget": 100.0}
                )
            }
        ),
    )
    assert any(v.startswith("budget") for v in check_plan(tight, data))
    broken = json.loads(json.dumps(data))
    broken["assignments"][0]["breakdown_usd"]["compute"] += 5
    assert any("breakdown sums" in v for v in check_plan(loaded, broken))


# ---------------------------------------------------------------- infeasibility, through the CLI

TINY = """\
name: {name}
catalogs: [lambda]
workloads:
{workloads}
{constraints}
"""


def tiny(name: str, workloads: list[str], constraints: str = "") -> str:
    return TINY.format(
        name=name, workloads="\n".join(workloads), constraints=constraints
    )


def test_infeasible_no_gpu_runs_the_precision(run, scenario_file):
    path = scenario_file(
        tiny(
            "no-fp8",
            [
                """\
  - name: strict-fp8
    kind: training
    memory: {per_gpu: 20GiB}
    precision: fp8
    work: {gpu_hours: 10, reference_gpu: A100-80GB}
    allow: {gpus: [A100-80GB]}
    gpus: {min: 1, max: 8}"""
            ],
        )
    )
    data = json.loads(run("solve", path, "--format", "json").stdout)
    assert data["status"] == "INFEASIBLE"
    assert data["infeasible"][0]["reason"].startswith("A100-80GB has no fp8 support"), (
        data["infeasible"][0]
    )


def test_infeasible_no_gpu_has_enough_vram(run, scenario_file):
    path = scenario_file(
        tiny(
            "too-big",
            [
                """\
  - name: giant
    kind: training
    memory: {per_gpu: 400GiB}
    work: {gpu_hours: 10, reference_gpu: A100-80GB}
    gpus: 1"""
            ],
        )
    )
    result = run("solve", path)
    assert result.exit_code == 1
    assert "giant" in result.output and "no GPU has enough VRAM" in result.output
    data = json.loads(run("solve", path, "--format", "json").stdout)
    assert data["status"] == "INFEASIBLE" and data["assignments"] == []
    assert data["infeasible"][0]["workload"] == "giant"
    assert "no GPU has enough VRAM" in data["infeasible"][0]["reason"]


TP3_STATED = "memory: {per_gpu: 20GiB}\n    work: {gpu_hours: 10, reference_gpu: A100-80GB}\n    tensor_parallel: 3"
TP3 = "model: llama-3.1-8b\n    work: {tokens: 100M}\n    tensor_parallel: 3"
EP4 = "model: llama-3.1-8b\n    work: {tokens: 100M}\n    expert_parallel: 4"


@pytest.mark.parametrize(
    "job, catalog, reason",
    [
        (
            TP3,
            "lambda",
            "no offered shape can run it: tensor_parallel 3 must divide the GPUs of one node",
        ),
        (
            TP3_STATED,
            "aws",
            "no offered shape can run it: tensor_parallel 3 must divide the GPUs of one node",
        ),
        (
            EP4,
            "lambda",
            "no offered shape can run it: expert_parallel=4 needs a mixture-of-experts model",
        ),
    ],
    ids=["tp3", "tp3-stated-memory", "ep4-dense"],
)
def test_infeasible_layout_pins_say_what_rules_them_out(
    run, scenario_file, job, catalog, reason
):
    """A pinned layout no offered shape can take is not a VRAM problem, and says so (tensor_parallel 3 with
    stated memory once crashed on 3 nodes of 4 GPUs: it divides their 12 GPUs, but not a node)."""
    path = scenario_file(
        tiny(
            "pinned",
            [
                f"""\
  - name: pinned
    kind: fine_tuning
    {job}
    gpus: {{min: 1, max: 16}}"""
            ],
        ).replace("[lambda]", f"[{catalog}]")
    )
    data = json.loads(run("solve", path, "--format", "json").stdout)
    assert data["status"] == "INFEASIBLE"
    assert data["infeasible"][0]["reason"].startswith(reason), data["infeasible"]


def test_infeasible_time_budget_too_short(run, scenario_file):
    path = scenario_file(
        tiny(
            "too-slow",
            [
                """\
  - name: rushed
    kind: training
    memory: {per_gpu: 20GiB}
    work: {gpu_hours: 500, reference_gpu: A100-80GB}
    gpus: {min: 1, max: 2}
    time_budget: 2h"""
            ],
        )
    )
    result = run("solve", path)
    assert result.exit_code == 1
    assert "rushed" in result.output and "misses the time budget" in result.output
    data = json.loads(run("solve", path, "--format", "json").stdout)
    assert data["status"] == "INFEASIBLE"
    assert "misses the time budget" in data["infeasible"][0]["reason"]


def test_infeasible_quota_too_small_for_two_workloads(run, scenario_file):
    job = """\
  - name: {name}
    kind: training
    memory: {{per_gpu: 20GiB}}
    work: {{gpu_hours: 20, reference_gpu: A100-80GB}}
    gpus: 8"""
    path = scenario_file(
        tiny(
            "quota-pair",
            [job.format(name="alpha"), job.format(name="beta")],
            "constraints:\n  gpu_quotas: {lambda: 12}",
        )
    )
    result = run("solve", path)
    assert result.exit_code == 1
    data = json.loads(run("solve", path, "--format", "json").stdout)
    assert data["status"] == "INFEASIBLE"
    assert {r["workload"] for r in data["infeasible"]} == {"alpha", "beta"}
    for reason in (r["reason"] for r in data["infeasible"]):
        assert (
            "alpha" in reason
            and "beta" in reason
            and "quota lambda" in reason
            and "12" in reason
        )
    assert "quota lambda" in result.output


# ---------------------------------------------------------------- CLI formats and output files

SMALL = SCENARIOS / "full-finetune-70b.yaml"


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_solve_formats(run, fmt):
    result = run("solve", SMALL, "--format", fmt, "--workers", "1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    if fmt == "json":
        data = json.loads(out)
        assert (
            data["status"] == "OPTIMAL"
            and data["assignments"][0]["workload"] == "llama70b-sft"
        )
        assert check_plan(load_scenario(SMALL), data) == []
    elif fmt == "csv":
        header, row, *_ = out.splitlines()
        assert header.startswith("workload,provider,region") and row.startswith(
            "llama70b-sft,"
        )
    elif fmt == "markdown":
        assert (
            out.startswith("# Plan for `llama70b-full-finetune`")
            and "| llama70b-sft |" in out
        )
    else:
        assert (
            "llama70b-sft" in out
            and "TOTAL expected cost $" in out
            and "OPTIMAL" in out
        )


def test_solve_writes_output_file_atomically(run, tmp_path):
    target = tmp_path / "plan.json"
    result = run("solve", SMALL, "--format", "json", "-o", target, "--workers", "1")
    assert result.exit_code == 0
    assert json.loads(target.read_text())["status"] == "OPTIMAL"
    assert [p.name for p in tmp_path.iterdir()] == [
        "plan.json"
    ]  # no temporary file left behind


def test_solve_refuses_to_overwrite_the_scenario(run, tmp_path):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SMALL.read_text())
    before = scenario.read_bytes()
    result = run("solve", scenario, "-o", scenario)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "overwrite" in lines[0]
    assert scenario.read_bytes() == before


def test_solve_explain_prints_runner_ups(run):
    result = run(
        "solve", SCENARIOS / "team-quarter-mix.yaml", "--explain", "--workers", "1"
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    runner_ups = [
        line
        for line in lines
        if line.startswith("  ")
        and ("cheaper than" in line or "ties with" in line or "dearer alone" in line)
    ]
    assert len(runner_ups) >= 5
    assert any(line.startswith("eval-harness:") for line in lines)
    assert not any(
        "-" in word and word.endswith("%")
        for line in runner_ups
        for word in line.split()
    )
    # the AWS quota (12 GPUs) holds ranker-train off the cheaper p5 spot_fallback node: say so
    passed_over = [
        line
        for line in runner_ups
        if "p5.48xlarge spot-fallback" in line and "dearer alone" in line
    ]
    assert passed_over and all("gpu_quotas aws" in line for line in passed_over), (
        runner_ups
    )


# ---------------------------------------------------------------- the LP bound (HiGHS) beside CP-SAT


def synthetic_candidates(
    workloads: int, per_workload: int, seed: int, share: float = 0.3
) -> tuple:
    """A candidate table as candidates/generate.py builds it, random, under binding per-provider GPU quotas
    (each `share` of the least GPUs the workloads need together)."""
    from planner.candidates.limits import Limits

    rng = np.random.default_rng(seed)
    providers = np.array(["aws", "gcp", "azure", "lambda"])
    rows = []
    for w in range(workloads):
        for c in range(per_workload):
            gpus = int(rng.choice([1, 2, 4, 8]))
            cost = float(rng.uniform(5, 500)) * (1.5 if gpus == 1 else 1.0)
            provider = str(rng.choice(providers))
            rows.append(
                {
                    "workload": f"w{w:04d}",
                    "cid": f"w{w:04d}|{provider}/r/i{c}|on_demand|x1",
                    "provider": provider,
                    "region": "r",
                    "offer_key": f"{provider}/r/i{c}",
                    "market": "on_demand",
                    "gpu": "H100-SXM",
                    "gpu_family": "H100",
                    "gpus": gpus,
                    "nodes": 1,
                    "max_nodes": np.nan,
                    "cost_usd": cost,
                    "cost_cents": int(round(cost * 100)),
                    "wall_h": float(rng.uniform(1, 50)),
                }
            )
    frame = pd.DataFrame(rows)
    demand = frame.groupby("workload")["gpus"].min().sum()
    limits = Limits(gpu_quotas={p: int(demand * share) for p in providers})
    return frame, limits


def mip_optimum_cents(cands: pd.DataFrame, limits) -> float:
    """The integer optimum in cents by HiGHS's MIP (scipy.optimize.milp), written apart from the LP module."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = len(cands)
    codes = pd.factorize(cands["workload"])[0]
    one = np.zeros((codes.max() + 1, n))
    one[codes, np.arange(n)] = 1
    quota = np.array(
        [np.where(cands["provider"] == p, cands["gpus"], 0) for p in limits.gpu_quotas]
    )
    result = milp(
        cands["cost_cents"].to_numpy(float),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
        constraints=[
            LinearConstraint(one, 1, 1),
            LinearConstraint(
                quota, -np.inf, np.array(list(limits.gpu_quotas.values()))
            ),
        ],
        options={"time_limit": 60, "mip_rel_gap": 0.0},
    )
    assert result.status == 0
    return float(result.fun)


def test_a_weak_cp_sat_bound_is_replaced_by_the_valid_lp_bound():
    """CP-SAT without its own LP (linearization_level 0), stopped after a second from a feasible hint,
    has a weak bound; the reported bound is the HiGHS relaxation's, and never above the MIP optimum."""
    from planner.solve.model import build_model
    from planner.solve.search import solve_model

    cands, limits = synthetic_candidates(600, 6, seed=4)
    optimum = mip_optimum_cents(cands, limits) / 100
    fewest_gpus = (
        cands.sort_values(["workload", "gpus", "cost_usd"]).groupby("workload").head(1)
    )
    hint = dict(zip(fewest_gpus["workload"], fewest_gpus["cid"]))
    weak = {"linearization_level": 0}
    alone = solve_model(
        build_model(cands, limits), 1.0, 1, hint=hint, use_lp=False, parameters=weak
    )
    both = solve_model(
        build_model(cands, limits), 1.0, 1, hint=hint, use_lp=True, parameters=weak
    )
    # CP-SAT's own bound is weak here
    assert alone.status == "FEASIBLE" and alone.bound_usd < 0.9 * optimum
    assert both.bound_usd >= alone.bound_usd
    # the LP's: valid and tight
    assert optimum - 0.01 * len(fewest_gpus) <= both.bound_usd <= optimum + 1e-6
    assert both.gap < alone.gap


@pytest.mark.parametrize("seed", range(0, 48, 3))
def test_lp_bound_never_exceeds_the_brute_force_optimum(seed):
    from planner.candidates.limits import limits_of
    from planner.solve.bound import lp_bound

    run = random_run(seed)
    loaded = run["loaded"]
    exhaustive = generate(loaded.scenario, loaded.catalog, exhaustive=True)
    reference = run["exhaustive_pruned"]
    if exhaustive.infeasible or exhaustive.pruned.empty:
        return
    cands = exhaustive.pruned.reset_index(drop=True)
    cands["provider_region"] = cands["provider"] + "/" + cands["region"]
    relaxed = lp_bound(
        cands, limits_of(loaded.scenario), cands["cost_cents"].to_numpy(float)
    )
    if reference is None:
        return  # infeasible: the LP may or may not see it
    assert relaxed is not None and relaxed.value <= reference["cents"] + 1e-6


@pytest.mark.parametrize("seed", range(0, 48, 3))
def test_a_plan_within_a_ceiling_agrees_with_brute_force(seed):
    """`bound.plan_within`, what lazy pricing asks before pricing the rows in reach of the LP: a plan that uses
    one of some rows and costs no more than a ceiling is found exactly when brute force has one, and what it
    picks is such a plan."""
    from planner.candidates.limits import limits_of
    from planner.solve.bound import plan_within

    run = random_run(seed)
    loaded = run["loaded"]
    exhaustive = generate(loaded.scenario, loaded.catalog, exhaustive=True)
    if exhaustive.infeasible or exhaustive.pruned.empty:
        return
    cands = exhaustive.pruned.reset_index(drop=True)
    cands["provider_region"] = cands["provider"] + "/" + cands["region"]
    among = np.flatnonzero(np.random.default_rng(seed).random(len(cands)) < 0.3)
    if not len(among):
        return

    def cheapest_with(rows: list[int]) -> int | None:
        """Brute force's cheapest plan (in cents) that picks each of `rows` for its workload."""
        keep = np.ones(len(cands), dtype=bool)
        for r in rows:
            keep &= (cands["workload"] != cands["workload"][r]).to_numpy()
            keep[r] = True
        found = brute_force(cands[keep], loaded.scenario, loaded.catalog)
        return None if found is None else found["cents"]

    costs = [c for a in among if (c := cheapest_with([int(a)])) is not None]
    least = min(costs) if costs else None
    cents = cands["cost_cents"].to_numpy(dtype=np.int64)
    for ceiling in {least - 1, least} if least is not None else {int(cents.sum())}:
        found = plan_within(
            cands, limits_of(loaded.scenario), cents, among, ceiling, 30.0
        )
        if least is None or least > ceiling:
            assert found is None, (seed, ceiling, least)
            continue
        assert found is not None and found is not False, (seed, ceiling)
        picks = np.flatnonzero(found)
        assert set(picks) & set(among) and cents[picks].sum() <= ceiling
        assert (
            cheapest_with(list(picks)) == cents[picks].sum()
        )  # a plan: it holds every limit


def test_solve_reports_which_bound_proved_it(run):
    data = json.loads(
        run("solve", SCENARIOS / "team-quarter-mix.yaml", "--format", "json").stdout
    )
    assert data["status"] == "OPTIMAL" and data["solve_report"]["proved_by"] in (
        "cp-sat",
        "lp",
        "mip",
    )
    from planner.report.status import PROVERS

    text = run("solve", SCENARIOS / "team-quarter-mix.yaml").stdout
    assert f"optimal (proven by {PROVERS[data['solve_report']['proved_by']]})" in text


def test_the_branch_and_bound_proves_the_optimum_in_cents_where_the_lp_leaves_workloads_fractional():
    """300 workloads under quotas binding at 30 % of demand: the LP is fractional (8 workloads), HiGHS's branch and
    bound on the same rows proves the optimum, which an exact MIP written apart from the planner confirms."""
    from planner.solve.bound import lp_bound
    from planner.solve.model import build_model
    from planner.solve.search import solve_model

    cands, limits = synthetic_candidates(300, 6, seed=8)
    relaxed = lp_bound(cands, limits, cands["cost_cents"].to_numpy(float))
    assert (
        (relaxed.x > 1e-6) & (relaxed.x < 1 - 1e-6)
    ).any()  # the LP alone does not decide it
    result = solve_model(build_model(cands, limits), 20.0, 1)
    assert result.status == "OPTIMAL" and result.proved_by == "mip"
    assert result.chosen["cost_cents"].sum() == round(mip_optimum_cents(cands, limits))
    assert (
        result.chosen["workload"].is_unique
        and len(result.chosen) == cands["workload"].nunique()
    )
    for provider, quota in limits.gpu_quotas.items():
        assert (
            result.chosen.loc[result.chosen["provider"] == provider, "gpus"].sum()
            <= quota
        )


def enumerated(
    cands: pd.DataFrame, limits, column: str = "cost_cents"
) -> tuple[np.ndarray, np.ndarray]:
    """Every combination of one candidate per workload: its sum of `column`, and whether it keeps the per-provider
    quotas."""
    parts = [
        frame.reset_index(drop=True)
        for _, frame in cands.groupby("workload", sort=True)
    ]
    index = np.indices([len(p) for p in parts]).reshape(len(parts), -1)
    total = sum(p[column].to_numpy()[index[i]] for i, p in enumerate(parts))
    ok = np.ones(total.shape, dtype=bool)
    for provider, quota in limits.gpu_quotas.items():
        ok &= (
            sum(
                np.where(p["provider"] == provider, p["gpus"], 0)[index[i]]
                for i, p in enumerate(parts)
            )
            <= quota
        )
    return total, ok


def keeps_the_quotas(chosen: pd.DataFrame, cands: pd.DataFrame, limits) -> bool:
    return sorted(chosen["workload"]) == sorted(cands["workload"].unique()) and all(
        chosen.loc[chosen["provider"] == p, "gpus"].sum() <= q
        for p, q in limits.gpu_quotas.items()
    )


@pytest.mark.parametrize("branch_and_bound", [True, False])
def test_a_rounded_lp_plan_narrows_the_search_and_keeps_the_optimum(
    branch_and_bound, monkeypatch
):
    """When the LP's rounded solution keeps every limit, what the LP prices above it is dropped before HiGHS's
    branch and bound (or, with it off, CP-SAT) searches, and what it prices above the optimum before the
    tie-break: on 50 random tables the plan still costs what enumerating all 3,125 combinations finds, with
    the least tie-break rank among plans of that cost, and the narrowing did happen on some of them."""
    from planner.solve import model, search
    from planner.solve.rows import admits

    if not branch_and_bound:
        monkeypatch.setattr(search, "MIP_LOOK_S", 0.0)
    seen = []
    monkeypatch.setattr(
        search, "admits", lambda *args: seen.append(admits(*args)) or seen[-1]
    )
    for seed in range(50):
        cands, limits = synthetic_candidates(5, 5, seed=seed, share=0.5)
        cents, ok = enumerated(cands, limits)
        result = search.solve_model(
            model.build_model(cands, limits, constrain=False), 20.0, 1
        )
        assert result.status == ("OPTIMAL" if ok.any() else "INFEASIBLE"), seed
        if not ok.any():
            continue
        assert result.chosen["cost_cents"].sum() == cents[ok].min(), seed
        assert keeps_the_quotas(result.chosen, cands, limits), seed
        ranked = cands.assign(
            rank=model.tie_ranks(cands.reset_index(drop=True)).to_numpy()
        )
        ranks, _ = enumerated(ranked, limits, "rank")
        assert (
            ranked.set_index("cid").loc[result.chosen["cid"], "rank"].sum()
            == ranks[ok & (cents == cents[ok].min())].min()
        ), seed
    assert sum(seen) >= 5, seen


def test_the_rounded_lp_stands_when_the_search_finds_no_plan_in_time(monkeypatch):
    """With HiGHS's branch and bound off and CP-SAT stopped before it searches, a rounded LP that keeps the
    quotas is returned as a plan (its bound the LP's, at or under the true optimum); one that breaks a quota
    is not, and the result says no plan was found."""
    from planner.solve import model, search
    from planner.solve.bound import lp_bound

    monkeypatch.setattr(search, "MIP_LOOK_S", 0.0)
    outcomes = set()
    for seed in range(30):
        cands, limits = synthetic_candidates(5, 5, seed=seed, share=0.5)
        cents, ok = enumerated(cands, limits)
        if not ok.any():
            continue
        plan = model.build_model(cands, limits, constrain=False)
        relaxed = lp_bound(
            plan.candidates, limits, plan.candidates["cost_cents"].to_numpy()
        )
        rounded = plan.candidates[
            search._rounded(plan.candidates, relaxed.x, plan.ranks)
        ]
        result = search.solve_model(
            plan, 20.0, 1, parameters={"stop_after_presolve": True}
        )
        if np.all((relaxed.x < 1e-9) | (relaxed.x > 1 - 1e-9)):
            continue  # the LP alone decides it
        if keeps_the_quotas(rounded, cands, limits):
            assert result.status in ("FEASIBLE", "OPTIMAL"), seed
            assert sorted(result.chosen["cid"]) == sorted(rounded["cid"]), seed
            assert result.bound_usd <= cents[ok].min() / 100 + 1e-9, seed
            assert result.chosen["cost_cents"].sum() >= cents[ok].min(), seed
            outcomes.add("plan")
        else:
            assert result.status == "UNKNOWN" and result.chosen.empty, seed
            outcomes.add("none")
    assert outcomes == {"plan", "none"}


def test_solving_imports_no_scipy():
    """SciPy's import costs a process 0.2 s (its array-API layer loads much of numpy), and every `planner solve`
    and what-if worker would pay it: the solve path uses numpy's FFT and HiGHS directly; only endpoints and
    `planner batch`'s bound import SciPy."""
    code = (
        "import sys; from planner.load.scenario import load_scenario; "
        "from planner.solve.pipeline import make_plan; "
        f"plan = make_plan(load_scenario({str(SCENARIOS / 'pretrain-deadline.yaml')!r}), time_limit_s=10.0); "
        "print(plan.status, sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["OPTIMAL", "[]"], out


def test_a_row_on_no_limit_dominates_rows_of_every_signature():
    """`dominated(anywhere=True)`: a dominator drawing no limited GPUs (no quota, no capped offer) beats rows of
    any signature whose bound is above its hi; one drawing limited GPUs only its own signature's; with steps,
    only rows that take as many calendar steps."""
    from planner.candidates.screen import dominated

    signature, units = np.array([1, 2, 2, 3]), np.array([8.0, 8.0, 0.0, 4.0])
    lo = np.array([10.0, 10.0, 10.0, 8.0])
    free = (np.array([0]), np.array([0.0]), np.array([9.0]))
    assert not dominated(signature, units, lo, *free).any()
    assert dominated(signature, units, lo, *free, anywhere=True).tolist() == [
        True,
        True,
        True,
        False,  # its bound is below the free row's hi
    ]
    limited = (np.array([1]), np.array([4.0]), np.array([9.0]))
    assert dominated(signature, units, lo, *limited, anywhere=True).tolist() == [
        True,
        False,
        False,
        False,
    ]
    steps = np.array([4, 6, 6, 6])
    assert dominated(
        signature, units, lo, *free, steps, np.array([5]), anywhere=True
    ).tolist() == [False, True, True, False]


def test_a_group_keeps_a_workload_on_its_provider_when_another_is_cheaper_and_free():
    """A free row beats rows of other signatures only where no same_provider group ties the workload to a
    provider: here the group must follow `pinned` to runpod, though `free` alone is cheaper on lambda, which
    no quota covers, so the plan is brute force's over every candidate."""
    catalog = small_catalog()
    job = {
        "kind": "training",
        "work": {"gpu_hours": 40, "reference_gpu": "A100-80GB"},
        "memory": {"per_gpu": 30},
        "checkpoint": {"every": "1h"},
        "time_budget": 48,
    }
    spec = {
        "name": "grouped",
        "catalogs": ["lambda", "runpod"],
        "workloads": [
            {"name": "free", **job},
            {"name": "pinned", **job, "allow": {"providers": ["runpod"]}},
        ],
        "constraints": {"gpu_quotas": {"runpod": 64}},
    }
    # no runner-ups: those would have every kind priced
    alone = make_plan(
        loaded_for(spec, catalog), time_limit_s=20.0, workers=1, runner_ups=0
    )
    assert alone.status == "OPTIMAL"
    assert set(alone.chosen.set_index("workload")["provider"].items()) == {
        ("free", "lambda"),
        ("pinned", "runpod"),
    }
    # ungrouped, `free`'s rows on runpod are beaten by its candidate on lambda: none is left for the LP
    left = alone.candidates.pending.every()
    assert "free" not in set(left["workload"]) and "pinned" in set(left["workload"])
    spec["constraints"]["same_provider"] = [["free", "pinned"]]
    loaded = loaded_for(spec, catalog)
    plan = make_plan(loaded, time_limit_s=20.0, workers=1, runner_ups=0)
    every = generate(loaded.scenario, catalog, exhaustive=True).all
    # every candidate on runpod, each workload's cheapest: the optimum where the quota does not bind
    cheapest = every[every["provider"] == "runpod"].sort_values("cost_cents")
    cheapest = cheapest.groupby("workload").head(1)
    assert len(cheapest) == 2 and cheapest["gpus"].sum() <= 64
    assert plan.status == "OPTIMAL"
    assert set(plan.chosen["provider"]) == {"runpod"}
    assert plan.chosen["cost_cents"].sum() == cheapest["cost_cents"].sum()
