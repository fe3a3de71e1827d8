"""The planner from Python: `solve`, `batch`, `estimate` and `simulate` take what the commands take (a file's
path, YAML text, or a plain dict of the same keys) and return typed results that give the commands' JSON
(`to_json`, `to_dict`) and tables (`to_frame`: pandas, with the CSV's column names).

    import planner
    plan = planner.solve("scenarios/lora-finetune.yaml")
    plan.status, plan.objective_usd, plan.assignments[0].market
    plan.to_frame()

Bad input raises `planner.PlannerError` with the line the command prints; nothing is printed or written.
Each function runs the command's own pipeline, so a result is the command's to the byte (`to_json` is
`planner solve --format json` with `timings=False` as `--no-timings`).
"""

from __future__ import annotations

import copy
import json
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported by the functions that build frames: `import planner` stays light
    import pandas as pd

    from planner.replay.endpoints import EndpointReplay
    from planner.replay.jobs import JobReplay

__all__ = [
    "Assignment",
    "EndpointPlan",
    "Estimates",
    "Schedule",
    "ScheduledRun",
    "Simulation",
    "SolvedPlan",
    "batch",
    "callable_package",
    "estimate",
    "simulate",
    "solve",
]

Source = str | Path | dict
"""A file's path, YAML text (anything with a newline or a colon that names no file), or a dict of its keys."""


