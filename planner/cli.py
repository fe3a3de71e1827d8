"""The `planner` command line: parse, call the library, format. No planning logic lives here.

Heavy libraries (pandas, OR-Tools, numpy) are imported inside commands so `planner --help`
answers instantly.
"""
from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import warnings
from pathlib import Path


def _interrupted_before_work(signum, frame) -> None:
    """A Ctrl-C of the `planner` command during start-up (imports, argument parsing): nothing has started,
    so stop at once with the interrupt's status."""
    os.write(2, b"interrupted\n")
    os._exit(130)


_COMMAND = __name__ == "__main__" or os.path.basename(sys.argv[0]).startswith("planner")
"""Run as the command (the `planner` script or `python -m planner.cli`), not imported by a library user."""
if _COMMAND and threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_before_work)  # before click and the commands' lazy imports

import click  # noqa: E402

from planner.errors import PlannerError, TimeLimitReached, printable  # noqa: E402

FORMATS = ("table", "json", "csv")


class FiniteFloatRange(click.FloatRange):
    """A float option that refuses nan and inf: nan passes every range check (and then hangs a bisection or
    ends a search at once), inf is no number of seconds or precision."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class OutputPath(click.Path):
    """A file to write: `out/` names a folder, so it is refused rather than written as a file `out`; `-` is
    standard output where the output can go there (`stdout_dash`: a report's `-o`), else refused, not written
    as a file named `-`."""

    def __init__(self, path_type=None, stdout_dash: bool = False):
        super().__init__(dir_okay=False, path_type=path_type)
        self.stdout_dash = stdout_dash

    def convert(self, value, param, ctx):
        if value == "-":
            if self.stdout_dash:
                return None  # what the option's absence means: print
            self.fail("'-' (standard output) cannot take this output; expected a file name", param, ctx)
        if isinstance(value, str) and value.endswith(("/", os.sep)):
            self.fail(f"{value!r} names a folder; expected a file name", param, ctx)
        return super().convert(value, param, ctx)


MAX_TRIALS, MAX_SEED, MAX_PROCESSES = 1_000_000, 2**32 - 1, 256
"""Monte-Carlo trials (memory grows with them), seeds numpy takes, local processes (the sweep's points are fewer)."""

EXIT_PLAN, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_TIME_LIMIT, EXIT_INTERRUPTED, EXIT_CLOSED_OUTPUT = 0, 1, 2, 3, 130, 141
"""The exit statuses every command keeps (docs/commands.md, `planner --help`)."""
_interrupted = False


def _on_sigint(signum, frame) -> None:
    """Remember the interrupt: a Ctrl-C that lands inside an import can surface as another error."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _unraisable(hook):
    """`sys.unraisablehook` that keeps quiet about our own KeyboardInterrupt raised where Python cannot pass it on
    (a weak reference's callback in the import machinery): the command still stops with one line `interrupted`."""
    def quiet(unraisable) -> None:
        if not (_interrupted and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            hook(unraisable)
    return quiet


class PlannerGroup(click.Group):
    """Turns every PlannerError into one line on stderr and exit status 2, an interrupt into one line
    `interrupted` and status 130 (no traceback; outputs are written atomically, so nothing is half-written)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            _usage_error(exc, ctx)

    def invoke(self, ctx: click.Context):
        global _interrupted
        _interrupted = False
        main_thread = threading.current_thread() is threading.main_thread()  # signals can be set only there
        previous = signal.getsignal(signal.SIGINT) if main_thread else None
        previous_hook = sys.unraisablehook
        if main_thread:
            signal.signal(signal.SIGINT, _on_sigint)
            sys.unraisablehook = _unraisable(previous_hook)
        try:
            with warnings.catch_warnings():  # library notices (numpy overflow in a discarded candidate, pandas
                warnings.simplefilter("ignore")  # deprecations) would break the one-line promise on stderr
                result = super().invoke(ctx)
            if _interrupted:  # a Ctrl-C swallowed on its way up (a C extension's import can do that): still a stop
                _stop_interrupted(ctx)
            if main_thread:  # the work is done and written: a Ctrl-C must not kill the command's shutdown (Python
                # resets its own handlers there, an ignored signal stays ignored); a library caller gets its own back
                signal.signal(signal.SIGINT, signal.SIG_IGN if _COMMAND else previous)
            return result
        except PlannerError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_BAD_INPUT)
        except TimeLimitReached as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_TIME_LIMIT)
        except KeyboardInterrupt:
            _stop_interrupted(ctx)
        except click.UsageError as exc:
            _usage_error(exc, ctx)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except BrokenPipeError:
            _closed_output(ctx)
        except Exception:
            if _interrupted:
                _stop_interrupted(ctx)
            raise
        finally:
            sys.unraisablehook = previous_hook


def _usage_error(exc: click.UsageError, ctx: click.Context) -> None:
    """A bad option or argument is bad input like any other: one line and exit status 2 (click's own three
    lines of usage, hint and error broke the one-line promise). A bare group still shows its help."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        raise exc
    command = (exc.ctx or ctx).command_path
    click.echo(f"error: {printable(exc.format_message())} (see {command} --help)", err=True)
    ctx.exit(EXIT_BAD_INPUT)


def _closed_output(ctx: click.Context) -> None:
    """The reader of standard output went away (`planner ... | head -1`): stop quietly with 141, what a shell
    reports for a command ended by SIGPIPE, not 1 (infeasible) as a `pipefail` script would read it. What is
    left to print goes nowhere, so Python's shutdown does not fail on it again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    ctx.exit(EXIT_CLOSED_OUTPUT)


def _stop_interrupted(ctx: click.Context) -> None:
    if _COMMAND and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopping already: a second Ctrl-C must not kill the shutdown
    # A KeyboardInterrupt raised in code run by exec() of a string (scipy's import runs `from numpy import *` so)
    # marks the interrupt unhandled in CPython even once caught, and the process then kills itself with SIGINT
    # at exit (status -2, not 130); each exec() of a string starts by clearing that mark.
    exec("")
    click.echo("interrupted", err=True)
    if _COMMAND and threading.current_thread() is threading.main_thread():
        # End without Python's shutdown: a thread beside the search may still be inside a native call (HiGHS's LP
        # bound beside `planner batch`'s), and Python ends such a thread where it takes the GIL back, which aborts
        # the C++ frames under it (std::terminate: status 134, not 130). What the command opened is closed by now.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(EXIT_INTERRUPTED)
    ctx.exit(EXIT_INTERRUPTED)


def exit_for(status: str) -> None:
    """Exit 1 when infeasible, 3 when the time limit ended the search before any plan; else return."""
    from planner.solve.outcome import SOLVED

    if status == "INFEASIBLE":
        sys.exit(EXIT_INFEASIBLE)
    if status == "MODEL_INVALID":  # not the time limit: more time would not help
        click.echo("error: CP-SAT refused the model as invalid (its figures passed 64-bit integers, which only "
                   "sizes far beyond real ones reach); please report it with the input", err=True)
        sys.exit(EXIT_TIME_LIMIT)
    if status not in SOLVED:
        click.echo("error: the time limit was reached before any plan was found; raise --time-limit", err=True)
        sys.exit(EXIT_TIME_LIMIT)


def nothing_to_simulate(message: str, status: str) -> None:
    """`simulate` found no plan to replay: one line, and the status `solve` or `batch` gives the same file (1 when
    infeasible, 3 when the time limit or CP-SAT ended the search before any plan)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INFEASIBLE if status == "INFEASIBLE" else EXIT_TIME_LIMIT)


def warn_old_prices(catalog) -> None:
    """One line on stderr when the prices used are old (never an error: old prices still plan)."""
    from planner.load.catalog import price_age_warning

    line = price_age_warning(catalog)
    if line:
        click.echo(f"warning: {line}", err=True)


def check_outputs(inputs: tuple[Path, ...], *outputs: str | Path | None) -> None:
    """Every output path checked before any work is spent: not over an input, in a folder that takes it."""
    from planner.files import check_target, same_target

    given: list[Path] = []
    for output in outputs:
        if output:
            check_target(Path(output), inputs)
            if any(same_target(Path(output), other) for other in given):
                raise PlannerError("given for two outputs of this command, so one would replace the other; "
                                   "give each output its own file", str(output))
            given.append(Path(output))


def emit(text: str, output: str | None, inputs: tuple[Path, ...] = ()) -> None:
    """Print, or write atomically to `output` (never over an input file)."""
    if output:
        from planner.files import write_atomic

        write_atomic(Path(output), text, protected=inputs)
        wrote(output)
    else:
        click.echo(text, nl=not text.endswith("\n"))


_written: list[str] | None = None  # inside `outputs_together`: the files written, said once they are in place


def wrote(path) -> None:
    """`wrote PATH` on stderr, once the file is in place."""
    if _written is not None:
        _written.append(str(path))
    else:
        click.echo(f"wrote {path}", err=True)


@contextlib.contextmanager
def outputs_together():
    """A command's output files land as a set, all or none (`planner.files.outputs_together`), and each
    `wrote` line is printed only once they have."""
    global _written
    from planner import files

    _written = []
    try:
        with files.outputs_together():
            yield
        written = _written
    finally:
        _written = None
    for path in written:
        click.echo(f"wrote {path}", err=True)


@click.group(cls=PlannerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpu-planner")
@click.option("--max-input-size", default="64MiB", show_default=True, metavar="SIZE",
              help="Refuse scenario, quarter and catalog files larger than this (checked before parsing).")
def main(max_input_size: str) -> None:
    """Plan the cheapest cloud GPU rental that meets every deadline.

    Exit status: 0 a plan (or a successful command), 1 infeasible (the report says why),
    2 bad input (one line on stderr: file, line, key path, what was expected),
    3 the time limit was reached before any plan was found, 130 interrupted,
    141 standard output closed by its reader (`| head`).

    \b
    Example:
      planner validate scenarios/*.yaml
      planner catalog list --gpu H100 --format json
      planner --max-input-size 256MiB solve big-scenario.yaml
    """
    from planner.load import yaml as yamlio
    from planner.schema.units import MAX_GIB, parse_gib

    try:
        gib = parse_gib(max_input_size)
    except ValueError as exc:
        raise PlannerError(str(exc), "--max-input-size") from None
    if not (1 <= gib * 2**30 and gib <= MAX_GIB):
        raise PlannerError(f"expected a size of at least 1B and at most {MAX_GIB:g}GiB (an exabyte), "
                           f"got {max_input_size!r}", "--max-input-size")
    yamlio.MAX_FILE_BYTES = int(gib * 2**30)


# ---------------------------------------------------------------- validate


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
def validate(files: tuple[Path, ...]) -> None:
    """Check scenario and quarter files (and the catalogs they name); print a short summary.

    A file with a `horizon:` key is a quarter file (`planner batch`).

    \b
    Example:
      planner validate scenarios/*.yaml
    """
    from planner.load.quarter import load_quarter
    from planner.load.scenario import load_scenario
    from planner.load.yaml import is_quarter, load_yaml

    for path in files:
        if is_quarter(load_yaml(path)):
            quarter = load_quarter(path)
            q = quarter.quarter
            click.echo(f"{path}: ok: quarter {q.name!r}, {len(q.runs)} run(s), {len(q.reservations)} reservation "
                       f"option(s), {quarter.steps} steps of {quarter.step_h:g} h, {len(quarter.catalog.offers)} offers"
                       + _with_configs(quarter.configs))
            continue
        loaded = load_scenario(path)
        scenario, offers = loaded.scenario, loaded.catalog.offers
        kinds = ", ".join(sorted({w.kind for w in scenario.workloads}))
        click.echo(
            f"{path}: ok: scenario {scenario.name!r}, {len(scenario.workloads)} workload(s) ({kinds}), "
            f"{len(offers)} offers from {', '.join(scenario.catalogs)}" + _with_configs(loaded.configs)
        )


def _with_configs(configs) -> str:
    """Which team config files a file was read with (`planner.toml`)."""
    return f"; with {', '.join(map(str, configs))}" if configs else ""


# ---------------------------------------------------------------- solve


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("table", "json", "csv", "markdown")), default="table",
              show_default=True)
@click.option("-o", "--output", type=OutputPath(stdout_dash=True),
              help="Write to this file (atomically) instead of stdout (`-`: stdout).")
@click.option("--time-limit", type=FiniteFloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds CP-SAT may search; the best plan so far is reported with its gap.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="CP-SAT search workers.")
@click.option("--explain", is_flag=True, help="Add runner-up candidates and why the winner beat them.")
@click.option("--no-timings", "no_timings", is_flag=True,
              help="Leave `solve_report` (the clock readings) out of the JSON, so runs can be diffed byte for byte.")
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
    from planner.load.scenario import load_scenario
    from planner.report.solve import solve_text
    from planner.solve.pipeline import make_plan

    loaded = load_scenario(scenario)
    check_outputs(loaded.inputs, output)
    plan = _building_candidates(lambda progress: make_plan(loaded, time_limit_s=time_limit, workers=workers,
                                                           progress=progress), fmt, output)
    emit(solve_text(plan, fmt, explain, not no_timings), output, inputs=loaded.inputs)
    warn_old_prices(loaded.catalog)
    exit_for(plan.status)


# ---------------------------------------------------------------- batch


@main.command()
@click.argument("quarter", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("table", "json", "csv")), default="table", show_default=True)
@click.option("-o", "--output", type=OutputPath(stdout_dash=True),
              help="Write to this file (atomically) instead of stdout (`-`: stdout).")
@click.option("--gantt", type=OutputPath(), help="Draw the schedule to FILE.png or FILE.html.")
@click.option("--time-limit", type=FiniteFloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds for the whole search (all its phases), which sets its amount of CP-SAT work; the "
                   "best schedule so far is reported with its gap.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="CP-SAT search workers; the bound's LP runs beside them on one more core.")
@click.option("--no-timings", "no_timings", is_flag=True,
              help="Leave `solve_report` (the clock readings) out of the JSON, so runs can be diffed byte for byte.")
@click.option("--schedule-confidence", "schedule_confidence", type=FiniteFloatRange(0.5, 0.9999), default=None,
              help="Size every run's slot so that the whole schedule holds (every run by its due date) with at "
                   "least this probability, not only each run on its own; the schedule is then replayed to "
                   "measure it.")
def batch(quarter, fmt, output, gantt, time_limit, workers, no_timings, schedule_confidence) -> None:
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
    from planner.batch.pipeline import make_batch_plan
    from planner.load.quarter import load_quarter
    from planner.report.batch import batch_json, batch_text

    if gantt is not None and not gantt.lower().endswith((".png", ".html")):  # '' too: not "no chart"
        raise PlannerError(f"expected a .png or .html file name, got {gantt!r}", "--gantt")
    loaded = load_quarter(quarter)
    check_outputs(loaded.inputs, output, gantt)
    plan = _building_candidates(lambda progress: make_batch_plan(
        loaded, time_limit_s=time_limit, workers=workers, progress=progress, schedule_confidence=schedule_confidence),
        fmt, output)
    data = batch_json(plan, not no_timings)  # once: with --schedule-confidence it replays the schedule
    with outputs_together():  # the table and its chart land together or not at all
        emit(batch_text(plan, fmt, data=data), output, inputs=loaded.inputs)
        if gantt and plan.result is not None and plan.result.solved:
            from planner.report.gantt import write_gantt

            write_gantt(data, Path(gantt), protected=loaded.inputs)
            wrote(gantt)
    warn_old_prices(loaded.catalog)
    exit_for(plan.status)


# ---------------------------------------------------------------- simulate


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A plan from `planner solve --format json`, or for a quarter file a schedule from `planner batch "
                   "--format json` (default: plan it now).")
@click.option("--trials", type=click.IntRange(100, MAX_TRIALS), default=10_000, show_default=True,
              help="Monte-Carlo trials (memory grows with them).")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help="Same seed, same numbers.")
@click.option("--format", "fmt", type=click.Choice(("table", "json", "csv")), default="table", show_default=True)
@click.option("-o", "--output", type=OutputPath(stdout_dash=True),
              help="Write to this file (atomically) instead of stdout (`-`: stdout).")
@click.option("--time-limit", type=FiniteFloatRange(min=0.1), default=60.0, show_default=True,
              help="Solver time limit when no --plan is given.")
@click.option("--traces", "traces_dir", is_flag=False, flag_value="shipped", default=None, metavar="[DIR]",
              help="Replay the spot and spot_fallback assignments on measured availability traces instead: the "
                   "shipped public ones, or DIR's (Can't Be Late's JSON format).")
def simulate(scenario, plan_file, trials, seed, fmt, output, time_limit, traces_dir) -> None:
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
    from planner.report.solve import simulation_rows, simulation_text, unreplayable

    if is_quarter(load_yaml(scenario)):
        if traces_dir is not None:
            raise PlannerError("--traces replays a scenario's plan; a quarter schedule is replayed without it",
                               str(scenario))
        return _simulate_quarter(scenario, plan_file, trials, seed, fmt, output, time_limit)
    loaded = load_scenario(scenario)
    protected = loaded.inputs + _inputs(plan_file)
    check_outputs(protected, output)
    if plan_file:
        from planner.load.plan_file import load_plan

        chosen, endpoints = load_plan(plan_file, loaded.scenario)
        if found := unreplayable(chosen):
            index, key, why = found
            raise PlannerError(why, f"{plan_file}: assignments[{index}].{key}")
    else:
        from planner.report.serving import endpoint_reports
        from planner.solve.pipeline import assignments, make_plan

        plan = make_plan(loaded, time_limit_s=time_limit)
        if plan.result is None or not plan.result.solved:
            reasons = "; ".join(f"{i['workload']}: {i['reason']}" for i in plan.infeasible) or plan.status
            nothing_to_simulate(f"{scenario}: no plan to simulate ({reasons})", plan.status)
        chosen = assignments(plan, alternatives=0)
        endpoints = endpoint_reports(plan)
    if traces_dir is not None:
        from planner.load.traces import load_traces
        from planner.report.traces import trace_rows, trace_text

        traces = load_traces(None if traces_dir == "shipped" else Path(traces_dir))
        emit(trace_text(trace_rows(loaded, chosen, traces), fmt), output, protected)
        warn_old_prices(loaded.catalog)
        return
    text = ""
    if chosen:
        rows = _with_progress(lambda progress: simulation_rows(chosen, trials, seed, progress),
                              show=trials * len(chosen) >= 200_000 and fmt == "table")
        text = simulation_text(rows, fmt)
    if endpoints:
        from planner.report.serving import endpoint_replays, replay_text

        replays = endpoint_replays(endpoints, seed)
        text = replay_text(replays, fmt, jobs=text)
    emit(text, output, protected)
    warn_old_prices(loaded.catalog)


def _inputs(*paths) -> tuple[Path, ...]:
    """Files given on the command line that an output must never replace (None: not given)."""
    return tuple(Path(p) for p in paths if p)


def _simulate_quarter(quarter: Path, plan_file: Path | None, trials: int, seed: int, fmt: str, output: str | None,
                      time_limit: float):
    from planner.load.quarter import load_quarter
    from planner.report.batch import schedule_replay, schedule_replay_text, schedule_unreplayable

    loaded = load_quarter(quarter)
    protected = loaded.inputs + _inputs(plan_file)
    check_outputs(protected, output)
    if plan_file:
        from planner.load.plan_file import load_schedule

        data = load_schedule(plan_file, loaded)
        if found := schedule_unreplayable(data):
            index, key, why = found
            raise PlannerError(why, f"{plan_file}: runs[{index}].{key}")
    else:
        from planner.batch.pipeline import make_batch_plan
        from planner.report.batch import batch_json

        plan = make_batch_plan(loaded, time_limit_s=time_limit)
        if plan.result is None or not plan.result.solved:
            reasons = "; ".join(f"{r}: {why}" for r, why in plan.infeasible.items()) or plan.status
            nothing_to_simulate(f"{quarter}: no schedule to simulate ({reasons})", plan.status)
        data = batch_json(plan, timings=False)
    emit(schedule_replay_text(schedule_replay(loaded, data, trials, seed), fmt), output, protected)
    warn_old_prices(loaded.catalog)


def _building_candidates(work, fmt: str, output: str | None):
    """Run work(progress) with a bar for candidate generation on a terminal (none for JSON on stdout)."""
    bar = _LazyProgress("building candidates", show=fmt != "json" or output is not None)
    try:
        return work(bar.update)
    finally:
        bar.close()


def _with_progress(work, show: bool):
    """Run work(progress) with a rich progress bar on stderr when it is long enough to need one."""
    if not show:
        return work(None)
    from rich.progress import Progress

    with Progress(transient=True, console=_stderr_console()) as bar:
        task = bar.add_task("simulating", total=1.0)
        return work(lambda fraction: bar.update(task, completed=fraction))


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


# ---------------------------------------------------------------- whatif


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--spot-price", "spot", metavar="MULT_RANGE",
              help="Spot price multipliers: start:stop:points (0.5:2.0:16) or a comma list (0.8,1,1.25).")
