"""`planner batch` end to end: every schedule through the independent hour-by-hour checker
(`planner/batch/checker.py`), CP-SAT against brute force on small quarters, budget-driven
dropping by priority, reserved capacity bought exactly when it pays off, a binding monthly
budget, bad input, and the CLI's formats and JSON contract.

Quarters are small: one Lambda region (on-demand only) or one RunPod region (with spot), a few
instance types through `allow`, stated memory and GPU-hours on a reference GPU, a horizon of a
few days in steps of 12 or 24 hours, so every candidate x start step x reservation size can be
enumerated.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import itertools
import json
import math
import random
import subprocess
import sys
import textwrap
import threading
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SCENARIOS

from planner.batch import bound as batch_bound
from planner.batch import pipeline, tie_break
from planner.batch import search as batch_search
from planner.batch.bound import Relaxation, all_runs_lower_bound_usd, packed, relax
from planner.batch.checker import check_schedule
from planner.batch.contract import batch_json
from planner.batch.greedy import greedy
from planner.batch.model import (
    BatchLimits,
    Pool,
    RunInfo,
    build_batch_model,
    solve_batch,
)
from planner.batch.pipeline import make_batch_plan
from planner.candidates.cache import CandidateCache
from planner.candidates.limits import limit_keys, limits_of
from planner.candidates.offers import apply_overrides
from planner.load.quarter import load_quarter
from planner.report.batch import batch_text
from planner.schema.quarter import QuarterConstraints, as_scenario
from planner.solve.outcome import BatchResult

SOLVED = ("OPTIMAL", "FEASIBLE")
HALF_CENT = 0.005
UTC = dt.UTC
A100 = {"regions": ["us-east-1"], "instance_types": ["gpu_1x_a100_sxm4"]}
A100_OFFER = "lambda/us-east-1/gpu_1x_a100_sxm4"


def _flow(value) -> str:
    """One value in YAML flow style, as the quarters here are written: `[a, b]`, `{k: v}`, `false`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return str(value)


def _entries(items) -> list[str]:
    """A block list of mappings (`runs:`, `reservations:`), one `key: flow value` a line, in dict order."""
    return [
        f"  {'- ' if i == 0 else '  '}{key}: {_flow(value)}"
        for item in items
        for i, (key, value) in enumerate(item.items())
    ]


def quarter_run(
    name: str,
    kind: str,
    gpu_hours,
    *,
    per_gpu="30GiB",
    reference_gpu="A100-80GB",
    gpus=1,
    allow=A100,
    **keys,
) -> dict:
    """One entry of `runs:`: name, kind, memory, work, gpus, then `keys` (release, due, after, required,
    priority, interruption_tolerance...) in the order given, and `allow` last. None leaves gpus or allow out."""
    run = {
        "name": name,
        "kind": kind,
        "memory": {"per_gpu": per_gpu},
        "work": {"gpu_hours": gpu_hours, "reference_gpu": reference_gpu},
    }
    if gpus is not None:
        run["gpus"] = gpus
    run.update(keys)
    if allow is not None:
        run["allow"] = allow
    return run


def quarter_yaml(
    *,
    runs,
    name="quarter",
    catalogs=("lambda",),
    horizon=("2027-01-04", "2027-01-08", "12h"),
    reservations=(),
    constraints=None,
) -> str:
    """The text of a quarter file. `runs` and `reservations` are dicts (runs from `quarter_run`),
    `horizon` is (start, end, step), `constraints` maps each key to its (flow-style) value."""
    start, end, step = horizon
    lines = [
        f"name: {name}",
        f"catalogs: {_flow(catalogs)}",
        f"horizon: {{start: {start}, end: {end}, step: {step}}}",
        "defaults: {estimate_error: 0}  # runs take their estimated time: the cases are worked out by hand on it",
        "runs:",
        *_entries(runs),
    ]
    if reservations:
        lines += ["reservations:", *_entries(reservations)]
    if constraints:
        lines += [
            "constraints:",
            *(f"  {key}: {_flow(value)}" for key, value in constraints.items()),
        ]
    return "\n".join(lines) + "\n"


def as_json(plan) -> dict:
    """The contract exactly as `--format json` writes it (numpy scalars become plain numbers)."""
    return json.loads(json.dumps(batch_json(plan), default=lambda v: v.item()))


