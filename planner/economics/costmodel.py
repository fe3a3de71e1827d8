"""Expected cost of one candidate: the analytic side of docs/cost-model.md.

Pure functions over plain numbers (no pydantic, solver or CLI imports), so the
planner can call them for thousands of candidates and `planner.simulate` can
check every number by Monte-Carlo of exactly the same process.

Where this module departs from the formulas printed in docs/cost-model.md it is to
make them exact (the contract's tolerances are against simulation):

* rounding waste (§5) is computed from the distribution of every billing
  session's length, not from the ``γ/2`` rule of thumb (see `_waste`);
* P(T <= D) (§6) is the exact distribution of T on a fine grid (FFT of the
  per-segment compound-geometric laws), not a normal approximation;
* 'none' writes no checkpoints, so its C is 0 as for 'stateless' (§4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numpy import fft as _fft  # pocketfft, as scipy.fft's (the same transforms to the bit), without SciPy's import

from planner.economics.estimate_error import EXACT, EstimateError
from planner.schema.plan import BREAKDOWN_KEYS

__all__ = [
    "CandidateInputs",
    "CostResult",
    "BREAKDOWN_KEYS",
    "TOLERANCES",
    "billed_hours",
    "spot_event_rate",
    "events_per_loss",
    "event_sizes",
    "wait_phases",
    "segments",
    "segment_plan",
    "expected",
    "p_deadline",
    "best_interval",
]

TOLERANCES = ("none", "checkpointed", "stateless")
# Above this many expected failures the job is hopeless and the grid methods
# would only burn time; costs are reported as inf.
_MAX_EXP = 600.0


@dataclass(frozen=True)
class CandidateInputs:
    """Everything the cost model needs about one candidate, in hours and USD."""

    work_h: float  # W: failure-free, checkpoint-free wall time (§2)
    checkpoint_write_h: float = 0.0  # C
    restart_h: float = 0.0  # R, at the first start and after each failure
    nodes: int = 1  # n
    gpus_per_node: int = 1  # g
    spot_rate_per_node_h: float = 0.0  # preemption events per node-hour as the job sees them (§3); 0 on demand
    hw_failure_per_gpu_h: float = 2e-5  # φ (Llama 3: 419 in 54 d on 16,384 GPUs)
    price_per_node_h: float = 0.0
    billing_granularity_h: float = 1.0 / 3600.0  # γ
    billing_minimum_h: float = 0.0
    interruption_tolerance: str = "checkpointed"
    checkpoint_interval_h: float = math.inf  # τ
    time_budget_h: float = math.inf  # D
    storage_usd_per_h: float = 0.0  # per wall-clock hour, already converted
    egress_usd: float = 0.0  # one-off
    capacity_wait_h: float = 0.0  # m: mean hours until spot capacity returns after a preemption event
    capacity_wait_cv: float = 1.0  # its coefficient of variation (1: exponential; the traces' are 2-6)
    estimate_error: EstimateError = EXACT  # of the throughput estimate W came from: in P(T <= D) only (§12)

    def __post_init__(self) -> None:
        if not self.work_h > 0:
            raise ValueError(f"work_h must be > 0, got {self.work_h!r}")
        if self.interruption_tolerance not in TOLERANCES:
            raise ValueError(
                f"interruption_tolerance must be one of {TOLERANCES}, "
                f"got {self.interruption_tolerance!r}"
            )
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("nodes and gpus_per_node must be >= 1")
        if not self.billing_granularity_h > 0:
            raise ValueError("billing_granularity_h must be > 0")
        for name in ("checkpoint_write_h", "restart_h", "spot_rate_per_node_h",
                     "hw_failure_per_gpu_h", "billing_minimum_h", "capacity_wait_h"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not self.capacity_wait_cv >= 1:
            raise ValueError("capacity_wait_cv must be >= 1")
        if (self.interruption_tolerance != "none"
                and not self.checkpoint_interval_h > 0):
            raise ValueError("checkpoint_interval_h must be > 0")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def failure_rate_per_h(self) -> float:
        """Failures per hour across the job, n·λ_spot + N·φ (§3). λ_spot is the preemption events per node-hour
        as the job sees them: `spot_event_rate(...) / n` for a gang, which restarts at every event that takes
        any of its nodes; each node's own rate for a stateless job, whose nodes are lost alone (§4)."""
        return self.nodes * self.spot_rate_per_node_h + self.gpus * self.hw_failure_per_gpu_h

    @property
    def spot_share(self) -> float:
        """ρ: the share of failures that are preemption events (each followed by a capacity wait)."""
        lam = self.failure_rate_per_h
        return self.nodes * self.spot_rate_per_node_h / lam if lam > 0 else 0.0


@dataclass(frozen=True)
class CostResult:
    """Expected outcome of one candidate; `breakdown` sums to `cost_usd` (§7)."""

    wall_h: float  # E[T]
    failures: float  # E[F] across the job (every stream of a stateless one)
    billed_node_h: float
    rounding_waste_node_h: float
    p_deadline: float  # P(ε·T <= D) (§6, §12)
    cost_usd: float
    breakdown: dict = field(default_factory=dict)
    segments: int = 1  # k
    checkpoint_interval_h: float = math.inf  # τ used
    p_deadline_on_estimate: float = math.nan  # P(T <= D), the estimate taken as exact (NaN: not asked)


# ---------------------------------------------------------------- helpers


def spot_event_rate(lam_node, nodes, correlation):
    """Preemption events that touch a job on n spot nodes, per hour: λ·η(n) (`events_per_loss`)."""
    out = np.asarray(lam_node, dtype=float) * events_per_loss(nodes, correlation)
    return float(out) if out.ndim == 0 else out


