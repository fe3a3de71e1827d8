"""`planner simulate --plan FILE` keeps the bad-input promise whatever the plan or schedule file says.

A real plan (jobs on spot and on demand, and a serving endpoint; another with a spot_fallback job) and a real
schedule are written by `planner solve` / `planner batch`. Read back, each replays to exactly the numbers of the
plan simulated in place. Then every top-level key, and every key and first list item of the first assignment,
endpoint, run and reservation (recursively), is mutated one at a time: removed, or its value replaced by 0, -1,
NaN, 1e308, "x", [], {} or null. Every mutant must replay (exit 0) or be refused with exit status 2 and one line
on stderr naming the file: no traceback, no hang. The jobs of a mutant the loader takes are also replayed on a
spot availability trace (`--traces`).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import signal
import time

import pytest
from click.testing import CliRunner
from conftest import SCENARIOS

from planner.cli import main

REMOVED = object()
MUTATIONS = (REMOVED, 0, -1, math.nan, 1e308, "x", [], {}, None)
SECONDS_PER_REPLAY = 20
"""A mutant's replay of 100 trials takes milliseconds; one that runs this long is a hang."""
NOT_REPLAYED = {"memory", "parallelism", "alternatives", "peak"}
"""Blocks of a plan no replay reads: mutated whole, not key by key (the suite stays quick)."""
TRACE = {
    "metadata": {"gap_seconds": 3600, "cloud": "aws", "nodes": 16},
    "data": ([16] * 30 + [0] * 4 + [16] * 20 + [9] * 6) * 3,
}
"""An hourly spot availability trace, so a `--traces` replay takes milliseconds."""

# scenario or quarter file, the command that writes its plan, the lists whose first entry is mutated, --traces too
CASES = {
    "jobs-and-endpoint": (
        SCENARIOS / "serving-team.yaml",
        ("solve", "--time-limit", "10"),
        ("assignments", "endpoints"),
        True,
    ),
    "spot-fallback": (
        SCENARIOS / "pretrain-deadline.yaml",
        ("solve", "--time-limit", "10"),
        ("assignments",),
        True,
    ),
    "schedule": (
        SCENARIOS / "quarter-launch.yaml",
        ("batch", "--time-limit", "5", "--no-timings"),
        ("runs", "reservations"),
        False,
    ),
}


class Hang(Exception):
    pass


def sampled_paths(data: dict, lists: tuple[str, ...]) -> list[tuple]:
    """Key paths to mutate: every top-level key, and every key and first list item (recursively) of the first
    entry (the first scheduled run) of each of `lists`: a first item stands for the others."""
    paths: list[tuple] = [(key,) for key in data]

    def walk(node, path: tuple) -> None:
        paths.append(path)
        if isinstance(node, dict) and path[-1] not in NOT_REPLAYED:
            for key, value in node.items():
                walk(value, path + (key,))
        elif isinstance(node, list) and node:
            walk(node[0], path + (0,))

    for key in lists:
        entries = data.get(key) or []
        first = next(
            (i for i, e in enumerate(entries) if e.get("scheduled", True)), None
        )
        if first is not None:
            walk(entries[first], (key, first))
    return list(dict.fromkeys(paths))


