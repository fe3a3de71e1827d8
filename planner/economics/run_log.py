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
from planner.economics.fallback import switch_at
from planner.economics.purchase import billed_draws
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
    billed_node_h: float  # at the run's own price (spot for spot_fallback)
    fallback_h: float | None = (
        None  # spot_fallback: when it moved to on demand (None: it finished on spot)
    )
    on_demand_node_h: float = 0.0  # billed after that move, at the on-demand price

    @property
    def waiting_h(self) -> float:
        return math.fsum(i.back_h - i.at_h for i in self.interruptions)


def draw_runs(
    inputs: CandidateInputs,
    runs: int,
    seed: int,
    spread: float = 0.0,
    fallback: bool = False,
) -> list[RunLog]:
    """`runs` runs of one job, one after the other from a stream of their own (PCG64: the same seed, the same
    logs). `spread`: each run's throughput varies about the job's, ln-normal with this standard deviation (its
    W divided by the draw). `fallback`: spot with the on-demand fallback of cost model §10 (`simulate_fallback`'s
    rule: leave spot at L_i, the latest moment with i checkpoints done, then run the work left on demand with
    hardware failures only). A stateless job's nodes are streams of their own (§4), which one log cannot show:
    refused."""
    if inputs.interruption_tolerance == "stateless":
        raise ValueError(
            "a stateless job's nodes fail and restart on their own: no single run log"
        )
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence((seed, 31))))
    speeds = np.exp(spread * rng.standard_normal(runs)) if spread else np.ones(runs)
    logs = []
    for speed in speeds.tolist():
        run = replace(inputs, work_h=inputs.work_h / speed)
        p = segment_plan(run)
        first = switch_at(run, p.tau, 0) if fallback else math.inf
        clock, stops, sessions, switched = _phase(p, rng, 0.0, first)
        billed = _billed(run, sessions)
        if switched is None and run.terms is not None and run.terms.by_term:
            # paid by the term (§13): what runs past a block's usable hours goes on demand
            paid, over = billed_draws(np.array([clock]), run.nodes, run.terms)
            logs.append(
                RunLog(clock, tuple(stops), float(paid[0]), None, float(over[0]))
            )
            continue
        if switched is None:
            logs.append(RunLog(clock, tuple(stops), billed))
            continue
        segment, at = switched
        rest = replace(
            run,
            work_h=run.work_h - segment * p.tau,
            spot_rate_per_node_h=0.0,
            capacity_wait_h=0.0,
        )
        end, more, later, _ = _phase(segment_plan(rest, p.tau), rng, at, math.inf)
        logs.append(RunLog(end, tuple(stops + more), billed, at, _billed(rest, later)))
    return logs


def _phase(p, rng, start: float, first_switch: float):
    """One stretch of the process from `start` (R first): (its end, its stops, its nodes' sessions, and where it
    left for on demand: (checkpoints done, when), or None). The switch point moves with the checkpoints done:
    L_i = `first_switch` + i·s."""
    S = p.s * (p.k - 1) + p.s_k  # segment time: the work and every checkpoint
    clock, segment, stops, sessions = start + p.R, 0, [], []
    session_start = start
    while True:
        gap = rng.exponential(1.0 / p.lam) if p.lam > 0 else math.inf
        position = segment * p.s
        limit = start + first_switch + position
        this = p.s if segment < p.k - 1 else p.s_k
        doomed = clock + this > limit + 1e-12
        if not doomed and gap >= S - position:
            sessions.append((session_start, clock + S - position))
            return clock + S - position, stops, sessions, None
        if doomed and clock + gap >= limit:  # no failure before the switch point
            sessions.append((session_start, limit))
            return limit, stops, sessions, (segment, limit)
        at = clock + gap
        preempted = bool(rng.random() < p.rho)
        wait = (
            float(_waits(rng, p.wait, p.wait_cv, 1)[0])
            if preempted and p.wait > 0
            else 0.0
        )
        reached = math.floor((position + gap) / p.s)
        segment = max(segment, min(reached, p.k - 1))
        limit = start + first_switch + segment * p.s
        if (
            limit < at + wait + p.R
        ):  # the switch point passes while waiting or restarting
            back = min(at + wait, max(at, limit))
            stops.append(Interruption(at, back, preempted))
            if not preempted or limit >= at + wait:
                sessions.append((session_start, limit))
            else:
                sessions.append((session_start, at))
            return limit, stops, sessions, (segment, limit)
        stops.append(Interruption(at, at + wait, preempted))
        if preempted:
            sessions.append((session_start, at))
            session_start = at + wait
        clock = at + wait + p.R


def _billed(inputs: CandidateInputs, sessions: list[tuple[float, float]]) -> float:
    """Node-hours billed: each session of the nodes rounded by the billing rule (§5)."""
    lengths = np.array([end - start for start, end in sessions])
    return float(
        billed_hours(
            lengths, inputs.billing_granularity_h, inputs.billing_minimum_h
        ).sum()
        * inputs.nodes
    )


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
