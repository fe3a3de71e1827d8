"""Serving capacity of one model replica, in closed form from the step model of continuous batching.

A replica is `tp` GPUs of one model inside one node, running continuous batching as vLLM does
(`batching.default_scheduler`): every step carries one token of each running sequence and the prompts
that arrived during the step before, up to the token budget, and costs the roofline of `batching.StepCost`.
For a request size (prompt tokens I, output tokens O) and Poisson arrivals at λ requests/s:

- **steps** carry the j prompts that arrived during the step before (a Markov chain on j: j' ~ Poisson(λ·L(j)),
  with L(j) the step carrying j prompts beside the decodes); its stationary law gives the mean step, which
  is the time per output token (TPOT). A prompt longer than the budget runs in chunks, a share of steps
  carrying a full budget of prompt tokens;
- **the decodes** are 1 + λ·TPOT·(O − 1) sequences (Little's law, the tagged request itself included), with
  their KV context; the step, the chain and the decode batch are a fixed point;
- **time to first token**: a request waits out the step it lands in (length-biased, its remainder uniform),
  then the next step carries it and everyone who arrived during that step; its law is the mixture over the
  chain, and TTFT at the SLO's quantile is read off it. With chunks: the prompts ahead of it, served as an
  M/D/1 queue of chunk steps, and its own chunks;
- every sequence's KV cache must fit at full context (`max_batch`), and at most the scheduler's sequences run.

The largest λ meeting the TTFT quantile, the mean TPOT target and the KV budget is the replica's capacity at
that size (a bisection). It agrees with the step-by-step replay (`batching.simulate`, held against published
servers in benchmarks/serving_published.py) within 0.75-1.3x on TTFT at p90 (1.6x for prompts longer than the
budget at light load) and 0.9-1.1x on TPOT, from a fifth to nine tenths of what a replica carries
(tests/test_batching.py); at the very edge of the KV cache the replay's queue for a free slot is longer. Measured capacities (`measured:` in the workload) replace all of
this for the sizes they cover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from planner.physics import batching
from planner.physics import memory as mem
from planner.physics.gpus import GpuPerf, Topology
from planner.physics.memory_inference import kv_batch_that_fits

MAX_BATCH = 4096
"""Concurrent sequences per replica considered at most (vLLM's max_num_seqs is 256-1024)."""


@dataclass(frozen=True)
class Latency:
    """A replica's steady state at one request rate."""

    requests_per_s: float
    ttft_s: float  # at the quantile asked for
    tpot_s: float  # mean time per output token
    batch: float  # mean concurrent sequences
    prefill_share: float  # ρ: share of GPU time in prefill


@dataclass(frozen=True)
class Capacity:
    """The most requests per second one replica serves within the SLO, and what limits it."""

    max_requests_per_s: float
    limit: str  # "tpot" | "ttft" | "kv_cache" | "sequences" (the scheduler's cap) | "throughput" (the steps grow
    # without bound) | "prefill" | "measured"
    # | the reason it cannot serve at all
    max_batch: int  # sequences of full context whose KV cache fits
    at_max: Latency | None = None

    @property
    def serves(self) -> bool:
        return self.max_requests_per_s > 0


@dataclass(frozen=True)
class Replica:
    """Everything the capacity depends on: model shape, GPU, tensor-parallel degree, precisions, VRAM."""

    model: mem.ModelShape
    gpu: GpuPerf
    tp: int
    vram_gib: float
    intra_node: str = "nvlink"
    intra_node_gbs: float | None = None
    weight_precision: str = "bf16"
    kv_precision: str = "bf16"
    headroom: float = mem.DEFAULT_HEADROOM

    def topology(self) -> Topology:
        return Topology(
            gpus_per_node=self.tp,
            nodes=1,
            intra_node=self.intra_node if self.tp > 1 else "none",
            intra_node_gbs=self.intra_node_gbs,
        )


@lru_cache(maxsize=16384)
def max_batch(replica: Replica, prompt: int, output: int) -> int:
    """Sequences of full context (prompt + output) whose KV cache fits beside the weights; 0: not one."""
    return kv_batch_that_fits(
        replica.model,
        replica.vram_gib,
        replica.headroom,
        weight_precision=replica.weight_precision,
        kv_precision=replica.kv_precision,
        context_tokens=prompt + output,
        tensor_parallel=replica.tp,
        prompt_tokens=prompt,
        most=MAX_BATCH,
    )


STEP_MOST_S = 600.0
"""A mean step longer than this is a replica that does not keep up (the fixed point has run away)."""
CHAIN_MAX = 256
"""Prompts per step the chain follows at most (it follows the mean prompts per step and eight standard
deviations more): a law with mass beyond is a replica past what it serves."""


def latency(
    replica: Replica,
    prompt: int,
    output: int,
    rate: float,
    quantile: float | None = 0.9,
) -> Latency | None:
    """TTFT (at `quantile`; the mean when None), mean TPOT and mean decode batch at `rate` requests/s; None when
    the replica is overloaded (the steps grow without bound)."""
    scheduler = batching.default_scheduler(replica.gpu.name, replica.vram_gib)
    rate = float(rate)
    steady = _steady(
        batching.step_cost(replica), scheduler, prompt, output, rate, quantile
    )
    if steady is None:
        return None
    seats = min(max_batch(replica, prompt, output), scheduler.max_seqs)
    seated = (
        _seat_wait(rate, steady.batch / rate, seats, quantile)
        if seats > 0
        else math.inf
    )
    return replace(steady, ttft_s=steady.ttft_s + seated)


@lru_cache(maxsize=65536)
def _steady(
    cost: batching.StepCost,
    scheduler: batching.Scheduler,
    prompt: int,
    output: int,
    rate: float,
    quantile: float | None,
) -> Latency | None:
    """`latency` but for the wait for a free sequence slot: kept without the replica's seats, so that replicas
    alike but for their memory (an H100 of 80 or 79.65 GiB) share it."""
    flops = cost.prompt_flops(0, prompt)

    def again(step: float) -> _Steps | None:
        return _steps(cost, scheduler, prompt, output, rate, flops, step)

    # the mean step is a fixed point: it sets the decode batch, which sets the steps (secant on step - mean)
    before = float(cost.seconds(1, prompt, 0, 0.0))
    first = again(before)
    if first is None:
        return None
    gap_before, step, last, secant = first.mean - before, first.mean, first, False
    for _ in range(100):
        state = again(step)
        if state is None and secant:
            # the secant jumped past the steady states (a decode batch no chain keeps up with) where the
            # plain iteration would not: take the plain iteration's step instead
            step, secant = last.mean, False
            state = again(step)
        if state is None or step > STEP_MOST_S:
            return None
        gap = state.mean - step
        if abs(gap) <= 1e-7 * step:
            break
        slope = (gap - gap_before) / (step - before) if step != before else 0.0
        before, gap_before, last = step, gap, state
        # a secant step where the gap falls with the step (a stable fixed point), else the plain iteration
        secant = slope < -1e-12
        step = step - gap / slope if secant else state.mean
        step = max(step, 1e-9)
    else:
        return None
    return Latency(
        rate,
        _ttft(state, rate, quantile),
        state.mean,
        state.decodes,
        state.prefill_share,
    )


@dataclass(frozen=True)
class _Steps:
    """The stationary steps at one rate: what TTFT is read from."""

    mean: float  # mean step: TPOT
    decodes: float
    prefill_share: float
    # L(j), one prompt per step: the step carrying j prompts
    lengths: np.ndarray | None = None
    law: np.ndarray | None = None  # stationary P(j)
    chunks: int = 1
    full: float = 0.0  # chunked: a step carrying a full budget of prompt tokens
    # chunked: how long one prompt's chunks hold the prompts behind it
    queue_s: float = 0.0


def _steps(
    cost, scheduler, prompt: int, output: int, rate: float, flops: float, step: float
) -> _Steps | None:
    """The steps' stationary law given a mean step (which sets the decode batch): one round of the fixed point."""
    decodes = 1 + rate * step * (output - 1)
    context = decodes * (prompt + output / 2)
    budget = scheduler.token_budget - decodes
    if budget <= 0:
        return None
    chunks = math.ceil(prompt / budget) if scheduler.chunked else 1
    if chunks > 1:  # a share f of the steps carries a full budget of prompt tokens
        full = cost.seconds(decodes, context, budget, budget * flops / prompt)
        alone = cost.seconds(decodes, context, 0, 0.0)
        share = rate * step * prompt / budget
        if share >= 1:
            return None
        held = prompt / budget * full
        return _Steps(
            share * full + (1 - share) * alone,
            decodes,
            rate * held,
            chunks=chunks,
            full=full,
            queue_s=held,
        )
    idle = cost.seconds(decodes, context, 0, 0.0)
    # what one more prompt adds to a step at most: the first may hide under a memory-bound step, the rest each
    # add their compute
    rho = rate * max(
        cost.seconds(decodes, context, prompt, flops) - idle,
        cost.most_per_prompt(prompt, flops),
    )
    if rho >= 1:
        return None  # the prompts alone outrun the steps
    most = _followed(rate * idle, rho)
    # a law whose tail still holds mass where it is cut is followed twice as far
    while True:
        counts = np.arange(most + 1, dtype=float)
        lengths = cost.seconds(decodes, context, counts * prompt, counts * flops)
        law = _stationary(rate * lengths, most)
        if law is not None or most >= CHAIN_MAX:
            break
        most = min(CHAIN_MAX, 2 * most)
    if law is None:
        return None
    mean = float(law @ lengths)
    return _Steps(
        mean, decodes, float(law @ (lengths - lengths[0])) / mean, lengths, law
    )


def _followed(arrivals: float, rho: float) -> int:
    """Prompts per step the chain j -> Poisson(arrivals + rho j) is followed to (`CHAIN_MAX` at most): its mean
    where arrivals keep up, arrivals / (1 - rho), and eight spreads beyond. Its variance is the mean over
    1 - rho^2, far above a Poisson's where each prompt's compute nearly fills the step it lands in: followed only
    a Poisson's spread, its tail was cut where it still held mass, and steps between steady ones were called
    overloaded."""
    reach = arrivals / (1 - rho)
    spread = math.sqrt((reach + 1) / (1 - rho * rho))
    return int(min(CHAIN_MAX, math.ceil(reach + 8 * spread + 8)))


@lru_cache(maxsize=1024)
def _counts(most: int) -> tuple[np.ndarray, np.ndarray]:
    """k = 0..most and log k!, read-only (`_poisson` reads them thousands of times per plan)."""
    k = np.arange(most + 1)
    log_factorial = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, most + 1)))))
    k.flags.writeable = log_factorial.flags.writeable = False
    return k, log_factorial