@click.option("--preemption", metavar="MULT_RANGE", help="Spot preemption rate multipliers, same forms.")
@click.option("--on-demand-price", "on_demand", metavar="MULT_RANGE", help="On-demand price multipliers, same forms.")
@click.option("--rate", metavar="MULT_RANGE",
              help="Traffic multipliers for serving endpoints (every period's requests/s), same forms; along it a "
                   "switch is a change of an endpoint's GPU type, market or TP degree, not of its node count.")
@click.option("--where", "where", multiple=True, metavar="KEY=VALUE,...",
              help="Scale only these offers: provider=, gpu= (name or family), region=, instance_type=.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", type=OutputPath(stdout_dash=True),
              help="Write to this file (atomically) instead of stdout (`-`: stdout).")
@click.option("--plot", type=OutputPath(Path),
              help="Write a plot: FILE.png, or FILE.html (self-contained, inline SVG).")
@click.option("--processes", type=click.IntRange(1, MAX_PROCESSES), default=None,
              help=f"Points solved at once by local processes (--executor local only; at most {MAX_PROCESSES}, and "
                   "never more than the sweep's grid points)  [default: local cores]")
@click.option("--executor", default="local", show_default=True, metavar="local|dask://HOST:PORT",
              help="Where points run: local processes, or the Dask cluster whose scheduler listens at HOST:PORT "
                   "(as many points at once as it has worker threads; --processes is refused). Same plans either way.")
