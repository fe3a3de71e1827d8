"""`planner catalog`: list, show, spot, import and refresh the offers the planner prices."""

from __future__ import annotations

import os
from pathlib import Path

import click

from planner.commands.options import OutputPath, format_option, warn_old_prices
from planner.errors import PlannerError

# ---------------------------------------------------------------- catalog


@click.group()
def catalog() -> None:
    """Browse the shipped instance catalogs, or import fresh prices."""


@catalog.command("list")
@click.option(
    "--provider", "providers", multiple=True, help="Only this provider (repeatable)."
)
@click.option(
    "--gpu",
    "gpus",
    multiple=True,
    help="GPU name or family, e.g. H100 or H100-SXM; H100:8 for nodes of 8 (repeatable).",
)
@click.option("--min-vram", help="Minimum VRAM per GPU, e.g. 48GiB.")
@click.option(
    "--region", "regions", multiple=True, help="Only this region (repeatable)."
)
@click.option("--spot", is_flag=True, help="Only offers with a spot price.")
@click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    help="Catalog names or CSV paths (default: every shipped one).",
)
@format_option()
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    help="Show at most this many rows.",
)
def catalog_list(
    providers, gpus, min_vram, regions, spot, catalogs, fmt, limit
) -> None:
    """List offers, cheapest per GPU-hour first.

    \b
    Example:
      planner catalog list --gpu H100 --format json
      planner catalog list --provider aws --min-vram 40GiB --spot
    """
    from planner.load.catalog import (
        filter_offers,
        load_catalog,
        offer_listing,
        shipped_catalog_names,
    )

    try:
        cat = load_catalog(catalogs or tuple(shipped_catalog_names()))
    except KeyError as exc:
        raise PlannerError(str(exc.args[0]), "--catalog") from None
    frame = offer_listing(
        filter_offers(
            cat,
            providers=providers,
            gpus=gpus,
            regions=regions,
            min_vram=min_vram,
            spot=spot,
        )
    )
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
        shown["network"] = (
            shown.pop("inter_node")
            + " "
            + shown.pop("inter_node_gbps").map(lambda g: f"{g:g}G" if g else "")
        )
        as_of = cat.prices_as_of()
        footer = [
            f"{len(frame)} offers; prices USD per node-hour"
            + (f", as of {as_of}" if as_of else "")
            + "; preempt = spot preemptions per node-hour"
        ]
        click.echo(
            render_table(
                shown,
                footer=footer,
                headers=_SHORT_HEADERS,
                drop=(
                    "network",
                    "intra_node",
                    "spot_preemption_per_h",
                    "gpu_vram_gib",
                    "region",
                ),
            ),
            nl=False,
        )
    warn_old_prices(cat)


_SHORT_HEADERS = {
    "instance_type": "instance",
    "gpus_per_node": "gpus",
    "gpu_vram_gib": "vram_gib",
    "on_demand_usd_h": "on_demand",
    "spot_usd_h": "spot",
    "usd_per_gpu_h": "per_gpu_h",
    "spot_preemption_per_h": "preempt",
    "intra_node": "intra",
}


@catalog.command("show")
@click.argument("offer")
@click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    help="Catalog names or CSV paths (default: every shipped one).",
)
@format_option(("table", "json"))
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
        raise PlannerError(
            f"unknown offer {offer!r}{did_you_mean(offer, keys)}; expected provider/region/instance_type",
            "OFFER",
        )
    if len(matches) > 1:
        raise PlannerError(
            f"{offer!r} is offered in {len(matches)} places; name one, e.g. {matches[0]!r}",
            "OFFER",
        )
    chosen = cat.offer_models[matches[0]]
    provider = cat.providers[chosen.provider]
    gpu = cat.gpus[chosen.gpu]
    details = {
        "offer": chosen.model_dump(),
        "gpu": gpu.model_dump(),
        "provider": provider.model_dump(),
        "defaulted_fields": list(chosen.defaults)
        + [f"provider.{d}" for d in provider.defaults],
    }
    if fmt == "json":
        from planner.report.render import to_json

        click.echo(to_json(details), nl=False)
        return
    lines = [f"{chosen.key}"]
    for section in ("offer", "gpu", "provider"):
        lines.append(f"[{section}]")
        marked = (
            chosen.defaults
            if section == "offer"
            else provider.defaults
            if section == "provider"
            else ()
        )
        for key, value in details[section].items():
            if key == "defaults":
                continue
            mark = "  (default)" if key in marked else ""
            lines.append(f"  {key:28} {_shown(key, value)}{mark}")
    click.echo("\n".join(lines))


