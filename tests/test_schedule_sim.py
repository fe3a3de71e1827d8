"""`planner simulate QUARTER.yaml` and `planner batch --schedule-confidence`: a schedule replayed with
every run's wall time drawn from its process, late runs pushing what waits for them."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from planner.cli import main
from planner.economics.candidate import CandidateInputs
from planner.economics.costmodel import completion_quantile
from planner.economics.schedule_sim import PlannedRun, replay_schedule

ROOT = Path(__file__).resolve().parents[1]


def walls(**values) -> dict[str, np.ndarray]:
    return {name: np.array(v, dtype=float) for name, v in values.items()}


def test_a_late_run_pushes_the_runs_that_come_after_it():
    runs = [
        PlannedRun("a", 0, 10, 12),
        PlannedRun("b", 10, 20, 20, after=("a",)),
        PlannedRun("c", 10, 15, 15),
    ]
    result = replay_schedule(runs, walls(a=[9, 12], b=[10, 10], c=[5, 5]), [])
    assert result.end_h["b"].tolist() == [
        20,
        22,
    ]  # on time when a is; two hours late after a's overrun
    assert result.end_h["c"].tolist() == [15, 15]  # c waits for nothing
    assert result.on_time == {"a": 1.0, "b": 0.5, "c": 1.0}
    assert result.delay_h["b"] == pytest.approx(1.0) and result.late_h[
        "b"
    ] == pytest.approx(1.0)
    assert result.holds == 0.5


def test_runs_on_a_reservation_wait_for_free_nodes_in_their_planned_order():
    """Two bought nodes: a and b (one node each) side by side, then c on both."""
    runs = [
        PlannedRun("a", 0, 10, 100, pool=0),
        PlannedRun("b", 0, 10, 100, pool=0),
        PlannedRun("c", 10, 20, 20, pool=0, nodes=2),
        PlannedRun("d", 10, 12, 12, pool=1),
    ]
    result = replay_schedule(
        runs, walls(a=[9, 12, 9], b=[9, 9, 14], c=[10, 10, 10], d=[2, 2, 2]), [2, 1]
    )
    assert result.end_h["c"].tolist() == [
        20,
        22,
        24,
    ]  # it starts when the later of a and b ends
    assert result.end_h["d"].tolist() == [12, 12, 12]  # another pool: not pushed
    one_node = [
        PlannedRun("a", 0, 10, 100, pool=0),
        PlannedRun("b", 0, 10, 100, pool=0),
        PlannedRun("e", 10, 20, 20, pool=0),
    ]
    result = replay_schedule(
        one_node, walls(a=[9, 12, 12], b=[9, 9, 14], e=[10, 10, 10]), [2]
    )
    assert result.end_h["e"].tolist() == [
        20,
        20,
        22,
    ]  # one node frees when the first of a and b ends


def test_a_lone_run_is_on_time_as_often_as_its_slot_promises():
    """The replay of the shipped launch quarter: its first run has no predecessor, so P(on time) is the cost
    model's P(T <= due - start) (computed here from the process's completion quantile)."""
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(ROOT / "scenarios" / "quarter-launch.yaml"),
            "--trials",
            "4000",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(
        result.output[result.output.index("{") : result.output.rindex("}") + 1]
    )
    assert data["trials"] == 4000 and 0 <= data["holds"] <= 1
    assert {r["run"] for r in data["runs"]} == {
        "assistant-sft",
        "assistant-dpo",
        "next-release-sft",
    }
    for r in data["runs"]:
        assert 0 <= r["p_on_time"] <= 1 and r["delay_h"] >= 0 and r["late_h"] >= 0
    assert data["holds"] <= min(r["p_on_time"] for r in data["runs"]) + 1e-12


def tight_quarter(tmp_path: Path) -> Path:
    """Spot single-GPU fine-tunes in a chain with due dates at their slots: a schedule that can slip (the fitted
    process's on the estimate as given, which the schedule replay checks; on the measured traces no spot offer keeps
    these promises, and with the estimate's error the chain no longer fits its due dates)."""
    runs = []
    for k in range(4):
        runs.append(
            f"""\
  - name: tune-{k}
    kind: fine_tuning
    memory: {{per_gpu: 18GiB}}
    work: {{gpu_hours: 14, reference_gpu: A10G}}
    gpus: 1
    checkpoint: {{every: auto, write_time: 2m, size: 10GiB}}
    allow: {{providers: [aws], gpus: [A10G], markets: [spot]}}
    due: {(dt.datetime(2027, 1, 4) + dt.timedelta(hours=24 * (k + 1))).isoformat(timespec="minutes")}
"""
            + (f"    after: [tune-{k - 1}]\n" if k else "")
        )
    path = tmp_path / "tight.yaml"
    path.write_text(
        "name: tight\ncatalogs: [aws]\ndefaults: {deadline_confidence: 0.9, spot_evidence: fitted, estimate_error: 0}\n"
        "horizon: {start: 2027-01-04, end: 2027-01-14, step: 1h}\nruns:\n"
        + "".join(runs),
        encoding="utf-8",
    )
    return path


def batch_json(path: Path, *options: str, tmp_path: Path) -> dict:
    out = tmp_path / f"schedule{len(options)}.json"
    result = CliRunner().invoke(
        main,
        [
            "batch",
            str(path),
            "--format",
            "json",
            "--no-timings",
            "-o",
            str(out),
            "--time-limit",
            "20",
            *options,
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_schedule_confidence_holds_the_whole_schedule(tmp_path):
    path = tight_quarter(tmp_path)
    plain = batch_json(path, tmp_path=tmp_path)
    sure = batch_json(path, "--schedule-confidence", "0.9", tmp_path=tmp_path)
    replayed = CliRunner().invoke(
        main,
        [
            "simulate",
            str(path),
            "--plan",
            str(tmp_path / "schedule0.json"),
            "--trials",
            "2000",
            "--format",
            "json",
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    plain_holds = json.loads(
        replayed.output[replayed.output.index("{") : replayed.output.rindex("}") + 1]
    )["holds"]
    confidence = sure["schedule_confidence"]
    print(
        f"per-run 0.9: ${plain['objective_usd']:,.2f}, holds {plain_holds:.1%}; whole schedule >= 0.9: per run "
        f"{confidence['per_run']:.4f}, ${sure['objective_usd']:,.2f}, holds {confidence['simulated_holds']:.1%}"
    )
    assert confidence["per_run"] == pytest.approx(0.9 ** (1 / 4))
    assert confidence["simulated_holds"] >= 0.9 - 3 * math.sqrt(
        0.09 / confidence["trials"]
    )
    assert sure["objective_usd"] >= plain["objective_usd"] - 0.01
    # four runs at 0.9 each do not hold 0.9 together
    assert plain_holds < 0.9 < confidence["simulated_holds"]
    # each run's slot is its completion quantile at the per-run confidence: the checker's p_deadline rule
    assert all(
        r["p_deadline"] >= confidence["per_run"] - 1e-9
        for r in sure["runs"]
        if r["scheduled"]
    )


def test_a_schedule_file_without_the_replay_fields_is_one_located_line(tmp_path):
    path = tight_quarter(tmp_path)
    data = batch_json(path, tmp_path=tmp_path)
    del data["runs"][1]["inputs"]
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    result = CliRunner().invoke(main, ["simulate", str(path), "--plan", str(bad)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert (
        len(lines) == 1
        and "runs[1].inputs" in lines[0]
        and "missing required key 'inputs'" in lines[0]
        and "planner batch" in lines[0]
    ), result.output


def test_replay_matches_the_cost_models_completion_distribution():
    """A single run replayed alone: P(wall <= its q-quantile) is q (the replay draws from `simulate`, the
    quantile comes from the cost model's FFT; independent computations of one process)."""
    from planner.economics.simulate import simulate

    inputs = CandidateInputs(
        work_h=40.0,
        checkpoint_write_h=0.05,
        restart_h=0.5,
        nodes=2,
        gpus_per_node=8,
        spot_rate_per_node_h=0.1,
        hw_failure_per_gpu_h=0.0,
        price_per_node_h=1.0,
        billing_granularity_h=1 / 3600,
        billing_minimum_h=0.0,
        interruption_tolerance="checkpointed",
        checkpoint_interval_h=2.0,
    )
    q90 = completion_quantile(inputs, 0.9)
    run = PlannedRun("x", 0.0, q90, q90)
    result = replay_schedule([run], {"x": simulate(inputs, 20_000, 7).wall_h}, [])
    print(f"P(on time at the 0.9 quantile {q90:.2f} h): {result.on_time['x']:.4f}")
    assert result.on_time["x"] == pytest.approx(
        0.9, abs=3 * math.sqrt(0.09 / 20_000) + 0.005
    )


POOLED_RUN = """\
  - name: {name}
    kind: training
    memory: {{per_gpu: 40GiB}}
    work: {{gpu_hours: 100, reference_gpu: H100-SXM}}
    gpus: 8
    interruption_tolerance: none
    allow: {{providers: [aws], regions: [us-east-1], gpus: [H100]}}
"""
POOLED = (
    "name: pooled\ncatalogs: [aws]\nhorizon: {start: 2027-01-04, end: 2027-02-01, step: 6h}\nruns:\n"
    + POOLED_RUN.format(name="a")
    + POOLED_RUN.format(name="b")
    + "    after: [a]\n"
    "reservations:\n  - {name: p5, offer: aws/us-east-1/p5.48xlarge, start: 2027-01-04, end: 2027-02-01, "
    "price_per_node_h: 1, min_nodes: 1, max_nodes: 1}\n"
)


def test_a_schedule_the_replay_cannot_run_is_one_located_line(tmp_path):
    """Found by fuzzing: a run on more reserved nodes than the schedule buys could never start (the replay drew NaN
    for its end, a traceback), and a run held up for millennia ended past the year 9999 (a date overflow)."""
    path = tmp_path / "pooled.yaml"
    path.write_text(POOLED, encoding="utf-8")
    data = batch_json(path, tmp_path=tmp_path)
    assert [r["pool"] for r in data["runs"]] == [0, 0] and data["reservations"][0][
        "nodes"
    ] == 1
    unbought = json.loads(json.dumps(data))
    unbought["reservations"][0]["nodes"] = 0
    bad = tmp_path / "unbought.json"
    bad.write_text(json.dumps(unbought), encoding="utf-8")
    result = CliRunner().invoke(
        main, ["simulate", str(path), "--plan", str(bad), "--trials", "100"]
    )
    lines = [
        line
        for line in result.output.splitlines()
        if line.strip() and not line.startswith("warning")
    ]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(
        f"error: {bad}: runs[0].nodes: 1 nodes on reservation 0, which buys 0"
    ), lines
    for market, pool in (
        ("spot", 0),
        ("reserved", -1),
    ):  # the replay reads the pool; the market must agree
        mixed = json.loads(json.dumps(data))
        mixed["runs"][0].update(market=market, pool=pool)
        bad.write_text(json.dumps(mixed), encoding="utf-8")
        result = CliRunner().invoke(
            main, ["simulate", str(path), "--plan", str(bad), "--trials", "100"]
        )
        assert (
            result.exit_code == 2
            and f"runs[0].pool: market '{market}' with pool {pool}" in result.output
        )
    late = json.loads(json.dumps(data))
    run = late["runs"][0]
    run.update(
        start="8999-12-01T00:00:00+00:00",
        end="8999-12-02T00:00:00+00:00",
        checkpoint_interval_h=0.5,
    )
    run["inputs"].update(
        failure_rate_per_h=1.0,
        preemption_events_per_h=1.0,
        capacity_wait_h=1e6,
        interruption_tolerance="checkpointed",
    )
    slow = tmp_path / "late.json"
    slow.write_text(json.dumps(late), encoding="utf-8")
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(path),
            "--plan",
            str(slow),
            "--trials",
            "100",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    replay = json.loads(
        result.output[result.output.index("{") : result.output.rindex("}") + 1]
    )
    # past the year 9999: no date
    assert replay["runs"][0]["p90_end"] is None and replay["holds"] == 0.0
