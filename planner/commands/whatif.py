"""`planner whatif`: the plan swept over price and preemption multipliers."""

from __future__ import annotations

import math
import os
from pathlib import Path

import click

from planner.commands.options import (
    MAX_PROCESSES,
    FiniteFloatRange,
    LazyProgress,
    OutputPath,
    check_outputs,
    emit,
    format_option,
    output_option,
    outputs_together,
    warn_old_prices,
    wrote,
)
from planner.errors import PlannerError

# ---------------------------------------------------------------- whatif


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--spot-price",
    "spot",
    metavar="MULT_RANGE",
    help="Spot price multipliers: start:stop:points (0.5:2.0:16) or a comma list (0.8,1,1.25).",
)
@click.option(
    "--preemption",
    metavar="MULT_RANGE",
    help="Spot preemption rate multipliers, same forms.",
)
@click.option(
    "--on-demand-price",
    "on_demand",
    metavar="MULT_RANGE",
    help="On-demand price multipliers, same forms.",
)
@click.option(
    "--rate",
    metavar="MULT_RANGE",
    help="Traffic multipliers for serving endpoints (every period's requests/s), same forms; along it a "
    "switch is a change of an endpoint's GPU type, market or TP degree, not of its node count.",
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="KEY=VALUE,...",
    help="Scale only these offers: provider=, gpu= (name or family), region=, instance_type=.",
)
@format_option()
@output_option
@click.option(
    "--plot",
    type=OutputPath(Path),
    help="Write a plot: FILE.png, or FILE.html (self-contained, inline SVG).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, MAX_PROCESSES),
    default=None,
    help=f"Points solved at once by local processes (--executor local only; at most {MAX_PROCESSES}, and "
    "never more than the sweep's grid points)  [default: local cores]",
)
@click.option(
    "--executor",
    default="local",
    show_default=True,
    metavar="local|dask://HOST:PORT",
    help="Where points run: local processes, or the Dask cluster whose scheduler listens at HOST:PORT "
    "(as many points at once as it has worker threads; --processes is refused). Same plans either way.",
)
@click.option(
    "--precision",
    type=FiniteFloatRange(min=1e-6),
    default=0.005,
    show_default=True,
    help="Switch points are bisected until the interval is at most this wide.",
)
@click.option(
    "--time-limit",
    type=FiniteFloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="CP-SAT seconds per point.",
)
def whatif(
    file,
    spot,
    preemption,
    on_demand,
    rate,
    where,
    fmt,
    output,
    plot,
    processes,
    executor,
    precision,
    time_limit,
) -> None:
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
    from planner.whatif.spec import (
        SweepSpec,
        check_rate,
        check_where,
        parse_where,
        sweep_axes,
    )
    from planner.whatif.sweep import run_sweep

    axes = sweep_axes(
        {
            "spot_price_multiplier": spot,
            "preemption_multiplier": preemption,
            "on_demand_price_multiplier": on_demand,
            "rate_multiplier": rate,
        }
    )
    conditions = parse_where(where)
    if plot and plot.suffix.lower() not in (".png", ".html", ".htm"):
        raise PlannerError(
            f"expected a .png or .html file name, got {plot.name!r}", "--plot"
        )
    from planner.load.yaml import is_quarter as quarter_file
    from planner.load.yaml import load_yaml

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
        check_rate(
            axes["rate_multiplier"],
            loaded.quarter.runs if is_quarter else loaded.scenario.workloads,
        )
    spec = SweepSpec(str(file), axes, tuple(conditions.items()), precision, time_limit)
    if (
        executor == "local"
    ):  # a process per grid point at most: more would only be forked to wait
        processes = min(
            processes or os.cpu_count() or 1,
            math.prod(len(values) for values in axes.values()),
        )
    pool = make_executor(processes, executor)
    bar = LazyProgress("sweeping")
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
