"""Memory physics pinned to published reference values (MEMORY-AND-SPEED §6)."""

import pytest

from planner.physics.deepspeed_estimate import (
    deepspeed_zero2_cpu_bytes,
    deepspeed_zero2_gpu_bytes,
    deepspeed_zero3_cpu_bytes,
    deepspeed_zero3_gpu_bytes,
)
from planner.physics.layout import Layout
from planner.physics.memory import (
    FRAMEWORK_OVERHEAD_GIB,
    GIB,
    MemoryBreakdown,
    ModelShape,
    fits,
    stated_memory,
)
from planner.physics.memory_inference import (
    WEIGHT_BYTES_PER_PARAM,
    inference_memory,
    kv_bytes_per_token,
    weight_bytes,
)
from planner.physics.memory_training import (
    NF4_DQ_BYTES_PER_PARAM,
    activation_bytes,
    activation_bytes_per_layer,
    model_state_bytes,
    training_memory,
)

# HF config.json shapes (models.csv)
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
LLAMA1_65B = ModelShape(
    params=65_286_000_000,
    active_params=65_286_000_000,
    layers=80,
    hidden=8192,
    heads=64,
    kv_heads=64,
    head_dim=128,
    ffn=22016,
    vocab=32000,
)
T5_3B, T5_LARGEST = 2851 * 10**6, 32 * 10**6

gib = lambda b: b / GIB  # noqa: E731


# --- R1-R5: DeepSpeed estimators, t5-3b on 1 node x 8 GPUs -----------------


def test_r1_zero2_offload():
    assert gib(
        deepspeed_zero2_gpu_bytes(T5_3B, 8, 1, cpu_offload=True)
    ) == pytest.approx(5.31, abs=0.005)
    assert gib(
        deepspeed_zero2_cpu_bytes(T5_3B, 8, 1, cpu_offload=True)
    ) == pytest.approx(127.45, abs=0.005)


def test_r2_zero2_no_offload_current_code():
    b = deepspeed_zero2_gpu_bytes(T5_3B, 8, 1, cpu_offload=False)
    assert b == 12_116_750_000
    assert gib(b) == pytest.approx(11.28, abs=0.005)
    assert gib(
        deepspeed_zero2_cpu_bytes(T5_3B, 8, 1, cpu_offload=False)
    ) == pytest.approx(127.45, abs=0.005)


def test_r3_zero2_no_offload_legacy_docs():
    assert gib(
        deepspeed_zero2_gpu_bytes(T5_3B, 8, 1, cpu_offload=False, legacy=True)
    ) == pytest.approx(15.93, abs=0.005)


def test_r4_zero3_no_offload():
    kw = dict(offload_optimizer=False, offload_param=False)
    assert gib(
        deepspeed_zero3_gpu_bytes(T5_3B, T5_LARGEST, 8, 1, **kw)
    ) == pytest.approx(6.09, abs=0.005)
    assert gib(
        deepspeed_zero3_cpu_bytes(T5_3B, T5_LARGEST, 8, 1, zero_init=True, **kw)
    ) == pytest.approx(1.43, abs=0.005)
    assert gib(
        deepspeed_zero3_cpu_bytes(T5_3B, T5_LARGEST, 8, 1, zero_init=False, **kw)
    ) == pytest.approx(127.45, abs=0.005)


def test_r5_zero3_offload_param_and_optimizer():
    assert gib(
        deepspeed_zero3_gpu_bytes(T5_3B, T5_LARGEST, 8, 1, True, True)
    ) == pytest.approx(0.12, abs=0.005)
    assert gib(
        deepspeed_zero3_cpu_bytes(T5_3B, T5_LARGEST, 8, 1, True, True)
    ) == pytest.approx(71.69, abs=0.005)
    # offload optimizer only (memory.rst table)
    assert gib(
        deepspeed_zero3_gpu_bytes(T5_3B, T5_LARGEST, 8, 1, True, False)
    ) == pytest.approx(0.78, abs=0.005)
    assert gib(
        deepspeed_zero3_cpu_bytes(T5_3B, T5_LARGEST, 8, 1, True, False)
    ) == pytest.approx(63.72, abs=0.005)