def write(directory: Path, text: str, name: str = "quarter.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def solve(directory: Path, text: str, name: str = "quarter.yaml"):
    loaded = load_quarter(write(directory, text, name))
    plan = make_batch_plan(loaded, time_limit_s=20.0, workers=1)
    return loaded, plan, as_json(plan)


def by_run(data: dict) -> dict:
    return {r["run"]: r for r in data["runs"]}


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(UTC)


# ---------------------------------------------------------------- hand-written quarters

CHAIN_GPUS = {"min": 1, "max": 4}
CHAIN_ALLOW = {
    "regions": ["us-east-1"],
    "instance_types": ["gpu_1x_a100_sxm4", "gpu_2x_a100", "gpu_4x_a100"],
}


def chain_quarter(reservations=()) -> str:
    return quarter_yaml(
        name="chain",
        runs=[
            quarter_run("a", "training", 40, gpus=CHAIN_GPUS, allow=CHAIN_ALLOW),
            quarter_run(
                "b", "fine_tuning", 30, gpus=CHAIN_GPUS, after=["a"], allow=CHAIN_ALLOW
            ),
            quarter_run(
                "c",
                "batch_inference",
                20,
                per_gpu="20GiB",
                gpus=CHAIN_GPUS,
                interruption_tolerance="stateless",
                required=False,
                priority=2,
                release="2027-01-05",
                allow=CHAIN_ALLOW,
            ),
        ],
        reservations=reservations,
        constraints={"gpu_quotas": {"lambda": 4}},
    )


CHAIN = chain_quarter()

FOUR_A100 = {"regions": ["us-east-1"], "instance_types": ["gpu_4x_a100"]}
WIDE = quarter_yaml(
    name="wide",
    horizon=("2027-01-04", "2027-01-09", "12h"),
    runs=[
        quarter_run("first", "training", 100, gpus=4, allow=FOUR_A100),
        quarter_run(
            "second",
            "training",
            100,
            gpus=4,
            release="2027-01-04T12:00",
            allow=FOUR_A100,
        ),
    ],
    constraints={"gpu_quotas": {"lambda/A100": 4}},
)

SPOT_ALLOW = {
    "regions": ["CA"],
    "instance_types": [
        "1x_RTXA6000_SECURE",
        "2x_RTXA6000_SECURE",
        "1x_RTXA4500_SECURE",
    ],
}
SPOT = quarter_yaml(
    name="spot-mix",
    catalogs=["runpod"],
    horizon=("2027-01-04", "2027-01-08", "24h"),
    runs=[
        quarter_run(
            name,
            "batch_inference",
            30,
            per_gpu="16GiB",
            gpus={"min": 1, "max": 2},
            interruption_tolerance=tolerance,
            allow=SPOT_ALLOW,
        )
        for name, tolerance in (("eval", "none"), ("gen", "stateless"))
    ],
    constraints={
        "node_limits": {
            "runpod/CA/1x_RTXA6000_SECURE": 1,
            "runpod/CA/2x_RTXA6000_SECURE": 1,
        }
    },
)


def reserved_quarter(term_start: str, term_end: str, price: str) -> str:
    return quarter_yaml(
        name="reserved",
        horizon=("2027-01-04", "2027-01-08", "24h"),
        runs=[quarter_run("train", "training", 40, interruption_tolerance="none")],
        reservations=[
            {
                "offer": A100_OFFER,
                "start": term_start,
                "end": term_end,
                "price_per_node_h": price,
                "max_nodes": 2,
            }
        ],
    )


def tiny_quarter(price: str) -> str:
    runs = [
        quarter_run(
            "pretrain",
            "training",
            3000,
            per_gpu="60GiB",
            gpus={"min": 8, "max": 32},
            allow=None,
            interruption_tolerance="none",
            release="2027-01-04",
            due="2027-01-20",
        ),
        quarter_run(
            "finetune",
            "fine_tuning",
            300,
            per_gpu="40GiB",
            gpus={"min": 8, "max": 16},
            allow=None,
            after=["pretrain"],
            due="2027-01-28",
        ),
        quarter_run(
            "eval",
            "batch_inference",
            50,
            reference_gpu="A10G",
            gpus=4,
            allow=None,
            interruption_tolerance="stateless",
            after=["finetune"],
            required=False,
            priority=3,
        ),
    ]
    reservation = {
        "offer": "aws/us-east-1/p5.48xlarge",
        "start": "2027-01-04",
        "end": "2027-02-01",
        "price_per_node_h": price,
        "max_nodes": 4,
    }
    return quarter_yaml(
        name="tiny-quarter",
        catalogs=["aws", "lambda"],
        horizon=("2027-01-04", "2027-02-01", "6h"),
        runs=runs,
        reservations=[reservation],
        constraints={"gpu_quotas": {"aws": 32}},
    )


@pytest.fixture(scope="module")
def quarters(tmp_path_factory):
    """name -> (loaded, plan, JSON) for the hand-written quarters, solved once with one worker."""
    directory = tmp_path_factory.mktemp("quarters")
    texts = {
        "chain": CHAIN,
        "wide": WIDE,
        "spot": SPOT,
        "reserved": reserved_quarter("2027-01-04", "2027-01-06", "$0.50"),
        "tiny": tiny_quarter("$30"),
        "tiny-cheap": tiny_quarter("$2"),
    }
    return {
        name: solve(directory, text, f"{name}.yaml") for name, text in texts.items()
    }


@pytest.mark.parametrize(
    "name", ["chain", "wide", "spot", "reserved", "tiny", "tiny-cheap"]
)
def test_hand_written_schedules_pass_the_checker(quarters, name):
    loaded, plan, data = quarters[name]
    assert data["status"] == "OPTIMAL", name
    assert check_schedule(loaded, data) == [], name


def test_chain_respects_precedence_release_and_quota(quarters):
    _, _, data = quarters["chain"]
    runs = by_run(data)
    # c is optional with priority 2: room for it
    assert all(r["scheduled"] for r in runs.values())
    assert at(runs["b"]["start"]) >= at(runs["a"]["end"])
    assert at(runs["c"]["start"]) >= at("2027-01-05T00:00+00:00")


def test_quota_by_gpu_family_serialises_the_runs(quarters):
    _, _, data = quarters["wide"]
    first, second = by_run(data)["first"], by_run(data)["second"]
    assert first["gpus"] == second["gpus"] == 4
    # lambda/A100 = 4 GPUs at once: the two 4-GPU runs cannot overlap at any hour.
    assert at(first["end"]) <= at(second["start"]) or at(second["end"]) <= at(
        first["start"]
    )


def test_interruption_tolerance_none_never_on_spot(quarters):
    _, _, data = quarters["spot"]
    runs = by_run(data)
    assert runs["eval"]["market"] != "spot"
    # stateless batch generation: the natural spot workload
    assert runs["gen"]["market"] == "spot"
    for r in runs.values():  # RunPod has no inter-node network: one node per run
        assert r["nodes"] == 1


# ---------------------------------------------------------------- the checker can fail


def broken(data: dict) -> dict:
    return copy.deepcopy(data)


def shift(run: dict, hours: float) -> None:
    for key in ("start", "end"):
        run[key] = (at(run[key]) + dt.timedelta(hours=hours)).isoformat()


def violations(loaded, data: dict) -> str:
    found = check_schedule(loaded, data)
    assert found, "the checker accepted a broken schedule"
    return "\n".join(found)


def test_checker_catches_quota_exceeded_at_some_hour(quarters):
    loaded, _, data = quarters["wide"]
    bad = broken(data)
    first, second = by_run(bad)["first"], by_run(bad)["second"]
    length = at(second["end"]) - at(second["start"])
    assert at(first["end"]) - at(first["start"]) > dt.timedelta(hours=12)
    # `second` moved to start with `first` (or at its own release, 12 h later): 8 A100s at once.
    start = max(at(first["start"]), at("2027-01-04T12:00+00:00"))
    second.update(start=start.isoformat(), end=(start + length).isoformat())
    text = violations(loaded, bad)
    assert "quota lambda/A100: 8 GPUs at" in text


def test_checker_catches_a_run_before_its_release(quarters):
    loaded, _, data = quarters["chain"]
    bad = broken(data)
    c = by_run(bad)["c"]
    # to the horizon start
    shift(c, -(at(c["start"]) - at("2027-01-04T00:00+00:00")).total_seconds() / 3600)
    assert (
        "c: starts 2027-01-04T00:00:00+00:00 before its release 2027-01-05"
        in violations(loaded, bad)
    )


def test_checker_catches_a_run_after_its_due(quarters):
    loaded, _, data = quarters["chain"]
    bad = broken(data)
    b = by_run(bad)["b"]
    shift(b, (at("2027-01-08T00:00+00:00") - at(b["end"])).total_seconds() / 3600 + 12)
    assert "b: ends 2027-01-08T12:00:00+00:00 after its due" in violations(loaded, bad)


def test_checker_catches_precedence_violated(quarters):
    loaded, _, data = quarters["chain"]
    bad = broken(data)
    a, b = by_run(bad)["a"], by_run(bad)["b"]
    # b starts with a
    shift(b, -(at(b["start"]) - at(a["start"])).total_seconds() / 3600)
    assert f"b: starts {b['start']} before a ends" in violations(loaded, bad)
    gone = broken(data)  # a left out, b kept
    gone["runs"] = [
        {"run": "a", "scheduled": False} if r["run"] == "a" else r for r in gone["runs"]
    ]
    text = violations(loaded, gone)
    assert "a: required but not scheduled" in text
    assert "b: scheduled, but a (which it comes after) is not" in text


def test_checker_catches_reservation_over_subscribed(quarters):
    loaded, _, data = quarters["reserved"]
    assert (
        data["reservations"][0]["nodes"] >= 1
        and by_run(data)["train"]["market"] == "reserved"
    )
    bad = broken(data)
    bad["reservations"][0]["nodes"] = 0
    bad["reservations"][0]["cost_usd"] = 0.0
    text = violations(loaded, bad)
    assert "reservation lambda/us-east-1/gpu_1x_a100_sxm4: 1 reserved nodes at" in text
    assert "> 0 bought" in text
    outside = broken(data)
    shift(by_run(outside)["train"], 48)  # past the reservation's term
    assert "outside every reservation term" in violations(loaded, outside)


def test_checker_catches_money_and_contract_errors(quarters):
    loaded, _, data = quarters["chain"]
    bad = broken(data)
    bad["objective_usd"] += 1.0
    text = violations(loaded, bad)
    assert "objective_usd" in text and "months sum to" in text
    spot = broken(quarters["spot"][2])
    by_run(spot)["eval"]["market"] = "spot"
    assert "spot, but interruption_tolerance is none" in violations(
        quarters["spot"][0], spot
    )
    wide = broken(data)
    by_run(wide)["a"]["gpus"] = 16
    assert "a: 16 GPUs outside gpus 1..4" in violations(loaded, wide)
    many = broken(quarters["spot"][2])
    by_run(many)["gen"].update(nodes=2, gpus=2 * by_run(many)["gen"]["gpus"])
    assert "which has no inter-node network" in violations(quarters["spot"][0], many)


# ---------------------------------------------------------------- brute force


def step_of(loaded, moment: dt.datetime, up: bool) -> int:
    """Whole steps from the horizon start (written here, not taken from the model)."""
    hours = (moment - loaded.quarter.horizon.start).total_seconds() / 3600
    steps = hours / loaded.quarter.horizon.step
    return math.ceil(steps - 1e-9) if up else math.floor(steps + 1e-9)


def brute_force(loaded, cands) -> dict | None:
    """The best schedule by enumerating every candidate x start step (x reserved nodes bought).

    Best = most priority of optional runs scheduled, then cheapest, then (of equal cost to the bit, as on the
    same candidates) the least sum of start steps (`starts`). None when nothing is
    feasible. Candidates (with their `duration_steps`) are the plan's own; everything else is
    read from the quarter: windows, precedence, quotas by GPU name or family, node limits from the
    quarter and the catalog, reservation terms and capacity, the budget and the monthly budget
    (a run in the month it starts, a reservation by its hours in each month).
    """
    quarter, catalog = loaded.quarter, loaded.catalog
    horizon, c, step = quarter.horizon, quarter.constraints, quarter.horizon.step
    steps = step_of(loaded, horizon.end, up=False)
    names = [r.name for r in quarter.runs]
    runs = {r.name: r for r in quarter.runs}
    order, placed = [], set()
    while len(order) < len(names):  # precedence first
        for name in names:
            if name not in placed and all(b in placed for b in runs[name].after):
                order.append(name)
                placed.add(name)
    month_edges = []
    cursor = dt.datetime(horizon.start.year, horizon.start.month, 1, tzinfo=UTC)
    while cursor < horizon.end:
        following = dt.datetime(
            cursor.year + cursor.month // 12, cursor.month % 12 + 1, 1, tzinfo=UTC
        )
        month_edges.append((cursor, following))
        cursor = following
    max_nodes = catalog.offers.set_index("key")["max_nodes"]

    def month_of(s: int) -> int:
        moment = horizon.start + dt.timedelta(hours=s * step)
        return next(k for k, (a, b) in enumerate(month_edges) if a <= moment < b)

    options = {}
    for name in order:
        run = runs[name]
        release = step_of(loaded, run.release, up=True) if run.release else 0
        due = step_of(loaded, run.due, up=False) if run.due else steps
        release, due = max(0, release), min(steps, due)
        mine = [row for row in cands.itertuples(index=False) if row.run == name]
        options[name] = [
            (row, s)
            for row in mine
            for s in range(release, due - int(row.duration_steps) + 1)
        ]

    def usage(row):
        """(resource, amount) pairs a candidate draws on while it runs."""
        out = []
        for key in c.gpu_quotas:
            provider, _, gpu = key.partition("/")
            if row.provider == provider and (
                not gpu or catalog.gpu_matches(row.gpu, gpu)
            ):
                out.append((("quota", key), int(row.gpus)))
        if row.pool < 0:
            market = row.market if c.node_limits_per_market else None
            out.append((("offer", (row.offer_key, market)), int(row.nodes)))
        else:
            out.append((("pool", int(row.pool)), int(row.nodes)))
        return out

    def capacity(resource, bought):
        kind, key = resource
        if kind == "quota":
            return c.gpu_quotas[key]
        if kind == "pool":
            return bought[key]
        offer = key[0]
        caps = [
            x
            for x in (c.node_limits.get(offer), max_nodes.get(offer))
            if x is not None and not pd_isna(x)
        ]
        return min(caps) if caps else math.inf

    pools = list(quarter.reservations)
    best = None
    for bought in itertools.product(
        *[range(p.min_nodes, p.max_nodes + 1) for p in pools]
    ):
        reserved_usd = sum(
            n * p.price_per_node_h * (p.end - p.start).total_seconds() / 3600
            for n, p in zip(bought, pools)
        )
        reserved_month = [
            sum(
                n
                * p.price_per_node_h
                * max(0.0, (min(b, p.end) - max(a, p.start)).total_seconds())
                / 3600
                for n, p in zip(bought, pools)
            )
            for a, b in month_edges
        ]
        if c.budget is not None and reserved_usd > c.budget + 1e-9:
            continue
        used: dict = {}
        chosen: dict = {}

        def fits(row, s) -> bool:
            d = int(row.duration_steps)
            if row.pool >= 0:
                p = pools[int(row.pool)]
                if (
                    horizon.start + dt.timedelta(hours=s * step) < p.start
                    or horizon.start + dt.timedelta(hours=(s + d) * step) > p.end
                ):
                    return False
            for resource, amount in usage(row):
                cap = capacity(resource, bought)
                for t in range(s, s + d):
                    if used.get((resource, t), 0) + amount > cap:
                        return False
            return True

        def place(row, s, sign):
            for resource, amount in usage(row):
                for t in range(s, s + int(row.duration_steps)):
                    used[(resource, t)] = used.get((resource, t), 0) + sign * amount

        def visit(i: int, cost: float, priority: int, month_cost: list):
            nonlocal best
            remaining_priority = sum(
                runs[n].priority for n in order[i:] if not runs[n].required
            )
            if best is not None and (-(priority + remaining_priority), cost) >= (
                best["key"][0],
                best["key"][1] + 1e-9,
            ):
                return
            if i == len(order):
                if c.monthly_budget is not None and any(
                    m > c.monthly_budget + 1e-9 for m in month_cost
                ):
                    return
                key = (-priority, cost)
                starts = sum(s for _, s in chosen.values())
                if (
                    best is None
                    or key < best["key"]
                    or key == best["key"]
                    and starts < best["starts"]
                ):
                    best = {
                        "key": key,
                        "cost_usd": cost,
                        "bought": list(bought),
                        "priority": priority,
                        "chosen": {n: (row.cid, s) for n, (row, s) in chosen.items()},
                        "starts": starts,
                    }
                return
            name = order[i]
            run = runs[name]
            earliest = 0
            possible = True
            for before in run.after:
                if before not in chosen:
                    possible = False
                else:
                    row, s = chosen[before]
                    earliest = max(earliest, s + int(row.duration_steps))
            if possible:
                for row, s in options[name]:
                    if s < earliest or not fits(row, s):
                        continue
                    total = cost + float(row.cost_usd)
                    if c.budget is not None and total + reserved_usd > c.budget + 1e-9:
                        continue
                    months = list(month_cost)
                    months[month_of(s)] += float(row.cost_usd)
                    chosen[name] = (row, s)
                    place(row, s, +1)
                    visit(
                        i + 1,
                        total,
                        priority + (0 if run.required else run.priority),
                        months,
                    )
                    place(row, s, -1)
                    del chosen[name]
            if not run.required:
                visit(i + 1, cost, priority, month_cost)

        visit(0, reserved_usd, 0, reserved_month)
    return best


def pd_isna(value) -> bool:
    try:
        return value is None or math.isnan(float(value))
    except (TypeError, ValueError):
        return False


LAMBDA_TYPES = (
    "gpu_1x_a100_sxm4",
    "gpu_2x_a100",
    "gpu_1x_a10",
    "gpu_1x_a6000",
    "gpu_2x_a6000",
)
RUNPOD_TYPES = (
    "1x_RTXA6000_SECURE",
    "2x_RTXA6000_SECURE",
    "1x_RTXA4500_SECURE",
    "1x_A40_SECURE",
)


def random_quarter(seed: int) -> dict:
    """2-3 runs over a few days, with windows, precedence, quotas/limits, budgets and reservations
    chosen so that they often bind."""
    rng = random.Random(seed)
    provider = "lambda" if seed % 2 == 0 else "runpod"
    region, types = (
        ("us-east-1", LAMBDA_TYPES) if provider == "lambda" else ("CA", RUNPOD_TYPES)
    )
    step = rng.choice((12, 24))
    days = rng.choice((3, 4))
    # some cross a month
    start = dt.datetime(2027, 1, 30 if rng.random() < 0.4 else 11, tzinfo=UTC)
    end = start + dt.timedelta(days=days)
    runs = []
    for k in range(rng.randint(2, 3)):
        allowed = rng.sample(types, rng.randint(1, 3))
        run = {
            "name": f"r{k}",
            "kind": rng.choice(("training", "fine_tuning", "batch_inference")),
            "memory": {"per_gpu": f"{rng.randint(8, 14)}GiB"},
            "work": {
                "gpu_hours": rng.choice((4, 6, 10, 14, 20)),
                "reference_gpu": "A100-80GB",
            },
            "gpus": {"min": 1, "max": rng.choice((1, 2))},
            "interruption_tolerance": rng.choice(("none", "checkpointed", "stateless")),
            "checkpoint": {"every": "1h"},
            "allow": {"regions": [region], "instance_types": allowed},
            "required": rng.random() < 0.6,
            "priority": rng.randint(1, 4),
        }
        if rng.random() < 0.4:
            run["release"] = (
                start + dt.timedelta(hours=step * rng.randint(1, 2))
            ).isoformat()
        if rng.random() < 0.4:
            run["due"] = (
                end - dt.timedelta(hours=step * rng.randint(0, 1))
            ).isoformat()
        if k and rng.random() < 0.5:
            run["after"] = [f"r{rng.randrange(k)}"]
        runs.append(run)
    quarter = {
        "name": f"random-{seed}",
        "catalogs": [provider],
        "horizon": {
            "start": start.isoformat(),
            "end": end.isoformat(),
            "step": f"{step}h",
        },
        "runs": runs,
        "defaults": {"estimate_error": 0},
    }  # windows sized to the estimate, so that the limits bite
    constraints: dict = {}
    kinds = rng.sample(
        ("quota", "node_limit", "budget", "monthly", "reservation", "none"),
        rng.randint(1, 2),
    )
    if "quota" in kinds:
        constraints["gpu_quotas"] = {provider: rng.choice((1, 2, 3))}
    if "node_limit" in kinds:
        constraints["node_limits"] = {
            f"{provider}/{region}/{t}": 1 for t in rng.sample(types, 2)
        }
    if "budget" in kinds:
        constraints["budget"] = rng.choice((10, 20, 30, 45))
    if "monthly" in kinds:
        constraints["monthly_budget"] = rng.choice((8, 12, 20))
    if constraints:
        quarter["constraints"] = constraints
    if "reservation" in kinds:
        term_start = start + dt.timedelta(hours=step * rng.randint(0, 1))
        term_end = min(end, term_start + dt.timedelta(hours=step * rng.randint(2, 4)))
        quarter["reservations"] = [
            {
                "offer": f"{provider}/{region}/{rng.choice(runs[0]['allow']['instance_types'])}",
                "start": term_start.isoformat(),
                "end": term_end.isoformat(),
                "price_per_node_h": round(rng.uniform(0.1, 0.6), 2),
                "max_nodes": rng.choice((1, 2)),
            }
        ]
    return quarter


SEEDS = range(36)


@cache
def random_case(seed: int, directory: str) -> dict:
    spec = random_quarter(seed)
    path = Path(directory) / f"random-{seed}.yaml"
    path.write_text(json.dumps(spec, indent=2), encoding="utf-8")  # JSON is YAML
    loaded = load_quarter(path)
    plan = make_batch_plan(loaded, time_limit_s=20.0, workers=1)
    data = as_json(plan)
    reference = brute_force(loaded, plan.cands) if not plan.cands.empty else None
    return {
        "spec": spec,
        "loaded": loaded,
        "plan": plan,
        "json": data,
        "reference": reference,
    }


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("random"))


