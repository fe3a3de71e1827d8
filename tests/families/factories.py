"""Tiny candidate tables and micro-models for testing one constraint family at a time.

A micro-model holds the decision variables exactly as the real builder creates them
(`build_model`, `build_batch_model`; `test_*_families.py` checks that they agree) and no
constraint until the test adds the one family under test and, where that family leaves the
variables free, constraints fixing them to the case being checked (`choose`, `fix`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from planner.batch.model import BatchModel, Pool, RunInfo, decision_variables
from planner.candidates.endpoints import Endpoint
from planner.candidates.limits import to_cents
from planner.solve.model import PlanModel

SOLVED = ("OPTIMAL", "FEASIBLE")
TIME_LIMIT_S = 5.0  # every micro-model solves in milliseconds; the limit only guards against a hang


# ---------------------------------------------------------------- solving


def status(model: cp_model.CpModel) -> str:
    """CP-SAT's status on `model`: one worker, a short time limit."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = TIME_LIMIT_S
    return solver.status_name(solver.solve(model))


def assert_accepts(m) -> None:
    """The rule lets the fixed assignment through."""
    got = status(m.model)
    assert got in SOLVED, f"expected the assignment to be accepted, CP-SAT says {got}"


def assert_rejects(m) -> None:
    """The rule forbids the fixed assignment (proven: INFEASIBLE, not merely unsolved)."""
    got = status(m.model)
    assert got == "INFEASIBLE", (
        f"expected the assignment to be rejected, CP-SAT says {got}"
    )


def _with_default_cids(rows: list[dict], owner: str) -> list[dict]:
    """Rows without a cid get `<owner><n>`: a1, a2, b1 (n counts the owner's rows)."""
    seen: dict[str, int] = {}
    out = []
    for row in rows:
        seen[row[owner]] = seen.get(row[owner], 0) + 1
        out.append({**row, "cid": row["cid"] or f"{row[owner]}{seen[row[owner]]}"})
    cids = [r["cid"] for r in out]
    assert len(set(cids)) == len(cids), f"candidate ids must be unique: {cids}"
    return out


def _pick_index(m, cids) -> set[int]:
    known = list(m.candidates["cid"] if isinstance(m, PlanModel) else m.cands["cid"])
    unknown = set(cids) - set(known)
    assert not unknown, f"no candidate {sorted(unknown)} in {known}"
    return {i for i, cid in enumerate(known) if cid in set(cids)}


def choose(m, *cids: str) -> None:
    """Fix the picks: the named candidates are chosen, every other one is not."""
    chosen = _pick_index(m, cids)
    for i, var in enumerate(m.pick):
        m.model.add(var == (1 if i in chosen else 0))


# ---------------------------------------------------------------- `planner solve`


def candidate(
    workload: str = "a",
    *,
    cid: str | None = None,
    provider: str = "aws",
    region: str = "us-east-1",
    gpu: str = "H100-SXM",
    gpu_family: str = "H100",
    gpus: int = 8,
    nodes: int = 1,
    offer_key: str | None = None,
    market: str = "on_demand",
    max_nodes: float = math.nan,
    cost_usd: float = 10.0,
    wall_h: float = 1.0,
) -> dict:
    """One row of the `planner solve` candidate table: 8 H100s on one AWS on-demand node, $10."""
    return {
        "workload": workload,
        "cid": cid,
        "provider": provider,
        "region": region,
        "gpu": gpu,
        "gpu_family": gpu_family,
        "gpus": gpus,
        "nodes": nodes,
        "offer_key": offer_key or f"{provider}/{region}/p5.48xlarge",
        "market": market,
        "max_nodes": max_nodes,
        "cost_usd": cost_usd,
        "cost_cents": to_cents(cost_usd),
        "wall_h": wall_h,
    }


