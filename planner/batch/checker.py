"""An independent checker of `planner batch --format json` schedules.

It re-reads the quarter (runs, reservations, limits) and the catalog and checks the schedule
from first principles, walking the horizon hour by hour. It shares no code with `batch.py`,
`batch/model.py`, `candidates/generate.py` or `solve/model.py` (only the single-plan checker's placement
and stated-memory rules): times are compared as date-times (not as
model steps), quotas and node limits are summed over the runs running at each hour, and the
money is added up again from the rows of the schedule. A schedule either satisfies the quarter
as written, or `check_schedule` names every way it does not.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict

from planner.load.quarter import LoadedQuarter
from planner.schema.endpoint import weekdays_of
from planner.schema.quarter import as_scenario
from planner.solve.assignment_checks import (
    number,
    placement_violations,
    size_violations,
    stated_memory_floor,
)
from planner.solve.checker import check_endpoint, one_entry_each, over_node_limits

SOLVED = ("OPTIMAL", "FEASIBLE")
HALF_CENT = 0.005
"""Every cost in the JSON is rounded to the cent, so a sum of n of them may drift by n half cents."""
RUN_KEYS = {
    "run",
    "scheduled",
    "start",
    "end",
    "provider",
    "region",
    "instance_type",
    "nodes",
    "gpus",
    "market",
    "expected_wall_h",
    "p_deadline",
    "cost_usd",
}
RESERVATION_KEYS = {
    "provider",
    "region",
    "instance_type",
    "nodes",
    "start",
    "end",
    "cost_usd",
    "utilisation",
}
TOP_KEYS = {"status", "objective_usd", "bound_usd", "reservations", "runs", "months"}


def _time(value) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def _hours(delta: dt.timedelta) -> float:
    return delta.total_seconds() / 3600


def _tolerance(items: int) -> float:
    return HALF_CENT * (items + 1) + 1e-9


def _month_start(moment: dt.datetime) -> dt.datetime:
    return dt.datetime(moment.year, moment.month, 1, tzinfo=dt.UTC)


def _next_month(moment: dt.datetime) -> dt.datetime:
    return dt.datetime(
        moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=dt.UTC
    )


def _overlap_h(
    a0: dt.datetime, a1: dt.datetime, b0: dt.datetime, b1: dt.datetime
) -> float:
    return max(0.0, _hours(min(a1, b1) - max(a0, b0)))


def _check_run(loaded: LoadedQuarter, run, r: dict, offers: dict) -> list[str]:
    """One scheduled run on its own: window, offer, GPUs, market, memory."""
    quarter, catalog = loaded.quarter, loaded.catalog
    horizon = quarter.horizon
    out: list[str] = []

    def bad(message: str) -> None:
        out.append(f"{run.name}: {message}")

    missing = RUN_KEYS - set(r)
    if missing:
        bad(f"missing keys {sorted(missing)}")
        return out
    start, end = _time(r["start"]), _time(r["end"])
    if end <= start:
        bad(f"ends ({end.isoformat()}) before it starts ({start.isoformat()})")
    release = run.release or horizon.start
    due = run.due or horizon.end
    if start < max(release, horizon.start):
        bad(
            f"starts {start.isoformat()} before its release {max(release, horizon.start).isoformat()}"
        )
    if end > min(due, horizon.end):
        bad(f"ends {end.isoformat()} after its due {min(due, horizon.end).isoformat()}")
    step = loaded.step_h
    for label, moment in (("start", start), ("end", end)):
        steps = _hours(moment - horizon.start) / step
        if abs(steps - round(steps)) > 1e-6:
            bad(f"{label} {moment.isoformat()} is not on the {step:g} h step grid")
    key = f"{r['provider']}/{r['region']}/{r['instance_type']}"
    offer = offers.get(key)
    if offer is None:
        bad(f"offer {key} is not in the quarter's catalogs")
        return out
    nodes, gpus = int(r["nodes"]), int(r["gpus"])
    for message in size_violations(run, offer, key, nodes, gpus):
        bad(message)
    out += [f"{run.name}: {m}" for m in placement_violations(run, offer, catalog)]
    market = r["market"]
    if market != "reserved" and not run.allows_market(market):
        bad(f"market {market} is ruled out by allow.markets/forbid.markets")
    if market in ("spot", "spot_fallback"):
        if number(offer["spot_usd_h"]) is None:
            bad(f"{market}, but {key} has no spot price")
        if run.interruption_tolerance == "none":
            bad(f"{market}, but interruption_tolerance is none")
        if market == "spot_fallback" and number(offer["on_demand_usd_h"]) is None:
            bad(f"spot_fallback, but {key} has no on-demand price to fall back to")
    elif market == "on_demand":
        if number(offer["on_demand_usd_h"]) is None:
            bad(f"on-demand, but {key} has no on-demand price")
    elif market == "reserved":
        terms = [res for res in quarter.reservations if res.offer == key]
        if not terms:
            bad(f"reserved, but no reservation is offered for {key}")
        elif not any(res.start <= start and end <= res.end for res in terms):
            bad(
                f"reserved on {key} from {start.isoformat()} to {end.isoformat()}, outside every reservation term"
            )
    else:
        bad(f"unknown market {market!r}")
    floor = stated_memory_floor(run, max(gpus, 1))
    vram = float(offer["gpu_vram_gib"])
    if floor is not None and floor * (1 + quarter.defaults.vram_headroom) > vram * (
        1 + 1e-9
    ):
        headroom = quarter.defaults.vram_headroom
        bad(
            f"needs {floor:g} GiB per GPU (+{headroom:.0%} headroom), {offer['gpu']} has {vram:g}"
        )
    if float(r["cost_usd"]) < 0 or float(r["expected_wall_h"]) <= 0:
        bad(
            f"cost {r['cost_usd']} / expected wall time {r['expected_wall_h']} out of range"
        )
    if not 0 <= float(r["p_deadline"]) <= 1 + 1e-9:
        bad(f"p_deadline {r['p_deadline']} is not a probability")
    elif float(r["p_deadline"]) < quarter.defaults.deadline_confidence - 1e-9:
        bad(
            f"p_deadline {r['p_deadline']} below deadline_confidence {quarter.defaults.deadline_confidence}"
        )
    return out


def _ticks(loaded: LoadedQuarter, scheduled: list[dict]) -> list[dt.datetime]:
    """Every hour of the horizon, plus every moment a run starts (usage only rises there)."""
    horizon = loaded.quarter.horizon
    ticks = set()
    moment = horizon.start
    while moment < horizon.end:
        ticks.add(moment)
        moment += dt.timedelta(hours=1)
    ticks.update(_time(r["start"]) for r in scheduled)
    ticks.update(res.start for res in loaded.quarter.reservations)
    return sorted(ticks)


def _endpoint_users(
    endpoints: list[dict], t: dt.datetime, offers: dict
) -> list[tuple[dict, str]]:
    """The endpoints' pools running at `t` (the traffic period of its weekday and hour), as run-like rows."""
    hour = t.hour + t.minute / 60
    out = []
    for e in endpoints:
        if not _time(e["start"]) <= t < _time(e["end"]):
            continue
        for period in e["periods"]:
            first, _, last = period["hours"].partition("-")
            if not float(first) <= hour < float(last) or t.weekday() not in weekdays_of(
                period.get("days", "daily")
            ):
                continue
            for p in period["pools"]:
                key = f"{p['provider']}/{p['region']}/{p['instance_type']}"
                if key in offers and p["nodes"]:
                    out.append(
                        (
                            {
                                "run": e["workload"],
                                "provider": p["provider"],
                                "market": p["market"],
                                "nodes": int(p["nodes"]),
                                "gpus": int(p["nodes"])
                                * int(offers[key]["gpus_per_node"]),
                                "reservation": p.get("reservation"),
                            },
                            key,
                        )
                    )
    return out


