"""`planner solve`, `planner batch` and `planner simulate`: plan a scenario, schedule a quarter, replay either."""

from __future__ import annotations

from pathlib import Path

import click

from planner.commands.options import (
    MAX_SEED,
    MAX_TRIALS,
    FiniteFloatRange,
    OutputPath,
    building_candidates,
    check_outputs,
    emit,
    exit_for,
    format_option,
    inputs_of,
    output_option,
    outputs_together,
    warn_old_prices,
    with_progress,
    wrote,
)
from planner.errors import PlannerError

# ---------------------------------------------------------------- solve


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@format_option(("table", "json", "csv", "markdown"))
@output_option
@click.option(
    "--time-limit",
    type=FiniteFloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds CP-SAT may search; the best plan so far is reported with its gap.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="CP-SAT search workers.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Add runner-up candidates and why the winner beat them.",
)
@click.option(
    "--no-timings",
    "no_timings",
    is_flag=True,
    help="Leave `solve_report` (the clock readings) out of the JSON, so runs can be diffed byte for byte.",
)
def solve(scenario, fmt, output, time_limit, workers, explain, no_timings) -> None:
    """The cheapest plan that meets every deadline, with its cost breakdown.

    --time-limit covers CP-SAT's search; loading the catalogs and building the candidates
    come before it. Exit status 0 with a plan (FEASIBLE plans report their gap), 1 when the
    scenario is infeasible (the report says which workload cannot be placed and why), 2 on
    bad input, 3 when the time limit ends the search before any plan, 130 when interrupted.

    \b
    Example:
      planner solve scenarios/lora-finetune.yaml
      planner solve scenarios/team-quarter-mix.yaml --explain
      planner solve scenarios/pretrain-multinode.yaml --format json -o plan.json
    """
    from planner.candidates.generate import RUNNER_UPS
    from planner.load.scenario import load_scenario
    from planner.report.solve import solve_text
    from planner.solve.pipeline import make_plan

    loaded = load_scenario(scenario)
    check_outputs(loaded.inputs, output)
    # runner-ups are read by the JSON report's `alternatives` and by --explain; a report without them
    # leaves them unpriced (the plan is the same: lazy pricing proves it against every row)
    runner_ups = RUNNER_UPS if fmt == "json" or explain else 0
    plan = building_candidates(
        lambda progress: make_plan(
            loaded,
            time_limit_s=time_limit,
            workers=workers,
            progress=progress,
            runner_ups=runner_ups,
        ),
        fmt,
        output,
    )
    emit(solve_text(plan, fmt, explain, not no_timings), output, inputs=loaded.inputs)
    warn_old_prices(loaded.catalog)
    exit_for(plan.status)


# ---------------------------------------------------------------- batch


