"""A spot job replayed on measured availability (`planner simulate --traces`): where the cost model
draws preemptions and capacity waits from fitted rates, here they come from a trace, tick by tick.

A gang of n nodes runs on spot while the trace has at least n nodes up; when it drops below, the
job is preempted (the work since its last checkpoint is lost) and waits, unbilled, until n are up
again; every start costs the restart R (a stateless job as well: a conservative stand-in for its nodes
each going its own way, cost model §4). On-demand is always there. Hardware failures are left out:
the trace is the only source of interruptions. Policies, each over the same trace windows:

* `spot`: spot only, as `market: spot` plans.
* `spot_fallback`: cost-model §10's rule: on spot until the clock reaches L_i with i checkpoints
  done, then on-demand to the end.
* `uniform_progress`: Can't Be Late's Uniform Progress (Wu et al., NSDI '24): on spot while it is
  up; while it is down, on-demand when the saved work is behind the straight line to the deadline
  less the margin (else wait); once on on-demand, back to spot only when spot is up and the work is
  on or above the line (so restarts do not thrash); and §10's switch point as the safety net.
* `omniscient`: the cheapest with hindsight, Can't Be Late's lower bound: every spot window before
  the deadline that is longer than a restart and a checkpoint is used until the work is done
  (checkpointing just before each preemption, so nothing is lost), the rest on-demand in one
  stretch.

Every trace is resampled to steps of at least five minutes (a step is up only if it is up
throughout) and read cyclically from many start offsets, as Can't Be Late evaluates its policies.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from planner.economics.candidate import CandidateInputs
from planner.economics.fallback import margin_h
from planner.economics.segment_plans import segment_plan

__all__ = ["TraceJob", "Outcomes", "POLICIES", "windows", "replay", "omniscient"]

POLICIES = ("spot", "spot_fallback", "uniform_progress")
STEP_H = 5 / 60
"""The replay's time step: traces are resampled to it (or their own gap if coarser)."""
MAX_STEPS = 100_000
"""Steps replayed at most (a year at five minutes): a longer horizon (a deadline of decades) is cut there, a
sample not done by then counted unfinished, so memory (samples x steps) and time stay bounded."""


@dataclass(frozen=True)
class TraceJob:
    """What the replay needs of a planned job: its process (work, checkpoints, restarts) and prices."""

    inputs: CandidateInputs  # priced at spot; its time budget is the deadline
    on_demand_price: float

    @property
    def deadline_h(self) -> float:
        return self.inputs.time_budget_h


@dataclass(frozen=True)
class Outcomes:
    """Per sample (trace and start offset)."""

    wall_h: np.ndarray  # NaN: not done within the replayed horizon
    spot_node_h: np.ndarray
    on_demand_node_h: np.ndarray
    cost_usd: np.ndarray

    def hit_rate(self, deadline_h: float) -> float:
        return float(
            np.mean(np.nan_to_num(self.wall_h, nan=math.inf) <= deadline_h + 1e-9)
        )