@catalog.command("spot")
@click.option(
    "--traces",
    "traces_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Measured availability traces (Can't Be Late's JSON format); default the shipped ones.",
)
@click.option(
    "--provider", "providers", multiple=True, help="Only this provider (repeatable)."
)
@format_option(("table", "json", "csv"))
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

    rows = [
        r
        for r in obtainability(load_traces(traces_dir))
        if not providers or r.cloud in providers
    ]
    frame = pd.DataFrame(
        [vars(r) for r in rows], columns=list(Obtainability.__dataclass_fields__)
    )
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
            shown[column] = shown[column].map(
                lambda h: "-" if h is None or pd.isna(h) else f"{h:.1f}"
            )
        footer = [
            "p_all_up: the share of time all n nodes were up, mean over the probes (worst, best probe); "
            "hold_h: mean hours all n stayed up together; wait_h: mean hours until all n were up again",
            "a spot gang larger than the largest probe is not planned (docs/cost-model.md §11)",
        ]
        click.echo(
            render_table(
                shown,
                footer=footer,
                headers={
                    "instance_type": "instance",
                    "p_all_up": "P(all up)",
                    "p_all_up_worst": "worst",
                    "p_all_up_best": "best",
                },
            ),
            nl=False,
        )


@catalog.command("storage")
@click.option(
    "--provider", "providers", multiple=True, help="Only this provider (repeatable)."
)
@format_option(("table", "json", "csv"))
def catalog_storage(providers, fmt) -> None:
    """Where a job's data and checkpoints can live, per provider: class, read and write MB/s (per node or per
    provisioned TiB), persistence and price, with the source of each row (docs/storage.md). A plan picks one per
    workload with its offer.

    \b
    Example:
      planner catalog storage --provider aws
    """
    from planner.errors import did_you_mean
    from planner.load.catalog import load_storage

    known = sorted({o.provider for o in load_storage()})
    for provider in providers:
        if provider not in known:
            raise PlannerError(
                f"unknown provider {provider!r}{did_you_mean(provider, known)}; known: {', '.join(known)}",
                "--provider",
            )
    rows = [
        o.model_dump(mode="json")
        for o in load_storage()
        if not providers or o.provider in providers
    ]
    if fmt == "json":
        from planner.report.render import to_json

        click.echo(to_json(rows), nl=False)
        return
    import pandas as pd

    frame = pd.DataFrame(rows)
    if fmt == "csv":
        from planner.report.render import to_csv

        click.echo(to_csv(frame), nl=False)
        return
    from planner.report.render import render_table

    shown = frame.drop(columns=["source", "as_of", "shared"]).copy()
    for column in ("node_max_mbs", "max_mbs", "usd_per_gib_month"):
        shown[column] = shown[column].map(
            lambda v: "-" if v is None or pd.isna(v) else f"{v:g}"
        )
    footer = [
        "scope node: read_mbs/write_mbs per node; tib: per provisioned TiB of a file system (min_gib the "
        "smallest); sources and assumptions: catalogs/storage.csv",
        "a file system is also planned sized for its clients' bandwidth (`-for-bandwidth`)",
    ]
    click.echo(
        render_table(
            shown,
            footer=footer,
            headers={"storage_class": "class", "usd_per_gib_month": "$/GiB-month"},
        ),
        nl=False,
    )


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
@click.option(
    "--from",
    "source",
    type=click.Choice(["skypilot"]),
    required=True,
    help="Input format.",
)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--provider", required=True, help="Provider name the offers belong to (e.g. aws)."
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=OutputPath(Path),
    help="Catalog CSV to write (atomically).",
)
def catalog_import(source, file, provider, output) -> None:
    """Convert a SkyPilot-format vms.csv into this project's offers catalog format.

    \b
    Example:
      planner catalog import --from skypilot vms.csv --provider aws -o my-aws.csv
    """
    from planner.files import check_target, write_atomic
    from planner.load.skypilot import (
        catalog_header,
        check_imported,
        import_skypilot_file,
    )

    protected = (file, *_shipped_tables(provider))
    check_target(output, protected)
    converted = import_skypilot_file(file, provider)
    text = catalog_header(
        source=f"SkyPilot vms.csv imported from {file.name}", as_of=_today()
    ) + converted.to_csv(index=False)
    # what we write must load: checked before writing
    check_imported(converted, text, file)
    write_atomic(output, text, protected=protected)
    kept = int(
        converted["notes"].fillna("").str.contains("facts_from_shipped_catalog").sum()
    )
    click.echo(
        f"wrote {len(converted)} offers to {output} ({kept} keep interconnect, network and preemption "
        f"facts from the shipped catalog)"
    )


def _shipped_tables(provider: str) -> tuple[Path, ...]:
    """The shipped tables `catalog import` and `catalog refresh` read (the facts they keep): never their output."""
    from planner.load.catalog import CATALOG_DIR, catalog_tables

    return (CATALOG_DIR / "offers" / f"{provider}.csv", *catalog_tables())


class _RefreshProvider(click.Choice):
    """A provider with a price API the planner reads, or `all`; a shipped provider without one is
    refused with the way its prices come in (`catalog import`)."""

    def __init__(self) -> None:
        from planner.load.refresh_sources import PRICE_APIS

        super().__init__([*sorted(PRICE_APIS), "all"])

    def convert(self, value, param, ctx):
        from planner.load.refresh_sources import NO_PRICE_API, import_hint

        if value in NO_PRICE_API:
            self.fail(f"{value}: {import_hint(value)}", param, ctx)
        return super().convert(value, param, ctx)