def mutate(data: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(data)
    parent = out
    for part in path[:-1]:
        parent = parent[part]
    if value is REMOVED:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(value)
    return out


def label(path: tuple, value) -> str:
    return (
        ".".join(map(str, path))
        + "="
        + ("removed" if value is REMOVED else json.dumps(value))
    )


def invoke(args: list[str]):
    """The CLI in this process, stopped after SECONDS_PER_REPLAY (the exception is then `Hang`)."""

    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_REPLAY)
    try:
        return CliRunner().invoke(main, args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(result, plan) -> str:
    """'ok', 'refused' (exit 2, one line on stderr naming the file), or how the promise broke."""
    if isinstance(result.exception, Hang):
        return "hang"
    if result.exit_code == 0:
        return "ok"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if (
        result.exit_code == 2
        and len(lines) == 1
        and lines[0].startswith(f"error: {plan}")
    ):
        return "refused"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"{type(result.exception).__name__}: {result.exception}"[:200]
    return f"exit {result.exit_code}: {result.stderr.strip()[:200]}"


@functools.cache
def cached(function):
    return functools.lru_cache(maxsize=None)(function)


@pytest.fixture
def files_read_once(monkeypatch):
    """Each scenario and quarter file is read once for all its mutants (only the plan file changes)."""
    import planner.load.quarter
    import planner.load.scenario
    import planner.load.yaml

    for module, name in (
        (planner.load.scenario, "load_scenario"),
        (planner.load.quarter, "load_quarter"),
        (planner.load.yaml, "load_yaml"),
    ):
        monkeypatch.setattr(module, name, cached(getattr(module, name)))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """written(case) -> (path of the case's plan or schedule as its command wrote it, its data)."""
    files: dict = {}

    def write(case: str):
        if case not in files:
            source, (command, *options), _, _ = CASES[case]
            path = tmp_path_factory.mktemp(case) / "plan.json"
            result = CliRunner().invoke(
                main,
                [command, str(source), "--format", "json", "-o", str(path), *options],
            )
            assert result.exit_code == 0, result.output
            files[case] = json.loads(path.read_text())
        return copy.deepcopy(files[case])

    return write


@pytest.mark.parametrize(
    "case",
    [
        c if c == "schedule" else pytest.param(c, marks=pytest.mark.slow)  # 15 s each
        for c in sorted(CASES)
    ],
)
def test_every_mutant_of_a_plan_file_replays_or_is_one_located_line(
    case, written, tmp_path, files_read_once
):
    source, (_, _, time_limit, *_), lists, traces = CASES[case]
    data = written(case)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    replays = [["simulate", str(source), "--trials", "100", "--format", "json"]]
    if traces:
        (tmp_path / "traces").mkdir()
        (tmp_path / "traces" / "hourly.json").write_text(json.dumps(TRACE))
        replays.append(replays[0] + ["--traces", str(tmp_path / "traces")])
    for args in replays:  # read back, the plan replays to exactly the numbers of the plan simulated in place
        in_place = invoke(args + ["--time-limit", time_limit])
        read_back = invoke(args + ["--plan", str(plan)])
        assert read_back.exit_code == in_place.exit_code == 0, (
            read_back.output + in_place.output
        )
        assert read_back.stdout == in_place.stdout
    broken, counts, began = [], {"ok": 0, "refused": 0}, time.perf_counter()
    for path in sampled_paths(data, lists):
        for value in MUTATIONS:
            plan.write_text(json.dumps(mutate(data, path, value)))
            # the first replay's outcome, which the --traces replay follows
            result = None
            for args in replays:
                if args is not replays[0] and (
                    path[0] != "assignments" or result != "ok"
                ):
                    continue  # --traces replays the jobs alone, once the loader took the plan
                result = outcome(invoke(args + ["--plan", str(plan)]), plan)
                if result in counts:
                    counts[result] += 1
                else:
                    broken.append(
                        f"{label(path, value)}{' --traces' if '--traces' in args else ''}: {result}"
                    )
    print(
        f"{case}: {sum(counts.values()) + len(broken)} replays of mutants in {time.perf_counter() - began:.1f} s:"
        f" {counts}, broken {len(broken)}"
    )
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    "case, path, value, fragments",
    [
        (
            "jobs-and-endpoint",
            ("assignments", 0, "inputs", "failure_rate_per_h"),
            math.nan,
            [
                "assignments[0].inputs.failure_rate_per_h: input should be a finite number (got nan)"
            ],
        ),
        (
            "jobs-and-endpoint",
            ("assignments", 0, "inputs", "failure_rate_per_h"),
            50.0,  # e^34 failures per segment
            [
                "assignments[0].inputs: the job is expected to fail",
                "expected at most 10,000",
            ],
        ),
        (
            "jobs-and-endpoint",
            ("assignments", 0, "nodes"),
            1000,
            [
                "assignments[0].nodes: 1000 nodes of 8 GPUs is 8000 GPUs, outside the workload's gpus 1-64"
            ],
        ),
        (
            "jobs-and-endpoint",
            ("assignments", 0, "workload"),
            "support-bot",  # the endpoint is not a job
            [
                "assignments[0].workload: workload 'support-bot' is an endpoint (kind: serving), planned under endpoints"
            ],
        ),
        (
            "jobs-and-endpoint",
            ("endpoints", 0, "workload"),
            "tune-8b",
            [
                "endpoints[0].workload: endpoint 'tune-8b' is not a serving workload of the scenario (those: support-bot)"
            ],
        ),
        (
            "jobs-and-endpoint",
            ("endpoints", 0, "periods", 0, "hours"),
            "0-12",
            ["endpoints[0].periods: periods ['0-12'] are not the traffic's ['0-24']"],
        ),
        (
            "jobs-and-endpoint",
            ("endpoints", 0, "periods", 0, "pools", 0, "share_of_requests"),
            [0.5, 0.5],
            [
                "endpoints[0].periods[0].pools[0].share_of_requests: 2 values for the traffic's 1 request size(s)"
            ],
        ),
        (
            "spot-fallback",
            ("assignments", 0, "inputs", "time_budget_h"),
            1.0,
            [
                "assignments[0].inputs.time_budget_h: a time budget of 1 h leaves no room for spot"
            ],
        ),
        (
            "spot-fallback",
            ("assignments", 0, "inputs", "time_budget_h"),
            None,
            [
                "assignments[0].inputs.time_budget_h: expected a number of hours, got none"
            ],
        ),
        (
            "schedule",
            ("runs", 0, "pool"),
            5,
            [
                "runs[0].pool: expected -1 for no reservation or the index of a reservation entry, 0 to 0; got 5"
            ],
        ),
        (
            "schedule",
            ("reservations", 0, "nodes"),
            1000,
            [
                "reservations[0].nodes: 1000 nodes bought of reservation 'feb-p5', which offers at most"
            ],
        ),
        (
            "schedule",
            ("runs", 0, "end"),
            "2027-01-03T00:00",
            ["runs[0].end: ends (2027-01-03T00:00:00+00:00) before it"],
        ),
        (
            "schedule",
            ("runs", 1, "run"),
            "assistant-sft",
            ["runs[1].run: run 'assistant-sft' is scheduled twice"],
        ),
        (
            "schedule",
            ("runs", 0, "inputs"),
            REMOVED,
            [
                "runs[0].inputs: missing required key 'inputs' (a file from this version of `planner batch --format json`)"
            ],
        ),
    ],
)
def test_what_a_refused_plan_file_says(
    written, tmp_path, files_read_once, case, path, value, fragments
):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(mutate(written(case), path, value)))
    result = invoke(
        ["simulate", str(CASES[case][0]), "--plan", str(plan), "--trials", "100"]
    )
    assert outcome(result, plan) == "refused", result.output
    line = result.stderr.strip()
    print(line)
    assert line.startswith(f"error: {plan}: {fragments[0]}"), line
    assert all(fragment in line for fragment in fragments[1:]), line