def windows(
    up_counts: np.ndarray,
    gap_h: float,
    nodes: int,
    starts: int,
    horizon_h: float,
    min_step_h: float = STEP_H,
) -> tuple[np.ndarray, float]:
    """(samples x steps) of whether a gang of `nodes` can run on spot, from `starts` offsets spread over
    the trace (read cyclically), over `horizon_h` (at most MAX_STEPS); and the step in hours (`min_step_h` or
    the trace's gap if coarser; a step is up only if it is up throughout)."""
    per, step = resampling(gap_h, len(up_counts), min_step_h)
    usable = up_counts >= nodes
    usable = (
        usable[: len(usable) // per * per].reshape(-1, per).all(axis=1)
        if per > 1
        else usable
    )
    length = len(usable)
    steps = steps_over(horizon_h, step)
    offsets = np.linspace(0, length, starts, endpoint=False).astype(np.int64)
    index = (offsets[:, None] + np.arange(steps)[None, :]) % length
    return usable[index], step


@dataclass(frozen=True)
class Spans:
    """The up-windows of an availability (samples x steps), what every replay on it reads: per window, row by row
    and in time order within a row, its row, its first step and the step after its last; and where each row's
    windows start among them (`start`, one more at the end). They depend on the availability alone, so the
    replays of many jobs on the same traces find them once (`spans`)."""

    row: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    start: np.ndarray

    def first(self, steps: int) -> Spans:
        """The spans of the first `steps` steps: the replay from the same starts over a shorter horizon (a window
        running past them ends there, one starting later is gone)."""
        keep = self.begin < steps
        row = self.row[keep]
        return Spans(
            row,
            self.begin[keep],
            np.minimum(self.end[keep], steps),
            _starts(row, len(self.start) - 1),
        )

    @functools.cached_property
    def up_before(self) -> np.ndarray:
        """Per window, the up steps of the windows before it in its row."""
        return self.before(self.end - self.begin)

    def before(self, counts: np.ndarray) -> np.ndarray:
        """Per window, the sum of `counts` (one per window) over the windows before it in its row."""
        total = np.cumsum(counts)
        earlier = total - counts
        return earlier - earlier[self.start[self.row]]


def _starts(row: np.ndarray, samples: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(row, minlength=samples))])


def spans(up: np.ndarray) -> Spans:
    samples, steps = up.shape
    padded = np.zeros((samples, steps + 2), dtype=np.int8)
    padded[:, 1:-1] = up
    # row-major, a row's edges alternate: a window's first step, then the step after its last
    edges = np.flatnonzero(np.diff(padded, axis=1))
    row, begin = np.divmod(edges[0::2], steps + 1)
    return Spans(row, begin, edges[1::2] % (steps + 1), _starts(row, samples))


def resampling(
    gap_h: float, ticks: int, min_step_h: float = STEP_H
) -> tuple[int, float]:
    """(ticks per step, the step in hours) `windows` resamples a trace of `ticks` ticks of `gap_h` to: `min_step_h`
    or the trace's gap if coarser, whole ticks, and no longer than the trace."""
    step = max(gap_h, min_step_h)
    per = max(1, min(round(step / gap_h), ticks))
    return per, gap_h * per


def steps_over(horizon_h: float, step_h: float) -> int:
    """Steps `windows` replays over `horizon_h` (at most MAX_STEPS)."""
    return min(int(math.ceil(horizon_h / step_h)), MAX_STEPS)


def replay(
    job: TraceJob,
    up: np.ndarray,
    step_h: float,
    policy: str,
    windows: Spans | None = None,
) -> Outcomes:
    """Replay `job` under `policy` on each row of `up` (samples x steps), whose `spans` are `windows` when
    known: spot alone window by window (`_replay_windows`, what the planner runs for every spot candidate),
    spot_fallback from that and the first step its switch rule fires (`_replay_fallback`), Uniform Progress
    step by step."""
    if policy == "spot":
        return _replay_windows(job, up, step_h, windows)
    if policy == "spot_fallback":
        return _replay_fallback(job, up, step_h, windows)
    return _replay_steps(job, up, step_h, policy)


@dataclass(frozen=True)
class _SpotPath:
    """Spot alone's replay, with what the fallback's switch rule reads: per window (`Spans`), the work saved when
    it starts and when it ends."""

    outcomes: Outcomes
    saved_at_start: np.ndarray
    saved_at_end: np.ndarray


def _replay_windows(
    job: TraceJob, up: np.ndarray, step_h: float, windows: Spans | None = None
) -> Outcomes:
    """Spot alone, exactly as `_replay_steps` runs it, from its up-windows (`_spot_path`)."""
    return _spot_path(job, windows or spans(up), step_h).outcomes


