"""Purchase options beyond on demand and spot (docs/cost-model.md §13): what a reservation, a capacity block or a
queued flex-start changes in a job's cost and in P(deadline).

* **reserved** (a commitment): each node is paid for whole terms from the job's start, used or not; a job
  longer than a term renews it. Expected node-hours billed: term · E[max(1, ⌈T/term⌉)].
* **capacity_block**: the block's nodes are paid for up front for its whole duration and are there from its
  start, `start_h` after the plan starts; the job must end inside the block (its usable hours, `run_cap_h`) to
  meet its promise, and what would run past the block's end is priced at the offer's on-demand rate.
* **flex_start**: the request waits in a queue (mean `wait_h`, coefficient of variation `wait_cv`, the
  capacity wait's law), then every node starts at once and runs, billed by use at the discounted rate, for at
  most `run_cap_h`. The wait is wall time before the job, not billed.

None of them is preempted. P(deadline) is P(start + ε·T ≤ D and ε·T ≤ cap), the start a fixed delay plus the
queue's wait: read off the job's own wall-time law at the deadlines each wait leaves (`p_met`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.economics.candidate import wait_phases

KINDS = ("reserved", "capacity_block", "flex_start")

WAIT_POINTS = 256
"""Quantile midpoints per exponential phase of the queue's wait: P(deadline) is their average, within ~1e-5 of
the integral where the law is smooth (a midpoint rule on the probability scale)."""


@dataclass(frozen=True)
class Terms:
    """How one purchase option bills a job and when the job can start and must end."""

    kind: str
    term_h: float = math.inf  # hours each node is paid for at once (inf: billed by use)
    renewable: bool = False  # a job longer than the term pays another (reserved)
    start_h: float = 0.0  # fixed hours from the plan's start until the nodes are there
    wait_h: float = 0.0  # mean queue wait before they are (flex_start)
    wait_cv: float = 1.0
    run_cap_h: float = math.inf  # longest the job may run there
    overrun_usd_per_node_h: float = 0.0  # what runs past a block's usable hours costs

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"purchase kind must be one of {KINDS}, got {self.kind!r}")
        if self.wait_cv < 1:
            raise ValueError("wait_cv must be >= 1")

    @property
    def by_term(self) -> bool:
        return math.isfinite(self.term_h)


def p_met(law, D: float, error, terms: Terms) -> float:
    """P(start + ε·T ≤ D and ε·T ≤ cap) over the law of T (`wall_time.WallLaw`) and the start's."""

    def met(budget: float) -> float:
        return law.p_met(budget, error) if budget > 0 else 0.0

    cap = terms.run_cap_h
    if not terms.wait_h:
        return met(min(D - terms.start_h, cap))
    u = (np.arange(WAIT_POINTS) + 0.5) / WAIT_POINTS
    total = 0.0
    for share, mean in wait_phases(terms.wait_h, terms.wait_cv):
        waits = -mean * np.log1p(-u)
        total += (
            share
            * math.fsum(met(min(D - terms.start_h - w, cap)) for w in waits)
            / WAIT_POINTS
        )
    return min(1.0, total)


def term_billing(law, nodes: int, terms: Terms) -> tuple[float, float]:
    """(node-hours paid at the option's rate, node-hours run on demand past a block) in expectation, over the
    law of T on the estimate."""
    if not terms.by_term:
        raise ValueError("term_billing is for options paid by the term")
    if terms.renewable:
        terms_paid, k = 1.0, 1
        while True:  # E[max(1, ⌈T/term⌉)] = 1 + Σ_{k≥1} P(T > k·term)
            beyond = 1.0 - law.p_le(k * terms.term_h)
            if beyond < 1e-12 or k > 100_000:
                break
            terms_paid += beyond
            k += 1
        return nodes * terms.term_h * terms_paid, 0.0
    return nodes * terms.term_h, nodes * expected_overrun(law, terms.run_cap_h)


def expected_overrun(law, cap_h: float) -> float:
    """E[(T − cap)⁺]: ∫_cap^∞ P(T > t) dt, on the law's own support."""
    p = law.plan
    if not math.isfinite(cap_h):
        return 0.0
    if p.lam == 0 or not law.finite:
        return max(p.T0 - cap_h, 0.0) if law.finite else math.inf
    top = p.T0 + law.z_max
    if cap_h >= top:
        return 0.0
    t = np.linspace(max(cap_h, 0.0), top, 4001)
    tail = np.array([1.0 - law.p_le(x) for x in t])
    return float(np.sum((tail[1:] + tail[:-1]) * np.diff(t)) / 2)


def draw_start(rng: np.random.Generator, terms: Terms, size: int) -> np.ndarray:
    """`size` starts: the fixed delay plus a queue wait (the capacity wait's two-phase law)."""
    start = np.full(size, terms.start_h)
    if terms.wait_h:
        phases = wait_phases(terms.wait_h, terms.wait_cv)
        means = (
            np.full(size, phases[0][1])
            if len(phases) == 1
            else np.where(rng.random(size) < phases[0][0], phases[0][1], phases[1][1])
        )
        start += rng.exponential(means)
    return start


def billed_draws(
    T: np.ndarray, nodes: int, terms: Terms
) -> tuple[np.ndarray, np.ndarray]:
    """Per drawn wall time: (node-hours paid at the option's rate, node-hours on demand past a block)."""
    if terms.renewable:
        paid = np.maximum(1.0, np.ceil(T / terms.term_h - 1e-9))
        return nodes * terms.term_h * paid, np.zeros_like(T)
    return np.full_like(T, nodes * terms.term_h), nodes * np.maximum(
        T - terms.run_cap_h, 0.0
    )
