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


def replay_schedule(runs: list[PlannedRun], wall_h: dict[str, np.ndarray], bought: list[int]) -> ScheduleReplay:
    """Replay `runs` with each run's sampled wall times (`wall_h[name]`, one per trial)."""
    trials = len(next(iter(wall_h.values()))) if wall_h else 0
    end: dict[str, np.ndarray] = {}
    on_pool: dict[int, list[tuple[np.ndarray, int]]] = {}  # pool -> (end per trial, nodes) of runs so far
    for run in sorted(runs, key=lambda r: (r.start_h, r.end_h, r.name)):
        start = np.full(trials, run.start_h)
        for before in run.after:
            if before in end:
                start = np.maximum(start, end[before])
        if run.pool >= 0:
            start = _free_nodes_at(start, on_pool.setdefault(run.pool, []), bought[run.pool] - run.nodes)
            on_pool[run.pool].append((start + wall_h[run.name], run.nodes))
        end[run.name] = start + wall_h[run.name]
    holds = np.ones(trials, dtype=bool)
    for run in runs:
        holds &= end[run.name] <= run.due_h + 1e-9
    return ScheduleReplay(
        trials, end,
        {r.name: float(np.mean(end[r.name] <= r.due_h + 1e-9)) for r in runs},
        {r.name: float(np.mean(np.maximum(0.0, end[r.name] - r.end_h))) for r in runs},
        {r.name: float(np.mean(np.maximum(0.0, end[r.name] - r.due_h))) for r in runs},
        float(np.mean(holds)) if trials else 1.0)


def _free_nodes_at(earliest: np.ndarray, earlier: list[tuple[np.ndarray, int]], room: int) -> np.ndarray:
    """Per trial, the first time at or after `earliest` when the runs already on the pool hold at most
    `room` nodes (they all started by then, first come, first served: only their ends free nodes)."""
    if not earlier:
        return earliest
    ends = np.stack([e for e, _ in earlier], axis=1)  # trials x runs
    nodes = np.array([n for _, n in earlier])
    times = np.concatenate([earliest[:, None], np.maximum(ends, earliest[:, None])], axis=1)  # candidate starts
    held = ((ends[:, None, :] > times[:, :, None]) * nodes).sum(axis=2)  # trials x candidates
    fits = np.where(held <= room, times, np.inf)
    return fits.min(axis=1)
