"""The glue from a workload to the physics, and `planner estimate` as a user runs it."""
import json

import pytest
from conftest import SCENARIOS, scenario_files

from planner.load.scenario import load_scenario
from planner.physics.estimate import Shape, estimate


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    path = tmp_path_factory.mktemp("s") / "s.yaml"
    path.write_text("""\
name: physics
catalogs: [aws, gcp, lambda]
workloads:
  - name: ft70
    kind: fine_tuning
    model: llama-3.1-70b
    sharding: zero3
    activation_checkpointing: full
    work: {tokens: 1B}
    gpus: {min: 1, max: 64}
  - name: fp8-strict
    kind: training
    model: llama-3-8b
    precision: fp8
    work: {tokens: 1B}
  - name: fp8-flexible
    kind: training
    model: llama-3-8b
    precision: fp8
    fp8_fallback: true
    work: {tokens: 1B}
  - name: measured
    kind: training
    memory: {per_gpu: 20GiB}
    work: {gpu_hours: 100, reference_gpu: A100-80GB}
""")
    return load_scenario(path)


def workload(loaded, name):
    return next(w for w in loaded.scenario.workloads if w.name == name)


H100x8 = dict(gpu="H100-SXM", gpus_per_node=8, vram_gib=80, intra_node="nvlink", intra_node_gbs=900, inter_node="efa",
              inter_node_gbps=3200)
A100x8 = dict(gpu="A100-80GB", gpus_per_node=8, vram_gib=80, intra_node="nvlink", intra_node_gbs=600, inter_node="efa",
              inter_node_gbps=400)


def test_70b_full_finetune_needs_many_gpus_and_crawls_on_24gb_cards(loaded):
    w = workload(loaded, "ft70")
    one_node = estimate(w, loaded.catalog, Shape(nodes=1, **H100x8), 0.10)
    four_nodes = estimate(w, loaded.catalog, Shape(nodes=4, **H100x8), 0.10)
    assert not one_node.fits and "needs" in one_node.reason and one_node.ruled_out_by == "vram"
    assert four_nodes.fits and four_nodes.work_h > 0
    # 16 B/param of model states over 8 cards is 141 GB each; over 64 it is 17.6 GB, which a 24 GB card
    # holds (ZeRO-3 as DeepSpeed runs it), but PCIe and a 100 Gbit/s network make it many times slower.
    assert not estimate(w, loaded.catalog, Shape("A10G", 8, 1, 22.35, "pcie", 64, "efa", 100), 0.10).fits
    many_a10g = estimate(w, loaded.catalog, Shape("A10G", 8, 8, 22.35, "pcie", 64, "efa", 100), 0.10)
    assert many_a10g.fits and many_a10g.work_h > 10 * four_nodes.work_h


def test_fp8_needs_hardware_support_unless_fallback(loaded):
    a100 = Shape(nodes=1, **A100x8)
    strict = estimate(workload(loaded, "fp8-strict"), loaded.catalog, a100, 0.10)
    assert not strict.feasible and "no fp8 support" in strict.reason and strict.ruled_out_by == "precision"
    flexible = estimate(workload(loaded, "fp8-flexible"), loaded.catalog, a100, 0.10)
    assert flexible.feasible and flexible.precision == "bf16"
    h100 = estimate(workload(loaded, "fp8-strict"), loaded.catalog, Shape(nodes=1, **H100x8), 0.10)
    assert h100.feasible and h100.precision == "fp8" and h100.ruled_out_by == ""


def test_reference_gpu_hours_are_kept_on_the_reference_gpu(loaded):
    w = workload(loaded, "measured")
    single = Shape("A100-80GB", 1, 1, 80, "pcie", 64, "none", 0)
    assert estimate(w, loaded.catalog, single, 0.10).work_h == pytest.approx(100)
    eight = estimate(w, loaded.catalog, Shape(nodes=1, **A100x8), 0.10)
    assert 100 / 8 <= eight.work_h < 100 / 8 * 1.1  # near-linear on NVLink
    h100 = estimate(w, loaded.catalog, Shape("H100-SXM", 1, 1, 80, "pcie", 64, "none", 0), 0.10)
    assert h100.work_h < 100 / 2.5  # H100 is several times an A100 at bf16


def test_pcie_and_ethernet_are_visibly_slower(loaded):
    w = workload(loaded, "ft70")
    nvlink = estimate(w, loaded.catalog, Shape(nodes=4, **H100x8), 0.10)
    ethernet = estimate(w, loaded.catalog, Shape(**{**H100x8, "inter_node": "ethernet", "inter_node_gbps": 100}, nodes=4), 0.10)
    assert ethernet.work_h > 1.5 * nvlink.work_h
    # an 8B model on one node with a fine-tune's small steps: the intra-node link decides
    lora = workload(loaded, "fp8-flexible").model_copy(update={"global_batch_tokens": 2**17})
    one_nvlink = estimate(lora, loaded.catalog, Shape(nodes=1, **H100x8), 0.10)
    one_pcie = estimate(lora, loaded.catalog, Shape(**{**H100x8, "intra_node": "pcie", "intra_node_gbs": 128}, nodes=1), 0.10)
    assert one_pcie.work_h > 1.02 * one_nvlink.work_h and one_pcie.scaling_efficiency < one_nvlink.scaling_efficiency


@pytest.mark.parametrize("scenario", [p.name for p in scenario_files()])
def test_estimate_runs_on_every_example(run, scenario):
    result = run("estimate", SCENARIOS / scenario, "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    capacity = [r for r in rows if "max_requests_per_s" in r]  # endpoints: one replica's capacity per GPU and size
    assert all(r["max_requests_per_s"] >= 0 and (r["max_requests_per_s"] > 0) == (not r["reason"]) for r in capacity)
    rows = [r for r in rows if "max_requests_per_s" not in r]
    assert any(r["max_requests_per_s"] > 0 for r in capacity) or any(r["fits"] for r in rows)
    for row in rows:
        assert set(row) >= {"workload", "gpu", "gpus", "nodes", "memory_gib", "fits", "work_h", "tokens_per_s",
                            "scaling_efficiency"}
        assert set(row["memory_gib"]) >= {"weights", "gradients", "optimizer", "activations", "kv_cache", "overhead",
                                          "total"}
        assert (row["work_h"] is not None) == (row["fits"] and not row["reason"])


def test_estimate_table_and_filters(run):
    result = run("estimate", SCENARIOS / "full-finetune-70b.yaml", "--gpu", "A10G", "--gpu", "H100")
    assert result.exit_code == 0
    assert "A10G" in result.stdout and "needs" in result.stdout and "H100-SXM" in result.stdout
    assert "A100" not in result.stdout


def test_estimate_rejects_unknown_workload_and_gpu(run):
    from test_bad_input import assert_one_line_error

    assert_one_line_error(run("estimate", SCENARIOS / "lora-finetune.yaml", "--workload", "suport-lora"),
                          "unknown workload 'suport-lora'", "did you mean 'support-lora'?")
    assert_one_line_error(run("estimate", SCENARIOS / "lora-finetune.yaml", "--gpu", "Z100"), "unknown GPU 'Z100'")
