"""A plan file (`planner solve --format json`) read back for `planner simulate --plan`: checked for
what a simulation needs, every error located at the file and the assignment."""
from __future__ import annotations

import json
from pathlib import Path

from planner.errors import PlannerError
from planner.load.yaml import read_text

NEEDED = ("workload", "nodes", "gpus_per_node", "checkpoint_interval_h", "inputs", "expected", "breakdown_usd")
"""The fields of an assignment the simulation reads."""


def _read_json(path: Path, what: str):
    try:
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as exc:
        raise PlannerError(f"not valid JSON: {exc.msg}", f"{path}:{exc.lineno}") from None


def load_plan_assignments(path: Path, workloads: set[str]) -> list[dict]:
    """The plan's assignments, each naming one of `workloads` and carrying the NEEDED fields."""
    data = _read_json(path, "plan file")
    if not isinstance(data, dict) or not isinstance(data.get("assignments"), list) or not (
            data["assignments"] or data.get("endpoints")):
        raise PlannerError("expected a plan from `planner solve --format json` with assignments or endpoints",
                           str(path))
    for index, a in enumerate(data["assignments"]):
        missing = [k for k in NEEDED if k not in a]
        if missing:
            raise PlannerError(f"missing {', '.join(missing)}", f"{path}: assignments[{index}]")
        if a["workload"] not in workloads:
            raise PlannerError(f"workload {a['workload']!r} is not in the scenario", f"{path}: assignments[{index}]")
    return data["assignments"]


SCHEDULE_NEEDED = ("run", "start", "end", "nodes", "gpus_per_node", "pool", "checkpoint_interval_h", "inputs")
"""The fields of a scheduled run the schedule's replay reads."""


def load_schedule(path: Path, loaded) -> dict:
    """A schedule from `planner batch --format json` for the quarter `loaded`: its scheduled runs name the
    quarter's runs and carry SCHEDULE_NEEDED, and it has one reservation entry per option."""
    data = _read_json(path, "schedule file")
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or data.get("status") not in (
            "OPTIMAL", "FEASIBLE"):
        raise PlannerError("expected a schedule from `planner batch --format json` (status OPTIMAL or FEASIBLE)",
                           str(path))
    names = {r.name for r in loaded.quarter.runs}
    for index, r in enumerate(data["runs"]):
        if not isinstance(r, dict) or not r.get("scheduled"):
            continue
        missing = [k for k in SCHEDULE_NEEDED if k not in r]
        if missing:
            raise PlannerError(f"missing {', '.join(missing)} (a schedule from this version of `planner batch`)",
                               f"{path}: runs[{index}]")
        if r["run"] not in names:
            raise PlannerError(f"run {r['run']!r} is not in the quarter", f"{path}: runs[{index}]")
    if len(data.get("reservations") or []) != len(loaded.quarter.reservations):
        raise PlannerError(f"{len(data.get('reservations') or [])} reservation entries for "
                           f"{len(loaded.quarter.reservations)} reservation options in the quarter", str(path))
    return data