@catalog.command("refresh")
@click.argument("provider", type=_RefreshProvider())
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Catalog CSV to write (atomically); name it in a scenario's `catalogs`. "
    "For `all`, a folder: one PROVIDER.csv each.",
)
@click.option(
    "--region",
    "regions",
    multiple=True,
    help="AWS regions to fetch (repeatable; default us-east-1).",
)
def catalog_refresh(provider, output, regions) -> None:
    """Fetch current on-demand (and spot) GPU prices from the provider's price API.

    azure, cudo, vast: public, no account. aws: the EC2 price-list offer file per region (large:
    streamed to disk); spot from the EC2 spot price history with boto3 and AWS credentials, else
    the shipped spot prices are kept and marked. gcp: the Cloud Billing Catalog API
    (GOOGLE_API_KEY). lambda: LAMBDA_API_KEY. runpod: RunPod's GraphQL API (RUNPOD_API_KEY sent
    when set). do: DIGITALOCEAN_TOKEN. hyperbolic: HYPERBOLIC_API_KEY. fluidstack:
    FLUIDSTACK_API_KEY. Keys are read from the environment or the provider's CLI config, never
    stored. A stock signal in the answer (Lambda's regions with capacity, RunPod's stockStatus) is
    kept in `notes`. Offers keep every fact the shipped catalog knows that the price source lacks
    (GPUs, interconnect, network, preemption rate), marked in `notes`; sizes it lacks are skipped
    and counted.

    nebius and paperspace publish no price API: their prices come in with `planner catalog
    import`. `all` refreshes every shipped provider it can into the folder OUTPUT (made if
    missing), one line per provider: what it wrote, or why not (no key: the variable to set;
    offline; no price API). Exit 0 when at least one was written; it replaces only files an
    earlier refresh wrote.

    \b
    Example:
      planner catalog refresh azure -o azure-today.csv
      planner catalog refresh aws --region us-east-1 --region us-west-2 -o aws-today.csv
      planner catalog refresh all -o prices-today/
    """
    from planner.load.catalog import load_gpus
    from planner.load.refresh_sources import refresh_all, write_refresh

    gpus = load_gpus()
    if provider == "all":
        for line in refresh_all(Path(output), gpus, tuple(regions)):
            click.echo(line)
        return
    if str(output).endswith(("/", os.sep)) or Path(output).is_dir():
        raise PlannerError(
            "names a folder; expected a file name (a folder is for `catalog refresh all`)",
            str(output),
        )
    click.echo(write_refresh(provider, Path(output), gpus, tuple(regions), _today()))


@catalog.command("signals")
@click.argument("provider", type=click.Choice(["aws", "azure"]))
@click.option(
    "-o",
    "--output",
    required=True,
    type=OutputPath(Path),
    help="Signals CSV to write (atomically); name it in a scenario's `signals`.",
)
@click.option(
    "--region",
    "regions",
    multiple=True,
    help="AWS regions to score (repeatable; default us-east-1).",
)
@click.option(
    "--nodes",
    "nodes",
    multiple=True,
    type=click.IntRange(1, 10_000),
    help="Node counts to score (repeatable; default 1 and 8).",
)
def catalog_signals(provider, output, regions, nodes) -> None:
    """Read what the provider says about spot availability, for a scenario's `signals`.

    aws: the Spot Instance Advisor's monthly interruption buckets for the shipped GPU instance types (public,
    no account), and spot placement scores for the node counts asked when boto3 and AWS credentials are
    present (else one line says they were skipped). azure: spot eviction rates from Azure Resource Graph
    through the Azure CLI (`az login`). A bucket sets the offer's spot preemption rate, a placement score
    joins `defaults.spot_placement_scores`; docs/catalogs.md has the rules.

    \b
    Example:
      planner catalog signals aws --region us-east-1 --nodes 8 -o signals.csv
    """
    from planner.files import check_target
    from planner.load.offer_facts import load_shipped_offers
    from planner.load.signals import write_signals
    from planner.load.signals_fetch import (
        aws_advisor_signals,
        aws_placement_signals,
        azure_eviction_signals,
        fetch_aws_advisor,
        fetch_aws_placement_scores,
        fetch_azure_eviction,
    )

    check_target(output, _shipped_tables(provider))
    today = _today()
    shipped = load_shipped_offers(provider)
    types = set(shipped["instance_type"])
    if provider == "azure":
        signals = azure_eviction_signals(fetch_azure_eviction(), types, today)
    else:
        signals = aws_advisor_signals(fetch_aws_advisor(), types, today)
        wanted = sorted(set(shipped[shipped["spot_usd_h"].notna()]["instance_type"]))
        try:
            signals += aws_placement_signals(
                fetch_aws_placement_scores(
                    wanted, list(regions or ("us-east-1",)), list(nodes or (1, 8))
                ),
                today,
            )
        except PlannerError as exc:
            click.echo(f"placement scores skipped: {exc.message}", err=True)
    if not signals:
        raise PlannerError(
            f"the {provider} sources returned no signal for the shipped offers"
        )
    write_signals(signals, output)
    click.echo(f"wrote {len(signals)} signals to {output}")


def _today() -> str:
    import datetime

    return datetime.date.today().isoformat()
