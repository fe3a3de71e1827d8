"""The bad-input promise under hostile and odd input, interrupts, exit codes, big files, byte-identical output.

Every input gets exit 0, 1 or 2; for 2, one located line on stderr and no traceback. The fuzz test
mutates the shipped examples (hypothesis, a fixed budget of examples so the suite stays quick;
`python benchmarks/fuzz_inputs.py` runs the same mutations for longer).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SCENARIOS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.load.scenario import load_scenario
from planner.load.yaml import MAX_DEPTH, load_yaml
from planner.report.render import _json_default, to_json
from planner.report.solve import plan_json
from planner.solve.pipeline import make_plan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from fuzz_inputs import MUTATIONS, mutate  # noqa: E402

PLANNER = [sys.executable, "-m", "planner.cli"]


def one_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    "nested", ["[" * 5000 + "]" * 5000, "{a: " * 3000 + "1" + "}" * 3000]
)
@pytest.mark.parametrize("command", ["validate", "solve", "batch"])
def test_deep_nesting_is_refused_before_recursion(run, tmp_path, nested, command):
    path = tmp_path / "deep.yaml"
    path.write_text(
        f"name: deep\nhorizon: {{start: 2027-01-01, end: 2027-02-01, step: 6h}}\nruns: {nested}\n"
        if command == "batch"
        else f"name: deep\nworkloads: {nested}\n"
    )
    line = one_line(run(command, path))
    assert f"{path}:" in line and f"deeper than {MAX_DEPTH}" in line


ONE_JOB = """\
    name: one-job
    catalogs: [lambda]
    workloads:
      - name: a
        kind: training
        memory: {{per_gpu: 20GiB}}
        work: {{gpu_hours: 10, reference_gpu: A100-80GB}}
    {more}
    """


@pytest.mark.parametrize(
    "extreme",
    [
        "overrides: [{spot_price_multiplier: 1e308}]",
        "constraints: {budget: 1e308}",
        "overrides: [{on_demand_price_multiplier: .inf}]",
        "defaults: {hardware_failure_per_gpu_h: 1e300}",
    ],
)
def test_extreme_numbers_are_located_errors(run, scenario_file, extreme):
    path = scenario_file(ONE_JOB.format(more=extreme))
    line = one_line(run("solve", path))
    assert f"{path}:8" in line


def test_checkpoints_kept_past_ten_thousand_are_a_located_error(run, scenario_file):
    """`keep: 1e10` planned a LoRA whose storage alone cost $50,000 (and a $1.7M job with a full model's
    checkpoints); ten thousand is one an hour for over a year."""

    def kept(keep: int) -> str:
        return ONE_JOB.format(more=f"    checkpoint: {{size: 1GiB, keep: {keep}}}")

    line = one_line(run("solve", scenario_file(kept(10_000_000_000))))
    assert (
        ":8 (workloads[0].checkpoint.keep)" in line
        and "less than or equal to 10000" in line
    )
    assert run("validate", scenario_file(kept(10_000))).exit_code == 0


def test_a_priority_past_a_thousand_is_a_located_error(run, tmp_path):
    """A priority of 1e14 made the batch objective leave 64-bit integers: MODEL_INVALID and 'raise
    --time-limit'. Now the run's priority is refused at its line."""
    text = (REPO / "scenarios" / "quarter-budget.yaml").read_text()
    assert "    priority: 5\n" in text
    path = tmp_path / "priority.yaml"
    path.write_text(
        text.replace("    priority: 5\n", "    priority: 100000000000000\n")
    )
    line = one_line(run("batch", path))
    line_number = text.splitlines().index("    priority: 5") + 1
    assert (
        f"{path}:{line_number} (runs[3].priority)" in line
        and "less than or equal to 1000" in line
    )
    path.write_text(text.replace("    priority: 5\n", "    priority: 1000\n"))
    assert run("validate", path).exit_code == 0


def test_a_runaway_cost_is_a_reason_not_a_solver_failure(run, scenario_file):
    path = scenario_file("""\
        name: runaway
        catalogs: [aws]
        workloads:
          - name: months-without-checkpoints
            kind: training
            model: llama-3-70b
            work: {tokens: 15T}
            gpus: {min: 1024, max: 1024}
            interruption_tolerance: none
            allow: {instance_types: [p5.48xlarge]}
        constraints: {node_limits: {aws/us-east-1/p5.48xlarge: 128}}
        """)
    result = run("solve", path)
    assert result.exit_code == 1
    assert "practically never" in result.stdout and "finishes" in result.stdout


def test_yaml_oddities_give_one_clean_line(run, tmp_path):
    anchors = tmp_path / "anchors.yaml"
    anchors.write_text(
        "name: x\nworkloads:\n  - &a {name: a, kind: training}\n  - &a {name: b, kind: training}\n"
    )
    assert "duplicate anchor" in one_line(run("validate", anchors))
    # the YAML scanner breaks lines at U+2028: report the editor's line
    separator = tmp_path / "u2028.yaml"
    separator.write_text(
        'name: x\nworkloads:\n  - name: a\n    description: "a\u2028b"\n    kind: trainingz\n',
        encoding="utf-8",
    )
    assert f"{separator}:5 (workloads[0].kind)" in one_line(run("validate", separator))
    # a U+2028 inside a value is escaped, so the error stays one line
    offers = tmp_path / "odd.csv"
    offers.write_text(
        "provider,region,instance_type,gpu,gpus_per_node,gpu_vram_gib,intra_node,intra_node_gbs,"
        "inter_node,on_demand_usd_h\nlambda,us,x,H100\u2028X,1,80,pcie,64,none,2\n",
        encoding="utf-8",
    )
    scenario = tmp_path / "odd.yaml"
    scenario.write_text(
        "name: x\ncatalogs: [./odd.csv]\nworkloads:\n  - {name: a, kind: training, memory: {per_gpu: 2GiB},"
        " work: {gpu_hours: 1, reference_gpu: A100-80GB}}\n"
    )
    line = one_line(run("validate", scenario))
    # a name is refused with it
    assert "H100\\u2028X" in line and "non-printing characters" in line
    control = tmp_path / "control.yaml"
    control.write_bytes(b"name: x\x01\nworkloads: []\n")
    assert "U+0001" in one_line(run("validate", control))


@pytest.mark.parametrize("key", ["[a]: 1", "{a: 1}: 2", "? [a, b]\n: 3"])
@pytest.mark.parametrize("command", ["validate", "solve", "batch"])
def test_complex_yaml_keys_are_refused(run, tmp_path, key, command):
    path = tmp_path / "keys.yaml"
    path.write_text(f"name: tiny\ncatalogs: [aws]\n{key}\n")
    assert (
        one_line(run(command, path))
        == f"error: {path}:3: mapping keys must be plain strings, not a list or mapping"
    )


@pytest.mark.parametrize(
    "text, where, fragment",
    [
        (
            "horizon: {start: 2027-01-04, end: 2027-04-31, step: 6h}\n",
            "3 (horizon.end)",
            "day is out of range",
        ),
        (
            "horizon:\n  start: 2027-13-01\n",
            "4 (horizon.start)",
            "month must be in 1..12",
        ),
        (
            "runs:\n  - release: 2027-01-04 25:00:00\n",
            "4 (runs[0].release)",
            "hour must be in 0..23",
        ),
    ],
)
def test_impossible_unquoted_dates_are_located(run, tmp_path, text, where, fragment):
    path = tmp_path / "dates.yaml"
    path.write_text("name: q\ncatalogs: [aws]\n" + text)
    line = one_line(run("validate", path))
    assert (
        line.startswith(f"error: {path}:{where}: ")
        and "is not a valid date or date-time" in line
    ), line
    assert fragment in line


@pytest.mark.parametrize(
    "step, steps, least", [("1s", "7,862,400", "30m"), ("15m", "8,736", "30m")]
)
@pytest.mark.parametrize("command", ["validate", "batch", "simulate"])
def test_a_calendar_of_too_many_steps_is_refused_at_its_step(
    run, tmp_path, step, steps, least, command
):
    """`step: 1s` over a quarter made the schedule's bound ask for terabytes (a column per start step of each
    run a reservation may carry, as long as the run; 15-minute steps took 11 GB): refused at load, in a
    second, naming the least step that fits."""
    from planner.load.quarter import MAX_STEPS

    text = (REPO / "scenarios" / "quarter-team.yaml").read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  step: 6h"))
    path = tmp_path / "fine.yaml"
    path.write_text(text.replace(lines[at], f"  step: {step}"))
    started = time.perf_counter()
    line = one_line(run(command, path))
    assert time.perf_counter() - started < 30
    assert line.startswith(
        f"error: {path}:{at + 1} (horizon.step): a horizon of {steps} steps of {step}"
    )
    assert (
        f"at most {MAX_STEPS:,} steps" in line
        and f"use a longer step, {least} or more" in line
    )
    path.write_text(text.replace(lines[at], f"  step: {least}"))
    assert run("validate", path).exit_code == 0  # the step it names fits


def test_a_missing_catalog_is_located_at_the_line_that_names_it(run, scenario_file):
    path = scenario_file("""\
        name: x
        catalogs:
          - lambda
          - ./missing.csv
        workloads:
          - {name: a, kind: training, memory: {per_gpu: 2GiB}, work: {gpu_hours: 1, reference_gpu: A100-80GB}}
        """)
    line = one_line(run("validate", path))
    assert (
        f"{path}:4 (catalogs[1])" in line
        and "missing.csv" in line
        and "no such offers catalog" in line
    )


@pytest.mark.slow
def test_alias_bombs_count_expansions_not_nodes(tmp_path):
    """A large file without aliases loads; a small one whose aliases expand beyond the limit does not."""
    from planner.errors import PlannerError

    big = tmp_path / "big.yaml"
    big.write_text(
        "name: big\nworkloads:\n"
        + "".join(
            f"  - {{name: w{i}, kind: training, memory: {{per_gpu: 2GiB}}, work: {{gpu_hours: 1, reference_gpu: A100-80GB}}}}\n"
            for i in range(20_000)
        )
    )
    started = time.perf_counter()
    assert len(load_yaml(big)["workloads"]) == 20_000
    assert time.perf_counter() - started < 60
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"] + [
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]"
        for p, c in zip("abcdef", "bcdefg")
    ]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(bomb) + "\n")
    with pytest.raises(PlannerError, match="aliases expand"):
        load_yaml(path)


@pytest.mark.parametrize(
    "command, file",
    [("solve", "team-quarter-mix.yaml"), ("batch", "quarter-budget.yaml")],
)
def test_same_input_same_bytes(run, tmp_path, command, file):
    outputs = []
    for i in range(2):
        target = tmp_path / f"{i}.json"
        assert (
            run(
                command,
                SCENARIOS / file,
                "--format",
                "json",
                "--no-timings",
                "-o",
                target,
            ).exit_code
            == 0
        )
        outputs.append(target.read_bytes())
    assert outputs[0] == outputs[1]
    assert b"solve_report" not in outputs[0]


def test_whatif_same_input_same_bytes(run, tmp_path):
    outputs = [
        run(
            "whatif",
            SCENARIOS / "lora-finetune.yaml",
            "--spot-price",
            "0.5,1,2",
            "--format",
            "json",
            "--processes",
            "1",
        ).stdout
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1] and json.loads(outputs[0])["points"]


def test_batch_time_limit_returns_at_least_the_greedy_schedule(run):
    result = run(
        "batch",
        SCENARIOS / "quarter-team.yaml",
        "--time-limit",
        "2",
        "--format",
        "json",
        "--no-timings",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] in ("OPTIMAL", "FEASIBLE") and data["objective_usd"] > 0
    # on a busy machine two seconds can end with no bound (bound_usd null: a schedule CP-SAT only checked lends none)
    assert data["bound_usd"] is None or data["objective_usd"] >= data["bound_usd"] > 0
    assert all(
        r["scheduled"]
        for r in data["runs"]
        if r["run"] in {"atlas-pretrain", "coder-pretrain"}
    )


def _interrupt(
    args: list[str], after_s: float, tmp_path: Path
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        PLANNER + args,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    time.sleep(after_s)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(args, process.returncode, out, err)


_SOLVE_THEN_INTERRUPT = """
import os, signal, sys, threading, time
from ortools.sat.python import cp_model
from planner.solve import cpsat