def test_zero3_param_offload_without_optimizer_offload_is_rejected():
    with pytest.raises(ValueError):
        deepspeed_zero3_gpu_bytes(
            T5_3B, T5_LARGEST, 8, 1, offload_optimizer=False, offload_param=True
        )


# --- R6-R7: ZeRO paper and 16 B/param ------------------------------------


@pytest.mark.parametrize(
    "sharding,expected_gb",
    [("none", 120.0), ("zero1", 31.4), ("zero2", 16.6), ("zero3", 1.9)],
)
def test_r6_zero_paper_7_5b_n64(sharding, expected_gb):
    total = sum(model_state_bytes(7.5e9, sharding=sharding, dp_degree=64)) / 1e9
    assert total == pytest.approx(expected_gb, abs=0.05)


def test_r7_full_finetune_16_bytes_per_param():
    assert sum(model_state_bytes(7e9)) == pytest.approx(112e9)
    b = training_memory(LLAMA2_7B, gpus=1, seq_len=512)
    states = b.weights + b.gradients + b.optimizer
    assert states * GIB == pytest.approx(16 * LLAMA2_7B.params)
    assert states * GIB / 1e9 == pytest.approx(107.8, abs=0.05)
    assert states == pytest.approx(100.4, abs=0.05)


@pytest.mark.parametrize(
    "precision,optimizer,bpp",
    [
        ("fp32", "adamw", 16),
        ("bf16", "adamw_8bit", 10),
        ("bf16", "sgd", 12),
        ("fp16", "adamw", 16),
        ("fp8", "adamw", 17),
    ],
)
def test_bytes_per_param_by_recipe(precision, optimizer, bpp):
    assert sum(
        model_state_bytes(1e9, precision=precision, optimizer=optimizer)
    ) == pytest.approx(bpp * 1e9)


def test_7b_full_finetune_needs_sharding_on_80gb():
    alone = training_memory(LLAMA2_7B, gpus=1, gpus_per_node=1, seq_len=4096)
    assert not fits(alone, 80)
    z3 = training_memory(
        LLAMA2_7B, layout=Layout(zero="zero3"), gpus=8, gpus_per_node=8, seq_len=4096
    )
    assert fits(z3, 80)


def test_zero3_over_8_divides_model_states_by_about_8():
    full = training_memory(LLAMA2_7B, gpus=8, gpus_per_node=8)
    z3 = training_memory(
        LLAMA2_7B, layout=Layout(zero="zero3"), gpus=8, gpus_per_node=8
    )
    states = lambda b: b.weights + b.gradients + b.optimizer  # noqa: E731
    ratio = states(full) / states(z3)
    assert 7.0 < ratio <= 8.0  # live params of the largest unit keep it under 8
    assert z3.activations == full.activations


def test_zero_stages_are_monotone_and_hybrid_shards_inside_node():
    kw = dict(gpus=16, gpus_per_node=8, seq_len=2048)
    totals = [
        training_memory(LLAMA2_7B, layout=Layout(zero=s), **kw).total
        for s in ("none", "zero1", "zero2", "zero3")
    ]
    assert totals == sorted(totals, reverse=True)
    hybrid = training_memory(LLAMA2_7B, layout=Layout(zero="hybrid"), **kw)
    z3 = training_memory(LLAMA2_7B, layout=Layout(zero="zero3"), **kw)
    assert z3.total < hybrid.total < totals[2]


def test_tensor_parallel_divides_states_and_must_fit_in_node():
    t1 = training_memory(LLAMA2_7B, gpus=8, gpus_per_node=8)
    t4 = training_memory(LLAMA2_7B, layout=Layout(tp=4), gpus=8, gpus_per_node=8)
    assert t4.weights == pytest.approx(t1.weights / 4)
    assert t4.activations < t1.activations
    with pytest.raises(ValueError):
        training_memory(LLAMA2_7B, layout=Layout(tp=16), gpus=16, gpus_per_node=8)
    with pytest.raises(ValueError):
        training_memory(LLAMA2_7B, layout=Layout(tp=4), gpus=6, gpus_per_node=8)


