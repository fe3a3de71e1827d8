"""AWS's prices: EC2's public price-list files (streamed, no account needed) and, with boto3
and credentials, the spot price history, read into offer rows.

Split from ``refresh`` so that each provider's price API, its filters and its quirks, sits in
a module of its own; the shared HTTP, joining to the shipped facts and writing stay there.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pandas as pd

from planner.errors import PlannerError
from planner.load import refresh
from planner.load.offer_facts import (
    join_tags,
    load_shipped_offers,
    missing,
    split_tags,
)
from planner.load.skypilot import clean_prices
from planner.schema.catalog import Gpu

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
    timeout: float = refresh.TIMEOUT_S,
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
    response = refresh.get(
        refresh.session(session), url, what, stream=True, timeout=timeout
    )
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
            f"download of {url} failed: {refresh.network_reason(exc)}"
        ) from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        refresh.close(response)
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
            f"not an AWS price-list JSON file: {refresh.one_line(exc)}",
            str(offer_file) if isinstance(offer_file, (str, Path)) else None,
        ) from None
    on_demand: dict[tuple[str, str], dict] = {}
    for sku, facts in products.items():
        usd = prices.get(sku, math.nan)
        key = (facts["region"], facts["instance_type"])
        if usd == usd and (key not in on_demand or usd < on_demand[key]["usd"]):
            on_demand[key] = {**facts, "usd": usd}
    # None: no spot source, keep the shipped spot prices
    from_api = spot_prices is not None
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
    return refresh.with_facts(
        pd.DataFrame(rows, columns=refresh.PRICE_COLUMNS), "aws", gpus, shipped
    )


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
                f"{refresh.one_line(exc)}"
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