def hard_model(n):  # a search CP-SAT cannot finish in seconds
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, 10 * n, f"x{i}") for i in range(n)]
    model.add_all_different(xs)
    for i in range(n - 1):
        model.add(xs[i] + 2 * xs[i + 1] != 7 * n // 3 + i)
    model.maximize(sum((i % 7 + 1) * x * (1 if i % 2 else -1) for i, x in enumerate(xs)))
    return model

seen = []
signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
small = cp_model.CpModel()
small.maximize(small.new_int_var(0, 3, "x"))
assert cpsat.run(cp_model.CpSolver(), small) == cp_model.OPTIMAL
os.kill(os.getpid(), signal.SIGINT)  # after a solve: the handler must still be ours
time.sleep(0.2)
assert seen == [signal.SIGINT], seen

signal.signal(signal.SIGINT, signal.default_int_handler)
solver = cp_model.CpSolver()
solver.parameters.max_time_in_seconds = 60
solver.parameters.num_workers = 2
threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
started = time.perf_counter()
try:
    cpsat.run(solver, hard_model(60))
except KeyboardInterrupt:
    print(f"interrupted after {time.perf_counter() - started:.1f} s")
"""


def test_cp_sat_leaves_ctrl_c_to_the_command():
    """CP-SAT's own SIGINT handling left the default handler behind after a solve, so a Ctrl-C during a batch
    search killed the command with no message (status -2); a Ctrl-C during a search must stop it at once."""
    done = subprocess.run(
        [sys.executable, "-c", _SOLVE_THEN_INTERRUPT],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    seconds = float(done.stdout.split()[2])
    assert seconds < 10, done.stdout


_INTERRUPT_BESIDE_A_NATIVE_BOUND = """
import os, signal, sys, threading, time
SENT = sys.argv[3]  # when the Ctrl-C went, for the test to time the stop from
sys.argv = ["planner", "batch", sys.argv[1], "--format", "json", "-o", sys.argv[2]]  # the command, as a user runs it
import highspy
import numpy as np
from highspy import cb
import planner.batch.search as search

def model(rows=2000, columns=3000):
    rng = np.random.default_rng(0)
    dense = rng.random((rows, columns)) * (rng.random((rows, columns)) < 0.05)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = columns, rows
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = -rng.random(columns), np.zeros(columns), np.full(columns, 10.0)
    lp.row_lower_, lp.row_upper_ = np.full(rows, -highspy.kHighsInf), rng.random(rows) * 10
    column, row = np.nonzero(dense.T)  # column by column
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.searchsorted(column, np.arange(columns + 1))
    lp.a_matrix_.index_, lp.a_matrix_.value_ = row, dense[row, column]
    return lp

def native_bound(*args, stop=None, **options):
    # the LP bound beside the search, in HiGHS for good, calling back into Python as it iterates; the first
    # call back sends the Ctrl-C
    highs = highspy._Highs()
    highs.setOptionValue("output_flag", False)
    sent = []
    def back(kind, message, data_out, data_in, user_data):
        if not sent:
            with open(SENT, "w") as stamp:
                stamp.write(repr(time.time()))
            sent.append(os.kill(os.getpid(), signal.SIGINT))
    highs.setCallback(back, None)
    highs.startCallback(cb.HighsCallbackType.kCallbackSimplexInterrupt)
    highs.passModel(model())
    while True:
        highs.clearSolver()
        highs.run()

search.relax = native_bound
from planner.cli import main
main()
"""


def test_a_ctrl_c_beside_the_lp_bound_stops_at_once_with_status_130(tmp_path):
    """A Ctrl-C while `planner batch`'s LP bound is inside HiGHS: the command neither waits out the LP nor aborts
    in Python's shutdown (which ends a thread where it takes the GIL back, under HiGHS's C++ frames:
    "terminate called without an active exception", status 134 instead of 130)."""
    sent = tmp_path.parent / f"{tmp_path.name}-sent"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _INTERRUPT_BESIDE_A_NATIVE_BOUND,
            str(SCENARIOS / "quarter-team.yaml"),
            str(tmp_path / "out.json"),
            str(sent),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert done.stderr.strip().splitlines()[-1] == "interrupted", done.stderr[-2000:]
    assert "terminate" not in done.stderr and "Traceback" not in done.stderr
    # the LP never ends by itself: nothing waited for it (timed from the Ctrl-C, not from the start, which
    # spends 40 s or more of a loaded 2-core machine building the quarter's candidates)
    assert time.time() - float(sent.read_text()) < 10
    assert not list(tmp_path.iterdir())  # no output, nothing half-written


_HIGHS_THEN_INTERRUPT = """
import os, signal, threading, time
import numpy as np
from planner.solve import bound

