"""Monte-Carlo of exactly the process in docs/cost-model.md, to check `costmodel`.

Vectorised across trials: each pass of the loop draws the time to the next
failure for every unfinished trial (failures are memoryless in the time spent
working, §3), so the loop runs max-failures times, not trials × segments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np

from planner.economics import purchase
from planner.economics.candidate import CandidateInputs, billed_hours, wait_phases
from planner.economics.segment_plans import segment_moments, segment_plan

__all__ = [
    "SimResult",
    "simulate",
    "simulate_fallback",
    "replay_problem",
    "MAX_EXPECTED_FAILURES",
    "MAX_SEGMENTS",
]

MAX_EXPECTED_FAILURES = 10_000
"""The Monte-Carlo draws every failure of every trial, about a millisecond per expected failure per 10,000
trials: a job expected to fail more often than this (a months-long job on a flaky market, or without
checkpoints) is refused rather than replayed for minutes to hours."""
MAX_SEGMENTS = 2.0**53
"""Checkpoints per job the replay can count exactly (segment numbers are whole floats and 64-bit integers)."""
MAX_NODE_SESSIONS = 1 << 24
"""Node sessions held at once (trials x nodes start times, 128 MiB): more trials than fit run in chunks, each
with a seed of its own, so a plan of thousands of nodes replays a million trials in bounded memory."""

_FIELDS = ("wall_h", "billed_node_h", "cost_usd", "failures")


@dataclass(frozen=True)
class SimResult:
    """Per-trial outcomes; helpers summarise them."""

    wall_h: np.ndarray
    billed_node_h: np.ndarray
    cost_usd: np.ndarray
    failures: np.ndarray
    met_deadline: np.ndarray  # bool: `actual_h` within the deadline
    waiting_h: np.ndarray  # hours waiting for spot capacity (every stream's)
    # the run's time had the estimate been off by ε, drawn per trial (cost model §12)
    actual_h: np.ndarray
    # of `billed_node_h`, those billed on-demand after a spot_fallback's switch
    on_demand_node_h: np.ndarray

    @property
    def trials(self) -> int:
        return int(self.wall_h.size)

    def mean(self, name: str = "cost_usd") -> float:
        return float(np.mean(getattr(self, name)))

    def stderr(self, name: str = "cost_usd") -> float:
        """Standard error of the mean, for comparing with the analytic value."""
        v = np.asarray(getattr(self, name), dtype=float)
        return float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0

    def quantile(self, name: str, q: float) -> float:
        return float(np.quantile(getattr(self, name), q))

    def p50(self, name: str = "cost_usd") -> float:
        return self.quantile(name, 0.5)

    def p90(self, name: str = "cost_usd") -> float:
        return self.quantile(name, 0.9)

    def p99(self, name: str = "cost_usd") -> float:
        return self.quantile(name, 0.99)

    @property
    def p_deadline(self) -> float:
        return float(np.mean(self.met_deadline))

    def summary(self) -> dict:
        """{field: {mean, p50, p90, p99}} plus the share meeting the deadline."""
        out = {
            f: {
                "mean": self.mean(f),
                "p50": self.p50(f),
                "p90": self.p90(f),
                "p99": self.p99(f),
            }
            for f in _FIELDS
        }
        out["p_deadline"] = self.p_deadline
        return out


def _waits(rng: np.random.Generator, mean: float, cv: float, size: int) -> np.ndarray:
    """`size` capacity waits of the given mean and coefficient of variation (`candidate.wait_phases`)."""
    phases = wait_phases(mean, cv)
    if len(phases) == 1:
        return rng.exponential(mean, size)
    (p1, m1), (_, m2) = phases
    return rng.exponential(np.where(rng.random(size) < p1, m1, m2))


def _fail(
    rng: np.random.Generator,
    trial: np.ndarray,
    at: np.ndarray,
    rho: float,
    wait: float,
    starts: np.ndarray,
    billed: np.ndarray,
    gran: float,
    minimum: float,
    wait_cv: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Failures of `trial` at times `at`: a hardware failure ends one node's session and starts its
    replacement's; a preemption event (probability ρ) ends every node's, all back after the capacity
    wait. Bills the ended sessions; returns which were events and when the nodes are back."""
    event = (
        rng.random(trial.size) < rho if 0 < rho < 1 else np.full(trial.size, rho >= 1)
    )
    slot = rng.integers(0, starts.shape[1], trial.size)
    one, every = trial[~event], trial[event]
    billed[one] += billed_hours(at[~event] - starts[one, slot[~event]], gran, minimum)
    starts[one, slot[~event]] = at[~event]
    # when the nodes start again: at once, or when spot capacity returns
    back = at.copy()
    if every.size:
        billed[every] += billed_hours(
            at[event, None] - starts[every], gran, minimum
        ).sum(axis=1)
        back[event] += _waits(rng, wait, wait_cv, every.size) if wait > 0 else 0.0
        starts[every] = back[event, None]
    return event, back