def _capacity_over_time(
    loaded: LoadedQuarter,
    scheduled: list[dict],
    bought: list[int],
    offers: dict,
    endpoints: list[dict] = (),
) -> list[str]:
    """Walk the horizon hour by hour: quotas, node limits, reserved nodes (runs and endpoints' pools)."""
    quarter, catalog = loaded.quarter, loaded.catalog
    c = quarter.constraints
    out: list[str] = []
    seen: set[str] = set()

    def report(tag: str, message: str) -> None:
        if tag not in seen:  # one line per limit, at the first hour it breaks
            seen.add(tag)
            out.append(message)

    spans = [
        (
            r,
            _time(r["start"]),
            _time(r["end"]),
            f"{r['provider']}/{r['region']}/{r['instance_type']}",
        )
        for r in scheduled
    ]
    for t in _ticks(loaded, scheduled):
        active = [
            (r, key)
            for r, start, end, key in spans
            if start <= t < end and key in offers
        ]
        active += _endpoint_users(endpoints, t, offers)
        if not active:
            continue
        for quota_key, quota in sorted(c.gpu_quotas.items()):
            provider, _, gpu = quota_key.partition("/")
            users = [
                (r["run"], int(r["gpus"]))
                for r, key in active
                if r["provider"] == provider
                and (not gpu or catalog.gpu_matches(offers[key]["gpu"], gpu))
            ]
            used = sum(n for _, n in users)
            if used > quota:
                detail = ", ".join(f"{name} {n}" for name, n in users)
                report(
                    f"quota {quota_key}",
                    f"quota {quota_key}: {used} GPUs at {t.isoformat()} ({detail}) > {quota}",
                )
        usage: dict[tuple, list] = defaultdict(list)
        for r, key in active:
            if r["market"] == "reserved":
                continue
            usage[(key, r["market"] if c.node_limits_per_market else "any")].append(
                (r["run"], int(r["nodes"]))
            )
        for where, used, cap, detail in over_node_limits(usage, c, offers):
            report(
                f"node {where}",
                f"node limit {where}: {used} nodes at {t.isoformat()} ({detail}) > {cap}",
            )
        reserved: dict[str, list] = defaultdict(list)
        for r, key in active:
            if r["market"] == "reserved":
                reserved[key].append((r["run"], int(r["nodes"])))
            if r.get("reservation"):
                term = next(
                    (
                        res
                        for res in quarter.reservations
                        if res.label == r["reservation"]
                    ),
                    None,
                )
                if term is None or term.offer != key or not term.start <= t < term.end:
                    report(
                        f"reservation of {r['run']}",
                        f"{r['run']}: pool on reservation {r['reservation']!r} "
                        f"at {t.isoformat()}, which is not {key} in its term then",
                    )
        for key, users in sorted(reserved.items()):
            have = sum(
                n
                for res, n in zip(quarter.reservations, bought)
                if res.offer == key and res.start <= t < res.end
            )
            used = sum(n for _, n in users)
            if used > have:
                detail = ", ".join(f"{name} {n}" for name, n in users)
                report(
                    f"reserved {key}",
                    f"reservation {key}: {used} reserved nodes at {t.isoformat()} ({detail}) "
                    f"> {have} bought",
                )
    return out