rng = np.random.default_rng(0)  # a knapsack of 20 rows over 200 binaries: HiGHS's branch and bound takes minutes
weights = rng.random((20, 200))
row, col = np.nonzero(weights)
hard = bound._Matrices(-rng.random(200), bound._Sparse.of(row, col, weights[row, col], 20), weights.sum(axis=1) / 4,
                       bound._Sparse.of([], [], [], 0), np.array([]), 200)
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
started = time.perf_counter()
try:
    bound._run(hard, integer=True, options={"time_limit": 120.0})
except KeyboardInterrupt:
    print(f"interrupted after {time.perf_counter() - started:.1f} s, threads left {threading.active_count()}")
"""


def test_a_ctrl_c_stops_highs_at_once():
    """HiGHS (the LP bound, the branch and bound) never returns to Python while it searches, so a Ctrl-C during
    `planner solve`'s HiGHS phases waited for them (up to 10 s for the branch and bound); it stops them at once,
    and no HiGHS thread is left running."""
    done = subprocess.run(
        [sys.executable, "-c", _HIGHS_THEN_INTERRUPT],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0 and not done.stderr, (
        done.returncode,
        done.stderr[-2000:],
    )
    words = done.stdout.split()
    assert (
        words[:2] == ["interrupted", "after"]
        and float(words[2]) < 10
        and words[-1] == "1"
    ), done.stdout


def test_an_interrupt_python_cannot_pass_on_is_not_printed(monkeypatch):
    """A Ctrl-C that lands in a weak reference's callback inside an import is one Python can only report as
    "Exception ignored ... Traceback"; the command reports it as `interrupted` instead, and keeps every other
    such report."""
    from types import SimpleNamespace

    from planner import cli

    seen = []
    quiet = cli._unraisable(seen.append)
    monkeypatch.setattr(cli, "_interrupted", True)
    ours, other = (
        SimpleNamespace(exc_value=KeyboardInterrupt()),
        SimpleNamespace(exc_value=ValueError("x")),
    )
    quiet(ours)
    quiet(other)
    assert seen == [other]
    # not ours: a KeyboardInterrupt nobody sent is reported
    monkeypatch.setattr(cli, "_interrupted", False)
    quiet(ours)
    assert seen == [other, ours]


@pytest.mark.parametrize(
    "command, file, after_s",
    [
        ("solve", "team-quarter-mix.yaml", 0.3),  # during start-up and the lazy imports
        ("solve", "team-quarter-mix.yaml", 2.5),  # while building candidates
        ("batch", "quarter-team.yaml", 0.3),
        ("batch", "quarter-team.yaml", 4.0),
    ],
)
def test_sigint_is_one_line_and_status_130(tmp_path, command, file, after_s):
    target = tmp_path / "out.json"
    done = _interrupt(
        [command, str(SCENARIOS / file), "--format", "json", "-o", str(target)],
        after_s,
        tmp_path,
    )
    if (
        done.returncode == 0
    ):  # finished before the signal arrived: nothing to check but the output
        assert target.exists()
        return
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert (
        done.stderr.strip().splitlines()[-1] == "interrupted"
        and "Traceback" not in done.stderr
    )
    if (
        target.exists()
    ):  # the signal came after the atomic write: the output must be whole
        json.loads(target.read_text())
    assert not list(tmp_path.glob(".out.json.*"))  # nothing half-written


_SWALLOWED_INTERRUPT = """
import os, signal, sys
import planner.load.scenario as scenario
from planner.cli import main

