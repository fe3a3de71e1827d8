"""An independent checker of `planner solve --format json` plans (STYLE habit 10).

It re-reads the scenario and the catalog and checks each assignment and the shared limits
from first principles. It shares no code with `model.py`, `search.py`, `candidates/generate.py` or `pipeline.py`, so a
bug there cannot hide itself here: a plan either satisfies the scenario as written, or
`check_plan` names every way it does not. Each job's assignment is checked in `assignment_checks.py`;
here the plan as a whole, its endpoints and the shared limits.
"""

from __future__ import annotations

import math
from collections import defaultdict

from planner.load.scenario import LoadedScenario
from planner.schema.endpoint import WEEKDAYS, weekdays_of
from planner.schema.workload import Workload
from planner.solve.assignment_checks import check_assignment, close, number
from planner.solve.purchase_checks import PURCHASE_MARKETS, option_caps

SOLVED = ("OPTIMAL", "FEASIBLE")
CENT = 0.01
"""cost-model §8: costs enter CP-SAT as integer cents, so sums may drift by half a cent per assignment."""


def one_entry_each(
    entries: list[dict], key: str, names, noun: str, plural: str
) -> list[str]:
    """Exactly one entry per name (`entries[i][key]`), and none for a name not in `names`."""
    counts: dict = defaultdict(int)
    for entry in entries:
        counts[entry.get(key)] += 1
    out = [
        f"{name}: {counts[name]} {plural}, expected exactly one"
        for name in names
        if counts[name] != 1
    ]
    return out + [
        f"{noun} for unknown {key} {name!r}" for name in counts if name not in names
    ]


def over_node_limits(
    usage: dict[tuple, list], constraints, offers: dict
) -> list[tuple[str, int, int, str]]:
    """(offer [and market], nodes used, its limit, who uses them) for each offer over its node limit: the
    scenario's, else the catalog's max_nodes. `usage` maps (offer key, market or "any") to (name, nodes)."""
    out = []
    for (key, market), users in sorted(usage.items()):
        caps = [
            cap
            for cap in (
                constraints.node_limits.get(key),
                number(offers[key]["max_nodes"]),
            )
            if cap is not None
        ]
        used = sum(n for _, n in users)
        if caps and used > min(caps):
            out.append(
                (
                    key if market == "any" else f"{key} ({market})",
                    used,
                    int(min(caps)),
                    ", ".join(f"{name} {n}" for name, n in users),
                )
            )
    return out


def _endpoint_periods(plan: dict, offers: dict) -> list[tuple[str, list]]:
    """Endpoint pools that run at once, per weekday (when a profile is weekly) and span of hours where the
    periods of all endpoints change."""
    endpoints = plan.get("endpoints") or []
    cuts = sorted(
        {
            float(x)
            for e in endpoints
            for p in e["periods"]
            for x in p["hours"].split("-")
        }
    )
    weekly = any("days" in p for e in endpoints for p in e["periods"])
    out = []
    for day in range(7) if weekly else [None]:
        for start, end in zip(cuts, cuts[1:]):
            pools = [
                (
                    e["workload"],
                    pool,
                    offers[
                        f"{pool['provider']}/{pool['region']}/{pool['instance_type']}"
                    ],
                )
                for e in endpoints
                for p in e["periods"]
                if (day is None or day in weekdays_of(p.get("days", "daily")))
                and float(p["hours"].split("-")[0]) <= start
                and end <= float(p["hours"].split("-")[1])
                for pool in p["pools"]
            ]
            out.append(
                (
                    ("" if day is None else WEEKDAYS[day] + " ") + f"{start:g}-{end:g}",
                    pools,
                )
            )
    return out


