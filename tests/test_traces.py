"""`planner simulate --traces`: plans replayed on spot availability traces (economics/trace_replay.py).
Synthetic traces whose outcome can be worked out by hand, then the shipped public ones end to end."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from conftest import SCENARIOS

from planner.economics.candidate import CandidateInputs
from planner.economics.fallback import margin_h
from planner.economics.inputs import inputs_from_assignment
from planner.economics.segment_plans import segment_plan
from planner.economics.trace_replay import (
    MAX_STEPS,
    TraceJob,
    omniscient,
    replay,
    windows,
)
from planner.load.traces import SHIPPED_TRACES, load_traces
from planner.schema.plan import AssignmentRecord

SPOT, ON_DEMAND = 10.0, 30.0
JOB = TraceJob(
    CandidateInputs(
        work_h=20,
        restart_h=0.5,
        nodes=2,
        gpus_per_node=8,
        spot_rate_per_node_h=0.1,
        price_per_node_h=SPOT,
        checkpoint_interval_h=1.0,
        time_budget_h=40.0,
    ),
    ON_DEMAND,
)


def _up(
    pattern: list[tuple[bool, float]], hours: float, step: float = 5 / 60
) -> np.ndarray:
    ticks = []
    while len(ticks) * step < hours:
        for up, length in pattern:
            ticks += [up] * round(length / step)
    return np.array([ticks[: math.ceil(hours / step)]])


def test_spot_through_windows_worked_by_hand():
    """Windows of 10 h up, 2 h down; R = 0.5 h, τ = 1 h, no checkpoint writes: each window saves 9 h of
    the 9.5 h worked, so the third window finishes the last 2 h at 24 + 0.5 + 2 = 26.5 h."""
    up = _up([(True, 10), (False, 2)], 80)
    out = replay(JOB, up, 5 / 60, "spot")
    assert out.wall_h[0] == pytest.approx(26.5)
    assert (
        out.spot_node_h[0] == pytest.approx(2 * (10 + 10 + 2.5))
        and out.on_demand_node_h[0] == 0
    )
    assert out.cost_usd[0] == pytest.approx(SPOT * 2 * 22.5)
    # hindsight: each window worth 9.5 h of work (restart only, nothing lost), so 20 h take three windows
    assert omniscient(JOB, up, 5 / 60)[0] == pytest.approx(2 * SPOT * (20 + 3 * 0.5))


def test_no_spot_capacity_at_all():
    up = _up([(False, 1)], 80)
    p = segment_plan(JOB.inputs)
    spot = replay(JOB, up, 5 / 60, "spot")
    assert np.isnan(spot.wall_h[0]) and spot.hit_rate(40) == 0  # never starts
    # waits for the switch point, then on demand to the end
    fallback = replay(JOB, up, 5 / 60, "spot_fallback")
    assert fallback.wall_h[0] == pytest.approx(
        JOB.deadline_h - margin_h(p.R, p.tau), abs=5 / 60
    )
    assert fallback.cost_usd[0] == pytest.approx(2 * ON_DEMAND * (p.R + p.S))
    # behind the line at once: on demand from the start
    progress = replay(JOB, up, 5 / 60, "uniform_progress")
    # from the second step
    assert progress.wall_h[0] == pytest.approx(p.R + p.S, abs=0.1)
    assert omniscient(JOB, up, 5 / 60)[0] == pytest.approx(2 * ON_DEMAND * (p.R + p.S))


def test_always_up_is_the_failure_free_run_for_every_policy():
    up = _up([(True, 1)], 80)
    p = segment_plan(JOB.inputs)
    for policy in ("spot", "spot_fallback", "uniform_progress"):
        out = replay(JOB, up, 5 / 60, policy)
        assert out.wall_h[0] == pytest.approx(p.R + p.S) and out.cost_usd[
            0
        ] == pytest.approx(2 * SPOT * (p.R + p.S))


def test_checkpoint_writes_slow_the_work():
    job = replace(JOB, inputs=replace(JOB.inputs, checkpoint_write_h=0.25))
    out = replay(job, _up([(True, 1)], 80), 5 / 60, "spot")
    assert out.wall_h[0] == pytest.approx(0.5 + 20 * 1.25)


def test_windows_resample_and_wrap():
    counts = np.array([4, 4, 2, 4] * 10)  # a 4-node trace at 60 s ticks
    up, step = windows(counts, 1 / 60, nodes=3, starts=2, horizon_h=1.0)
    assert step == pytest.approx(5 / 60) and up.shape == (2, 12)
    assert not up.any()  # every 5-minute step holds a tick with only 2 up
    up, _ = windows(counts, 1 / 60, nodes=2, starts=1, horizon_h=1.0)
    assert up.all()  # 40 ticks read cyclically for an hour


def test_the_shipped_traces_load_with_their_sources():
    traces = load_traces()
    assert len(traces) == 23 and {t.cloud for t in traces} == {"aws", "gcp"}
    assert all(t.source and t.gap_h > 0 and t.up.max() <= t.nodes for t in traces)
    assert {t.nodes for t in traces} == {1, 4, 16}
    assert SHIPPED_TRACES.is_dir()


def test_simulate_traces_end_to_end(run):
    result = run(
        "simulate", SCENARIOS / "pretrain-deadline.yaml", "--traces", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (
        row["market"] == "spot_fallback"
        and row["samples"] == 40 * len(row["traces"]) > 0
    )
    plan, progress = row["spot_fallback"], row["uniform_progress"]
    # the fallback always finishes
    assert 0 <= plan["deadline_hit_rate"] <= 1 and plan["unfinished"] == 0
    assert (
        row["omniscient_cost_usd"]
        <= min(plan["cost_usd"], progress["cost_usd"], row["on_demand_cost_usd"]) + 0.01
    )
    assert plan["regret"] == pytest.approx(
        plan["cost_usd"] / row["omniscient_cost_usd"] - 1
    )
    print(
        f"pretrain-deadline on {len(row['traces'])} traces: planned ${row['planned']['cost_usd']:,.0f}, "
        f"realised ${plan['cost_usd']:,.0f} (regret {plan['regret']:+.1%}), Uniform Progress "
        f"${progress['cost_usd']:,.0f} ({progress['regret']:+.1%}), on demand ${row['on_demand_cost_usd']:,.0f}"
    )


@pytest.mark.slow  # 10 s: a scale test
def test_a_horizon_of_decades_is_cut_at_max_steps(run, scenario_file):
    """A deadline of a million hours asked for 40 x 12 million steps (about 20 GB) before the replay was cut."""
    assert windows(np.array([4] * 10), 1 / 60, nodes=1, starts=3, horizon_h=1e6)[
        0
    ].shape == (3, MAX_STEPS)
    text = (SCENARIOS / "pretrain-deadline.yaml").read_text()
    assert "time_budget: 84h" in text
    path = scenario_file(text.replace("time_budget: 84h", "time_budget: 1000000h"))
    result = run("simulate", path, "--traces", "--format", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["replayed_h"] == pytest.approx(MAX_STEPS * 5 / 60)
    # done long before the cut (plain spot now)
    assert row["market"] == "spot" and row["spot"]["unfinished"] == 0
    table = run("simulate", path, "--traces").stdout
    assert f"replayed for its first {MAX_STEPS * 5 / 60:,.0f} h only" in table


def test_own_traces_and_bad_ones(run, tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "always.json").write_text(
        json.dumps({"metadata": {"gap_seconds": 300}, "data": [64] * 4000})
    )
    result = run(
        "simulate",
        SCENARIOS / "pretrain-deadline.yaml",
        "--traces",
        folder,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["traces"] == ["always"] and row["samples"] == 40
    # never preempted: the failure-free run; hindsight would not checkpoint at all, only at the end
    plan = json.loads(
        run("solve", SCENARIOS / "pretrain-deadline.yaml", "--format", "json").stdout
    )
    p = segment_plan(
        inputs_from_assignment(AssignmentRecord.model_validate(plan["assignments"][0]))
    )
    assert row["spot_fallback"]["wall_h"] == pytest.approx(p.T0, abs=5 / 60)
    assert row["spot_fallback"]["regret"] == pytest.approx(
        (p.k - 1) * p.C / (p.T0 - (p.k - 1) * p.C), rel=0.01
    )
    (folder / "bad.json").write_text(
        json.dumps({"metadata": {"gap_seconds": 300}, "data": [1, -1]})
    )
    result = run("simulate", SCENARIOS / "pretrain-deadline.yaml", "--traces", folder)
    assert result.exit_code == 2
    assert (
        "bad.json" in result.stderr
        and "data[1]" in result.stderr
        and "Traceback" not in result.output
    )
    result = run("simulate", SCENARIOS / "quarter-team.yaml", "--traces")
    assert result.exit_code == 2 and "quarter" in result.stderr


@pytest.mark.parametrize(
    "trace, fragment",
    [
        (
            '{"metadata": {"gap_seconds": 300}, "data": [' + "9" * 30 + "]}",
            "data[0]: expected a whole number of nodes up",
        ),
        (
            '{"metadata": {"gap_seconds": Infinity}, "data": [16, 0, 16]}',
            "metadata.gap_seconds: expected a number",
        ),
        (
            '{"metadata": {"gap_seconds": 1e300}, "data": [16, 0, 16]}',
            "metadata.gap_seconds: expected a number",
        ),
        (
            '{"metadata": {"gap_seconds": 1e-300}, "data": [16, 0, 16]}',
            "span less than the replay's 300 s step",
        ),
        (
            '{"metadata": {"gap_seconds": 32}, "data": [16]}',
            "1 tick(s) of 32 s span less than the replay's 300 s step",
        ),
        (
            '{"metadata": {"gap_seconds": 300, "nodes": '
            + "9" * 30
            + '}, "data": [16]}',
            "metadata.nodes",
        ),
        # what Python's JSON reader itself refuses: nesting past the recursion limit, integers of thousands of digits
        (
            '{"metadata": {"gap_seconds": 300}, "data": [16], "x": '
            + "[" * 100_000
            + "]" * 100_000
            + "}",
            "nested deeper than 64 levels",
        ),
        (
            '{"metadata": {"gap_seconds": 300}, "data": [1' + "0" * 5000 + "]}",
            "an integer of thousands of digits",
        ),
    ],
)
def test_a_trace_the_replay_cannot_step_through_is_one_located_line(
    run, tmp_path, trace, fragment
):
    """A node count past int64, an infinite gap, or a trace shorter than one replay step was a traceback."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "odd.json").write_text(trace.replace("16", "64"))
    result = run("simulate", SCENARIOS / "pretrain-deadline.yaml", "--traces", folder)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1
        and lines[0].startswith(f"error: {folder / 'odd.json'}: ")
        and fragment in lines[0]
    ), lines