def _check_reservations(
    loaded: LoadedQuarter,
    entries: list[dict],
    scheduled: list[dict],
    endpoints: list[dict] = (),
) -> tuple[list[str], list[int]]:
    """Each reservation option: bought nodes within min..max, inside its term, priced for the term.
    Returns the problems and the nodes bought per option (in the quarter's order)."""
    quarter = loaded.quarter
    out: list[str] = []
    if len(entries) != len(quarter.reservations):
        out.append(
            f"{len(entries)} reservation entries for {len(quarter.reservations)} reservation options"
        )
    bought = []
    for i, res in enumerate(quarter.reservations):
        if i >= len(entries):
            bought.append(0)
            continue
        e = entries[i]
        missing = RESERVATION_KEYS - set(e)
        if missing:
            out.append(f"reservation {res.label}: missing keys {sorted(missing)}")
            bought.append(0)
            continue
        key = f"{e['provider']}/{e['region']}/{e['instance_type']}"
        if key != res.offer:
            out.append(f"reservation {res.label}: entry {i} is for {key}")
        nodes = int(e["nodes"])
        bought.append(nodes)
        if not res.min_nodes <= nodes <= res.max_nodes:
            out.append(
                f"reservation {res.label}: {nodes} nodes outside {res.min_nodes}..{res.max_nodes}"
            )
        start, end = _time(e["start"]), _time(e["end"])
        if start < res.start or end > res.end or end <= start:
            out.append(
                f"reservation {res.label}: {start.isoformat()}..{end.isoformat()} is not inside its term "
                f"{res.start.isoformat()}..{res.end.isoformat()}"
            )
        want = nodes * res.price_per_node_h * _hours(res.end - res.start)
        if abs(float(e["cost_usd"]) - want) > _tolerance(1):
            out.append(
                f"reservation {res.label}: cost_usd {e['cost_usd']} but {nodes} nodes x "
                f"${res.price_per_node_h:g}/h x {_hours(res.end - res.start):g} h = {want:.4f}"
            )
        utilisation = float(e["utilisation"])
        if not 0 <= utilisation <= 1 + 1e-9:
            out.append(
                f"reservation {res.label}: utilisation {utilisation} outside 0..1"
            )
        alone = (
            sum(1 for other in quarter.reservations if other.offer == res.offer) == 1
        )
        if alone and nodes and end > start:
            used = sum(
                int(r["nodes"]) * _hours(_time(r["end"]) - _time(r["start"]))
                for r in scheduled
                if r["market"] == "reserved"
                and f"{r['provider']}/{r['region']}/{r['instance_type']}" == key
            )
            used += sum(
                max(
                    sum(
                        p["nodes"]
                        for p in period["pools"]
                        if p.get("reservation") == res.label
                    )
                    for period in e["periods"]
                )
                * _hours(_time(e["end"]) - _time(e["start"]))
                for e in endpoints
            )  # an endpoint holds its busiest period's nodes for its whole window
            want_u = used / (nodes * _hours(end - start))
            if abs(utilisation - want_u) > 1e-3:
                out.append(
                    f"reservation {res.label}: utilisation {utilisation} but reserved runs use {want_u:.4f}"
                )
    return out, bought