def callable_package(package: types.ModuleType, function) -> None:
    """Make `package` (`planner.solve`, `planner.batch`) callable as `function` while it stays the package: a
    function of the same name in its place would break `import planner.solve.model as m` for everyone."""

    class Command(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return function(*args, **kwargs)

    package.__class__ = Command


def _load(source: Source, loader, what: str, base_dir: str | Path | None):
    """`loader(path, text)` on a path, or on YAML text or a dict read as if it were a file `<what>` in
    `base_dir` (default: the working folder), where its relative catalog and config paths start."""
    if isinstance(source, dict):
        # JSON is YAML: each key keeps a line for errors
        text = json.dumps(source, indent=1, default=str)
    elif (
        isinstance(source, str)
        and ("\n" in source or ":" in source)
        and not _names_a_file(source)
    ):
        text = source
    elif isinstance(source, (str, Path)):
        return loader(Path(source))
    else:
        raise TypeError(
            f"expected a path, YAML text or a dict, got {type(source).__name__}"
        )
    return loader(Path(base_dir or ".") / f"<{what}>", text)


def _names_a_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (
        OSError,
        ValueError,
    ):  # longer than a file name may be, or a NUL in it: text
        return False


class _Result:
    """What every result gives: the command's JSON as a string or a dict, and its table."""

    _data: Any
    _frame: pd.DataFrame

    def to_dict(self) -> Any:
        """The command's JSON contract as Python data (a copy)."""
        return copy.deepcopy(self._data)

    def to_json(self) -> str:
        """The command's JSON (`--format json`)."""
        from planner.report.render import to_json

        return to_json(self._data)

    def to_frame(self) -> pd.DataFrame:
        """The command's table, as its `--format csv` has it (a copy)."""
        return self._frame.copy()


# ---------------------------------------------------------------- solve


@dataclass(frozen=True)
class Assignment:
    """Where one job runs and what it is expected to cost (an entry of the plan's `assignments`)."""

    workload: str
    provider: str
    region: str
    instance_type: str
    gpu: str
    gpus_per_node: int
    nodes: int
    gpus: int
    market: str  # on_demand, spot, spot_fallback or reserved
    # e.g. "megatron TP2 PP1 DP8 zero3"; None where the physics chose none
    parallelism: str | None
    checkpoint_interval_h: float | None
    wall_h: float  # expected hours from start to end
    p_deadline: float
    cost_usd: float  # expected
    breakdown_usd: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class EndpointPlan:
    """One endpoint's plan in short (its pools per period are in `SolvedPlan.to_dict()`)."""

    workload: str
    cost_usd: float
    usd_per_h: float
    usd_per_month: float
    worst_ttft_s: float | None
    worst_tpot_s: float | None
    below_capacity_share: float


@dataclass(frozen=True, eq=False)
class SolvedPlan(_Result):
    """`planner solve`: the cheapest plan that meets every deadline, or why there is none (`infeasible`)."""

    scenario: str
    status: str  # OPTIMAL, FEASIBLE, INFEASIBLE or UNKNOWN
    objective_usd: float | None
    bound_usd: float | None
    prices_as_of: str | None
    assignments: tuple[Assignment, ...]
    endpoints: tuple[EndpointPlan, ...]
    infeasible: dict[str, str]  # workload -> why it cannot be placed
    _data: dict = field(repr=False)
    _frame: pd.DataFrame = field(repr=False)

    @property
    def solved(self) -> bool:
        return self.status in ("OPTIMAL", "FEASIBLE")


def solve(
    scenario: Source,
    *,
    time_limit_s: float = 60.0,
    workers: int = 2,
    seed: int = 0,
    timings: bool = True,
    base_dir: str | Path | None = None,
    alternatives: int = 3,
) -> SolvedPlan:
    """`planner solve`: the scenario's cheapest plan. `timings=False` leaves the clock readings out of the JSON
    (as `--no-timings`), so two runs compare byte for byte. `alternatives`: runner-ups per workload in the
    JSON's `alternatives` (the command's 3); each is priced exactly, so 0 plans the same for less work."""
    import pandas as pd

    from planner.load.scenario import load_scenario
    from planner.report.solve import plan_frame, plan_json
    from planner.solve.outcome import SOLVED
    from planner.solve.pipeline import make_plan

    alternatives = max(0, int(alternatives))
    plan = make_plan(
        _load(scenario, load_scenario, "scenario", base_dir),
        time_limit_s,
        workers,
        seed,
        runner_ups=alternatives,
    )
    data = plan_json(plan, timings, alternatives)
    frame = plan_frame(plan) if plan.status in SOLVED else pd.DataFrame()
    return SolvedPlan(
        scenario=data["scenario"],
        status=data["status"],
        objective_usd=data["objective_usd"],
        bound_usd=data["bound_usd"],
        prices_as_of=data["prices_as_of"],
        assignments=tuple(_assignment(a) for a in data["assignments"]),
        endpoints=tuple(_endpoint(e) for e in data["endpoints"]),
        infeasible={i["workload"]: i["reason"] for i in data["infeasible"]},
        _data=data,
        _frame=frame,
    )


def _assignment(a: dict) -> Assignment:
    parallelism = a.get("parallelism") or {}
    return Assignment(
        workload=a["workload"],
        provider=a["provider"],
        region=a["region"],
        instance_type=a["instance_type"],
        gpu=a["gpu"],
        gpus_per_node=int(a["gpus_per_node"]),
        nodes=int(a["nodes"]),
        gpus=int(a["gpus"]),
        market=a["market"],
        parallelism=parallelism.get("label") or None,
        checkpoint_interval_h=a.get("checkpoint_interval_h"),
        wall_h=a["expected"]["wall_h"],
        p_deadline=a["expected"]["p_deadline"],
        cost_usd=a["expected"]["cost_usd"],
        breakdown_usd=dict(a.get("breakdown_usd") or {}),
    )


def _endpoint(e: dict) -> EndpointPlan:
    return EndpointPlan(
        workload=e["workload"],
        cost_usd=e["cost_usd"],
        usd_per_h=e["usd_per_h"],
        usd_per_month=e["usd_per_month"],
        worst_ttft_s=e["worst"]["ttft_s"],
        worst_tpot_s=e["worst"]["tpot_s"],
        below_capacity_share=e["below_capacity_share"],
    )


# ---------------------------------------------------------------- batch


@dataclass(frozen=True)
class ScheduledRun:
    """One run of a quarter: when and where it is scheduled (`scheduled` False: left out, an optional run)."""

    run: str
    scheduled: bool
    start: str | None  # ISO 8601, UTC
    end: str | None
    provider: str | None
    region: str | None
    instance_type: str | None
    nodes: int | None
    market: str | None
    p_deadline: float | None
    cost_usd: float | None


@dataclass(frozen=True, eq=False)
class Schedule(_Result):
    """`planner batch`: the quarter's runs over time, the reservations bought, what was left out."""

    status: str
    objective_usd: float | None
    bound_usd: float | None
    runs: tuple[ScheduledRun, ...]
    unscheduled: tuple[str, ...]
    _data: dict = field(repr=False)
    _frame: pd.DataFrame = field(repr=False)

    @property
    def solved(self) -> bool:
        return self.status in ("OPTIMAL", "FEASIBLE")


def batch(
    quarter: Source,
    *,
    time_limit_s: float = 60.0,
    workers: int = 1,
    seed: int = 0,
    schedule_confidence: float | None = None,
    timings: bool = True,
    base_dir: str | Path | None = None,
) -> Schedule:
    """`planner batch`: schedule a quarter (`schedule_confidence` as `--schedule-confidence`)."""
    import pandas as pd

    from planner.batch.contract import batch_json
    from planner.batch.pipeline import make_batch_plan
    from planner.load.quarter import load_quarter

    loaded = _load(quarter, load_quarter, "quarter", base_dir)
    plan = make_batch_plan(
        loaded,
        time_limit_s=time_limit_s,
        workers=workers,
        seed=seed,
        schedule_confidence=schedule_confidence,
    )
    data = batch_json(plan, timings)
    runs = tuple(
        ScheduledRun(
            run=r["run"],
            scheduled=bool(r.get("scheduled", True)),
            start=r.get("start"),
            end=r.get("end"),
            provider=r.get("provider"),
            region=r.get("region"),
            instance_type=r.get("instance_type"),
            nodes=r.get("nodes"),
            market=r.get("market"),
            p_deadline=r.get("p_deadline"),
            cost_usd=r.get("cost_usd"),
        )
        for r in data["runs"]
    )
    frame = pd.DataFrame(
        [{k: v for k, v in r.items() if k != "inputs"} for r in data["runs"]]
    )
    return Schedule(
        status=data["status"],
        objective_usd=data["objective_usd"],
        bound_usd=data["bound_usd"],
        runs=runs,
        unscheduled=tuple(
            u if isinstance(u, str) else u.get("run", "")
            for u in data.get("unscheduled", [])
        ),
        _data=data,
        _frame=frame,
    )


# ---------------------------------------------------------------- estimate and simulate


@dataclass(frozen=True, eq=False)
class Estimates(_Result):
    """`planner estimate`: per workload, GPU and count, memory, fit and hours (`rows`); per endpoint, GPU, TP and
    request size, a replica's capacity within the SLO (`capacity`)."""

    rows: tuple[dict, ...]
    capacity: tuple[dict, ...]
    _data: list = field(repr=False)
    _frame: pd.DataFrame = field(repr=False)


def estimate(
    scenario: Source,
    *,
    workload: str | None = None,
    gpus: tuple[str, ...] = (),
    top: int | None = None,
    base_dir: str | Path | None = None,
) -> Estimates:
    """`planner estimate`: why each GPU is ruled in or out, and how fast it is (`gpus`: names, families or
    `NAME:COUNT`, as `--gpu`)."""
    import pandas as pd

    from planner.candidates.estimate_tables import estimate_tables
    from planner.errors import PlannerError, did_you_mean
    from planner.load.scenario import load_scenario

    loaded = _load(scenario, load_scenario, "scenario", base_dir)
    names = {w.name for w in loaded.scenario.workloads}
    if workload and workload not in names:
        raise PlannerError(
            f"unknown workload {workload!r}{did_you_mean(workload, names)}", "workload"
        )
    rows, capacity = estimate_tables(loaded, workload, tuple(gpus), top)
    return Estimates(
        rows=tuple(rows),
        capacity=tuple(capacity),
        _data=rows + capacity,
        _frame=pd.json_normalize(rows + capacity)
        if rows or capacity
        else pd.DataFrame(),
    )


@dataclass(frozen=True, eq=False)
class Simulation(_Result):
    """`planner simulate`: per job, the Monte-Carlo figures beside the analytic ones (`jobs`); per endpoint, the
    minute-by-minute replay's share of time below capacity and of requests within the SLO (`endpoints`)."""

    jobs: tuple[JobReplay, ...]
    endpoints: tuple[EndpointReplay, ...]
    _data: Any = field(repr=False)
    _frame: pd.DataFrame = field(repr=False)


def simulate(
    scenario: Source,
    plan: SolvedPlan | None = None,
    *,
    trials: int = 10_000,
    seed: int = 0,
    time_limit_s: float = 60.0,
    base_dir: str | Path | None = None,
) -> Simulation:
    """`planner simulate`: Monte-Carlo the plan's jobs (failures, lost work, restarts, billing sessions) against
    the cost model and replay its endpoints; `plan` a `SolvedPlan` of this scenario (default: solved here)."""
    from dataclasses import asdict

    import pandas as pd

    from planner.load.scenario import load_scenario
    from planner.replay.pipeline import plan_record, replay_plan

    loaded = _load(scenario, load_scenario, "scenario", base_dir)
    record = plan_record(
        loaded, time_limit_s=time_limit_s, data=None if plan is None else plan.to_dict()
    )
    replay = replay_plan(record, trials, seed)
    rows = [asdict(job) for job in replay.jobs]
    data = (
        {"workloads": rows, "endpoints": [asdict(e) for e in replay.endpoints]}
        if replay.endpoints
        else rows
    )
    return Simulation(
        jobs=tuple(replay.jobs),
        endpoints=tuple(replay.endpoints),
        _data=data,
        _frame=pd.json_normalize(rows) if rows else pd.DataFrame(),
    )