def simulate(
    inputs: CandidateInputs,
    trials: int = 10000,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    tau: float | None = None,
) -> SimResult:
    """Simulate `trials` runs of one candidate (cost-model §3–§7).

    Failures arrive at rate λ while working or writing checkpoints (not while
    restarting); one loses the progress since the last completed checkpoint.
    A hardware failure ends the session of a uniformly chosen node and starts
    its replacement's session; a preemption event (a share ρ of failures) ends
    every node's session, and all start again after the capacity wait V (mean
    m, `wait_phases`), which is wall time, not billed. Every restart (and the first
    start) takes R. A stateless job's nodes are streams of their own (§4):
    one is simulated and its node-hours and failures counted once per node.
    Fixed `seed` gives identical results (PCG64).
    """
    p = segment_plan(inputs, tau)
    return _in_chunks(
        lambda count, seed, progress: _simulate(inputs, p, count, seed, progress),
        trials,
        p.n,
        seed,
        progress,
    )


def _simulate(
    inputs: CandidateInputs,
    p,
    trials: int,
    seed: int,
    progress: Callable[[float], None] | None,
) -> SimResult:
    lam, k, s, R, n = p.lam, p.k, p.s, p.R, p.n
    rho, wait = p.rho, p.wait
    S = p.S
    gran, minimum = inputs.billing_granularity_h, inputs.billing_minimum_h
    rng = np.random.Generator(np.random.PCG64(seed))

    T = np.full(trials, R)  # wall clock; the first start costs R
    seg = np.zeros(trials, dtype=np.int64)  # segment restarted from
    F = np.zeros(trials, dtype=np.int64)
    billed = np.zeros(trials)
    waiting = np.zeros(trials)
    starts = np.zeros((trials, n))  # start of each node slot's session
    active = np.arange(trials)
    if lam == 0:
        T += S
        active = active[:0]
    while active.size:
        g = rng.exponential(1.0 / lam, active.size)  # work time to next failure
        pos0 = seg[active] * s
        rem = S - pos0
        done = g >= rem
        fin = active[done]
        T[fin] += rem[done]
        fail = ~done
        fi, gf = active[fail], g[fail]
        if fi.size:
            tf = T[fi] + gf
            _, back = _fail(
                rng, fi, tf, rho, wait, starts, billed, gran, minimum, p.wait_cv
            )
            waiting[fi] += back - tf
            T[fi] = back + R
            j = np.floor((pos0[fail] + gf) / s).astype(np.int64)
            seg[fi] = np.clip(j, seg[fi], k - 1)  # never back past a checkpoint
            F[fi] += 1
        active = fi
        if progress is not None:
            progress(1.0 - active.size / trials)
    billed += billed_hours(T[:, None] - starts, gran, minimum).sum(axis=1)
    billed, F = billed * p.streams, F * p.streams
    compute = inputs.price_per_node_h * billed
    terms = inputs.terms
    if terms is not None and terms.by_term:
        paid, overrun = purchase.billed_draws(T, n, terms)
        billed = paid + overrun
        compute = (
            inputs.price_per_node_h * paid + terms.overrun_usd_per_node_h * overrun
        )
    cost = compute + inputs.storage_usd_per_h * T + inputs.egress_usd
    D = inputs.time_budget_h
    actual = T * inputs.estimate_error.draws(trials, seed)
    slack = 1e-9 * max(1.0, abs(D)) if math.isfinite(D) else 0.0
    if terms is not None:
        start = purchase.draw_start(
            np.random.Generator(np.random.PCG64([seed, 13])), terms, trials
        )
        met = (start + actual <= D + slack) & (actual <= terms.run_cap_h * (1 + 1e-9))
    else:
        met = actual <= D + slack if math.isfinite(D) else np.ones(trials, bool)
    if progress is not None and lam == 0:
        progress(1.0)
    return SimResult(
        wall_h=T,
        billed_node_h=billed,
        cost_usd=cost,
        failures=F,
        met_deadline=np.asarray(met, dtype=bool),
        waiting_h=waiting * p.streams,
        actual_h=actual,
        on_demand_node_h=np.zeros(trials),
    )


