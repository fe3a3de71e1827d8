"""The glue from a workload to the physics, and `planner estimate` as a user runs it."""

import json

import pytest
from conftest import SCENARIOS, scenario_files
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from planner.load.catalog import load_catalog
from planner.load.scenario import load_scenario
from planner.physics.estimate import estimate, estimate_prepared, work_floor_h
from planner.physics.estimate_table import shapes_for
from planner.physics.hardware_shape import Shape, prepare
from planner.schema.workload import Workload


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


H100x8 = dict(
    gpu="H100-SXM",
    gpus_per_node=8,
    vram_gib=80,
    intra_node="nvlink",
    intra_node_gbs=900,
    inter_node="efa",
    inter_node_gbps=3200,
)
A100x8 = dict(
    gpu="A100-80GB",
    gpus_per_node=8,
    vram_gib=80,
    intra_node="nvlink",
    intra_node_gbs=600,
    inter_node="efa",
    inter_node_gbps=400,
)


def test_70b_full_finetune_needs_many_gpus_and_crawls_on_24gb_cards(loaded):
    w = workload(loaded, "ft70")
    one_node = estimate(w, loaded.catalog, Shape(nodes=1, **H100x8), 0.10)
    four_nodes = estimate(w, loaded.catalog, Shape(nodes=4, **H100x8), 0.10)
    assert (
        not one_node.fits
        and "needs" in one_node.reason
        and one_node.ruled_out_by == "vram"
    )
    assert four_nodes.fits and four_nodes.work_h > 0
    # 16 B/param of model states over 8 cards is 141 GB each; over 64 it is 17.6 GB, which a 24 GB card
    # holds (ZeRO-3 as DeepSpeed runs it), but PCIe and a 100 Gbit/s network make it many times slower.
    assert not estimate(
        w, loaded.catalog, Shape("A10G", 8, 1, 22.35, "pcie", 64, "efa", 100), 0.10
    ).fits
    many_a10g = estimate(
        w, loaded.catalog, Shape("A10G", 8, 8, 22.35, "pcie", 64, "efa", 100), 0.10
    )
    assert many_a10g.fits and many_a10g.work_h > 10 * four_nodes.work_h


def test_fp8_needs_hardware_support_unless_fallback(loaded):
    a100 = Shape(nodes=1, **A100x8)
    strict = estimate(workload(loaded, "fp8-strict"), loaded.catalog, a100, 0.10)
    assert (
        not strict.feasible
        and "no fp8 support" in strict.reason
        and strict.ruled_out_by == "precision"
    )
    flexible = estimate(workload(loaded, "fp8-flexible"), loaded.catalog, a100, 0.10)
    assert flexible.feasible and flexible.precision == "bf16"
    h100 = estimate(
        workload(loaded, "fp8-strict"), loaded.catalog, Shape(nodes=1, **H100x8), 0.10
    )
    assert h100.feasible and h100.precision == "fp8" and h100.ruled_out_by == ""


def test_reference_gpu_hours_are_kept_on_the_reference_gpu(loaded):
    w = workload(loaded, "measured")
    single = Shape("A100-80GB", 1, 1, 80, "pcie", 64, "none", 0)
    assert estimate(w, loaded.catalog, single, 0.10).work_h == pytest.approx(100)
    eight = estimate(w, loaded.catalog, Shape(nodes=1, **A100x8), 0.10)
    assert 100 / 8 <= eight.work_h < 100 / 8 * 1.1  # near-linear on NVLink
    h100 = estimate(
        w, loaded.catalog, Shape("H100-SXM", 1, 1, 80, "pcie", 64, "none", 0), 0.10
    )
    assert h100.work_h < 100 / 2.5  # H100 is several times an A100 at bf16


def test_pcie_and_ethernet_are_visibly_slower(loaded):
    w = workload(loaded, "ft70")
    nvlink = estimate(w, loaded.catalog, Shape(nodes=4, **H100x8), 0.10)
    ethernet = estimate(
        w,
        loaded.catalog,
        Shape(**{**H100x8, "inter_node": "ethernet", "inter_node_gbps": 100}, nodes=4),
        0.10,
    )
    assert ethernet.work_h > 1.5 * nvlink.work_h
    # an 8B model on one node with a fine-tune's small steps: the intra-node link decides
    lora = workload(loaded, "fp8-flexible").model_copy(
        update={"global_batch_tokens": 2**17}
    )
    one_nvlink = estimate(lora, loaded.catalog, Shape(nodes=1, **H100x8), 0.10)
    one_pcie = estimate(
        lora,
        loaded.catalog,
        Shape(**{**H100x8, "intra_node": "pcie", "intra_node_gbs": 128}, nodes=1),
        0.10,
    )
    assert (
        one_pcie.work_h > 1.02 * one_nvlink.work_h
        and one_pcie.scaling_efficiency < one_nvlink.scaling_efficiency
    )


@pytest.mark.parametrize("scenario", [p.name for p in scenario_files()])
def test_estimate_runs_on_every_example(run, scenario):
    result = run("estimate", SCENARIOS / scenario, "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    capacity = [
        r for r in rows if "max_requests_per_s" in r
    ]  # endpoints: one replica's capacity per GPU and size
    assert all(
        r["max_requests_per_s"] >= 0
        and (r["max_requests_per_s"] > 0) == (not r["reason"])
        for r in capacity
    )
    rows = [r for r in rows if "max_requests_per_s" not in r]
    assert any(r["max_requests_per_s"] > 0 for r in capacity) or any(
        r["fits"] for r in rows
    )
    for row in rows:
        assert set(row) >= {
            "workload",
            "gpu",
            "gpus",
            "nodes",
            "memory_gib",
            "fits",
            "work_h",
            "tokens_per_s",
            "scaling_efficiency",
        }
        assert set(row["memory_gib"]) >= {
            "weights",
            "gradients",
            "optimizer",
            "activations",
            "kv_cache",
            "overhead",
            "total",
        }
        assert (row["work_h"] is not None) == (row["fits"] and not row["reason"])


