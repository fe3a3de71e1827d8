"""Continuous batching on one replica, step by step: time to first token and time per output token under
load, as an inference server's scheduler makes them (docs/serving.md).

The closed forms of `serving` treat prefill as a server of its own beside the decode steps. A server that
batches continuously (vLLM, SGLang, TensorRT-LLM's in-flight batching) runs one step at a time instead, and
every step carries one token of each running sequence plus chunks of waiting prompts, up to a token budget:

- **a step** streams the weights once and the running sequences' KV cache, and computes every token in it
  (`StepCost.seconds`: the roofline max of the two, plus the tensor-parallel all-reduces);
- **the scheduler** (vLLM's V1 order) fills a step with the running decodes first, then prompt tokens in
  arrival order up to `Scheduler.token_budget`; it admits a waiting request only while fewer than
  `Scheduler.max_seqs` run and the KV cache holds every admitted sequence at its full context;
- **a request's first token** comes at the end of the step that finishes its prompt; each later step gives
  it one more, and it leaves after its last.

So a prompt waits for the step under way, then behind the prompts ahead of it, and a burst of arrivals, or a
closed loop of equal requests that stays in step, makes long mixed steps that every running sequence waits
through. `simulate` replays this for equal requests (one bucket's size), Poisson arrivals at a rate (an
endpoint's traffic) or a fixed number of clients that each send again when answered (a benchmark's
concurrency). It is deterministic for a seed, and takes milliseconds to a few tenths of a second.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from planner.physics import collectives
from planner.physics.generation import (
    DECODE_BW_EFFICIENCY,
    generation_precision,
    kv_read_efficiency,
)
from planner.physics.gpus import default_mfu
from planner.physics.memory_inference import kv_bytes_per_token, weight_bytes

if TYPE_CHECKING:
    from planner.physics.serving import Replica

__all__ = [
    "Scheduler",
    "StepCost",
    "Served",
    "default_scheduler",
    "step_cost",
    "simulate",
]


@dataclass(frozen=True)
class Scheduler:
    """What a continuous-batching scheduler fits into one step."""

    token_budget: int  # tokens per step, decodes and prompt chunks together (vLLM max_num_batched_tokens)
    max_seqs: int  # sequences running at once (vLLM max_num_seqs)
    chunked: bool = True  # prompts cut to fill a step's budget (vLLM V1); False: whole prompts only, one at
    # least per step (TensorRT-LLM without chunked context)


def default_scheduler(gpu_name: str, vram_gib: float) -> Scheduler:
    """vLLM's defaults for its OpenAI server (engine/arg_utils.py, get_batch_defaults): 8,192 tokens and 1,024
    sequences on GPUs of 70 GiB or more other than the A100, 2,048 and 256 elsewhere."""
    if vram_gib >= 70 and "A100" not in gpu_name:
        return Scheduler(8192, 1024)
    return Scheduler(2048, 256)


@dataclass(frozen=True)
class StepCost:
    """The roofline of one mixed step on a replica, in seconds per unit (from `speed`'s formulas)."""

    weights_s: float  # streaming the weights (dense: once per step)
    moe_share_per_token: (
        float  # MoE: share of the weights one token's experts touch (0: dense)
    )
    kv_s_per_token: float  # streaming one token of KV cache
    flop_s: float  # seconds per FLOP at the decode rate
    prefill_flop_s: float  # seconds per FLOP at the prefill rate
    active_flops_per_token: float  # 2 * P_active
    attention_flops: (
        float  # 2 * L * h: decode 2x this per context token, prefill this per s^2
    )
    allreduce_s: float  # per step: 2 * L all-reduce latencies (0 at TP 1)
    allreduce_s_per_token: float

    def seconds(
        self, decode_seqs: float, context_tokens: float, prompt_tokens, prompt_flops
    ):
        """One step: `decode_seqs` sequences holding `context_tokens` of KV, plus `prompt_tokens` of prompts
        whose FLOPs (attention included) are `prompt_flops`. The prompt arguments may be numpy arrays (one
        step per element): every operation below works on both, so the replay's hot loop stays on floats."""
        tokens = decode_seqs + prompt_tokens
        weights = self.weights_s
        if self.moe_share_per_token:
            touched = self.moe_share_per_token * tokens
            weights *= (1.0 + touched - abs(1.0 - touched)) / 2  # min(1, touched)
        kv = self.kv_s_per_token * context_tokens
        if decode_seqs:
            kv /= kv_read_efficiency(context_tokens / decode_seqs)
        memory = weights + kv
        compute = (
            self.active_flops_per_token * decode_seqs
            + 2 * self.attention_flops * context_tokens
        ) * self.flop_s + prompt_flops * self.prefill_flop_s
        roofline = (
            memory + compute + abs(memory - compute)
        ) / 2  # max(memory, compute)
        return roofline + (tokens > 0) * (
            self.allreduce_s + self.allreduce_s_per_token * tokens
        )

    def most_per_prompt(self, prompt_tokens: int, prompt_flops: float) -> float:
        """The most one more prompt of `prompt_tokens` adds to a step, whatever the step carries: its compute (or,
        MoE, the experts' weights its tokens touch, if more) and its all-reduce. A step of j prompts is at most
        `seconds` of none plus j times this; the first prompt may add far less, hidden under a memory-bound step."""
        experts = self.weights_s * self.moe_share_per_token * prompt_tokens
        return (
            max(prompt_flops * self.prefill_flop_s, experts)
            + self.allreduce_s_per_token * prompt_tokens
        )

    def prompt_flops(self, start: int, end: int) -> float:
        """FLOPs of prompt tokens start..end (`generation.prefill_flops` cut at a chunk boundary)."""
        return self.active_flops_per_token * (end - start) + self.attention_flops * (
            end * end - start * start
        )


@lru_cache(maxsize=4096)
def step_cost(replica: Replica) -> StepCost:
    """A `serving.Replica`'s step roofline, from the same formulas as `generation.generation_time`."""
    shape, gpu, t = replica.model, replica.gpu, replica.tp
    prec = generation_precision(gpu, replica.weight_precision)
    rate = gpu.peak(prec) * default_mfu(
        gpu.generation, prec, hidden=shape.hidden, gpu_name=gpu.name
    )
    bw = gpu.mem_bandwidth_gbs * 1e9 * DECODE_BW_EFFICIENCY
    weights = weight_bytes(shape, replica.weight_precision) / t / bw
    moe = (
        shape.active_params / shape.params
        if shape.params and shape.active_params < shape.params
        else 0.0
    )
    kv = kv_bytes_per_token(shape, replica.kv_precision, t) / bw
    attention = 2.0 * shape.layers * shape.hidden
    active = 2.0 * shape.active_params
    if t > 1:
        topology = replica.topology()
        latency = (
            2
            * shape.layers
            * collectives.ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6)
        )
        per_token = (
            2
            * shape.layers
            * shape.hidden
            * 4.0
            * (t - 1)
            / t
            / (collectives.intra_bus_gbs(topology) * 1e9)
        )
    else:
        latency = per_token = 0.0
    return StepCost(
        weights,
        moe,
        kv,
        1 / (t * rate),
        1 / (t * rate),
        active,
        attention,
        latency,
        per_token,
    )