def simulate_fallback(
    inputs: CandidateInputs,
    on_demand_price: float,
    trials: int = 10000,
    seed: int = 0,
    tau: float | None = None,
) -> SimResult:
    """Simulate spot with an on-demand fallback (cost-model §10) trial by trial: the spot process of
    `simulate`, left the moment the clock reaches L_i (`fallback.switch_at`) with i checkpoints done,
    whether the job is working, restarting or waiting for capacity (spot sessions end there); then
    the work left from checkpoint i runs on on-demand, with hardware failures only, at
    `on_demand_price`. Needs a finite time budget. A stateless job's nodes switch each on its own
    (§4): one stream is simulated and counted once per node."""
    p = segment_plan(inputs, tau)
    return _in_chunks(
        lambda count, seed, _: _simulate_fallback(
            inputs, on_demand_price, p, count, seed
        ),
        trials,
        p.n,
        seed,
    )


def _simulate_fallback(
    inputs: CandidateInputs, on_demand_price: float, p, trials: int, seed: int
) -> SimResult:
    from planner.economics.fallback import switch_at

    lam, k, s, s_k, R, n, rho, wait, S = (
        p.lam,
        p.k,
        p.s,
        p.s_k,
        p.R,
        p.n,
        p.rho,
        p.wait,
        p.S,
    )
    gran, minimum = inputs.billing_granularity_h, inputs.billing_minimum_h
    L0 = switch_at(inputs, p.tau, 0)
    rng = np.random.Generator(np.random.PCG64(seed))
    T = np.full(trials, R)
    seg = np.zeros(trials, dtype=np.int64)
    F = np.zeros(trials, dtype=np.int64)
    billed = np.zeros(trials)
    waiting = np.zeros(trials)
    starts = np.zeros((trials, n))
    # checkpoint at the switch, -1 if it finished on spot
    switched = np.full(trials, -1, dtype=np.int64)
    active = np.arange(trials)

    def leave(trial: np.ndarray, when: np.ndarray, open_sessions: np.ndarray) -> None:
        """Spot is left at `when`: sessions still open are billed to then."""
        if trial[open_sessions].size:
            billed[trial[open_sessions]] += billed_hours(
                when[open_sessions, None] - starts[trial[open_sessions]], gran, minimum
            ).sum(axis=1)
        switched[trial] = seg[trial]
        T[trial] = when

    while active.size:
        g = (
            rng.exponential(1.0 / lam, active.size)
            if lam > 0
            else np.full(active.size, np.inf)
        )
        pos0 = seg[active] * s
        rem = S - pos0
        limit = L0 + pos0  # L at the current checkpoint
        this = np.where(seg[active] < k - 1, s, s_k)
        # the segment cannot end before the switch point
        doomed = T[active] + this > limit + 1e-12
        finish = ~doomed & (g >= rem)
        T[active[finish]] += rem[finish]
        out = doomed & (T[active] + g >= limit)  # no failure before the switch point
        leave(active[out], limit[out], np.ones(out.sum(), dtype=bool))
        fail = ~finish & ~out
        fi, gf = active[fail], g[fail]
        if fi.size:
            tf = T[fi] + gf
            event, back = _fail(
                rng, fi, tf, rho, wait, starts, billed, gran, minimum, p.wait_cv
            )
            j = np.floor((pos0[fail] + gf) / s).astype(np.int64)
            seg[fi] = np.clip(j, seg[fi], k - 1)
            F[fi] += 1
            resume = back + R
            limit_now = L0 + seg[fi] * s
            # a wait the switch comes in ends there
            waiting[fi] += np.clip(limit_now, tf, back) - tf
            # the switch point passes while restarting or waiting
            gone = limit_now < resume
            # sessions are open at the switch unless it comes during a capacity wait (all released at the event)
            open_sessions = ~(event[gone] & (limit_now[gone] < back[gone]))
            leave(fi[gone], limit_now[gone], open_sessions)
            T[fi[~gone]] = resume[~gone]
            active = fi[~gone]
        else:
            active = fi
    on_spot = switched < 0
    billed[on_spot] += billed_hours(
        T[on_spot, None] - starts[on_spot], gran, minimum
    ).sum(axis=1)
    spot_billed, F = billed * p.streams, F * p.streams
    od_billed = np.zeros(trials)
    for j in np.unique(switched[~on_spot]):
        trial = np.flatnonzero(switched == j)
        left = inputs.work_h - j * p.tau
        od = simulate(
            replace(
                inputs,
                work_h=left,
                spot_rate_per_node_h=0.0,
                capacity_wait_h=0.0,
                price_per_node_h=on_demand_price,
                time_budget_h=math.inf,
                storage_usd_per_h=0.0,
                egress_usd=0.0,
            ),
            trials=trial.size,
            seed=seed + 1 + int(j),
            tau=p.tau,
        )
        T[trial] += od.wall_h
        od_billed[trial] = od.billed_node_h
        F[trial] += od.failures
    cost = (
        inputs.price_per_node_h * spot_billed
        + on_demand_price * od_billed
        + inputs.storage_usd_per_h * T
        + inputs.egress_usd
    )
    D = inputs.time_budget_h
    # the switch reads the work left
    actual = np.maximum(T, p.T0 * inputs.estimate_error.draws(trials, seed))
    met = actual <= D + 1e-9 * max(1.0, abs(D))
    return SimResult(
        wall_h=T,
        billed_node_h=spot_billed + od_billed,
        cost_usd=cost,
        failures=F,
        met_deadline=np.asarray(met, dtype=bool),
        waiting_h=waiting * p.streams,
        actual_h=actual,
        on_demand_node_h=od_billed,
    )