def candidates(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(_with_default_cids(list(rows), "workload"))


def plan_model(*rows: dict) -> PlanModel:
    """The `planner solve` decision variables over these candidates (as `build_model` makes them), no constraint."""
    cands = candidates(*rows).reset_index(drop=True)
    cands["provider_region"] = cands["provider"] + "/" + cands["region"]
    model = cp_model.CpModel()
    pick = [model.new_bool_var(f"pick[{cid}]") for cid in cands["cid"]]
    return PlanModel(model, cands, pick)


# ---------------------------------------------------------------- `planner batch`


def run_candidate(
    run: str = "a",
    *,
    cid: str | None = None,
    duration_steps: int = 2,
    pool: int = -1,
    gpus: int = 8,
    nodes: int = 1,
    provider: str = "aws",
    region: str = "us-east-1",
    gpu: str = "H100-SXM",
    gpu_family: str = "H100",
    offer_key: str | None = None,
    market: str | None = None,
    max_nodes: float = math.nan,
    cost_usd: float = 1.0,
    first_start: int | None = None,
    last_start: int | None = None,
) -> dict:
    """One row of the `planner batch` candidate table: 8 H100s on one AWS on-demand node for 2 steps, $1.
    `pool` >= 0 puts it on that reservation pool (market "reserved")."""
    row = {
        "run": run,
        "cid": cid,
        "duration_steps": duration_steps,
        "pool": pool,
        "gpus": gpus,
        "nodes": nodes,
        "provider": provider,
        "region": region,
        "gpu": gpu,
        "gpu_family": gpu_family,
        "offer_key": offer_key or f"{provider}/{region}/p5.48xlarge",
        "market": market or ("reserved" if pool >= 0 else "on_demand"),
        "max_nodes": max_nodes,
        "cost_usd": cost_usd,
        "cost_cents": to_cents(cost_usd),
    }
    if first_start is not None or last_start is not None:
        row["first_start"], row["last_start"] = first_start, last_start
    return row


def run_info(
    name: str = "a",
    *,
    release: int = 0,
    due: int = 8,
    after: tuple[str, ...] = (),
    priority: int = 1,
    required: bool = True,
) -> RunInfo:
    """A run that may use steps [release, due): by default [0, 8), required."""
    return RunInfo(name, release, due, tuple(after), priority, required)


def pool(
    label: str = "p5-reserved",
    *,
    offer_key: str = "aws/us-east-1/p5.48xlarge",
    start: int = 0,
    end: int = 8,
    price_per_node_h: float = 1.0,
    min_nodes: int = 0,
    max_nodes: int = 4,
    term_h: float | None = None,
) -> Pool:
    """A reservation of up to 4 p5 nodes for steps [start, end) at $1 a node-hour (one step = one hour)."""
    return Pool(
        label,
        offer_key,
        start,
        end,
        price_per_node_h,
        min_nodes,
        max_nodes,
        float(end - start) if term_h is None else term_h,
    )


def run_candidates(*rows: dict) -> pd.DataFrame:
    frame = pd.DataFrame(_with_default_cids(list(rows), "run"))
    if (
        "first_start" in frame
    ):  # float columns with NaN where a row is not narrowed, as search.py builds them
        frame[["first_start", "last_start"]] = frame[
            ["first_start", "last_start"]
        ].astype(float)
    return frame


def batch_model(
    rows: list[dict], runs: list[RunInfo] | None = None, pools: list[Pool] = ()
) -> BatchModel:
    """The `planner batch` decision variables (as `build_batch_model` makes them), no constraint.
    `runs` defaults to one required run with window [0, 8) per run named in `rows`."""
    cands = run_candidates(*rows).reset_index(drop=True)
    if runs is None:
        runs = [run_info(name) for name in dict.fromkeys(cands["run"])]
    pools = list(pools)
    model = cp_model.CpModel()
    pick, start, scheduled, bought = decision_variables(model, cands, runs, pools)
    return BatchModel(
        model,
        cands,
        {r.name: r for r in runs},
        pools,
        pick,
        start,
        scheduled,
        bought,
        priority_weight=1,
    )


def fix(
    m: BatchModel,
    *,
    picks: tuple[str, ...] | None = None,
    starts: dict[str, int] | None = None,
    scheduled: dict[str, bool] | None = None,
    bought: list[int] | None = None,
) -> None:
    """Fix what the case is about: the picks (all of them), some starts, optional runs' `scheduled`, pools bought."""
    if picks is not None:
        choose(m, *picks)
    for run, step in (starts or {}).items():
        m.model.add(m.start[run] == step)
    for run, value in (scheduled or {}).items():
        assert not isinstance(m.scheduled[run], int), (
            f"{run} is required: always scheduled"
        )
        m.model.add(m.scheduled[run] == int(value))
    for var, count in zip(m.bought, bought or []):
        m.model.add(var == count)


def assert_every_family_tested(
    families: tuple, family_tests: dict, module_globals: dict
) -> None:
    """`families` (a model's CONSTRAINT_FAMILIES) are exactly those `family_tests` maps to a test-name prefix,
    and each has at least one `_accepts_` and one `_rejects_` test among `module_globals`."""
    assert len(set(families)) == len(families)
    assert set(families) == set(family_tests), (
        "a family was added or removed: test it here"
    )
    names = [
        n for n, f in module_globals.items() if n.startswith("test_") and callable(f)
    ]
    for family, prefix in family_tests.items():
        ours = [n for n in names if n.startswith(prefix)]
        assert any("_accepts_" in n for n in ours) and any(
            "_rejects_" in n for n in ours
        ), family.__name__


# ---------------------------------------------------------------- endpoints of `planner solve`


def option(
    workload: str = "chat",
    *,
    oid: str | None = None,
    provider: str = "aws",
    offer_key: str = "aws/us-east-1/g6.xlarge",
    gpu: str = "L4",
    gpu_family: str = "L4",
    gpus_per_node: int = 1,
    market: str = "on_demand",
    node_usd_h: float = 1.0,
    node_rps: tuple[float, ...] = (2.0,),
    away: float = 0.0,
    kept: tuple[int, ...] | None = None,
    most_nodes: int = 4,
    max_nodes: float = math.nan,
    session_h: tuple[float, ...] = (24.0,),
) -> dict:
    """One endpoint option: a one-L4 AWS node serving 2 requests/s, $1/h, at most 4 nodes."""
    return {
        "workload": workload,
        "oid": oid or f"{workload}/{offer_key}/{market}",
        "offer_key": offer_key,
        "provider": provider,
        "region": offer_key.split("/")[1],
        "gpu": gpu,
        "gpu_family": gpu_family,
        "gpus_per_node": gpus_per_node,
        "tp": 1,
        "replicas_per_node": gpus_per_node,
        "market": market,
        "node_usd_h": node_usd_h,
        "price_per_node_h": node_usd_h,
        "away": away,
        "max_nodes": max_nodes,
        "most_nodes": most_nodes,
        "node_rps": list(node_rps),
        "session_h": list(session_h),
        "pool_sizes": list(range(most_nodes + 1)) if market == "spot" else [],
        "kept": list(kept if kept is not None else range(most_nodes + 1))
        if market == "spot"
        else [],
        "limits": ["tpot"] * len(node_rps),
    }


def endpoint(
    name: str = "chat",
    *,
    rates=((3.0,),),
    hours=(24.0,),
    slices: int = 1,
    autoscale: bool = False,
    days: float = 1.0,
    max_pools: int = 2,
    max_providers: int = 1,
    pool_usd_per_h: float = 0.0,
):
    """An endpoint's traffic: 3 requests/s of one size all day, for one day."""
    rates = np.array(rates, dtype=float)
    return Endpoint(
        name,
        rates,
        np.array(hours, dtype=float),
        days,
        autoscale,
        0.99,
        slices,
        np.full(rates.shape[1], 100.0),
        max_pools=max_pools,
        max_providers=max_providers,
        pool_usd_per_h=pool_usd_per_h,
    )


def serving_model(
    options: list[dict], endpoints: list, rows: tuple[dict, ...] = ()
) -> PlanModel:
    """Job picks over `rows` and the endpoints' variables (as `build_model` makes them), no constraint."""
    from planner.solve.model import JOB_COLUMNS, serving_variables

    m = (
        plan_model(*rows)
        if rows
        else PlanModel(
            cp_model.CpModel(),
            pd.DataFrame({c: pd.Series(dtype=object) for c in JOB_COLUMNS}).assign(
                provider_region=pd.Series(dtype=object)
            ),
            [],
        )
    )
    m.serving = serving_variables(
        m.model, pd.DataFrame(options), {e.name: e for e in endpoints}
    )
    return m


def set_nodes(
    m: PlanModel,
    oid: str,
    *counts: int,
    slices: dict[int, tuple[int, ...]] | None = None,
) -> None:
    """Fix an option's nodes per period (and, when given, its slices per period and bucket)."""
    sv = m.serving
    row = list(sv.options["oid"]).index(oid)
    for period, count in enumerate(counts):
        m.model.add(sv.nodes[row, period] == count)
    for period, per_bucket in (slices or {}).items():
        for bucket, n in enumerate(per_bucket):
            m.model.add(sv.slices[row, period, bucket] == n)