def test_estimate_table_and_filters(run):
    result = run(
        "estimate",
        SCENARIOS / "full-finetune-70b.yaml",
        "--gpu",
        "A10G",
        "--gpu",
        "H100",
    )
    assert result.exit_code == 0
    assert (
        "A10G" in result.stdout
        and "needs" in result.stdout
        and "H100-SXM" in result.stdout
    )
    assert "A100" not in result.stdout


def test_estimate_rejects_unknown_workload_and_gpu(run):
    from test_bad_input import assert_one_line_error

    assert_one_line_error(
        run("estimate", SCENARIOS / "lora-finetune.yaml", "--workload", "suport-lora"),
        "unknown workload 'suport-lora'",
        "did you mean 'support-lora'?",
    )
    assert_one_line_error(
        run("estimate", SCENARIOS / "lora-finetune.yaml", "--gpu", "Z100"),
        "unknown GPU 'Z100'",
    )


# ---------------------------------------------------------------- the floor on W that spares full estimates

_FLOOR_MODELS = [
    "llama-3.2-1b",
    "llama-3-8b",
    "mistral-7b",
    "qwen2.5-32b",
    "llama-3.1-70b",
    "mixtral-8x7b",
    "qwen3-30b-a3b",
    "gpt2",
]


@pytest.fixture(scope="module")
def every_shape():
    """Every hardware shape six providers' offers host at 1-64 GPUs, with their catalog."""
    catalog = load_catalog(["aws", "azure", "gcp", "lambda", "runpod", "vast"])
    shapes = sorted(
        {
            s
            for gpus in (1, 2, 4, 8, 16, 32, 64)
            for s in shapes_for(catalog.offers, gpus)
        },
        key=repr,
    )
    return catalog, shapes


def _floor_workload(data) -> Workload:
    """A training, fine-tuning or generation workload drawn with hypothesis, with its fields pinned or searched."""
    kind = data.draw(
        st.sampled_from(["pretrain", "finetune", "generate", "stated", "reference"])
    )
    common = {"name": "w", "gpus": {"min": 1, "max": 64}}
    if kind == "stated":
        return Workload(
            **common,
            kind="training",
            memory={"per_gpu": f"{data.draw(st.integers(4, 90))}GiB"},
            work={"gpu_hours": 100, "reference_gpu": "A100-80GB"},
            precision=data.draw(st.sampled_from(["bf16", "fp8", "fp16"])),
            fp8_fallback=data.draw(st.booleans()),
        )
    model = data.draw(st.sampled_from(_FLOOR_MODELS))
    if kind == "generate":
        return Workload(
            **common,
            kind="batch_inference",
            model=model,
            interruption_tolerance="stateless",
            precision=data.draw(st.sampled_from(["bf16", "fp8", "int8", "int4"])),
            generation={
                "sequences": data.draw(st.integers(1, 10**6)),
                "prompt_tokens": data.draw(st.integers(1, 8192)),
                "output_tokens": data.draw(st.integers(1, 4096)),
                "batch": data.draw(st.integers(1, 256)),
                "kv_precision": data.draw(st.sampled_from(["bf16", "fp8"])),
            },
        )
    pins = {
        name: data.draw(st.one_of(st.none(), values))
        for name, values in (
            ("tensor_parallel", st.sampled_from([1, 2, 4, 8])),
            ("pipeline_parallel", st.sampled_from([1, 2, 4])),
            ("micro_batch", st.sampled_from([1, 2, 4])),
            ("sharding", st.sampled_from(["zero1", "zero3"])),
            (
                "activation_checkpointing",
                st.sampled_from(["none", "selective", "full"]),
            ),
        )
    }
    work = (
        {"gpu_hours": 200, "reference_gpu": "H100-SXM"}
        if kind == "reference"
        else {"tokens": f"{data.draw(st.integers(1, 2000))}M"}
    )
    return Workload(
        **common,
        kind="training" if kind == "pretrain" else "fine_tuning",
        model=model,
        work=work,
        method="full"
        if kind == "pretrain"
        else data.draw(st.sampled_from(["full", "lora", "qlora"])),
        sequence_length=data.draw(st.sampled_from([2048, 4096, 32768])),
        precision=data.draw(st.sampled_from(["bf16", "fp8"])),
        fp8_fallback=data.draw(st.booleans()),
        mfu=data.draw(st.one_of(st.none(), st.floats(0.2, 0.6))),
        **{k: v for k, v in pins.items() if v is not None},
    )


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_floor_on_w_never_exceeds_the_estimate(every_shape, data):
    """Candidate generation estimates a shape in full only when `work_floor_h` leaves a row of it in the running,
    so the floor must be below W on every shape (and inf only where the estimate rules the shape out)."""
    catalog, shapes = every_shape
    workload = _floor_workload(data)
    prepared = prepare(workload, catalog)
    below = 0
    for shape in data.draw(
        st.lists(st.sampled_from(shapes), min_size=8, max_size=8, unique=True)
    ):
        floor, est = (
            work_floor_h(prepared, catalog, shape),
            estimate_prepared(prepared, catalog, shape, 0.1),
        )
        assert floor <= est.work_h, (shape, floor, est.work_h)
        below += 0 < floor < est.work_h
    event(f"floors strictly below a finite W: {below} of 8")
