"""Refresh offer prices from the providers' public price lists (Azure, AWS).

Price lists say what an instance costs, not what it is: GPU model and count, vCPUs, RAM,
VRAM and the interconnect come from the shipped catalog (``planner.offer_facts``), so a
refreshed p5.48xlarge keeps its 8 x H100-SXM and EFA 3200 Gbit/s.  Sizes the shipped
catalog does not know are dropped and counted (``frame.attrs["unknown_instance_types"]``):
without their facts they could not be planned on.

Network access is only in the ``fetch_*`` functions (``requests``, imported lazily, or any
object with the same ``get``); the parsers take the recorded responses, so tests need no
network.  Every failure a user can meet is a one-line ``PlannerError``.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import pandas as pd

from planner.errors import PlannerError
from planner.files import write_atomic
from planner.load.catalog import OFFER_COLUMNS, offers_text_error
from planner.load.offer_facts import (
    join_tags,
    keep_known_facts,
    load_shipped_offers,
    missing,
    order_defaults,
    split_tags,
)
from planner.load.skypilot import (
    SPOT_PREEMPTION_DEFAULT,
    SPOT_PREEMPTION_FALLBACK,
    catalog_header,
    clean_prices,
)
from planner.schema.catalog import Gpu

TIMEOUT_S = 60.0
_PRICE_COLUMNS = [
    "provider",
    "region",
    "instance_type",
    "vcpus",
    "ram_gib",
    "on_demand_usd_h",
    "spot_usd_h",
    "defaults",
    "notes",
]

# ---------------------------------------------------------------- HTTP (requests or a look-alike)


def _session(session: Any) -> Any:
    if session is not None:
        return session
    try:
        import requests
    except ImportError:  # pragma: no cover - requests is a dependency
        raise PlannerError(
            "fetching prices needs the 'requests' package (pip install requests)"
        ) from None
    return requests.Session()


def _one_line(text: Any, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _network_reason(exc: BaseException) -> str:
    """The short cause of a connection failure ('[Errno 111] Connection refused', 'ReadTimeout')
    rather than requests' whole retry chain."""
    text = " ".join(str(exc).split())
    m = re.search(r"\[Errno [^\]]+\][^)\"'(]*", text)
    if m:
        return m.group(0).strip()
    return (
        f"{type(exc).__name__}: {_one_line(text, 100)}" if text else type(exc).__name__
    )


def _get(
    session: Any,
    url: str,
    what: str,
    *,
    params: dict | None = None,
    stream: bool = False,
    timeout: float = TIMEOUT_S,
) -> Any:
    """GET that turns "offline" and "the API said no" into one clear line each.

    requests' exceptions derive from OSError (IOError), as do the built-in connection errors.
    """
    kwargs: dict[str, Any] = {"timeout": timeout}
    if params is not None:
        kwargs["params"] = params
    if stream:
        kwargs["stream"] = True
    try:
        response = session.get(url, **kwargs)
    except OSError as exc:
        raise PlannerError(
            f"cannot reach {what} ({url.split('?')[0]}): {_network_reason(exc)}; "
            "check the network connection or proxy and retry"
        ) from None
    status = int(getattr(response, "status_code", 200))
    if status >= 400:
        detail = ""
        if not stream:
            detail = _one_line(getattr(response, "text", "") or "", 120)
        _close(response)
        raise PlannerError(
            f"{what} answered HTTP {status} for {url.split('?')[0]}"
            + (f": {detail}" if detail else "")
        )
    return response


def _close(response: Any) -> None:
    close = getattr(response, "close", None)
    if callable(close):
        close()


# ---------------------------------------------------------------- shared finishing


