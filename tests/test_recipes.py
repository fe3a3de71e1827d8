"""Recipes: the framework decides the layout axes, the ZeRO stages and the memory at the loss; `auto` takes the
fastest that fits and says which."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from planner.load.catalog import load_gpus, load_models
from planner.physics import collectives, parallelism, recipes, speed
from planner.physics import memory as mem
from planner.physics.gpus import Topology
from planner.physics.hardware_shape import gpu_perf, model_shape
from planner.physics.layout import Layout
from planner.physics.memory_training import (
    CHUNKED_LOGIT_BYTES,
    NF4_DQ_BYTES_PER_PARAM,
    UNFUSED_LOGIT_BYTES,
    activation_bytes_per_layer,
    training_memory,
)

GPUS, MODELS = load_gpus(), load_models()
LLAMA_8B = model_shape(MODELS["llama-3.1-8b"])
LLAMA_70B = model_shape(MODELS["llama-3.1-70b"])
A100_40 = gpu_perf(GPUS["A100-40GB"])
RTX4090 = gpu_perf(GPUS["RTX4090"])


def _nvlink(gpus: int) -> Topology:
    return Topology(
        gpus_per_node=gpus,
        intra_node="nvlink" if gpus > 1 else "none",
        intra_node_gbs=600 if gpus > 1 else None,
    )


def _best(job, gpu, gpus, vram, pinned=parallelism.Pinned()):
    return parallelism.best_layout(job, gpu, _nvlink(gpus), vram, 0.10, pinned)


@pytest.mark.parametrize(
    "recipe", ["auto", "hf", "axolotl", "fsdp-qlora", "torchtune", "unsloth"]
)
def test_qlora_is_never_tensor_or_pipeline_parallel_outside_naive_device_map(recipe):
    job = parallelism.Job(
        LLAMA_70B, method="qlora", seq_len=2048, kind="qlora", recipe=recipe
    )
    for gpus in (1, 2, 4, 8):
        for group in parallelism.layouts(job, gpus, 8, parallelism.Pinned()):
            for layout in group:
                assert (
                    layout.tp == 1 and layout.cp == 1 and not layout.sequence_parallel
                )
                assert (
                    layout.pp == 1 or recipes.recipe(layout.recipe).pipeline == "naive"
                )
                assert (
                    layout.zero in recipes.recipe(layout.recipe).zero_stages("qlora")
                    or gpus == 1
                )


def test_70b_qlora_on_8_a100_40gb_is_fsdp_qlora_and_on_one_card_it_does_not_fit():
    job = parallelism.Job(LLAMA_70B, method="qlora", seq_len=2048, kind="qlora")
    choice, reason = _best(job, A100_40, 8, 40.0)
    assert not reason and choice.layout.tp == 1 and choice.layout.zero == "zero3", (
        choice.layout.label
    )
    assert choice.layout.recipe in recipes.AUTO["qlora"]
    one, why = _best(job, A100_40, 1, 40.0)
    assert why.startswith("needs ") and "even as" in why


def test_hf_qlora_spreads_layers_over_the_gpus_of_a_node_one_stage_at_a_time():
    # Accelerate's device_map: 2 stages, no data parallelism, and no faster than one GPU would be
    job = parallelism.Job(
        LLAMA_70B, method="qlora", seq_len=1024, kind="qlora", recipe="hf"
    )
    choice, reason = _best(job, A100_40, 2, 40.0)
    assert not reason and choice.layout.pp == 2 and choice.layout.dp == 1, (
        choice.layout.label
    )
    naive = parallelism.layout_speed(job, choice.layout, A100_40, _nvlink(2))
    staged = speed.training_time(
        LLAMA_70B,
        layout=Layout(
            recompute=choice.layout.recompute,
            pp=2,
            micro_batch=choice.layout.micro_batch,
        ),
        tokens=1e9,
        gpu=A100_40,
        topology=_nvlink(2),
        method="qlora",
        kind="qlora",
        seq_len=1024,
    )
    # a 1F1B pipeline would overlap the stages
    assert naive.work_h > 1.5 * staged.work_h


def test_a_recipe_named_is_the_recipe_run_and_the_label_carries_it():
    job = parallelism.Job(
        LLAMA_8B, method="lora", seq_len=2048, kind="lora", recipe="hf"
    )
    choice, _ = _best(job, RTX4090, 1, 24.0)
    assert choice is None or choice.layout.recipe == "hf"
    auto, _ = _best(replace(job, recipe="auto"), A100_40, 8, 40.0)
    label = auto.layout.label
    assert label.split()[0] == auto.layout.recipe
    assert Layout.parse(label) == auto.layout


def test_8b_lora_fits_a_24gb_card_with_the_recipes_that_never_hold_fp32_logits():
    # torchtune's published 16.2 GiB for Llama 3.1 8B LoRA on one RTX 4090 (batch 2 x 2,048 tokens)
    job = parallelism.Job(
        LLAMA_8B, method="lora", seq_len=2048, kind="lora", recipe="torchtune"
    )
    choice, reason = parallelism.best_layout(
        job,
        RTX4090,
        Topology(1, intra_node="none"),
        24.0,
        0.10,
        parallelism.Pinned(micro_batch=2),
    )
    assert not reason, reason
    hf = parallelism.Job(
        LLAMA_8B, method="lora", seq_len=4096, kind="lora", recipe="hf"
    )
    tt = replace(hf, recipe="torchtune")
    layout = Layout(recompute="full", micro_batch=1)
    need = {
        r.recipe: parallelism.layout_memory(
            r, replace(layout, recipe=r.recipe), 1
        ).activations
        for r in (hf, tt)
    }
    logits_gib = 4096 * LLAMA_8B.vocab / 2**30
    assert need["hf"] - need["torchtune"] == pytest.approx(
        (UNFUSED_LOGIT_BYTES - CHUNKED_LOGIT_BYTES) * logits_gib, rel=1e-6
    )


def test_paged_optimizer_state_is_off_the_gpu_and_offloaded_activations_keep_two_layers():
    kw = dict(method="qlora", seq_len=8192, layout=Layout(recompute="full"))
    paged = training_memory(LLAMA_70B, paged_optimizer=True, **kw)
    resident = training_memory(LLAMA_70B, paged_optimizer=False, **kw)
    assert paged.optimizer == 0.0 < resident.optimizer
    offloaded = training_memory(LLAMA_70B, activation_offload=True, **kw)
    layer_input = (
        activation_bytes_per_layer(
            seq_len=8192,
            micro_batch=1,
            hidden=LLAMA_70B.hidden,
            heads=LLAMA_70B.heads,
            recompute="full",
        )
        / mem.GIB
    )
    assert resident.activations - offloaded.activations == pytest.approx(
        (LLAMA_70B.layers - 2) * layer_input
    )


def test_moe_all_to_all_hides_behind_compute_only_where_the_recipe_overlaps_it():
    mixtral = model_shape(MODELS["mixtral-8x7b"])
    h100 = gpu_perf(GPUS["H100-SXM"])
    topo = Topology(
        gpus_per_node=8,
        nodes=4,
        intra_node="nvlink",
        intra_node_gbs=900,
        inter_node="efa",
        inter_node_gbps=400,
    )
    kw = dict(
        tokens=1e9,
        gpu=h100,
        topology=topo,
        layout=Layout(ep=8, micro_batch=2),
        seq_len=4096,
    )
    exposed = speed.training_time(mixtral, **kw)
    hidden = speed.training_time(mixtral, moe_overlap=True, **kw)
    floor_s = speed.compute_floor_seconds_per_token(
        mixtral,
        layout=Layout(recompute="selective", micro_batch=2),
        gpu=h100,
        n_gpus=32,
        precision="bf16",
        method="full",
        seq_len=4096,
        kind="pretrain",
        micro_batches=1,
    )
    assert hidden.work_h < exposed.work_h
    # never below the compute it hides behind
    assert hidden.work_h * 3600 / 1e9 >= floor_s


def test_the_recipe_shows_in_estimate_and_solve(run, scenario_file):
    path = scenario_file("""\
        name: recipes
        catalogs: [runpod, lambda]
        workloads:
          - name: lora-8b
            kind: fine_tuning
            model: llama-3.1-8b
            method: lora
            sequence_length: 2048
            work: {tokens: 20M}
            gpus: {min: 1, max: 8}
            allow: {gpus: [RTX4090, A100-80GB, H100-SXM]}
        """)
    solved = run("solve", path, "--format", "json")
    assert solved.exit_code == 0, solved.stderr
    plan = json.loads(solved.stdout)
    chosen = plan["assignments"][0]
    # the cheapest card it fits on, as published runs do
    assert chosen["gpu"] == "RTX4090", chosen
    assert chosen["parallelism"]["recipe"] in recipes.AUTO["lora"]
    estimated = run("estimate", path, "--gpu", "RTX4090", "--format", "json")
    rows = json.loads(estimated.stdout)
    assert all(r["recipe"] in recipes.AUTO["lora"] for r in rows if r["fits"])


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            "method: qlora\n    recipe: megatron",
            "recipe megatron runs full, lora, not qlora",
        ),
        (
            "method: full\n    recipe: fsdp-qlora",
            "recipe fsdp-qlora runs lora, qlora, not full",
        ),
        (
            "method: lora\n    recipe: torchtune\n    tensor_parallel: 2",
            "recipe torchtune has no tensor, sequence or context parallelism: tensor_parallel 2 needs recipe megatron or nemo",
        ),
        (
            "method: qlora\n    recipe: unsloth\n    pipeline_parallel: 2",
            "recipe unsloth has no pipeline stages: pipeline_parallel 2 needs recipe megatron, nemo, hf, axolotl",
        ),
        ("method: lora\n    recipe: pytorch", "recipe"),
    ],
)
def test_a_recipe_that_cannot_run_the_job_is_one_line_and_exit_2(
    run, scenario_file, fields, message
):
    path = scenario_file(f"""\
