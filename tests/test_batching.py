"""The step-level replay of continuous batching: its bookkeeping against steps added up by hand, the queueing
laws it must obey, its scheduler's limits, and determinism. Its fit to published servers is
tests/test_serving.py's (benchmarks/serving_published.py)."""

from __future__ import annotations

import dataclasses

import pytest

from planner.load.catalog import load_gpus, load_models
from planner.physics import batching, serving
from planner.physics.hardware_shape import gpu_perf, model_shape


def replica(
    model: str = "llama-3.1-8b",
    gpu: str = "H100-SXM",
    tp: int = 1,
    precision: str = "bf16",
):
    spec = load_gpus()[gpu]
    return serving.Replica(
        model_shape(load_models()[model]),
        gpu_perf(spec),
        tp,
        spec.vram_gib,
        "nvlink" if tp > 1 else "none",
        spec.nvlink_gbs,
        precision,
        precision,
    )


def test_one_batch_sent_at_once_is_the_steps_added_up_by_hand():
    """Two requests of 300 prompt and 5 output tokens sent together, one scheduler step for both prompts: the
    first token after that step, then four decode steps of two sequences whose context grows by one each."""
    r = replica()
    cost = batching.step_cost(r)
    scheduler = batching.Scheduler(token_budget=8192, max_seqs=256)
    served = batching.simulate(
        r, 300, 5, concurrency=2, together=True, scheduler=scheduler
    )
    first = cost.seconds(0, 0, 600, 2 * cost.prompt_flops(0, 300))
    decode = [cost.seconds(2, 2 * (301 + k), 0, 0.0) for k in range(4)]
    assert served.ttft_s.tolist() == pytest.approx([first, first])
    assert served.tpot_s.tolist() == pytest.approx([sum(decode) / 4] * 2)


def test_a_prompt_longer_than_the_budget_is_cut_into_steps_unless_the_server_takes_whole_prompts():
    r = replica()
    cost = batching.step_cost(r)
    chunked = batching.simulate(
        r, 2048, 2, concurrency=1, together=True, scheduler=batching.Scheduler(512, 256)
    )
    by_hand = sum(
        cost.seconds(0, 0, 512, cost.prompt_flops(k * 512, (k + 1) * 512))
        for k in range(4)
    )
    assert chunked.ttft() == pytest.approx(by_hand)
    whole = batching.simulate(
        r,
        2048,
        2,
        concurrency=1,
        together=True,
        scheduler=batching.Scheduler(512, 256, chunked=False),
    )
    assert whole.ttft() == pytest.approx(
        cost.seconds(0, 0, 2048, cost.prompt_flops(0, 2048))
    )


def test_an_idle_replica_answers_in_one_prefill_and_decodes_alone():
    r = replica()
    cost = batching.step_cost(r)
    quiet = batching.simulate(r, 512, 128, rate=0.01)
    assert quiet.ttft() == pytest.approx(
        cost.seconds(0, 0, 512, cost.prompt_flops(0, 512)), rel=0.01
    )
    assert quiet.tpot() == pytest.approx(cost.seconds(1, 512 + 64, 0, 0.0), rel=0.02)
    assert not quiet.saturated


@pytest.mark.parametrize("rate", [2.0, 10.0, 30.0])
def test_open_loop_obeys_littles_law_and_serves_what_arrives(rate):
    r = replica()
    served = batching.simulate(r, 512, 256, rate=rate)
    assert not served.saturated and served.requests_per_s == pytest.approx(
        rate, rel=0.05
    )
    in_system = rate * (served.ttft() + 255 * served.tpot())  # L = λW
    assert served.mean_batch == pytest.approx(in_system, rel=0.08)


def test_closed_loop_throughput_is_its_clients_over_their_cycle():
    r = replica("llama-3.3-70b", tp=2, precision="fp8")
    for clients in (4, 32):
        served = batching.simulate(r, 2000, 200, concurrency=clients)
        cycle = served.ttft() + 199 * served.tpot() + batching.CLIENT_S
        assert served.requests_per_s == pytest.approx(clients / cycle, rel=0.05)


def test_latency_grows_with_load_and_past_capacity_the_queue_runs_away():
    r = replica()
    ttft = [
        batching.simulate(r, 1024, 256, rate=x).ttft(0.9) for x in (5.0, 20.0, 40.0)
    ]
    assert ttft == sorted(ttft) and ttft[-1] > 1.5 * ttft[0]
    most = batching.simulate(r, 1024, 256, concurrency=1024).requests_per_s
    assert batching.simulate(r, 1024, 256, rate=2 * most).saturated


def test_the_kv_cache_and_the_sequence_cap_bound_the_batch():
    r = replica("llama-3.3-70b", tp=2, precision="fp8")
    fits = serving.max_batch(r, 5000, 500)
    assert batching.simulate(r, 5000, 500, concurrency=3 * fits).mean_batch <= fits
    capped = batching.simulate(
        r, 200, 200, concurrency=64, scheduler=batching.Scheduler(8192, 16)
    )
    assert capped.mean_batch <= 16 + 1e-9