@click.option("--precision", type=FiniteFloatRange(min=1e-6), default=0.005, show_default=True,
              help="Switch points are bisected until the interval is at most this wide.")
@click.option("--time-limit", type=FiniteFloatRange(min=0.1), default=60.0, show_default=True,
              help="CP-SAT seconds per point.")
def whatif(file, spot, preemption, on_demand, rate, where, fmt, output, plot, processes, executor, precision,
           time_limit) -> None:
    """Sweep spot prices, preemption rates, on-demand prices or endpoint traffic; find where each placement switches.

    Each point solves the scenario with the multipliers applied (after its own overrides)
    to the offers --where selects (--rate: to every endpoint's traffic). Per point: status,
    expected total cost and every workload's placement; then, for each workload, the
    multiplier at which its placement changes, bisected between grid points to --precision.
    Two ranges sweep the grid.

    \b
    Example:
      planner whatif scenarios/team-quarter-mix.yaml --spot-price 0.5:2.0:16
      planner whatif scenarios/lora-finetune.yaml --spot-price 0.5:1.5:11 --preemption 0.5,1,2 --plot sweep.png
      planner whatif scenarios/team-quarter-mix.yaml --spot-price 0.8:1.6:9 --where provider=gcp --format json
      planner whatif scenarios/team-quarter-mix.yaml --spot-price 0.5:2.0:31 --executor dask://10.0.0.5:8786
      planner whatif scenarios/serving-chat.yaml --rate 0.5:3:11
    """
    from planner.whatif.executors import make_executor
    from planner.whatif.points import loaded_scenario
    from planner.whatif.result import sweep_text
    from planner.whatif.spec import SweepSpec, check_rate, check_where, parse_where, sweep_axes
    from planner.whatif.sweep import run_sweep

    axes = sweep_axes({"spot_price_multiplier": spot, "preemption_multiplier": preemption,
                       "on_demand_price_multiplier": on_demand, "rate_multiplier": rate})
    conditions = parse_where(where)
    if plot and plot.suffix.lower() not in (".png", ".html", ".htm"):
        raise PlannerError(f"expected a .png or .html file name, got {plot.name!r}", "--plot")
    from planner.load.yaml import is_quarter as quarter_file, load_yaml

    is_quarter = quarter_file(load_yaml(file))
    if is_quarter:  # a quarter file: every point is a `planner batch` schedule
        from planner.whatif.points import loaded_quarter, solve_quarter_point

        loaded, solve_one = loaded_quarter(str(file)), solve_quarter_point
    else:
        from planner.whatif.points import solve_point

        loaded, solve_one = loaded_scenario(str(file)), solve_point
    check_where(conditions, loaded.catalog)
    check_outputs(loaded.inputs, output, plot)
    if rate:
        check_rate(axes["rate_multiplier"], loaded.quarter.runs if is_quarter else loaded.scenario.workloads)
    spec = SweepSpec(str(file), axes, tuple(conditions.items()), precision, time_limit)
    if executor == "local":  # a process per grid point at most: more would only be forked to wait
        processes = min(processes or os.cpu_count() or 1, math.prod(len(values) for values in axes.values()))
    pool = make_executor(processes, executor)
    bar = _LazyProgress("sweeping")
    try:
        with pool:
            result = run_sweep(spec, pool, solve=solve_one, progress=bar.update)
    finally:
        bar.close()
    with outputs_together():  # the table and its plot land together or not at all
        emit(sweep_text(result, fmt), output, inputs=loaded.inputs)
        if plot:
            from planner.whatif.plot import write_plot

            write_plot(result, plot, protected=loaded.inputs)
            wrote(plot)
    warn_old_prices(loaded.catalog)