load = scenario.load_scenario
def load_swallowing_an_interrupt(*args, **kwargs):  # as numpy.random's compiled import once did under load
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10**6):
            pass
    except KeyboardInterrupt:
        pass
    return load(*args, **kwargs)
scenario.load_scenario = load_swallowing_an_interrupt
sys.argv[0] = "planner"
main()
"""


def test_an_interrupt_swallowed_on_its_way_up_still_stops_the_command():
    """A Ctrl-C that lands in a compiled module's import can be swallowed there; the command then ran to the end
    and exited 0 as if never interrupted. It must still stop with `interrupted` and status 130."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _SWALLOWED_INTERRUPT,
            "estimate",
            str(SCENARIOS / "team-quarter-mix.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert (
        done.stderr.strip().splitlines()[-1] == "interrupted"
        and "Traceback" not in done.stderr
    )


_INTERRUPT_IN_EXEC = """
import os, signal
import planner.load.scenario as scenario

load = scenario.load_scenario
def load_interrupted_in_exec(*args, **kwargs):  # scipy's import runs `exec("from numpy import *")`
    exec("import os, signal, time; os.kill(os.getpid(), signal.SIGINT); time.sleep(5)")
    return load(*args, **kwargs)
scenario.load_scenario = load_interrupted_in_exec
import runpy
runpy.run_module("planner.cli", run_name="__main__")
"""