def _check_money(
    loaded: LoadedQuarter, schedule: dict, scheduled: list[dict], bought: list[int]
) -> list[str]:
    quarter = loaded.quarter
    horizon, c = quarter.horizon, quarter.constraints
    out: list[str] = []
    endpoints = schedule.get("endpoints") or []
    run_costs = [float(r["cost_usd"]) for r in scheduled] + [
        float(e["cost_usd"]) for e in endpoints
    ]
    reservation_costs = [
        n * res.price_per_node_h * _hours(res.end - res.start)
        for res, n in zip(quarter.reservations, bought)
    ]
    total = math.fsum(run_costs) + math.fsum(reservation_costs)
    items = len(run_costs) + len(reservation_costs)
    objective = schedule.get("objective_usd")
    if objective is None or abs(float(objective) - total) > _tolerance(items):
        out.append(
            f"objective_usd {objective} but runs and reservations cost {total:.4f}"
        )
    bound = schedule.get("bound_usd")
    if (
        bound is not None
        and objective is not None
        and float(bound) > float(objective) + 1e-9
    ):
        out.append(f"bound_usd {bound} above objective_usd {objective}")
    if c.budget is not None and total > c.budget + _tolerance(items):
        out.append(
            f"budget: runs and reservations cost ${total:,.2f} > ${c.budget:,.2f}"
        )
    # Calendar months: a run counts in the month it starts, a reservation by its hours in the month.
    months: dict[str, float] = {}
    counted: dict[str, int] = {}
    cursor = _month_start(horizon.start)
    while cursor < horizon.end:
        following = _next_month(cursor)
        label = cursor.strftime("%Y-%m")
        runs_here = [
            float(r["cost_usd"])
            for r in scheduled
            if cursor <= _time(r["start"]) < following
        ]
        runs_here += [
            float(e["cost_usd"])
            * _overlap_h(cursor, following, _time(e["start"]), _time(e["end"]))
            / _hours(_time(e["end"]) - _time(e["start"]))
            for e in endpoints
        ]  # spread evenly
        reserved_here = [
            n * res.price_per_node_h * _overlap_h(cursor, following, res.start, res.end)
            for res, n in zip(quarter.reservations, bought)
        ]
        months[label] = math.fsum(runs_here) + math.fsum(reserved_here)
        counted[label] = len(runs_here) + sum(1 for x in reserved_here if x)
        cursor = following
    if c.monthly_budget is not None:
        for label, spent in months.items():
            if spent > c.monthly_budget + _tolerance(counted[label]):
                out.append(
                    f"monthly budget {label}: ${spent:,.2f} > ${c.monthly_budget:,.2f}"
                )
    entries = schedule.get("months") or []
    reported = {e.get("month"): float(e.get("cost_usd", math.nan)) for e in entries}
    for label, value in reported.items():
        if label not in months:
            out.append(f"months: {label} is not a month of the horizon")
        elif not abs(value - months[label]) <= _tolerance(counted[label] + 1):
            out.append(
                f"months: {label} reports {value} but its runs and reservation hours cost {months[label]:.4f}"
            )
    for label, value in months.items():
        if label not in reported and abs(value) > HALF_CENT:
            out.append(f"months: {label} is missing (costs {value:.2f})")
    if objective is not None and entries:
        summed = math.fsum(reported.values())
        if abs(summed - float(objective)) > _tolerance(len(entries) + items):
            out.append(f"months sum to {summed:.2f} but objective_usd is {objective}")
    return out


