"""The step model over many layouts (`step_many`) against the scalar one, and the layout search that orders by
it against trying every layout."""

import math
import random

import pytest
from test_parallelism import H100, LLAMA2_70B, MIXTRAL
from test_speed import LLAMA3_8B

from planner.physics import memory as mem
from planner.physics import parallelism as par
from planner.physics.gpus import GpuPerf, Topology

A100 = GpuPerf("A100", "ampere", 2039, {"fp32": 19.5, "bf16": 312, "fp16": 312})


NETWORKS = (
    dict(
        intra_node="nvlink",
        intra_node_gbs=900,
        inter_node="infiniband",
        inter_node_gbps=3200,
    ),
    dict(
        intra_node="pcie", intra_node_gbs=64, inter_node="ethernet", inter_node_gbps=100
    ),
    dict(
        intra_node="nvlink", intra_node_gbs=600, inter_node="efa", inter_node_gbps=400
    ),
    dict(intra_node="nvlink", intra_node_gbs=900),  # one node only
)


def _draw(rng: random.Random) -> tuple[par.Job, GpuPerf, Topology]:
    shape = rng.choice((LLAMA3_8B, LLAMA2_70B, MIXTRAL))
    method = rng.choice(("full", "lora", "qlora"))
    job = par.Job(
        shape=shape,
        method=method,
        precision=rng.choice(("bf16", "bf16", "fp8", "fp32")),
        seq_len=rng.choice((2048, 4096, 32768, 65536)),
        global_batch_tokens=rng.choice((None, 2**20, 4 * 2**20)),
        kind=rng.choice(("pretrain", method if method != "full" else "finetune")),
        mfu=rng.choice((None, None, 0.4)),
        overlap=rng.choice((None, None, 0.5)),
        lora_rank=rng.choice((8, 16, 64)),
        fallback_to_bf16=rng.random() < 0.5,
    )
    network = rng.choice(NETWORKS)
    per_node = rng.choice((1, 2, 4, 8))
    nodes = 1 if "inter_node" not in network else rng.choice((1, 2, 4, 16))
    return job, rng.choice((A100, H100)), Topology(nodes, per_node, **network)


def test_the_step_model_over_many_layouts_is_the_scalar_one_within_rounding():
    rng = random.Random(7)
    compared = 0
    for _ in range(60):
        job, gpu, topology = _draw(rng)
        layouts = [
            layout
            for group in par.layouts(
                job, topology.n_gpus, topology.gpus_per_node, par.Pinned()
            )
            for layout in group
        ]
        if not layouts:
            continue
        model = par.step_model(job, layouts, topology.n_gpus, topology.gpus_per_node)
        many = model.work_h(gpu, topology)
        for layout, hours in zip(layouts, many.tolist()):
            try:
                scalar = par.layout_speed(job, layout, gpu, topology).work_h
            except ValueError:
                assert (
                    math.isnan(hours) or hours >= 0
                )  # the search skips it whatever it reads
                continue
            assert hours == pytest.approx(scalar, rel=1e-12), layout.label
            compared += 1
    assert (
        compared > 5000
    )  # many layouts of every kind of job were held to the scalar model


def _every_layout(job, gpu, topology, vram, headroom, efficiency=()):
    """The search's answer by trying every layout: the least (time / recipe factor, memory, label) that fits."""
    factors = dict(efficiency)
    best = None
    for group in par.layouts(
        job, topology.n_gpus, topology.gpus_per_node, par.Pinned()
    ):
        for layout in group:
            try:
                memory = par.layout_memory(job, layout, topology.gpus_per_node)
                if not mem.fits(memory, vram, headroom):
                    continue
                hours = par.layout_speed(job, layout, gpu, topology).work_h
            except ValueError:
                continue
            key = (
                hours / factors.get(layout.recipe, factors.get("*", 1.0)),
                memory.total,
                layout.label,
            )
            best = key if best is None or key < best else best
    return best


def test_the_search_finds_what_trying_every_layout_finds():
    rng = random.Random(11)
    found = 0
    for _ in range(40):
        job, gpu, topology = _draw(rng)
        vram = rng.choice((24.0, 40.0, 80.0))
        efficiency = rng.choice(
            ((), (("deepspeed", 1.3),), (("*", 0.8), ("megatron", 1.1)))
        )
        choice, why = par.best_layout(
            job, gpu, topology, vram, 0.1, par.Pinned(), efficiency
        )
        expected = _every_layout(job, gpu, topology, vram, 0.1, efficiency)
        if expected is None:
            assert choice is None or choice.seconds_per_token == math.inf, why
            continue
        assert choice is not None and choice.layout.label == expected[2]
        found += 1
    assert found > 10
