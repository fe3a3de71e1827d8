"""Spot with an on-demand fallback (docs/cost-model.md §10): start on spot and move to on-demand the
moment the slack left falls below what on-demand needs to finish from the last checkpoint (a restart
and the work left) plus a margin, then finish there.

Priced by a fast numeric method on the cost model's own grid, not by simulation. The switch rule
makes the spot phase end exactly when the failure overhead Z (time lost to failures, restarts and
capacity waits) passes a fixed level B: checkpoint i is reached at R + i·s + Z_i, and the job stays
on spot through segment i only if Z_(i+1) <= D − margin − 2R − S − s_i. Z grows with i, so

    P(stay on spot to the end) = P(Z_(k−1) <= B, Z_k <= B_k),
    E[checkpoint at the switch; switch] = Σ_(i<k) P(Z_i <= B) − (k − 1)·P(stay),

and Σ_i P(Z_i <= B) is one inverse FFT of Σ ψ^i = ψ(1 − ψ^(k−1))/(1 − ψ), ψ a segment's
overhead transform (the same compound-geometric law as `wall_time.WallLaw`). The switch time given
the checkpoint is fixed, so the time on spot follows. The failures before the switch follow from
Wald's identity at the switch (failures = λ x work done), and the node-hours billed from the time on
spot less the waits done by then; both need what the failure the switch cuts still had to run, read
from the overshoot O past the switch point of the run continued to the end of its segment (the same
sums, convolved once more). The on-demand phase is `costmodel.expected` of the segments left, at the
two checkpoints around the mean one at the switch, its first session's bill over the law of that
checkpoint where billing is coarse (`_switch_law`). `planner.economics.simulate.simulate_fallback`
replays the policy trial by trial (the tests hold the two within 2 % on cost and 2 points on
P(deadline)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy import fft as _fft

from planner.economics import costmodel, grids, rounding_waste, segment_plans, wall_time
from planner.economics.candidate import (
    MAX_EXP,
    CandidateInputs,
    CostResult,
    billed_hours,
    wait_phases,
)
from planner.economics.estimate_error import EXACT
from planner.economics.segment_plans import segment_plan
from planner.schema.plan import PRICED_KEYS

__all__ = [
    "FallbackResult",
    "margin_h",
    "switch_at",
    "leaves_room",
    "unit",
    "excess_over_spot",
    "on_demand_at_most",
    "switches",
    "completion_quantile",
    "expected",
]

PRICED = PRICED_KEYS
"""The breakdown parts paid at a node-hour price (storage and egress are not)."""


def margin_h(restart_h: float, tau: float) -> float:
    """Slack kept beyond what on-demand needs: one restart and one checkpoint interval, what one
    hardware failure on on-demand can cost at most."""
    return restart_h + tau


def switch_at(inputs: CandidateInputs, tau: float, checkpoint: int) -> float:
    """L_i: the latest moment to still be on spot with `checkpoint` segments done; at L_i on-demand
    needs R plus the segments left, which ends at D − margin."""
    p = segment_plan(inputs, tau)
    return inputs.time_budget_h - margin_h(p.R, p.tau) - p.R - (p.S - checkpoint * p.s)


@dataclass(frozen=True)
class FallbackResult:
    """The policy at unit prices: node-hours paid at the spot price and at the on-demand price
    (weighted by the chance of switching), per breakdown part."""

    spot: dict  # PRICED part -> spot node-hours
    on_demand: dict  # PRICED part -> on-demand node-hours, times P(switch)
    wall_h: float
    failures: float
    p_deadline: float
    p_switch: float
    segments: int
    checkpoint_interval_h: float
    spot_failures: float = 0.0  # of `failures`, those on spot (the rest: hardware failures after the switch)
    waiting_h: float = 0.0  # hours waiting for spot capacity: the events' waits, less what the switch cut short
    p_deadline_on_estimate: float = math.nan  # P(T <= D), the estimate taken as exact

    @property
    def billed_node_h(self) -> float:
        return math.fsum(self.spot.values()) + math.fsum(self.on_demand.values())

    @property
    def rounding_waste_node_h(self) -> float:
        return self.spot["rounding_waste"] + self.on_demand["rounding_waste"]

    def parts(self, spot_price: float, on_demand_price: float) -> dict:
        """The priced breakdown parts in USD."""
        return {
            k: self.spot[k] * spot_price + self.on_demand[k] * on_demand_price
            for k in PRICED
        }


def _rarely_switches(p, B: float, min_switch: float, law: wall_time.WallLaw) -> bool:
    """P(spot alone's overhead passes B) < min_switch, by spot alone's law or Chernoff's bound on it (either
    settles it): the law first when its grid is computed (microseconds), else the bound, which settles nine
    times in ten in candidate generation without an FFT."""

    def by_law() -> bool:
        return 1 - law.p_le(p.R + p.S + B) < min_switch

    def by_bound() -> bool:
        return wall_time.overhead_tail_bound(p, B) < min_switch

    return by_law() or by_bound() if law.ready else by_bound() or by_law()


def as_spot(
    inputs: CandidateInputs,
    spot: CostResult,
    p_deadline: float,
    p_deadline_on_estimate: float = math.nan,
) -> FallbackResult:
    """The policy where it practically never switches (fewer than `unit`'s `min_switch` of runs): spot alone's
    outcome `spot` for `inputs`, every node-hour at the spot price, P(ε·T <= D) spot alone's (and P(T <= D)),
    every event's wait done."""
    return FallbackResult(
        spot={k: spot.breakdown[k] for k in PRICED},
        on_demand={k: 0.0 for k in PRICED},
        wall_h=spot.wall_h,
        failures=spot.failures,
        p_deadline=p_deadline,
        p_switch=0.0,
        segments=spot.segments,
        checkpoint_interval_h=spot.checkpoint_interval_h,
        spot_failures=spot.failures,
        waiting_h=spot.failures * inputs.spot_share * inputs.capacity_wait_h,
        p_deadline_on_estimate=p_deadline_on_estimate,
    )


def _levels(p, D: float) -> tuple[float, float] | None:
    """The switch levels of the plan `p` under the deadline D: (B, B_k), the failure overhead any segment but
    the last, and the last, may end with and stay on spot (Z_(i+1) <= D − margin − 2R − S − s_i); None when
    they leave spot no room, not even one failure-free segment before the switch point (B < 0 or B_k <= 0)."""
    margin = margin_h(p.R, p.tau)
    # the overhead the last segment may end with
    B_k = D - margin - 2 * p.R - p.S - p.s_k
    B = D - margin - 2 * p.R - p.S - p.s if p.k > 1 else B_k
    if B < 0 or B_k <= 0:
        return None
    return B, B_k


def leaves_room(inputs: CandidateInputs, tau: float | None = None) -> bool:
    """Whether the deadline leaves spot at least one failure-free segment before the switch point: exactly
    when `unit` does not return None for lack of room (without a deadline there is all the room, and `unit`
    returns None for that instead)."""
    return _levels(segment_plan(inputs, tau), inputs.time_budget_h) is not None


def switches(
    inputs: CandidateInputs, law: wall_time.WallLaw, min_switch: float = 0.0
) -> bool:
    """Whether `unit` prices the policy (else it returns None): a deadline that leaves spot room, spot not hopeless
    (e^600 failures a segment, where on-demand alone does better), and a switch in `min_switch` of runs or more.
    Microseconds where the bound settles it (`_rarely_switches`), where pricing takes FFTs."""
    p, D = law.plan, inputs.time_budget_h
    levels = _levels(p, D) if math.isfinite(D) else None
    return (
        levels is not None
        and p.lam * max(p.s, p.s_k) <= MAX_EXP
        and not (min_switch > 0 and _rarely_switches(p, levels[0], min_switch, law))
    )


def unit(
    inputs: CandidateInputs,
    tau: float | None = None,
    min_switch: float = 0.0,
    law: wall_time.WallLaw | None = None,
) -> FallbackResult | None:
    """The policy's expected outcome at unit prices; None when the deadline leaves no room for spot
    (not even one failure-free segment before the switch point), when there is no deadline, when spot is
    hopeless (the cost model's inf: more than e^600 failures a segment), or when it would switch in fewer
    than `min_switch` of runs (then it is spot alone): spot alone ending by
    R + S + B, which its law (`law`, if the caller keeps it) tells, never switches, so that bounds the
    switching cheaply first."""
    # a deadline is not part of the plan
    law = law or wall_time.WallLaw(segment_plan(inputs, tau))
    if not switches(inputs, law, min_switch):
        return None
    p, D = law.plan, inputs.time_budget_h
    B, B_k = _levels(p, D)
    k, s, s_k, R, S, lam, n = p.k, p.s, p.s_k, p.R, p.S, p.lam, p.n
    margin = margin_h(R, p.tau)
    # work lost per failure, on average
    lost = segment_plans.trexp_mean(lam, s) if lam > 0 else 0.0
    # what a failure adds: lost work, a restart, maybe a capacity wait
    lump = lost + R + p.rho * p.wait
    reached = None  # P(Z_i <= B) for i < k, where the on-demand phase's bill needs J's law (`_switch_law`)
    needs_law = _coarse(inputs) and p.streams == 1 and k <= MAX_SWITCH_LAW
    if lam == 0:
        stay, z_stay, below, cut = 1.0, 0.0, float(k - 1), np.zeros(2)
    else:
        # a heavy-tailed wait's
        longest = max(mean for _, mean in wait_phases(p.wait, p.wait_cv))
        # room for the overshoot past the switch level
        span = B_k + 12 * (lump + p.rho * (longest - p.wait)) + 4 * s
        N = int(
            min(
                65536,
                max(8192, grids.fast_len(int(4 * span / grids.lump_scale(p)) + 2)),
            )
        )
        h = span / (N - 2)
        tilt, untilt, z1, _ = grids.damped_grid(N)
        waits = grids.wait_factor(p, h, N)
        x = np.arange(N) * h

        def overhead(
            length: float,
        ) -> np.ndarray:  # one segment's overhead law, transformed
            fail = -math.expm1(-lam * length)
            return (1 - fail) / (
                1
                - fail * _fft.rfft(grids.hat_trexp(lam, length, R, h, N) * tilt) * waits
            )

        def law(transform: np.ndarray) -> np.ndarray:
            return _fft.irfft(transform, N) * untilt

        def overshoot(
            masses: np.ndarray,
            level: float,
            length: float,
            before: np.ndarray,
            tail: float,
        ) -> np.ndarray:
            """E[(O − length)^+] and P(O > length) of `masses`, O = Z − level: the law of Z = Z' + Y, Z' the
            measure `before` and Y one segment's overhead, of mean `tail`. Read from the masses up to level + length
            only, by Σ_(z>a) m·(z − a) = E[Z] − a·mass − Σ_(z<=a) m·(z − a) with the mass and E[Z] exact (before's
            own, plus its mass times E[Y]): past there the grid holds round-off its untilt amplifies up to e^18,
            which, summed, moved a fallback's cost by 4e-3 with the processor; the identity also counts what lies
            past the grid."""
            mass = np.sum(before)
            mean = np.sum(before * x) + mass * tail
            near = x <= level + length
            m, z = masses[near], x[near]
            # numpy's own sums, not BLAS's dot: that splits long vectors across threads, so its last bits
            # followed the machine's cores (and on a busy machine its threads took 2 s of 2.4)
            past = mean - (level + length) * mass - np.sum(m * (z - level - length))
            # cancellation can leave −1e-16
            return np.maximum(np.array([past, mass - np.sum(m)]), 0.0)

        def mean_overhead(
            length: float,
        ) -> float:  # E[Y] of one segment's overhead: failures times a lump
            return math.expm1(lam * length) * (
                segment_plans.trexp_mean(lam, length) + R + p.rho * p.wait
            )

        last = overhead(s_k)
        if k == 1:
            start = np.zeros(N)
            start[0] = 1.0  # Z_0 = 0
            below, cut = 0.0, np.zeros(2)
        else:
            full = overhead(s)
            gap = 1 - full
            small = np.abs(gap) < 1e-12
            power = np.power(full, k - 1)
            # Σ_(0<i<k) ψ^i
            series = np.where(
                small, (k - 1) * full, full * (1 - power) / np.where(small, 1.0, gap)
            )
            visits = law(series)  # Σ_(0<i<k) P(Z_i ∈ dz)
            below = float(grids.half_cdf(visits, h, 0.0, B))
            start = law(power)  # Z_(k−1)
            earlier = visits - start  # Σ_(0<i<k−1)
            earlier[0] += (
                1.0  # and Z_0 = 0: the segments that may end in a switch before the last
            )
            earlier[x > B] = 0.0
            cut = overshoot(
                law(_fft.rfft(earlier * tilt) * full), B, s, earlier, mean_overhead(s)
            )
            if needs_law:
                reached, power_i = np.ones(k), np.ones_like(full)
                for i in range(1, k):
                    power_i = power_i * full
                    reached[i] = grids.half_cdf(law(power_i), h, 0.0, B)
        start[x > B] = 0.0  # still on spot when the last segment begins
        ends = law(_fft.rfft(start * tilt) * last)
        stay = min(1.0, max(0.0, float(grids.half_cdf(ends, h, 0.0, B_k))))
        z_stay = max(0.0, float(grids.half_cdf(ends, h, 0.0, B_k, x)))
        cut = cut + overshoot(ends, B_k, s_k, start, mean_overhead(s_k))
    switch = 1.0 - stay
    # E[checkpoint at the switch; switch]
    at_switch = min(max(below - (k - 1) * stay, 0.0), (k - 1) * switch)
    # time on spot: the run's end when it stays, the switch point L_J when it moves
    on_spot = (R + S) * stay + z_stay + switch * (D - margin - R - S) + s * at_switch
    # The run continued to the end of the segment it leaves runs O past the switch point: its last min(O, s) work,
    # the rest, (O − s)^+, the failure the switch cut still running (when it cut one: P(O > s)) and the failures of
    # finishing the segment, a lump each: e^(λs) − 1 when the switch cut a failure (the segment is redone), about
    # half that when it came during work. What the cut failure still had to run is what is left; it is not one mean
    # lump: a switch mostly cuts a long wait, which had long to run.
    over_tail, beyond = cut
    cut_left = max(over_tail - (beyond + switch) / 2 * math.expm1(lam * s) * lump, 0.0)
    # failures before the switch: λ times the work done by then (Wald's identity, the switch being a stopping time);
    # spot time is R, that work and a restart and a wait per failure, less what the cut one still had to run
    failures = lam * (on_spot - R + cut_left) / (1 + lam * (R + p.rho * p.wait))
    # billed: spot time less the waits done by the switch (Wald again: ρ·m per failure), of which the cut failure's
    # was not all done; its restart, which follows the wait, not at all (a session open at the switch is billed)
    # E[waits done by the switch]
    waiting = failures * p.rho * p.wait - max(cut_left - beyond * R, 0.0)
    busy = on_spot - waiting
    # spot alone: its sessions and rounding
    alone = costmodel.expected(replace(inputs, time_budget_h=math.inf), tau)
    beta, streams = (
        1 + p.rho * (n - 1),
        p.streams,
    )  # each stream of a stateless job switches on its own
    if (
        math.isfinite(alone.rounding_waste_node_h)
        and _coarse(inputs)
        and streams == 1
        and lam > 0
    ):
        waste = _spot_waste(inputs, p, failures, stay, switch, cut[1], lost, lump)
    elif math.isfinite(alone.rounding_waste_node_h):
        waste = (
            alone.rounding_waste_node_h
            * (n + beta * failures)
            / (n + beta * alone.failures / streams)
        )
    else:
        waste = streams * (n + beta * failures) * inputs.billing_granularity_h / 2
    nodes, failures = n * streams, failures * streams
    spot = {
        "compute": nodes * (p.tau * at_switch + inputs.work_h * stay),
        "checkpointing": nodes * p.C * (k * stay + at_switch),
        "startup": nodes * R,
        "rounding_waste": waste,
    }
    spot["preemption_rework"] = max(
        0.0, nodes * busy - spot["compute"] - spot["checkpointing"] - spot["startup"]
    )
    on_demand = dict.fromkeys(PRICED, 0.0)
    wall, p_deadline, total_failures = on_spot, stay, failures
    switch_law = None
    if switch > 1e-12 and needs_law:
        switch_law = _switch_law(np.ones(1) if reached is None else reached, stay)
    if switch > 1e-12 and inputs.work_h * switch - p.tau * at_switch > 1e-12:
        # on-demand runs the segments left after checkpoint J: its time, failures, work and checkpoints grow by a
        # segment's worth per segment, so the two checkpoints around E[J | switch] weighted to it give their mean
        # exactly (the mean work left would round its checkpoint count)
        j_mean = at_switch / switch
        j_low = min(int(j_mean), k - 1)
        weights = {j_low: 1.0 - (j_mean - j_low)}
        if j_low + 1 < k and j_mean > j_low:
            weights[j_low + 1] = j_mean - j_low
        for j, weight in weights.items():
            od = _on_demand(inputs, p, j)
            for key in PRICED:
                on_demand[key] += switch * weight * od.breakdown[key]
            wall += switch * weight * od.wall_h
            p_deadline += switch * weight * od.p_deadline
            total_failures += switch * weight * od.failures
        if (
            switch_law is not None
        ):  # the bill is not linear in J where a minimum or a coarse step binds
            waste = _first_session_waste(inputs, p)
            on_demand["rounding_waste"] += n * (
                float(np.sum(switch_law * waste))
                - switch * sum(w * waste[j] for j, w in weights.items())
            )
    return FallbackResult(
        spot,
        on_demand,
        wall,
        total_failures,
        min(1.0, p_deadline) * met_if_slower(inputs, p),
        switch,
        k,
        p.tau,
        failures,
        max(waiting, 0.0) * streams,
        min(1.0, p_deadline),
    )


def on_demand_at_most(inputs: CandidateInputs, law: wall_time.WallLaw) -> float:
    """An upper bound on `unit`'s on-demand node-hours (its `on_demand` parts summed) in microseconds, where `unit`
    takes FFTs: it switches only where spot alone's overhead over every segment passes B (a run whose overhead
    stays below B never reaches a switch point), read from spot alone's law `law` where it is computed, else
    Chernoff's bound on it; and a switched run's on-demand phase is at most the whole job run there, a restart and
    every segment with its hardware failures (§4), billed up to a step or a minimum more per session. Lets a replay
    that already shows more on-demand hours than the policy could be fitted turn it down unpriced."""
    p = law.plan
    D = inputs.time_budget_h
    levels = _levels(p, D) if math.isfinite(D) else None
    if levels is None or p.streams != 1:
        return math.inf
    B = levels[0]  # B <= B_k: staying under B over all k segments never switches
    tail = 1 - law.p_le(p.T0 + B) if law.ready else wall_time.overhead_tail_bound(p, B)
    hw = inputs.gpus * inputs.hw_failure_per_gpu_h
    failures = (p.k - 1) * math.expm1(hw * p.s) + math.expm1(hw * p.s_k)
    hours = (
        p.R
        + (p.k - 1) * segment_plans.seg_time(hw, p.s, p.R)
        + segment_plans.seg_time(hw, p.s_k, p.R)
        + (1 + failures) * max(inputs.billing_granularity_h, inputs.billing_minimum_h)
    )
    # the grids' own error in P(switch) (1e-6 at most against the replay's 2 points)
    return p.n * hours * min(1.0, 1.02 * tail + 1e-6)


def met_if_slower(inputs: CandidateInputs, p) -> float:
    """P(ε·T0 <= D), ε the throughput estimate's error (§12): a run slower than estimated still ends in time
    exactly when on-demand alone could (the switch reads the work left as measured, so it comes earlier)."""
    return float(inputs.estimate_error.cdf(inputs.time_budget_h / p.T0))


def excess_over_spot(
    law: wall_time.WallLaw,
    deadline_h: float,
    alone: CostResult,
    spot_price: float,
    on_demand_price: float,
    storage_usd_per_h: float,
) -> float:
    """What the policy costs at least beyond spot alone on the same offer, in USD (0 when nothing is proven;
    docs/cost-model.md §10). `law` is spot alone's wall-time law and `alone` its cost-model result at unit price.

    Run both on the same spot run: they pay alike up to the switch. After it spot alone has at most a restart
    and the segments left to run on spot, each costing at most its E[T_i] (one begun has no more left than a fresh
    one), while the policy pays on-demand for a restart and at least each of those segments' failure-free time.
    Where on-demand costs more for the restart and for every segment, every switch costs more, by at least the
    restart and the last segment, which every switch leaves; and it switches whenever spot alone's overhead ends
    past B_k. Against that it can save at most spot alone's rounding waste and its storage past the failure-free
    time."""
    p = law.plan
    levels = _levels(p, deadline_h) if math.isfinite(deadline_h) else None
    if levels is None:
        return 0.0
    full, last = (
        segment_plans.seg_time(p.lam, p.s, p.R),
        segment_plans.seg_time(p.lam, p.s_k, p.R),
    )
    if (
        on_demand_price < spot_price
        or on_demand_price * p.s_k < spot_price * last
        or p.k > 1
        and on_demand_price * p.s < spot_price * full
    ):
        return 0.0
    switch = 1.0 - law.p_le(p.R + p.S + levels[1])
    extra = (
        switch
        * p.n
        * p.streams
        * (
            (on_demand_price - spot_price) * p.R
            + on_demand_price * p.s_k
            - spot_price * last
        )
    )
    saved = spot_price * alone.rounding_waste_node_h + storage_usd_per_h * max(
        alone.wall_h - p.T0, 0.0
    )
    return max(extra - saved, 0.0)


MAX_SWITCH_LAW = 1024
"""Segments up to which a fallback on coarse billing reads the law of the checkpoint J it switches at (one
inverse FFT per segment); beyond, the on-demand phase is priced at the two checkpoints around E[J] alone."""


def _coarse(inputs: CandidateInputs) -> bool:
    """Billing coarse enough (a minimum or a step above `costmodel.FINE_BILLING_H`) that a session's bill is
    not its length plus half a step."""
    return (
        max(inputs.billing_granularity_h, inputs.billing_minimum_h)
        > costmodel.FINE_BILLING_H
    )


def _switch_law(reached: np.ndarray, stay: float) -> np.ndarray:
    """P(J = i; switch) for i < k from `reached`[i] = P(Z_i <= B): the run leaves spot in segment i when it
    reached checkpoint i within the level and not checkpoint i + 1 (Z grows with i), or in the last segment
    when it does not stay."""
    after = np.append(reached[1:], stay)
    return np.maximum(reached - after, 0.0)


def _spot_waste(
    inputs: CandidateInputs,
    p,
    failures: float,
    stay: float,
    switch: float,
    cut_lump: float,
    lost: float,
    lump: float,
) -> float:
    """The spot phase's rounding waste where billing is coarse, session by session: each failure before the
    switch ends sessions as spot alone's failures do (their mean waste from `rounding_waste.session_waste`); the
    last sessions end with the job as spot alone's last ones, or at the switch. A switch that cuts a failure's
    lump (`cut_lump`: P(O > s)) falls in it as a point of time falls in a length-biased lump, uniformly: in its
    capacity wait (ρ·m of the mean `lump`; the sessions already ended with the event), in its restart (R of it;
    sessions as old as the restart so far, billed the minimum) or before the failure, while working (`lost`
    of it; sessions as old as spot alone's last ones)."""
    parts = rounding_waste.session_waste(
        p, inputs.billing_granularity_h, inputs.billing_minimum_h
    )
    per_failure = parts.rest / parts.rest_sessions if parts.rest_sessions > 0 else 0.0
    per_last = parts.last / parts.last_sessions if parts.last_sessions > 0 else 0.0
    # a session cut in its restart, as old as the restart so far
    ages = (np.arange(64) + 0.5) / 64 * p.R
    in_restart = (
        float(
            np.mean(
                billed_hours(
                    ages, inputs.billing_granularity_h, inputs.billing_minimum_h
                )
                - ages
            )
        )
        if p.R > 0
        else per_last
    )
    working = switch - cut_lump + cut_lump * lost / lump
    beta = 1 + p.rho * (p.n - 1)
    return beta * failures * per_failure + p.n * (
        (stay + working) * per_last + cut_lump * p.R / lump * in_restart
    )


def _first_session_waste(inputs: CandidateInputs, p) -> np.ndarray:
    """Per checkpoint j, billed(L_j) − L_j of an on-demand phase from it that no failure cuts: L_j its restart,
    the work left and the checkpoints on it. Hardware failures on on-demand are rare, so this is the phase's
    waste to first order, and what differs between checkpoints."""
    j = np.arange(p.k)
    work = np.maximum(inputs.work_h - j * p.tau, 0.0)
    length = p.R + work + np.ceil(work / p.tau - 1e-9) * p.C
    return (
        billed_hours(length, inputs.billing_granularity_h, inputs.billing_minimum_h)
        - length
    )


def _on_demand(inputs: CandidateInputs, p, checkpoint: int) -> CostResult:
    """The on-demand phase after a switch at `checkpoint`, at unit price: the segments left, hardware failures only,
    and the deadline it must meet (the margin past its failure-free time). Kept by `costmodel.expected`: the
    deadlines a timing key meets switch at the same few checkpoints."""
    work = inputs.work_h - checkpoint * p.tau
    k_left = segment_plans.split_work(work, p.tau)[0]
    return costmodel.expected(
        replace(
            inputs,
            work_h=work,
            spot_rate_per_node_h=0.0,
            capacity_wait_h=0.0,
            price_per_node_h=1.0,
            storage_usd_per_h=0.0,
            egress_usd=0.0,
            estimate_error=EXACT,
            time_budget_h=margin_h(p.R, p.tau) + p.R + work + k_left * p.C,
        ),
        p.tau,
    )


def completion_quantile(
    inputs: CandidateInputs, q: float, spot_quantile: float, tau: float | None = None
) -> float:
    """What `planner batch` books for the policy at confidence q: spot alone's q-quantile while it lies below
    the switch level (a run that ends by then never switched, so the two laws agree there), else the
    deadline, by which a switched run ends with the margin to spare."""
    p = segment_plan(inputs, tau)
    level = inputs.time_budget_h - margin_h(p.R, p.tau) - p.R - p.width
    return spot_quantile if spot_quantile <= level else inputs.time_budget_h


def expected(
    inputs: CandidateInputs, on_demand_price: float, tau: float | None = None
) -> CostResult | None:
    """The policy's expected outcome in USD: `inputs` priced at spot, the fallback at `on_demand_price`."""
    result = unit(inputs, tau)
    if result is None:
        return None
    breakdown = result.parts(inputs.price_per_node_h, on_demand_price)
    breakdown["storage"] = inputs.storage_usd_per_h * result.wall_h
    breakdown["egress"] = inputs.egress_usd
    return CostResult(
        wall_h=result.wall_h,
        failures=result.failures,
        billed_node_h=result.billed_node_h,
        rounding_waste_node_h=result.rounding_waste_node_h,
        p_deadline=result.p_deadline,
        cost_usd=math.fsum(breakdown.values()),
        breakdown=breakdown,
        segments=result.segments,
        checkpoint_interval_h=result.checkpoint_interval_h,
    )