def test_an_interrupt_inside_a_library_s_exec_still_exits_130(tmp_path):
    """A Ctrl-C that lands in code a library runs through exec() of a string (scipy's import does) marks the
    interrupt unhandled in CPython, caught or not, and `python -m planner.cli` then killed itself with SIGINT at
    exit (status -2) after printing `interrupted`: 3 runs in 30 of `solve` interrupted near 2.8 s under load."""
    (tmp_path / "interrupt_in_exec.py").write_text(_INTERRUPT_IN_EXEC)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "interrupt_in_exec",
            "estimate",
            str(SCENARIOS / "lora-finetune.yaml"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert (
        done.stderr.strip().splitlines()[-1] == "interrupted"
        and "Traceback" not in done.stderr
    )


@pytest.mark.slow
def test_twenty_thousand_workloads_solve_end_to_end_within_the_time_limit(tmp_path):
    """A generated scenario of 20,000 workloads (fine-tunes, generation and stated-memory training under
    binding quotas) loads, builds its candidates and returns a plan (proven, or the best at the time
    limit with its gap), with no message but the output's and the price-age warning."""
    kinds = [
        "kind: fine_tuning, model: llama-3.1-8b, method: lora, work: {{tokens: {t}M}}, gpus: {{min: 1, max: 8}}",
        "kind: fine_tuning, model: mistral-7b, method: qlora, work: {{tokens: {t}M}}, gpus: {{min: 1, max: 4}}",
        "kind: batch_inference, model: llama-3.1-8b, generation: {{sequences: {t}k, batch: 64}}, "
        "gpus: {{min: 1, max: 16}}, interruption_tolerance: stateless",
        "kind: training, memory: {{model_states: 64GiB, activations: 12GiB}}, "
        "work: {{gpu_hours: {t}, reference_gpu: A100-80GB}}, gpus: {{min: 2, max: 16}}",
    ]
    lines = [
        "name: twenty-thousand",
        "catalogs: [aws, gcp, azure, lambda, runpod, nebius]",
        "workloads:",
    ]
    for i in range(20_000):
        body = kinds[i % 4].format(t=(50, 100, 200, 400)[i // 4 % 4])
        lines.append(
            f"  - {{name: w{i:05d}, {body}, time_budget: {(24, 48, 96, 168)[i // 16 % 4]}h}}"
        )
    lines += [
        "constraints:",
        "  gpu_quotas: {aws: 40000, azure: 20000, gcp: 20000, lambda: 20000, runpod: 10000, "
        "nebius: 10000}",
    ]
    path, target = tmp_path / "big.yaml", tmp_path / "plan.json"
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        PLANNER
        + [
            "solve",
            str(path),
            "--time-limit",
            "30",
            "--format",
            "json",
            "-o",
            str(target),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert [
        line
        for line in done.stderr.splitlines()
        if not line.startswith(("wrote ", "warning: prices as of"))
    ] == []
    data = json.loads(target.read_text())
    assert (
        data["status"] in ("OPTIMAL", "FEASIBLE") and len(data["assignments"]) == 20_000
    )
    assert data["objective_usd"] >= data["bound_usd"] > 0.995 * data["objective_usd"]


# ---------------------------------------------------------------- fuzzing the shipped examples

EXAMPLES = sorted(SCENARIOS.glob("*.yaml"))


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(
    example=st.sampled_from(EXAMPLES),
    mutation=st.sampled_from(sorted(MUTATIONS)),
    seed=st.integers(0, 10**6),
)
def test_fuzzed_examples_keep_the_promise(
    run, tmp_path_factory, example, mutation, seed
):
    path = tmp_path_factory.mktemp("fuzz") / example.name
    path.write_bytes(mutate(example.read_bytes(), mutation, seed))
    (path.parent / "catalogs").mkdir(exist_ok=True)
    for extra in (SCENARIOS / "catalogs").glob("*.csv"):
        (path.parent / "catalogs" / extra.name).write_bytes(extra.read_bytes())
    started = time.perf_counter()
    result = run("validate", path)
    assert time.perf_counter() - started < 30, "validate hung"
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert (
            len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0]
        ), result.stderr


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("solve",), "Missing argument 'SCENARIO'"),
        (("solve", "x.yaml", "--bogus"), "No such option '--bogus'"),
        (("--bogus",), "No such option"),
        (("nosuch",), "No such command 'nosuch'"),
        (("catalog", "show"), "Missing argument 'OFFER'"),
        (("simulate", "x.yaml", "--seed", "x"), "'--seed'"),
    ],
)
def test_usage_errors_are_one_line(run, args, fragment):
    line = one_line(run(*args))
    assert fragment in line and "--help)" in line, line