def _preemption_defaults(frame: pd.DataFrame, provider: str) -> pd.DataFrame:
    """Spot rows need a preemption rate (shipped one where known, else the provider default,
    listed in `defaults`); rows without spot have none."""
    default = SPOT_PREEMPTION_DEFAULT.get(provider, SPOT_PREEMPTION_FALLBACK)
    frame = frame.copy()
    has_spot = frame["spot_usd_h"].notna()
    need = has_spot & frame["spot_preemption_per_h"].isna()
    frame.loc[need, "spot_preemption_per_h"] = default
    frame.loc[need, "defaults"] = [
        order_defaults([*split_tags(d), "spot_preemption_per_h"])
        for d in frame.loc[need, "defaults"]
    ]
    frame.loc[~has_spot, "spot_preemption_per_h"] = math.nan
    frame.loc[~has_spot, "defaults"] = [
        order_defaults(t for t in split_tags(d) if t != "spot_preemption_per_h")
        for d in frame.loc[~has_spot, "defaults"]
    ]
    return frame


def _with_facts(
    prices: pd.DataFrame,
    provider: str,
    gpus: Mapping[str, Gpu] | None,
    shipped: pd.DataFrame | None,
) -> pd.DataFrame:
    """Prices + shipped facts -> offer rows.  Rows of sizes the shipped catalog lacks are
    dropped: attrs["unknown_instance_types"] names the sizes, attrs["dropped_rows"] counts rows."""
    if shipped is None:
        shipped = load_shipped_offers(provider)
    merged = keep_known_facts(prices, shipped)
    unmatched = set(merged.attrs.get("unmatched", []))
    keys = list(zip(merged["provider"], merged["region"], merged["instance_type"]))
    out = merged[[k not in unmatched for k in keys]].reindex(columns=OFFER_COLUMNS)
    out["defaults"] = out["defaults"].fillna("")
    out["notes"] = out["notes"].fillna("")
    if (
        gpus is not None
    ):  # a shipped row without VRAM: the GPU's marketed memory, marked as a default
        no_vram = out["gpu_vram_gib"].isna() & out["gpu"].isin(list(gpus))
        out.loc[no_vram, "gpu_vram_gib"] = [
            gpus[g].vram_gib for g in out.loc[no_vram, "gpu"]
        ]
        out.loc[no_vram, "defaults"] = [
            order_defaults([*split_tags(d), "gpu_vram_gib"])
            for d in out.loc[no_vram, "defaults"]
        ]
    if len(out):
        out = _preemption_defaults(out, provider)
    out = out[out["on_demand_usd_h"].notna() | out["spot_usd_h"].notna()]
    out = out.sort_values(["instance_type", "region"], kind="mergesort").reset_index(
        drop=True
    )
    out.attrs = {
        "unknown_instance_types": sorted({it for _, _, it in unmatched}),
        "dropped_rows": len(unmatched),
    }
    return out


# ---------------------------------------------------------------- Azure

AZURE_PRICES_URL = "https://prices.azure.com/api/retail/prices"
# OData filter of the Retail Prices API (values are case-sensitive): VM pay-as-you-go meters
# of the N-series (every Azure GPU size is Standard_N*).  Linux/Windows and spot/low priority
# share this price type; they are told apart by productName / skuName below.
AZURE_FILTER = (
    "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
    "and startswith(armSkuName, 'Standard_N')"
)


def fetch_azure(
    session: Any = None, max_pages: int = 200, timeout: float = TIMEOUT_S
) -> Iterator[dict]:
    """Pages of the Azure Retail Prices API for GPU VM consumption prices (no account needed).

    Follows ``NextPageLink`` (the API answers in pages of at most 1,000 items), and only to
    prices.azure.com.  Raises PlannerError (one line) when offline, on an HTTP error, on a
    non-JSON answer, or after ``max_pages`` pages (rather than silently truncating).
    """
    session = _session(session)
    url: str | None = AZURE_PRICES_URL
    params: dict | None = {"$filter": AZURE_FILTER}
    what = "the Azure Retail Prices API"
    for _ in range(max_pages):
        response = _get(session, url, what, params=params, timeout=timeout)
        try:
            page = response.json()
        except ValueError:
            raise PlannerError(
                f"{what} answered something that is not JSON ({url.split('?')[0]})"
            ) from None
        if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
            raise PlannerError(
                f"{what} answered JSON without an 'Items' list ({url.split('?')[0]})"
            )
        yield page
        url, params = page.get("NextPageLink"), None
        if not url:
            return
        link = urlsplit(str(url))
        if (
            link.scheme != "https" or link.hostname != "prices.azure.com"
        ):  # it may say ':443'
            raise PlannerError(
                f"{what} sent a next-page link off prices.azure.com; refusing it: {_one_line(url, 80)}"
            )
    raise PlannerError(
        f"{what} has more than {max_pages} pages for {AZURE_FILTER!r}; stopped (raise max_pages)"
    )