@pytest.mark.parametrize("seed", SEEDS)
def test_cp_sat_matches_brute_force(seed, random_dir):
    case = random_case(seed, random_dir)
    plan, data, reference = case["plan"], case["json"], case["reference"]
    context = f"seed {seed}: {json.dumps(case['spec'].get('constraints', {}))} {case['spec'].get('reservations')}"
    required = [r for r in case["loaded"].quarter.runs if r.required]
    if reference is None:
        assert plan.status == "INFEASIBLE", context
        assert not any(r.get("scheduled") for r in data["runs"]), context
        return
    # A run without any candidate (too slow for its window everywhere) is optional here, else the
    # plan is INFEASIBLE; the brute force leaves it out as well.
    assert plan.status == "OPTIMAL", context
    scheduled = {r["run"] for r in data["runs"] if r["scheduled"]}
    assert {r.name for r in required} <= scheduled, context
    priority = sum(
        r.priority
        for r in case["loaded"].quarter.runs
        if not r.required and r.name in scheduled
    )
    assert priority == reference["priority"], context
    items = len(scheduled) + len(data["reservations"])
    assert abs(data["objective_usd"] - reference["cost_usd"]) <= HALF_CENT * (
        items + 1
    ), (context, reference)


@pytest.mark.parametrize("seed", SEEDS)
def test_runs_start_as_soon_as_the_same_cost_allows(seed, random_dir):
    """Of the schedules on the plan's own candidates (any reservations bought), none is cheaper, and none as
    cheap starts its runs sooner in all (the least sum of start steps, by brute force)."""
    case = random_case(seed, random_dir)
    plan = case["plan"]
    if case["reference"] is None:
        return  # infeasible: test_cp_sat_matches_brute_force checks that
    chosen = plan.result.chosen
    reference = brute_force(
        case["loaded"], plan.cands[plan.cands["cid"].isin(set(chosen["cid"]))]
    )
    items = len(chosen) + len(case["json"]["reservations"])
    assert abs(plan.result.objective_usd - reference["cost_usd"]) <= HALF_CENT * (
        items + 1
    ), case["spec"]
    assert int(chosen["start_step"].sum()) == reference["starts"], (
        case["spec"],
        reference["chosen"],
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_random_schedules_pass_the_checker(seed, random_dir):
    case = random_case(seed, random_dir)
    assert check_schedule(case["loaded"], case["json"]) == [], case["spec"]


def test_random_quarters_exercise_limits_dropping_and_infeasibility(random_dir):
    """The brute-force comparison only means something if the limits bite."""
    cases = [random_case(s, random_dir) for s in SEEDS]
    solved = [c for c in cases if c["plan"].status in SOLVED]
    infeasible = [c for c in cases if c["plan"].status == "INFEASIBLE"]
    dropped = [c for c in solved if any(not r["scheduled"] for r in c["json"]["runs"])]
    reserved = [c for c in solved if any(r["nodes"] for r in c["json"]["reservations"])]
    sequential = [c for c in solved if any("after" in r for r in c["spec"]["runs"])]
    binding = []  # the limits change the brute-force optimum on the same candidates
    for c in cases:
        if c["plan"].cands.empty:
            continue
        quarter = c["loaded"].quarter
        free = dataclasses.replace(
            c["loaded"],
            quarter=quarter.model_copy(update={"constraints": QuarterConstraints()}),
        )
        unconstrained = brute_force(free, c["plan"].cands)
        reference = c["reference"]
        if unconstrained is not None and (
            reference is None or reference["key"] != unconstrained["key"]
        ):
            binding.append(c)
    limited_infeasible = [c for c in infeasible if not c["plan"].cands.empty]
    assert len(solved) >= 15, len(solved)
    # infeasible in the model, not for want of candidates
    assert len(limited_infeasible) >= 5, len(limited_infeasible)
    assert len(dropped) >= 3, len(dropped)
    assert len(reserved) >= 3, len(reserved)
    assert len(sequential) >= 5, len(sequential)
    assert len(binding) >= 8, len(binding)


def test_time_indexed_bound_never_exceeds_the_brute_force_optimum(random_dir):
    """On every random quarter whose optimum schedules every run (what the bound is for)."""
    checked = 0
    for seed in SEEDS:
        case = random_case(seed, random_dir)
        plan, reference, loaded = case["plan"], case["reference"], case["loaded"]
        every_run = sum(r.priority for r in loaded.quarter.runs if not r.required)
        if (
            reference is None
            or plan.infeasible
            and set(plan.infeasible) - set(plan.result.unscheduled)
            or reference["priority"] != every_run
        ):
            continue
        runs = [
            RunInfo(r.name, *loaded.window(r), r.after, r.priority, r.required)
            for r in loaded.quarter.runs
        ]
        bound = all_runs_lower_bound_usd(plan.cands, runs, plan.pools, loaded.steps)
        assert bound is not None and bound <= reference["cost_usd"] + HALF_CENT * len(
            runs
        ), (seed, bound, reference)
        checked += 1
    assert checked >= 10, checked


def _pooled_cases(random_dir):
    """(seed, case) of the random quarters with a reservation pool and a feasible optimum."""
    for seed in SEEDS:
        case = random_case(seed, random_dir)
        if case["reference"] is not None and case["spec"].get("reservations"):
            yield seed, case


def _plan_at_the_optimum(seed: int, case: dict) -> None:
    """A fresh plan of the case passes the checker and is proven at the brute-force optimum."""
    plan = make_batch_plan(case["loaded"], time_limit_s=20.0, workers=1)
    data = as_json(plan)
    assert plan.status == "OPTIMAL", seed
    assert check_schedule(case["loaded"], data) == [], seed
    items = sum(r["scheduled"] for r in data["runs"]) + len(data["reservations"])
    assert abs(data["objective_usd"] - case["reference"]["cost_usd"]) <= HALF_CENT * (
        items + 1
    ), seed


def test_phased_search_reaches_the_brute_force_optimum(random_dir, monkeypatch):
    """With the first whole-model attempt cut to nothing, the core / fixed / free phases run
    and must still end at the proven optimum on the quarters with a reservation pool."""
    monkeypatch.setattr(batch_search, "FIRST_SHARE", 1e-6)
    built = []
    original = batch_search.build_batch_model
    monkeypatch.setattr(
        batch_search, "build_batch_model", lambda *a: built.append(a[1]) or original(*a)
    )
    near = []
    original_near = batch_search._near_the_relaxation
    monkeypatch.setattr(
        batch_search,
        "_near_the_relaxation",
        lambda *a: near.append(1) or original_near(*a),
    )
    around = []  # the rest placed by the greedy around a packing
    greedy_alone = batch_search.greedy
    monkeypatch.setattr(
        batch_search,
        "greedy",
        lambda *a, fixed=None, **k: (
            (around.append(1) if fixed is not None else None)
            or greedy_alone(*a, fixed=fixed, **k)
        ),
    )
    phased = 0
    for seed, case in _pooled_cases(random_dir):
        built.clear()
        _plan_at_the_optimum(seed, case)
        phased += len(built) > 1
    assert phased >= 3, phased
    # the core was packed near the LP too (where the LP uses a pool)
    assert len(near) >= 2, len(near)
    assert len(around) >= phased, (len(around), phased)


def test_the_other_packing_is_fixed_when_the_better_one_cannot_be_extended(
    random_dir, monkeypatch
):
    """The core's packing may leave a run after a core run no room before its due date (on the 200-run
    benchmark the LP neighbourhood's did); the core is then fixed at the other packing, not dropped. CP-SAT
    schedules the rest around a packing only where the greedy cannot place every required run around any."""
    monkeypatch.setattr(batch_search, "FIRST_SHARE", 1e-6)
    greedy_alone = batch_search.greedy

    def greedy_cannot_place_the_rest(*args, fixed=None, **kwargs):
        found = greedy_alone(*args, fixed=fixed, **kwargs)
        return {**found, "failed_required": ["x"]} if fixed is not None else found

    monkeypatch.setattr(batch_search, "greedy", greedy_cannot_place_the_rest)
    # the LP's integer packing, fixed too, is another phase (the test below)
    monkeypatch.setattr(batch_search, "_around_the_integer_packing", lambda *a: None)
    original = batch_search.solve_batch
    fixed_calls: list[tuple] = []

    def first_fixing_fails(
        model,
        time_limit_s=60.0,
        workers=2,
        seed=0,
        hint=None,
        fix_hint=False,
        work_limit=None,
    ):
        if fix_hint and "runs" in hint:  # the core fixed, the rest free
            fixed_calls.append(
                (
                    sorted(hint["cids"]),
                    sorted(hint["starts"].items()),
                    list(hint["bought"]),
                )
            )
            if len(fixed_calls) == 1:
                return BatchResult("INFEASIBLE")
        return original(model, time_limit_s, workers, seed, hint, fix_hint, work_limit)

    monkeypatch.setattr(batch_search, "solve_batch", first_fixing_fails)
    tried = 0
    for seed, case in _pooled_cases(random_dir):
        fixed_calls.clear()
        _plan_at_the_optimum(seed, case)
        # the other packing was fixed
        tried += len(fixed_calls) == 2 and fixed_calls[0] != fixed_calls[1]
    assert tried >= 1, tried


def test_the_lps_integer_packing_is_searched_with_the_rest_around_it(
    random_dir, monkeypatch
):
    """Where the LP's integer packing (`bound.packed`) buys nodes, its runs are fixed on it and CP-SAT schedules
    the rest around them; the plan stays at the brute-force optimum."""
    monkeypatch.setattr(batch_search, "FIRST_SHARE", 1e-6)
    original = batch_search.solve_batch
    fixed: list[set] = []  # the runs fixed in each search of an integer packing
    packings: list[set] = []
    build = batch_search._integer_packing

    def recorded(*args):
        found = build(*args)
        packings.append(found["runs"])
        return found

    def solve(
        model, time_limit_s, workers, seed, hint=None, fix_hint=False, work_limit=None
    ):
        if fix_hint and hint and hint.get("runs") in packings:
            fixed.append(hint["runs"])
        return original(model, time_limit_s, workers, seed, hint, fix_hint, work_limit)

    monkeypatch.setattr(batch_search, "_integer_packing", recorded)
    monkeypatch.setattr(batch_search, "solve_batch", solve)
    for seed, case in _pooled_cases(random_dir):
        _plan_at_the_optimum(seed, case)
    assert packings and fixed == packings, (packings, fixed)


def test_without_a_packing_near_the_lp_the_core_is_packed_with_the_fewest_nodes_too(
    random_dir, monkeypatch
):
    """Where the LP gives no packing (it ends at no leaf, or not in time) and the core's search bought nodes, the
    core is also packed with the fewest nodes bought, the rest placed around each packing; the plan stays at the
    brute-force optimum."""
    monkeypatch.setattr(
        batch_search, "relax", lambda *args, stop=None, **options: Relaxation(None)
    )
    monkeypatch.setattr(batch_search, "FIRST_SHARE", 1e-6)
    original = batch_search.solve_batch
    searched: list[
        tuple
    ] = []  # (runs, the pools' node ranges, nodes bought) of every search

    def solve(model, *args, **kwargs):
        found = original(model, *args, **kwargs)
        searched.append(
            (
                len(model.runs),
                [(p.min_nodes, p.max_nodes) for p in model.pools],
                list(found.bought) if found.solved else None,
            )
        )
        return found

    monkeypatch.setattr(batch_search, "solve_batch", solve)
    tried = 0
    for seed, case in _pooled_cases(random_dir):
        searched.clear()
        _plan_at_the_optimum(seed, case)
        runs = len(case["loaded"].quarter.runs)
        cores = [s for s in searched if s[0] < runs]
        fewest = [lo for lo, _ in cores[0][1]] if cores else None
        if cores and cores[0][2] is not None and cores[0][2] != fewest:
            # the core bought nodes: it is packed again, every pool at its fewest
            assert any(r == [(lo, lo) for lo in fewest] for _, r, _ in cores[1:]), (
                seed,
                searched,
            )
            tried += 1
        else:  # not otherwise
            assert all(r == cores[0][1] for _, r, _ in cores), (seed, searched)
    assert tried >= 1, tried


def test_a_bound_stopped_before_its_first_lp_leaves_the_plan_alone(
    random_dir, monkeypatch
):
    """A short --time-limit can stop the LP bound before it solves anything (a fine calendar); the plan
    is then reported with CP-SAT's own bound, not a crash."""
    monkeypatch.setattr(
        batch_search, "relax", lambda *args, stop=None, **options: Relaxation(None)
    )
    # so the phases run and the bound is asked for
    monkeypatch.setattr(batch_search, "FIRST_SHARE", 1e-6)
    seed, case = next(_pooled_cases(random_dir))
    plan = make_batch_plan(case["loaded"], time_limit_s=20.0, workers=1)
    assert plan.status == "OPTIMAL", seed
    assert check_schedule(case["loaded"], as_json(plan)) == [], seed


def _calendar_fronts(loaded, exhaustive: bool, monkeypatch) -> tuple[dict, int]:
    """Per run, the (limits, pool, cost in cents, steps, limited GPUs) of its candidates on the Pareto front
    (no per-run cap), and how many candidates the pricing returned, screened or exhaustive."""
    original = pipeline.candidate_records
    priced = []

    def records(*args, **kwargs):
        found = original(
            *args,
            **{**kwargs, "exhaustive": exhaustive or kwargs.get("exhaustive", False)},
        )
        priced.append(len(found[0]))
        return found

    monkeypatch.setattr(pipeline, "candidate_records", records)
    monkeypatch.setattr(pipeline, "MAX_CANDIDATES_PER_RUN", 10**9)
    quarter = loaded.quarter
    scenario = as_scenario(quarter)
    limits = limits_of(scenario)
    prices = pipeline.market(
        apply_overrides(loaded.catalog.offers, quarter.overrides, loaded.catalog),
        pipeline._pools(loaded),
    )
    cache, fronts = CandidateCache(), {}
    for run, workload in zip(quarter.runs, scenario.workloads):
        if workload.serving:
            continue
        found, _ = pipeline.run_records(loaded, run, workload, prices, scenario, cache)
        columns = {
            c: [r[c] for r in found]
            for c in (
                "provider",
                "gpu",
                "gpu_family",
                "offer_key",
                "market",
                "max_nodes",
                "gpus",
            )
        }
        keys, capped, units = limit_keys(columns, limits, "offer_key")
        fronts[run.name] = {
            (k, c, r["pool"], r["cost_cents"], r["duration_steps"], u)
            for k, c, r, u in zip(keys, capped, found, units)
        }
    return fronts, sum(priced)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("quarter-team.yaml", marks=pytest.mark.slow),  # 33 s
        "quarter-budget.yaml",
        "quarter-launch.yaml",
    ],
)
def test_screened_batch_candidates_keep_the_calendar_front_of_exhaustive_pricing(
    name, monkeypatch
):
    """A run's candidates are screened: a row is dropped only when a cheaper candidate with the same limits,
    or one drawing on no limit at all, is booked for no more calendar steps than the row could take. So every
    run keeps the whole Pareto front in cost, steps and limited GPUs that pricing every row finds (a faster,
    dearer candidate is what fits a crowded schedule)."""
    loaded = load_quarter(SCENARIOS / name)
    screened, priced = _calendar_fronts(loaded, False, monkeypatch)
    exhaustive, every = _calendar_fronts(loaded, True, monkeypatch)
    assert screened == exhaustive
    assert priced < every / 2, (priced, every)  # the screening did prune