@click.command()
@click.argument("quarter", type=click.Path(dir_okay=False, path_type=Path))
@format_option(("table", "json", "csv"))
@output_option
@click.option(
    "--gantt", type=OutputPath(), help="Draw the schedule to FILE.png or FILE.html."
)
@click.option(
    "--time-limit",
    type=FiniteFloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds for the whole search (all its phases), which sets its amount of CP-SAT work; the "
    "best schedule so far is reported with its gap.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="CP-SAT search workers; the bound's LP runs beside them on one more core.",
)
@click.option(
    "--no-timings",
    "no_timings",
    is_flag=True,
    help="Leave `solve_report` (the clock readings) out of the JSON, so runs can be diffed byte for byte.",
)
@click.option(
    "--schedule-confidence",
    "schedule_confidence",
    type=FiniteFloatRange(0.5, 0.9999),
    default=None,
    help="Size every run's slot so that the whole schedule holds (every run by its due date) with at "
    "least this probability, not only each run on its own; the schedule is then replayed to "
    "measure it.",
)
def batch(
    quarter, fmt, output, gantt, time_limit, workers, no_timings, schedule_confidence
) -> None:
    """Schedule a quarter's runs over time: start dates, placements, reservations to buy.

    --time-limit covers the search (every phase); candidates are built before it. When it
    ends the search early the best schedule found is returned, at least the greedy one it
    starts from (FEASIBLE, with its gap). Exit status 0 with a schedule, 1 when a required
    run cannot be placed, 2 on bad input, 3 when no schedule was found in time, 130 when
    interrupted.

    \b
    Example:
      planner batch scenarios/quarter-team.yaml
      planner batch scenarios/quarter-team.yaml --format json -o schedule.json --gantt schedule.png
      planner batch scenarios/quarter-team.yaml --schedule-confidence 0.9
    """
    from planner.batch.contract import batch_json
    from planner.batch.pipeline import make_batch_plan
    from planner.load.quarter import load_quarter
    from planner.report.batch import batch_text

    if gantt is not None and not gantt.lower().endswith(
        (".png", ".html")
    ):  # '' too: not "no chart"
        raise PlannerError(
            f"expected a .png or .html file name, got {gantt!r}", "--gantt"
        )
    loaded = load_quarter(quarter)
    check_outputs(loaded.inputs, output, gantt)
    plan = building_candidates(
        lambda progress: make_batch_plan(
            loaded,
            time_limit_s=time_limit,
            workers=workers,
            progress=progress,
            schedule_confidence=schedule_confidence,
        ),
        fmt,
        output,
    )
    # once: the table and the chart are drawn from it
    data = batch_json(plan, not no_timings)
    with outputs_together():  # the table and its chart land together or not at all
        emit(batch_text(plan, fmt, data=data), output, inputs=loaded.inputs)
        if gantt and plan.result is not None and plan.result.solved:
            from planner.report.gantt import write_gantt

            write_gantt(data, Path(gantt), protected=loaded.inputs)
            wrote(gantt)
    warn_old_prices(loaded.catalog)
    exit_for(plan.status)


