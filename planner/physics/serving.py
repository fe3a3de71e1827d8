"""Serving capacity of one model replica, from first principles.

A replica is `tp` GPUs of one model inside one node, running continuous batching. For a
request size (prompt tokens, output tokens) and a request rate λ:

- prefill of one prompt takes S (compute-bound; `speed.generation_time` at batch 1), and the
  GPUs spend a share ρ = λ·S of their time on prefills;
- decode steps run in the rest, so the time per output token is step(B) / (1 − ρ), where
  step(B) is one decode step of the mean batch B (`speed.generation_time`: weights and KV
  streamed from HBM, or compute, plus TP all-reduces);
- a prompt waits for the prefill server: M/D/1 for the mean, the M/M/1 tail for the SLO's
  quantile (an upper bound on the deterministic server's);
- the mean batch follows Little's law, B = λ·(TTFT + output · TPOT), a fixed point;
- B must fit the KV cache at the full context (prompt + output) of every sequence.

The largest λ meeting the TTFT quantile, the TPOT target and the KV budget is the replica's
capacity at that size (a bisection: every figure above grows with λ). Measured capacities
(`measured:` in the workload) replace all of this for the sizes they cover.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from planner.physics import memory as mem
from planner.physics import speed

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
    limit: str  # "tpot" | "ttft" | "kv_cache" | "throughput" (decode cannot keep up) | "prefill" | "measured"
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
    gpu: speed.GpuPerf
    tp: int
    vram_gib: float
    intra_node: str = "nvlink"
    intra_node_gbs: float | None = None
    weight_precision: str = "bf16"
    kv_precision: str = "bf16"
    headroom: float = mem.DEFAULT_HEADROOM

    def topology(self) -> speed.Topology:
        return speed.Topology(gpus_per_node=self.tp, nodes=1,
                              intra_node=self.intra_node if self.tp > 1 else "none",
                              intra_node_gbs=self.intra_node_gbs)


@lru_cache(maxsize=65536)
def _generation(replica: Replica, batch: int, prompt: int, output: int) -> speed.SpeedResult:
    return speed.generation_time(replica.model, gpu=replica.gpu, topology=replica.topology(),
                                 weight_precision=replica.weight_precision, kv_precision=replica.kv_precision,
                                 batch=batch, prompt_tokens=prompt, output_tokens=output, tensor_parallel=replica.tp)


def decode_step_s(replica: Replica, batch: float, prompt: int, output: int) -> float:
    """One decode step of a mean batch (linear between whole batches: every term is linear in the batch)."""
    low = max(1, math.floor(batch))
    step_low = _generation(replica, low, prompt, output).decode_step_s
    if batch <= low:
        return step_low
    step_high = _generation(replica, low + 1, prompt, output).decode_step_s
    return step_low + (batch - low) * (step_high - step_low)


def prefill_s(replica: Replica, prompt: int, output: int) -> float:
    """Prefill of one prompt (compute-bound)."""
    return _generation(replica, 1, prompt, output).prefill_s


@lru_cache(maxsize=16384)
def max_batch(replica: Replica, prompt: int, output: int) -> int:
    """Sequences of full context (prompt + output) whose KV cache fits beside the weights; 0: not one."""
    return mem.kv_batch_that_fits(replica.model, replica.vram_gib, replica.headroom,
                                  weight_precision=replica.weight_precision, kv_precision=replica.kv_precision,
                                  context_tokens=prompt + output, tensor_parallel=replica.tp, prompt_tokens=prompt,
                                  most=MAX_BATCH)


def _wait_s(rho: float, service_s: float, quantile: float | None) -> float:
    """Queueing before prefill: the M/D/1 mean (quantile None), or the M/M/1 tail at `quantile`."""
    if quantile is None:
        return rho * service_s / (2 * (1 - rho))
    if rho <= 1 - quantile:
        return 0.0
    return service_s / (1 - rho) * math.log(rho / (1 - quantile))


def latency(replica: Replica, prompt: int, output: int, rate: float, quantile: float | None = 0.9) -> Latency | None:
    """TTFT (at `quantile`; the mean when None), TPOT and mean batch at `rate` requests/s; None when the
    replica is overloaded."""
    service = prefill_s(replica, prompt, output)
    rho = rate * service
    if rho >= 1:
        return None
    ttft_mean = service + _wait_s(rho, service, None)
    batch = max(rate * (ttft_mean + output * decode_step_s(replica, 1, prompt, output) / (1 - rho)), 1e-9)
    for _ in range(200):
        if batch > MAX_BATCH:
            return None
        tpot = decode_step_s(replica, max(batch, 1.0), prompt, output) / (1 - rho)
        again = rate * (ttft_mean + output * tpot)
        if abs(again - batch) <= 1e-9 * max(batch, 1.0):
            batch = again
            break
        batch = again
    else:
        return None  # Little's law has no fixed point: decode cannot keep up
    tpot = decode_step_s(replica, max(batch, 1.0), prompt, output) / (1 - rho)
    ttft = service + _wait_s(rho, service, quantile)
    return Latency(rate, ttft, tpot, batch, rho)


def closed_loop(replica: Replica, prompt: int, output: int, concurrency: int) -> Latency:
    """A benchmark's closed loop: `concurrency` requests always outstanding.

    At most the KV cache's batch B run at once; the rest wait. A running request's cycle is
    E = S + output · step(B) / (1 − ρ) with ρ = B·S/E, a quadratic in E; throughput is B/E,
    and the TTFT includes the wait for a free sequence slot, (C − B)/throughput.
    """
    service = prefill_s(replica, prompt, output)
    running = max(1, min(concurrency, max_batch(replica, prompt, output)))
    step = decode_step_s(replica, running, prompt, output)
    c, d = running * service, output * step
    b = service + c + d  # (E − S)(E − c) = d·E
    cycle = (b + math.sqrt(b * b - 4 * service * c)) / 2
    rate = running / cycle
    return Latency(rate, service + (concurrency - running) / rate, step / (1 - c / cycle), float(running),
                   c / cycle)


def capacity(replica: Replica, prompt: int, output: int, ttft_s: float, tpot_s: float,
             quantile: float = 0.9) -> Capacity:
    """The largest request rate one replica serves within the SLO at one request size."""
    fits = max_batch(replica, prompt, output)
    if fits < 1:
        return Capacity(0.0, "the weights and one sequence's KV cache do not fit", 0)
    idle = latency(replica, prompt, output, 1e-9, quantile)
    if idle is None or idle.tpot_s > tpot_s:
        return Capacity(0.0, "one decode step is slower than the TPOT target", fits)
    if idle.ttft_s > ttft_s:
        return Capacity(0.0, "one prefill is slower than the TTFT target", fits)

    def meets(rate: float) -> str:
        at = latency(replica, prompt, output, rate, quantile)
        if at is None or at.batch > fits:
            return "kv_cache" if at is not None else "throughput"
        if at.tpot_s > tpot_s:
            return "tpot"
        if at.ttft_s > ttft_s:
            return "ttft"
        return ""

    low, high = 0.0, 1.0 / prefill_s(replica, prompt, output)
    limit = meets(high * (1 - 1e-9)) or "prefill"
    for _ in range(60):
        mid = (low + high) / 2
        reason = meets(mid)
        if reason:
            high, limit = mid, reason
        else:
            low = mid
        if high - low <= 1e-6 * high:
            break
    return Capacity(low, limit, fits, latency(replica, prompt, output, low, quantile) if low > 0 else None)