# --- R16: QLoRA ------------------------------------------------------------


def test_r16_nf4_double_quant_bytes():
    assert NF4_DQ_BYTES_PER_PARAM == pytest.approx(0.516, abs=0.001)
    assert 65.2e9 * NF4_DQ_BYTES_PER_PARAM / 1e9 == pytest.approx(33.6, abs=0.1)


@pytest.mark.parametrize("shape", [LLAMA1_65B, LLAMA2_70B])
def test_r16_qlora_65_70b_fits_one_48gb_gpu_at_short_sequence(shape):
    b = training_memory(
        shape,
        layout=Layout(micro_batch=1, recompute="full"),
        method="qlora",
        seq_len=512,
    )
    assert fits(b, 48)
    lora = training_memory(
        shape, layout=Layout(recompute="full"), method="lora", seq_len=512
    )
    assert not fits(lora, 80)
    full = training_memory(shape, layout=Layout(recompute="full"), seq_len=512)
    assert full.total > 10 * b.total


def test_lora_adapters_are_small_and_cost_16_bytes():
    b = training_memory(LLAMA2_7B, method="lora", seq_len=512)
    assert b.weights == pytest.approx(LLAMA2_7B.params * 2 / GIB, rel=0.02)
    assert b.gradients * 4 == pytest.approx(b.optimizer * 2)  # 4 B grad vs 8 B Adam
    assert b.optimizer < 0.01 * b.weights * 4


# --- R17-R18: activations --------------------------------------------------


def test_r17_gpt3_activations_no_recompute():
    b = activation_bytes_per_layer(
        seq_len=2048,
        micro_batch=1,
        hidden=12288,
        heads=96,
        recompute="none",
        flash_attention=False,
    )
    assert b == pytest.approx(2.869e9, rel=1e-3)


@pytest.mark.parametrize(
    "recompute,flash,expected_gib",
    [
        ("none", False, 97.0),
        ("selective", False, 17.0),
        ("none", True, 17.0),
        ("full", False, 1.0),
    ],
)
def test_r18_llama2_7b_activation_sizes(recompute, flash, expected_gib):
    per_layer = activation_bytes_per_layer(
        seq_len=4096,
        micro_batch=1,
        hidden=4096,
        heads=32,
        recompute=recompute,
        flash_attention=flash,
    )
    assert 32 * per_layer / GIB == pytest.approx(expected_gib, rel=0.01)


def test_activation_order_and_swiglu_shape():
    acts = [
        activation_bytes(LLAMA2_7B, seq_len=4096, micro_batch=1, recompute=r)
        for r in ("none", "selective", "full")
    ]
    assert acts[0] == acts[1] > acts[2]  # flash attention: no s^2 term
    no_flash = activation_bytes(
        LLAMA2_7B, seq_len=4096, micro_batch=1, recompute="none", flash_attention=False
    )
    assert no_flash > 5 * acts[0]


# --- Inference: R11-R15 ----------------------------------------------------


def test_r11_llama2_70b_weight_bytes():
    assert LLAMA2_70B.params * WEIGHT_BYTES_PER_PARAM["bf16"] / 1e9 == pytest.approx(
        137.95, abs=0.01
    )
    assert weight_bytes(LLAMA2_70B, "bf16") / GIB == pytest.approx(128.48, abs=0.01)
    assert LLAMA2_70B.params * WEIGHT_BYTES_PER_PARAM["fp8"] / 1e9 == pytest.approx(
        69.0, abs=0.05
    )
    assert LLAMA2_70B.params * WEIGHT_BYTES_PER_PARAM["int4"] / 1e9 == pytest.approx(
        34.5, abs=0.05
    )
    # quantised formats keep embeddings in bf16 (+ int4 scales): a little above raw
    assert 69.0 < weight_bytes(LLAMA2_70B, "fp8") / 1e9 < 70.5
    assert 34.5 < weight_bytes(LLAMA2_70B, "int4") / 1e9 < 38.0