@pytest.mark.parametrize(
    "args",
    [("--help",), ("solve", "--help"), ("catalog", "import", "--help"), ("--version",)],
)
def test_help_and_version_still_exit_0(run, args):
    result = run(*args)
    assert result.exit_code == 0 and result.stdout.strip(), result.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("simulate", "lora-finetune.yaml", "--seed", "-1"), "'--seed'"),
        (
            ("simulate", "lora-finetune.yaml", "--trials", "1000000000000"),
            "100<=x<=1000000",
        ),
        (
            (
                "whatif",
                "lora-finetune.yaml",
                "--spot-price",
                "0.5:1:3",
                "--precision",
                "nan",
            ),
            "not a finite number",
        ),
        (("batch", "quarter-team.yaml", "--time-limit", "nan"), "not a finite number"),
        (
            ("batch", "quarter-team.yaml", "--schedule-confidence", "nan"),
            "not a finite number",
        ),
        (("solve", "lora-finetune.yaml", "--time-limit", "inf"), "not a finite number"),
        (
            (
                "whatif",
                "lora-finetune.yaml",
                "--spot-price",
                "0.5:1:3",
                "--processes",
                "1000",
            ),
            "1<=x<=256",
        ),
    ],
)
def test_numeric_options_have_sane_ranges(run, args, fragment):
    command, file, *rest = args
    line = one_line(run(command, SCENARIOS / file, *rest))
    assert fragment in line, line


@pytest.mark.parametrize(
    "target, fragment",
    [
        ("/proc/x.json", "cannot write the output file"),
        ("a" * 300 + ".json", "File name too long"),
        ("out/", "names a folder"),
        ("folder", "is a directory"),
        ("nope/x.json", "the output folder does not exist"),
    ],
)
def test_unwritable_output_targets_are_one_line(
    run, tmp_path, monkeypatch, target, fragment
):
    if target.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("no /proc")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    line = one_line(run("solve", SCENARIOS / "lora-finetune.yaml", "-o", target))
    assert fragment in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_a_dash_is_standard_output_or_refused(run, tmp_path, monkeypatch):
    """`-o -` prints the report, as `-` means in most commands (it wrote a file named `-`); an output that cannot go
    to standard output (a chart, a catalog) refuses `-` in one line rather than write such a file."""
    monkeypatch.chdir(tmp_path)
    printed = run(
        "solve", SCENARIOS / "lora-finetune.yaml", "--format", "json", "-o", "-"
    )
    assert printed.exit_code == 0 and json.loads(printed.stdout)["status"] == "OPTIMAL"
    line = one_line(run("batch", SCENARIOS / "quarter-budget.yaml", "--gantt", "-"))
    assert "'-' (standard output) cannot take this output" in line
    assert list(tmp_path.iterdir()) == []


def test_output_through_a_symlink_keeps_the_link(run, tmp_path):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real.name)
    assert (
        run(
            "solve", SCENARIOS / "lora-finetune.yaml", "--format", "json", "-o", link
        ).exit_code
        == 0
    )
    assert link.is_symlink() and json.loads(real.read_text())["status"]


def test_output_to_a_fifo_writes_into_it(run, tmp_path):
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    assert (
        run(
            "solve", SCENARIOS / "lora-finetune.yaml", "--format", "json", "-o", fifo
        ).exit_code
        == 0
    )
    reader.join(10)
    assert fifo.is_fifo() and json.loads(received[0])["status"]


