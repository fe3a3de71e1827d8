"""One candidate in the cost model's terms: what it needs to know (`CandidateInputs`), what it answers
(`CostResult`), and the small laws every part of it reads: how spot events touch a job of n nodes (§3), the
capacity wait's phases (§3) and billed hours (§5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from planner.economics.estimate_error import EXACT, EstimateError

if TYPE_CHECKING:
    from planner.economics.purchase import Terms

TOLERANCES = ("none", "checkpointed", "stateless")
# Above this many expected failures the job is hopeless and the grid methods
# would only burn time; costs are reported as inf.
MAX_EXP = 600.0


@dataclass(frozen=True)
class CandidateInputs:
    """Everything the cost model needs about one candidate, in hours and USD."""

    work_h: float  # W: failure-free, checkpoint-free wall time (§2)
    checkpoint_write_h: float = 0.0  # C
    restart_h: float = 0.0  # R, at the first start and after each failure
    nodes: int = 1  # n
    gpus_per_node: int = 1  # g
    # preemption events per node-hour as the job sees them (§3); 0 on demand
    spot_rate_per_node_h: float = 0.0
    hw_failure_per_gpu_h: float = 2e-5  # φ (Llama 3: 419 in 54 d on 16,384 GPUs)
    price_per_node_h: float = 0.0
    billing_granularity_h: float = 1.0 / 3600.0  # γ
    billing_minimum_h: float = 0.0
    interruption_tolerance: str = "checkpointed"
    checkpoint_interval_h: float = math.inf  # τ
    time_budget_h: float = math.inf  # D
    storage_usd_per_h: float = 0.0  # per wall-clock hour, already converted
    egress_usd: float = 0.0  # one-off
    # m: mean hours until spot capacity returns after a preemption event
    capacity_wait_h: float = 0.0
    # its coefficient of variation (1: exponential; the traces' are 2-6)
    capacity_wait_cv: float = 1.0
    # of the throughput estimate W came from: in P(T <= D) only (§12)
    estimate_error: EstimateError = EXACT
    # a reservation, capacity block or flex-start (§13): its billing and start; None on demand and spot
    terms: Terms | None = None

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
        for name in (
            "checkpoint_write_h",
            "restart_h",
            "spot_rate_per_node_h",
            "hw_failure_per_gpu_h",
            "billing_minimum_h",
            "capacity_wait_h",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not self.capacity_wait_cv >= 1:
            raise ValueError("capacity_wait_cv must be >= 1")
        if self.interruption_tolerance != "none" and not self.checkpoint_interval_h > 0:
            raise ValueError("checkpoint_interval_h must be > 0")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def failure_rate_per_h(self) -> float:
        """Failures per hour across the job, n·λ_spot + N·φ (§3). λ_spot is the preemption events per node-hour
        as the job sees them: `spot_event_rate(...) / n` for a gang, which restarts at every event that takes
        any of its nodes; each node's own rate for a stateless job, whose nodes are lost alone (§4)."""
        return (
            self.nodes * self.spot_rate_per_node_h
            + self.gpus * self.hw_failure_per_gpu_h
        )

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
    # P(T <= D), the estimate taken as exact (NaN: not asked)
    p_deadline_on_estimate: float = math.nan


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
    n, c = np.broadcast_arrays(
        np.asarray(nodes, dtype=float), np.asarray(correlation, dtype=float)
    )
    factor = np.where(c >= 1, 1.0, n - c * n * (n - 1) / 2)
    exact = (c >= 1e-6) & (c < 1)
    if exact.any():
        pairs, inverse = np.unique(c[exact] + 1j * n[exact], return_inverse=True)
        factor[exact] = np.array(
            [_events_per_loss(pair.real, round(pair.imag)) for pair in pairs]
        )[inverse]
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
    log_w = np.array(
        [
            math.lgamma(nodes + 1)
            - math.lgamma(i + 1)
            - math.lgamma(nodes - i + 1)
            + math.lgamma(i)
            + math.lgamma(b + nodes - i)
            for i in k.tolist()
        ]
    )
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def billed_hours(length_h, granularity_h: float, minimum_h: float):
    """billed(L) = max(minimum, γ·ceil(L/γ)) (§5), vectorised.

    A relative slack of 1e-9 granules keeps float noise (3.0000000001 h) from
    billing a whole extra granule; the simulator uses this same function.
    """
    x = np.asarray(length_h, dtype=float) / granularity_h
    units = np.ceil(x - 1e-9 * np.maximum(1.0, x))
    return np.maximum(minimum_h, granularity_h * units)


def wait_phases(mean: float, cv: float) -> tuple[tuple[float, float], ...]:
    """The capacity wait's law (§3) as (probability, mean) of exponential phases: one phase when cv = 1, else
    the two-phase hyperexponential with balanced means (each phase carries half the mean), which has the
    given mean and coefficient of variation: most waits short, a few very long, as in the traces."""
    if cv <= 1 or not mean:
        return ((1.0, mean),)
    p1 = 0.5 * (1 + math.sqrt((cv * cv - 1) / (cv * cv + 1)))
    return (p1, mean / (2 * p1)), (1 - p1, mean / (2 * (1 - p1)))