def _shared_limits(loaded: LoadedScenario, plan: dict, offers: dict) -> list[str]:
    scenario, catalog = loaded.scenario, loaded.catalog
    c = scenario.constraints
    placed = [
        (a, offers[k])
        for a in plan["assignments"]
        if (k := f"{a['provider']}/{a['region']}/{a['instance_type']}") in offers
    ]
    out: list[str] = []
    periods = _endpoint_periods(plan, offers)
    for key, quota in sorted(c.gpu_quotas.items()):
        provider, _, gpu = key.partition("/")
        users = [
            (a["workload"], int(a["gpus"]))
            for a, _ in placed
            if a["provider"] == provider
            and (not gpu or catalog.gpu_matches(a["gpu"], gpu))
        ]
        for hours, pools in periods or [("", [])]:
            at_once = users + [
                (w, int(p["nodes"]) * int(offer["gpus_per_node"]))
                for w, p, offer in pools
                if p["provider"] == provider
                and (not gpu or catalog.gpu_matches(p["gpu"], gpu))
            ]
            used = sum(n for _, n in at_once)
            if used > quota:
                detail = ", ".join(f"{w} {n}" for w, n in at_once)
                out.append(
                    f"quota {key}{' ' + hours if hours else ''}: {used} GPUs ({detail}) > {quota}"
                )
    # Node limits: the scenario's and the catalog's max_nodes, per market if asked.
    for _, pools in periods or [("", [])]:
        usage: dict[tuple, list] = defaultdict(list)
        bought: dict[str, list] = defaultdict(list)  # purchase option -> its users
        for a, offer in placed:
            if a["market"] in PURCHASE_MARKETS:  # an option is a pool of its own
                bought[(a.get("purchase") or {}).get("name", "")].append(
                    (a["workload"], int(a["nodes"]))
                )
                continue
            market = a["market"] if c.node_limits_per_market else "any"
            usage[(offer["key"], market)].append((a["workload"], int(a["nodes"])))
        caps = option_caps(loaded.scenario, offers)
        for name, users in sorted(bought.items()):
            used, cap = sum(n for _, n in users), caps.get(name)
            if cap is not None and used > cap:
                detail = ", ".join(f"{w} {n}" for w, n in users)
                out.append(f"purchase {name}: {used} nodes ({detail}) > {cap}")
        for w, p, offer in pools:
            usage[
                (offer["key"], p["market"] if c.node_limits_per_market else "any")
            ].append((w, int(p["nodes"])))
        for where, used, cap, detail in over_node_limits(usage, c, offers):
            out.append(f"node limit {where}: {used} nodes ({detail}) > {cap}")
    total = math.fsum(
        [a["expected"]["cost_usd"] for a in plan["assignments"]]
        + [e["cost_usd"] for e in plan.get("endpoints") or []]
    )
    terms = len(plan["assignments"]) + sum(
        len(p["pools"]) * 2 for e in plan.get("endpoints") or [] for p in e["periods"]
    )
    if c.budget is not None and total > c.budget + CENT / 2 * terms:
        out.append(f"budget: expected total ${total:,.2f} > ${c.budget:,.2f}")
    by_name = {a["workload"]: a for a in plan["assignments"]}
    for label, groups, part in (
        ("same_region", c.same_region, lambda a: f"{a['provider']}/{a['region']}"),
        ("same_provider", c.same_provider, lambda a: a["provider"]),
    ):
        for group in groups:
            seen = {w: part(by_name[w]) for w in group if w in by_name}
            if len(set(seen.values())) > 1:
                out.append(
                    f"{label} {list(group)}: "
                    + ", ".join(f"{w} on {v}" for w, v in seen.items())
                )
    objective = plan.get("objective_usd")
    if objective is None or abs(objective - total) > CENT / 2 + 1e-6 * total:
        out.append(
            f"objective_usd {objective} but the assignments' costs sum to {total:.4f}"
        )
    bound = plan.get("bound_usd")
    if bound is not None and objective is not None and bound > objective + 1e-9:
        out.append(f"bound_usd {bound} above objective_usd {objective}")
    return out