def _poisson(means: np.ndarray, most: int) -> np.ndarray:
    """P(k arrivals) for k = 0..most per row's mean, the tail folded into `most`."""
    k, log_factorial = _counts(most)
    with np.errstate(divide="ignore"):
        logs = (
            k[None, :] * np.log(means[:, None])
            - means[:, None]
            - log_factorial[None, :]
        )
    pmf = np.exp(logs)
    pmf[:, -1] += np.maximum(1 - pmf.sum(axis=1), 0.0)
    return pmf


def _stationary(means: np.ndarray, most: int) -> np.ndarray | None:
    """The chain j -> Poisson(means[j])'s stationary law; None when its mass runs to the end (no steady state)."""
    moves = _poisson(means, most)
    a = moves.T.copy()
    a.flat[:: most + 2] -= 1.0  # less the identity
    a[-1, :] = 1.0
    rhs = np.zeros(most + 1)
    rhs[-1] = 1.0
    try:
        law = np.linalg.solve(a, rhs)
    except np.linalg.LinAlgError:
        return None
    law = np.maximum(law, 0.0)
    law /= law.sum()
    if law[-max(1, most // 8) :].sum() > 1e-6:
        return None
    return law


def _ttft(state: _Steps, rate: float, quantile: float | None) -> float:
    """Time to first token at `quantile` (mean when None), from the steps' law."""
    if (
        state.chunks > 1
    ):  # the prompts ahead, an M/D/1 queue of budget-full steps, then its own chunks
        own = (
            state.chunks * state.full
            + (quantile if quantile is not None else 0.5) * state.mean
        )
        return own + _md1_wait(rate, state.queue_s, quantile)
    lengths, law = state.lengths, state.law
    # the step a request lands in: length-biased
    landed = law * lengths / float(law @ lengths)
    # [landed step, arrivals beside it]
    others = _poisson(rate * lengths, len(lengths) - 1)
    carried = lengths[
        np.minimum(np.arange(len(lengths)) + 1, len(lengths) - 1)
    ]  # the next step, with itself
    if quantile is None:
        return float(landed @ (lengths / 2) + landed @ (others @ carried))
    weight = landed[:, None] * others

    def below(t: float) -> float:
        return float(
            # np.minimum/np.maximum: np.clip's wrapper costs more than the arithmetic on these small arrays
            (
                weight
                * np.minimum(
                    np.maximum((t - carried[None, :]) / lengths[:, None], 0.0), 1.0
                )
            ).sum()
        )

    low, high = 0.0, float(lengths[-1] + carried[-1])
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if below(mid) < quantile else (low, mid)
        if high - low <= 1e-4 * high:
            break
    return high


def _seat_wait(
    rate: float, holding_s: float, seats: int, quantile: float | None
) -> float:
    """Waiting for a free sequence slot (the KV cache or the scheduler's cap), each request holding one for
    `holding_s`: Erlang C with `seats` servers, its mean (quantile None) or its exponential tail at `quantile`.
    Negligible until the running sequences near the seats, and what dominates time to first token there."""
    offered = rate * holding_s
    if offered >= seats:
        return math.inf
    if offered < 0.5 * seats:
        return 0.0
    blocking = 1.0  # Erlang B by its recursion, then C
    for k in range(1, seats + 1):
        blocking = offered * blocking / (k + offered * blocking)
    waits = blocking / (1 - offered / seats * (1 - blocking))
    drain = seats / holding_s - rate
    if quantile is None:
        return waits / drain
    return math.log(waits / (1 - quantile)) / drain if waits > 1 - quantile else 0.0


def _md1_wait(rate: float, service: float, quantile: float | None) -> float:
    """Waiting in an M/D/1 queue: the mean (quantile None), or the exponential tail P(W > t) ~ rho·e^(-θt) with
    θ the root of λ(e^(θS) − 1) = θ."""
    rho = rate * service
    if rho >= 1:
        return math.inf
    if quantile is None:
        return rho * service / (2 * (1 - rho))
    if rho <= 1 - quantile:
        return 0.0
    low, high = 1e-12 / service, 50.0 / service
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (
            (mid, high) if rate * math.expm1(mid * service) < mid else (low, mid)
        )
    return math.log(rho / (1 - quantile)) / low


def capacity(
    replica: Replica,
    prompt: int,
    output: int,
    ttft_s: float,
    tpot_s: float,
    quantile: float = 0.9,
) -> Capacity:
    """The largest request rate one replica serves within the SLO at one request size. Its chains' linear solves
    run on one BLAS thread: OpenBLAS spreads a solve of a few dozen states over every core, whose threads then
    spin, and on two cores the search took twice the CPU for no less time."""
    with _blas().limit(limits=1, user_api="blas"):
        return _capacity(replica, prompt, output, ttft_s, tpot_s, quantile)


@lru_cache(maxsize=1)
def _blas():
    # reading the loaded libraries takes milliseconds: once
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _capacity(
    replica: Replica,
    prompt: int,
    output: int,
    ttft_s: float,
    tpot_s: float,
    quantile: float,
) -> Capacity:
    fits = max_batch(replica, prompt, output)
    if fits < 1:
        return Capacity(0.0, "the weights and one sequence's KV cache do not fit", 0)
    idle = latency(replica, prompt, output, 1e-9, quantile)
    if idle is None or idle.tpot_s > tpot_s:
        return Capacity(0.0, "one decode step is slower than the TPOT target", fits)
    if idle.ttft_s > ttft_s:
        return Capacity(0.0, "one prefill is slower than the TTFT target", fits)

    seqs = batching.default_scheduler(replica.gpu.name, replica.vram_gib).max_seqs
    seats = min(fits, seqs)

    def meets(rate: float) -> tuple[str, float]:
        """Why `rate` is past what the replica serves ('' when it is not), and how far within their targets its
        figures are: the least of target / figure, less 1 (-1 overloaded), which falls about linearly in the
        rate where a latency grows as one over the rate left."""
        at = latency(replica, prompt, output, rate, quantile)
        if at is None:
            return "throughput", -1.0
        within = min(seats / at.batch, tpot_s / at.tpot_s, ttft_s / at.ttft_s) - 1
        if at.batch > seats:
            return ("kv_cache" if fits <= seqs else "sequences"), within
        if at.tpot_s > tpot_s:
            return "tpot", within
        if at.ttft_s > ttft_s:
            return "ttft", within
        return "", within

    cost = batching.step_cost(replica)
    low, high = (
        0.0,
        1.0 / (cost.prompt_flops(0, prompt) * cost.prefill_flop_s),
    )  # the prompts' compute alone
    limit, above = meets(high * (1 - 1e-9))
    limit, above = limit or "prefill", min(above, 0.0)
    below = meets(1e-9)[1]  # idle, within every target
    # regula falsi on how far within the targets (Illinois: an end kept twice has its figure halved), each
    # step at least half the tolerance from either end, and halving where a step did not halve the bracket
    kept, stuck = "", 0
    for _ in range(100):
        if high - low <= 1e-4 * high:
            break
        if stuck < 2 and below > above:
            step = 0.5e-4 * high
            mid = high - above * (high - low) / (above - below)
            mid = min(max(mid, low + step), high - step)
        else:
            mid, stuck = (low + high) / 2, 0
        reason, within = meets(mid)
        width = high - low
        if reason:
            high, above, limit = mid, within, reason
            below = below / 2 if kept == "low" else below
            kept = "low"
        else:
            low, below = mid, within
            above = above / 2 if kept == "high" else above
            kept = "high"
        stuck = stuck + 1 if high - low > width / 2 else 0
    return Capacity(
        low,
        limit,
        fits,
        latency(replica, prompt, output, low, quantile) if low > 0 else None,
    )