def events_per_loss(nodes, correlation):
    """η(n) = Σ_{i<n} (1 − c)/(1 − c + i·c): the events that touch a job on n spot nodes per one node's losses
    (§3). Each node is lost at λ; an event takes each node of the zone with a probability U that varies from
    event to event (a Beta(0, b) mixing law, b = (1 − c)/c), so a share c of the events that take one given
    node also take any other given node. η(1) = 1; c = 0 gives n (independent), c = 1 gives 1 (every event
    takes every node). Vectorised over whole node counts and c: the sum itself, exactly rounded, per distinct
    (c, n), and n − c·n(n − 1)/2 to first order where c is tiny."""
    n, c = np.broadcast_arrays(np.asarray(nodes, dtype=float), np.asarray(correlation, dtype=float))
    factor = np.where(c >= 1, 1.0, n - c * n * (n - 1) / 2)
    exact = (c >= 1e-6) & (c < 1)
    if exact.any():
        pairs, inverse = np.unique(c[exact] + 1j * n[exact], return_inverse=True)
        factor[exact] = np.array([_events_per_loss(pair.real, round(pair.imag)) for pair in pairs])[inverse]
    return float(factor) if factor.ndim == 0 else factor


def _events_per_loss(c: float, n: int) -> float:
    return math.fsum((1 - c) / (1 - c + i * c) for i in range(n))


def event_sizes(nodes: int, correlation: float) -> np.ndarray:
    """P(an event takes k of a job's n nodes | it takes at least one), k = 1..n, under `events_per_loss`'s law:
    ∝ C(n, k)·Γ(k)·Γ(b + n − k) (beta-binomial with a → 0). Its mean is n/η(n): node losses per event."""
    k = np.arange(1, nodes + 1)
    if correlation >= 1:
        return (k == nodes).astype(float)
    if correlation <= 0:
        return (k == 1).astype(float)
    b = (1 - correlation) / correlation
    log_w = np.array([math.lgamma(nodes + 1) - math.lgamma(i + 1) - math.lgamma(nodes - i + 1) + math.lgamma(i)
                      + math.lgamma(b + nodes - i) for i in k.tolist()])
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