class _LazyProgress:
    """A progress bar on stderr, started at the first update (after worker processes are forked); only on a
    terminal, never on a pipe or a file."""

    def __init__(self, label: str, show: bool = True):
        self.label, self.bar, self.task = label, None, None
        self.show = show and sys.stderr.isatty()

    def update(self, done: int, total: int) -> None:
        if not self.show:
            return
        if self.bar is None:
            from rich.progress import Progress

            self.bar = Progress(transient=True, console=_stderr_console())
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


# ---------------------------------------------------------------- estimate


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--workload", help="Only this workload.")
@click.option("--gpu", "gpus", multiple=True,
              help="Only this GPU name or family; NAME:COUNT for nodes of COUNT GPUs (H100:8; repeatable).")
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="Per workload, only the N fastest shapes that fit (per endpoint, the N GPU and TP replicas that "
                   "serve the most per GPU).")
@click.option("--format", "fmt", type=click.Choice(("table", "json", "csv")), default="table", show_default=True)
@click.option("-o", "--output", type=OutputPath(stdout_dash=True),
              help="Write to this file (atomically) instead of stdout (`-`: stdout).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A plan from `planner solve --format json`: each endpoint pool's load, headroom left and "
                   "TTFT/TPOT percentiles at the planned load.")
def estimate(scenario, workload, gpus, top, fmt, output, plan_file) -> None:
    """Memory per GPU, fit, productive hours W and scaling, per GPU model and count; for endpoints, the
    per-replica capacity table (requests/s within the SLO per GPU model, TP degree and request size).

    Shows why a GPU is ruled in or out: the memory parts (weights, gradients, optimizer,
    activations, KV cache, overhead) against VRAM, the parallelism chosen (TP, PP, DP,
    EP, ZeRO stage, recomputation, micro-batch; or the replicas' TP and batch) and the
    work hours on the offered shape (node size and network) where the workload
    finishes soonest.

    With --plan, each endpoint pool of that plan instead: the share of its capacity within the SLO the
    planned load uses, the headroom left, and TTFT and TPOT at p50, p90 and p99 there.

    \b
    Example:
      planner estimate scenarios/full-finetune-70b.yaml --gpu H100 --gpu A100
      planner estimate scenarios/team-quarter-mix.yaml --top 3 --format csv -o estimate.csv
      planner solve scenarios/serving-chat.yaml --format json -o plan.json
      planner estimate scenarios/serving-chat.yaml --plan plan.json
    """
    from planner.load.scenario import load_scenario

    loaded = load_scenario(scenario)
    protected = loaded.inputs + _inputs(plan_file)
    check_outputs(protected, output)
    names = {w.name for w in loaded.scenario.workloads}
    if workload and workload not in names:
        from planner.errors import did_you_mean

        raise PlannerError(f"unknown workload {workload!r}{did_you_mean(workload, names)}", "--workload")
    for query in gpus:
        if not loaded.catalog.knows_gpu(query):
            from planner.errors import did_you_mean

            raise PlannerError(f"unknown GPU {query!r}{did_you_mean(query, loaded.catalog.gpu_names_and_families())}",
                               "--gpu")
    if plan_file:
        emit(_estimate_plan(loaded, plan_file, workload, gpus, fmt), output, protected)
        return
    from planner.candidates.endpoints import estimate_tables

    rows, capacity = estimate_tables(loaded, workload, gpus, top)
    if fmt in ("json", "csv"):
        from planner.report.estimate import rows_csv
        from planner.report.render import to_json

        emit(to_json(rows + capacity) if fmt == "json" else rows_csv(rows + capacity), output, protected)
        return
    from planner.economics.inputs import estimate_error
    from planner.report.estimate import capacity_text, estimate_text

    order = [w.name for w in loaded.scenario.workloads]
    errors = {w.name: estimate_error(w, loaded.scenario.defaults) for w in loaded.scenario.workloads}
    emit(estimate_text(rows, order, errors) + capacity_text(capacity, order), output, protected)