@pytest.mark.slow
def test_same_quarter_same_plan_when_work_ends_the_search(monkeypatch):
    """The phases stop on CP-SAT's deterministic work, not the clock: a search cut short by
    its work budget (not proven optimal) gives the same plan twice, with a busy CPU the second time."""
    monkeypatch.setattr(batch_search, "WHOLE_WORK_PER_SECOND", 0.0005)
    monkeypatch.setattr(batch_search, "CORE_WORK_PER_SECOND", 0.002)
    loaded = load_quarter(SCENARIOS / "quarter-team.yaml")
    plan = make_batch_plan(loaded, time_limit_s=60.0)
    # unproven, but its work ended it: the same on every machine
    assert not plan.result.clocked
    first = batch_json(plan)
    # another process takes a core
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        second = batch_json(make_batch_plan(loaded, time_limit_s=60.0))
    finally:
        spinner.kill()
        spinner.wait()
    assert first["status"] == "FEASIBLE"
    assert (
        first["runs"] == second["runs"]
        and first["reservations"] == second["reservations"]
    )
    assert first["objective_usd"] == second["objective_usd"]


def test_the_plan_says_when_the_clock_cut_the_search(monkeypatch):
    """A phase stops on deterministic work, the same on every run, unless the clock cuts it first: then the
    schedule depends on the machine's speed and load, and the result says so (`clocked`), read by the status
    line, the JSON report and a what-if sweep (which does not bisect on such a point). CP-SAT reports at least
    the work limit when that stopped it, so the two are told apart (the slow test above: work-ended, unproven,
    not clocked)."""
    from planner.whatif import points

    loaded, cache = load_quarter(SCENARIOS / "quarter-launch.yaml"), CandidateCache()
    proven = make_batch_plan(loaded, time_limit_s=60.0, cache=cache)
    assert proven.status == "OPTIMAL" and not proven.result.clocked
    assert batch_json(proven)["solve_report"]["stopped_by_time_limit"] is False
    assert "cut the search" not in batch_text(proven, "table")
    original = batch_search.solve_batch

    def hurried(
        model, time_limit_s, *args, **kwargs
    ):  # a machine far too slow for the work each phase is set
        return original(model, 0.001, *args, **kwargs)

    monkeypatch.setattr(batch_search, "solve_batch", hurried)
    cut = make_batch_plan(loaded, time_limit_s=60.0, cache=cache)
    assert cut.status == "FEASIBLE" and cut.result.clocked
    assert batch_json(cut)["solve_report"]["stopped_by_time_limit"] is True
    assert "the time limit cut the search before its set work" in batch_text(
        cut, "table"
    )
    monkeypatch.setattr(points, "_loaded", lambda source, kind: (loaded, cache))
    assert not points.solve_quarter_point(
        points.PointTask("quarter-launch.yaml", time_limit_s=60.0)
    ).settled


def test_a_tie_break_the_clock_cuts_leaves_the_search_schedule(monkeypatch):
    """The tie-break on start times is dropped when the clock cuts it (it would make the plan depend on the
    machine): the schedule is then the search's own, start for start, and not marked as cut."""
    loaded, cache = (
        load_quarter(SCENARIOS / "quarter-team.yaml"),
        CandidateCache(),
    )  # its search stops at a schedule
    original_soonest, original_solve, cut = (
        batch_search.soonest,
        tie_break.solve_batch,
        [],
    )

    def hurried(*args):
        def solve(
            model, time_limit_s, *rest, **kwargs
        ):  # a machine far too slow for the tie-break's work
            found = original_solve(model, 0.001, *rest, **kwargs)
            cut.append(found.clocked)
            return found

        monkeypatch.setattr(tie_break, "solve_batch", solve)
        try:
            return original_soonest(*args)
        finally:
            monkeypatch.setattr(tie_break, "solve_batch", original_solve)

    # a limit with room: the search's first phase, 5 % of it, proves the schedule in about 1.5 s of an idle core,
    # and a 3 s cap (60 s) cut it on a loaded test run, after which the two searches below parted ways (README)
    limit = 240.0
    monkeypatch.setattr(batch_search, "soonest", hurried)
    # that starts later than it could
    dropped = batch_json(make_batch_plan(loaded, time_limit_s=limit, cache=cache))
    assert cut == [True]
    monkeypatch.setattr(batch_search, "soonest", lambda best, *args: (best, 0.0))
    searched = batch_json(make_batch_plan(loaded, time_limit_s=limit, cache=cache))
    monkeypatch.setattr(batch_search, "soonest", original_soonest)
    tied = batch_json(make_batch_plan(loaded, time_limit_s=limit, cache=cache))
    assert (
        dropped["runs"] == searched["runs"]
        and dropped["solve_report"]["stopped_by_time_limit"] is False
    )
    assert (
        tied["objective_usd"] == searched["objective_usd"]
        and tied["runs"] != searched["runs"]
    )


def test_time_indexed_bound_sees_overlap_that_energy_cuts_miss():
    """Two 2-step runs, both inside steps [0, 3), a 1-node pool for [0, 4) at $4 a node,
    on-demand $3 a run. Energy alone (4 node-steps <= 4 x 1 node) lets one $4 node carry both;
    any real schedule overlaps them at step 1, so the best plan is $6: both on demand."""
    pools = [Pool("pool", "x/y/z", 0, 4, 1.0, 0, 2, 4.0)]
    runs = [RunInfo(name, 0, 3, (), 1, True) for name in ("a", "b")]
    cands = pd.DataFrame(
        [
            {
                "run": name,
                "pool": pool,
                "duration_steps": 2,
                "nodes": 1,
                "cost_cents": cost,
            }
            for name in ("a", "b")
            for pool, cost in ((0, 0), (-1, 300))
        ]
    )
    assert all_runs_lower_bound_usd(cands, runs, pools, 4) == pytest.approx(
        6.0, rel=1e-5
    )


def test_bound_rounds_each_pool_to_whole_runs():
    """Two 2-node runs that must overlap at steps [0, 2); a pool of up to 3 nodes at $1 a node;
    on demand $10 a run. The LP alone buys 3 nodes and runs 1.5 runs on them: $8. Any real plan
    fits one run on the pool ($2 + $10 = $12) or buys 3 nodes for the same one run ($13):
    branching on the nodes bought, and at 3 nodes the row ⌊2/2⌋·x_a + ⌊2/2⌋·x_b ≤ ⌊3/2⌋, gives $12."""
    pools = [Pool("pool", "x/y/z", 0, 2, 1.0, 0, 3, 1.0)]
    runs = [RunInfo(name, 0, 2, (), 1, True) for name in ("a", "b")]
    cands = pd.DataFrame(
        [
            {
                "run": name,
                "pool": pool,
                "duration_steps": 2,
                "nodes": nodes,
                "cost_cents": cost,
            }
            for name in ("a", "b")
            for pool, nodes, cost in ((0, 2, 0), (-1, 2, 1000))
        ]
    )
    assert all_runs_lower_bound_usd(cands, runs, pools, 2) == pytest.approx(
        12.0, rel=1e-5
    )
    stopped = threading.Event()
    stopped.set()
    # nothing solved: no bound
    assert all_runs_lower_bound_usd(cands, runs, pools, 2, stop=stopped) is None