def check_endpoint(e: dict, workload: Workload) -> list[str]:
    """An endpoint's periods carry the scenario's traffic: every bucket routed whole, each pool's load within
    the nodes it counts, spot nodes counted no more than the binomial quantile allows, one spot pool, at most
    `max_pools` pools and `max_providers` providers."""
    out = []
    periods = workload.traffic.periods
    shares = [b.share for b in workload.traffic.buckets]
    if [(p["hours"], p.get("days", "daily")) for p in e["periods"]] != [
        (p.hours, p.days) for p in periods
    ]:
        return [
            f"{e['workload']}: periods {[p['hours'] for p in e['periods']]} are not the traffic's"
        ]
    spot = {
        (p["provider"], p["region"], p["instance_type"], p["tensor_parallel"])
        for period in e["periods"]
        for p in period["pools"]
        if p["market"] == "spot" and p["nodes"]
    }
    if len(spot) > 1:
        out.append(f"{e['workload']}: {len(spot)} spot pools, at most one")
    running = {
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
    if len(running) > workload.max_pools:
        out.append(
            f"{e['workload']}: {len(running)} pools, max_pools is {workload.max_pools}"
        )
    if len({pool[0] for pool in running}) > workload.max_providers:
        out.append(
            f"{e['workload']}: {len({pool[0] for pool in running})} providers, max_providers is "
            f"{workload.max_providers}"
        )
    operating = len(running) * workload.pool_usd_per_h * workload.duration
    if not close(e.get("operating_usd", 0.0), operating, abs_tol=CENT / 2):
        out.append(
            f"{e['workload']}: operating_usd {e.get('operating_usd', 0.0)} but {len(running)} pools at "
            f"${workload.pool_usd_per_h:g}/h over {workload.duration:g} h cost {operating:.2f}"
        )
    nodes_by_pool = {}
    for period, wanted in zip(e["periods"], periods):
        rates = [wanted.requests_per_s * s for s in shares]
        for b, rate in enumerate(rates):
            routed = math.fsum(p["share_of_requests"][b] for p in period["pools"])
            if rate > 0 and not close(routed, 1.0, abs_tol=1e-9):
                out.append(
                    f"{e['workload']} {period['hours']}: bucket {b} routed {routed:.4f} of its requests"
                )
        for p in period["pools"]:
            load = math.fsum(
                rate * p["share_of_requests"][b] / p["node_requests_per_s"][b]
                for b, rate in enumerate(rates)
                if p["share_of_requests"][b]
            )
            if load > p["nodes_counted"] * (1 + 1e-6) + 1e-9:
                out.append(
                    f"{e['workload']} {period['hours']} {p['instance_type']}: load {load:.4f} nodes "
                    f"> {p['nodes_counted']} counted"
                )
            if p["nodes_counted"] > p["nodes"] or (
                p["market"] == "spot"
                and _kept_probability(
                    p["nodes"],
                    p["away_share"],
                    p["nodes_counted"],
                    p.get("zone_away_share", 0.0),
                )
                < workload.availability - 1e-9
            ):
                out.append(
                    f"{e['workload']} {period['hours']} {p['instance_type']}: counts {p['nodes_counted']} "
                    f"of {p['nodes']} nodes, more than it keeps at availability {workload.availability}"
                )
            nodes_by_pool.setdefault(
                (p["instance_type"], p["region"], p["market"]), set()
            ).add(p["nodes"])
    if not workload.autoscale and any(len(v) > 1 for v in nodes_by_pool.values()):
        out.append(
            f"{e['workload']}: node counts change between periods without autoscale"
        )
    return out


def _kept_probability(
    nodes: int, away: float, counted: int, zone_away: float = 0.0
) -> float:
    """P(at least `counted` of `nodes` are up), each away a share `away` independently and all of them a share
    `zone_away` (a zone-wide preemption and the wait for capacity). SciPy's binomial tail (an incomplete beta
    function): summing the terms one by one passes floats' range past a thousand nodes or so."""
    from scipy.stats import binom

    alone = float(binom.sf(counted - 1, nodes, 1 - away))
    return (1 - zone_away) * alone + (zone_away if counted == 0 else 0.0)


def _unsolved_violations(plan: dict, workloads: dict) -> list[str]:
    """A plan without a solution has no assignments, and an infeasible one names known workloads as why."""
    status, assignments = plan.get("status"), plan.get("assignments") or []
    out = [f"status {status} but {len(assignments)} assignments"] if assignments else []
    if status == "INFEASIBLE":
        named = {r.get("workload") for r in plan.get("infeasible") or []}
        if not named:
            out.append("status INFEASIBLE without any reason")
        out += [
            f"infeasible reason names unknown workload {w!r}"
            for w in sorted(named - set(workloads), key=str)
        ]
    return out


def check_plan(loaded: LoadedScenario, plan: dict) -> list[str]:
    """Every way `plan` (the JSON contract of `planner solve`) breaks the scenario; [] when valid."""
    scenario = loaded.scenario
    workloads = {w.name: w for w in scenario.workloads}
    status = plan.get("status")
    if status not in SOLVED:
        return _unsolved_violations(plan, workloads)
    assignments = plan.get("assignments") or []
    violations = []
    if plan.get("infeasible"):
        violations.append(
            f"status {status} with infeasible reasons {plan['infeasible']}"
        )
    jobs = {n: w for n, w in workloads.items() if not w.serving}
    violations += one_entry_each(
        assignments, "workload", jobs, "assignment", "assignments"
    )
    violations += one_entry_each(
        plan.get("endpoints") or [],
        "workload",
        [n for n, w in workloads.items() if w.serving],
        "endpoint",
        "endpoints",
    )
    offers = {row["key"]: row for row in loaded.catalog.offers.to_dict("records")}
    try:
        for a in assignments:
            if a["workload"] in workloads:
                violations += check_assignment(
                    loaded, a, workloads[a["workload"]], offers
                )
        for e in plan.get("endpoints") or []:
            if e["workload"] in workloads:
                violations += check_endpoint(e, workloads[e["workload"]])
        return violations + _shared_limits(loaded, plan, offers)
    except (KeyError, TypeError) as exc:  # not the documented contract at all
        return violations + [f"malformed plan: missing or mistyped field {exc}"]