# ---------------------------------------------------------------- simulate


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A plan from `planner solve --format json`, or for a quarter file a schedule from `planner batch "
    "--format json` (default: plan it now).",
)
@click.option(
    "--trials",
    type=click.IntRange(100, MAX_TRIALS),
    default=10_000,
    show_default=True,
    help="Monte-Carlo trials (memory grows with them).",
)
@click.option(
    "--seed",
    type=click.IntRange(0, MAX_SEED),
    default=0,
    show_default=True,
    help="Same seed, same numbers.",
)
@format_option(("table", "json", "csv"))
@output_option
@click.option(
    "--time-limit",
    type=FiniteFloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Solver time limit when no --plan is given.",
)
@click.option(
    "--traces",
    "traces_dir",
    is_flag=False,
    flag_value="shipped",
    default=None,
    metavar="[DIR]",
    help="Replay the spot and spot_fallback assignments on measured availability traces instead: the "
    "shipped public ones, or DIR's (Can't Be Late's JSON format).",
)
@click.option(
    "--runs-out",
    "runs_out",
    type=OutputPath(),
    help="Instead, run each job --trials times event by event and write the runs as the run records "
    "`planner calibrate` reads (CSV).",
)
@click.option(
    "--truth",
    "truth_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --runs-out: run the jobs as this calibration file says the world is (throughput, preemptions, "
    "waits, checkpoint and restart times), a known truth for `planner calibrate` to find.",
)
def simulate(
    scenario,
    plan_file,
    trials,
    seed,
    fmt,
    output,
    time_limit,
    traces_dir,
    runs_out,
    truth_file,
) -> None:
    """Monte-Carlo the plan (failures, lost work, restarts, billing sessions) against the analytic model.

    Endpoints are replayed minute by minute for their duration (Poisson arrivals, spot nodes preempted
    and replaced): the share of time below capacity and of requests within the SLO, beside the plan's.

    Prints per workload the simulated mean and p50/p90/p99 of wall time and cost, the
    share of trials meeting the time budget, and the analytic values beside them.

    A quarter file (`planner batch`) is replayed as a schedule: each run's wall time drawn from its
    process, a late run pushing the runs that come after it and those waiting for its reserved nodes;
    per run the probability it ends by its due date and its expected delay, and the probability the
    whole quarter holds.

    With --traces, each spot or spot_fallback job is replayed on real spot availability (a gang runs while
    the trace has its nodes up) from many start offsets: realised cost, wall time and deadline hit rate
    beside the plan's, Uniform Progress and all on-demand on the same traces, and the regret against the
    hindsight optimum (Can't Be Late's measures).

    \b
    Example:
      planner simulate scenarios/pretrain-multinode.yaml --trials 20000
      planner simulate scenarios/pretrain-deadline.yaml --traces
      planner solve scenarios/team-quarter-mix.yaml --format json -o plan.json
      planner simulate scenarios/team-quarter-mix.yaml --plan plan.json
      planner simulate scenarios/quarter-team.yaml --trials 2000
    """
    from planner.load.scenario import load_scenario
    from planner.load.yaml import is_quarter, load_yaml
    from planner.replay import pipeline as replay
    from planner.report import simulate as report

    if truth_file is not None and runs_out is None:
        raise PlannerError(
            "--truth draws run records: give --runs-out FILE too", "--truth"
        )
    if runs_out is not None and traces_dir is not None:
        raise PlannerError(
            "--runs-out and --traces replay differently: give one", "--runs-out"
        )
    if is_quarter(load_yaml(scenario)):
        if runs_out is not None:
            raise PlannerError(
                "--runs-out draws the runs of a scenario's plan; a quarter schedule is replayed without it",
                str(scenario),
            )
        if traces_dir is not None:
            raise PlannerError(
                "--traces replays a scenario's plan; a quarter schedule is replayed without it",
                str(scenario),
            )
        from planner.load.quarter import load_quarter

        loaded = load_quarter(scenario)
        check_outputs(loaded.inputs + inputs_of(plan_file), output)
        record = replay.schedule_record(loaded, plan_file, time_limit)
        text = report.schedule_text(
            replay.replay_schedule(loaded, record, trials, seed), fmt
        )
    else:
        loaded = load_scenario(scenario)
        check_outputs(loaded.inputs + inputs_of(plan_file), output)
        record = replay.plan_record(loaded, plan_file, time_limit)
        if runs_out is not None:
            _write_runs(loaded, record, trials, seed, fmt, output, runs_out, truth_file)
            return
        if traces_dir is not None:
            text = report.trace_text(
                replay.replay_traces(loaded, record, traces_dir), fmt
            )
        else:
            show = trials * len(record.assignments) >= 200_000 and fmt == "table"
            text = report.simulation_text(
                with_progress(
                    lambda progress: replay.replay_plan(record, trials, seed, progress),
                    show,
                ),
                fmt,
            )
    emit(text, output, loaded.inputs + inputs_of(plan_file))
    warn_old_prices(loaded.catalog)


def _write_runs(
    loaded, record, trials, seed, fmt, output, runs_out, truth_file
) -> None:
    """`--runs-out`: the plan's jobs drawn run by run (as `truth_file` says, if given) into a CSV of run records,
    and per job what was drawn beside the plan."""
    import pandas as pd

    from planner.load.calibration import load_calibration
    from planner.replay.runs import drawn_runs
    from planner.report.render import to_csv
    from planner.report.simulate import drawn_text
    from planner.schema.runs import RUN_COLUMNS

    inputs = loaded.inputs + inputs_of(truth_file)
    check_outputs(inputs, output, runs_out)
    truth = load_calibration(truth_file) if truth_file is not None else None
    drawn = drawn_runs(loaded, record, trials, seed, truth)
    for workload, why in drawn.skipped:
        click.echo(f"no runs drawn for {workload}: {why}", err=True)
    with outputs_together():
        from planner.files import write_atomic

        write_atomic(
            Path(runs_out),
            to_csv(pd.DataFrame(drawn.rows, columns=list(RUN_COLUMNS))),
            protected=inputs,
        )
        wrote(runs_out)
        emit(drawn_text(drawn.jobs, fmt, truth_file is not None), output, inputs)
    warn_old_prices(loaded.catalog)