def test_the_loader_knows_the_replay_step():
    from planner.economics.trace_replay import STEP_H
    from planner.load.traces import REPLAY_STEP_S

    assert REPLAY_STEP_S == round(STEP_H * 3600)


def _folder_with(tmp_path, name: str):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "always.json").write_text(
        json.dumps({"metadata": {"gap_seconds": 300}, "data": [64] * 40})
    )
    return folder


def test_a_trace_that_is_a_pipe_folder_or_device_is_one_line_not_a_hang(tmp_path):
    """Traces were read with Path.read_text: a pipe named *.json blocked `planner simulate --traces` for
    ever and /dev/zero read until memory ran out. They go through the capped reader every input file uses."""
    import os
    import subprocess
    import sys

    from planner.errors import PlannerError

    pipe = _folder_with(tmp_path, "pipe")
    os.mkfifo(pipe / "waiting.json")
    code = "from planner.load.traces import load_traces; import sys; load_traces(sys.argv[1])"
    out = subprocess.run(
        [sys.executable, "-c", code, str(pipe)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        out.returncode == 1
        and "expected a regular file (trace file), found a device, pipe or socket"
        in out.stderr
    )
    device = _folder_with(tmp_path, "device")
    (device / "zero.json").symlink_to("/dev/zero")
    with pytest.raises(PlannerError, match="found a device, pipe or socket"):
        load_traces(device)
    folder = _folder_with(tmp_path, "folder")
    (
        folder / "nested.json"
    ).mkdir()  # a subfolder whatever its name: read like any other
    (folder / "nested.json" / "inner.json").write_text(
        (folder / "always.json").read_text()
    )
    assert [t.name for t in load_traces(folder)] == ["always", "inner"]


def test_traces_are_read_as_they_are_found(tmp_path, monkeypatch):
    """`--traces /` (or a home folder) listed every *.json below it before reading the first: minutes of walking
    to fail on a file that is not a trace. Now the first such file stops it, the folder's own files before its
    subfolders'; a folder of traces is read in name order, subfolders included (Can't Be Late's repository nests
    them), and more than MAX_TRACE_FILES of them is refused."""
    import os

    from planner.errors import PlannerError
    from planner.load import traces

    folder = _folder_with(tmp_path, "home")
    for number in range(30):
        _folder_with(folder, f"project{number:02d}")
    (folder / "package.json").write_text('{"name": "not a trace"}')
    walked, real_walk = [], os.walk

    def walk(top):
        for found in real_walk(top):
            walked.append(found[0])
            yield found

    monkeypatch.setattr(os, "walk", walk)
    with pytest.raises(PlannerError, match="not a trace|expected") as caught:
        load_traces(folder)
    assert "package.json" in str(caught.value) and walked == [str(folder)]
    (folder / "package.json").unlink()
    assert [t.name for t in load_traces(folder)] == ["always"] * 31
    monkeypatch.setattr(traces, "MAX_TRACE_FILES", 30)
    with pytest.raises(PlannerError, match="more than 30 \\*.json files below it"):
        load_traces(folder)


def test_a_trace_above_the_input_cap_is_refused_before_it_is_read(
    run, tmp_path, monkeypatch
):
    from planner.load import yaml as yamlio

    # the CLI's --max-input-size sets it
    monkeypatch.setattr(yamlio, "MAX_FILE_BYTES", yamlio.MAX_FILE_BYTES)
    folder = _folder_with(tmp_path, "big")
    (folder / "long.json").write_text(
        json.dumps({"metadata": {"gap_seconds": 300}, "data": [1] * (1 << 20)})
    )
    result = run(
        "--max-input-size",
        "1MiB",
        "simulate",
        SCENARIOS / "pretrain-deadline.yaml",
        "--traces",
        folder,
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1
        and f"{folder / 'long.json'}" in lines[0]
        and "refusing input above 1 MiB" in lines[0]
    )
    monkeypatch.setattr(yamlio, "MAX_FILE_BYTES", 64 * 2**20)
    assert [t.name for t in load_traces(folder)] == [
        "always",
        "long",
    ]  # under the default cap it is read


def test_a_provider_without_traces_is_replayed_on_every_trace_as_the_planner_holds_it(
    run, tmp_path
):
    """`simulate --traces` reads the traces the planner held the plan to (`spot_evidence.covering`): an Azure
    spot plan, where no Azure trace is shipped, on every provider's, said under the table."""
    text = (SCENARIOS / "lora-finetune.yaml").read_text()
    assert "defaults:" not in text
    path = tmp_path / "lora.yaml"
    path.write_text(
        text
        + "defaults: {spot_evidence: fitted}  # keep the fitted process's Azure spot plan\n"
    )
    plan = tmp_path / "plan.json"
    assert run("solve", path, "--format", "json", "-o", plan).exit_code == 0
    (a,) = json.loads(plan.read_text())["assignments"]
    assert a["provider"] == "azure" and a["market"] == "spot"
    rows = json.loads(
        run("simulate", path, "--plan", plan, "--traces", "--format", "json").stdout
    )
    (row,) = rows
    assert (
        len(row["traces"]) == len(load_traces())
        and row["other_providers"]
        and "skipped" not in row
    )
    text = run("simulate", path, "--plan", plan, "--traces").stdout
    assert (
        "no trace of their provider: support-lora replayed on every provider's traces as a stand-in"
        in text
    )
