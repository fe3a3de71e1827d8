"""Runs drawn event by event from the cost model's process (docs/cost-model.md §3-§5), each with its own log:
when it stopped, whether for a preemption (and when its nodes were back) or a hardware failure, and when it
ended. `planner simulate --runs-out` writes them as the run records `planner calibrate` reads; `economics/simulate`
draws the same process vectorised, which the tests hold these logs to.

A run starts with R, then works through segments of τ work and a checkpoint write C; a failure at any time while
working or writing loses the progress since the last completed checkpoint; a preemption event (a share ρ of
failures) is followed by the capacity wait, every failure by R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from planner.economics.candidate import CandidateInputs, billed_hours
from planner.economics.segment_plans import segment_plan
from planner.economics.simulate import _waits

__all__ = ["Interruption", "RunLog", "draw_runs", "useful_hours"]


@dataclass(frozen=True)
class Interruption:
    """One stop of a run, in hours from its start: `back` when its nodes run again (after the capacity wait of
    a preemption; `at` itself after a hardware failure), before the restart."""

    at_h: float
    back_h: float
    preemption: bool


@dataclass(frozen=True)
class RunLog:
    wall_h: float
    interruptions: tuple[Interruption, ...]
    billed_node_h: float

    @property
    def waiting_h(self) -> float:
        return math.fsum(i.back_h - i.at_h for i in self.interruptions)


def draw_runs(
    inputs: CandidateInputs, runs: int, seed: int, spread: float = 0.0
) -> list[RunLog]:
    """`runs` runs of one job, one after the other from a stream of their own (PCG64: the same seed, the same
    logs). `spread`: each run's throughput varies about the job's, ln-normal with this standard deviation (its
    W divided by the draw). A stateless job's nodes are streams of their own (§4), which one log cannot show:
    refused."""
    if inputs.interruption_tolerance == "stateless":
        raise ValueError(
            "a stateless job's nodes fail and restart on their own: no single run log"
        )
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence((seed, 31))))
    speeds = np.exp(spread * rng.standard_normal(runs)) if spread else np.ones(runs)
    logs = []
    for speed in speeds.tolist():
        p = segment_plan(replace(inputs, work_h=inputs.work_h / speed))
        S = p.s * (p.k - 1) + p.s_k  # segment time: the work and every checkpoint
        clock, position, stops = p.R, 0.0, []
        sessions = []  # (start, end) of the nodes' sessions: billed per session
        session_start = 0.0
        while True:
            gap = rng.exponential(1.0 / p.lam) if p.lam > 0 else math.inf
            if gap >= S - position:
                clock += S - position
                break
            at = clock + gap
            preempted = bool(rng.random() < p.rho)
            wait = (
                float(_waits(rng, p.wait, p.wait_cv, 1)[0])
                if preempted and p.wait > 0
                else 0.0
            )
            stops.append(Interruption(at, at + wait, preempted))
            if preempted:
                sessions.append((session_start, at))
                session_start = at + wait
            reached = math.floor((position + gap) / p.s)
            position = max(position, min(reached, p.k - 1) * p.s)
            clock = at + wait + p.R
        sessions.append((session_start, clock))
        lengths = np.array([end - start for start, end in sessions])
        billed = float(
            billed_hours(
                lengths, inputs.billing_granularity_h, inputs.billing_minimum_h
            ).sum()
            * inputs.nodes
        )
        logs.append(RunLog(clock, tuple(stops), billed))
    return logs


def useful_hours(
    wall_h: float,
    stops: list[tuple[float, float]],
    *,
    interval_h: float,
    checkpoint_h: float,
    restart_h: float,
) -> float:
    """W, the hours of useful work a run did, from its log: its wall time, its stops (hours from its start to the
    stop and to when its nodes were back), the checkpoint interval it ran with, and its checkpoint and restart
    times. The inverse of the process `draw_runs` draws: each restart resumes from the last checkpoint completed
    before the stop, and the work after the last restart writes a checkpoint every `interval_h` of it, the
    last one included."""
    s = interval_h + checkpoint_h
    clock, position = restart_h, 0.0
    for at, back in sorted(stops):
        if math.isfinite(s):
            position = max(position, math.floor((position + at - clock) / s) * s)
        clock = back + restart_h
    segment_time = position + max(0.0, wall_h - clock)
    if not math.isfinite(interval_h):
        return max(0.0, segment_time - checkpoint_h)
    checkpoints = max(1, math.ceil(segment_time / s - 1e-9))
    return max(0.0, segment_time - checkpoints * checkpoint_h)