def _estimate_plan(loaded, plan_file: Path, workload: str | None, gpus: tuple[str, ...], fmt: str) -> str:
    """`planner estimate --plan`: the plan's endpoint pools at their planned load."""
    from planner.candidates.endpoint_load import planned_loads
    from planner.load.catalog import split_accelerator
    from planner.load.plan_file import at, load_plan

    _, endpoints = load_plan(plan_file, loaded.scenario)
    if not endpoints:
        raise PlannerError("the plan has no endpoints: --plan shows an endpoint's pools at their planned load",
                           str(plan_file))
    rows = [r for r in planned_loads(loaded.scenario, loaded.catalog, endpoints, lambda loc: at(plan_file, loc))
            if (not workload or r["workload"] == workload)
            and (not gpus or any(loaded.catalog.gpu_matches(r["gpu"], split_accelerator(q)[0]) for q in gpus))]
    from planner.report.estimate import planned_load_text, rows_csv
    from planner.report.render import to_json

    if fmt != "table":
        return to_json(rows) if fmt == "json" else rows_csv(rows)
    return planned_load_text(rows, [w.name for w in loaded.scenario.workloads])


# ---------------------------------------------------------------- gpus


@main.command()
@click.option("--gpu", "gpus", multiple=True, help="Only this GPU name or family, e.g. H100; H100:8 for nodes of 8 (repeatable).")
@click.option("--catalog", "catalogs", multiple=True, help="Catalog names or CSV paths (default: every shipped one).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def gpus(gpus, catalogs, fmt) -> None:
    """Each GPU model on offer: VRAM, bandwidth, FP8, the cheapest price per GPU-hour, node sizes.

    Prices are the cheapest on-demand and spot price per GPU-hour across every provider and
    region of the catalogs, with the provider that offers it.

    \b
    Example:
      planner gpus
      planner gpus --gpu H100 --gpu H200
    """
    from planner.errors import did_you_mean
    from planner.load.catalog import gpu_summary, load_catalog, shipped_catalog_names

    try:
        cat = load_catalog(catalogs or tuple(shipped_catalog_names()))
    except KeyError as exc:
        raise PlannerError(str(exc.args[0]), "--catalog") from None
    for gpu in gpus:
        if not cat.knows_gpu(gpu):
            raise PlannerError(f"unknown GPU {gpu!r}{did_you_mean(gpu, cat.gpu_names_and_families())}", "--gpu")
    frame = gpu_summary(cat, tuple(gpus))
    if fmt == "json":
        from planner.report.render import to_json

        click.echo(to_json(frame.astype(object).where(frame.notna(), None).to_dict("records")), nl=False)
    elif fmt == "csv":
        from planner.report.render import to_csv

        click.echo(to_csv(frame), nl=False)
    else:
        from planner.report.render import render_table

        as_of = cat.prices_as_of()
        footer = [f"{len(frame)} GPU models; USD per GPU-hour" + (f", prices as of {as_of}" if as_of else "")]
        click.echo(render_table(frame, footer=footer, headers={"on_demand_usd_per_gpu_h": "on_demand",
                                                               "spot_usd_per_gpu_h": "spot", "bandwidth_gbs": "GB/s",
                                                               "gpus_per_node": "per_node", "vram_gib": "vram"},
                                drop=("providers", "gpus_per_node", "bandwidth_gbs", "on_demand_from", "spot_from")),
                   nl=False)
    warn_old_prices(cat)


# ---------------------------------------------------------------- examples


@main.command()
@click.argument("names", nargs=-1)
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("scenarios"),
              show_default=True, help="Folder to copy the examples into (created if missing).")