def _two_runs_one_node_apart():
    """Runs a (steps [0, 2)) and b (window [1, 4)), each 2 steps on 1 node; a pool of up to
    2 nodes for steps [0, 4) at $1 a node; on demand $10 a run. The only $1 plan buys one node
    and runs a at 0, b at 2: the LP finds it too, integral at the root."""
    pools = [Pool("pool", "x/y/z", 0, 4, 1.0, 0, 2, 1.0)]
    runs = [RunInfo("a", 0, 2, (), 1, True), RunInfo("b", 1, 4, (), 1, True)]
    cands = pd.DataFrame(
        [
            {
                "run": name,
                "cid": f"{name}{pool}",
                "pool": pool,
                "duration_steps": 2,
                "nodes": 1,
                "gpus": 8,
                "offer_key": "x/y/z",
                "market": "reserved" if pool >= 0 else "on_demand",
                "max_nodes": math.nan,
                "cost_cents": cost,
                "cost_usd": cost / 100,
            }
            for name in ("a", "b")
            for pool, cost in ((0, 0), (-1, 1000))
        ]
    )
    return cands, runs, pools


def test_relaxation_says_which_pooled_candidates_and_starts_its_bound_uses():
    cands, runs, pools = _two_runs_one_node_apart()
    relaxation = relax(cands, runs, pools, 4)
    assert relaxation.bound_usd == pytest.approx(1.0, rel=1e-5)
    assert relaxation.bought == (1,)
    assert relaxation.starts == {0: (0, 0), 2: (2, 2)}  # rows of a and b on the pool


def test_greedy_waits_only_for_runs_being_scheduled():
    """A run `after` a run not in the list (one that cannot be placed, or left out) waits for nothing, as in the
    model (`add_precedence`): the greedy used to leave it, and every run after it, unplaced without counting them
    as failed, and a 500-run benchmark quarter's hint missed three required runs while it said all were placed."""
    cands, runs, pools = _two_runs_one_node_apart()
    cands = cands.assign(wall_q_h=2.0)
    runs = [runs[0], dataclasses.replace(runs[1], after=("gone",))]
    found = greedy(cands, runs, pools, BatchLimits(), 4)
    assert found["starts"] == {"a": 0, "b": 1} and found["failed_required"] == []
    # a circle of waits places none of it, and says so
    circle = [
        dataclasses.replace(runs[0], after=("b",)),
        dataclasses.replace(runs[1], after=("a",)),
    ]
    found = greedy(cands, circle, pools, BatchLimits(), 4)
    assert found["starts"] == {} and sorted(found["failed_required"]) == ["a", "b"]


def test_greedy_places_the_rest_around_a_fixed_part():
    """`fixed` keeps part of a schedule (a packed core) as it is, on its nodes bought, and places the other runs
    around it: b cannot share the one bought node with a at step 1, so it waits for a to end."""
    cands, runs, pools = _two_runs_one_node_apart()
    cands = cands.assign(wall_q_h=2.0)
    part = {"cids": {"a0"}, "starts": {"a": 0}, "bought": [1]}
    found = greedy(cands, runs, pools, BatchLimits(), 4, fixed=part)
    assert found["bought"] == [1] and found["starts"] == {"a": 0, "b": 2}
    assert found["cids"] == {"a0", "b0"} and found["cost_usd"] == pytest.approx(1.0)
    # on no node bought, b goes on demand, a stays where it was put
    part = {"cids": {"a-1"}, "starts": {"a": 0}, "bought": [0]}
    found = greedy(cands, runs, pools, BatchLimits(), 4, fixed=part)
    assert found["cids"] == {"a-1", "b-1"} and found["starts"]["a"] == 0
    assert found["cost_usd"] == pytest.approx(20.0)


def _cheapest_plan_cents(
    cands, runs, pools, scheduled, steps, quotas: dict[str, int] | None = None
) -> float:
    """Brute force: every candidate and start of each run in `scheduled` (the others left out) and every count
    bought per pool; a plan fits when each pool's nodes in use stay within what it bought at every step, the
    GPUs running on each provider with a quota within it, and each run starts once the runs it waits for have
    ended."""
    options = []
    for run in runs:
        if run.name not in scheduled:
            continue
        mine = []
        for row in cands[cands["run"] == run.name].itertuples():
            first, last = run.release, run.due - row.duration_steps
            if row.pool >= 0:
                first = max(first, pools[row.pool].start)
                last = min(last, pools[row.pool].end - row.duration_steps)
            mine += [(row, start) for start in range(first, last + 1)]
        options.append(mine)
    best = math.inf
    for bought in itertools.product(
        *(range(p.min_nodes, p.max_nodes + 1) for p in pools)
    ):
        fee = sum(p.cents_per_node * b for p, b in zip(pools, bought))
        for picks in itertools.product(*options):
            begun = {row.run: (start, row.duration_steps) for row, start in picks}
            if any(
                b in begun and begun[b][0] + begun[b][1] > begun[run.name][0]
                for run in runs
                if run.name in begun
                for b in run.after
            ):
                continue  # a run starts before one it waits for has ended
            use = [[0] * steps for _ in pools]
            for row, start in picks:
                if row.pool >= 0:
                    for t in range(start, start + row.duration_steps):
                        use[row.pool][t] += row.nodes
            gpus = {key: [0] * steps for key in quotas or {}}
            for row, start in picks:
                if quotas and row.provider in gpus:
                    for t in range(start, start + row.duration_steps):
                        gpus[row.provider][t] += row.gpus
            if all(max(u) <= b for u, b in zip(use, bought)) and all(
                max(g) <= quotas[key] for key, g in gpus.items()
            ):
                best = min(best, fee + sum(row.cost_cents for row, _ in picks))
    return best


def _random_pooled_quarter(rng: random.Random, required: bool):
    """(steps, pools, runs, candidates) of a small random quarter: one or two pools over every step, three or
    four runs, each with one candidate off the pools and one on each pool, cheaper there."""
    steps = rng.randrange(4, 7)
    pools = [
        Pool(f"p{k}", "x/y/z", 0, steps, rng.choice([1.0, 2.0, 3.0]), 0, 3, 1.0)
        for k in range(rng.choice([1, 2]))
    ]
    runs = []
    for r in range(rng.choice([3, 4])):
        release = rng.randrange(0, 2)
        runs.append(
            RunInfo(
                f"r{r}", release, rng.randrange(release + 2, steps + 1), (), 1, required
            )
        )
    rows = []
    for run in runs:
        for pool in [-1] + list(range(len(pools))):
            rows.append(
                {
                    "run": run.name,
                    "pool": pool,
                    "duration_steps": rng.randrange(1, run.due - run.release + 1),
                    "nodes": rng.choice([1, 2, 3]),
                    "cost_cents": rng.randrange(0, 300)
                    if pool >= 0
                    else rng.randrange(300, 1500),
                }
            )
    return steps, pools, runs, pd.DataFrame(rows)


def test_the_lp_bounds_plans_that_leave_optional_runs_out():
    """A plan that leaves optional runs out is bounded by the LP's duals summed over the runs it keeps
    (`Relaxation.bound_for`): on random small quarters with one or two pools, checked against brute force over
    every subset of runs, every candidate, start and count bought. A 500-run benchmark quarter whose plan left
    66 optional runs out had no bound at all, though its LP had finished."""
    rng = random.Random(7)
    checked = positive = 0
    for _ in range(12):
        steps, pools, runs, cands = _random_pooled_quarter(rng, required=False)
        relaxation = relax(cands, runs, pools, steps)
        names = [r.name for r in runs]
        for size in range(len(runs) + 1):
            for kept in itertools.combinations(names, size):
                bound = relaxation.bound_for(set(kept))
                best = _cheapest_plan_cents(cands, runs, pools, set(kept), steps) / 100
                assert bound is not None and bound <= best + 1e-9, (kept, bound, best)
                checked += 1
                positive += bound >= 0.5 * best > 0
        assert relaxation.bound_for(set(names)) == relaxation.bound_usd
    assert positive >= checked // 2, (positive, checked)  # and not trivially low


def test_a_follower_is_released_once_the_runs_it_waits_for_can_have_ended():
    """pt (2 steps, on demand $10) then ft after it, and x in [2, 4); ft and x each $0 on a pool of one node
    ($1) or $10 on demand. Knowing no order, the LP put ft on the pool at 0 and x at 2: $11. ft cannot start
    before pt can have ended (2), so it and x want the one node at once: $21, what brute force finds."""
    pools = [Pool("pool", "x/y/z", 0, 4, 1.0, 0, 1, 1.0)]
    runs = [
        RunInfo("pt", 0, 4, (), 1, True),
        RunInfo("ft", 0, 4, ("pt",), 1, True),
        RunInfo("x", 2, 4, (), 1, True),
    ]
    rows = [("pt", -1, 1000)] + [
        (name, pool, cost)
        for name in ("ft", "x")
        for pool, cost in ((0, 0), (-1, 1000))
    ]
    cands = pd.DataFrame(
        [
            {"run": r, "pool": p, "duration_steps": 2, "nodes": 1, "cost_cents": c}
            for r, p, c in rows
        ]
    )
    assert [r.release for r in batch_bound.released_after(cands, runs)] == [0, 2, 2]
    best = _cheapest_plan_cents(cands, runs, pools, {"pt", "ft", "x"}, 4) / 100
    assert best == 21.0
    assert relax(cands, runs, pools, 4).bound_usd == pytest.approx(best, rel=1e-5)


def test_a_release_moves_down_the_whole_chain_by_each_runs_shortest_candidate():
    runs = [
        RunInfo("a", 3, 20, (), 1, True),
        RunInfo("b", 0, 20, ("a",), 1, True),
        RunInfo("c", 9, 20, ("b", "gone"), 1, True),  # `gone` is not in the quarter
        RunInfo("d", 0, 20, ("a", "c"), 1, True),
    ]
    cands = pd.DataFrame(
        {"run": ["a", "a", "b", "c", "d"], "duration_steps": [4, 2, 5, 1, 1]}
    )
    released = batch_bound.released_after(cands, runs)
    # b after a (3 + a's shortest 2); c after b (5 + 5, past its own 9); d after a and c (10 + 1)
    assert [r.release for r in released] == [3, 5, 10, 11]
    assert [r.name for r in released] == ["a", "b", "c", "d"]


def test_a_quota_the_lp_breaks_gets_rows_of_its_own(monkeypatch):
    """Runs a and b, 2 steps of 8 GPUs each, both inside steps [0, 3): $3 each on provider x, whose quota is 8
    GPUs, or $10 on y. Any schedule overlaps them at step 1, so one goes to y: $13. Without the quota's rows
    the LP puts both on x ($6); its solution uses 32 GPU-steps of x inside a window of 3 x 8, so the LP is built
    again with a row per step, and finds $13. A quota it does not break is left out (one LP built)."""
    pools = [Pool("pool", "x/y/z", 0, 3, 1.0, 0, 1, 100.0)]
    runs = [RunInfo(name, 0, 3, (), 1, True) for name in ("a", "b")]
    cands = pd.DataFrame(
        [
            {
                "run": name,
                "pool": pool,
                "provider": provider,
                "duration_steps": 2,
                "nodes": 1,
                "gpus": 8,
                "cost_cents": cost,
            }
            for name in ("a", "b")
            for pool, provider, cost in ((0, "x", 0), (-1, "x", 300), (-1, "y", 1000))
        ]
    )
    assert relax(cands, runs, pools, 3).bound_usd == pytest.approx(6.0, rel=1e-5)
    built = []
    lp = batch_bound.TimeIndexedLP
    monkeypatch.setattr(
        batch_bound, "TimeIndexedLP", lambda *args: built.append(args[4:]) or lp(*args)
    )
    assert relax(cands, runs, pools, 3, quotas={"x": 8}).bound_usd == pytest.approx(
        13.0, rel=1e-5
    )
    assert built == [(), ({"x": 8},)]
    built.clear()
    assert relax(cands, runs, pools, 3, quotas={"x": 16}).bound_usd == pytest.approx(
        6.0, rel=1e-5
    )
    assert built == [()]
    # the LP built again does not finish its first box in time: the first LP's bound stands (not none)
    solve = lp.solve
    monkeypatch.setattr(
        lp,
        "solve",
        lambda self, box, seconds: (
            ("stopped", -math.inf, np.zeros(1), {}, None)
            if len(self.quota_gpus)
            else solve(self, box, seconds)
        ),
    )
    assert relax(cands, runs, pools, 3, quotas={"x": 8}).bound_usd == pytest.approx(
        6.0, rel=1e-5
    )
    monkeypatch.setattr(lp, "solve", solve)
    # its rows past MAX_LP_TERMS: 8 pooled terms, 8 + 8 more under x (the pool's candidates and x's own)
    built.clear()
    assert batch_bound.capacity_terms(cands, runs, pools, {"x": 8}) == 24
    monkeypatch.setattr(batch_bound, "MAX_LP_TERMS", 23)
    assert relax(cands, runs, pools, 3, quotas={"x": 8}).bound_usd == pytest.approx(
        6.0, rel=1e-5
    )
    assert built == [()]


