"""`planner export` and `planner calibrate`: a plan written for the tools that launch it, and the runs that
happened read back into a calibration the scenario can name."""

from __future__ import annotations

from pathlib import Path

import click

from planner.commands.options import (
    FiniteFloatRange,
    OutputPath,
    check_outputs,
    emit,
    format_option,
    inputs_of,
    output_option,
    outputs_together,
    warn_old_prices,
    wrote,
)
from planner.errors import PlannerError

# ---------------------------------------------------------------- export


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
    "--to",
    "launcher",
    type=click.Choice(("skypilot", "dstack", "kueue")),
    required=True,
    help="The launcher: SkyPilot task YAML, dstack task configurations, or Kueue queues and suspended Jobs.",
)
@click.option(
    "-o",
    "--output",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The folder to write the files in (made if missing; a file there that differs is never replaced).",
)
@click.option(
    "--time-limit",
    type=FiniteFloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Solver time limit when no --plan is given.",
)
def export(scenario, plan_file, launcher, folder, time_limit) -> None:
    """Write the plan as the files a launcher takes: one per job, each with its offer, nodes and market.

    The checkpoint cadence, folders, deadline and expected cost reach the job as PLANNER_*
    environment variables; the plan's figures are comments and labels. spot_fallback becomes
    spot first with on demand after it as the launcher has it, with a comment where it cannot
    express the plan's switch. For a quarter, launch.sh starts the runs in order at their
    scheduled times; for Kueue, the scenario's quotas become each provider's ClusterQueue.
    Nothing is invented: what the planner cannot know is REPLACE-ME-..., listed on the last line.

    \b
    Example:
      planner export scenarios/pretrain-deadline.yaml --to skypilot -o launch/
      planner solve scenarios/team-quarter-mix.yaml --format json -o plan.json
      planner export scenarios/team-quarter-mix.yaml --plan plan.json --to dstack -o launch/
      planner export scenarios/quarter-team.yaml --to kueue -o k8s/
    """
    from planner.launch.export import export_plan, export_schedule
    from planner.load.yaml import is_quarter, load_yaml
    from planner.replay import pipeline as replay

    if is_quarter(load_yaml(scenario)):
        from planner.load.quarter import load_quarter

        loaded = load_quarter(scenario)
        result = export_schedule(
            loaded, replay.schedule_record(loaded, plan_file, time_limit), launcher
        )
    else:
        from planner.load.scenario import load_scenario

        loaded = load_scenario(scenario)
        result = export_plan(
            loaded, replay.plan_record(loaded, plan_file, time_limit), launcher
        )
    inputs = loaded.inputs + inputs_of(plan_file)
    _write_folder(folder, result.files, inputs)
    for job, why in result.skipped:
        click.echo(f"no {launcher} file for {job}: {why}", err=True)
    if result.placeholders:
        click.echo(f"fill in before launching: {', '.join(result.placeholders)}")
    warn_old_prices(loaded.catalog)


def _write_folder(folder: Path, files, inputs) -> None:
    """Every file into `folder`, all or none; one already there is replaced only where it is what this export
    wrote before (an edited one, placeholders filled in, is the team's: refused)."""
    from planner.files import write_atomic
    from planner.load.examples import make_folder

    if folder.exists() and not folder.is_dir():
        raise PlannerError("expected a folder for the files", str(folder))
    for f in files:
        target = folder / f.name
        if target.exists():
            try:
                same = target.read_text(encoding="utf-8") == f.text
            except (OSError, UnicodeDecodeError):
                same = False
            if not same:
                raise PlannerError(
                    "exists and differs from this export (edited?); export to another folder or move it",
                    str(target),
                )
    make_folder(folder)
    check_outputs(inputs, *(folder / f.name for f in files))
    with outputs_together():
        for f in files:
            write_atomic(folder / f.name, f.text, protected=inputs)
            wrote(folder / f.name)
    for f in files:
        if f.executable:
            path = folder / f.name
            path.chmod(path.stat().st_mode | 0o111)


# ---------------------------------------------------------------- calibrate


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("runs", type=click.Path(exists=False, path_type=Path))
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The plan the runs followed, from `planner solve --format json`.",
)
@click.option(
    "--fit",
    "fit_file",
    type=OutputPath(),
    help="Write the calibration here (YAML), for the scenario's `calibration:` key.",
)
@click.option(
    "--billing",
    "billing_files",
    type=click.Path(dir_okay=False, path_type=Path),
    multiple=True,
    help="A billing export (FOCUS, or AWS's Cost and Usage Report, as CSV): what each run was billed, from the "
    "lines labelled planner-job (the label `planner export` sets) within the run. Repeatable.",
)
@format_option(("table", "json", "csv"))
@output_option
def calibrate(scenario, runs, plan_file, fit_file, billing_files, fmt, output) -> None:
    """Hold the runs that happened against their plan, and refit what the planner assumed.

    RUNS is a CSV of run records, or a folder of them (docs/calibrate.md): per run the workload,
    its offer, nodes and market, start and end, preemptions (AT/BACK) and failures, and where
    measured the tokens done, checkpoint and restart seconds and the bill (or --billing, a
    billing export whose lines carry the planner-job label). From them: throughput
    per GPU and recipe, preemptions and capacity waits per instance type, checkpoint and restart
    times per storage option, each with its sample size and interval; and per run the planned
    wall time and cost beside the actual. Name the fit in the scenario (`calibration: fit.yaml`)
    and plan again.

    \b
    Example:
      planner simulate scenarios/lora-finetune.yaml --plan plan.json --trials 100 --runs-out runs.csv
      planner calibrate scenarios/lora-finetune.yaml runs.csv --plan plan.json --fit fit.yaml
    """
    from planner.launch.calibrate import calibrate as fit
    from planner.load.billing import load_billing
    from planner.load.plan_file import load_plan
    from planner.load.runs import load_runs
    from planner.load.scenario import load_scenario
    from planner.load.yaml import is_quarter, load_yaml
    from planner.report.calibrate import calibration_text, calibration_yaml

    if is_quarter(load_yaml(scenario)):
        raise PlannerError(
            "calibrate holds runs against a scenario's plan (`planner solve`); name the scenario the runs "
            "were planned from, not a quarter file",
            str(scenario),
        )
    loaded = load_scenario(scenario)
    records, files = load_runs(runs)
    inputs = loaded.inputs + inputs_of(plan_file, *billing_files) + files
    check_outputs(inputs, output, fit_file)
    plan = load_plan(plan_file, loaded.scenario)
    charges = [c for f in billing_files for c in load_billing(f)]
    latest = max(r.end for r in records).date().isoformat()
    result = fit(loaded, plan, records, latest, charges)
    with outputs_together():
        if fit_file:
            from planner.files import write_atomic

            write_atomic(Path(fit_file), calibration_yaml(result), protected=inputs)
            wrote(fit_file)
        emit(calibration_text(result, fmt), output, inputs)
    warn_old_prices(loaded.catalog)
