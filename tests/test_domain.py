"""The domain model on its own: defaults, shorthands and cross-field rules."""

import pytest
from pydantic import ValidationError

from planner.schema.catalog import ModelArch, Offer
from planner.schema.scenario import Scenario
from planner.schema.workload import Checkpointing, MemoryNeed, Work, Workload

BASE = {
    "name": "w",
    "kind": "training",
    "memory": {"per_gpu": "20GiB"},
    "work": {"gpu_hours": 5, "reference_gpu": "A10G"},
}


def test_workload_defaults_and_units():
    w = Workload(
        **{
            **BASE,
            "time_budget": "2d",
            "restart_overhead": "90s",
            "checkpoint": {"every": "30m", "size": "1.5TiB"},
        }
    )
    assert w.time_budget == 48
    assert w.restart_overhead == pytest.approx(0.025)
    assert w.checkpoint.every == 0.5 and w.checkpoint.size == 1536
    assert w.interruption_tolerance == "checkpointed"
    assert w.gpus.min == 1 and w.training_method == "full"


def test_gpu_count_shorthand_means_exactly():
    w = Workload(**{**BASE, "gpus": 8})
    assert (w.gpus.min, w.gpus.max) == (8, 8)


def test_checkpoint_cadence_is_auto_or_a_duration():
    assert Checkpointing().every == "auto"
    assert Checkpointing(every="45m").every == 0.75
    with pytest.raises(ValidationError):
        Checkpointing(every="sometimes")


def test_memory_takes_exactly_one_form():
    assert MemoryNeed(per_gpu="70GiB").per_gpu == 70
    assert MemoryNeed(model_states="128GiB", activations="20GiB").model_states == 128
    with pytest.raises(ValidationError, match="either per_gpu, or model_states"):
        MemoryNeed(per_gpu=10, model_states=10)
    with pytest.raises(ValidationError, match="either per_gpu, or model_states"):
        MemoryNeed(activations=10)


def test_work_needs_a_reference_gpu_for_gpu_hours():
    with pytest.raises(ValidationError, match="reference_gpu"):
        Work(gpu_hours=10)
    assert Work(tokens="2B").tokens == 2e9


@pytest.mark.parametrize(
    "drop, message",
    [
        (("memory", "work"), "both memory and work are missing"),
        (("memory",), "memory is missing"),
        (("work",), "work is missing"),
    ],
)
def test_workload_needs_memory_and_work(drop, message):
    data = {k: v for k, v in BASE.items() if k not in drop}
    with pytest.raises(ValidationError, match=message):
        Workload(**data)


def test_tokens_need_a_model():
    with pytest.raises(ValidationError, match="needs a `model`"):
        Workload(**{**BASE, "work": {"tokens": "1B"}})


def test_inline_model_fills_gqa_defaults():
    m = ModelArch(params="7B", layers=32, hidden=4096, heads=32)
    assert (m.kv_heads, m.head_dim, m.ffn, m.active_params) == (32, 128, 16384, 7e9)


@pytest.mark.parametrize(
    "field, value",
    [("time_budget", "-2h"), ("time_budget", 0), ("restart_overhead", "-1m")],
)
def test_negative_or_zero_times_are_rejected(field, value):
    with pytest.raises(ValidationError):
        Workload(**{**BASE, field: value})


def test_unknown_keys_are_rejected():
    with pytest.raises(ValidationError, match="extra"):
        Workload(**{**BASE, "chekpoint": {}})


def test_scenario_rejects_duplicate_workloads():
    """(A placement group naming no workload is refused by the loader, at its key path: test_bad_input.py.)"""
    with pytest.raises(ValidationError, match="duplicate workload name 'w'"):
        Scenario(name="s", workloads=[BASE, BASE])


def test_offer_key_and_price_validation():
    offer = Offer(
        provider="aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        gpu="H100-SXM",
        gpus_per_node=8,
        gpu_vram_gib=80,
        intra_node="nvlink",
        intra_node_gbs=900,
        inter_node="efa",
        inter_node_gbps=3200,
        on_demand_usd_h=55.04,
    )
    assert offer.key == "aws/us-east-1/p5.48xlarge"
    with pytest.raises(ValidationError):
        Offer(**{**offer.model_dump(), "on_demand_usd_h": -1})
    with pytest.raises(ValidationError):
        Offer(**{**offer.model_dump(), "inter_node": "carrier-pigeon"})