def _check_endpoints(loaded: LoadedQuarter, endpoints: list[dict]) -> list[str]:
    """One entry per endpoint of the quarter, over its window (release to due), carrying its traffic."""
    quarter = loaded.quarter
    workloads = {w.name: w for w in as_scenario(quarter).workloads if w.serving}
    out = one_entry_each(
        endpoints, "workload", workloads, "endpoint entry", "endpoint entries"
    )
    for e in endpoints:
        run = next(
            (r for r in quarter.runs if r.name == e.get("workload") and r.serving), None
        )
        if run is None:
            continue
        start, end = (
            run.release or quarter.horizon.start,
            run.due or quarter.horizon.end,
        )
        if _time(e["start"]) > start or _time(e["end"]) < end:
            out.append(
                f"{run.name}: serves {e['start']}..{e['end']}, not its window {start.isoformat()}.."
                f"{end.isoformat()}"
            )
        out += check_endpoint(e, workloads[run.name])
    return out


def check_schedule(loaded: LoadedQuarter, schedule: dict) -> list[str]:
    """Every way `schedule` (the JSON contract of `planner batch`) breaks the quarter; [] when valid."""
    quarter = loaded.quarter
    runs = {run.name: run for run in quarter.runs if not run.serving}
    status = schedule.get("status")
    out = (
        [f"missing top-level keys {sorted(TOP_KEYS - set(schedule))}"]
        if TOP_KEYS - set(schedule)
        else []
    )
    entries = schedule.get("runs") or []
    if status not in SOLVED:
        if any(e.get("scheduled") for e in entries):
            out.append(f"status {status} but runs are scheduled")
        if schedule.get("reservations"):
            out.append(f"status {status} but reservations are bought")
        return out
    out += one_entry_each(entries, "run", runs, "entry", "entries")
    scheduled = [e for e in entries if e.get("scheduled") and e.get("run") in runs]
    by_name = {e["run"]: e for e in scheduled}
    offers = {row["key"]: row for row in loaded.catalog.offers.to_dict("records")}
    try:
        for run in runs.values():
            if run.name not in by_name:
                if run.required:
                    out.append(f"{run.name}: required but not scheduled")
                continue
            r = by_name[run.name]
            out += _check_run(loaded, run, r, offers)
            for before in run.after:
                if before not in by_name:
                    out.append(
                        f"{run.name}: scheduled, but {before} (which it comes after) is not"
                    )
                elif _time(r["start"]) < _time(by_name[before]["end"]):
                    out.append(
                        f"{run.name}: starts {r['start']} before {before} ends {by_name[before]['end']}"
                    )
        endpoints = schedule.get("endpoints") or []
        out += _check_endpoints(loaded, endpoints)
        problems, bought = _check_reservations(
            loaded, schedule.get("reservations") or [], scheduled, endpoints
        )
        out += problems
        out += _capacity_over_time(
            loaded,
            [r for r in scheduled if not RUN_KEYS - set(r)],
            bought,
            offers,
            endpoints,
        )
        out += _check_money(loaded, schedule, scheduled, bought)
    except (
        KeyError,
        TypeError,
        ValueError,
    ) as exc:  # not the documented contract at all
        out.append(f"malformed schedule: missing or mistyped field {exc!r}")
    return out
