"""`planner solve` end to end: candidates -> CP-SAT -> a plan, or an explanation of why not.

Stages are separate functions (create candidates, build, solve, explain) so a sweep or a
test can call them one by one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import pandas as pd

from planner.candidates.cache import CandidateCache, without_cycle_collection
from planner.candidates.generate import RUNNER_UPS, CandidateSet, generate
from planner.candidates.limits import Limits, limits_of, quota_mask
from planner.candidates.purchase import purchase_json
from planner.economics.inputs import estimate_error, process_json, storage_json
from planner.load.scenario import LoadedScenario
from planner.schema.plan import BREAKDOWN_KEYS
from planner.solve.lazy import solve_lazily
from planner.solve.model import JOB_COLUMNS, build_model
from planner.solve.outcome import SOLVED, SolveResult
from planner.solve.search import solve_model

DEFAULT_TIME_LIMIT_S = 60.0
DEFAULT_WORKERS = 2


@dataclass
class Plan:
    loaded: LoadedScenario
    candidates: CandidateSet
    result: SolveResult | None
    infeasible: list[dict] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.infeasible:
            return "INFEASIBLE"
        return self.result.status if self.result else "UNKNOWN"

    @property
    def chosen(self) -> pd.DataFrame:
        if self.result is None or self.status not in SOLVED:
            return pd.DataFrame()
        return self.result.chosen


@without_cycle_collection()
def make_plan(
    loaded: LoadedScenario,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    workers: int = DEFAULT_WORKERS,
    seed: int = 0,
    offers: pd.DataFrame | None = None,
    hint: dict[str, str] | None = None,
    progress=None,
    cache: CandidateCache | None = None,
    runner_ups: int = RUNNER_UPS,
    lazy: bool = True,
) -> Plan:
    """Generate candidates, solve, and explain infeasibility in domain words; the plan's candidates hold
    `runner_ups` per workload for its report (`generate`). `lazy` prices exactly only the rows a cheaper plan
    could use (`solve/lazy.py`); jobs beside endpoints are priced in full (their search is another)."""
    scenario = loaded.scenario
    started = time.perf_counter()
    candidates = generate(
        scenario,
        loaded.catalog,
        offers,
        progress=progress,
        cache=cache,
        runner_ups=runner_ups,
        time_limit_s=time_limit_s,
        lazy=lazy and not any(w.serving for w in scenario.workloads),
    )
    if candidates.infeasible:
        reasons = [
            {"workload": w.name, "reason": candidates.infeasible[w.name]}
            for w in scenario.workloads
            if w.name in candidates.infeasible
        ]
        return Plan(loaded, candidates, None, reasons)
    limits = limits_of(scenario)
    serving = (
        (candidates.endpoints, candidates.traffic)
        if len(candidates.endpoints)
        else None
    )

    last = [0.0]  # when the last search began

    def solve(cands: CandidateSet) -> SolveResult:
        last[0] = time.perf_counter()
        model = build_model(cands.pruned, limits, serving=serving, constrain=False)
        return solve_model(model, time_limit_s, workers, seed, hint)

    result = solve_lazily(candidates, limits, solve)
    # building and pricing candidates, with the searches of earlier rounds of lazy pricing
    result.candidates_seconds = last[0] - started
    result.priced = candidates.priced
    plan = Plan(loaded, candidates, result)
    if result.status == "INFEASIBLE":
        plan.infeasible = explain_conflict(
            candidates.pruned, limits, [w.name for w in scenario.workloads], serving
        )
    return plan


# ---------------------------------------------------------------- infeasibility


def _feasible(
    cands: pd.DataFrame, limits: Limits, workloads: list[str], serving=None
) -> bool:
    subset = cands[cands["workload"].isin(workloads)]
    groups = tuple(tuple(w for w in g if w in workloads) for g in limits.same_region)
    providers = tuple(
        tuple(w for w in g if w in workloads) for g in limits.same_provider
    )
    limits = replace(
        limits,
        same_region=tuple(g for g in groups if g),
        same_provider=tuple(g for g in providers if g),
    )
    if serving is not None:
        options, traffic = serving
        serving = (
            options[options["workload"].isin(workloads)],
            {w: t for w, t in traffic.items() if w in workloads},
        )
    result = solve_model(
        build_model(subset, limits, serving=serving, constrain=False),
        time_limit_s=10.0,
        workers=1,
    )
    return result.solved


def _without(limits: Limits, family: str, key: str | None) -> Limits:
    if family == "gpu_quotas":
        return replace(
            limits, gpu_quotas={k: v for k, v in limits.gpu_quotas.items() if k != key}
        )
    if family == "node_limits":
        return replace(
            limits,
            node_limits={k: v for k, v in limits.node_limits.items() if k != key},
        )
    if family == "budget":
        return replace(limits, budget_usd=None)
    if family == "same_region":
        return replace(limits, same_region=())
    return replace(limits, same_provider=())


def explain_conflict(
    cands: pd.DataFrame, limits: Limits, workloads: list[str], serving=None
) -> list[dict]:
    """Every workload has candidates but no combination fits the shared limits: find a smallest
    conflicting set of workloads (deletion filter) and the limits that bind it (`serving`: the
    endpoints' options and traffic, as `build_model` takes them)."""
    if "workload" not in cands:  # endpoints only
        cands = pd.DataFrame({c: pd.Series(dtype=object) for c in JOB_COLUMNS})
    conflict = list(workloads)
    for name in list(workloads):
        trial = [w for w in conflict if w != name]
        if trial and not _feasible(cands, limits, trial, serving):
            conflict = trial
    families = [("gpu_quotas", k) for k in sorted(limits.gpu_quotas)] + [
        ("node_limits", k) for k in sorted(limits.node_limits)
    ]
    families += [(f, None) for f in ("budget", "same_region", "same_provider")]
    binding = [
        (f, k)
        for f, k in families
        if _feasible(cands, _without(limits, f, k), conflict, serving)
    ]
    members = ", ".join(conflict)
    if not binding:
        what = "the combination of shared limits"
    else:
        what = " and ".join(
            _describe_limit(limits, f, k, cands, conflict) for f, k in binding
        )
    reason = (
        f"{what} is too small for {members} together"
        if len(conflict) > 1
        else f"{what} is too small for it"
    )
    return [
        {
            "workload": name,
            "reason": reason
            + (f" (conflicting set: {members})" if len(conflict) > 1 else ""),
        }
        for name in conflict
    ]


def _describe_limit(
    limits: Limits,
    family: str,
    key: str | None,
    cands: pd.DataFrame,
    conflict: list[str],
) -> str:
    subset = cands[cands["workload"].isin(conflict)]
    if family == "gpu_quotas":
        need = subset[quota_mask(subset, key)].groupby("workload")["gpus"].min()
        detail = ", ".join(
            [f"{w} needs >= {int(n)}" for w, n in need.items()]
            + [f"{w} holds its replicas' GPUs" for w in conflict if w not in need.index]
        )
        return f"quota {key} ({limits.gpu_quotas[key]} GPUs; {detail})"
    if family == "node_limits":
        return f"node limit {key} ({limits.node_limits[key]} nodes)"
    if family == "budget":
        cheapest = subset.groupby("workload")["cost_usd"].min().sum()
        return f"budget ${limits.budget_usd:,.0f} (the cheapest placement of each alone totals ${cheapest:,.0f})"
    return f"the {family.replace('_', ' ')} groups"


def assignments(plan: Plan, alternatives: int = RUNNER_UPS) -> list[dict]:
    """The JSON contract's `assignments`, one per workload, with runner-up alternatives."""
    scenario = plan.loaded.scenario
    by_name = {w.name: w for w in scenario.workloads}
    others = runner_ups(plan, alternatives)
    out = []
    for row in plan.chosen.itertuples(index=False):
        workload = by_name[row.workload]
        out.append(
            {
                "workload": row.workload,
                "provider": row.provider,
                "region": row.region,
                "instance_type": row.instance_type,
                "gpu": row.gpu,
                "gpus_per_node": int(row.gpus_per_node),
                "nodes": int(row.nodes),
                "gpus": int(row.gpus),
                "market": row.market,
                "checkpoint_interval_h": _finite(row.checkpoint_interval_h),
                "inputs": {
                    **process_json(
                        workload,
                        work_h=row.work_h,
                        nodes=row.nodes,
                        gpus=row.gpus,
                        spot_rate_per_node_h=row.spot_rate_per_node_h,
                        hw_rate=scenario.defaults.hardware_failure_per_gpu_h,
                        capacity_wait_h=row.capacity_wait_h,
                        capacity_wait_cv=row.capacity_wait_cv,
                        checkpoint_write_h=row.checkpoint_write_h,
                        restart_h=row.restart_h,
                        error=estimate_error(workload, scenario.defaults),
                    ),
                    "price_per_node_h": row.price_per_node_h,
                    "billing_granularity_h": row.billing_granularity_h,
                    "billing_minimum_h": row.billing_minimum_h,
                    "time_budget_h": _finite(workload.time_budget or math.inf),
                    "deadline_confidence": scenario.defaults.deadline_confidence,
                    **(
                        {
                            "fallback_price_per_node_h": row.fallback_price_per_node_h,
                            "p_fallback": row.p_fallback,
                        }
                        if row.market == "spot_fallback"
                        else {}
                    ),
                },
                "storage": storage_json(row._asdict()),
                "expected": {
                    "wall_h": row.wall_h,
                    "failures": row.failures,
                    "preemption_events": row.preemption_events,
                    "waiting_h": row.waiting_h,
                    "billed_node_h": row.billed_node_h,
                    "rounding_waste_node_h": row.rounding_waste_node_h,
                    "p_deadline": row.p_deadline,
                    "p_deadline_on_estimate": _finite_share(
                        getattr(row, "p_deadline_on_estimate", math.nan)
                    ),
                    "cost_usd": row.cost_usd,
                },
                "breakdown_usd": {k: getattr(row, f"usd_{k}") for k in BREAKDOWN_KEYS},
                "replayed": replayed_json(row),
                "memory": {"per_gpu_gib": row.memory_gib, "vram_gib": row.vram_gib},
                "parallelism": parallelism_json(row.parallelism),
                "alternatives": others.get(row.workload, []),
                "purchase": purchase_json(scenario, plan.loaded.catalog.offers, row),
                "signals": _signals(plan, row),
            }
        )
    return out


def _signals(plan: Plan, row) -> list[str] | None:
    """The availability signals of the job's offer that bear on its market (stock on every market; spot's
    interruption and placement only on spot), in words."""
    found = plan.loaded.catalog.signals.get(
        f"{row.provider}/{row.region}/{row.instance_type}", []
    )
    spot = row.market in ("spot", "spot_fallback")
    words = [text for kind, text in found if spot or kind == "stock"]
    return words or None


def _finite_share(value: float) -> float | None:
    """A probability for the JSON contract, None where it was not worked out (NaN)."""
    return None if value != value else float(value)


def replayed_json(row) -> dict | None:
    """A spot or spot_fallback candidate's replays on measured availability (docs/cost-model.md §11), beside the
    fitted figures in `expected`; None where it was not held to traces (on-demand, a stateless job)."""
    if not getattr(row, "replayed_traces", 0):
        return None
    return {
        "p_deadline": row.replayed_p_deadline,
        "compute_usd": row.replayed_compute_usd,
        "traces": int(row.replayed_traces),
        "stand_in": bool(row.replayed_stand_in),
    }


def runner_ups(plan: Plan, count: int) -> dict[str, list[dict]]:
    """Per workload, the cheapest candidate of each of the `count` cheapest kinds (instance type, market)
    other than the winner's: the same offer elsewhere or at another size is not an alternative (one sort of
    the whole table)."""
    every = plan.candidates.all
    if every.empty or count <= 0:
        return {}
    kind = ["workload", "instance_type", "market"]
    won = pd.MultiIndex.from_frame(plan.chosen[kind])
    others = every[~pd.MultiIndex.from_frame(every[kind]).isin(won)]
    others = others.sort_values(
        ["workload", "cost_usd", "wall_h", "cid"], kind="stable"
    )
    others = others.drop_duplicates(kind).groupby("workload", sort=False).head(count)
    out: dict[str, list[dict]] = {}
    for r in others.itertuples(index=False):
        out.setdefault(r.workload, []).append(
            {
                "provider": r.provider,
                "region": r.region,
                "instance_type": r.instance_type,
                "nodes": int(r.nodes),
                "market": r.market,
                "cost_usd": r.cost_usd,
                "wall_h": r.wall_h,
            }
        )
    return out


def parallelism_json(label: str) -> dict | None:
    """How the workload runs on its GPUs: a training layout (recipe, tp, pp, dp, ep, cp, zero, recompute,
    micro_batch, sequence_parallel, virtual_stages, label), or a generation job's replicas; None for stated memory."""
    if not label:
        return None
    if label.startswith("TP") and " batch " in label:
        tp, replicas, _, batch = label.replace("TP", "").replace("x", "").split()
        return {
            "tp": int(tp),
            "replicas": int(replicas),
            "batch": int(batch),
            "label": label,
        }
    from planner.physics.layout import Layout

    return Layout.parse(label).as_dict()


def _finite(value: float) -> float | None:
    return None if value is None or math.isinf(value) else value