def _spot_path(job: TraceJob, windows: Spans, step_h: float) -> _SpotPath:
    """Each window spends R restarting, then works at the checkpointed pace; the job ends inside one, or keeps
    what its last checkpoint saved. What was saved is always whole checkpoints, so each window that does not
    finish the job adds its own whole checkpoints whatever came before: the saved work is a running sum, and the
    job ends in the first window long enough for the rest."""
    p = segment_plan(job.inputs)
    W, tau, R, n = job.inputs.work_h, p.tau, p.R, job.inputs.nodes
    pace = tau / (tau + p.C)
    samples = len(windows.start) - 1
    up_steps = windows.end - windows.begin
    lengths = up_steps * step_h
    checkpoints = np.floor(np.maximum(lengths - R, 0.0) * pace / tau + 1e-9)
    saved_at_start = windows.before(checkpoints) * tau
    saved_at_end = saved_at_start + checkpoints * tau
    # from each window's start to the end of the work
    need = R + (W - saved_at_start) / pace
    finishing = (need <= lengths + 1e-12 * (1 + lengths)) & (lengths > R)
    row, k = _first_of_row(windows.row[finishing], np.flatnonzero(finishing))
    wall = np.full(samples, np.nan)
    wall[row] = windows.begin[k] * step_h + need[k]
    # every window's hours, unless it finished in one: those before it and what it took there
    spot_h = np.bincount(windows.row, weights=lengths, minlength=samples)
    spot_h[row] = windows.up_before[k] * step_h + need[k]
    # the window it finishes in saves nothing more
    saved_at_end[k] = saved_at_start[k]
    cost = n * job.inputs.price_per_node_h * spot_h
    return _SpotPath(
        Outcomes(wall, n * spot_h, np.zeros(samples), cost),
        saved_at_start,
        saved_at_end,
    )


