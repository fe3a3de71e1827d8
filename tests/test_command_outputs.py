"""Every command that prints a table also writes CSV and takes `-o`: `estimate` (with `--top N`) and `simulate`."""

from __future__ import annotations

import csv
import io
import json

from conftest import SCENARIOS
from test_bad_input import assert_one_line_error


def test_estimate_top_keeps_the_fastest_shapes_that_fit(run):
    every = json.loads(
        run("estimate", SCENARIOS / "team-quarter-mix.yaml", "--format", "json").stdout
    )
    top = json.loads(
        run(
            "estimate",
            SCENARIOS / "team-quarter-mix.yaml",
            "--top",
            "2",
            "--format",
            "json",
        ).stdout
    )
    jobs = {r["workload"] for r in every if "work_h" in r}
    for name in jobs:
        fits = sorted(r["work_h"] for r in every if r["workload"] == name and r["fits"])
        kept = sorted(r["work_h"] for r in top if r["workload"] == name)
        assert kept == fits[:2]
    assert len(top) < len(every) / 4


def test_estimate_writes_csv_to_a_file(run, tmp_path):
    out = tmp_path / "estimate.csv"
    result = run(
        "estimate",
        SCENARIOS / "serving-chat.yaml",
        "--gpu",
        "H100",
        "--format",
        "csv",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert rows and {"gpu", "tensor_parallel", "max_requests_per_s"} <= set(rows[0])
    assert_one_line_error(
        run(
            "estimate",
            SCENARIOS / "serving-chat.yaml",
            "-o",
            SCENARIOS / "serving-chat.yaml",
        ),
        "refusing to overwrite an input file",
    )


def test_simulate_writes_csv_jobs_then_endpoints(run, tmp_path):
    out = tmp_path / "sim.csv"
    result = run(
        "simulate",
        SCENARIOS / "serving-team.yaml",
        "--trials",
        "200",
        "--format",
        "csv",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.stderr
    jobs, endpoints = out.read_text().split("\n\n")
    assert {r["workload"] for r in csv.DictReader(io.StringIO(jobs))} == {
        "tune-70b",
        "tune-8b",
    }
    assert [r["endpoint"] for r in csv.DictReader(io.StringIO(endpoints))] == [
        "support-bot"
    ]


def test_simulate_a_quarter_as_csv(run):
    result = run(
        "simulate",
        SCENARIOS / "quarter-budget.yaml",
        "--trials",
        "200",
        "--format",
        "csv",
    )
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows and "p_on_time" in rows[0]