name: bad-recipe
catalogs: [runpod]
workloads:
  - name: job
    kind: fine_tuning
    model: llama-3.1-8b
    {fields}
    work: {{tokens: 1M}}
""")
    result = run("validate", path)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0], lines


def test_fsdp_qlora_gathers_the_frozen_nf4_base_for_every_pass():
    # 4 PCIe cards, one short sequence per micro-batch: the NF4 base (0.52 byte per parameter) crosses PCIe
    # twice per micro-batch (three times with full recomputation) and outlasts the compute it hides behind
    pcie = Topology(gpus_per_node=4, intra_node="pcie", intra_node_gbs=64)
    kw = dict(
        tokens=1e8,
        gpu=RTX4090,
        topology=pcie,
        method="qlora",
        kind="qlora",
        seq_len=256,
    )
    replicated = speed.training_time(LLAMA_70B, layout=Layout(zero="none"), **kw)
    sharded = speed.training_time(LLAMA_70B, layout=Layout(zero="zero3"), **kw)
    recomputed = speed.training_time(
        LLAMA_70B, layout=Layout(zero="zero3", recompute="full"), **kw
    )
    gather_s = collectives.collective_seconds(
        NF4_DQ_BYTES_PER_PARAM * LLAMA_70B.params,
        4,
        4,
        pcie,
        1.0,
        collectives.BUCKET_BYTES,
    )
    micro_batches = 1e8 / 256 / 4
    compute_s = 256 * speed.compute_floor_seconds_per_token(
        LLAMA_70B,
        layout=Layout(recompute="selective", micro_batch=1),
        gpu=RTX4090,
        n_gpus=1,
        precision="bf16",
        method="qlora",
        seq_len=256,
        kind="qlora",
        micro_batches=1,
    )
    exposed_s = (sharded.work_h - replicated.work_h) * 3600 / micro_batches
    # only what outlasts the compute shows
    assert 2 * gather_s - compute_s <= exposed_s <= 2 * gather_s
    assert recomputed.work_h > sharded.work_h


def test_torchtune_full_fine_tune_trains_in_bf16_and_steps_in_the_backward_on_one_gpu():
    # torchtune's Llama 3.1 8B full fine-tune on one RTX 4090 (PagedAdamW8bit, optimizer_in_bwd): 18.9 GiB
    job = parallelism.Job(
        LLAMA_8B,
        method="full",
        seq_len=2048,
        kind="finetune",
        optimizer="adamw_8bit",
        paged_optimizer=True,
        recipe="torchtune",
    )
    choice, reason = parallelism.best_layout(
        job,
        RTX4090,
        Topology(1, intra_node="none"),
        24.0,
        0.10,
        parallelism.Pinned(micro_batch=2),
    )
    assert not reason, reason
    assert choice.memory.gradients < 1.0  # one layer's gradients, not 15 GiB of them
    kw = dict(
        method="full",
        layout=Layout(zero="zero3"),
        gpus=8,
        gpus_per_node=8,
        seq_len=2048,
    )
    mixed = training_memory(LLAMA_70B, **kw)
    pure = training_memory(LLAMA_70B, master_weights=False, **kw)
    # bf16 m and v, no fp32 master copy
    assert pure.optimizer == pytest.approx(mixed.optimizer * 4 / 12)
    held = training_memory(
        LLAMA_70B,
        optimizer_in_backward=True,
        **{**kw, "layout": Layout(), "gpus": 1, "gpus_per_node": 1},
    )
    # the largest unit's, in bf16
    assert held.gradients * mem.GIB < 2.1 * LLAMA_70B.vocab * LLAMA_70B.hidden


def test_the_schema_and_the_physics_agree_on_what_each_recipe_runs():
    from planner.schema.fields import MEGATRON_RECIPES, RECIPE_METHODS, STAGED_RECIPES

    assert set(RECIPE_METHODS) == set(recipes.RECIPES)
    assert {r.name for r in recipes.RECIPES.values() if r.megatron_axes} == set(
        MEGATRON_RECIPES
    )
    assert {r.name for r in recipes.RECIPES.values() if r.pipeline != "none"} == set(
        STAGED_RECIPES
    )
    assert all(set(r.shardings) == set(r.methods) for r in recipes.RECIPES.values())
