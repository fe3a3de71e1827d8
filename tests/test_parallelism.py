"""The step model and the layout search: pipeline bubble, accumulation, ZeRO traffic, experts, pins."""

import dataclasses
import math

import pytest

from planner.physics import memory as mem
from planner.physics import parallelism as par
from planner.physics.collectives import collective_seconds
from planner.physics.gpus import GpuPerf, Topology
from planner.physics.layout import Layout
from planner.physics.memory_inference import (
    inference_memory,
    kv_batch_that_fits,
    serving_need_gib,
)
from planner.physics.memory_training import lora_params, params_per_gpu, training_memory
from planner.physics.speed import training_time

H100 = GpuPerf(
    "H100", "hopper", 3350, {"fp32": 67, "bf16": 989, "fp16": 989, "fp8": 1979}
)
LLAMA2_70B = mem.ModelShape(
    params=68_976_648_192,
    active_params=68_976_648_192,
    layers=80,
    hidden=8192,
    heads=64,
    kv_heads=8,
    head_dim=128,
    ffn=28672,
    vocab=32000,
)
# Mixtral 8x7B: 8 experts of width 14336 in 32 layers, 2 per token.
MIXTRAL = mem.ModelShape(
    params=46_702_792_704,
    active_params=12_879_925_248,
    layers=32,
    hidden=4096,
    heads=32,
    kv_heads=8,
    head_dim=128,
    ffn=14336,
    vocab=32000,
    experts=8,
    experts_per_token=2,
    expert_params=45_097_156_608,
)
IB = dict(
    intra_node="nvlink",
    intra_node_gbs=900,
    inter_node="infiniband",
    inter_node_gbps=3200,
)


def test_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1():
    topo = Topology(8, 4, **IB)
    kw = dict(
        tokens=1e9,
        gpu=H100,
        topology=topo,
        overlap=1.0,
        seq_len=4096,
        mfu=0.5,
    )
    # one sequence per micro-batch: m = 4 micro-batches per step on one replica
    g = 4 * 4096
    flat = training_time(
        LLAMA2_70B, layout=Layout(tp=8, pp=4), global_batch_tokens=g, **kw
    )
    deep = training_time(
        LLAMA2_70B, layout=Layout(tp=8, pp=4), global_batch_tokens=64 * g, **kw
    )
    # m = 4 -> (4 + 3) micro-batch times for 4 micro-batches; m = 256 -> 259 for 256
    assert flat.work_h / deep.work_h == pytest.approx((7 / 4) / (259 / 256), rel=0.02)
    interleaved = training_time(
        LLAMA2_70B,
        layout=Layout(tp=8, pp=4, virtual_stages=2),
        global_batch_tokens=g,
        **kw,
    )
    assert interleaved.work_h / flat.work_h == pytest.approx((4 + 1.5) / 7, rel=0.03)


def test_gradients_reduce_once_per_step_so_accumulation_hides_them():
    topo = Topology(8, 2, "nvlink", 900, "ethernet", 100)
    kw = dict(tokens=1e9, gpu=H100, topology=topo, seq_len=4096)
    small = training_time(
        LLAMA2_70B, layout=Layout(zero="zero1"), global_batch_tokens=2**16, **kw
    )
    large = training_time(
        LLAMA2_70B, layout=Layout(zero="zero1"), global_batch_tokens=2**24, **kw
    )
    assert small.scaling_efficiency < 0.5 < 0.9 < large.scaling_efficiency
    # ZeRO-3 gathers parameters every micro-step: accumulation cannot hide it
    zero3 = training_time(
        LLAMA2_70B, layout=Layout(zero="zero3"), global_batch_tokens=2**24, **kw
    )
    assert zero3.work_h > 1.5 * large.work_h


def test_hierarchical_all_reduce_crosses_the_network_with_a_1_over_g_share():
    topo = Topology(8, 4, "nvlink", 900, "infiniband", 3200)
    s = 1e9
    intra = 2 * 7 / 8 * s / (450 * 0.80 * 1e9)
    inter = 2 * 3 / 4 * (s / 8) / (3200 / 8 / 8 * 0.85 * 1e9)
    latency = 2 * 7 * 8e-6 + 2 * math.log2(4) * 5e-6
    assert collective_seconds(s, 32, 8, topo, 2.0) == pytest.approx(
        intra + inter + latency, rel=1e-3
    )
    # one rank per node (tensor parallelism fills the node): the whole message crosses the NIC
    assert collective_seconds(s, 4, 1, topo, 2.0) > 3 * collective_seconds(
        s, 32, 8, topo, 2.0
    )