def _replay_fallback(
    job: TraceJob, up: np.ndarray, step_h: float, windows: Spans | None = None
) -> Outcomes:
    """spot_fallback as `_replay_steps` runs it, without stepping: until it switches it is spot alone
    (`_spot_path`), and it switches at the first step, no later than the one spot alone finishes in, whose start
    reaches §10's L_i = D - margin - R - (S - i s) with i checkpoints saved; from there it runs on demand: a
    restart, then the work since its last checkpoint. Between windows i is fixed, so the first step there is
    found directly (`_first_at_least`); inside a window i grows by one every s of work, so the clock can pass
    L_i only within about R + 2s of the window's start: only such windows are read step by step."""
    p = segment_plan(job.inputs)
    W, tau, R, n = job.inputs.work_h, p.tau, p.R, job.inputs.nodes
    D, S = job.deadline_h, p.S
    margin = margin_h(R, tau)
    pace = tau / (tau + p.C)
    windows = windows or spans(up)
    path = _spot_path(job, windows, step_h)
    spot = path.outcomes
    if not math.isfinite(D):  # no deadline: the switch point is never reached
        return spot
    samples, steps = up.shape
    # spot alone's last step: the one it finishes in, else the last replayed; no switch comes after it
    last = np.where(
        np.isnan(spot.wall_h),
        steps - 1,
        np.ceil(np.nan_to_num(spot.wall_h) / step_h - 1e-9) - 1,
    ).astype(np.int64)

    def switch_point(saved):
        return D - margin - R - (S - np.floor(saved / tau + 1e-9) * p.s)

    row, begin, end = windows.row, windows.begin, windows.end
    every = np.arange(samples)
    # (row, step, saved work, window begun last (-1: none)) where each stretch first reaches its switch point,
    # row by row in time order
    found = []
    # before the first window nothing is saved; between windows nothing is saved or lost
    has = windows.start[1:] > windows.start[:-1]
    first_begin = np.full(samples, steps)
    first_begin[has] = begin[windows.start[:-1][has]]
    t = _first_at_least(
        np.zeros(samples, dtype=np.int64), switch_point(np.zeros(samples)), step_h
    )
    early = t <= np.minimum(first_begin - 1, last)
    found.append(
        (every[early], t[early], np.zeros(early.sum()), np.full(early.sum(), -1))
    )
    if len(begin):
        same_row = np.r_[row[1:] == row[:-1], False]
        next_begin = np.where(same_row, np.r_[begin[1:], 0], steps)
        to = np.minimum(next_begin - 1, last[row])
        t = _first_at_least(end, switch_point(path.saved_at_end), step_h)
        k = np.flatnonzero(t <= to)
        found.append((row[k], t[k], path.saved_at_end[k], k))
        floor_point = switch_point(path.saved_at_start)
        to = np.minimum(end - 1, last[row])
        could = (
            (begin <= to)
            & (to * step_h >= floor_point - 1e-9 * (1 + abs(D)))
            & (begin * step_h + R + 3 * p.s + 2 * step_h >= floor_point)
        )
        k = np.flatnonzero(could)
        span = to[k] - begin[k] + 1
        at = np.repeat(begin[k] - np.cumsum(span) + span, span) + np.arange(span.sum())
        k = np.repeat(k, span)
        into = np.maximum((at - begin[k]) * step_h - R, 0.0) * pace
        inside = np.minimum(
            np.floor((path.saved_at_start[k] + into) / tau + 1e-9) * tau, W
        )
        fires = at * step_h >= switch_point(inside)
        found.append(_first_of_row(row[k][fires], at[fires], inside[fires], k[fires]))
    r, t, saved_then, k = (np.concatenate(f) for f in zip(*found))
    order = np.lexsort((t, r))
    r, first = np.unique(r[order], return_index=True)
    t, saved_then, k = t[order][first], saved_then[order][first], k[order][first]
    switched = np.zeros(samples, dtype=bool)
    switched[r] = True
    at = np.zeros(samples, dtype=np.int64)
    at[r] = t
    saved_at = np.zeros(samples)
    saved_at[r] = saved_then
    # spot steps before the switch: the whole windows before its stretch's, and that one's up to the switch
    before = np.zeros(samples, dtype=np.int64)
    within = k >= 0
    r, k, t = r[within], k[within], t[within]
    before[r] = windows.up_before[k] + np.minimum(t, end[k]) - begin[k]
    on_demand = R + (W - saved_at) / pace
    # done within the replayed steps: its last step is one of them
    in_time = at + np.ceil(on_demand / step_h - 1e-9) - 1 < steps
    wall = np.where(
        switched, np.where(in_time, at * step_h + on_demand, np.nan), spot.wall_h
    )
    spot_h = np.where(switched, before * step_h, spot.spot_node_h / n)
    od_h = np.where(switched, np.where(in_time, on_demand, (steps - at) * step_h), 0.0)
    cost = n * (
        job.inputs.price_per_node_h * spot_h
        + np.where(od_h > 0, job.on_demand_price * od_h, 0.0)
    )
    return Outcomes(wall, n * spot_h, n * od_h, cost)