def _in_chunks(
    run: Callable,
    trials: int,
    nodes: int,
    seed: int,
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """`run(count, seed, progress)` for all `trials` at once when their node sessions fit MAX_NODE_SESSIONS (the
    same draws as ever), else chunk by chunk, each seeded from (`seed`, its number), joined in order."""
    size = max(1, MAX_NODE_SESSIONS // max(1, nodes))
    if trials <= size:
        return run(trials, seed, progress)
    chunks = []
    for number, first in enumerate(range(0, trials, size)):
        count = min(size, trials - first)
        seen = (
            None
            if progress is None
            else (
                lambda done, first=first, count=count: progress(
                    (first + done * count) / trials
                )
            )
        )
        chunks.append(
            run(
                count,
                int(np.random.SeedSequence((seed, number)).generate_state(1)[0]),
                seen,
            )
        )
    return SimResult(
        *(
            np.concatenate([getattr(c, f.name) for c in chunks])
            for f in fields(SimResult)
        )
    )


def replay_problem(
    inputs: CandidateInputs, market: str
) -> tuple[str | None, str] | None:
    """Why the Monte-Carlo cannot replay this job in reasonable time, as (the input at fault, why), else None:
    more segments than it counts, or more expected failures (cost-model §4, per stream) than
    MAX_EXPECTED_FAILURES (the process as a whole: None); or, on `spot_fallback`, a deadline that leaves spot
    no room before the switch to on-demand, which the policy needs (`fallback.leaves_room`; `time_budget_h`)."""
    from planner.economics.fallback import leaves_room

    interval, work = inputs.checkpoint_interval_h, inputs.work_h
    try:
        p = segment_plan(inputs)
    except OverflowError:  # W/τ beyond any float
        p = None
    if p is None or p.k > MAX_SEGMENTS:
        count = f"{p.k:.3g} segments" if p is not None else "too many segments to count"
        return None, (
            f"checkpoint interval {interval:g} h cuts {work:g} h of work into {count}; expected at most "
            f"{MAX_SEGMENTS:.3g}"
        )
    failures = segment_moments(p)[1]
    if not failures <= MAX_EXPECTED_FAILURES:
        times = f"{failures:.3g} times" if math.isfinite(failures) else "without end"
        return None, (
            f"the job is expected to fail {times} (failure_rate_per_h {inputs.failure_rate_per_h:g} over "
            f"{p.k:,} segment(s) of {p.s:g} h); the replay draws every failure, expected at most "
            f"{MAX_EXPECTED_FAILURES:,}"
        )
    if market == "spot_fallback" and not leaves_room(inputs):
        return "time_budget_h", (
            f"a time budget of {inputs.time_budget_h:g} h leaves no room for spot before the "
            f"switch to on-demand: even without a failure, its first segment ({p.s:g} h) would "
            f"not end before on-demand must take over to finish the {work:g} h of work in time"
        )
    return None