def test_experts_divide_memory_over_ep_and_cost_all_to_all_time():
    one = training_memory(MIXTRAL, layout=Layout(zero="zero1"), gpus=8, gpus_per_node=8)
    ep8 = training_memory(
        MIXTRAL, layout=Layout(zero="zero1", ep=8), gpus=8, gpus_per_node=8
    )
    dense, experts = params_per_gpu(MIXTRAL, 1, 1, 8)
    assert experts == pytest.approx(MIXTRAL.expert_params / 8)
    assert ep8.weights == pytest.approx((dense + experts) * 2 / mem.GIB)
    # expert optimizer state is sharded over DP / EP = 1 replica only
    assert ep8.total < one.total / 2
    topo = Topology(8, 2, **IB)
    kw = dict(tokens=1e9, gpu=H100, topology=topo, seq_len=4096, overlap=1.0, mfu=0.5)
    assert (
        training_time(MIXTRAL, layout=Layout(ep=16), **kw).work_h
        > training_time(MIXTRAL, **kw).work_h
    )
    # FLOPs follow the active parameters
    assert training_time(MIXTRAL, **kw).flops < 0.4 * 6 * MIXTRAL.params * 1e9
    with pytest.raises(ValueError):
        training_memory(LLAMA2_70B, layout=Layout(ep=2), gpus=8, gpus_per_node=8)


def test_layout_labels_round_trip():
    layout = Layout(
        tp=8,
        pp=16,
        dp=64,
        ep=4,
        zero="zero1",
        recompute="full",
        micro_batch=2,
        sequence_parallel=True,
        virtual_stages=2,
    )
    assert layout.label == "TP8 PP16 VPP2 DP64 EP4 zero1 SP full mb2"
    assert Layout.parse(layout.label) == layout
    assert Layout.parse(Layout().label) == Layout()
    cp = Layout(
        tp=8, pp=16, dp=8, zero="zero1", sequence_parallel=True, virtual_stages=4, cp=16
    )
    assert (
        cp.label == "TP8 CP16 PP16 VPP4 DP8 zero1 SP selective mb1" and cp.gpus == 16384
    )
    assert Layout.parse(cp.label) == cp


def test_context_parallelism_splits_each_sequence_and_shards_over_dp_times_cp():
    kw = dict(
        gpus=64,
        gpus_per_node=8,
        seq_len=131072,
    )
    base = Layout(tp=8, zero="zero1", recompute="full")
    on_cp = dataclasses.replace(base, cp=8)
    plain = training_memory(LLAMA2_70B, layout=base, **kw)
    split = training_memory(LLAMA2_70B, layout=on_cp, **kw)
    assert split.activations == pytest.approx(plain.activations / 8, rel=1e-9)
    # the same parameters on DP x CP = 8 GPUs: ZeRO-1 shards the optimizer over all of them
    assert split.weights == pytest.approx(plain.weights)
    # DP8 x CP1 and DP1 x CP8
    assert split.optimizer == pytest.approx(plain.optimizer, rel=1e-9)
    # DP1 x CP1: nothing to shard over
    alone = training_memory(LLAMA2_70B, layout=base, **{**kw, "gpus": 8})
    assert alone.optimizer == pytest.approx(8 * split.optimizer, rel=1e-9)
    with pytest.raises(ValueError):
        training_memory(LLAMA2_70B, layout=dataclasses.replace(base, cp=3), **kw)
    # time: with CP one replica runs 8x fewer of its tokens per GPU, so the step needs 8x fewer replicas
    # for the same batch, and at 128K tokens the KV ring hides behind the attention it feeds
    topo = Topology(8, 8, **IB)
    t_kw = dict(
        tokens=1e9,
        gpu=H100,
        topology=topo,
        seq_len=131072,
        global_batch_tokens=16 * 2**20,
        mfu=0.5,
    )
    ring = training_time(LLAMA2_70B, layout=on_cp, **t_kw)
    dp_only = training_time(LLAMA2_70B, layout=base, **t_kw)
    assert ring.work_h == pytest.approx(dp_only.work_h, rel=0.05)
    # on a slow network the ring shows: it crosses nodes once t*c exceeds a node
    slow = Topology(8, 8, "nvlink", 900, "ethernet", 25)
    assert (
        training_time(LLAMA2_70B, layout=on_cp, **{**t_kw, "topology": slow}).work_h
        > 1.2
        * training_time(LLAMA2_70B, layout=base, **{**t_kw, "topology": slow}).work_h
    )


