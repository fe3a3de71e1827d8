"""Golden files: what every shipped example plans, pinned, so a change that moves a plan fails here.

tests/golden/<example>.json holds the JSON that `planner solve` (scenarios) or `planner batch`
(quarter files) printed for the shipped example, with `--no-timings` and the default time limit
and workers; `python tools/update_golden.py` rewrites them (read the diff before keeping it).

What is compared:
- `solve`: the whole JSON. `solve_report` (the clock readings: seconds of search and of the LP,
  with the workers and what proved the bound beside them) is left out by `--no-timings` and
  dropped here should it appear. Nothing else differed between runs: the
  output was byte-identical over repeated runs, on one core (`taskset -c 0`) and with the cores
  busy. Floats are compared to a relative 1e-9 rather than bit for bit, so that a libm/numpy
  build or a reordered sum (last-digit noise, not a different plan) does not fail the suite;
  strings, integers, statuses, choices and the order of lists must be identical.
- `batch`: `status`, `objective_usd` to the cent, `bound_usd` when the status is OPTIMAL (a
  FEASIBLE bound comes from an LP the clock cuts short), and which runs are scheduled and which
  are not. The full schedule (every run's start, placement, market and cost, the reservations,
  the months) is compared, in a test of its own, only for the quarters in FULL_SCHEDULE: those
  whose schedule was identical over repeated runs, on one core and with the cores busy.
  quarter-team is not among them: on an idle machine its first search phase proves the
  schedule optimal within that phase's clock cap (5 % of --time-limit, 3 s), under load it
  reaches the cap first and the later phases find another schedule of the same cost (the same
  runs, placements, reservations and total, 11 runs starting at other times, so the months
  split differently).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDEN_DIR = REPO / "tests" / "golden"
GOLDEN_FILES = sorted(GOLDEN_DIR.glob("*.json"))
TIMINGS = ("solve_report",)
"""Top-level keys that hold clock readings (left out by --no-timings; dropped should they appear)."""
FLOAT_REL = 1e-9
FLOAT_ABS = 1e-12
EXIT_FOR_STATUS = {"OPTIMAL": 0, "FEASIBLE": 0, "INFEASIBLE": 1}


def _load_tool():
    spec = importlib.util.spec_from_file_location(
        "update_golden", REPO / "tools" / "update_golden.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the same example list and command as the script that wrote the golden files
tool = _load_tool()

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("PLANNER_CATALOG_DIR")),
    reason="PLANNER_CATALOG_DIR replaces the shipped catalogs the golden plans were made on",
)


def _example(golden: Path) -> Path:
    return tool.EXAMPLES_DIR / f"{golden.stem}.yaml"


@functools.cache
def _planned(stem: str) -> tuple[int, str]:
    """(exit status, stdout) of the golden file's command, run in process once per example per session."""
    result = tool.invoke(tool.EXAMPLES_DIR / f"{stem}.yaml")
    return result.exit_code, result.stdout


def _current(golden: Path) -> tuple[dict, dict]:
    """(golden JSON, the JSON the command prints now), both without timings."""
    expected = json.loads(golden.read_text(encoding="utf-8"))
    code, stdout = _planned(golden.stem)
    assert code == EXIT_FOR_STATUS.get(expected["status"], 3), (
        f"exit status {code} for a {expected['status']} plan"
    )
    actual = json.loads(stdout)
    for key in TIMINGS:
        expected.pop(key, None)
        actual.pop(key, None)
    return expected, actual


def differences(expected, actual, path: str = "$", rel: float = FLOAT_REL) -> list[str]:
    """Where `actual` differs from `expected`: floats to `rel`, everything else exactly."""
    if (
        isinstance(expected, bool)
        or isinstance(actual, bool)
        or expected is None
        or actual is None
    ):
        return [] if expected is actual else [f"{path}: {expected!r} -> {actual!r}"]
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if type(expected) is not type(actual):  # 2 -> 2.0 changes the JSON contract
            same = False
        elif isinstance(expected, int):
            same = expected == actual
        else:
            same = math.isclose(expected, actual, rel_tol=rel, abs_tol=FLOAT_ABS)
        return [] if same else [f"{path}: {expected!r} -> {actual!r}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{path}.{k}: missing" for k in expected if k not in actual]
        out += [
            f"{path}.{k}: unexpected {actual[k]!r}" for k in actual if k not in expected
        ]
        for k in expected:
            if k in actual:
                out += differences(expected[k], actual[k], f"{path}.{k}", rel)
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        out = (
            []
            if len(expected) == len(actual)
            else [f"{path}: {len(expected)} items -> {len(actual)}"]
        )
        for i, (e, a) in enumerate(
            zip(expected, actual, strict=False)
        ):  # the common prefix, item by item
            out += differences(e, a, f"{path}[{i}]", rel)
        return out
    return [] if expected == actual else [f"{path}: {expected!r} -> {actual!r}"]


