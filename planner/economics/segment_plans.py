"""A candidate's job as segments (§4): τ and C resolved from its interruption tolerance (`segment_plan`), and
the closed-form moments of one stream's busy and wall time, E[T], E[F] and sd, that the rest of the cost model
starts from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.economics.candidate import MAX_EXP, CandidateInputs


def split_work(work_h: float, tau: float) -> tuple[int, float]:
    """k = ceil(W/τ) robust to float noise (W=1, τ=0.1 is 10), and τ_k."""
    if not math.isfinite(tau) or tau >= work_h:
        return 1, float(work_h)
    q = work_h / tau
    r = round(q)
    k = int(r) if abs(q - r) <= 1e-9 * max(1.0, r) else math.ceil(q)
    k = max(k, 1)
    last = work_h - (k - 1) * tau
    if last <= 0 or abs(last - tau) <= 1e-9 * tau or last > tau:
        last = min(max(last, 0.0), tau) or tau
    return k, float(last)


def segments(work_h: float, tau: float) -> np.ndarray:
    """Productive hours τ_i of each segment (§4): τ for all, the rest last."""
    k, last = split_work(work_h, tau)
    out = np.full(k, float(min(tau, work_h)))
    out[-1] = last
    return out


@dataclass(frozen=True)
class SegmentPlan:
    k: int
    tau: float
    s: float  # full segment incl. checkpoint write
    s_k: float  # last segment incl. checkpoint write
    C: float
    R: float
    lam: float
    n: int
    rho: float = 0.0  # share of failures that are preemption events
    wait: float = 0.0  # mean capacity wait after each (unbilled wall time)
    wait_cv: float = 1.0  # the wait's coefficient of variation (`wait_phases`)
    streams: int = 1  # identical streams of n nodes priced together: a stateless job's nodes, one each (§4)

    @property
    def S(self) -> float:
        """Σ s_i: the same float expression the simulator uses."""
        return (self.k - 1) * self.s + self.s_k

    @property
    def T0(self) -> float:
        return self.R + self.S

    @property
    def width(self) -> float:
        """A full segment's length (the last one's when it is the only one): the support of X, a failure's loss."""
        return self.s if self.k > 1 else self.s_k


def segment_plan(inputs: CandidateInputs, tau: float | None = None) -> SegmentPlan:
    """Resolve τ and C from the interruption tolerance (§4). A stateless job on n nodes is n streams of one
    node, each with the node's own failure rate: a node's loss costs its item in flight, not the others'."""
    tol = inputs.interruption_tolerance
    C = inputs.checkpoint_write_h
    tau = inputs.checkpoint_interval_h if tau is None else tau
    if tol == "none":
        # Cannot resume: one segment, and no checkpoint is ever written.
        tau, C = math.inf, 0.0
    elif tol == "stateless":
        C = 0.0  # an item is its own checkpoint
    k, last = split_work(inputs.work_h, tau)
    tau_used = inputs.work_h if k == 1 else tau
    s_full = tau_used + C if k > 1 else last + C
    streams = inputs.nodes if tol == "stateless" else 1
    return SegmentPlan(
        k=k,
        tau=float(tau_used),
        s=float(s_full),
        s_k=float(last + C),
        C=float(C),
        R=float(inputs.restart_h),
        lam=float(inputs.failure_rate_per_h / streams),
        n=int(inputs.nodes // streams),
        rho=float(inputs.spot_share),
        wait=float(inputs.capacity_wait_h),
        wait_cv=float(inputs.capacity_wait_cv) if inputs.capacity_wait_h else 1.0,
        streams=streams,
    )


def seg_time(lam: float, s: float, R: float) -> float:
    """E[T_i] = (e^(λs) − 1)(1/λ + R) (§4), stable as λ → 0."""
    x = lam * s
    if x == 0:
        return s
    e = math.expm1(x)
    return s * (e / x) + e * R


def trexp_mean(lam: float, s: float) -> float:
    """E[X], X ~ Exp(λ) truncated to [0, s)."""
    x = lam * s
    if x < 1e-5:
        return s * (0.5 - x / 12.0)
    return 1.0 / lam - s / math.expm1(x)


def _trexp_second_moment(lam: float, s: float) -> float:
    """E[X²], X ~ Exp(λ) truncated to [0, s)."""
    x = lam * s
    if x < 1e-6:
        return s * s / 3
    return (
        2 / lam**2 - math.exp(-x) * (s * s + 2 * s / lam + 2 / lam**2)
    ) / -math.expm1(-x)


def segment_moments(p: SegmentPlan) -> tuple[float, float, float]:
    """E[T], E[F] and sd of the failure overhead Z = T − T0."""
    lam, k = p.lam, p.k
    if lam == 0:
        return p.T0, 0.0, 0.0
    if lam * max(p.s, p.s_k) > MAX_EXP:
        return math.inf, math.inf, math.inf
    ET = p.R + (k - 1) * seg_time(lam, p.s, p.R) + seg_time(lam, p.s_k, p.R)
    var = 0.0
    EF = 0.0
    for cnt, s in ((k - 1, p.s), (1, p.s_k)):
        if cnt == 0:
            continue
        c = math.expm1(lam * s)  # E[F_i]; Var(F_i) = c(1 + c)
        ex = trexp_mean(lam, s)
        ey = p.R + ex
        vy = ex * max(s - ex, 0.0)  # bound for a variable on [0, s)
        var += cnt * (c * vy + c * (1 + c) * ey * ey)
        EF += cnt * c
    return ET, EF, math.sqrt(var)


def wall_moments(
    p: SegmentPlan, ET: float, EF: float, sd: float
) -> tuple[float, float]:
    """E[T] and an upper estimate of its sd with the capacity waits: each failure is a preemption
    event with probability ρ, followed by a wait W of mean m and E[W²] = m²(1 + cv²), unbilled (§3)."""
    if not p.wait or not p.rho or not math.isfinite(ET):
        return ET, sd
    var_f = EF * (1 + EF)  # Var(F) ≤ E[F](1 + E[F]) for the sum of geometric counts
    extra = EF * p.rho * (1 + p.wait_cv**2) * p.wait**2 + var_f * (p.rho * p.wait) ** 2
    return ET + EF * p.rho * p.wait, math.sqrt(sd * sd + extra) + p.wait