def _first_of_row(r: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each row's first entry of entries listed row by row, in time order within a row."""
    first = np.flatnonzero(np.r_[True, r[1:] != r[:-1]]) if len(r) else r
    return (r[first],) + tuple(c[first] for c in columns)


def _first_at_least(start: np.ndarray, point: np.ndarray, step_h: float) -> np.ndarray:
    """The first step t >= `start` whose start t * step_h reaches `point`, compared as the replay compares (past
    every step replayed when `point` lies beyond them)."""
    t = np.maximum(
        start, np.clip(np.ceil(point / step_h) - 1, 0, MAX_STEPS + 1)
    ).astype(np.int64)
    for _ in range(2):
        t += t * step_h < point
    return t


def _replay_steps(
    job: TraceJob, up: np.ndarray, step_h: float, policy: str
) -> Outcomes:
    """Replay `job` under `policy` step by step (module doc)."""
    p = segment_plan(job.inputs)
    W, tau, C, R, n = (
        job.inputs.work_h,
        p.tau,
        p.C,
        p.R,
        job.inputs.nodes,
    )  # a stateless job too, as a gang
    D = job.deadline_h
    margin = margin_h(R, tau)
    pace = tau / (tau + C)  # saved-work hours per working hour, checkpoints included
    samples, steps = up.shape
    progress = np.zeros(samples)  # work done, saved or not
    saved = np.zeros(samples)
    restart = np.zeros(samples)
    mode = np.zeros(samples, dtype=np.int8)  # 0 waiting, 1 spot, 2 on demand
    switched = np.zeros(samples, dtype=bool)
    wall = np.full(samples, np.nan)
    spot_h, od_h = np.zeros(samples), np.zeros(samples)
    S = p.S
    for t in range(steps):
        active = np.isnan(wall)
        if not active.any():
            break
        now = t * step_h
        if policy != "spot":  # §10's switch point, L_i, with i checkpoints done
            done = np.floor(saved / tau + 1e-9)
            switched |= active & (now >= D - margin - R - (S - done * p.s))
        want = np.where(up[:, t], 1, 0).astype(np.int8)
        if policy == "uniform_progress":
            line = W * now / max(D - margin, 1e-9)
            behind = saved < line - 1e-9
            on_demand = mode == 2
            want = np.where(
                up[:, t],
                np.where(on_demand & behind, 2, 1),
                np.where(behind | on_demand, 2, 0),
            )
            want = want.astype(np.int8)
        want = np.where(switched, 2, want).astype(np.int8)
        change = active & (want != mode)
        # leaving a market loses the work since the checkpoint
        progress = np.where(change, saved, progress)
        restart = np.where(change & (want != 0), R, restart)
        mode = np.where(active, want, mode).astype(np.int8)
        running = active & (mode != 0)
        spent_restart = np.where(running, np.minimum(restart, step_h), 0.0)
        restart = restart - spent_restart
        gain = np.where(running, (step_h - spent_restart) * pace, 0.0)
        finishing = running & (progress + gain >= W - 1e-12)
        # hours of the step billed
        used = np.where(finishing, spent_restart + (W - progress) / pace, step_h)
        wall = np.where(finishing, now + used, wall)
        progress = np.where(running, np.minimum(progress + gain, W), progress)
        saved = np.where(running, np.floor(progress / tau + 1e-9) * tau, saved)
        spot_h += np.where(running & (mode == 1), used, 0.0)
        od_h += np.where(running & (mode == 2), used, 0.0)
    cost = n * (
        job.inputs.price_per_node_h * spot_h
        + np.where(od_h > 0, job.on_demand_price * od_h, 0.0)
    )
    return Outcomes(wall, n * spot_h, n * od_h, cost)


def omniscient(job: TraceJob, up: np.ndarray, step_h: float) -> np.ndarray:
    """Per sample, the hindsight cost (compute only) of finishing by the deadline: see the module doc."""
    p = segment_plan(job.inputs)
    W, C, R, n = job.inputs.work_h, p.C, p.R, job.inputs.nodes
    D = job.deadline_h
    steps = min(up.shape[1], int(math.floor(D / step_h)))
    out = np.empty(up.shape[0])
    for i, row in enumerate(up[:, :steps]):
        edges = np.flatnonzero(np.diff(np.r_[0, row.astype(np.int8), 0]))
        lengths = (edges[1::2] - edges[::2]) * step_h
        useful = np.maximum(lengths - R - C, 0.0)
        left, spot = W, 0.0
        for length, work in zip(lengths, useful):
            if work <= 0 or left <= 0:
                continue
            take = min(work, left)
            spot += take + R + C
            left -= take
        od = R + left + C if left > 1e-12 else 0.0
        if (
            spot + od > D and left > 1e-12
        ):  # no room for the on-demand stretch beside the windows: all on demand
            spot, od = 0.0, R + W + C
        out[i] = n * (job.inputs.price_per_node_h * spot + job.on_demand_price * od)
    return out
