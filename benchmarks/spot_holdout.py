"""Spot promises on held-out availability: every shipped example planned with its spot offers held to some
zones' traces, its spot and spot_fallback jobs replayed on the other zones'.

    python benchmarks/spot_holdout.py [--folds 3 | --in-sample] [scenario.yaml ...]

The shipped traces (catalogs/spot_traces/) are split by zone into `--folds` folds, round robin within each
cloud in name order. For each fold the plan is made with the other folds' traces (the planner holds every spot
candidate to them, docs/cost-model.md §11) and each spot or spot_fallback job is replayed on the fold's own.
Per job it prints the promise as fitted (P(deadline) and compute cost of the plan), the held-out replays pooled
over folds (deadline hit rate, compute cost), and the plan's best all-on-demand alternative (the same workload
with spot markets forbidden). A job passes when it meets its deadline in at least its confidence less 3 points
of held-out replays, a fallback's replayed cost is within 15 % of its plan, and its replayed cost is at most
10 % above the on-demand alternative's; it keeps its promise (`kept`) when it is no worse than that (a
fallback replayed more than 15 % below its plan keeps it, but does not pass). `--in-sample` plans and replays on
every trace: the plan's own `replayed` figures beside its best all-on-demand alternative.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.economics import spot_evidence  # noqa: E402
from planner.economics.inputs import inputs_from_assignment  # noqa: E402
from planner.load.scenario import load_scenario  # noqa: E402
from planner.load.traces import load_traces  # noqa: E402
from planner.load.yaml import is_quarter, load_yaml  # noqa: E402
from planner.schema.plan import AssignmentRecord  # noqa: E402
from planner.solve.pipeline import assignments, make_plan  # noqa: E402

HIT_SLACK, FALLBACK_COST, ALTERNATIVE_COST = 0.03, 0.15, 0.10


def zone(trace) -> str:
    """`aws_us-east-1f_p3.2xlarge_4node_...` -> `aws_us-east-1f`."""
    return "_".join(trace.name.split("_")[:2])


def folds(traces, count: int) -> list[tuple]:
    """The traces in `count` folds by zone, round robin within each cloud."""
    out = [[] for _ in range(count)]
    for cloud in sorted({t.cloud for t in traces}):
        zones = sorted({zone(t) for t in traces if t.cloud == cloud})
        for t in traces:
            if t.cloud == cloud:
                out[zones.index(zone(t)) % count].append(t)
    return [tuple(f) for f in out]


def without_spot(loaded):
    workloads = [
        w.model_copy(
            update={
                "forbid": w.forbid.model_copy(
                    update={"markets": ("spot", "spot_fallback")}
                )
            }
        )
        for w in loaded.scenario.workloads
    ]
    return replace(
        loaded, scenario=loaded.scenario.model_copy(update={"workloads": workloads})
    )


def run(path: Path, count: int, in_sample: bool = False) -> list[dict]:
    loaded = load_scenario(path)
    traces = tuple(load_traces())
    on_demand = {
        a["workload"]: a["expected"]["cost_usd"]
        - a["breakdown_usd"]["storage"]
        - a["breakdown_usd"]["egress"]
        for a in _assignments(without_spot(loaded))
    }
    jobs: dict[str, dict] = {}
    splits = (
        [(traces, traces)]
        if in_sample
        else [
            (tuple(t for t in traces if t not in held_out), held_out)
            for held_out in folds(traces, count)
        ]
    )
    for fit, held_out in splits:
        chosen = _assignments(
            replace(loaded, catalog=replace(loaded.catalog, spot_traces=fit))
        )
        for a in chosen:
            if (
                a["market"] not in ("spot", "spot_fallback")
                or a["inputs"].get("interruption_tolerance") == "stateless"
            ):
                continue
            found, stand_in = spot_evidence.covering(
                held_out, a["provider"], a["instance_type"], a["nodes"]
            )
            job = jobs.setdefault(
                (a["workload"], a["market"]),
                {
                    "nodes": set(),
                    "p": [],
                    "fitted": [],
                    "hits": [],
                    "replayed": [],
                    "samples": 0,
                    "confidence": a["inputs"]["deadline_confidence"],
                },
            )
            job["nodes"].add(a["nodes"])
            job["p"].append(a["expected"]["p_deadline"])
            fitted = (
                a["expected"]["cost_usd"]
                - a["breakdown_usd"]["storage"]
                - a["breakdown_usd"]["egress"]
            )
            if not found:
                continue
            evidence = spot_evidence.replayed(
                inputs_from_assignment(AssignmentRecord.model_validate(a)),
                a["market"],
                found,
                stand_in,
            )
            samples = len(found) * spot_evidence.STARTS_PER_TRACE
            on_demand_price = a["inputs"].get("fallback_price_per_node_h", 0.0)
            job["fitted"].append((fitted, samples))
            job["hits"].append((evidence.p_deadline, samples))
            job["replayed"].append(
                (
                    evidence.compute_usd(
                        a["inputs"]["price_per_node_h"], on_demand_price
                    ),
                    samples,
                )
            )
            job["samples"] += samples
    rows = []
    for (name, market), job in jobs.items():
        if not job["samples"]:
            rows.append(
                {
                    "scenario": path.name,
                    "workload": name,
                    "skipped": "no held-out trace covers it",
                }
            )
            continue

        def mean(pairs):
            return sum(v * w for v, w in pairs) / sum(w for _, w in pairs)

        fitted, replayed, hit = (
            mean(job["fitted"]),
            mean(job["replayed"]),
            mean(job["hits"]),
        )
        alternative = on_demand.get(name, math.nan)
        fallback = market == "spot_fallback"
        kept = (
            hit >= job["confidence"] - HIT_SLACK
            and (not fallback or replayed <= (1 + FALLBACK_COST) * fitted)
            and not replayed > (1 + ALTERNATIVE_COST) * alternative
        )  # never worse than promised
        # and not far better either
        ok = kept and (not fallback or replayed >= (1 - FALLBACK_COST) * fitted)
        rows.append(
            {
                "scenario": path.name,
                "workload": name,
                "market": market,
                "nodes": "/".join(map(str, sorted(job["nodes"]))),
                "confidence": job["confidence"],
                "p_fitted": min(job["p"]),
                "hit_held_out": hit,
                "fitted_usd": fitted,
                "replayed_usd": replayed,
                "on_demand_usd": alternative,
                "samples": job["samples"],
                "kept": kept,
                "ok": ok,
            }
        )
    return rows


def _assignments(loaded) -> list[dict]:
    plan = make_plan(loaded, time_limit_s=30)
    return (
        assignments(plan, alternatives=0)
        if plan.result is not None and plan.result.solved
        else []
    )


def shipped_examples() -> list[Path]:
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    return [p for p in paths if not is_quarter(load_yaml(p))]


def _usd(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}"


def _ratio(a: float, b: float) -> str:
    return "-" if math.isnan(b) else f"{a / b:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument(
        "--in-sample", action="store_true", help="plan and replay on every trace"
    )
    parser.add_argument("scenarios", nargs="*", type=Path)
    args = parser.parse_args()
    rows = [
        r
        for path in (args.scenarios or shipped_examples())
        for r in run(path, args.folds, args.in_sample)
    ]
    print(
        f"{'scenario':26} {'workload':18} {'market':13} {'nodes':>5} {'conf':>5} {'P fit':>6} "
        f"{'replayed' if args.in_sample else 'held-out':>8} "
        f"{'fitted $':>10} {'replayed $':>10} {'ratio':>6} {'on-demand $':>11} {'vs od':>6}  ok"
    )
    for r in rows:
        if "skipped" in r:
            print(f"{r['scenario']:26} {r['workload']:18} {r['skipped']}")
            continue
        print(
            f"{r['scenario']:26} {r['workload']:18} {r['market']:13} {r['nodes']:>5} {r['confidence']:5.2f} "
            f"{r['p_fitted']:6.3f} {r['hit_held_out']:8.3f} {r['fitted_usd']:10,.0f} {r['replayed_usd']:10,.0f} "
            f"{r['replayed_usd'] / r['fitted_usd']:6.2f} {_usd(r['on_demand_usd']):>11} "
            f"{_ratio(r['replayed_usd'], r['on_demand_usd']):>6}  {'yes' if r['ok'] else 'NO'}"
        )
    checked = [r for r in rows if "ok" in r]
    where = (
        "every trace"
        if args.in_sample
        else f"held-out zones ({args.folds} folds); hit rates pooled over folds"
    )
    print(
        f"\n{sum(r['ok'] for r in checked)} of {len(checked)} spot and spot_fallback jobs keep their promise on "
        f"{where}, weighted by replays"
    )


if __name__ == "__main__":
    main()