@lru_cache(maxsize=1024)
def fast_len(n: int) -> int:
    """The least 2^a·3^b·5^c >= n: a length pocketfft transforms fast (`scipy.fft.next_fast_len(n, real=True)`)."""
    best = 1 << max(0, n - 1).bit_length()
    odd = 1
    while odd < best:  # odd = 3^b·5^c; then the least power of two that lifts it to n
        part = odd
        while part < best:
            best = min(best, part << max(0, -(-n // part) - 1).bit_length())
            part *= 3
        odd *= 5
    return best


def billed_hours(length_h, granularity_h: float, minimum_h: float):
    """billed(L) = max(minimum, γ·ceil(L/γ)) (§5), vectorised.

    A relative slack of 1e-9 granules keeps float noise (3.0000000001 h) from
    billing a whole extra granule; the simulator uses this same function.
    """
    x = np.asarray(length_h, dtype=float) / granularity_h
    units = np.ceil(x - 1e-9 * np.maximum(1.0, x))
    return np.maximum(minimum_h, granularity_h * units)


def _split(work_h: float, tau: float) -> tuple[int, float]:
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
    k, last = _split(work_h, tau)
    out = np.full(k, float(min(tau, work_h)))
    out[-1] = last
    return out


@dataclass(frozen=True)
class _Plan:
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


def segment_plan(inputs: CandidateInputs, tau: float | None = None) -> _Plan:
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
    k, last = _split(inputs.work_h, tau)
    tau_used = inputs.work_h if k == 1 else tau
    s_full = tau_used + C if k > 1 else last + C
    streams = inputs.nodes if tol == "stateless" else 1
    return _Plan(k=k, tau=float(tau_used), s=float(s_full), s_k=float(last + C),
                 C=float(C), R=float(inputs.restart_h),
                 lam=float(inputs.failure_rate_per_h / streams), n=int(inputs.nodes // streams),
                 rho=float(inputs.spot_share), wait=float(inputs.capacity_wait_h),
                 wait_cv=float(inputs.capacity_wait_cv) if inputs.capacity_wait_h else 1.0, streams=streams)


def _seg_time(lam: float, s: float, R: float) -> float:
    """E[T_i] = (e^(λs) − 1)(1/λ + R) (§4), stable as λ → 0."""
    x = lam * s
    if x == 0:
        return s
    e = math.expm1(x)
    return s * (e / x) + e * R


def _trexp_mean(lam: float, s: float) -> float:
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
    return (2 / lam ** 2 - math.exp(-x) * (s * s + 2 * s / lam + 2 / lam ** 2)) / -math.expm1(-x)


def _moments(p: _Plan) -> tuple[float, float, float]:
    """E[T], E[F] and sd of the failure overhead Z = T − T0."""
    lam, k = p.lam, p.k
    if lam == 0:
        return p.T0, 0.0, 0.0
    if lam * max(p.s, p.s_k) > _MAX_EXP:
        return math.inf, math.inf, math.inf
    ET = p.R + (k - 1) * _seg_time(lam, p.s, p.R) + _seg_time(lam, p.s_k, p.R)
    var = 0.0
    EF = 0.0
    for cnt, s in ((k - 1, p.s), (1, p.s_k)):
        if cnt == 0:
            continue
        c = math.expm1(lam * s)  # E[F_i]; Var(F_i) = c(1 + c)
        ex = _trexp_mean(lam, s)
        ey = p.R + ex
        vy = ex * max(s - ex, 0.0)  # bound for a variable on [0, s)
        var += cnt * (c * vy + c * (1 + c) * ey * ey)
        EF += cnt * c
    return ET, EF, math.sqrt(var)


def wait_phases(mean: float, cv: float) -> tuple[tuple[float, float], ...]:
    """The capacity wait's law (§3) as (probability, mean) of exponential phases: one phase when cv = 1, else
    the two-phase hyperexponential with balanced means (each phase carries half the mean), which has the
    given mean and coefficient of variation: most waits short, a few very long, as in the traces."""
    if cv <= 1 or not mean:
        return ((1.0, mean),)
    p1 = 0.5 * (1 + math.sqrt((cv * cv - 1) / (cv * cv + 1)))
    return (p1, mean / (2 * p1)), (1 - p1, mean / (2 * (1 - p1)))


def _wall_moments(p: _Plan, ET: float, EF: float, sd: float) -> tuple[float, float]:
    """E[T] and an upper estimate of its sd with the capacity waits: each failure is a preemption
    event with probability ρ, followed by a wait W of mean m and E[W²] = m²(1 + cv²), unbilled (§3)."""
    if not p.wait or not p.rho or not math.isfinite(ET):
        return ET, sd
    var_f = EF * (1 + EF)  # Var(F) ≤ E[F](1 + E[F]) for the sum of geometric counts
    extra = EF * p.rho * (1 + p.wait_cv ** 2) * p.wait ** 2 + var_f * (p.rho * p.wait) ** 2
    return ET + EF * p.rho * p.wait, math.sqrt(sd * sd + extra) + p.wait


def _wait_factor(p: _Plan, h: float, N: int) -> np.ndarray | float:
    """φ of the wall time a failure adds beyond R + X: the wait W (`wait_phases`) with probability ρ, else 0; on
    the damped grid of N points (`_grid`'s z1), in closed form per exponential phase of mean m: the transform of it
    hat-split onto the grid points i·h is a·(I0 + e^(−z)·I1) / (1 − e^(−z−a)), a = h/m, with
    I0 = ∫(1−u)e^(−au)du and I1 = ∫u·e^(−au)du on [0, 1] (the FFT of the same hat-split masses, without
    computing them)."""
    if not p.wait or not p.rho:
        return 1.0
    step = _grid(N)[3]  # e^(−z): 1 − e^(−z−a) = 1 − e^(−z)·e^(−a) loses < 1e-12 here (z ≥ αh, a > 0)
    law = 0.0
    for share, mean in wait_phases(p.wait, p.wait_cv):
        a = h / mean
        if a < 1e-6:  # the grid is far finer than the wait: I0 = 1/2 − a/6, I1 = 1/2 − a/3 to second order
            i1, i0 = 0.5 - a / 3, 0.5 - a / 6
        else:
            i1 = -(math.expm1(-a) + a * math.exp(-a)) / (a * a)
            i0 = -math.expm1(-a) / a - i1
        law = law + share * a * (i0 + step * i1) / (1 - step * math.exp(-a))
    return (1 - p.rho) + p.rho * law


def _hat_trexp(lam: float, s: float, R: float, h: float, N: int) -> np.ndarray:
    """Mass of R + X, X ~ Exp(λ) on [0, s), split linearly onto grid i·h.

    The linear (hat) split keeps every mean exact, so sums of many such
    variables do not drift with the grid; mass beyond the grid is dropped,
    which is exact for the part of any convolution that stays on it.
    """
    w = np.zeros(N)
    lo, hi = R, R + s
    i0 = int(math.floor(lo / h))
    if i0 >= N or s <= 0:
        return w
    i1 = min(int(math.ceil(hi / h)), N)
    cells = np.arange(i0, max(i1, i0 + 1))
    left = cells * h
    a = np.maximum(left, lo)
    b = np.minimum(left + h, hi)
    d = np.maximum(b - a, 0.0)
    p = -math.expm1(-lam * s)
    e0 = np.exp(-lam * (a - R))
    x = lam * d
    em = -np.expm1(-x)
    mass = e0 * em / p
    # ∫ (u − u0) λe^(−λu) du over the cell, stable for small λd
    mom = e0 * (em - x * np.exp(-x)) / (lam * p)
    up = (mom + (a - left) * mass) / h  # share of the right-hand grid point
    stop = i0 + cells.size  # the cells are consecutive: slices, not index arrays
    w[i0:stop] += mass - up
    w[i0 + 1:stop + 1] += up[:N - 1 - i0]  # a right-hand point past the grid is dropped
    return w


def _half_cdf(w: np.ndarray, h: float, offset: float, xs, weights=None):
    """CDF (or partial first moment) of a hat-split grid measure at xs.

    Cumulative sums of hat masses equal the CDF averaged over [x_i, x_i+h],
    i.e. the CDF at the half-grid points to second order; interpolate there.
    Only the nodes up to the furthest of xs are summed: the sums run in order,
    so that prefix is exactly what summing all of them would give there.
    """
    reach = (np.max(xs) - offset) / h  # the furthest of xs, in cells
    n = int(reach) + 3 if reach < w.size else w.size  # node n lies past it (NaN: all)
    n = min(max(n, 1), w.size)
    v = w[:n] if weights is None else w[:n] * weights[:n]
    cum = np.concatenate(([0.0], np.cumsum(v)))
    # no mass below `offset` (lengths start there), so the first node is
    # (offset, 0), not (offset − h/2, 0): a density that starts with a jump
    # at x = 0 would otherwise leak half a cell below it
    xp = offset + np.concatenate(([0.0], (np.arange(n) + 0.5) * h))
    return np.interp(xs, xp, cum)


def lump_scale(p: _Plan) -> float:
    """The scale a grid over the overhead Z must resolve: a failure's lump X + R, of width s (X's support),
    or where a segment is shorter than the restart (a stateless job's items of seconds), its place R: the
    item's shape within it moves P(Z <= z) by at most the mass within one item of z."""
    return max(p.width, p.R)


LAW_ERROR = 5e-5
"""What the grid may move P(T <= D) by, at most (§6)."""
HAT_SPREAD = 2.5
"""κ in the hat split's error on P(Z <= z), κ·E[F]·(h/σ)², σ the larger of Z's sd and a lump's width: splitting
each failure's lump onto the grid adds about h²/6 of variance, which moves the law by its slope, 1/σ² at most
(a lump's own, with a failure or two; Z's, with many); κ is the largest ratio of error to E[F]·(h/σ)² measured
over the 505 laws of the what-if benchmark's first point (2.4; most lie near 0.2)."""


KINK_POINTS = 8192
"""The finest grid the kinks' bound asks for (what every law had before the grid was sized per law)."""


def law_points(law: "WallLaw") -> int:
    """Points of a grid over Z in [0, z_max] for P(Z <= z) within LAW_ERROR, at least 256, at most 65,536. Three
    bounds on the step h:
    - four points per lump X + R (`lump_scale`);
    - HAT_SPREAD·E[F]·(h/σ)² <= LAW_ERROR for the hat split;
    - the kinks (`kink_step`), as far as KINK_POINTS.
    So a law with few failures (on-demand's hardware failures) takes a few hundred points, one with dozens of
    long waits tens of thousands. Items narrower than the restart, with failures to spare, make a comb of
    near-atoms at multiples of R, which no grid of four points per R resolves: there P(Z <= z) is within the
    mass of an item near z (§6), as it always was."""
    p = law.plan
    lump = lump_scale(p)
    h = lump / 4
    if law.failures > 0:
        h = min(h, max(law.sd, lump) * math.sqrt(LAW_ERROR / (HAT_SPREAD * law.failures)),
                max(kink_step(law), law.z_max / (KINK_POINTS - 2)))
    return max(256, fast_len(int(min(law.z_max / h, 65534)) + 2))


def kink_step(law: "WallLaw") -> float:
    """The step that reads the CDF's kinks within LAW_ERROR (inf when none matters): where the lump of a run's
    only failure starts (and, with no wait, ends) the density jumps, by P(F = 1) over the item's width s, or
    times the wait's density at 0 after a preemption event, and reading the CDF between nodes misses it by
    about the jump times h/4; a jump whose mass is within 2·LAW_ERROR is read within it anyway. A wait's kink
    can ask for millions of points, and lies within a few steps of D − T0 = R only."""
    p = law.plan
    one = law.P0 * ((p.k - 1) * -math.expm1(-p.lam * p.s) + -math.expm1(-p.lam * p.s_k))  # P(F = 1)
    waits = p.rho if p.wait else 0.0  # the share of failures a capacity wait follows
    if max(one * (1 - waits), one * waits) <= 2 * LAW_ERROR:
        return math.inf
    at_zero = sum(share / mean for share, mean in wait_phases(p.wait, p.wait_cv)) if waits else 0.0
    return LAW_ERROR / (one * ((1 - waits) / p.width + waits * at_zero))


@lru_cache(maxsize=64)
def _grid(N: int, damping: float = 18.0):
    """Tilt, untilt, per-grid-step exponents z1 and e^(−z1) for a damped DFT on N points (read-only arrays).

    The tilt e^(−αx) with αNh = `damping` suppresses wrap-around by e^-18, so the grid need only cover the
    lengths we evaluate, not all of T. In grid steps (αh = damping/N) none of it depends on the step h, so
    every grid of N points shares one copy."""
    step = damping / N
    i = np.arange(N)
    tilt = np.exp(-step * i)
    untilt = np.exp(step * i)
    j = np.arange(N // 2 + 1)
    z1 = step + 2j * np.pi * j / N  # per-grid-step exponent
    out = tilt, untilt, z1, np.exp(-z1)
    for array in out:
        array.flags.writeable = False
    return out


# ----------------------------------------------------------- P(T <= D) (§6)


class WallLaw:
    """The law of a candidate's wall time T = T0 + Z (§6), Z = Σ_i Σ_{j<F_i} (X_ij + R [+ W]): a compound
    geometric law per segment, (1−p)/(1−p·φ_Y), identical full segments by a power, inverted by one FFT
    on a grid over the whole support (T0 to T0 + E[Z] + 14 sd). P(T ≤ D) for any D and its quantiles then
    read the same cumulative sums, so one timing key's law serves every deadline it meets (`law_points` sizes
    the grid)."""

    def __init__(self, p: _Plan, moments: tuple[float, float, float] | None = None):
        self.plan = p
        ET, EF, sd = moments if moments is not None else _moments(p)
        self.finite = math.isfinite(ET)
        ET, sd = _wall_moments(p, ET, EF, sd)
        self.mean, self.sd, self.failures = ET, sd, EF
        self.P0 = math.exp(-p.lam * p.S) if p.lam else 1.0  # no failure at all: T = T0 exactly
        self.z_max = (ET - p.T0) + 14.0 * sd + 2.0 * (p.R + p.s) if self.finite else math.inf
        self._cdf: tuple[float, np.ndarray] | None = None

    @property
    def ready(self) -> bool:
        """Whether the grid is computed (reading it is then microseconds)."""
        return self._cdf is not None

    def compute(self) -> "WallLaw":
        """The grid now, for a caller that will read it many times."""
        if self.finite and self.plan.lam:
            self.cdf
        return self

    def p_le(self, D: float) -> float:
        """P(T ≤ D)."""
        p = self.plan
        zD = D - p.T0
        if zD < -1e-9 * max(1.0, abs(D)):
            return 0.0
        if p.lam == 0:
            return 1.0
        if not self.finite:
            return 0.0 if math.isfinite(D) else 1.0
        if zD >= self.z_max:
            return 1.0
        if zD <= 0:
            return self.P0
        h, cdf = self.cdf
        at = zD / h + 0.5  # position among the nodes 0, h/2, 3h/2, ... (node i > 0 at (i − 1/2)h)
        i = min(int(at), cdf.size - 2)
        if i == 0:
            value = cdf[0] + (cdf[1] - cdf[0]) * zD / (0.5 * h)
        else:
            value = cdf[i] + (cdf[i + 1] - cdf[i]) * (at - i)
        return min(1.0, max(0.0, float(value)))

    def p_met(self, D: float, error: EstimateError) -> float:
        """P(ε·T ≤ D), ε the throughput estimate's error, independent of the run (§12): the atom at T0 exactly,
        the rest of the law over ε's nodes."""
        if error.exact or not math.isfinite(D):
            return self.p_le(D)
        p = self.plan
        atom = self.P0 * float(error.cdf(D / p.T0))
        if p.lam == 0 or not self.finite:
            return atom
        e, w = error.nodes()
        z = D / e - p.T0  # where each ε puts the deadline on the overhead's axis
        return min(1.0, atom + float(np.sum(w * self._continuous(z))))

    def _continuous(self, z: np.ndarray) -> np.ndarray:
        """P(0 < T − T0 ≤ z) at each z: the law less its atom, read off the grid as `p_le` reads it."""
        h, cdf = self.cdf
        zc = np.clip(z, 0.0, self.z_max)
        at = zc / h + 0.5
        i = np.minimum(at.astype(np.int64), cdf.size - 2)
        first = cdf[0] + (cdf[1] - cdf[0]) * zc / (0.5 * h)
        value = np.where(i == 0, first, cdf[i] + (cdf[i + 1] - cdf[i]) * (at - i))
        value = np.where(z >= self.z_max, 1.0, np.clip(value, 0.0, 1.0))
        return np.where(z > 0, np.maximum(value - self.P0, 0.0), 0.0)

    def quantile_met(self, q: float, error: EstimateError) -> float:
        """The smallest D with P(ε·T ≤ D) ≥ q (`p_met`), by bisection from ε's q-quantile times T0, which no
        smaller D reaches."""
        if error.exact:
            return self.quantile(q)
        lo = self.plan.T0 * error.factor(q)
        if self.p_met(lo, error) >= q:
            return lo
        hi = lo * 1.25
        while self.p_met(hi, error) < q:
            lo, hi = hi, hi * 2
            if hi > 1e6:
                return math.inf
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if self.p_met(mid, error) >= q else (mid, hi)
            if hi - lo <= 1e-9 * hi:
                break
        return hi

    def quantile(self, q: float) -> float:
        """The smallest D with P(T ≤ D) ≥ q (inf beyond a century: never on a calendar)."""
        p = self.plan
        if p.lam == 0:
            return p.T0
        if not self.finite or self.mean + 14.0 * self.sd > 1e6:
            return math.inf
        if self.P0 >= q:
            return p.T0
        h, cdf = self.cdf
        above = np.flatnonzero(cdf >= q)
        if not above.size:
            return p.T0 + self.z_max
        i = int(above[0])
        if i == 0:
            return p.T0
        left, right = max(i - 1.5, 0.0) * h, (i - 0.5) * h
        frac = (q - cdf[i - 1]) / (cdf[i] - cdf[i - 1]) if cdf[i] > cdf[i - 1] else 1.0
        return p.T0 + left + frac * (right - left)

    @property
    def cdf(self) -> tuple[float, np.ndarray]:
        """(h, P(T − T0 ≤ z) at the nodes z = 0, h/2, 3h/2, ...), `_half_cdf`'s nodes, from one inverse FFT,
        kept. The grid resolves the lumps X + R (`lump_scale`) and ends at z_max."""
        if self._cdf is None:
            p, lam = self.plan, self.plan.lam
            N = law_points(self)
            h = self.z_max / (N - 2)
            tilt, untilt, z1, _ = _grid(N)
            pf, pk = -math.expm1(-lam * p.s), -math.expm1(-lam * p.s_k)
            waits = _wait_factor(p, h, N)
            zhat = (1 - pk) / (1 - pk * _fft.rfft(_hat_trexp(lam, p.s_k, p.R, h, N) * tilt) * waits)
            if p.k > 1:
                fY = _fft.rfft(_hat_trexp(lam, p.s, p.R, h, N) * tilt) * waits
                zhat = zhat * np.power((1 - pf) / (1 - pf * fY), p.k - 1)
            z = _fft.irfft(zhat - self.P0, N) * untilt  # the atom at Z = 0 (no failure) is added exactly
            # no mass below 0 (lengths start there), so the first node is (0, P0), not (−h/2, P0)
            self._cdf = h, self.P0 + np.concatenate(([0.0], np.cumsum(z)))
        return self._cdf


def overhead_tail_bound(p: _Plan, level: float) -> float:
    """Chernoff's bound on P(Z > level), Z = T − T0, from Z's moment generating function in closed form:
    per segment (1 − p)/(1 − p·M_Y(θ)), a failure's Y = R + X (X ~ Exp(λ) truncated to [0, s)) plus, with
    probability ρ, the capacity wait W (`wait_phases`); minimised over θ on a grid. Microseconds, where
    `WallLaw.p_le` takes an FFT: enough to tell that a tail is negligible."""
    lam, R, rho, m = p.lam, p.R, p.rho, p.wait
    if lam == 0 or level <= 0:
        return 0.0 if lam == 0 else 1.0
    phases = wait_phases(m, p.wait_cv)
    top = 1 / max(mean for _, mean in phases) if rho and m else 50 / p.s_k
    theta = np.geomspace(1e-3 / level, 0.999 * top, 48)
    log_mgf = np.zeros_like(theta)
    ok = np.ones_like(theta, dtype=bool)
    with np.errstate(all="ignore"):
        wait = (1 - rho) + rho * sum(share / (1 - theta * mean) for share, mean in phases) if rho and m else 1.0
        for count, s in ((p.k - 1, p.s), (1, p.s_k)):
            if count == 0:
                continue
            fail = -math.expm1(-lam * s)
            d = lam - theta
            near = np.abs(d) < 1e-12
            lost = np.where(near, lam * s, lam * -np.expm1(-d * s) / np.where(near, 1.0, d)) / fail  # E[e^(θX)]
            phi = np.exp(theta * R) * lost * wait
            ok &= fail * phi < 1
            log_mgf += count * (-lam * s - np.log(1 - fail * phi))  # log(1 − fail) = −λs, finite however long s is
    bound = np.where(ok, log_mgf - theta * level, np.inf)
    return float(min(1.0, np.exp(bound.min())))


def completion_quantile(inputs: CandidateInputs, q: float, tau: float | None = None) -> float:
    """Smallest D with P(ε·T ≤ D) ≥ q: the same law as `p_deadline`, inverted (what `planner batch` books
    on the calendar)."""
    return WallLaw(segment_plan(inputs, tau)).quantile_met(q, inputs.estimate_error)


def p_deadline(inputs: CandidateInputs, tau: float | None = None) -> float:
    """P(ε·T <= D), exact up to a fine grid (§6, §12); 1 when D is infinite."""
    D = inputs.time_budget_h
    if not math.isfinite(D):
        return 1.0
    return WallLaw(segment_plan(inputs, tau)).p_met(D, inputs.estimate_error)


# ------------------------------------------------------ rounding waste (§5)


@dataclass(frozen=True)
class Waste:
    """Expected Σ over billing sessions of billed(L) − L, in node-hours, split by how a session ends: the last
    sessions (no failure from their start to the job's end, the atoms below) and the rest, with how many
    sessions each part holds (a spot_fallback's phases reuse the per-session figures)."""

    last: float
    last_sessions: float
    rest: float
    rest_sessions: float

    @property
    def total(self) -> float:
        return self.last + self.rest


def _waste(p: _Plan, gran: float, minimum: float, ET: float, EF: float,
           sd: float, cut_granules: int = 1000) -> Waste:
    """Expected Σ over billing sessions of billed(L) − L, in node-hours (`Waste`).

    Sessions per node slot: the slot's session started at the beginning of
    segment j (after a restart R) runs through other slots' failures (each
    adds X + R and restarts the segment) until this slot fails — each failure
    hits it with probability 1/n — or the job ends. Sessions start n times at
    j = 1 and E[F_j] = e^(λs_j) − 1 times at segment j. In transforms, with
    q = (n−1)/n,
        pass segment  A = (1−p)·e^(−iωs) / (1 − q·p·φ_Y)
        die in it     K = (1−q)·p·φ_X   / (1 − q·p·φ_Y)
    and summing the geometric series over start and end segments gives the
    measure of all session lengths. Its atoms (no failure after the start,
    L = R + S_j) are billed exactly; the continuous part is evaluated from
    its CDF at the billing steps up to `cut_granules` granules, beyond which
    a session's waste is γ/2 to within γ/2 in at least 1000 granules.
    """
    lam, k, n, R = p.lam, p.k, p.n, p.R
    s, s_k = p.s, p.s_k
    if lam == 0:
        return Waste(n * float(billed_hours(p.T0, gran, minimum) - p.T0), n, 0.0, 0.0)
    if not math.isfinite(ET):
        return Waste(math.inf, n, math.inf, math.inf)
    if EF > 1e7:
        # hopeless candidate (e^(λs) huge): the grid sums would overflow;
        # half a granule per session is plenty to rank it last
        return Waste(n * gran / 2, n, EF * gran / 2, EF)
    beta = 1 + p.rho * (n - 1)  # sessions a failure starts: all n after a preemption event, else one
    mass_total = n + beta * EF
    J = max(0, math.ceil(minimum / gran - 1e-9) - 1)
    L_tail = p.T0 + (ET - p.T0) + 14.0 * sd + 2.0 * (R + s)
    I = max(J + 1, math.ceil(min(cut_granules * gran, L_tail) / gran - 1e-9))
    cut = I * gran

    pf, pk = -math.expm1(-lam * s), -math.expm1(-lam * s_k)
    c, ck = beta * math.expm1(lam * s), beta * math.expm1(lam * s_k)  # sessions started per segment

    # ---- atoms: sessions with no failure from their start to the job end.
    # m = k − j segments after the start segment j; length R + s_k + m·s.
    M = min(k, 200_000)
    m_idx = np.arange(M, dtype=float)
    starts = np.full(M, c)
    starts[0] = ck
    if k == 1:
        starts[0] += n
    elif M == k:
        starts[-1] += n
    log1mp = -lam * s  # log(1 − p), exact
    amass = (1 - pk) * starts * np.exp(m_idx * log1mp)
    apos = R + s_k + m_idx * s
    if M < k:  # the very first session, never interrupted: L = T0
        amass = np.append(amass, (1 - pk) * (n + c) * math.exp((k - 1) * log1mp))
        apos = np.append(apos, p.T0)
    # numpy's sum, not BLAS's dot: its threads change the last bits with the machine's cores
    waste_atoms = float(np.sum(amass * (billed_hours(apos, gran, minimum) - apos)))
    # closed-form total mass of all atoms (§ derivation above, ω = 0)
    if k == 1:
        atom_total = (1 - pk) * (n + ck)
    else:
        geo = beta * -math.expm1(-lam * s * (k - 1))  # c·Σ_{m=1}^{k−1}(1−p)^m, c(1−p)/p = β
        atom_total = (1 - pk) * (n * math.exp((k - 1) * log1mp) + geo + ck)
    # atoms not enumerated (only when k > 200,000): γ/2 each
    waste_atoms += max(atom_total - float(amass.sum()), 0.0) * gran / 2

    # ---- continuous part on a damped grid over x = L − R.
    range_x = cut - R
    cont_total = max(mass_total - atom_total, 0.0)
    if (range_x <= 0 or cont_total <= 1e-12 * mass_total
            or minimum <= R and _half_granule_error(p, gran, EF) <= SMOOTH_WASTE_REL * n * ET):
        return Waste(waste_atoms, atom_total, cont_total * gran / 2, cont_total)
    # resolve the billing step, the segment (X's support) and 1/λ; the
    # session law is lumpy at those scales (many lengths ≈ m·R + small)
    feat = p.width
    h_t = min(gran / 8.0, range_x / 4096.0, feat / 8.0, 1.0 / (8.0 * lam))
    h_t = max(h_t, range_x / 60000.0)
    if k > 1 and s >= h_t:
        ms = math.ceil(s / h_t - 1e-9)
        h, frac = s / ms, 0.0
    else:
        h = h_t
        ms, frac = int(s // h), (s / h) % 1.0
    N = fast_len(int(math.ceil(range_x / h)) + 4)
    tilt, untilt, z1, _ = _grid(N)
    shift = np.exp(-ms * z1)
    if frac:  # s not on the grid: hat-split the shift too (mean exact)
        shift = (1 - frac) * shift + frac * np.exp(-(ms + 1) * z1)
    q = (1 - p.rho) * (n - 1) / n  # a failure passes this slot's session: another node's hardware failure

    fYk = _fft.rfft(_hat_trexp(lam, s_k, R, h, N) * tilt)
    fXk = _fft.rfft(_hat_trexp(lam, s_k, 0.0, h, N) * tilt)
    den_k = 1 - q * pk * fYk
    Ak = (1 - pk) / den_k  # offset s_k applied when evaluating
    Kk = (1 - q) * pk * fXk / den_k
    if k == 1:
        Uk = n + ck
        Ua = n + ck
        nu1 = Uk * Kk
    else:
        fY = _fft.rfft(_hat_trexp(lam, s, R, h, N) * tilt)
        fX = _fft.rfft(_hat_trexp(lam, s, 0.0, h, N) * tilt)
        den = 1 - q * pf * fY
        A = (1 - pf) * shift / den
        K = (1 - q) * pf * fX / den
        Ak1 = np.power(A, k - 1)
        D1 = 1 - A
        G = (1 - Ak1) / D1  # Σ_{i<k−1} A^i
        H = ((k - 1) - A * G) / D1  # Σ_{i=1}^{k−1} G_i
        Uk = n * Ak1 + c * A * G + ck
        nu1 = K * (n * G + c * H) + Uk * Kk
        a = (1 - pf) * shift  # atom part of A
        ak1 = np.power(a, k - 1)
        Ua = n * ak1 + c * a * (1 - ak1) / (1 - a) + ck
    nu2 = Uk * Ak - Ua * (1 - pk)  # completed sessions minus their atoms
    g1 = _fft.irfft(nu1, N) * untilt
    g2 = _fft.irfft(nu2, N) * untilt
    x = np.arange(N) * h
    o1, o2 = R, R + s_k

    pts = np.arange(J, I + 1) * gran
    F = _half_cdf(g1, h, o1, pts) + _half_cdf(g2, h, o2, pts)
    F_J, F_I = F[0], F[-1]
    billed_le = minimum * F_J + gran * (J * (F_I - F_J) + float(np.sum(F_I - F[:-1])))
    len_le = (float(_half_cdf(g1, h, o1, cut, o1 + x))
              + float(_half_cdf(g2, h, o2, cut, o2 + x)))
    waste_cont = billed_le - len_le + max(cont_total - F_I, 0.0) * gran / 2
    return Waste(waste_atoms, atom_total, waste_cont, cont_total)


@lru_cache(maxsize=4096)
def session_waste(p: _Plan, granularity_h: float, minimum_h: float) -> Waste:
    """`_waste` of one stream of the plan `p` run to its end, kept: a spot_fallback prices its spot phase's
    sessions from it, per session by how they end."""
    return _waste(p, granularity_h, minimum_h, *_moments(p))


SMOOTH_WASTE_REL = 1e-8
"""How far (a share of the billed node-hours) half a granule per session may be from the continuous sessions'
exact waste for `_waste` to take it without the grid: under a cent on a million dollars."""


def _half_granule_error(p: _Plan, gran: float, EF: float) -> float:
    """A bound on |waste − γ/2 · mass| over the sessions that end at a failure or after a pass (§5's continuous
    part), in node-hours: by Euler–Maclaurin, γ²/16 times the total variation of their lengths' density. Each
    session's length runs from a (re)start of the computation; from each, the next failure comes at λe^(−λu) up to
    the work left, which ends the session with probability 1 − q (a density of variation 2λ(1 − q) at most) or,
    a pass, starts the next (the session then completing at the restart plus the partial segment lost, whatever
    segment that was: min(k, 1/p) pieces of variation 2λq piled together). The (re)starts are the sessions and
    the passes, n − 1 per hardware failure."""
    q = (1 - p.rho) * (p.n - 1) / p.n
    starts = p.n + (1 + p.rho * (p.n - 1)) * EF + (1 - p.rho) * (p.n - 1) * EF
    pieces = min(p.k, 1 / -math.expm1(-p.lam * p.s)) if q else 0.0
    return gran * gran / 16 * 2 * p.lam * starts * ((1 - q) + q * pieces)


# -------------------------------------------------------- expected (§4–§7)


def _evaluate(inputs: CandidateInputs, tau: float | None,
              with_deadline: bool) -> CostResult:
    p = segment_plan(inputs, tau)
    ET, EF, sd = _moments(p)  # of one stream (§4): the whole job but for a stateless one
    n, price = inputs.nodes, inputs.price_per_node_h
    gran, minimum = inputs.billing_granularity_h, inputs.billing_minimum_h
    waste = p.streams * _waste(p, gran, minimum, ET, EF, sd).total
    billed = float(n * ET + waste)
    waste = float(waste)
    W, kC = inputs.work_h, p.k * p.C
    def usd(rate: float, amount: float) -> float:  # 0 · inf is 0 here
        return float(rate * amount) if rate else 0.0

    wall, _ = _wall_moments(p, ET, EF, sd)  # plus the capacity waits, which are not billed
    breakdown = {
        "compute": usd(price, n * W),
        "checkpointing": usd(price, n * kC),
        "startup": usd(price, n * p.R),
        # E[T_busy] − W − kC − R: lost work and restarts (§7)
        "preemption_rework": usd(price, n * max(ET - p.T0, 0.0)),
        "rounding_waste": usd(price, waste),
        "storage": usd(inputs.storage_usd_per_h, wall),
        "egress": float(inputs.egress_usd),
    }
    cost = math.fsum(breakdown.values())
    pd = on_estimate = 1.0
    if with_deadline and math.isfinite(inputs.time_budget_h):
        law = WallLaw(p, (ET, EF, sd))
        pd, on_estimate = law.p_met(inputs.time_budget_h, inputs.estimate_error), law.p_le(inputs.time_budget_h)
    return CostResult(wall_h=wall, failures=p.streams * EF, billed_node_h=billed,
                      rounding_waste_node_h=waste, p_deadline=pd,
                      cost_usd=cost, breakdown=breakdown, segments=p.k,
                      checkpoint_interval_h=p.tau, p_deadline_on_estimate=on_estimate)


@lru_cache(maxsize=4096)
def expected(inputs: CandidateInputs, tau: float | None = None) -> CostResult:
    """Expected wall time, failures, billing, P(T <= D) and cost (§4–§7).

    `tau` overrides `inputs.checkpoint_interval_h` (used by `best_interval`).
    Kept by its arguments, all it depends on: candidate generation prices spot alone for a spot row and
    again as the spot phase of its spot_fallback twin. The result is shared, so read it, never change it.
    """
    return _evaluate(inputs, tau, with_deadline=True)


# ----------------------------------------------------- auto cadence (§4)


FINE_BILLING_H = 0.05
"""Billing finer than 3 minutes (granule and minimum): rounding waste barely depends on τ."""


def expected_time(work_h: float, C: float, R: float, lam: float, k) -> tuple:
    """E[T] and E[F] for k equal segments (§4), vectorised over k."""
    k = np.asarray(k, dtype=float)
    s = work_h / k + C
    if lam == 0:
        return R + work_h + k * C, np.zeros_like(k)
    grow = np.expm1(np.minimum(lam * s, _MAX_EXP))
    return R + k * grow * (1.0 / lam + R), k * grow


def quick_interval(inputs: CandidateInputs) -> float:
    """τ = W/k minimising n·E[T] + γ/2·(n + E[F]) over integer k: exact E[T], the §5 waste
    approximation. Equal segments are best for a given k (e^(λs) is convex). Cheap (a few
    vectorised scans), so candidate generation can afford it for every hardware shape."""
    W, lam = inputs.work_h, inputs.failure_rate_per_h
    if inputs.interruption_tolerance != "checkpointed" or lam == 0:
        return segment_plan(inputs).tau
    C, R, n, gran = inputs.checkpoint_write_h, inputs.restart_h, inputs.nodes, inputs.billing_granularity_h
    k_max = int(min(100_000, max(1, math.ceil(W / max(W / 1e5, 1e-3)))))

    def proxy(ks):
        ET, EF = expected_time(W, C, R, lam, ks)
        return n * ET + gran / 2 * (n + EF)

    ks = np.unique(np.geomspace(1, k_max, 64).round().astype(int))
    best = int(ks[np.argmin(proxy(ks))])
    lo, hi = max(1, int(best / 1.2) - 1), min(k_max, int(best * 1.2) + 2)
    ks = np.arange(lo, hi + 1)
    best = int(ks[np.argmin(proxy(ks))])
    return W / best


def best_interval(inputs: CandidateInputs, candidates=None) -> float:
    """τ minimising expected cost for 'checkpointed' with cadence `auto`.

    For a given k = ceil(W/τ), E[T] is smallest with equal segments τ = W/k
    (e^(λs) is convex), so the search runs over integers k: a log-spaced
    scan around Young/Daly's sqrt(2C/λ), then every k near the best few,
    then a continuous polish within the best k. Extra `candidates` (hours)
    are always considered. Ties go to the longer τ (fewer checkpoints).
    """
    W = inputs.work_h
    if inputs.interruption_tolerance != "checkpointed":
        return segment_plan(inputs).tau
    fine = max(inputs.billing_granularity_h, inputs.billing_minimum_h) <= FINE_BILLING_H
    if fine and not candidates:  # the quick optimum, settled against its neighbours at the exact cost
        k0 = round(W / quick_interval(inputs))
        near = [W / k for k in range(max(1, k0 - 2), k0 + 3)]
        return min(near, key=lambda t: (_evaluate(inputs, t, with_deadline=False).cost_usd, -t))
    lam, C = inputs.failure_rate_per_h, inputs.checkpoint_write_h
    k_max = int(min(100_000, max(1, math.ceil(W / 1e-3))))
    cache: dict[float, float] = {}

    def cost(tau: float) -> float:
        if tau not in cache:
            c = _evaluate(inputs, tau, with_deadline=False).cost_usd
            cache[tau] = c if c == c else math.inf  # NaN never wins
        return cache[tau]

    if lam == 0:
        return W  # nothing to lose: one segment, fewest checkpoints
    ks = set(np.unique(np.geomspace(1, k_max, 48).round().astype(int)).tolist())
    if C > 0:
        k_yd = W / math.sqrt(2 * C / lam)
        for f in (0.5, 0.7, 1.0, 1.4, 2.0):
            ks.add(int(min(k_max, max(1, round(k_yd * f)))))
    for kk in ks:
        cost(W / kk)
    # refine: a fine log grid around the two best, then integer neighbours
    for t in sorted(cache, key=lambda t: (cache[t], -t))[:2]:
        k0 = W / t
        for kk in np.unique(np.geomspace(max(1, k0 / 1.35), min(k_max, k0 * 1.35), 16).round()):
            cost(W / int(kk))
    k0 = round(W / min(cache, key=lambda t: (cache[t], -t)))
    for kk in range(max(1, k0 - 4), min(k_max, k0 + 4) + 1):
        cost(W / kk)
    # polish: unequal splits within the best k (rarely better, but cheap)
    t_best = min(cache, key=lambda t: (cache[t], -t))
    k0 = round(W / t_best)
    if k0 > 1:
        lo, hi = W / k0, W / (k0 - 1) * (1 - 1e-9)
        for t in np.linspace(lo, hi, 6)[1:]:
            cost(float(t))
    for t in candidates or ():
        if t > 0:
            cost(float(min(t, W)))
    return min(cache, key=lambda t: (cache[t], -t))