@click.option("--list", "list_only", is_flag=True, help="Only list the shipped examples.")
def examples(names, directory, list_only) -> None:
    """Copy the shipped example scenarios (all, or NAMES) into a folder of yours.

    A wheel or pipx install has no checkout: this gives it the README's examples and the
    negotiated-price catalog they name. Files already in the folder are kept, never overwritten.

    \b
    Example:
      planner examples && planner solve scenarios/team-quarter-mix.yaml --explain
      planner examples lora-finetune --dir my-plans
    """
    from planner.load.examples import copy_examples, shipped_examples

    if list_only:
        for name, what in shipped_examples().items():
            click.echo(f"{name:28} {what}")
        return
    written, kept = copy_examples(directory, tuple(names))
    for path in written:
        click.echo(f"wrote {path}")
    for path in kept:
        click.echo(f"kept {path} (already there)")


# ---------------------------------------------------------------- schema


@main.command()
@click.argument("kind", type=click.Choice(("scenario", "quarter")), default="scenario")
@click.option("-o", "--output", type=OutputPath(stdout_dash=True), help="Write it to this file (atomically).")
def schema(kind, output) -> None:
    """The JSON Schema of scenario (or quarter) files, for an editor to check YAML as it is written.

    It checks keys and shapes; `planner validate` checks units and the rules across keys too.
    With VS Code's YAML extension, a first line `# yaml-language-server: $schema=scenario.schema.json`
    points a file at it.

    \b
    Example:
      planner schema -o scenario.schema.json
      planner schema quarter -o quarter.schema.json
    """
    from planner.schema.json_schema import file_schema

    emit(file_schema(kind), output)


# ---------------------------------------------------------------- catalog


@main.group()
def catalog() -> None:
    """Browse the shipped instance catalogs, or import fresh prices."""