def test_the_lp_with_quota_rows_bounds_every_plan_within_the_quotas():
    """On random small quarters with a quota on provider x (every pool and one candidate off the pools per run;
    another off them on y, dearer), the bound and the bound of every subset of runs (`bound_for`, whose constant
    now counts the quota rows) stay at or below brute force under the quota, and the quota lifts the bound."""
    rng = random.Random(5)
    lifted = 0
    for _ in range(10):
        steps, pools, runs, cands = _random_pooled_quarter(rng, required=False)
        cands = cands.assign(provider="x", gpus=8 * cands["nodes"])
        dearer = cands[cands["pool"] < 0].assign(
            provider="y", cost_cents=lambda f: f["cost_cents"] + 500
        )
        cands = pd.concat([cands, dearer], ignore_index=True)
        quotas = {"x": 8 * rng.choice([1, 2])}
        loose = relax(cands, runs, pools, steps)
        relaxation = relax(cands, runs, pools, steps, quotas=quotas)
        names = [r.name for r in runs]
        for size in range(len(runs) + 1):
            for kept in itertools.combinations(names, size):
                bound = relaxation.bound_for(set(kept))
                best = (
                    _cheapest_plan_cents(cands, runs, pools, set(kept), steps, quotas)
                    / 100
                )
                assert bound is not None and bound <= best + 1e-9, (kept, bound, best)
        assert relaxation.bound_usd >= loose.bound_usd - 1e-9
        lifted += relaxation.bound_usd > loose.bound_usd + 1e-6
    assert lifted >= 3, lifted


def test_the_integer_packing_is_the_optimum_of_the_pools_alone():
    """With nothing but the pools to respect, the LP with whole starts and counts (`packed`) is the problem
    itself: on random small quarters its packing, each run it leaves off the pools on its cheapest other
    candidate, costs what brute force finds, fits what it buys, and its bound is that cost."""
    rng = random.Random(11)
    lifted = 0
    for _ in range(10):
        steps, pools, runs, cands = _random_pooled_quarter(rng, required=True)
        best = _cheapest_plan_cents(cands, runs, pools, {r.name for r in runs}, steps)
        relaxation = relax(cands, runs, pools, steps, keep_lp=True)
        assert (
            packed(relax(cands, runs, pools, steps), 10.0).packing == {}
        )  # no LP kept
        whole = packed(relaxation, 10.0)
        assert whole.lp is None
        assert relaxation.bound_usd <= whole.bound_usd <= best / 100 + 1e-9
        assert whole.bound_usd == pytest.approx(best / 100, rel=1e-5)
        lifted += whole.bound_usd > relaxation.bound_usd + 1e-6
        use = np.zeros((len(pools), steps))
        for row, start in whole.packing.items():
            use[
                cands.at[row, "pool"], start : start + cands.at[row, "duration_steps"]
            ] += cands.at[row, "nodes"]
        assert (use <= np.array(whole.packing_bought)[:, None]).all()
        on_pools = cands.loc[list(whole.packing)]
        assert on_pools["run"].is_unique
        others = cands[(cands["pool"] < 0) & ~cands["run"].isin(on_pools["run"])]
        fee = sum(p.cents_per_node * b for p, b in zip(pools, whole.packing_bought))
        cost = (
            fee
            + on_pools["cost_cents"].sum()
            + others.groupby("run")["cost_cents"].min().sum()
        )
        assert cost == best
    assert lifted >= 1, lifted


def test_the_integer_packing_starts_only_with_room_and_before_a_stop():
    """`packed` lets the LP go without a packing when less than PACKING_ROOM times the LP's own time is left
    (a late start overran the limit on the 500-run quarters) or once the search has stopped it."""
    cands, runs, pools = _two_runs_one_node_apart()
    relaxation = relax(cands, runs, pools, 4, keep_lp=True)
    assert relaxation.lp is not None and relaxation.seconds > 0
    short = relaxation.seconds * (batch_bound.PACKING_ROOM - 0.5)
    stopped = threading.Event()
    stopped.set()
    for late in (packed(relaxation, short), packed(relaxation, 10.0, stopped)):
        assert late.lp is None and late.packing == {} and late.packing_bought is None
        assert late.bound_usd == relaxation.bound_usd
    whole = packed(
        relaxation, max(10.0, 2 * batch_bound.PACKING_ROOM * relaxation.seconds)
    )
    assert whole.packing == {0: 0, 2: 2} and whole.packing_bought == (1,)


def test_an_lp_past_itscapacity_terms_is_left_out(monkeypatch):
    """Two runs of 2 steps, pooled at starts 0 and 1..2: 2 + 4 capacity terms. Past MAX_LP_TERMS no LP is built
    (500 runs at hourly steps made one of 80 million terms, 7 GB, that did not solve in time): no bound, as
    when the first LP does not finish."""
    cands, runs, pools = _two_runs_one_node_apart()
    assert batch_bound.capacity_terms(cands, runs, pools) == 6
    monkeypatch.setattr(batch_bound, "MAX_LP_TERMS", 6)
    assert relax(cands, runs, pools, 4).bound_usd == pytest.approx(1.0, rel=1e-5)
    monkeypatch.setattr(batch_bound, "MAX_LP_TERMS", 5)
    monkeypatch.setattr(batch_bound, "TimeIndexedLP", None)  # never built
    assert relax(cands, runs, pools, 4) == Relaxation(
        None,
        left_out="the LP bound is left out: 6 capacity terms, past the 5 it builds",
    )


def test_core_is_packed_near_the_lp_only_inside_widened_starts():
    """The neighbourhood keeps every candidate off the pools and the pooled ones the LP uses,
    with starts widened by 0.4 of the duration (one step here), and CP-SAT respects them."""
    cands, runs, pools = _two_runs_one_node_apart()
    relaxation = relax(cands, runs, pools, 4)
    near = batch_search._near_the_relaxation(cands, relaxation)
    assert list(near["cid"]) == ["a0", "a-1", "b0", "b-1"]
    assert near[["first_start", "last_start"]].iloc[[0, 2]].values.tolist() == [
        [0, 1],
        [1, 3],
    ]
    assert near[["first_start", "last_start"]].iloc[[1, 3]].isna().all().all()

    narrowed = near.copy()
    narrowed.loc[narrowed["cid"] == "b0", ["first_start", "last_start"]] = [
        1,
        1,
    ]  # b on the pool only at 1
    result = solve_batch(
        build_batch_model(narrowed, runs, pools, BatchLimits(), 4), 10.0, workers=1
    )
    assert result.status == "OPTIMAL"
    # b at 1 overlaps a: two nodes ($2), or b on demand ($1 + $10): two nodes is cheaper.
    assert result.objective_usd == pytest.approx(2.0) and result.bought == [2]
    assert dict(zip(result.chosen["cid"], result.chosen["start_step"])) == {
        "a0": 0,
        "b0": 1,
    }


def test_the_pools_are_packed_near_the_lp_with_the_runs_it_puts_there_and_their_predecessors():
    """A fine-tune the LP puts on a pool is packed with the core, and so is every run it waits for, however
    far up the chain; a run the LP keeps off the pools, that no packed run waits for, is not."""
    from types import SimpleNamespace

    runs = [
        RunInfo("pt", 0, 10, (), 1, True),
        RunInfo("mid", 0, 10, ("pt",), 1, True),
        RunInfo("ft", 0, 10, ("mid",), 1, True),
        RunInfo("core", 0, 10, (), 1, True),
        RunInfo("other", 0, 10, ("core",), 1, True),
    ]
    cands = pd.DataFrame(
        {"run": ["pt", "mid", "ft", "ft", "core", "other"]},
        index=[10, 11, 12, 13, 14, 15],
    )
    whole = SimpleNamespace(runs={r.name: r for r in runs}, cands=cands)
    on_the_lp = Relaxation(1.0, (1,), {13: (0, 1), 14: (0, 0)})
    packed = batch_search._on_the_lp_pools(whole, [runs[3]], on_the_lp)
    assert [r.name for r in packed] == ["pt", "mid", "ft", "core"]