@pytest.mark.parametrize(
    "args",
    [
        ("batch", "quarter-team.yaml", "--gantt"),
        ("whatif", "lora-finetune.yaml", "--spot-price", "0.5:1:3", "--plot"),
    ],
)
def test_every_output_path_is_checked_before_any_is_written(run, tmp_path, args):
    command, file, *rest = args
    out = tmp_path / "out.json"
    line = one_line(
        run(command, SCENARIOS / file, *rest, tmp_path / "nope" / "x.png", "-o", out)
    )
    assert "the output folder does not exist" in line and not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("batch", "quarter-budget.yaml", "--gantt"),
        ("whatif", "lora-finetune.yaml", "--spot-price", "0.5:1:3", "--plot"),
    ],
)
@pytest.mark.parametrize("second", ["out.html", "./sub/../out.html", "link.html"])
def test_one_file_for_two_outputs_is_refused_before_any_work(
    run, tmp_path, monkeypatch, args, second
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "out.html").write_text("mine")
    (tmp_path / "link.html").symlink_to("out.html")
    command, file, *rest = args
    line = one_line(run(command, SCENARIOS / file, *rest, second, "-o", "out.html"))
    assert any(
        line.startswith(f"error: {name}: given for two outputs of this command")
        for name in (second, Path(second))
    ), line
    assert (tmp_path / "out.html").read_text() == "mine"


@pytest.mark.parametrize(
    "command, file, output",
    [
        ("solve", "lora-finetune.yaml", "mine.csv"),
        ("solve", "lora-finetune.yaml", "config.json"),
        ("whatif", "lora-finetune.yaml", "config.json"),
        ("batch", "quarter-team.yaml", "mine.csv"),
    ],
)
def test_no_output_over_a_catalog_or_config_the_file_reads(
    run, tmp_path, monkeypatch, command, file, output
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.csv").write_bytes(
        (REPO / "catalogs" / "offers" / "lambda.csv").read_bytes()
    )
    (tmp_path / "config.json").write_bytes(
        (REPO / "tests" / "data" / "hf" / "meta-llama__Llama-3.1-8B.json").read_bytes()
    )
    text = (
        (SCENARIOS / file)
        .read_text()
        .replace(
            "catalogs: [aws, gcp, azure, lambda, runpod]",
            "catalogs: [aws, gcp, azure, runpod, ./mine.csv]",
        )
    )
    text = text.replace("model: llama-3.1-8b ", "model: {hf_config: config.json} ")
    assert "./mine.csv" in text and (
        file != "lora-finetune.yaml" or "hf_config" in text
    )
    (tmp_path / "s.yaml").write_text(text)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    sweep = ("--spot-price", "0.5:1:2") if command == "whatif" else ()
    line = one_line(run(command, "s.yaml", *sweep, "-o", output))
    assert f"{output}: refusing to overwrite an input file" in line, line
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize(
    "status, words",
    [
        ("MODEL_INVALID", "refused the model as invalid"),
        ("UNKNOWN", "raise --time-limit"),
    ],
)
def test_no_plan_says_why_not_only_time(capsys, status, words):
    """A model CP-SAT refuses (figures past 64-bit integers) was reported as 'raise --time-limit', which cannot help."""
    from planner.commands.options import EXIT_TIME_LIMIT, exit_for

    with pytest.raises(SystemExit) as ended:
        exit_for(status)
    assert ended.value.code == EXIT_TIME_LIMIT
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and words in line


# ---------------------------------------------------------------- the YAML reader builds what the library builds

PLAIN_SCALARS = [
    "yes",
    "No",
    "0o17",
    "0x1F",
    "1_000",
    ".inf",
    "-.Inf",
    ".NaN",
    "~",
    "null",
    "Null",
    "2024-01-02",
    "012",
    "0b101",
    "1e3",
    "+12",
    "-0",
    "1.",
    ".5",
    "true",
    "True",
    "FALSE",
    "a b",
    "'quoted'",
    '"dq \\u00e9"',
    "0.1e-2",
    "2001-12-14 21:59:43.10 -5",
    "2001-12-14t21:59:43.10-05:00",
    "x",
    "",
    "1e400",
    "-1_0.5_0",
    "0.",
    "+.inf",
    "8GiB",
    "'2024-01-02'",
]
ODD_SCALARS = [
    "12:30",
    "=",
    "<<",
    "!!str 3",
    "!!float 1",
    "! 12",
    "!!int '7'",
    "!!bool 'true'",
    "!!null ''",
    "!!timestamp 2024-01-02",
    "!!binary aGk=",
    "&a 5",
    "*a",
    "2024-02-30",
]


def yaml_text(node, indent: str = "", flow: bool = False) -> str:
    """A YAML text of `node`: a raw scalar token, a list of nodes (a sequence), or a tuple of (raw key, node) pairs
    (a mapping)."""
    if isinstance(node, str):
        return node
    if flow or not node:
        if isinstance(node, list):
            return "[" + ", ".join(yaml_text(v, flow=True) for v in node) + "]"
        return "{" + ", ".join(f"{k}: {yaml_text(v, flow=True)}" for k, v in node) + "}"
    inner = indent + "  "
    if isinstance(node, list):
        return "".join(f"\n{indent}- {yaml_text(v, inner)}" for v in node)
    return "".join(f"\n{indent}{k}: {yaml_text(v, inner)}" for k, v in node)


def same(a, b) -> bool:
    """Equal in value and type, NaN equal to NaN (dict keys in order)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def library_load(text: str):
    """The YAML library's own safe loader: the reference the reader must agree with."""
    import warnings

    from ruamel.yaml import YAML

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return YAML(typ="safe").load(text)