@catalog.command("list")
@click.option("--provider", "providers", multiple=True, help="Only this provider (repeatable).")
@click.option("--gpu", "gpus", multiple=True, help="GPU name or family, e.g. H100 or H100-SXM; H100:8 for nodes of 8 (repeatable).")
@click.option("--min-vram", help="Minimum VRAM per GPU, e.g. 48GiB.")
@click.option("--region", "regions", multiple=True, help="Only this region (repeatable).")
@click.option("--spot", is_flag=True, help="Only offers with a spot price.")
@click.option("--catalog", "catalogs", multiple=True, help="Catalog names or CSV paths (default: every shipped one).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Show at most this many rows.")
def catalog_list(providers, gpus, min_vram, regions, spot, catalogs, fmt, limit) -> None:
    """List offers, cheapest per GPU-hour first.

    \b
    Example:
      planner catalog list --gpu H100 --format json
      planner catalog list --provider aws --min-vram 40GiB --spot
    """
    from planner.load.catalog import filter_offers, load_catalog, offer_listing, shipped_catalog_names

    try:
        cat = load_catalog(catalogs or tuple(shipped_catalog_names()))
    except KeyError as exc:
        raise PlannerError(str(exc.args[0]), "--catalog") from None
    frame = offer_listing(filter_offers(cat, providers=providers, gpus=gpus, regions=regions, min_vram=min_vram,
                                        spot=spot))
    if limit is not None:
        frame = frame.head(limit)
    if fmt == "json":
        from planner.report.render import to_json

        records = frame.astype(object).where(frame.notna(), None).to_dict("records")
        click.echo(to_json(records), nl=False)
    elif fmt == "csv":
        from planner.report.render import to_csv

        click.echo(to_csv(frame), nl=False)
    else:
        from planner.report.render import render_table

        shown = frame.drop(columns=["defaults", "notes"])
        shown["network"] = shown.pop("inter_node") + " " + shown.pop("inter_node_gbps").map(lambda g: f"{g:g}G" if g else "")
        as_of = cat.prices_as_of()
        footer = [f"{len(frame)} offers; prices USD per node-hour" + (f", as of {as_of}" if as_of else "")
                  + "; preempt = spot preemptions per node-hour"]
        click.echo(render_table(shown, footer=footer, headers=_SHORT_HEADERS,
                                drop=("network", "intra_node", "spot_preemption_per_h", "gpu_vram_gib", "region")),
                   nl=False)
    warn_old_prices(cat)


_SHORT_HEADERS = {"instance_type": "instance", "gpus_per_node": "gpus", "gpu_vram_gib": "vram_gib",
                  "on_demand_usd_h": "on_demand", "spot_usd_h": "spot", "usd_per_gpu_h": "per_gpu_h",
                  "spot_preemption_per_h": "preempt", "intra_node": "intra"}


@catalog.command("show")
@click.argument("offer")
@click.option("--catalog", "catalogs", multiple=True, help="Catalog names or CSV paths (default: every shipped one).")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
def catalog_show(offer, catalogs, fmt) -> None:
    """Everything about one offer: provider/region/instance_type (or a unique instance type).

    \b
    Example:
      planner catalog show aws/us-east-1/p5.48xlarge
    """
    from planner.errors import did_you_mean
    from planner.load.catalog import load_catalog, shipped_catalog_names

    try:
        cat = load_catalog(catalogs or tuple(shipped_catalog_names()))
    except KeyError as exc:
        raise PlannerError(str(exc.args[0]), "--catalog") from None
    keys = cat.offers["key"]
    matches = keys[(keys == offer) | keys.str.endswith("/" + offer)].tolist()
    if not matches:
        raise PlannerError(f"unknown offer {offer!r}{did_you_mean(offer, keys)}; expected provider/region/instance_type",
                           "OFFER")
    if len(matches) > 1:
        raise PlannerError(f"{offer!r} is offered in {len(matches)} places; name one, e.g. {matches[0]!r}", "OFFER")
    chosen = cat.offer_models[matches[0]]
    provider = cat.providers[chosen.provider]
    gpu = cat.gpus[chosen.gpu]
    details = {
        "offer": chosen.model_dump(),
        "gpu": gpu.model_dump(),
        "provider": provider.model_dump(),
        "defaulted_fields": list(chosen.defaults) + [f"provider.{d}" for d in provider.defaults],
    }
    if fmt == "json":
        from planner.report.render import to_json

        click.echo(to_json(details), nl=False)
        return
    lines = [f"{chosen.key}"]
    for section in ("offer", "gpu", "provider"):
        lines.append(f"[{section}]")
        marked = chosen.defaults if section == "offer" else provider.defaults if section == "provider" else ()
        for key, value in details[section].items():
            if key == "defaults":
                continue
            mark = "  (default)" if key in marked else ""
            lines.append(f"  {key:28} {_shown(key, value)}{mark}")
    click.echo("\n".join(lines))


@catalog.command("spot")
@click.option("--traces", "traces_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Measured availability traces (Can't Be Late's JSON format); default the shipped ones.")
@click.option("--provider", "providers", multiple=True, help="Only this provider (repeatable).")
@click.option("--format", "fmt", type=click.Choice(("table", "json", "csv")), default="table", show_default=True)
def catalog_spot(traces_dir, providers, fmt) -> None:
    """How many spot nodes of each offer family could be held at once, as measured: per gang size, the share
    of time all were up (mean, worst and best zone), how long they stayed up together, how long a lost gang
    waited. Every spot candidate is replayed on these traces before it is offered; a gang larger than any
    probe held is not offered.

    \b
    Example:
      planner catalog spot --provider gcp
    """
    import pandas as pd

    from planner.economics.obtainability import Obtainability, obtainability
    from planner.load.traces import load_traces

    rows = [r for r in obtainability(load_traces(traces_dir)) if not providers or r.cloud in providers]
    frame = pd.DataFrame([vars(r) for r in rows], columns=list(Obtainability.__dataclass_fields__))
    if fmt == "json":
        from planner.report.render import to_json

        click.echo(to_json([vars(r) for r in rows]), nl=False)
    elif fmt == "csv":
        from planner.report.render import to_csv

        click.echo(to_csv(frame), nl=False)
    else:
        from planner.report.render import render_table

        shown = frame.copy()
        for column in ("p_all_up", "p_all_up_worst", "p_all_up_best"):
            shown[column] = shown[column].map(lambda p: f"{p:.1%}")
        for column in ("hold_h", "wait_h"):
            shown[column] = shown[column].map(lambda h: "-" if h is None or pd.isna(h) else f"{h:.1f}")
        footer = ["p_all_up: the share of time all n nodes were up, mean over the probes (worst, best probe); "
                  "hold_h: mean hours all n stayed up together; wait_h: mean hours until all n were up again",
                  "a spot gang larger than the largest probe is not planned (docs/cost-model.md §11)"]
        click.echo(render_table(shown, footer=footer, headers={"instance_type": "instance", "p_all_up": "P(all up)",
                                                               "p_all_up_worst": "worst", "p_all_up_best": "best"}),
                   nl=False)