@pytest.mark.slow
def test_batch_json_on_stdout_is_only_json(tmp_path):
    """The bound's LP solver runs in the same process; nothing it prints may reach stdout."""
    planner = Path(sys.executable).with_name("planner")
    done = subprocess.run(
        [
            str(planner),
            "batch",
            str(SCENARIOS / "quarter-team.yaml"),
            "--format",
            "json",
            "--time-limit",
            "5",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["reservations"]


# ---------------------------------------------------------------- priorities under a budget


def priorities_quarter(budget: str) -> str:
    return quarter_yaml(
        name="priorities",
        runs=[
            quarter_run("must", "training", 10),
            quarter_run("low", "fine_tuning", 10, required=False, priority=1),
            quarter_run("high", "fine_tuning", 20, required=False, priority=5),
            quarter_run("mid", "fine_tuning", 10, required=False, priority=3),
        ],
        constraints={"budget": budget},
    )


def test_budget_drops_the_lowest_priority_runs(tmp_path):
    # On one A100 at $1.29/h: 10 GPU-h ~ $13 (must, low, mid), 20 GPU-h ~ $26 (high).
    # $45 funds must + high (~$39) or must + low + mid (~$39), never all four (~$65): the
    # priority-5 run stays although it is the dearest, and both cheaper runs go.
    loaded, plan, data = solve(tmp_path, priorities_quarter("$45"))
    assert data["status"] == "OPTIMAL"
    assert check_schedule(loaded, data) == []
    scheduled = {r["run"] for r in data["runs"] if r["scheduled"]}
    assert scheduled == {"must", "high"}
    assert {u["run"] for u in data["unscheduled"]} == {"low", "mid"}
    # $58 funds must + high + one ~$13 run: the priority-3 one.
    loaded, plan, data = solve(tmp_path, priorities_quarter("$58"), "b.yaml")
    assert {r["run"] for r in data["runs"] if r["scheduled"]} == {"must", "high", "mid"}
    assert check_schedule(loaded, data) == []


def test_required_runs_are_never_dropped_for_budget(tmp_path):
    # $10 cannot even fund the required run (~$13): INFEASIBLE, not a schedule without it.
    _, plan, data = solve(tmp_path, priorities_quarter("$10"))
    assert data["status"] == "INFEASIBLE"
    assert not any(r.get("scheduled") for r in data["runs"])


# ---------------------------------------------------------------- reservations: bought exactly when they pay off


def reserved_case(tmp_path, term_start, term_end, price):
    text = reserved_quarter(term_start, term_end, price)
    loaded, plan, data = solve(tmp_path, text, f"r-{price[1:]}-{term_end}.yaml")
    on_demand = plan.cands[(plan.cands["market"] == "on_demand")]["cost_usd"]
    return loaded, plan, data, float(on_demand.min())


def test_reserved_node_bought_when_it_pays_off(tmp_path):
    # train: 40 GPU-h on one A100-40GB (as fast as the A100-80GB reference here), no interruptions:
    # on demand ~40.2 h x $1.29/h + restart ~ $52.5. A 48 h term (Jan 4-6) at $0.50/node-h costs
    # 1 x 48 x 0.50 = $24 < $52.5 and holds the 2-step (48 h) slot: buy 1 node, run reserved.
    loaded, plan, data, on_demand = reserved_case(
        tmp_path, "2027-01-04", "2027-01-06", "$0.50"
    )
    assert 50 < on_demand < 55
    assert data["status"] == "OPTIMAL" and check_schedule(loaded, data) == []
    (reservation,) = data["reservations"]
    assert reservation["nodes"] == 1  # the second node would be $24 for nothing
    assert reservation["cost_usd"] == 24.0
    train = by_run(data)["train"]
    assert train["market"] == "reserved"
    assert at(train["end"]) <= at("2027-01-06T00:00+00:00")
    assert data["objective_usd"] == pytest.approx(24.0 + train["cost_usd"], abs=0.01)
    assert data["objective_usd"] < on_demand


def test_reserved_node_not_bought_when_the_price_is_too_high(tmp_path):
    # Same 48 h term at $1.20/node-h: 48 x 1.20 = $57.6 > $52.5 on demand: buy nothing.
    loaded, plan, data, on_demand = reserved_case(
        tmp_path, "2027-01-04", "2027-01-06", "$1.20"
    )
    assert data["status"] == "OPTIMAL" and check_schedule(loaded, data) == []
    assert data["reservations"][0]["nodes"] == 0
    assert by_run(data)["train"]["market"] == "on_demand"
    assert data["objective_usd"] == pytest.approx(on_demand, abs=0.01)


def test_reserved_node_not_bought_when_the_term_is_too_long(tmp_path):
    # $0.60/node-h is under half the on-demand rate, but the term is the whole 96 h horizon:
    # 96 x 0.60 = $57.6 > $52.5 on demand (the node would idle 56 of 96 hours): buy nothing.
    # A 48 h term at the same rate (48 x 0.60 = $28.8 < $52.5) is bought.
    loaded, plan, data, on_demand = reserved_case(
        tmp_path, "2027-01-04", "2027-01-08", "$0.60"
    )
    assert data["status"] == "OPTIMAL" and check_schedule(loaded, data) == []
    assert data["reservations"][0]["nodes"] == 0
    assert data["objective_usd"] == pytest.approx(on_demand, abs=0.01)
    loaded, plan, data, _ = reserved_case(tmp_path, "2027-01-04", "2027-01-06", "$0.60")
    assert data["reservations"][0]["nodes"] == 1
    assert data["reservations"][0]["cost_usd"] == pytest.approx(28.8)
    assert check_schedule(loaded, data) == []


# ---------------------------------------------------------------- monthly budget


def monthly_quarter(monthly_budget: str) -> str:
    return quarter_yaml(
        name="monthly",
        horizon=("2027-01-30", "2027-02-04", "24h"),
        runs=[
            quarter_run("early", "training", 10, due="2027-01-31"),
            quarter_run("late", "training", 10),
        ],
        constraints={"monthly_budget": monthly_budget},
    )


def test_monthly_budget_pushes_a_run_into_the_next_month(tmp_path):
    # Each run costs ~$13 on one A100. `early` must run on Jan 30 (due Jan 31). January's $20
    # cannot hold both (~$26), so `late` must start on Feb 1 or later (runs count in the month
    # they start).
    loaded, plan, data = solve(tmp_path, monthly_quarter("$20"))
    assert data["status"] == "OPTIMAL"
    assert check_schedule(loaded, data) == []
    runs = by_run(data)
    assert 10 < runs["late"]["cost_usd"] < 20
    assert at(runs["early"]["start"]) < at("2027-02-01T00:00+00:00")
    assert at(runs["late"]["start"]) >= at("2027-02-01T00:00+00:00")
    months = {m["month"]: m["cost_usd"] for m in data["months"]}
    assert set(months) == {"2027-01", "2027-02"}
    assert months["2027-01"] == pytest.approx(runs["early"]["cost_usd"], abs=0.01)
    assert months["2027-02"] == pytest.approx(runs["late"]["cost_usd"], abs=0.01)
    # The same schedule with `late` moved into January breaks the monthly budget.
    bad = broken(data)
    shift(
        by_run(bad)["late"],
        -(at(runs["late"]["start"]) - at("2027-01-30T00:00+00:00")).total_seconds()
        / 3600,
    )
    assert "monthly budget 2027-01" in violations(loaded, bad)
    # $10 a month cannot fund even one run: INFEASIBLE.
    _, _, tight = solve(tmp_path, monthly_quarter("$10"), "tight.yaml")
    assert tight["status"] == "INFEASIBLE"


# ---------------------------------------------------------------- regressions (bugs the brute force and checker found)


def unaligned_term_quarter(constraints=None) -> str:
    return quarter_yaml(
        name="unaligned",
        horizon=("2027-01-30", "2027-02-03", "24h"),
        runs=[quarter_run("a", "training", 40, interruption_tolerance="none")],
        reservations=[
            {
                "offer": A100_OFFER,
                "start": "2027-01-30T12:00",
                "end": "2027-02-02T12:00",
                "price_per_node_h": "$0.50",
                "min_nodes": 1,
                "max_nodes": 1,
            }
        ],
        constraints=constraints,
    )


def test_months_add_up_with_a_term_off_the_step_grid(tmp_path):
    # 72 h term x $0.50 = $36 paid (objective 36.0); months report 12 + 12 (the 48 h of whole
    # steps inside the term) instead of 18 + 18.
    loaded, _, data = solve(tmp_path, unaligned_term_quarter())
    assert data["objective_usd"] == pytest.approx(36.0)
    assert sum(m["cost_usd"] for m in data["months"]) == pytest.approx(36.0, abs=0.01)


def test_monthly_budget_with_a_term_off_the_step_grid(tmp_path):
    text = unaligned_term_quarter(constraints={"monthly_budget": "$15"})
    loaded, _, data = solve(tmp_path, text)
    assert data["status"] == "INFEASIBLE" or check_schedule(loaded, data) == []


OPTIONAL_PREDECESSOR = quarter_yaml(
    name="optional-predecessor",
    runs=[
        quarter_run("huge", "training", 4000, required=False),
        quarter_run("follow", "fine_tuning", 10, required=False, after=["huge"]),
        quarter_run("other", "fine_tuning", 10),
    ],
)


def test_run_after_an_optional_run_without_candidates(tmp_path):
    loaded, plan, data = solve(tmp_path, OPTIONAL_PREDECESSOR)
    assert data["status"] == "OPTIMAL"
    assert {r["run"] for r in data["runs"] if r["scheduled"]} == {"other"}


ONE_A6000 = {"regions": ["CA"], "instance_types": ["1x_RTXA6000_SECURE"]}
PER_MARKET = quarter_yaml(
    name="per-market",
    catalogs=["runpod"],
    horizon=("2027-01-04", "2027-01-06", "48h"),
    runs=[
        quarter_run(
            "od",
            "training",
            8,
            per_gpu="16GiB",
            interruption_tolerance="none",
            allow=ONE_A6000,
        ),
        quarter_run(
            "sp",
            "batch_inference",
            8,
            per_gpu="16GiB",
            interruption_tolerance="stateless",
            allow=ONE_A6000,
        ),
    ],
    constraints={
        "node_limits": {"runpod/CA/1x_RTXA6000_SECURE": 1},
        "node_limits_per_market": True,
    },
)


def test_node_limits_per_market(tmp_path):
    # One 48 h step: `od` (tolerance none: on demand) and `sp` (stateless: spot) must both run in
    # it on the one allowed offer. Per market, each market may have 1 node: feasible.
    loaded, plan, data = solve(tmp_path, PER_MARKET)
    reference = brute_force(loaded, plan.cands)
    assert reference is not None
    assert data["status"] == "OPTIMAL"
    assert check_schedule(loaded, data) == []


NOTHING_SCHEDULED = quarter_yaml(
    name="nothing",
    runs=[quarter_run("extra", "training", 10, required=False)],
    constraints={"budget": "$5"},
)


def test_table_of_a_schedule_with_no_run(tmp_path, run):
    path = write(tmp_path, NOTHING_SCHEDULED)
    result = run("batch", path, "--workers", "1")
    assert result.exit_code == 0


def test_json_of_a_schedule_with_no_run(tmp_path, run):
    path = write(tmp_path, NOTHING_SCHEDULED)
    result = run("batch", path, "--workers", "1", "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["status"] == "OPTIMAL" and data["objective_usd"] == 0.0
    assert data["runs"] == [
        {"run": "extra", "scheduled": False, "reason": data["unscheduled"][0]["reason"]}
    ]
    assert check_schedule(load_quarter(path), data) == []


# ---------------------------------------------------------------- bad input


def base_quarter(*more_runs, **a_keys) -> str:
    """The valid quarter the bad inputs below are edits of; `a_keys` go on run a, `more_runs` after b."""
    return quarter_yaml(
        name="bad",
        runs=[
            quarter_run(
                "a", "training", 40, release="2027-01-04", due="2027-01-07", **a_keys
            ),
            quarter_run("b", "training", 10, after=["a"]),
            *more_runs,
        ],
        reservations=[
            {
                "offer": A100_OFFER,
                "start": "2027-01-04",
                "end": "2027-01-06",
                "price_per_node_h": "$0.50",
                "max_nodes": 2,
            }
        ],
    )


BASE = base_quarter()


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


BAD_CASES = {
    # name: (old, new, key path, needle of the line named, words of the message)
    "inverted horizon": (
        "end: 2027-01-08, step",
        "end: 2027-01-02, step",
        "horizon",
        "horizon:",
        "is not after start",
    ),
    "inverted reservation term": (
        "    end: 2027-01-06",
        "    end: 2027-01-03",
        "reservations[0]",
        "- offer:",
        "is not after start",
    ),
    "due before release": (
        "    due: 2027-01-07",
        "    due: 2027-01-03",
        "runs[0].due",
        "due: 2027-01-03",
        "is not after release",
    ),
    "unknown run in after": (
        "after: [a]",
        "after: [aa]",
        "runs[1].after[0]",
        "after: [aa]",
        "unknown run 'aa' in after (did you mean 'a'?)",
    ),
    "unknown offer": (
        "offer: lambda/us-east-1/gpu_1x_a100_sxm4",
        "offer: lambda/us-east-1/gpu_1x_a100_sxm",
        "reservations[0].offer",
        "- offer:",
        "unknown offer 'lambda/us-east-1/gpu_1x_a100_sxm' (did you mean "
        "'lambda/us-east-1/gpu_1x_a100_sxm4'?)",
    ),
    "min above max nodes": (
        "    max_nodes: 2",
        "    min_nodes: 3\n    max_nodes: 2",
        "reservations[0]",
        "- offer:",
        "min_nodes (3) is above max_nodes (2)",
    ),
    "time budget on a run": (
        "    due: 2027-01-07",
        "    due: 2027-01-07\n    time_budget: 10h",
        "runs[0]",
        "- name: a",
        "use release and due instead of time_budget",
    ),
    "term outside the horizon": (
        "    end: 2027-01-06",
        "    end: 2027-01-09",
        "reservations[0]",
        "- offer:",
        "must lie inside the horizon",
    ),
    "window without a whole step": (
        "    due: 2027-01-07",
        "    due: 2027-01-04T05:00",
        "runs[0]",
        "- name: a",
        "holds no whole time step",
    ),
    "run after itself": (
        "after: [a]",
        "after: [b]",
        "runs[1].after[0]",
        "after: [b]",
        "cannot come after itself",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_quarter_is_one_error_line_exit_2(case, tmp_path, run):
    old, new, key_path, needle, words = BAD_CASES[case]
    assert old in BASE
    text = BASE.replace(old, new, 1)
    path = write(tmp_path, text)
    result = run("batch", path)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        f"error: {path}:{line_of(text, needle)} ({key_path}): "
    ), lines[0]
    assert words in lines[0]
    assert "Traceback" not in result.stderr


def test_cycle_in_after_names_the_cycle(tmp_path, run):
    text = base_quarter(
        quarter_run("c", "training", 10, gpus=None, after=["b"], allow=None),
        after=["c"],
    )
    path = write(tmp_path, text)
    result = run("batch", path)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0] == (
        f"error: {path}:{line_of(text, 'after: [c]')} (runs[0].after): "
        "runs wait for each other in a cycle: a -> c -> b -> a"
    )


def test_validate_accepts_the_base_quarter(tmp_path, run):
    path = write(tmp_path, BASE)
    result = run("validate", path)
    assert result.exit_code == 0, result.output
    assert (
        "quarter 'bad', 2 run(s), 1 reservation option(s), 8 steps of 12 h"
        in result.stdout
    )


# ---------------------------------------------------------------- CLI formats and the JSON contract

CONTRACT_TOP = {
    "status",
    "objective_usd",
    "bound_usd",
    "solve_report",
    "reservations",
    "runs",
    "months",
}
CONTRACT_RESERVATION = {
    "provider",
    "region",
    "instance_type",
    "nodes",
    "start",
    "end",
    "cost_usd",
    "utilisation",
}
CONTRACT_RUN = {
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


@pytest.fixture(scope="module")
def contract_file(tmp_path_factory) -> Path:
    text = chain_quarter(
        reservations=[
            {
                "name": "spare",
                "offer": "lambda/us-east-1/gpu_2x_a100",
                "start": "2027-01-04",
                "end": "2027-01-06",
                "price_per_node_h": "$1.00",
                "max_nodes": 1,
            }
        ]
    )
    return write(tmp_path_factory.mktemp("contract"), text)


def test_json_contract(contract_file, run):
    result = run("batch", contract_file, "--format", "json", "--workers", "1")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert CONTRACT_TOP <= set(data)
    assert data["status"] in ("OPTIMAL", "FEASIBLE")
    for key in ("objective_usd", "bound_usd"):
        assert isinstance(data[key], (int, float))
    assert isinstance(data["solve_report"]["solve_seconds"], (int, float))
    assert data["bound_usd"] <= data["objective_usd"] + 1e-9
    assert len(data["reservations"]) == 1
    for reservation in data["reservations"]:
        assert CONTRACT_RESERVATION <= set(reservation)
        for key in ("start", "end"):
            assert dt.datetime.fromisoformat(reservation[key]).tzinfo is not None
    assert [r["run"] for r in data["runs"]] == ["a", "b", "c"]
    for r in data["runs"]:
        if r["scheduled"]:
            assert CONTRACT_RUN <= set(r)
            assert r["market"] in ("on_demand", "spot", "reserved")
            for key in ("start", "end"):
                parsed = dt.datetime.fromisoformat(r[key])  # ISO 8601 with an offset
                assert parsed.tzinfo is not None and parsed.utcoffset() == dt.timedelta(
                    0
                )
    for month in data["months"]:
        assert set(month) == {"month", "cost_usd"}
        dt.datetime.strptime(month["month"], "%Y-%m")
    assert check_schedule(load_quarter(contract_file), data) == []


def test_table_and_csv(contract_file, run):
    table = run("batch", contract_file, "--workers", "1")
    assert table.exit_code == 0, table.output
    assert "schedule for quarter 'chain'" in table.stdout
    assert (
        "spending per month" in table.stdout and "reservations to buy" in table.stdout
    )
    assert "OPTIMAL: expected total $" in table.stdout
    csv = run("batch", contract_file, "--workers", "1", "--format", "csv")
    assert csv.exit_code == 0
    header, *rows = csv.stdout.strip().splitlines()
    assert header.split(",")[:5] == ["section", "run", "scheduled", "start", "end"]
    assert {row.split(",")[1] for row in rows if row.startswith("run,")} == {
        "a",
        "b",
        "c",
    }
    assert {row.split(",")[0] for row in rows} == {"run", "reservation", "month"}


def test_output_file_is_written_atomically(contract_file, run, tmp_path):
    target = tmp_path / "schedule.json"
    result = run(
        "batch", contract_file, "--format", "json", "--workers", "1", "-o", target
    )
    assert result.exit_code == 0
    assert result.stdout == ""
    assert f"wrote {target}" in result.stderr
    data = json.loads(target.read_text(encoding="utf-8"))
    assert check_schedule(load_quarter(contract_file), data) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "schedule.json"
    ]  # no temporary file left behind
    # Never over the input quarter: exit 2, the quarter untouched.
    before = contract_file.read_text(encoding="utf-8")
    refused = run("batch", contract_file, "--workers", "1", "-o", contract_file)
    assert refused.exit_code == 2
    assert (
        refused.stderr.startswith("error: ")
        and "refusing to overwrite an input file" in refused.stderr
    )
    assert contract_file.read_text(encoding="utf-8") == before


def test_infeasible_quarter_exits_1(tmp_path, run):
    path = write(tmp_path, priorities_quarter("$10"))
    result = run("batch", path, "--workers", "1", "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["status"] == "INFEASIBLE" and data["objective_usd"] is None
    assert check_schedule(load_quarter(path), data) == []


def test_determinism(contract_file):
    loaded = load_quarter(contract_file)
    first = as_json(make_batch_plan(loaded, workers=1))
    again = as_json(make_batch_plan(loaded, workers=1))
    first.pop("solve_report"), again.pop("solve_report")
    assert first == again


def test_a_schedule_without_a_bound_says_so():
    """When no search produced a bound within the time limit, the report says so: no `gap 0.00 %` against
    a NaN bound, and `bound_usd` is null in the JSON (NaN is not JSON)."""
    from planner.load.quarter import load_quarter
    from planner.report.batch import batch_text

    plan = make_batch_plan(
        load_quarter(SCENARIOS / "quarter-budget.yaml"), time_limit_s=5.0
    )
    plan = dataclasses.replace(
        plan,
        result=dataclasses.replace(plan.result, status="FEASIBLE", bound_usd=math.nan),
    )
    assert math.isnan(plan.result.gap)
    data = batch_json(plan)
    assert data["bound_usd"] is None and data["objective_usd"] > 0
    json.loads(json.dumps(data, allow_nan=False))
    assert "feasible, no bound within the time limit" in batch_text(plan, "table")


def test_a_bound_left_out_for_its_size_says_why():
    """Past MAX_LP_TERMS the LP is not built (`relax` says why: the test above): a schedule left without any
    bound carries that reason to the status line, not the time limit."""
    from types import SimpleNamespace

    from planner.load.quarter import load_quarter
    from planner.report.batch import batch_text

    why = "the LP bound is left out: 80,000,000 capacity terms, past the 50,000,000 it builds"
    found = BatchResult("FEASIBLE", 10.0, chosen=pd.DataFrame({"run": []}))
    finished = batch_search._finish(
        found, [], SimpleNamespace(runs={}), 0.0, Relaxation(None, left_out=why)
    )
    assert (
        finished.status == "FEASIBLE"
        and math.isnan(finished.bound_usd)
        and finished.no_bound_why == why
    )
    plan = make_batch_plan(
        load_quarter(SCENARIOS / "quarter-launch.yaml"), time_limit_s=2.0
    )
    plan = dataclasses.replace(
        plan,
        result=dataclasses.replace(
            plan.result, status="FEASIBLE", bound_usd=math.nan, no_bound_why=why
        ),
    )
    assert f"feasible, no bound ({why})" in batch_text(plan, "table")


def test_a_search_bound_below_zero_is_no_bound():
    """CP-SAT bounds cost less each optional run's priority weight; turned into dollars at the plan's priority
    it falls far below zero while the search still allows more optional runs (a 500-run quarter printed
    $-1,043,226,077.15, a gap of 45,641 %). Such a figure bounds nothing: the plan reports no bound, and why;
    a bound of zero or more from a search with the same priority is kept."""
    from types import SimpleNamespace

    runs = {"a": SimpleNamespace(priority=2, required=False)}
    found = BatchResult("FEASIBLE", 10.0, 10.0, chosen=pd.DataFrame({"run": ["a"]}))
    useless = dataclasses.replace(found, bound_usd=-1_043_226_077.15)
    finished = batch_search._finish(
        found, [useless], SimpleNamespace(runs=runs), 0.0, None
    )
    assert math.isnan(finished.bound_usd) and math.isnan(finished.gap)
    assert finished.no_bound_why == "the search's bound still allows more optional runs"
    useful = dataclasses.replace(found, bound_usd=9.5)
    finished = batch_search._finish(
        found, [useless, useful], SimpleNamespace(runs=runs), 0.0, None
    )
    assert finished.bound_usd == 9.5 and finished.no_bound_why == ""


@pytest.mark.slow  # 14 s
def test_a_search_that_ends_below_its_greedy_start_returns_the_checked_greedy_schedule(
    monkeypatch,
):
    """If every search phase leaves optional runs out that the greedy schedule placed (as CP-SAT did on a
    500-run quarter), the greedy schedule is checked by CP-SAT with its choices fixed and returned, as
    FEASIBLE (a fixed solve proves nothing), and the checker accepts it."""
    from planner.batch.model import solve_batch
    from planner.load.quarter import load_quarter

    def leaves_optional_runs_out(model, *args, **kwargs):
        result = solve_batch(model, *args, **kwargs)
        start, fixed = (
            args[3],
            args[4] if len(args) > 4 else kwargs.get("fix_hint", False),
        )
        if (fixed and "failed_required" in start) or result.status not in (
            "OPTIMAL",
            "FEASIBLE",
        ):
            return result  # only the check of the greedy schedule (the greedy's own dict) is left whole
        optional = [r.name for r in model.runs.values() if not r.required]
        kept = result.chosen[~result.chosen["run"].isin(optional)]
        return dataclasses.replace(
            result,
            status="FEASIBLE",
            chosen=kept,
            unscheduled=sorted(set(result.unscheduled) | set(optional)),
        )

    monkeypatch.setattr(batch_search, "solve_batch", leaves_optional_runs_out)
    loaded = load_quarter(SCENARIOS / "quarter-team.yaml")
    plan = make_batch_plan(loaded, time_limit_s=20.0)
    optional = {r.name for r in loaded.quarter.runs if not r.required}
    assert plan.result.status == "FEASIBLE"
    # the greedy's optional runs are back
    assert optional & set(plan.result.chosen["run"])
    assert check_schedule(loaded, batch_json(plan)) == []


def test_a_candidate_on_no_limit_beats_slower_dearer_ones_under_any_limit_unless_grouped():
    """`_keep_useful`: a candidate no quota covers and no cap limits beats, on the calendar, every dearer one
    booked for as many steps or more, whatever limits those draw on (a schedule with one has the same room, and
    pays less, with it); not a faster one, and not where a group ties the run to its provider."""
    from planner.batch.pipeline import _keep_useful
    from planner.candidates.limits import Limits

    def record(provider: str, cents: int, steps: int) -> dict:
        return {
            "provider": provider,
            "gpu": "A100-80GB-PCIe",
            "gpu_family": "A100",
            "offer_key": f"{provider}/x/a100",
            "market": "on_demand",
            "max_nodes": math.nan,
            "gpus": 4,
            "pool": -1,
            "cost_cents": cents,
            "duration_steps": steps,
            "nodes": 1,
            "cid": f"eval|{provider}|{cents}",
        }

    limits = Limits(gpu_quotas={"azure": 64})
    free, quota_slow, quota_fast = (
        record("lambda", 300, 2),
        record("azure", 310, 2),
        record("azure", 320, 1),
    )
    kept = _keep_useful([quota_slow, free, quota_fast], limits)
    assert [r["cid"] for r in kept] == [free["cid"], quota_fast["cid"]]
    kept = _keep_useful([quota_slow, free, quota_fast], limits, grouped=True)
    assert len(kept) == 3


def test_of_two_equal_candidates_the_one_with_fewer_nodes_stays():
    """A stateless run costs and takes the same on four 1-GPU nodes as on one 4-GPU node (each node is its own
    stream, cost model §4); the calendar keeps the one with fewer nodes to run, whatever the names say."""
    from planner.batch.pipeline import _keep_useful
    from planner.candidates.limits import Limits

    def record(instance: str, nodes: int) -> dict:
        return {
            "provider": "azure",
            "gpu": "A100-80GB-PCIe",
            "gpu_family": "A100",
            "offer_key": f"azure/x/{instance}",
            "market": "spot",
            "max_nodes": math.nan,
            "gpus": 4,
            "pool": -1,
            "cost_cents": 332,
            "duration_steps": 1,
            "nodes": nodes,
            "cid": f"eval|azure/x/{instance}|spot|x{nodes}",
        }

    limits = Limits(gpu_quotas={"azure": 64})
    kept = _keep_useful([record("NC24", 4), record("NC96", 1)], limits)
    assert [r["nodes"] for r in kept] == [1]
    kept = _keep_useful(
        [record("NC24", 4), record("NC96", 1) | {"cost_cents": 333}], limits
    )
    assert [r["nodes"] for r in kept] == [
        4
    ]  # a cent cheaper wins whatever its node count
