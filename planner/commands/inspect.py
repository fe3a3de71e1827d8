"""The commands that look before planning: `validate`, `estimate`, `gpus`, `examples`, `schema`."""

from __future__ import annotations

from pathlib import Path

import click

from planner.commands.options import (
    OutputPath,
    check_outputs,
    emit,
    format_option,
    inputs_of,
    output_option,
    warn_old_prices,
)
from planner.errors import PlannerError

# ---------------------------------------------------------------- validate


@click.command()
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
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
            click.echo(
                f"{path}: ok: quarter {q.name!r}, {len(q.runs)} run(s), {len(q.reservations)} reservation "
                f"option(s), {quarter.steps} steps of {quarter.step_h:g} h, {len(quarter.catalog.offers)} offers"
                + _with_configs(quarter.configs)
            )
            continue
        loaded = load_scenario(path)
        scenario, offers = loaded.scenario, loaded.catalog.offers
        kinds = ", ".join(sorted({w.kind for w in scenario.workloads}))
        click.echo(
            f"{path}: ok: scenario {scenario.name!r}, {len(scenario.workloads)} workload(s) ({kinds}), "
            f"{len(offers)} offers from {', '.join(scenario.catalogs)}"
            + _with_configs(loaded.configs)
        )


def _with_configs(configs) -> str:
    """Which team config files a file was read with (`planner.toml`)."""
    return f"; with {', '.join(map(str, configs))}" if configs else ""


# ---------------------------------------------------------------- estimate


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--workload", help="Only this workload.")
@click.option(
    "--gpu",
    "gpus",
    multiple=True,
    help="Only this GPU name or family; NAME:COUNT for nodes of COUNT GPUs (H100:8; repeatable).",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=None,
    help="Per workload, only the N fastest shapes that fit (per endpoint, the N GPU and TP replicas that "
    "serve the most per GPU).",
)
@format_option(("table", "json", "csv"))
@output_option
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A plan from `planner solve --format json`: each endpoint pool's load, headroom left and "
    "TTFT/TPOT percentiles at the planned load.",
)
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
    protected = loaded.inputs + inputs_of(plan_file)
    check_outputs(protected, output)
    names = {w.name for w in loaded.scenario.workloads}
    if workload and workload not in names:
        from planner.errors import did_you_mean

        raise PlannerError(
            f"unknown workload {workload!r}{did_you_mean(workload, names)}",
            "--workload",
        )
    for query in gpus:
        if not loaded.catalog.knows_gpu(query):
            from planner.errors import did_you_mean

            raise PlannerError(
                f"unknown GPU {query!r}{did_you_mean(query, loaded.catalog.gpu_names_and_families())}",
                "--gpu",
            )
    if plan_file:
        emit(_estimate_plan(loaded, plan_file, workload, gpus, fmt), output, protected)
        return
    from planner.candidates.estimate_tables import estimate_tables

    rows, capacity = estimate_tables(loaded, workload, gpus, top)
    if fmt in ("json", "csv"):
        from planner.report.estimate import rows_csv
        from planner.report.render import to_json

        emit(
            to_json(rows + capacity) if fmt == "json" else rows_csv(rows + capacity),
            output,
            protected,
        )
        return
    from planner.economics.inputs import estimate_error
    from planner.report.estimate import capacity_text, estimate_text

    order = [w.name for w in loaded.scenario.workloads]
    errors = {
        w.name: estimate_error(w, loaded.scenario.defaults)
        for w in loaded.scenario.workloads
    }
    emit(
        estimate_text(rows, order, errors) + capacity_text(capacity, order),
        output,
        protected,
    )