def _shown(key: str, value) -> str:
    """A catalog value as people read it: hours of billing as `1s`, `1m`, `1h`; other floats without float noise."""
    if value is None or isinstance(value, bool) or not isinstance(value, float):
        return "-" if value is None else str(value)
    if key.endswith("_h") and key.startswith("billing"):
        seconds = value * 3600
        for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
            if seconds >= size and abs(seconds / size - round(seconds / size)) < 1e-6:
                return f"{round(seconds / size)}{unit}"
        return f"{seconds:g}s"
    return f"{value:g}"


@catalog.command("import")
@click.option("--from", "source", type=click.Choice(["skypilot"]), required=True, help="Input format.")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--provider", required=True, help="Provider name the offers belong to (e.g. aws).")
@click.option("-o", "--output", required=True, type=OutputPath(Path),
              help="Catalog CSV to write (atomically).")
def catalog_import(source, file, provider, output) -> None:
    """Convert a SkyPilot-format vms.csv into this project's offers catalog format.

    \b
    Example:
      planner catalog import --from skypilot vms.csv --provider aws -o my-aws.csv
    """
    from planner.files import check_target, write_atomic
    from planner.load.skypilot import catalog_header, check_imported, import_skypilot_file

    protected = (file, *_shipped_tables(provider))
    check_target(output, protected)
    converted = import_skypilot_file(file, provider)
    text = catalog_header(source=f"SkyPilot vms.csv imported from {file.name}", as_of=_today()) + converted.to_csv(
        index=False)
    check_imported(converted, text, file)  # what we write must load: checked before writing
    write_atomic(output, text, protected=protected)
    kept = int(converted["notes"].fillna("").str.contains("facts_from_shipped_catalog").sum())
    click.echo(f"wrote {len(converted)} offers to {output} ({kept} keep interconnect, network and preemption "
               f"facts from the shipped catalog)")


def _shipped_tables(provider: str) -> tuple[Path, ...]:
    """The shipped tables `catalog import` and `catalog refresh` read (the facts they keep): never their output."""
    from planner.load.catalog import CATALOG_DIR, catalog_tables

    return (CATALOG_DIR / "offers" / f"{provider}.csv", *catalog_tables())


@catalog.command("refresh")
@click.argument("provider", type=click.Choice(["azure", "aws"]))
@click.option("-o", "--output", required=True, type=OutputPath(Path),
              help="Catalog CSV to write (atomically); name it in a scenario's `catalogs`.")
@click.option("--region", "regions", multiple=True, help="AWS regions to fetch (repeatable; default us-east-1).")
def catalog_refresh(provider, output, regions) -> None:
    """Fetch current on-demand (and spot) GPU prices from the provider's public price API.

    azure: the Retail Prices API (no account needed). aws: the EC2 price-list offer file per
    region (large: streamed to disk); spot prices from the EC2 spot price history when boto3 and
    AWS credentials are present, else the shipped spot prices are kept and marked. Offers keep
    every fact the shipped catalog knows that the price source lacks (GPUs, interconnect,
    network, preemption rate), marked in `notes`.

    \b
    Example:
      planner catalog refresh azure -o azure-today.csv
      planner catalog refresh aws --region us-east-1 --region us-west-2 -o aws-today.csv
    """
    import datetime
    import tempfile

    import pandas as pd

    from planner.files import check_target
    from planner.load.catalog import load_gpus
    from planner.load.offer_facts import load_shipped_offers
    from planner.load.refresh import (
        aws_offers,
        aws_spot_prices,
        azure_offers,
        fetch_aws_offer_file,
        fetch_azure,
        write_offers_csv,
    )

    check_target(output, _shipped_tables(provider))
    gpus = load_gpus()
    if provider == "azure":
        frame = azure_offers(fetch_azure(), gpus)
        skipped = f"; skipped {len(frame.attrs.get('unknown_instance_types', ()))} sizes the shipped catalog lacks"
        source = "Azure Retail Prices API (prices.azure.com/api/retail/prices), Linux consumption and spot"
        spot = ""
    else:
        regions = regions or ("us-east-1",)
        spot_prices = aws_spot_prices(list(regions), sorted(set(load_shipped_offers("aws")["instance_type"])))
        frames = []
        with tempfile.TemporaryDirectory() as tmp:
            for region in regions:
                frames.append(aws_offers(fetch_aws_offer_file(region, directory=Path(tmp)), gpus,
                                         spot_prices=spot_prices))
        frame = pd.concat(frames, ignore_index=True)
        skipped = ""
        source = f"AWS EC2 price list offer files ({', '.join(regions)})"
        spot = "; spot: EC2 spot price history" if spot_prices is not None else \
            "; spot: kept the shipped prices (boto3 not installed or no AWS credentials)"
    if frame.empty:
        raise PlannerError(f"the {provider} price source returned no GPU offers the shipped catalog knows", provider)
    write_offers_csv(frame, output, source, datetime.date.today().isoformat())  # checked before it writes
    click.echo(f"wrote {len(frame)} offers to {output}{skipped}{spot}")


def _today() -> str:
    import datetime

    return datetime.date.today().isoformat()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