def test_context_parallelism_is_searched_only_for_long_sequences_unless_pinned():
    short = par.Job(shape=LLAMA2_70B, seq_len=8192)
    long = par.Job(shape=LLAMA2_70B, seq_len=131072)

    def cps(job, pinned=par.Pinned()):
        return {
            layout.cp for group in par.layouts(job, 64, 8, pinned) for layout in group
        }

    assert cps(short) == {1}
    assert cps(long) == {1, 2, 4, 8, 16, 32}
    assert cps(short, par.Pinned(cp=4)) == {4}


def test_search_picks_a_fitting_layout_and_honours_pins():
    job = par.Job(shape=LLAMA2_70B, seq_len=4096, global_batch_tokens=4 * 2**20)
    topo = Topology(8, 8, **IB)
    choice, reason = par.best_layout(job, H100, topo, 80.0, 0.10)
    assert (
        not reason and mem.fits(choice.memory, 80.0, 0.10) and choice.layout.gpus == 64
    )
    # no fitting layout is faster: every alternative the generator offers is slower or does not fit
    for group in par.layouts(job, 64, 8, par.Pinned()):
        for layout in group:
            try:
                memory = par.layout_memory(job, layout, 8)
                if mem.fits(memory, 80.0, 0.10):
                    assert par.layout_speed(
                        job, layout, H100, topo
                    ).work_h * 3600 / 1e9 >= choice.seconds_per_token * (1 - 1e-9)
            except ValueError:
                pass
    pinned, _ = par.best_layout(
        job, H100, topo, 80.0, 0.10, par.Pinned(tp=2, zero="zero3")
    )
    assert pinned.layout.tp == 2 and pinned.layout.zero == "zero3"
    again, _ = par.best_layout.__wrapped__(job, H100, topo, 80.0, 0.10)
    assert again == choice
    nothing, why = par.best_layout(job, H100, Topology(8, 1, "nvlink", 900), 24.0, 0.10)
    assert nothing.seconds_per_token == math.inf and "needs" in why


def test_qlora_recipe_pages_the_optimizer_and_keeps_bf16_adapters():
    llama65 = mem.ModelShape(
        params=65_200_000_000,
        active_params=65_200_000_000,
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=64,
        head_dim=128,
        ffn=22016,
        vocab=32000,
    )
    m = training_memory(
        llama65, layout=Layout(recompute="full"), method="qlora", seq_len=512
    )
    assert mem.fits(m, 48.0, 0.10)  # QLoRA paper: 65B on one 48 GB GPU
    unpaged = training_memory(
        llama65,
        layout=Layout(recompute="full"),
        method="qlora",
        seq_len=512,
        paged_optimizer=False,
    )
    assert unpaged.optimizer > m.optimizer
    adapters = lora_params(llama65, 16)
    assert unpaged.gradients == pytest.approx(adapters * 2 / mem.GIB)
    assert unpaged.optimizer == pytest.approx(adapters * 8 / mem.GIB)


def test_kv_pool_gets_headroom_once_and_gives_the_batch():
    llama2_7b = mem.ModelShape(
        params=6_738_415_616,
        active_params=6_738_415_616,
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=32,
        head_dim=128,
        ffn=11008,
        vocab=32000,
    )
    # TensorRT-LLM v0.6.1 ran batch 60 of 128 + 2048 tokens on one A100-80GB
    batch = kv_batch_that_fits(
        llama2_7b,
        80.0,
        0.10,
        kv_precision="fp16",
        weight_precision="fp16",
        context_tokens=2176,
        prompt_tokens=128,
    )
    assert batch >= 60
    need = inference_memory(
        llama2_7b,
        weight_precision="fp16",
        kv_precision="fp16",
        batch=batch,
        context_tokens=2176,
        prompt_tokens=128,
    )
    assert serving_need_gib(need, 0.10) <= 80.0 < need.total * 1.10
    assert kv_batch_that_fits(llama2_7b, 12.0, 0.10) == 0