def test_the_same_input_gives_the_same_figures_and_the_seed_moves_them():
    r = replica()
    a = batching.simulate(r, 512, 128, rate=20.0)
    b = batching.simulate(r, 512, 128, rate=20.0)
    assert (
        a.ttft_s.tolist() == b.ttft_s.tolist()
        and a.tpot_s.tolist() == b.tpot_s.tolist()
    )
    assert (
        batching.simulate(r, 512, 128, rate=20.0, seed=1).ttft_s.tolist()
        != a.ttft_s.tolist()
    )


def test_vllm_defaults_follow_the_gpu():
    assert batching.default_scheduler("H100-SXM", 80) == batching.Scheduler(8192, 1024)
    assert batching.default_scheduler("A100-80GB", 80) == batching.Scheduler(2048, 256)
    assert batching.default_scheduler("L40S", 48) == batching.Scheduler(2048, 256)
    assert dataclasses.replace(batching.Scheduler(1, 1), chunked=False).chunked is False


def test_estimate_replays_each_capacity_and_marks_a_rate_the_replay_cannot_carry():
    """`planner estimate`'s replayed columns are the replay at the row's capacity: TTFT at the SLO's quantile and
    mean TPOT, or none where the replay's queue runs away."""
    from pathlib import Path

    from planner.candidates.endpoints import replica_of
    from planner.candidates.estimate_tables import capacity_rows
    from planner.load.scenario import load_scenario

    loaded = load_scenario(
        Path(__file__).resolve().parents[1] / "scenarios" / "serving-chat.yaml"
    )
    rows = capacity_rows(loaded.scenario, loaded.catalog, gpu_queries=("H100-SXM",))
    [workload] = [w for w in loaded.scenario.workloads if w.name == "chat-8b"]
    checked = carried = 0
    for row in rows:
        if not row["max_requests_per_s"]:
            assert row["replayed_ttft_ms"] is None
            continue
        offer = next(
            o
            for o in loaded.catalog.offers.itertuples(index=False)
            if o.gpu == row["gpu"] and o.gpus_per_node >= row["tensor_parallel"]
        )
        replica = replica_of(
            workload,
            loaded.catalog,
            offer,
            row["tensor_parallel"],
            loaded.scenario.defaults.vram_headroom,
        )
        slo = workload.slo
        rate = serving.capacity(
            replica,
            row["prompt_tokens"],
            row["output_tokens"],
            slo.ttft,
            slo.tpot,
            slo.quantile,
        ).max_requests_per_s  # the row's, before rounding
        assert rate == pytest.approx(row["max_requests_per_s"], abs=5e-4)
        served = batching.simulate(
            replica, row["prompt_tokens"], row["output_tokens"], rate=rate
        )
        if served.saturated:
            assert row["replayed_ttft_ms"] is None and row["replayed_tpot_ms"] is None
        else:
            carried += 1
            assert row["replayed_ttft_ms"] == pytest.approx(
                served.ttft(slo.quantile) * 1e3, abs=0.06
            )
            assert row["replayed_tpot_ms"] == pytest.approx(
                served.tpot() * 1e3, abs=0.006
            )
        checked += 1
    assert checked >= 6 and carried >= 4


@pytest.mark.parametrize(
    "model, gpu, tp, precision",
    [
        ("llama-3.1-8b", "H100-SXM", 1, "bf16"),
        ("llama-3.1-8b", "L40S", 1, "bf16"),
        ("llama-3.3-70b", "H100-SXM", 2, "fp8"),
    ],
)
def test_the_closed_form_tracks_the_replay_up_to_nine_tenths_of_what_a_replica_carries(
    model, gpu, tp, precision
):
    """`serving.latency` (the capacity model) against `simulate` at the same Poisson rate: TTFT at p90 within
    0.75-1.3x and mean TPOT within 0.9-1.1x, from a fifth to nine tenths of the replica's most (its closed
    loop's throughput with every sequence slot busy). Long prompts at a fifth of that are the loosest (the
    chunked queue's M/D/1 is pessimistic at light load)."""
    r = replica(model, gpu, tp, precision)
    for prompt, output in ((512, 256), (2048, 512), (8192, 512)):
        most = batching.simulate(r, prompt, output, concurrency=1024).requests_per_s
        for share in (0.2, 0.5, 0.8, 0.9):
            rate = share * most
            replay = batching.simulate(r, prompt, output, rate=rate)
            model_at = serving.latency(r, prompt, output, rate, 0.9)
            assert model_at is not None and not replay.saturated, (prompt, share)
            ttft = model_at.ttft_s / replay.ttft(0.9)
            low, high = (0.75, 1.6) if prompt > 4096 else (0.75, 1.3)
            if not (
                gpu == "L40S" and prompt > 4096 and share > 0.85
            ):  # at the edge the replay's queue runs away
                assert low <= ttft <= high, (prompt, share, ttft)
            assert 0.9 <= model_at.tpot_s / replay.tpot() <= 1.1, (prompt, share)