def assert_reads_as_the_library(tmp_path, text: str) -> None:
    from planner.errors import PlannerError

    path = tmp_path / "doc.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        expected = library_load(text)
    except (
        Exception
    ):  # the library refuses it: the reader must refuse it too, in one located line
        with pytest.raises(PlannerError):
            load_yaml(path)
        return
    try:
        got = load_yaml(path)
    except (
        PlannerError
    ) as exc:  # refused on purpose: tags beyond the core schema, an invalid date
        assert any(word in str(exc) for word in ("tags", "date")), (text, exc)
        return
    got = dict(got) if isinstance(got, dict) else got
    assert expected is not None and same(got, expected), (text, got, expected)


def _one_in_twenty_odd(plain: list[str]):
    """A plain scalar, or one time in twenty an odd one: about half the documents have none."""
    return st.tuples(
        st.integers(0, 19), st.sampled_from(plain), st.sampled_from(ODD_SCALARS)
    ).map(lambda draw: draw[2] if draw[0] == 0 else draw[1])


_raw, _key = (
    _one_in_twenty_odd(PLAIN_SCALARS),
    _one_in_twenty_odd([k for k in PLAIN_SCALARS if k]),
)
_trees = st.recursive(
    _raw,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.lists(
            st.tuples(_key, kids), max_size=4, unique_by=lambda pair: pair[0]
        ).map(tuple)
    ),
    max_leaves=16,
)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(
    tree=st.lists(st.tuples(_key, _trees), max_size=5, unique_by=lambda pair: pair[0]),
    flow=st.booleans(),
)
def test_the_yaml_reader_builds_what_the_library_builds(tmp_path_factory, tree, flow):
    """The reader builds documents from the parser's events itself (the library's constructor took 12.9 s of a
    20,000-workload scenario's load); on random documents of odd scalars, anchors, aliases, tags, merge and
    duplicate keys, in block and flow style, it builds exactly what the library's safe loader builds, or
    refuses what the library refuses."""
    text = (
        yaml_text(tuple(tree), flow=True)
        if flow
        else yaml_text(tuple(tree)).lstrip("\n")
    ) + "\n"
    assert_reads_as_the_library(tmp_path_factory.mktemp("yaml"), text)


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {a: 1, b: 2}\nother:\n  <<: *b\n  b: 3\n",  # a merge key: left to the library
        "base: &b {a: 1}\nm: {<<: [*b, {c: 4}], d: 5}\n",
        "a: 1\na: 2\n",
        "1: a\ntrue: b\n",  # duplicate keys (1 == True in Python)
        "a: &x 1\nb: &x 2\nc: *x\n",
        "a: *nowhere\n",  # a reused anchor, an undefined alias
        "%YAML 1.1\n---\na: yes\nb: 0o17\nc: 017\n",  # YAML 1.1's resolvers
        "a: 1\n---\nb: 2\n",
        "--- 5\n",
        "- 1\n- [2, {c: 3}]\n",
        "'quoted'\n",
        "a:\n",
        "!!str 12\n",
        "a: !!binary aGVsbG8=\n",
        "a: !!set {x, y}\n",
        "a: !custom 1\n",
        "a: 2024-01-02\nb: 2024-01-02 10:00:00\nc: 2024-01-02T10:00:00+02:00\n",
        "a: 2024-13-01\n",
        "k: &list [1, 2]\n*list : 3\n",
        "? a\n: 1\n",
        "a: |\n  x\n  y\nb: >-\n  u\n  v\n",
    ],
)
def test_odd_yaml_documents_read_as_the_library_reads_them(tmp_path, text):
    assert_reads_as_the_library(tmp_path, text)


# ---------------------------------------------------------------- JSON reports are what the standard library writes

_Pair = collections.namedtuple("_Pair", "first second")


def _library_json(data) -> str:
    return json.dumps(data, indent=2, default=_json_default) + "\n"


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-05, 1e16, 5e-324, -0.0, 0.1, 1 / 3]),
    st.floats(allow_nan=False, allow_infinity=False).map(np.float64),
    st.floats(width=32).map(np.float32),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.booleans().map(np.bool_),
)
_keys = st.one_of(
    st.text(max_size=6),
    st.integers(min_value=-99, max_value=99),
    st.booleans(),
    st.none(),
    st.sampled_from([0.5, 2.0, -1e-05]),
)
_trees = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.tuples(inner, inner).map(lambda t: _Pair(*t)),
        st.dictionaries(_keys, inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trees)
def test_json_reports_are_what_the_standard_library_writes(data):
    """`to_json` (simplejson's C encoder) writes `json.dumps(indent=2)`'s text to the byte, on trees of what
    reports hold: numpy scalars, NaN and infinities, tuples and namedtuples (arrays), non-ASCII text, keys that
    are numbers, booleans or None."""
    assert to_json(data) == _library_json(data)


@pytest.mark.parametrize("example", ["serving-team.yaml", "team-quarter-mix.yaml"])
def test_a_plans_json_is_what_the_standard_library_writes(example):
    """The real thing: `planner solve --format json`'s report of a shipped example, endpoints included."""
    data = plan_json(make_plan(load_scenario(SCENARIOS / example), time_limit_s=30.0))
    assert to_json(data) == _library_json(data)