def _estimate_plan(
    loaded, plan_file: Path, workload: str | None, gpus: tuple[str, ...], fmt: str
) -> str:
    """`planner estimate --plan`: the plan's endpoint pools at their planned load."""
    from planner.candidates.endpoint_load import planned_loads
    from planner.load.catalog import split_accelerator
    from planner.load.plan_file import at, load_plan

    endpoints = load_plan(plan_file, loaded.scenario).endpoints
    if not endpoints:
        raise PlannerError(
            "the plan has no endpoints: --plan shows an endpoint's pools at their planned load",
            str(plan_file),
        )
    rows = [
        r
        for r in planned_loads(
            loaded.scenario, loaded.catalog, endpoints, lambda loc: at(plan_file, loc)
        )
        if (not workload or r["workload"] == workload)
        and (
            not gpus
            or any(
                loaded.catalog.gpu_matches(r["gpu"], split_accelerator(q)[0])
                for q in gpus
            )
        )
    ]
    from planner.report.estimate import planned_load_text, rows_csv
    from planner.report.render import to_json

    if fmt != "table":
        return to_json(rows) if fmt == "json" else rows_csv(rows)
    return planned_load_text(rows, [w.name for w in loaded.scenario.workloads])


# ---------------------------------------------------------------- gpus


@click.command()
@click.option(
    "--gpu",
    "gpus",
    multiple=True,
    help="Only this GPU name or family, e.g. H100; H100:8 for nodes of 8 (repeatable).",
)
@click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    help="Catalog names or CSV paths (default: every shipped one).",
)
@format_option()
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
            raise PlannerError(
                f"unknown GPU {gpu!r}{did_you_mean(gpu, cat.gpu_names_and_families())}",
                "--gpu",
            )
    frame = gpu_summary(cat, tuple(gpus))
    if fmt == "json":
        from planner.report.render import to_json

        click.echo(
            to_json(frame.astype(object).where(frame.notna(), None).to_dict("records")),
            nl=False,
        )
    elif fmt == "csv":
        from planner.report.render import to_csv

        click.echo(to_csv(frame), nl=False)
    else:
        from planner.report.render import render_table

        as_of = cat.prices_as_of()
        footer = [
            f"{len(frame)} GPU models; USD per GPU-hour"
            + (f", prices as of {as_of}" if as_of else "")
        ]
        click.echo(
            render_table(
                frame,
                footer=footer,
                headers={
                    "on_demand_usd_per_gpu_h": "on_demand",
                    "spot_usd_per_gpu_h": "spot",
                    "bandwidth_gbs": "GB/s",
                    "gpus_per_node": "per_node",
                    "vram_gib": "vram",
                },
                drop=(
                    "providers",
                    "gpus_per_node",
                    "bandwidth_gbs",
                    "on_demand_from",
                    "spot_from",
                ),
            ),
            nl=False,
        )
    warn_old_prices(cat)


# ---------------------------------------------------------------- examples


@click.command()
@click.argument("names", nargs=-1)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("scenarios"),
    show_default=True,
    help="Folder to copy the examples into (created if missing).",
)
@click.option(
    "--list", "list_only", is_flag=True, help="Only list the shipped examples."
)
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


@click.command()
@click.argument(
    "kind",
    type=click.Choice(("scenario", "quarter", "plan", "schedule")),
    default="scenario",
)
@click.option(
    "-o",
    "--output",
    type=OutputPath(stdout_dash=True),
    help="Write it to this file (atomically).",
)
def schema(kind, output) -> None:
    """The JSON Schema of scenario (or quarter) files, for an editor to check YAML as it is written; or of a plan
    (`planner solve --format json`) or a schedule (`planner batch --format json`), for the tools that read them.

    It checks keys and shapes; `planner validate` checks units and the rules across keys too.
    With VS Code's YAML extension, a first line `# yaml-language-server: $schema=scenario.schema.json`
    points a file at it.

    \b
    Example:
      planner schema -o scenario.schema.json
      planner schema quarter -o quarter.schema.json
      planner schema plan -o plan.schema.json
    """
    from planner.schema.json_schema import file_schema

    emit(file_schema(kind), output)