def test_r12_llama2_70b_kv_cache():
    assert kv_bytes_per_token(LLAMA2_70B, "bf16") == 327_680
    assert kv_bytes_per_token(LLAMA2_70B, "bf16") * 4096 / GIB == pytest.approx(1.25)
    assert kv_bytes_per_token(LLAMA2_70B, "fp8") == 163_840
    # 8 KV heads: split up to t = 8, replicated beyond
    assert kv_bytes_per_token(LLAMA2_70B, "bf16", 8) == 327_680 / 8
    assert kv_bytes_per_token(LLAMA2_70B, "bf16", 16) == 327_680 / 8


def test_r13_llama2_7b_kv_cache():
    assert kv_bytes_per_token(LLAMA2_7B) == 524_288
    assert kv_bytes_per_token(LLAMA2_7B) * 4096 / GIB == pytest.approx(2.0)


def test_r14_llama3_8b_kv_cache():
    assert kv_bytes_per_token(LLAMA3_8B) == 131_072
    m = inference_memory(LLAMA3_8B, batch=1, context_tokens=128 * 1024)
    assert m.kv_cache == pytest.approx(16.0)


def test_r15_llama2_70b_bf16_needs_at_least_two_80gb():
    assert weight_bytes(LLAMA2_70B) / 1e9 > 80
    assert not fits(
        inference_memory(LLAMA2_70B, tensor_parallel=1, batch=1, context_tokens=4096),
        80,
    )
    assert fits(
        inference_memory(LLAMA2_70B, tensor_parallel=2, batch=1, context_tokens=4096),
        80,
    )
    # a realistic serving batch wants 4 x 80 GB (EleutherAI 1.2x rule -> 165.5 GB)
    busy = dict(batch=32, context_tokens=4096)
    assert not fits(inference_memory(LLAMA2_70B, tensor_parallel=2, **busy), 80)
    assert fits(inference_memory(LLAMA2_70B, tensor_parallel=4, **busy), 80)
    assert fits(inference_memory(LLAMA2_70B, tensor_parallel=2, batch=8), 141)  # H200


def test_moe_keeps_total_params_resident():
    moe = ModelShape(
        params=46_702_792_704,
        active_params=12_879_925_248,
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        ffn=14336,
        vocab=32000,
    )
    assert inference_memory(moe).weights == pytest.approx(moe.params * 2 / GIB)


# --- stated memory, fits, breakdown ---------------------------------------


def test_stated_memory():
    fixed = stated_memory(per_gpu_gib=30, overhead_gib=1)
    assert fixed.total == 31
    sharded = stated_memory(model_states_gib=160, activations_gib=10, sharding_gpus=8)
    assert sharded.weights == 20 and sharded.total == 30
    assert (
        stated_memory(model_states_gib=160, shardable=False, sharding_gpus=8).total
        == 160
    )
    with pytest.raises(ValueError):
        stated_memory(per_gpu_gib=1, model_states_gib=2)


def test_fits_rule_and_breakdown_dict():
    b = MemoryBreakdown(weights=50, overhead=FRAMEWORK_OVERHEAD_GIB)
    assert b.as_dict()["total"] == b.total == 50 + FRAMEWORK_OVERHEAD_GIB
    assert fits(MemoryBreakdown(weights=72.0), 80, headroom=0.10)  # 79.2 <= 80
    assert not fits(MemoryBreakdown(weights=73.0), 80, headroom=0.10)  # 80.3 > 80
    assert fits(MemoryBreakdown(weights=80.0), 80, headroom=0.0)


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="sharding"):
        training_memory(LLAMA2_7B, layout=Layout(zero="zero4"))
    with pytest.raises(ValueError, match="method"):
        training_memory(LLAMA2_7B, method="dora")