@dataclass(frozen=True)
class Served:
    """What clients of one replica saw: per-request samples after the warm-up, and the totals."""

    ttft_s: np.ndarray  # arrival to first token
    tpot_s: np.ndarray  # each request's mean time per output token after its first
    output_tokens_per_s: float
    requests_per_s: float
    mean_batch: float  # sequences running per step, mean over time
    saturated: bool  # open loop: the queue grew through the run (the rate is beyond what it serves)

    def ttft(self, quantile: float | None = None) -> float:
        return float(
            np.mean(self.ttft_s)
            if quantile is None
            else np.quantile(self.ttft_s, quantile)
        )

    def tpot(self, quantile: float | None = None) -> float:
        return float(
            np.mean(self.tpot_s)
            if quantile is None
            else np.quantile(self.tpot_s, quantile)
        )


CLIENT_S = 0.002
"""Mean client time between a reply and the next request of a closed loop (exponential): what keeps a
benchmark's equal requests from marching in step."""
REQUESTS, MIN_REQUESTS = 2000, 50
"""Requests measured per run after the warm-up (a tenth as many again), fewer where their steps would pass
half of `MAX_STEPS` (long outputs at low load)."""
MAX_STEPS = 200_000
SATURATED_BACKLOG = 0.05
"""An open loop is past what the replica serves when this share of its requests still wait as the last
arrives: a stable queue stays a few requests long, one past capacity grows with every arrival."""


def simulate(
    replica: Replica,
    prompt: int,
    output: int,
    *,
    rate: float | None = None,
    concurrency: int | None = None,
    together: bool = False,
    scheduler: Scheduler | None = None,
    requests: int | None = None,
    seed: int = 0,
) -> Served:
    """One replica serving equal requests of `prompt` and `output` tokens, at Poisson `rate` requests/s or with
    `concurrency` clients in a closed loop (exactly one of them). Clients drift apart, as a benchmark's do once
    running (their first requests spread over one unloaded request's time, and a few milliseconds of client
    time between a reply and the next request), unless `together`: one batch sent at once and measured
    (vLLM's latency benchmark)."""
    if (rate is None) == (concurrency is None):
        raise ValueError("give rate or concurrency")
    from planner.physics import (
        serving,  # the KV budget is the closed forms' (serving imports this module)
    )

    scheduler = scheduler or default_scheduler(replica.gpu.name, replica.vram_gib)
    fits = serving.max_batch(replica, prompt, output)
    if fits < 1:
        raise ValueError("the weights and one sequence's KV cache do not fit")
    cost = step_cost(replica)
    if together:
        requests = concurrency
    elif requests is None:  # as many as MAX_STEPS / 2 steps hold, REQUESTS at most
        running = min(
            concurrency or max(1.0, rate * output * cost.seconds(1, prompt, 0, 0.0)),
            fits,
        )
        requests = int(
            min(REQUESTS, max(MIN_REQUESTS, MAX_STEPS / 2 * running / output))
        )
    return _simulate(
        cost,
        prompt,
        output,
        rate,
        concurrency,
        together,
        scheduler,
        min(fits, scheduler.max_seqs),
        requests,
        seed,
    )


