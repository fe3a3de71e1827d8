"""Speed physics: published reference values (MEMORY-AND-SPEED §6) and directional effects."""

import pytest

from planner.physics.collectives import (
    DEFAULT_OVERLAP,
    allreduce_seconds,
    bus_bandwidth_gbs,
    scaling_efficiency,
)
from planner.physics.generation import decode_tokens_per_s_bound, generation_time
from planner.physics.gpus import GpuPerf, Topology, default_mfu, effective_precision
from planner.physics.layout import Layout
from planner.physics.memory import ModelShape
from planner.physics.memory_inference import weight_bytes
from planner.physics.speed import reference_scaled_hours, training_time

LLAMA2_7B = ModelShape(
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
LLAMA2_70B = ModelShape(
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
LLAMA3_8B = ModelShape(
    params=8_030_261_248,
    active_params=8_030_261_248,
    layers=32,
    hidden=4096,
    heads=32,
    kv_heads=8,
    head_dim=128,
    ffn=14336,
    vocab=128256,
)

H100 = GpuPerf(
    "H100 SXM",
    "hopper",
    3350,
    {"fp32": 67, "fp16": 989, "bf16": 989, "fp8": 1979, "int8": 1979},
)
A100 = GpuPerf(
    "A100 80GB SXM",
    "ampere",
    2039,
    {"fp32": 19.5, "fp16": 312, "bf16": 312, "int8": 624},
)
A10G = GpuPerf(
    "A10G",
    "ampere",
    600,
    {"fp32": 31.2, "fp16": 125, "bf16": 125, "int8": 250},
    memory_type="gddr",
)
L4 = GpuPerf(
    "L4",
    "ada",
    300,
    {"fp32": 30.3, "fp16": 121, "bf16": 121, "fp8": 242.5, "int8": 242.5},
    memory_type="gddr",
)
V100 = GpuPerf("V100", "volta", 900, {"fp32": 15.7, "fp16": 125})
T4 = GpuPerf(
    "T4", "turing", 320, {"fp32": 8.1, "fp16": 65, "int8": 130}, memory_type="gddr"
)

ONE = Topology(gpus_per_node=1, nodes=1, intra_node="none")
NVLINK8 = Topology(8, 1, "nvlink", 900)
A100_NVLINK8 = Topology(8, 1, "nvlink", 600)
PCIE8 = Topology(8, 1, "pcie")  # PCIe 4.0 x16 default
IB2 = Topology(8, 2, "nvlink", 900, "infiniband", 3200)
ETH2 = Topology(8, 2, "nvlink", 900, "ethernet", 100)


# --- reference values ------------------------------------------------------


def test_r20_decode_bound_llama2_7b_batch1():
    w = weight_bytes(LLAMA2_7B, "bf16")
    assert w / 1e9 == pytest.approx(13.48, abs=0.01)
    assert decode_tokens_per_s_bound(w, 0, 3350) == pytest.approx(249, abs=0.5)
    assert decode_tokens_per_s_bound(w, 0, 2039) == pytest.approx(151, abs=0.5)
    for gpu, bound in ((H100, 249.0), (A100, 151.5)):
        r = generation_time(
            LLAMA2_7B,
            gpu=gpu,
            topology=ONE,
            batch=1,
            prompt_tokens=1,
            output_tokens=1,
            bw_efficiency=1.0,
        )
        assert r.bound == "memory"
        assert 0.95 * bound < r.tokens_per_s <= bound
        # default efficiency (70 % of peak bandwidth) stays under the bound
        assert (
            generation_time(LLAMA2_7B, gpu=gpu, topology=ONE).tokens_per_s
            < 0.75 * bound
        )


def test_r21_ring_allreduce_llama2_7b_grads():
    s = 13.48e9
    assert bus_bandwidth_gbs(NVLINK8) == pytest.approx(360)
    assert allreduce_seconds(s, NVLINK8) == pytest.approx(0.0655, abs=0.0005)
    ideal = Topology(8, 1, "nvlink", 900 / 0.8)  # 450 GB/s busbw
    assert allreduce_seconds(s, ideal) == pytest.approx(0.0524, abs=0.0005)
    assert allreduce_seconds(s, NVLINK8, "zero3") == pytest.approx(
        1.5 * 0.0655, abs=0.001
    )
    assert allreduce_seconds(s, NVLINK8, "zero2") == allreduce_seconds(s, NVLINK8)
    assert allreduce_seconds(s, ONE) == 0.0


# the input embedding is a lookup
LLAMA2_7B_MATMUL = LLAMA2_7B.params - LLAMA2_7B.vocab * LLAMA2_7B.hidden


def test_r22_llama2_7b_pretraining_flops_and_gpu_hours():
    # R22 rounds with 6PD = 8.09e22; the input embedding does no arithmetic, so the step counts 6(P - Vh)D
    r = training_time(
        LLAMA2_7B,
        tokens=2e12,
        gpu=A100,
        topology=A100_NVLINK8,
        mfu=0.39,
        global_batch_tokens=4 * 2**20,
    )
    assert r.flops == pytest.approx(6 * LLAMA2_7B_MATMUL * 2e12, rel=1e-3)
    assert r.flops == pytest.approx(8.09e22, rel=0.025)
    gpu_hours = r.work_h * 8
    assert gpu_hours == pytest.approx(184_320 * 0.98, rel=0.02)
    assert r.scaling_efficiency > 0.99


def test_mfu_by_generation_width_and_micro_batch():
    # Fitted to throughput runs (docs/recipes.md): A100 above H100 against their own peaks (LLM Foundry's
    # MPT-7B on 8 GPUs: 64 % and 46 % MFU), narrow models below wide ones, short micro-batches below long ones.
    assert default_mfu("ampere", "bf16") > default_mfu("hopper", "bf16") + 0.05
    assert 0.55 < default_mfu("ampere", "bf16", hidden=4096) < 0.70
    assert 0.40 < default_mfu("hopper", "bf16", hidden=4096) < 0.55
    assert default_mfu("ampere", "bf16", hidden=768) < 0.72 * default_mfu(
        "ampere", "bf16", hidden=4096
    )
    assert default_mfu("hopper", "bf16", micro_batch_tokens=512) < 0.7 * default_mfu(
        "hopper", "bf16", micro_batch_tokens=65536
    )
    assert default_mfu("hopper", "fp8") * 1979 > default_mfu("hopper", "bf16") * 989


# --- precision ------------------------------------------------------------


def test_effective_precision():
    assert effective_precision(H100, "fp8") == "fp8"
    assert effective_precision(A100, "fp8") is None
    assert effective_precision(A100, "fp8", fallback_to_bf16=True) == "bf16"
    assert effective_precision(V100, "bf16") == "fp16"
    assert effective_precision(T4, "bf16") == "fp16"
    assert effective_precision(V100, "fp8", fallback_to_bf16=True) == "fp16"
    with pytest.raises(ValueError):
        training_time(LLAMA2_7B, tokens=1e9, gpu=A100, topology=ONE, precision="fp8")
    r = training_time(
        LLAMA2_7B,
        tokens=1e9,
        gpu=A100,
        topology=ONE,
        precision="fp8",
        fallback_to_bf16=True,
    )
    assert r.precision == "bf16"


def test_fp8_is_faster_than_bf16_on_h100():
    kw = dict(tokens=1e10, gpu=H100, topology=NVLINK8)
    assert (
        training_time(LLAMA2_7B, precision="fp8", **kw).work_h
        < training_time(LLAMA2_7B, precision="bf16", **kw).work_h
    )


# --- directional effects ---------------------------------------------------


def test_gpu_ordering_on_same_job():
    h = [
        training_time(LLAMA2_7B, tokens=1e9, gpu=g, topology=ONE).work_h
        for g in (H100, A100, A10G)
    ]
    assert h[0] < h[1] < h[2]
    mfu = {
        g.name: default_mfu(
            g.generation, "bf16", micro_batch_tokens=2048, hidden=LLAMA2_7B.hidden
        )
        for g in (H100, A100)
    }
    assert h[1] / h[0] == pytest.approx(
        (989 * mfu[H100.name]) / (312 * mfu[A100.name]), rel=1e-6
    )


def test_pcie_scales_worse_than_nvlink():
    kw = dict(tokens=1e10, gpu=H100, global_batch_tokens=2**18)
    nv = training_time(LLAMA2_7B, topology=NVLINK8, **kw)
    pc = training_time(LLAMA2_7B, topology=PCIE8, **kw)
    assert pc.scaling_efficiency < nv.scaling_efficiency - 0.05
    assert pc.work_h > 1.05 * nv.work_h
    one = training_time(LLAMA2_7B, topology=ONE, **kw)
    assert nv.work_h * 8 < one.work_h * 1.05


def test_ethernet_scales_worse_than_infiniband():
    # a fine-tune's step: little compute to hide behind
    kw = dict(tokens=1e10, gpu=H100, global_batch_tokens=2**18)
    ib = training_time(LLAMA2_7B, topology=IB2, **kw)
    eth = training_time(LLAMA2_7B, topology=ETH2, **kw)
    assert eth.scaling_efficiency < 0.5 < 0.9 < ib.scaling_efficiency
    assert eth.work_h > 2 * ib.work_h
    # the same bit rate over RDMA beats TCP
    efa = Topology(8, 2, "nvlink", 900, "efa", 100)
    assert training_time(LLAMA2_7B, topology=efa, **kw).work_h < eth.work_h


def test_zero3_and_small_batches_cost_more_communication():
    kw = dict(tokens=1e10, gpu=H100, topology=IB2)
    base = training_time(LLAMA2_7B, **kw)
    assert (
        training_time(LLAMA2_7B, layout=Layout(zero="zero3"), **kw).scaling_efficiency
        < base.scaling_efficiency
    )
    assert (
        training_time(LLAMA2_7B, global_batch_tokens=2**16, **kw).scaling_efficiency
        < base.scaling_efficiency
    )
    assert training_time(
        LLAMA2_7B, overlap=1.0, **kw
    ).scaling_efficiency == pytest.approx(1.0)


def test_scaling_efficiency_formula():
    assert scaling_efficiency(10, 4) == pytest.approx(
        10 / (10 + (1 - DEFAULT_OVERLAP) * 4)
    )
    assert scaling_efficiency(10, 4, overlap=0.0) == pytest.approx(10 / 14)
    assert scaling_efficiency(10, 4, overlap=1.0) == 1.0
    assert scaling_efficiency(10, 0, unoverlapped_s=10) == 0.5


def test_recompute_and_lora_flops():
    kw = dict(tokens=1e9, gpu=H100, topology=ONE)
    full = training_time(LLAMA2_7B, **kw)
    assert full.flops == pytest.approx(6 * LLAMA2_7B_MATMUL * 1e9)
    assert training_time(
        LLAMA2_7B, layout=Layout(recompute="full"), **kw
    ).flops == pytest.approx(8 * LLAMA2_7B_MATMUL * 1e9)
    lora = training_time(LLAMA2_7B, method="lora", **kw)
    assert lora.flops == pytest.approx(4 * LLAMA2_7B_MATMUL * 1e9)
    qlora = training_time(LLAMA2_7B, method="qlora", **kw)
    # torchtune's 8B LoRA and QLoRA on one RTX 4090
    assert qlora.flops == pytest.approx(lora.flops * 3083 / 2413)
    # a plain parameter count is taken as the parameters a token multiplies
    assert training_time(float(LLAMA2_7B_MATMUL), **kw).flops == pytest.approx(
        full.flops
    )


def test_tensor_parallel_adds_communication():
    kw = dict(tokens=1e10, gpu=H100, topology=NVLINK8)
    t1 = training_time(LLAMA2_70B, **kw)
    t8 = training_time(LLAMA2_70B, layout=Layout(tp=8), **kw)
    assert t8.scaling_efficiency < 1.0
    assert t8.work_h > t1.work_h * 0.99
    with pytest.raises(ValueError):
        training_time(LLAMA2_70B, layout=Layout(tp=3), **kw)


# --- generation -----------------------------------------------------------


@pytest.mark.parametrize("gpu", [L4, A10G])
def test_decode_on_gddr_card_is_bandwidth_bound(gpu):
    for batch in (1, 8):
        r = generation_time(
            LLAMA3_8B,
            gpu=gpu,
            topology=ONE,
            batch=batch,
            prompt_tokens=512,
            output_tokens=256,
            sequences=100,
        )
        assert r.bound == "memory"
    one = generation_time(
        LLAMA2_7B,
        gpu=gpu,
        topology=ONE,
        batch=1,
        prompt_tokens=1,
        output_tokens=1,
        bw_efficiency=1.0,
    )
    assert one.tokens_per_s <= decode_tokens_per_s_bound(
        weight_bytes(LLAMA2_7B), 0, gpu.mem_bandwidth_gbs
    )


def test_batching_raises_throughput_until_compute_bound():
    rates = [
        generation_time(
            LLAMA2_7B,
            gpu=H100,
            topology=ONE,
            batch=b,
            prompt_tokens=1,
            output_tokens=64,
            sequences=1024,
        ).tokens_per_s
        for b in (1, 8, 64)
    ]
    assert rates[0] < rates[1] < rates[2]
    big = generation_time(
        LLAMA2_7B,
        gpu=H100,
        topology=ONE,
        batch=1024,
        prompt_tokens=1,
        output_tokens=64,
        sequences=1024,
        kv_precision="fp8",
    )
    assert big.bound in ("compute", "memory")


def test_replicas_and_tensor_parallel():
    kw = dict(
        gpu=H100,
        topology=NVLINK8,
        batch=32,
        prompt_tokens=512,
        output_tokens=256,
        sequences=10_000,
    )
    replicas = generation_time(LLAMA2_7B, tensor_parallel=1, **kw)
    tp8 = generation_time(LLAMA2_7B, tensor_parallel=8, **kw)
    single = generation_time(
        LLAMA2_7B,
        gpu=H100,
        topology=ONE,
        batch=32,
        prompt_tokens=512,
        output_tokens=256,
        sequences=10_000,
    )
    assert replicas.work_h == pytest.approx(single.work_h / 8)
    assert replicas.work_h < tp8.work_h
    assert replicas.tokens_per_s_per_gpu == pytest.approx(single.tokens_per_s)
    # 70B needs t >= 2 on 80 GB; more GPUs in the group make each step faster
    t2 = generation_time(
        LLAMA2_70B,
        tensor_parallel=2,
        **{**kw, "topology": Topology(2, 1, "nvlink", 900)},
    )
    t4 = generation_time(
        LLAMA2_70B,
        tensor_parallel=4,
        **{**kw, "topology": Topology(4, 1, "nvlink", 900)},
    )
    assert t4.work_h < t2.work_h


def test_quantised_weights_decode_faster_at_small_batch():
    kw = dict(
        gpu=A100,
        topology=ONE,
        batch=1,
        prompt_tokens=128,
        output_tokens=256,
        sequences=10,
    )
    bf16 = generation_time(LLAMA2_7B, **kw)
    int4 = generation_time(LLAMA2_7B, weight_precision="int4", **kw)
    assert int4.precision == "bf16"  # weight-only on A100
    assert int4.tokens_per_s > 2.5 * bf16.tokens_per_s


# --- reference benchmarks --------------------------------------------------


def test_reference_scaled_hours():
    h = reference_scaled_hours(100, A100, H100, 1, "bf16", 1.0)
    assert h == pytest.approx(
        100 * (312 * default_mfu("ampere")) / (989 * default_mfu("hopper"))
    )
    assert reference_scaled_hours(100, A100, A100, 4, "bf16", 0.8) == pytest.approx(
        100 / 4 / 0.8
    )
    assert reference_scaled_hours(100, A100, A10G, 1) > 100
    with pytest.raises(ValueError):
        reference_scaled_hours(100, H100, A100, 1, "fp8", 1.0)
    assert (
        reference_scaled_hours(100, H100, A100, 1, "fp8", 1.0, fallback_to_bf16=True)
        > 100
    )


def test_topology_validation():
    with pytest.raises(ValueError):
        Topology(8, 1, "nvswitch")
    with pytest.raises(ValueError):
        # no inter-node link given
        allreduce_seconds(1e9, Topology(8, 2, "nvlink", 900))
    with pytest.raises(ValueError):
        GpuPerf("X", "kepler", 100, {})


def test_a_gpu_with_its_own_published_runs_keeps_its_own_efficiency():
    # the RTX 4090 sustains GeForce's half-rate peak (torchtune, Answer.AI); L4 and L40S keep Ada's figure
    assert default_mfu("ada", gpu_name="RTX4090") == pytest.approx(0.75)
    assert (
        default_mfu("ada", gpu_name="L40S") == default_mfu("ada") == pytest.approx(0.5)
    )
