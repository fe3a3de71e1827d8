"""Which providers' prices `planner catalog refresh` fetches, from what, and the call that does it.

``PRICE_APIS`` names each provider with a price API the planner reads (docs/catalogs.md shows the
same table); ``NO_PRICE_API`` the shipped providers without one, and why, so that a user is sent
to ``planner catalog import``.  Nothing here touches the network until ``refresh_offers`` runs,
and each provider's module is imported then (tests replace its ``fetch_*``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PriceApi:
    api: str  # what is asked
    credential: str  # where the key comes from ("none": public)
    reads: str  # the fields read
    stock: str  # the availability signal kept in `notes` ("-": none)


PRICE_APIS: dict[str, PriceApi] = {
    "aws": PriceApi(
        "EC2 price-list offer file per region (pricing.us-east-1.amazonaws.com); "
        "spot: EC2 spot price history",
        "none; spot needs boto3 and AWS credentials (else the shipped spot prices stay)",
        "Linux shared-tenancy OnDemand USD/h, vCPUs, memory; latest spot price per zone",
        "-",
    ),
    "azure": PriceApi(
        "Retail Prices API (prices.azure.com/api/retail/prices)",
        "none",
        "Linux consumption and Spot retailPrice per region of Standard_N* sizes",
        "-",
    ),
    "cudo": PriceApi(
        "machine types (rest.compute.cudo.org/v1/vms/machine-types-2)",
        "none",
        "vcpuPriceHr, memoryGibPriceHr, gpuPriceHr per data center",
        "maxGpuFree: capacity_available / capacity_unavailable",
    ),
    "do": PriceApi(
        "droplet sizes (api.digitalocean.com/v2/sizes)",
        "DIGITALOCEAN_TOKEN (or DIGITALOCEAN_ACCESS_TOKEN, or doctl's config.yaml)",
        "price_hourly, vcpus, memory, regions of sizes with gpu_info",
        "available false: capacity_unavailable",
    ),
    "fluidstack": PriceApi(
        "available configurations (platform.fluidstack.io/list_available_configurations)",
        "FLUIDSTACK_API_KEY (or ~/.fluidstack/api_key)",
        "price_per_gpu_hr, gpu_counts, regions",
        "-",
    ),
    "gcp": PriceApi(
        "Cloud Billing Catalog API, Compute Engine SKUs (services/6F81-5844-456A/skus)",
        "GOOGLE_API_KEY (an API key with the Cloud Billing API enabled)",
        "OnDemand and Preemptible (spot) unit prices of GPU, core and RAM SKUs per region",
        "-",
    ),
    "hyperbolic": PriceApi(
        "Hyperbolic's catalog for SkyPilot (api.dev-hyperbolic.xyz/v2/skypilot/catalog)",
        "HYPERBOLIC_API_KEY (or ~/.hyperbolic/api_key)",
        "Price, SpotPrice, vCPUs, MemoryGiB per VM",
        "-",
    ),
    "lambda": PriceApi(
        "Lambda Cloud API instance types (cloud.lambda.ai/api/v1/instance-types)",
        "LAMBDA_API_KEY (or ~/.lambda_cloud/lambda_keys)",
        "price_cents_per_hour, specs.vcpus, specs.memory_gib",
        "regions_with_capacity_available: capacity_available / capacity_unavailable",
    ),
    "runpod": PriceApi(
        "GraphQL gpuTypes (api.runpod.io/graphql)",
        "RUNPOD_API_KEY (or ~/.runpod/config.toml); sent when set, the prices are public",
        "securePrice, secureSpotPrice per GPU; lowestPrice.stockStatus per GPU count",
        "stockStatus: stock_high / stock_medium / stock_low / stock_none",
    ),
    "vast": PriceApi(
        "marketplace offer search (console.vast.ai/api/v0/bundles)",
        "none",
        "dph_total of rentable machines, lower median per GPU model, count and place",
        "machines_listed_N",
    ),
}

NO_PRICE_API: dict[str, str] = {
    "nebius": "Nebius prices come only from the authenticated gRPC billing calculator "
    "of its SDK, one estimate per preset",
    "paperspace": "Paperspace's API lists machine types and availability, not prices",
}


def import_hint(provider: str) -> str:
    """The line for a provider without a price API: why, and the way its prices come in."""
    return (
        f"no public price API ({NO_PRICE_API[provider]}); bring its prices in with "
        f"planner catalog import --from skypilot FILE --provider {provider}"
    )


@dataclass
class Refreshed:
    frame: Any  # the offers (a DataFrame in the shipped format)
    source: str  # the `# source:` line of the CSV written
    message: str  # the end of the `wrote N offers to OUT` line


def refresh_offers(
    provider: str, gpus: Mapping | None = None, regions: tuple[str, ...] = ()
) -> Refreshed:
    """Fetch `provider`'s current prices and read them into offers (one-line PlannerError on
    any failure: offline, HTTP, a missing credential)."""
    from planner.load import refresh

    if provider == "aws":
        return _aws(gpus, regions)
    if provider == "azure":
        from planner.load import refresh_azure

        frame = refresh_azure.azure_offers(refresh_azure.fetch_azure(), gpus)
        unknown = len(frame.attrs.get("unknown_instance_types", ()))
        return Refreshed(
            frame,
            "Azure Retail Prices API (prices.azure.com/api/retail/prices), "
            "Linux consumption and spot",
            f"; skipped {unknown} sizes the shipped catalog lacks",
        )
    module = importlib.import_module(f"planner.load.refresh_{provider}")
    answer = getattr(module, f"fetch_{provider}")()
    frame = getattr(module, f"{provider}_offers")(answer, gpus)
    api = PRICE_APIS[provider]
    return Refreshed(frame, api.api, refresh.summary(frame))


def _aws(gpus: Mapping | None, regions: tuple[str, ...]) -> Refreshed:
    import tempfile

    import pandas as pd

    from planner.load import refresh_aws
    from planner.load.offer_facts import load_shipped_offers

    regions = regions or ("us-east-1",)
    spot_prices = refresh_aws.aws_spot_prices(
        list(regions), sorted(set(load_shipped_offers("aws")["instance_type"]))
    )
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for region in regions:
            offer_file = refresh_aws.fetch_aws_offer_file(region, directory=Path(tmp))
            frames.append(
                refresh_aws.aws_offers(offer_file, gpus, spot_prices=spot_prices)
            )
    spot = (
        "; spot: EC2 spot price history"
        if spot_prices is not None
        else "; spot: kept the shipped prices (boto3 not installed or no AWS credentials)"
    )
    return Refreshed(
        pd.concat(frames, ignore_index=True),
        f"AWS EC2 price list offer files ({', '.join(regions)})",
        spot,
    )


# ---------------------------------------------------------------- writing what was fetched


def write_refresh(
    provider: str,
    output: Path,
    gpus: Mapping | None,
    regions: tuple[str, ...],
    as_of: str,
) -> str:
    """Fetch `provider`'s offers, check them as `catalog import` does and write `output`
    atomically (never over a shipped table the refresh reads); the `wrote ...` line."""
    from planner.errors import PlannerError
    from planner.files import check_target
    from planner.load.catalog import CATALOG_DIR, catalog_tables
    from planner.load.refresh import write_offers_csv

    check_target(
        output, (CATALOG_DIR / "offers" / f"{provider}.csv", *catalog_tables())
    )
    refreshed = refresh_offers(provider, gpus, regions)
    if refreshed.frame.empty:
        raise PlannerError(
            f"the {provider} price source returned no GPU offers the shipped catalog knows",
            provider,
        )
    write_offers_csv(refreshed.frame, output, refreshed.source, as_of)
    return f"wrote {len(refreshed.frame)} offers to {output}{refreshed.message}"


def refresh_all(
    folder: Path,
    gpus: Mapping | None,
    regions: tuple[str, ...] = (),
    as_of: str | None = None,
) -> Iterator[str]:
    """`catalog refresh all`: every shipped provider into FOLDER/<provider>.csv (the folder made
    if missing), one line each as it goes: what was written, or why not.  Ends with a one-line
    PlannerError when none was written."""
    from datetime import date

    from planner.errors import PlannerError
    from planner.load.catalog import shipped_catalog_names
    from planner.load.examples import make_folder

    as_of = as_of or date.today().isoformat()
    if folder.exists() and not folder.is_dir():
        raise PlannerError(
            "is not a folder; `catalog refresh all` writes one CSV per provider",
            str(folder),
        )
    make_folder(folder)
    written = 0
    for provider in sorted({*shipped_catalog_names(), *PRICE_APIS}):
        if provider not in PRICE_APIS:
            reason = (
                import_hint(provider) if provider in NO_PRICE_API else "no price API"
            )
            yield f"{provider}: not refreshed: {reason}"
            continue
        target = folder / f"{provider}.csv"
        try:
            _replaceable(target)
            line = write_refresh(provider, target, gpus, regions, as_of)
        except PlannerError as exc:
            yield f"{provider}: not refreshed: {exc}"
            continue
        written += 1
        yield f"{provider}: {line}"
    if not written:
        raise PlannerError(
            "no provider's prices were refreshed (see the lines above)", str(folder)
        )


def _replaceable(target: Path) -> None:
    """`all` replaces only what an earlier refresh wrote: any other file at FOLDER/<provider>.csv
    (a hand-made or imported catalog) is left as it is."""
    from planner.errors import PlannerError

    if not target.exists():
        return
    try:
        with open(target, encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096)
    except OSError as exc:
        raise PlannerError(
            f"cannot read it: {exc.strerror or exc}", str(target)
        ) from None
    if "# built_by: planner price refresh" not in head.split("\nprovider,")[0]:
        raise PlannerError(
            "exists and is not a `catalog refresh` output; not replaced "
            "(move it, or name another folder)",
            str(target),
        )