def _report(golden: Path, found: list[str]) -> str:
    shown = "\n  ".join(found[:40]) + (
        f"\n  ... and {len(found) - 40} more" if len(found) > 40 else ""
    )
    return (
        f"the plan of {_example(golden).name} moved from {golden.relative_to(REPO)}:\n  {shown}\n"
        "If the change is meant, run `python tools/update_golden.py` and review the diff."
    )


def _ids(files: list[Path]) -> list[str]:
    return [p.stem for p in files]


SOLVE_GOLDEN = [
    g for g in GOLDEN_FILES if _example(g).exists() and not tool.is_quarter(_example(g))
]
BATCH_GOLDEN = [
    g for g in GOLDEN_FILES if _example(g).exists() and tool.is_quarter(_example(g))
]


def test_every_shipped_example_has_a_golden_file():
    shipped = {p.stem for p in tool.examples()}
    golden = {p.stem for p in GOLDEN_FILES}
    assert shipped, "no shipped examples found"
    assert not shipped - golden, (
        f"no golden file for {sorted(shipped - golden)}: run python tools/update_golden.py"
    )
    assert not golden - shipped, (
        f"golden files for examples no longer shipped: {sorted(golden - shipped)}"
    )


@pytest.mark.parametrize("golden", SOLVE_GOLDEN, ids=_ids(SOLVE_GOLDEN))
def test_solve_plan_matches_golden(golden):
    expected, actual = _current(golden)
    found = differences(expected, actual)
    assert not found, _report(golden, found)


def _cents(usd: float | None) -> int | None:
    return None if usd is None else round(usd * 100)


def _scheduled(data: dict) -> tuple[set[str], set[str]]:
    return (
        {r["run"] for r in data["runs"] if r["scheduled"]},
        {r["run"] for r in data["runs"] if not r["scheduled"]}
        | {u["run"] for u in data["unscheduled"]},
    )


@pytest.mark.parametrize("golden", BATCH_GOLDEN, ids=_ids(BATCH_GOLDEN))
def test_batch_plan_matches_golden(golden):
    expected, actual = _current(golden)
    found = []
    if actual["status"] != expected["status"]:
        found.append(f"status: {expected['status']} -> {actual['status']}")
    if _cents(actual["objective_usd"]) != _cents(expected["objective_usd"]):
        found.append(
            f"objective_usd: {expected['objective_usd']} -> {actual['objective_usd']}"
        )
    if expected["status"] == "OPTIMAL" and _cents(actual["bound_usd"]) != _cents(
        expected["bound_usd"]
    ):
        found.append(f"bound_usd: {expected['bound_usd']} -> {actual['bound_usd']}")
    (want_in, want_out), (got_in, got_out) = _scheduled(expected), _scheduled(actual)
    if got_in != want_in:
        found.append(
            f"scheduled runs: lost {sorted(want_in - got_in)}, gained {sorted(got_in - want_in)}"
        )
    if got_out != want_out:
        found.append(f"runs left out: was {sorted(want_out)}, now {sorted(got_out)}")
    assert not found, _report(golden, found)


FULL_SCHEDULE = {"quarter-budget", "quarter-launch"}
"""Quarters whose whole schedule is stable: one CP-SAT search (one worker) that ends proven optimal long
before its clock cap (quarter-launch: 0.05 s of its 3 s); verified over repeated runs and under load."""
SCHEDULE_CASES = [
    g
    if g.stem in FULL_SCHEDULE
    else pytest.param(
        g,
        marks=pytest.mark.skip(
            reason="its schedule among equal-cost ones depends on machine load (see the module docstring)"
        ),
    )
    for g in BATCH_GOLDEN
]


@pytest.mark.parametrize("golden", SCHEDULE_CASES, ids=_ids(BATCH_GOLDEN))
def test_batch_schedule_matches_golden(golden):
    """The full schedule, where it is stable; `bound_usd` is left to the test above, which
    compares it only where it is proven."""
    expected, actual = _current(golden)
    for data in (expected, actual):
        data.pop("bound_usd", None)
    found = differences(expected, actual)
    assert not found, _report(golden, found)