@lru_cache(maxsize=512)
def _simulate(
    cost: StepCost,
    prompt: int,
    output: int,
    rate: float | None,
    concurrency: int | None,
    together: bool,
    scheduler: Scheduler,
    most: int,
    requests: int,
    seed: int,
) -> Served:
    warmup = 0 if together else requests // 10
    total = warmup + requests
    if rate is not None:
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, total)
        arrivals = deque(np.cumsum(gaps).tolist())
        waiting: deque = deque()
    else:
        rng = np.random.default_rng(seed)
        alone = (
            0.0
            if together
            else (
                cost.seconds(0, 0, prompt, cost.prompt_flops(0, prompt))
                + output * cost.seconds(1, prompt, 0, 0.0)
            )
        )
        arrivals = deque((np.arange(concurrency) * alone / concurrency).tolist())
        waiting = deque()
    # [arrival, prompt tokens done] of admitted requests, in arrival order
    prefilling: deque = deque()
    # [last step, first-token time, count, arrival times]: requests decoding
    cohorts: deque = deque()
    decoding = 0
    context = 0.0  # KV tokens of the decoding sequences
    now, step = 0.0, 0
    ttft, tpot = [], []
    done = 0
    busy_seqs = busy_time = 0.0
    warm_at = None  # when the warm-up's last request left
    backlog = 0  # open loop: requests waiting when the last one arrived
    while done < total and step < MAX_STEPS:
        while arrivals and arrivals[0] <= now:
            waiting.append(arrivals.popleft())
            if rate is not None and not arrivals:
                backlog = len(waiting) + len(prefilling)
        if not (decoding or prefilling or waiting):
            now = arrivals[0]  # idle until the next request
            continue
        budget = scheduler.token_budget - decoding
        while waiting and decoding + len(prefilling) < most:
            prefilling.append([waiting.popleft(), 0])
        chunk_tokens, chunk_flops = 0, 0.0
        for request in prefilling:
            if budget <= 0:
                break
            take = min(prompt - request[1], budget)
            if not scheduler.chunked and take < prompt:
                if chunk_tokens:
                    break
                take = prompt
            chunk_flops += cost.prompt_flops(request[1], request[1] + take)
            request[1] += take
            chunk_tokens += take
            budget -= take
        seconds = cost.seconds(decoding, context, chunk_tokens, chunk_flops)
        now += seconds
        busy_seqs += (decoding + len(prefilling)) * seconds
        busy_time += seconds
        # decodes: one more token each, and the last of theirs ends a cohort
        context += decoding
        while cohorts and cohorts[0][0] == step:
            last, first_time, count, arrived = cohorts.popleft()
            decoding -= count
            context -= count * (prompt + output)
            for a in arrived:
                done += 1
                if done == warmup:
                    warm_at = now
                elif done > warmup:
                    ttft.append(first_time - a)
                    tpot.append((now - first_time) / (output - 1))
            if concurrency is not None and not together:
                arrivals = deque(
                    sorted([*arrivals, *(now + rng.exponential(CLIENT_S, count))])
                )
        while prefilling and prefilling[0][1] >= prompt:
            arrived = []
            while prefilling and prefilling[0][1] >= prompt:
                arrived.append(prefilling.popleft()[0])
            if output <= 1:
                done += len(arrived)
                ttft.extend(now - a for a in arrived)
                tpot.extend(0.0 for _ in arrived)
                if concurrency is not None and not together:
                    arrivals = deque(
                        sorted(
                            [
                                *arrivals,
                                *(now + rng.exponential(CLIENT_S, len(arrived))),
                            ]
                        )
                    )
                continue
            cohorts.append([step + output - 1, now, len(arrived), arrived])
            decoding += len(arrived)
            context += len(arrived) * (prompt + 1)
        step += 1
    if together:
        served = len(tpot) / now
        return Served(
            np.asarray(ttft),
            np.asarray(tpot),
            served * output,
            served,
            busy_seqs / busy_time if busy_time else 0.0,
            False,
        )
    measured = max(now - (warm_at or 0.0), 1e-12)
    served = len(tpot) / measured
    saturated = rate is not None and (
        backlog > SATURATED_BACKLOG * total or done < total
    )
    return Served(
        np.asarray(ttft),
        np.asarray(tpot),
        served * output,
        served,
        busy_seqs / busy_time if busy_time else 0.0,
        saturated,
    )
