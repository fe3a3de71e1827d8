"""`speed.training_time`'s step model over many layouts at once: what the layout search orders layouts by.

The layout search (`parallelism.best_layout`) evaluates the scalar model on the few layouts that can win;
this gives it each layout's time within rounding (the same operations on numpy arrays, tested against the
scalar model in tests/test_step_many.py), so it skips the rest without evaluating them. What does not
depend on the GPU model or the network is worked out once per set of layouts (`StepModel`), so each
hardware shape is a few dozen array operations. The formulas and their sources are
`speed.training_time`'s and `collectives`'; change them there and here together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner.physics.collectives import (
    ALLREDUCE_LATENCY_S,
    BUCKET_BYTES,
    NETWORK_LATENCY_S,
    inter_bus_gbs,
    intra_bus_gbs,
)
from planner.physics.gpus import GpuPerf, Topology, default_mfu, effective_precision
from planner.physics.layout import Layout
from planner.physics.memory import ModelShape
from planner.physics.memory_training import NF4_DQ_BYTES_PER_PARAM, lora_params
from planner.physics.speed import (
    DEFAULT_SEQ_LEN,
    default_global_batch_tokens,
    flops_per_token,
)


class _Links:
    """A topology's two links in bytes per second (infinite where it has none: the scalar model raises
    there, and the search skips a layout that needs one whatever its bound) and their latencies."""

    def __init__(self, topology: Topology):
        self.intra = _bandwidth(intra_bus_gbs, topology)
        self.inter = _bandwidth(inter_bus_gbs, topology)
        self.intra_latency = ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6)
        self.inter_latency = NETWORK_LATENCY_S.get(topology.inter_node, 50e-6)


def _bandwidth(read, topology: Topology) -> float:
    try:
        return read(topology) * 1e9
    except ValueError:
        return math.inf


class _Collective:
    """`collectives.collective_seconds` of per-element bytes, ranks and local ranks, split into what the
    links scale: intra / B_intra + inter / B_inter + (hops_intra * a_intra + hops_inter * a_inter) * buckets."""

    def __init__(self, nbytes, ranks, local, factor: float, bucket: float = math.inf):
        nbytes = np.broadcast_to(np.asarray(nbytes, dtype=float), np.shape(ranks))
        g = np.maximum(1, np.minimum(local, ranks))
        nodes = ranks / g
        on = (ranks > 1) & (nbytes > 0)
        self.intra = np.where(on & (g > 1), factor * (g - 1) / g * nbytes, 0.0)
        self.hops_intra = np.where(on & (g > 1), 2 * (g - 1), 0.0)
        self.inter = np.where(
            on & (nodes > 1), factor * (nodes - 1) / nodes * (nbytes / g), 0.0
        )
        self.hops_inter = np.where(
            on & (nodes > 1), 2 * np.log2(np.maximum(nodes, 1.0)), 0.0
        )
        self.buckets = np.maximum(1.0, np.ceil(nbytes / bucket))

    def seconds(self, links: _Links):
        return (
            self.intra / links.intra
            + self.inter / links.inter
            + (
                self.hops_intra * links.intra_latency
                + self.hops_inter * links.inter_latency
            )
            * self.buckets
        )


class StepModel:
    """`speed.training_time(...).work_h` of one job on each of `layouts` (valid layouts of `gpus` GPUs in
    nodes of `gpus_per_node`; the scalar model's checks are not repeated), for any GPU model and network.
    `moe_overlap` and `naive_pipeline` are per layout."""

    def __init__(
        self,
        shape: ModelShape,
        layouts: Sequence[Layout],
        *,
        gpus: int,
        gpus_per_node: int,
        precision: str,
        method: str,
        mfu: float | None,
        kind: str,
        overlap: float | None,
        global_batch_tokens: float | None,
        seq_len: int | None,
        lora_rank: int,
        fallback_to_bf16: bool,
        moe_overlap,
        naive_pipeline,
    ):
        self.shape, self.method, self.precision = shape, method, precision
        self.mfu, self.overlap, self.fallback_to_bf16 = mfu, overlap, fallback_to_bf16
        self._cache: dict = {}  # collectives by bytes per value, built when a network first asks
        per_node = gpus_per_node
        t = np.array([x.tp for x in layouts], dtype=float)
        p = np.array([x.pp for x in layouts], dtype=float)
        e = np.array([x.ep for x in layouts], dtype=float)
        b = np.array([x.micro_batch for x in layouts], dtype=float)
        v = np.array([x.virtual_stages for x in layouts], dtype=float)
        c = np.array([x.cp for x in layouts], dtype=float)
        full = np.array([x.recompute == "full" for x in layouts])
        zero = np.array([x.zero for x in layouts])
        s = int(seq_len or DEFAULT_SEQ_LEN)
        self.t, self.p, self.full = t, p, full

        # default_mfu reads the tokens per micro-batch: one rate per distinct count
        self.micro_tokens, self.micro_of = np.unique(b * s / c, return_inverse=True)

        per_token = np.where(
            full,
            flops_per_token(shape, method, "full", seq_len),
            flops_per_token(shape, method, "selective", seq_len),
        )
        dp = np.floor_divide(gpus, t * p * c)
        G = global_batch_tokens or np.maximum(
            default_global_batch_tokens(kind, 0, 0, s), dp * b * s
        )
        m = np.maximum(1.0, np.ceil(G / (dp * b * s) - 1e-9))
        self.m = m
        self.hours_per_step = 1e9 / (m * dp * b * s) / 3600.0  # over 1e9 tokens
        micro_tokens = b * s
        self.flops = (
            per_token * micro_tokens / (t * p * c)
        )  # one micro-batch on one GPU
        self.backward = np.where(full, 6 / 8, 4 / 6)
        stage_layers = np.ceil(shape.layers / p)
        act_bytes = micro_tokens / c * shape.hidden * 2.0
        msgs = np.where(full, 6.0, 4.0)

        self.ring = None
        if (c > 1).any():
            local = micro_tokens / c
            passes = np.where(full, 4.0, 3.0)
            self.ring = (
                np.where(c > 1, stage_layers * passes * (c - 1), 0.0),
                local
                * 2
                * shape.kv_heads
                * shape.head_dim
                * 2.0
                / t,  # the chunk's bytes
                12.0
                * shape.hidden
                * local
                * local
                / t
                * np.where(full, 4 / 3, 1.0)
                / passes,  # attention FLOPs per pass
                t * c <= per_node,
            )
        self.tensor = _Collective(act_bytes, t, t, 2.0) if (t > 1).any() else None
        self.tensor_times = msgs * stage_layers
        self.experts = None
        if shape.moe and (e > 1).any():
            ranks, local = (
                e,
                np.maximum(1.0, np.minimum(e, np.floor_divide(per_node, t))),
            )
            g = np.maximum(1, np.minimum(local, ranks))
            nbytes = act_bytes * shape.experts_per_token / t
            on = (ranks > 1) & (nbytes > 0) & (e > 1)
            self.experts = (
                np.where(on, msgs * np.ceil(shape.moe_layers / p), 0.0),
                np.where(g > 1, (g - 1) / ranks * nbytes, 0.0),
                np.where(ranks > g, (ranks - g) / ranks * nbytes, 0.0),
                ranks > g,
                np.asarray(moe_overlap, dtype=bool),
            )
        self.send = (
            (np.where(p > 1, 2 * v * act_bytes / t, 0.0), t * p > per_node)
            if (p > 1).any()
            else None
        )
        self.pipeline = np.where(naive_pipeline, m * p, m + (p - 1) / v)

        if method == "full":
            emb_all = min(shape.embedding_params, shape.dense_params)
            emb = np.where(p == 1, emb_all, min(shape.vocab * shape.hidden, emb_all))
            self.dense = (shape.dense_params - emb_all) / (t * p) + emb / t
            self.expert = shape.expert_params / (p * e * t)
        else:
            self.dense = lora_params(shape, lora_rank, 1.0) / (t * p)
            self.expert = np.zeros(len(layouts))
        self.dp, self.c, self.e = dp, c, e
        self.local_dp = np.maximum(
            1.0, np.minimum(dp * c, np.floor_divide(per_node, t))
        )
        self.local_exp = np.maximum(
            1.0, np.minimum(np.floor_divide(dp, e), np.floor_divide(per_node, t * e))
        )
        self.stage2 = zero == "zero2"
        self.once = (zero == "none") | (zero == "zero1")
        self.gathers = ~(self.stage2 | self.once)

    def _gradients(
        self, grad_b: float, factor: float
    ) -> tuple[_Collective, _Collective]:
        key = ("gradients", grad_b, factor)
        if key not in self._cache:
            self._cache[key] = (
                _Collective(
                    self.dense * grad_b,
                    self.dp * self.c,
                    self.local_dp,
                    factor,
                    BUCKET_BYTES,
                ),
                _Collective(
                    self.expert * grad_b,
                    np.floor_divide(self.dp, self.e) * self.c,
                    self.local_exp,
                    factor,
                    BUCKET_BYTES,
                ),
            )
        return self._cache[key]

    def _base_gather(self, bytes_per_param: float) -> _Collective:
        key = ("base", bytes_per_param)
        if key not in self._cache:
            self._cache[key] = _Collective(
                bytes_per_param * self.shape.params / (self.t * self.p),
                self.dp * self.c,
                self.local_dp,
                1.0,
                BUCKET_BYTES,
            )
        return self._cache[key]

    def work_h(self, gpu: GpuPerf, topology: Topology) -> np.ndarray:
        """Hours of each layout over 1e9 tokens on `topology`'s GPUs of `gpu` (NaN where the GPU lacks the
        precision: the scalar model raises)."""
        prec = effective_precision(gpu, self.precision, self.fallback_to_bf16)
        if prec is None:
            return np.full(len(self.t), np.nan)
        links = _Links(topology)
        if self.mfu is None:
            rates = np.array(
                [
                    default_mfu(
                        gpu.generation,
                        prec,
                        gpu_name=gpu.name,
                        micro_batch_tokens=tokens,
                        hidden=self.shape.hidden,
                    )
                    for tokens in self.micro_tokens.tolist()
                ]
            )[self.micro_of]
        else:
            rates = self.mfu
        flops_per_s = gpu.peak(prec) * rates
        compute = self.flops / flops_per_s
        micro = compute
        if self.ring is not None:
            times, chunk, attention, inside = self.ring
            bandwidth = np.where(inside, links.intra, links.inter)
            latency = np.where(inside, links.intra_latency, links.inter_latency)
            micro = micro + times * (
                np.maximum(chunk / bandwidth - attention / flops_per_s, 0.0) + latency
            )
        if self.tensor is not None:
            micro = micro + self.tensor_times * self.tensor.seconds(links)
        if self.experts is not None:
            times, intra, inter, across, hidden = self.experts
            a2a = times * (
                np.maximum(intra / links.intra, inter / links.inter)
                + links.intra_latency
                + np.where(across, links.inter_latency, 0.0)
            )
            micro = micro + np.where(hidden, np.maximum(0.0, a2a - compute), a2a)
        if self.send is not None:
            nbytes, across = self.send
            micro = micro + nbytes / np.where(across, links.inter, links.intra)
        step = self.pipeline * micro

        if self.method == "full":
            grad_b = 4.0 if prec == "fp32" else 2.0
        else:
            grad_b = 2.0 if self.method == "qlora" else 4.0
        buckets = np.maximum(
            1.0, np.ceil((self.dense + self.expert) * grad_b / BUCKET_BYTES)
        )
        overlap = self.overlap

        def exposed(comm, window):
            if overlap is not None:
                return (1.0 - overlap) * comm
            return np.maximum(comm - window, comm / buckets)

        backward = compute * self.backward
        if self.once.any():
            dense, expert = self._gradients(grad_b, 2.0)
            step = step + np.where(
                self.once,
                exposed(dense.seconds(links) + expert.seconds(links), backward),
                0.0,
            )
        if self.stage2.any() or self.gathers.any():
            dense, expert = self._gradients(grad_b, 1.0)
            scatter = dense.seconds(links) + expert.seconds(links)
            if self.stage2.any():
                once = scatter * (1.0 - overlap if overlap is not None else 1.0)
                step = step + np.where(
                    self.stage2, self.m * exposed(scatter, backward) + once, 0.0
                )
            if self.gathers.any():
                if self.method == "full":
                    gathered = exposed(3.0 * scatter, micro)
                else:  # the frozen base gathered as stored for every pass over it
                    stored = (
                        NF4_DQ_BYTES_PER_PARAM
                        if self.method == "qlora"
                        else (4.0 if prec == "fp32" else 2.0)
                    )
                    gather = np.where(self.full, 3.0, 2.0) * self._base_gather(
                        stored
                    ).seconds(links)
                    gathered = exposed(gather + scatter, micro)
                step = step + np.where(self.gathers, self.m * gathered, 0.0)
        return step * self.hours_per_step