def _azure_family(sku: str) -> str:
    """`Standard_ND96asr_v4` -> `Standard_N`: Azure's size family letter (N = GPU sizes)."""
    m = re.match(r"Standard_[A-Za-z]", sku)
    return m.group(0) if m else sku


def _azure_kind(item: Mapping[str, Any]) -> str | None:
    """'on_demand', 'spot', or None for an item that is not a Linux pay-as-you-go hourly VM price."""
    if (
        item.get("serviceName") != "Virtual Machines"
        or item.get("type") != "Consumption"
    ):
        return None
    if (
        item.get("unitOfMeasure") != "1 Hour"
        or item.get("currencyCode", "USD") != "USD"
    ):
        return None
    if (
        item.get("isPrimaryMeterRegion") is False
        or float(item.get("tierMinimumUnits") or 0) > 0
    ):
        return None
    sku_name, meter = str(item.get("skuName", "")), str(item.get("meterName", ""))
    if (
        "Windows" in str(item.get("productName", ""))
        or "Low Priority" in sku_name
        or "Low Priority" in meter
    ):
        return None
    return "spot" if sku_name.endswith(" Spot") else "on_demand"


def azure_offers(
    pages: Iterable[dict],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Azure Retail Prices API pages -> offers (one row per region and size, shipped format).

    Keeps Linux consumption prices per hour of sizes in the shipped catalog's families
    (Standard_N*: NC, ND, NV...); Windows and Low Priority meters are skipped; a skuName ending
    " Spot" is the spot price.  Where a meter repeats, the latest effectiveStartDate wins
    (then the lower price).  Prices get the importer's rules (``clean_prices``: e.g. spot
    equal to on-demand is no spot).  GPU, counts, memory and links come from the shipped
    catalog; ``attrs["unknown_instance_types"]`` names the sizes of those families it lacks
    (dropped), ``attrs["dropped_rows"]`` counts their rows.
    """
    if shipped is None:
        shipped = load_shipped_offers("azure")
    families = {_azure_family(str(t)) for t in shipped["instance_type"]}
    best: dict[tuple[str, str, str], tuple[str, float]] = {}
    for page in pages:
        for item in page.get("Items") or []:
            sku = str(item.get("armSkuName") or "")
            kind = _azure_kind(item)
            if kind is None or _azure_family(sku) not in families:
                continue
            try:
                price = float(item.get("retailPrice", item.get("unitPrice")))
            except (TypeError, ValueError):
                continue
            key = (str(item.get("armRegionName")), sku, kind)
            start = str(item.get("effectiveStartDate") or "")
            old = best.get(key)
            if old is None or (start, -price) > (old[0], -old[1]):
                best[key] = (start, price)
    offers: dict[tuple[str, str], dict[str, float]] = {}
    for (region, sku, kind), (_, price) in best.items():
        offers.setdefault((region, sku), {})[kind] = price
    rows = []
    for (region, sku), found in sorted(offers.items()):
        od, spot, notes = clean_prices(
            found.get("on_demand", math.nan), found.get("spot", math.nan), "azure"
        )
        rows.append(
            {
                "provider": "azure",
                "region": region,
                "instance_type": sku,
                "vcpus": math.nan,
                "ram_gib": math.nan,
                "on_demand_usd_h": od,
                "spot_usd_h": spot,
                "defaults": "",
                "notes": join_tags(notes),
            }
        )
    return _with_facts(
        pd.DataFrame(rows, columns=_PRICE_COLUMNS), "azure", gpus, shipped
    )


# ---------------------------------------------------------------- AWS

AWS_OFFER_URL = "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/{region}/index.json"
_AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
# Product attributes of a plain pay-as-you-go Linux instance (capacitystatus Used excludes the
# $0 reservation rows; marketoption excludes Capacity Blocks, which share every other value).
AWS_PRODUCT_FILTER = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}
AWS_OPTIONAL_FILTER = {
    "licenseModel": "No License required",
    "marketoption": "OnDemand",
    "locationType": "AWS Region",
}


def fetch_aws_offer_file(
    region: str,
    session: Any = None,
    directory: Path | None = None,
    timeout: float = TIMEOUT_S,
    chunk_bytes: int = 1 << 20,
) -> Path:
    """Download AWS's public EC2 price-list file of one region to a temporary file; its path.

    The file is large (every EC2 product and term of the region: hundreds of MB for the big
    regions, us-east-1 the largest; not measured by this project), so it is streamed to disk
    in ``chunk_bytes`` pieces, never held in memory, and ``aws_offers`` reads it as a stream
    too.  The caller deletes the file (pass ``directory`` = a TemporaryDirectory to have it
    cleaned up).  No AWS account is needed.
    """
    if not _AWS_REGION.fullmatch(region):
        raise PlannerError(
            f"not an AWS region code: {region!r} (expected e.g. us-east-1)"
        )
    url = AWS_OFFER_URL.format(region=region)
    what = "the AWS price list"
    response = _get(_session(session), url, what, stream=True, timeout=timeout)
    handle = tempfile.NamedTemporaryFile(
        "wb", dir=directory, prefix=f"aws-ec2-{region}-", suffix=".json", delete=False
    )
    path = Path(handle.name)
    try:
        with handle:
            for chunk in response.iter_content(chunk_size=chunk_bytes):
                if chunk:
                    handle.write(chunk)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise PlannerError(
            f"download of {url} failed: {_network_reason(exc)}"
        ) from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        _close(response)
    return path


class _JsonStream:
    """Walk a large JSON document object by object (standard library only).

    Members of the objects one walks into are decoded one at a time with the C decoder
    (``raw_decode``), so memory holds one member (one product, one SKU's terms) plus a
    read buffer, however large the file.
    """

    _SPACE = re.compile(r"\s*")
    MAX_VALUE_CHARS = 1 << 26  # one member larger than 64 MiB: not a price-list file

    def __init__(self, handle: IO[str], chunk_chars: int = 1 << 20):
        self.handle, self.chunk, self.buf, self.pos, self.eof = (
            handle,
            chunk_chars,
            "",
            0,
            False,
        )
        self.base = 0  # characters dropped from the front of buf (for error offsets)
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        data = self.handle.read(self.chunk)
        self.base += self.pos
        self.buf, self.pos = self.buf[self.pos :] + data, 0
        self.eof = not data
        return bool(data)

    def _peek(self) -> str:
        while True:
            self.pos = self._SPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _expect(self, char: str) -> None:
        got = self._peek()
        if got != char:
            raise ValueError(
                f"expected {char!r} at offset ~{self.base + self.pos}, found {got or 'end of file'!r}"
            )
        self.pos += 1

    def value(self) -> Any:
        """Decode the next value (it must fit in memory: call it on members, not the root)."""
        self._peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if len(self.buf) - self.pos > self.MAX_VALUE_CHARS:
                    raise ValueError(
                        f"a JSON value near offset ~{self.base + self.pos} is larger than "
                        f"{self.MAX_VALUE_CHARS >> 20} MiB or malformed"
                    ) from None
                if self._more():
                    continue
                raise
            if end >= len(self.buf) and not self.eof and self._more():
                continue  # a number may go on in the next chunk: decode again with more text
            self.pos = end
            return value

    def members(self) -> Iterator[str]:
        """Keys of the object that starts here; after each key, the caller must consume its
        value (``value()``, ``members()`` or ``skip()``) before asking for the next key."""
        self._expect("{")
        if self._peek() == "}":
            self.pos += 1
            return
        while True:
            key = self.value()
            self._expect(":")
            yield key
            sep = self._peek()
            self.pos += 1
            if sep == "}":
                return
            if sep != ",":
                raise ValueError(
                    f"expected ',' or '}}' at offset ~{self.base + self.pos}"
                )

    def skip(self) -> None:
        """Consume a value; a large object is walked member by member, not decoded whole."""
        if self._peek() == "{":
            for _ in self.members():
                self.value()
        else:
            self.value()


def _aws_product(product: Mapping[str, Any], known: set[str]) -> dict | None:
    """A wanted product -> {region, instance_type, vcpus, ram_gib}; None otherwise."""
    attrs = product.get("attributes") or {}
    if (
        product.get("productFamily") != "Compute Instance"
        or attrs.get("instanceType") not in known
    ):
        return None
    if any(attrs.get(k) != v for k, v in AWS_PRODUCT_FILTER.items()):
        return None
    if any(k in attrs and attrs[k] != v for k, v in AWS_OPTIONAL_FILTER.items()):
        return None
    if not attrs.get("regionCode"):
        return None

    def number(text: Any) -> float:
        m = re.match(r"\s*([0-9][0-9,]*\.?[0-9]*)", str(text or ""))
        return float(m.group(1).replace(",", "")) if m else math.nan

    return {
        "region": attrs["regionCode"],
        "instance_type": attrs["instanceType"],
        "vcpus": number(attrs.get("vcpu")),
        "ram_gib": number(attrs.get("memory")),
    }


def _aws_hourly_usd(terms: Mapping[str, Any]) -> float:
    """Lowest positive USD per hour among one SKU's OnDemand terms (NaN if none)."""
    prices = []
    for term in (terms or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            if dim.get("unit") != "Hrs":
                continue
            try:
                usd = float((dim.get("pricePerUnit") or {}).get("USD"))
            except (TypeError, ValueError):
                continue
            if usd > 0:
                prices.append(usd)
    return min(prices) if prices else math.nan


def _read_aws_offer_file(
    handle: IO[str], known: set[str], chunk_chars: int
) -> tuple[dict, dict]:
    """(sku -> product facts, sku -> on-demand USD/h) of the wanted products, streaming."""
    stream = _JsonStream(handle, chunk_chars)
    products: dict[str, dict] = {}
    prices: dict[str, float] = {}
    products_done = False
    for key in stream.members():
        if key == "products":
            for sku in stream.members():
                wanted = _aws_product(stream.value(), known)
                if wanted:
                    products[sku] = wanted
            products_done = True
        elif key == "terms":
            for term_type in stream.members():
                if term_type != "OnDemand":
                    stream.skip()
                    continue
                for sku in stream.members():
                    terms = stream.value()
                    if products_done and sku not in products:
                        continue
                    usd = _aws_hourly_usd(terms)
                    if usd == usd:
                        prices[sku] = usd
        else:
            stream.skip()
    return products, prices


def aws_offers(
    offer_file: str | Path | IO[str],
    gpus: Mapping[str, Gpu] | None = None,
    spot_prices: pd.DataFrame | None = None,
    shipped: pd.DataFrame | None = None,
    chunk_chars: int = 1 << 20,
) -> pd.DataFrame:
    """AWS EC2 price-list file (JSON, read as a stream) -> offers in the shipped format.

    Keeps Linux, Shared tenancy, no pre-installed software, capacitystatus Used (and, where
    the file has them, licenseModel "No License required", marketoption OnDemand, locationType
    "AWS Region") products of instance types the shipped aws catalog knows, priced by their
    OnDemand "Hrs" dimension.  vCPUs and memory come from the file, GPU facts and links from
    the shipped catalog.  ``spot_prices`` (columns region, instance_type, spot_usd_h, e.g.
    from ``aws_spot_prices``) sets spot; without it the shipped spot price of the same region
    is kept and the row tagged ``spot_price_from_shipped_catalog``.
    """
    if shipped is None:
        shipped = load_shipped_offers("aws")
    known = {str(t) for t in shipped["instance_type"]}
    try:
        if isinstance(offer_file, (str, Path)):
            with open(offer_file, encoding="utf-8") as handle:
                products, prices = _read_aws_offer_file(handle, known, chunk_chars)
        else:
            products, prices = _read_aws_offer_file(offer_file, known, chunk_chars)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlannerError(
            f"not an AWS price-list JSON file: {_one_line(exc)}",
            str(offer_file) if isinstance(offer_file, (str, Path)) else None,
        ) from None
    on_demand: dict[tuple[str, str], dict] = {}
    for sku, facts in products.items():
        usd = prices.get(sku, math.nan)
        key = (facts["region"], facts["instance_type"])
        if usd == usd and (key not in on_demand or usd < on_demand[key]["usd"]):
            on_demand[key] = {**facts, "usd": usd}
    from_api = (
        spot_prices is not None
    )  # None: no spot source, keep the shipped spot prices
    spot_of = (
        {
            (r.region, r.instance_type): float(r.spot_usd_h)
            for r in spot_prices.itertuples()
        }
        if from_api
        else {}
    )
    shipped_rows = (
        {}
        if from_api
        else {(r["region"], r["instance_type"]): r for r in shipped.to_dict("records")}
    )
    spot_tags = {
        "spot_no_discount",
        "spot_price_floor",
        "spot_price_floor_unverifiable",
        "spot_zero",
    }
    rows = []
    for (region, it), facts in sorted(on_demand.items()):
        notes: list[str] = []
        spot = spot_of.get((region, it), math.nan)
        old = shipped_rows.get((region, it))
        if (
            old is not None
        ):  # the shipped spot price (blank or not) and the tags that explain a blank
            spot = (
                math.nan if missing(old.get("spot_usd_h")) else float(old["spot_usd_h"])
            )
            notes = [
                "spot_price_from_shipped_catalog",
                *(t for t in split_tags(old.get("notes")) if t in spot_tags),
            ]
        od, spot, price_notes = clean_prices(facts["usd"], spot, "aws")
        rows.append(
            {
                "provider": "aws",
                "region": region,
                "instance_type": it,
                "vcpus": facts["vcpus"],
                "ram_gib": facts["ram_gib"],
                "on_demand_usd_h": od,
                "spot_usd_h": spot,
                "defaults": "",
                "notes": join_tags([*notes, *price_notes]),
            }
        )
    return _with_facts(pd.DataFrame(rows, columns=_PRICE_COLUMNS), "aws", gpus, shipped)


def aws_spot_prices(
    regions: Iterable[str], instance_types: Iterable[str], session: Any = None
) -> pd.DataFrame | None:
    """Current Linux/UNIX spot prices from EC2 ``describe_spot_price_history`` (needs boto3
    and AWS credentials; the Spot API has no anonymous access).

    Returns a frame (region, instance_type, spot_usd_h = the lowest of the latest price of
    each availability zone, as the importer collapses zones), or None when boto3 is not
    installed or no credentials are configured: then the shipped spot prices are kept.
    ``session`` is a boto3 Session (or look-alike); API errors are a one-line PlannerError.
    """
    if session is None:
        try:
            import boto3
        except ImportError:
            return None
        session = boto3.session.Session()
    if session.get_credentials() is None:
        return None
    types = sorted(set(instance_types))
    rows = []
    for region in sorted(set(regions)):
        latest: dict[tuple[str, str], tuple[Any, float]] = {}
        try:
            client = session.client("ec2", region_name=region)
            pages = client.get_paginator("describe_spot_price_history").paginate(
                InstanceTypes=types,
                ProductDescriptions=["Linux/UNIX"],
                StartTime=datetime.now(UTC),
            )
            for page in pages:
                for item in page.get("SpotPriceHistory", []):
                    key = (item["InstanceType"], item["AvailabilityZone"])
                    if key not in latest or item["Timestamp"] > latest[key][0]:
                        latest[key] = (item["Timestamp"], float(item["SpotPrice"]))
        except (
            Exception
        ) as exc:  # botocore raises many types; all mean "no spot prices from here"
            raise PlannerError(
                f"EC2 spot price history for {region} failed: {type(exc).__name__}: "
                f"{_one_line(exc)}"
            ) from None
        per_type: dict[str, float] = {}
        for (it, _), (_, usd) in latest.items():
            if usd > 0:
                per_type[it] = min(usd, per_type.get(it, math.inf))
        rows += [
            {"region": region, "instance_type": it, "spot_usd_h": usd}
            for it, usd in sorted(per_type.items())
        ]
    return pd.DataFrame(rows, columns=["region", "instance_type", "spot_usd_h"])


# ---------------------------------------------------------------- writing


def _cell(value: Any) -> str:
    """The shipped number format: up to 12 significant digits, integral floats without '.0'."""
    if isinstance(value, (tuple, list)):
        return ";".join(str(v) for v in value)
    if missing(value):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) or hasattr(value, "item"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return str(value)
        return str(int(number)) if number.is_integer() else format(number, ".12g")
    return str(value)


def write_offers_csv(
    frame: pd.DataFrame, path: str | Path, source: str, as_of: str
) -> None:
    """Write offers in the shipped catalog format, atomically (temp file + os.replace), once what
    would be written loads as a catalog (`check_offers_csv`): a bad refresh never replaces a good file.

    ``as_of`` is the ISO date (YYYY-MM-DD) of the fetch; ``source`` names the API or file.
    Columns follow planner.load.catalog.OFFER_COLUMNS (missing ones blank), rows are sorted by
    instance type and region, as the shipped files are.
    """
    try:
        date.fromisoformat(as_of)
    except (TypeError, ValueError):
        raise PlannerError(
            f"as_of must be an ISO date YYYY-MM-DD, got {as_of!r}"
        ) from None
    if len(as_of) != 10:
        raise PlannerError(f"as_of must be an ISO date YYYY-MM-DD, got {as_of!r}")
    out = frame.reindex(columns=OFFER_COLUMNS)
    if len(out):
        out = out.sort_values(["instance_type", "region"], kind="mergesort")
    body = out.astype(object).map(_cell).to_csv(index=False, lineterminator="\n")
    text = (
        catalog_header(source=source, as_of=as_of, built_by="planner price refresh")
        + body
    )
    check_offers_csv(out, text, Path(path))
    write_atomic(Path(path), text)


def check_offers_csv(out: pd.DataFrame, text: str, path: Path) -> None:
    """`text` (the rows of `out`, in order) must load as an offers catalog, with the checks `catalog import`
    runs before it writes (`read_offers`: every row's fields and bounds, known GPUs and providers); else one
    line at `path`, which is left as it was, naming the offer the price source got wrong."""
    found = offers_text_error(text)
    if found:
        exc, index = found
        offer = (
            f" ({out.iloc[index]['instance_type']} in {out.iloc[index]['region']})"
            if index is not None and 0 <= index < len(out)
            else ""
        )
        raise PlannerError(
            f"not written, the refreshed offers do not load as a catalog: {exc.message}{offer}",
            str(path),
        )
