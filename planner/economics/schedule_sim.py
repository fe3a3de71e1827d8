"""Monte-Carlo of a quarter's schedule: does it hold when runs take as long as they happen to?

Each trial draws every run's wall time (the caller samples them from the cost model's process,
`economics/simulate.py`) and replays the calendar with two rules, in the planned start order:

- a run starts no earlier than planned, and not before every run it comes `after` has ended;
- a run on a reservation pool takes its nodes in the planned order (first come, first served):
  it waits until the runs before it on the pool leave enough of the bought nodes free.

Nothing spills to on-demand and other limits (quotas, node limits) are not replayed: a delay
moves only what waits for the late run. A run holds when it ends by its due date; the quarter
holds when every scheduled run does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PlannedRun:
    name: str
    start_h: float  # planned start, hours from the horizon start
    end_h: float  # planned end (its slot on the calendar)
    due_h: float
    after: tuple[str, ...] = ()
    pool: int = -1  # reservation pool, or -1
    nodes: int = 1
    required: bool = True


@dataclass(frozen=True)
class ScheduleReplay:
    trials: int
    end_h: dict[str, np.ndarray]  # per run, its end in each trial
    on_time: dict[str, float]  # P(end <= due)
    delay_h: dict[str, float]  # E[max(0, end - planned end)]
    late_h: dict[str, float]  # E[max(0, end - due)]
    holds: float  # P(every run ends by its due date)


def replay_schedule(
    runs: list[PlannedRun], wall_h: dict[str, np.ndarray], bought: list[int]
) -> ScheduleReplay:
    """Replay `runs` with each run's sampled wall times (`wall_h[name]`, one per trial)."""
    trials = len(next(iter(wall_h.values()))) if wall_h else 0
    end: dict[str, np.ndarray] = {}
    on_pool: dict[
        int, list[tuple[np.ndarray, int]]
    ] = {}  # pool -> (end per trial, nodes) of runs so far
    for run in sorted(runs, key=lambda r: (r.start_h, r.end_h, r.name)):
        start = np.full(trials, run.start_h)
        for before in run.after:
            if before in end:
                start = np.maximum(start, end[before])
        if run.pool >= 0:
            start = _free_nodes_at(
                start, on_pool.setdefault(run.pool, []), bought[run.pool] - run.nodes
            )
            on_pool[run.pool].append((start + wall_h[run.name], run.nodes))
        end[run.name] = start + wall_h[run.name]
    holds = np.ones(trials, dtype=bool)
    for run in runs:
        holds &= end[run.name] <= run.due_h + 1e-9
    return ScheduleReplay(
        trials,
        end,
        {r.name: float(np.mean(end[r.name] <= r.due_h + 1e-9)) for r in runs},
        {r.name: float(np.mean(np.maximum(0.0, end[r.name] - r.end_h))) for r in runs},
        {r.name: float(np.mean(np.maximum(0.0, end[r.name] - r.due_h))) for r in runs},
        float(np.mean(holds)) if trials else 1.0,
    )


def _free_nodes_at(
    earliest: np.ndarray, earlier: list[tuple[np.ndarray, int]], room: int
) -> np.ndarray:
    """Per trial, the first time at or after `earliest` when the runs already on the pool hold at most
    `room` nodes (they all started by then, first come, first served: only their ends free nodes)."""
    if not earlier:
        return earliest
    ends = np.stack([e for e, _ in earlier], axis=1)  # trials x runs
    nodes = np.array([n for _, n in earlier])
    # candidate starts
    times = np.concatenate(
        [earliest[:, None], np.maximum(ends, earliest[:, None])], axis=1
    )
    # trials x candidates
    held = ((ends[:, None, :] > times[:, :, None]) * nodes).sum(axis=2)
    fits = np.where(held <= room, times, np.inf)
    return fits.min(axis=1)


@dataclass(frozen=True)
class RunOutlook:
    """One scheduled run replayed: P(it ends by its due date), its expected delay past its planned end and past
    its due date, and the 90th percentile of its end (None past the year 9999, where dates end)."""

    run: str
    p_on_time: float
    delay_h: float
    late_h: float
    planned_end: str
    due: str
    p90_end: str | None


@dataclass(frozen=True)
class ScheduleOutlook:
    """A schedule replayed (`replay_record`): per run, and P(the whole quarter holds)."""

    trials: int
    seed: int
    holds: float
    runs: tuple[RunOutlook, ...]


def replay_record(quarter, schedule, trials: int, seed: int) -> ScheduleOutlook:
    """Monte-Carlo of a schedule (`schema.plan.ScheduleRecord`) of `quarter`: every run's wall time drawn from its
    cost-model process, then the calendar replayed (`replay_schedule`). `planner simulate` replays a schedule
    with it and `planner batch --schedule-confidence` measures its schedule with it."""
    import datetime as dt

    from planner.economics.inputs import inputs_from_run
    from planner.economics.simulate import simulate, simulate_fallback
    from planner.schema.plan import ScheduledRunRecord

    horizon = quarter.horizon
    hours = lambda moment: (moment - horizon.start).total_seconds() / 3600  # noqa: E731
    runs, walls = [], {}
    by_name = {r.name: r for r in quarter.runs}
    scheduled = [r for r in schedule.runs if isinstance(r, ScheduledRunRecord)]
    for number, r in enumerate(scheduled):
        run, inputs = by_name[r.run], inputs_from_run(r)
        if (
            r.market == "spot_fallback"
        ):  # wall time only: the on-demand price does not move it
            walls[run.name] = simulate_fallback(
                inputs, 1.0, trials, seed + number
            ).actual_h
        else:
            walls[run.name] = simulate(inputs, trials, seed + number).actual_h
        due = run.due or horizon.end
        runs.append(
            PlannedRun(
                run.name,
                hours(r.start),
                hours(r.end),
                hours(due),
                tuple(run.after),
                r.pool,
                r.nodes,
                run.required,
            )
        )
    result = replay_schedule(runs, walls, [e.nodes for e in schedule.reservations])

    def moment(h: float) -> str | None:
        try:
            return (horizon.start + dt.timedelta(hours=h)).isoformat()
        except OverflowError:  # a run that waits millennia
            return None

    return ScheduleOutlook(
        trials,
        seed,
        result.holds,
        tuple(
            RunOutlook(
                p.name,
                result.on_time[p.name],
                result.delay_h[p.name],
                result.late_h[p.name],
                r.end.isoformat(),
                (by_name[p.name].due or horizon.end).isoformat(),
                moment(float(np.quantile(result.end_h[p.name], 0.9))),
            )
            for p, r in zip(runs, scheduled)
        ),
    )
